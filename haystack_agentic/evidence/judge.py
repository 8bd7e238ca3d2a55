# SPDX-License-Identifier: Apache-2.0
"""The prompt and reply parser of `EvidenceChecker`'s LLM judge (whether the chunks can answer the question)."""

import json
import re
from typing import Any

from haystack_agentic.llm.valid_text import valid_value

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

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", flags=re.DOTALL | re.IGNORECASE)
_TRUE = {"true", "yes", "sufficient", "supported", "1"}
_FALSE = {"false", "no", "insufficient", "unsupported", "0"}


def parse_verdict(text: str) -> dict[str, Any] | None:
    """
    The judge's verdict in its reply (a JSON object, fenced or in prose; `true`/`"yes"` verdicts).

    :returns: `{"sufficient": bool, "missing": str, "reason": str}`, or `None` without a recognisable verdict.
    """
    if not text:
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for start in (m.start() for m in re.finditer(r"\{", candidate)):
            try:
                value, _ = decoder.raw_decode(candidate[start:])
            except json.JSONDecodeError:
                continue
            value = valid_value(value)  # a "\ud800" escape decodes to a lone surrogate
            if not isinstance(value, dict) or "sufficient" not in value:
                continue
            verdict = value["sufficient"]
            if isinstance(verdict, str):
                word = verdict.strip().lower()
                verdict = True if word in _TRUE else False if word in _FALSE else None
            if not isinstance(verdict, bool):
                continue
            return {
                "sufficient": verdict,
                "missing": str(value.get("missing") or "").strip(),
                "reason": str(value.get("reason") or "").strip(),
            }
    return None
