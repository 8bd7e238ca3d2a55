# SPDX-License-Identifier: Apache-2.0
"""The prompt and reply parser of `EvidenceChecker`'s LLM judge (whether the chunks can answer the question)."""

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
