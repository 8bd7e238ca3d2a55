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
    """
    Render a Jinja prompt template in Haystack's sandboxed environment.

    :param template: The template text.
    :param variables: The template's variables.
    :returns: The rendered text, stripped.
    """
    return _compiled(template).render(**variables).strip()


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> Any:
    # Compiling a template costs ~1 ms; prompts are a handful of fixed strings, so each is compiled once.
    return _ENV.from_string(template)


def with_system_prompt(template: str | None, question: str, messages: list[ChatMessage]) -> list[ChatMessage]:
    """
    Put a rendered system message before `messages` when a template is given.

    :param template: A Jinja template (variable `question`) or `None`.
    :param question: The run's question.
    :param messages: The prompt messages.
    :returns: The messages, with the system message first when there is one.
    """
    if not template:
        return messages
    return [ChatMessage.from_system(render(template, question=question)), *messages]


#: Most tokens of a conversation's earlier turns put before a prompt (an answer role's, or json mode's).
DEFAULT_HISTORY_BUDGET_TOKENS = 4000


def fit_turns(
    turns: Sequence[ChatMessage], budget_tokens: int, counter: TokenCounter | None = None
) -> list[ChatMessage]:
    """
    The turns of a conversation that fit a token budget: the oldest user and assistant messages are left out first;
    system messages always stay.

    :param turns: The messages, oldest first.
    :param budget_tokens: Most tokens they may take (counted by `counter`, default the conservative estimate).
    :param counter: How tokens are counted.
    :returns: The messages kept, in order.
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
    Put the earlier turns of a conversation before a prompt: every message but the last (the user's question,
    which the prompt itself holds), system messages included, the oldest left out beyond `budget_tokens`
    (`fit_turns`).

    :param conversation: The run's conversation (`LoopState.conversation`; empty when the run started from `query`).
    :param messages: The prompt messages.
    :param budget_tokens: Most tokens of the earlier turns. Default `DEFAULT_HISTORY_BUDGET_TOKENS` (4000).
    :param counter: How tokens are counted (default: the conservative estimate).
    :returns: The earlier turns, then `messages`.
    """
    return [*fit_turns(conversation[:-1], budget_tokens, counter), *messages]


def format_chunks(
    chunks: Sequence[Any], max_chars: int, budget_tokens: int | None = None, counter: TokenCounter | None = None
) -> str:
    """
    Render chunks as a numbered list for a prompt: `[n] (title) content`, each cut to `max_chars` characters.

    With `budget_tokens`, chunks are added best first while the text stays within the budget, counted by `counter`
    (the model's tokenizer when known, see `token_counter_for`; else a conservative estimate that does not
    undercount CJK text); the lowest-ranked chunks are left out first, and a first chunk larger than the whole
    budget is cut to fit.

    :param chunks: Documents, best first.
    :param max_chars: Most characters of each chunk's content.
    :param budget_tokens: Most tokens of the whole text, or `None` for no limit.
    :param counter: How tokens are counted (default: `CONSERVATIVE`).
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
