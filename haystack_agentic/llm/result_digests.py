# SPDX-License-Identifier: Apache-2.0
"""
Earlier tool results sent to the controller LLM as digests, one line per chunk.

Earlier tool results sent to the controller LLM (tools mode) as digests, one line per chunk (held in each tool
message's `meta[DIGEST_META_KEY]`); the model reads a chunk again with `read_chunk(id)`.
"""

import re
from collections.abc import Iterable, Sequence
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage, ChatRole

from haystack_agentic.llm.tokens import IdentityMemo

#: `meta` key of a tool message holding the digest the model is sent once a newer reply follows it.
DIGEST_META_KEY = "digest"
#: Characters of a hash-like chunk id shown to the model; `read_chunk` takes any unique prefix.
SHORT_ID_CHARS = 12
#: Ids shortened: hexadecimal (dashes allowed), at least 32 characters; other ids are shown whole.
_HASH_LIKE = re.compile(r"[0-9a-fA-F-]{32,}")
#: Characters of a chunk's text, and of its title, in its digest line.
DIGEST_LINE_CHARS = 60
DIGEST_TITLE_CHARS = 60


def short_id(doc_id: str) -> str:
    """The chunk id shown to the model: a hash-like id's first `SHORT_ID_CHARS` characters, any other id whole."""
    return doc_id[:SHORT_ID_CHARS] if _HASH_LIKE.fullmatch(doc_id) else doc_id


def numbered_chunks(heading: str, documents: Sequence[Document], preview_chars: int, shown: Iterable[str] = ()) -> str:
    """
    Format a tool result's chunks as a numbered list with short ids and previews.

    A tool result's chunks: `heading`, then per chunk `[n] id=<short id> title=...` and its text cut at
    `preview_chars` (`[already shown]` instead for an id in `shown`).
    """
    shown = set(shown)
    lines = [heading]
    for number, doc in enumerate(documents, start=1):
        title = (doc.meta or {}).get("title")
        content = preview(doc, preview_chars)
        header = f"[{number}] id={short_id(doc.id)}" + (f" title={title}" if title else "")
        lines.append(f"{header} [already shown]" if doc.id in shown else f"{header}\n{content}")
    return "\n\n".join(lines)


def first_words(doc: Document, limit: int = DIGEST_LINE_CHARS) -> str:
    """The start of a chunk's text on one line (at most `limit` characters, "..." when cut), without its title."""
    text = " ".join((doc.content or "").split())
    title = str((doc.meta or {}).get("title") or "")
    if title and text.startswith(title):
        text = text[len(title) :].lstrip(" :-")
    return text if len(text) <= limit else text[:limit].rstrip() + "..."


def search_digest(query: str, documents: Sequence[Document], shown: Iterable[str] = ()) -> str:
    """The digest of a search result: one line per chunk (short id, title, first words unless in `shown`)."""
    if not documents:
        return f'Earlier search "{query}": no results.'
    seen = set(shown)
    lines = [f'Earlier search "{query}" ({len(documents)} result(s); read_chunk(id) shows one in full):']
    for doc in documents:
        title = str((doc.meta or {}).get("title") or "")[:DIGEST_TITLE_CHARS]
        head = f"- id={short_id(doc.id)}" + (f" title={title}" if title else "")
        lines.append(head + (" [shown earlier]" if doc.id in seen else f": {first_words(doc)}"))
    return "\n".join(lines)


def with_digest(message: ChatMessage, digest: str) -> ChatMessage:
    """A copy of the tool message with `meta[DIGEST_META_KEY]` set to `digest`."""
    result = message.tool_call_result
    meta = {**(message.meta or {}), DIGEST_META_KEY: digest}
    return ChatMessage.from_tool(tool_result=result.result, origin=result.origin, error=result.error, meta=meta)


def digest_older_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages with every tool result that has a digest, before the latest assistant message, as its digest."""
    last_reply = max((i for i, m in enumerate(messages) if m.role == ChatRole.ASSISTANT), default=-1)
    sent = list(messages)
    for index in range(last_reply):
        sent[index] = _DIGESTED.get(sent[index], _digested) or sent[index]
    return sent


_DIGESTED: "IdentityMemo[ChatMessage | None]" = IdentityMemo()


def _digested(message: ChatMessage) -> ChatMessage | None:
    """The digest message to send in place of a tool result that carries one, else `None`."""
    digest = (message.meta or {}).get(DIGEST_META_KEY)
    if message.tool_call_result is not None and isinstance(digest, str):
        result = message.tool_call_result
        return ChatMessage.from_tool(tool_result=digest, origin=result.origin, error=result.error)
    return None  # not the message itself: the memo would then keep it alive


def shown_chunk_ids(tool_history: Iterable[Any]) -> set[str]:
    """Ids of the chunks the model has been shown in full: those of the searches in the run's `ToolStep`s."""
    return {doc_id for step in tool_history if step.action == "search" for doc_id in step.returned_chunk_ids}


def find_chunk(chunks: Sequence[Document], chunk_id: str) -> tuple[Document | None, str | None]:
    """The chunk a `read_chunk` call names, by its id or a unique prefix: `(chunk, None)`, or `(None, why not)`."""
    wanted = chunk_id.strip().removeprefix("id=")
    exact = [doc for doc in chunks if doc.id == wanted]
    matches = exact or [doc for doc in chunks if wanted and doc.id.startswith(wanted)]
    if len(matches) == 1:
        return matches[0], None
    if matches:
        return None, f"'{wanted}' is the start of {len(matches)} chunk ids; give more of the id"
    return None, (
        f"no chunk with id '{wanted}' is held (it may have been dropped to keep the run's chunk budget); "
        "search again with words from its title"
    )


def read_chunk_text(doc: Document, max_chars: int) -> str:
    """The text a `read_chunk` call returns: the chunk's id, title and text (cut at `max_chars`)."""
    title = (doc.meta or {}).get("title")
    return f"id={short_id(doc.id)}" + (f" title={title}" if title else "") + f"\n{preview(doc, max_chars)}"


def preview(doc: Document, max_chars: int) -> str:
    """The chunk's text, stripped, cut at `max_chars` with " [...]"."""
    content = (doc.content or "").strip()
    return content[:max_chars].rstrip() + " [...]" if len(content) > max_chars else content
