# SPDX-License-Identifier: Apache-2.0
"""The prompt and reply parser of `EvidenceChecker`'s LLM judge (whether the chunks can answer the question)."""

import re
from typing import Any

from haystack_agentic.llm.valid_text import json_objects

#: The judge prompt. Variables: `question`, `chunks` (list of str, numbered from 1).
DEFAULT_EVIDENCE_PROMPT = """\
You check whether documents contain the information needed to answer a question. Do not answer it.

Documents:
{% for chunk in chunks %}
[{{ loop.index }}] {{ chunk }}
{% endfor %}

Question: {{ question }}

Do the documents together state the facts needed to answer the question (every hop of it)? Topic overlap is not
enough: the answer itself must follow from them. Reply with one JSON object and nothing else:
{"sufficient": true or false, "missing": "<what the documents do not say, or empty>", "reason": "<one sentence>"}"""

#: How a reason says the documents do NOT give the answer (a "sufficient" verdict with one contradicts itself; an
#: "insufficient" verdict with nothing missing and a reason that says they do, without this, contradicts itself).
#: A negation counts only where it denies what the documents say: before a verb of saying or answering ("do not
#: state", "does not explicitly mention", "neither document gives", "cannot be determined"), with at most
#: `_DENIAL_GAP` words between them that are adverbs or name the documents. A negation inside the content ("he
#: never married", "neither parent") says nothing about the documents. Some phrases deny on their own ("no
#: information", "not enough", "insufficient", "unclear").
_NEGATION = r"(?:\w+n[’']t|not|never|no|none|neither|nor|cannot|without)"
_REPORTING = (
    r"(?:stat|mention|say|said|contain|giv|gave|provid|specif|includ|indicat|answer|determin|establish|confirm|show|"
    r"tell|told|reveal|know|identif|list|suppl|disclos|describ)\w*"
)
_GAP_WORD = (
    r"(?:\w+ly|be|been|being|is|are|was|were|do|does|did|the|any|of|it|its|they|them|these|those|this|that|"
    r"documents?|passages?|texts?|contexts?|chunks?|sources?|paragraphs?|articles?|pages?|information)"
)
_DENIAL_GAP = 3
_SAYS_NOT_THERE = re.compile(
    rf"\b{_NEGATION}(?:\s+{_GAP_WORD}){{0,{_DENIAL_GAP}}}\s+{_REPORTING}\b"
    r"|\b(?:no (?:information|mention|evidence|data|details?|answer)|not (?:enough|sufficient)|insufficient|unclear|"
    r"lacks? (?:any |the )?(?:information|details?|evidence|mention))\b",
    re.IGNORECASE,
)
_SAYS_THERE = re.compile(r"\b(?:states?|mentions?|says|contains?|gives?|provides?|shows?|answers?)\b", re.IGNORECASE)

#: What a judge writes in `missing` when nothing is missing.
_NOTHING = frozenset({"", "none", "nothing", "n/a", "na", "-", "null", "empty", "no"})

_TRUE = {"true", "yes", "sufficient", "supported", "1"}
_FALSE = {"false", "no", "insufficient", "unsupported", "0"}


def parse_verdict(text: str) -> dict[str, Any] | None:
    """
    The judge's verdict in its reply (a JSON object, fenced or in prose; `true`/`"yes"` verdicts).

    :returns: `{"sufficient": bool, "missing": str, "reason": str}`, or `None` without a recognisable verdict.
    """
    for value in json_objects(text):
        if "sufficient" not in value:
            continue
        verdict = value["sufficient"]
        if isinstance(verdict, str):
            word = verdict.strip().lower()
            verdict = True if word in _TRUE else False if word in _FALSE else None
        if not isinstance(verdict, bool):
            continue
        return {"sufficient": verdict, "missing": _text(value.get("missing")), "reason": _text(value.get("reason"))}
    return None


#: Most characters kept of the verdict's `missing` and `reason`.
_TEXT_CHARS = 500


def _text(value: Any) -> str:
    """A verdict field as text: a string as it is, any other value (a number, a list) '' (not a reason)."""
    return value.strip()[:_TEXT_CHARS] if isinstance(value, str) else ""


def contradicts_itself(verdict: dict[str, Any]) -> bool:
    """
    Whether a parsed verdict's words contradict its `sufficient` flag.

    Whether a parsed verdict's words contradict its `sufficient` flag: "sufficient" while its reason or `missing`
    says the documents do not give the answer, or "insufficient" with nothing missing and a reason that says they do.

    :param verdict: `parse_verdict`'s dict.
    """
    reason = verdict.get("reason") or ""
    missing = "" if (verdict.get("missing") or "").strip(" .").lower() in _NOTHING else verdict.get("missing")
    if verdict.get("sufficient"):
        return bool(missing) or bool(_SAYS_NOT_THERE.search(reason))
    return not missing and bool(_SAYS_THERE.search(reason)) and not _SAYS_NOT_THERE.search(reason)
