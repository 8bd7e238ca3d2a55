# SPDX-License-Identifier: Apache-2.0
"""
Prompt text for the LLM roles: Jinja rendering in Haystack's sandbox, the optional system message, and chunks
formatted as a numbered list within a token budget.
"""

import functools
from collections.abc import Sequence
from typing import Any

from haystack.dataclasses import ChatMessage, ChatRole
from haystack.utils.jinja2_sandbox import HaystackSandboxedEnvironment

from haystack_agentic.llm.tokens import CONSERVATIVE, TokenCounter, longest_prefix_within

_ENV = HaystackSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
#: Marks text cut short.
_CUT = " [...]"


def render(template: str, **variables: Any) -> str:
    """Render a Jinja prompt template in Haystack's sandboxed environment; the text is stripped."""
    return _compiled(template).render(**variables).strip()


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> Any:
    return _ENV.from_string(template)


def with_system_prompt(template: str | None, question: str, messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` after a system message rendered from `template` (variable `question`), when one is given."""
    if not template:
        return messages
    return [ChatMessage.from_system(render(template, question=question)), *messages]


#: Most tokens of a conversation's earlier turns put before a prompt (an answer role's, or json mode's).
DEFAULT_HISTORY_BUDGET_TOKENS = 4000


def fit_turns(
    turns: Sequence[ChatMessage], budget_tokens: int, counter: TokenCounter | None = None
) -> list[ChatMessage]:
    """
    The turns (oldest first) that fit `budget_tokens`: the oldest user and assistant messages are left out first;
    system messages always stay. `counter` defaults to the conservative estimate.
    """
    counter = counter or CONSERVATIVE
    kept = list(turns)
    while kept and counter.count(kept) > budget_tokens:
        oldest = next((i for i, m in enumerate(kept) if m.role != ChatRole.SYSTEM), None)
        if oldest is None:
            break
        del kept[oldest]
    return kept


def with_earlier_turns(
    conversation: Sequence[ChatMessage],
    messages: list[ChatMessage],
    budget_tokens: int = DEFAULT_HISTORY_BUDGET_TOKENS,
    counter: TokenCounter | None = None,
) -> list[ChatMessage]:
    """
    The earlier turns of `conversation` (all but its last message, the question the prompt holds), fitted to
    `budget_tokens` by `fit_turns`, then `messages`.
    """
    return [*fit_turns(conversation[:-1], budget_tokens, counter), *messages]


def role_messages(
    system_prompt: str | None, question: str, conversation: Sequence[ChatMessage], prompt: str, counter: TokenCounter
) -> list[ChatMessage]:
    """
    An LLM role's messages: the system message (`with_system_prompt`), the conversation's earlier turns
    (`with_earlier_turns`, tokens counted with `counter`), then `prompt` as the user message.
    """
    messages = with_earlier_turns(conversation, [ChatMessage.from_user(prompt)], counter=counter)
    return with_system_prompt(system_prompt, question, messages)


def format_chunks(
    chunks: Sequence[Any], max_chars: int, budget_tokens: int | None = None, counter: TokenCounter | None = None
) -> str:
    """
    Render chunks as a numbered list for a prompt: `[n] (title) content`, each cut to `max_chars` characters.

    With `budget_tokens`, chunks (best first) are added while the text fits, counted by `counter` (default
    `CONSERVATIVE`); a first chunk larger than the whole budget is cut to fit.

    :returns: The text ('' when there are no chunks).
    """
    counter = counter or CONSERVATIVE
    lines: list[str] = []
    used = 0  # tokens of the lines so far, one more for each line break
    for number, doc in enumerate(chunks, start=1):
        content = (doc.content or "").strip()
        if len(content) > max_chars:
            content = content[:max_chars].rstrip() + _CUT
        title = (doc.meta or {}).get("title")
        line = f"[{number}] " + (f"({title}) " if title else "") + content
        cost = (counter.count_text(line) + (1 if lines else 0)) if budget_tokens is not None else 0
        if budget_tokens is not None and used + cost > budget_tokens:
            if not lines:
                cut = longest_prefix_within(line, lambda p: counter.count_text(p.rstrip() + _CUT) <= budget_tokens)
                if cut.strip():
                    lines.append(cut.rstrip() + _CUT)
            break
        lines.append(line)
        used += cost
    return "\n".join(lines)
