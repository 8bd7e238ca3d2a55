# SPDX-License-Identifier: Apache-2.0
"""Prompt text for the LLM roles: Jinja rendering in Haystack's sandbox, earlier turns and chunks within budgets."""

import functools
from collections.abc import Sequence
from typing import Any

from haystack.dataclasses import ChatMessage, ChatRole
from haystack.utils.jinja2_sandbox import HaystackSandboxedEnvironment

from haystack_agentic.llm.result_digests import preview
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


#: Most tokens of a conversation's earlier turns put before an answer role's prompt.
DEFAULT_HISTORY_BUDGET_TOKENS = 4000


def fit_turns(turns: Sequence[ChatMessage], budget_tokens: int, counter: TokenCounter) -> list[ChatMessage]:
    """
    The turns that fit `budget_tokens`, oldest left out first.

    The oldest user and assistant messages go first; system messages stay.
    Each message is counted once (linear in the number of turns).
    """
    sizes = [counter.count([message]) for message in turns]
    excess = sum(sizes) - budget_tokens
    kept = []
    for message, size in zip(turns, sizes, strict=True):
        if excess > 0 and message.role != ChatRole.SYSTEM:
            excess -= size
        else:
            kept.append(message)
    return kept


def role_messages(
    system_prompt: str | None, question: str, conversation: Sequence[ChatMessage], prompt: str, counter: TokenCounter
) -> list[ChatMessage]:
    """
    An LLM role's messages: system message, earlier turns within budget, then the prompt.

    They are a system message rendered from `system_prompt` (variable `question`) when given, the
    conversation's turns but its last within `DEFAULT_HISTORY_BUDGET_TOKENS`, then `prompt` as the user message.
    """
    system = [ChatMessage.from_system(render(system_prompt, question=question))] if system_prompt else []
    earlier = fit_turns(conversation[:-1], DEFAULT_HISTORY_BUDGET_TOKENS, counter)
    return [*system, *earlier, ChatMessage.from_user(prompt)]


def format_chunks(
    chunks: Sequence[Any],
    max_chars: int,
    budget_tokens: int | None = None,
    counter: TokenCounter | None = None,
    blocks: bool = False,
) -> str:
    """
    Chunks as a numbered list for a prompt, each cut to `max_chars` characters ('' for none).

    One line per chunk, `[n] (title) content`; with `blocks`, one block per chunk, a `[n] title` line then the
    content, blocks apart by a blank line (the layout of Haystack's RAG prompt examples).
    With `budget_tokens`, chunks (best first) are added while they fit (counted by `counter`, default `CONSERVATIVE`);
    a first chunk larger than the whole budget is cut to fit.
    """
    counter = counter or CONSERVATIVE
    joint = "\n\n" if blocks else "\n"
    lines: list[str] = []
    used = 0  # tokens of the lines so far, one more for each line break
    for number, doc in enumerate(chunks, start=1):
        title = (doc.meta or {}).get("title")
        heading = (f"{title}\n" if blocks else f"({title}) ") if title else ""
        line = f"[{number}] {heading}{preview(doc, max_chars)}"
        cost = (counter.count_text(line) + (len(joint) if lines else 0)) if budget_tokens is not None else 0
        if budget_tokens is not None and used + cost > budget_tokens:
            if not lines:
                cut = longest_prefix_within(line, lambda p: counter.count_text(p.rstrip() + _CUT) <= budget_tokens)
                if cut.strip():
                    lines.append(cut.rstrip() + _CUT)
            break
        lines.append(line)
        used += cost
    return joint.join(lines)


#: System prompt of the controller LLM in `tools` mode. Variables: `question`, `max_iterations`, `user_tools`.
DEFAULT_TOOLS_SYSTEM_PROMPT = """\
You answer questions from a document collection that you can only see by searching it.
Tools:
- search(query, top_k): find chunks about one thing. For a question with several hops, search the first fact,
  read the result, then search the entity it leads to (the bridge) for the next fact.
- answer(text, sources): give the final answer when the chunks found support it. Be short and specific. In
  sources, list the ids (id=...) of the chunks the answer rests on.
- give_up(reason?): say why, when the collection does not hold the answer after a few different searches.
- read_chunk(id): the full text of a chunk found earlier (older results are shortened to ids and titles).
{% if user_tools %}
Other tools: {{ user_tools | join(", ") }}.
{% endif %}
Use only facts from search results. You have at most {{ max_iterations }} turns; searches for independent facts can
go in one turn (several search calls), a search that needs an earlier result waits for it.
"""

#: Prompt of the controller LLM in `json` mode, sent fresh each turn. Variables: `question`, `chunks`,
#: `history`, `draft`, `iteration`, `max_iterations`, `refusal` (why the evidence check refused the last answer),
#: `collections` (name -> description of the collections in the run's scope, or None).
DEFAULT_JSON_PROMPT = """\
You decide the next step of a search for the answer to a question.
Question: {{ question }}
Turn {{ iteration }} of {{ max_iterations }}.
{% if history %}
Steps so far:
{% for step in history %}
- {{ step.action }}{% if step.query %}: "{{ step.query }}" ({{ step.returned_chunk_ids | length }} chunks){% endif %}\
{% if step.action == "invalid" and step.result %} ({{ step.result }}){% endif %}
{% endfor %}
{% endif %}
{% if chunks %}
Chunks found:
{{ chunks }}
{% else %}
No chunks found yet.
{% endif %}
{% if draft %}
Current draft answer: {{ draft }}
{% endif %}
{% if refusal %}
{{ refusal }}
{% endif %}
{% if collections %}
Collections you may search (add "collection": "<name>" to a search to search only that one; leave it out to search all):
{% for name, description in collections.items() %}
- {{ name }}{% if description %}: {{ description }}{% endif %}
{% endfor %}
{% endif %}
Reply with one JSON object and nothing else, with these keys:
- "action": "search" to look something up, "reflect" to check the draft, or "generate" when the chunks answer the
  question;
- "query": for a search, a few words naming the one fact or entity to look up next, taken from the question or the
  chunks (not a sentence about searching); otherwise "";
- "reasoning": one short sentence on why.
"""
