# SPDX-License-Identifier: Apache-2.0
"""
What the controller LLM is sent of earlier tool results (tools mode): short digests, and chunks referenced by id.

A search result is rendered twice when it is recorded (`LoopController`): in full (numbered chunks, their text) as
the tool message's text, and as a digest (one line per chunk: its short id, title and first words) kept in the
message's `meta[DIGEST_META_KEY]`. `LoopState.messages` keeps the full text; what the router SENDS replaces every
tool result older than the latest reply by its digest (`digest_older_results`), so a turn's prompt grows by a few
tokens per earlier chunk rather than by the chunks themselves. A chunk already shown in an earlier result is
referenced there (`[already shown]`), not sent again. The model reads any chunk the run holds in full again with
the `read_chunk(id)` tool (`read_chunk_text`).
"""

import re
from collections.abc import Iterable, Sequence
from typing import Any

from haystack import Document
from haystack.dataclasses import ChatMessage, ChatRole

from haystack_agentic.llm.identity_memo import IdentityMemo

#: `meta` key of a tool message holding the digest the model is sent once a newer reply follows it.
DIGEST_META_KEY = "digest"
#: Characters of a hash-like chunk id shown to the model (Haystack's default ids are 64-character SHA-256 hashes);
#: `read_chunk` takes any unique prefix, this one included.
SHORT_ID_CHARS = 12
#: Ids shortened: hexadecimal (dashes allowed, as in UUIDs), at least 32 characters. Other ids (`film-2014-part-1`,
#: `wiki_Big_Stone_Gap_0`) are shown whole: their starts are often shared.
_HASH_LIKE = re.compile(r"[0-9a-fA-F-]{32,}")
#: Characters of a chunk's text in its digest line.
DIGEST_LINE_CHARS = 60
#: Characters of a title in a digest line.
DIGEST_TITLE_CHARS = 60


def short_id(doc_id: str) -> str:
    """
    The chunk id shown to the model: a hash-like id's first `SHORT_ID_CHARS` characters, any other id whole.

    :param doc_id: The document id.
    :returns: The short id.
    """
    return doc_id[:SHORT_ID_CHARS] if _HASH_LIKE.fullmatch(doc_id) else doc_id


def numbered_chunks(heading: str, documents: Sequence[Document], preview_chars: int, shown: Iterable[str] = ()) -> str:
    """
    Chunks as the model reads them in a tool result: a heading line, then per chunk `[n] id=<short id> title=...` and
    its text cut at `preview_chars` (`[...]` marks the cut); a chunk in `shown` is referenced, `[already shown]`.

    :param heading: The first line, e.g. `3 result(s) for "query":`.
    :param documents: The chunks, in the order the model sees them.
    :param preview_chars: Most characters of each chunk's text.
    :param shown: Ids of the chunks an earlier result already showed. Default: none.
    :returns: The text.
    """
    shown = set(shown)
    lines = [heading]
    for number, doc in enumerate(documents, start=1):
        title = (doc.meta or {}).get("title")
        content = (doc.content or "").strip()
        if len(content) > preview_chars:
            content = content[:preview_chars].rstrip() + " [...]"
        header = f"[{number}] id={short_id(doc.id)}" + (f" title={title}" if title else "")
        lines.append(f"{header} [already shown]" if doc.id in shown else f"{header}\n{content}")
    return "\n\n".join(lines)


def first_words(doc: Document, limit: int = DIGEST_LINE_CHARS) -> str:
    """
    The start of a chunk's text on one line, without its title when the text starts with it.

    :param doc: The chunk.
    :param limit: Most characters.
    :returns: The line ('' for no text), ending in "..." when cut.
    """
    text = " ".join((doc.content or "").split())
    title = str((doc.meta or {}).get("title") or "")
    if title and text.startswith(title):
        text = text[len(title) :].lstrip(" :-")
    return text if len(text) <= limit else text[:limit].rstrip() + "..."


def search_digest(query: str, documents: Sequence[Document], shown: Iterable[str] = ()) -> str:
    """
    The digest of a search result: one line per chunk (short id, title, first words; only the ids of chunks shown
    before).

    :param query: The query searched.
    :param documents: The chunks it returned, best first.
    :param shown: Ids of chunks shown in earlier results.
    :returns: The digest text.
    """
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
    """
    A tool message carrying the digest to send in its place once a newer reply follows it.

    :param message: A tool message.
    :param digest: Its digest.
    :returns: The message with `meta[DIGEST_META_KEY]` set.
    """
    result = message.tool_call_result
    meta = {**(message.meta or {}), DIGEST_META_KEY: digest}
    return ChatMessage.from_tool(tool_result=result.result, origin=result.origin, error=result.error, meta=meta)


def digest_older_results(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """
    The conversation to send: every tool result that carries a digest and comes before the latest assistant
    message is replaced by its digest (the same tool call id, so each tool call keeps its one answer). The latest
    reply's results stay whole; other messages are unchanged. The input is not modified.

    :param messages: The controller conversation (`LoopState.messages`).
    :returns: The messages to send.
    """
    last_reply = max((i for i, m in enumerate(messages) if m.role == ChatRole.ASSISTANT), default=-1)
    sent = list(messages)
    for index in range(last_reply):
        sent[index] = _DIGESTED.get(sent[index], _digested) or sent[index]
    return sent


#: Each tool message's digested form, made once (the same message is sent digested every later turn).
_DIGESTED: "IdentityMemo[ChatMessage | None]" = IdentityMemo()


def _digested(message: ChatMessage) -> ChatMessage | None:
    """The message to send in place of `message` if it is a tool result that carries a digest, else `None`."""
    digest = (message.meta or {}).get(DIGEST_META_KEY)
    if message.tool_call_result is not None and isinstance(digest, str):
        result = message.tool_call_result
        return ChatMessage.from_tool(tool_result=digest, origin=result.origin, error=result.error)
    return None  # not the message itself: the memo would then keep it alive


def shown_chunk_ids(tool_history: Iterable[Any]) -> set[str]:
    """
    Ids of the chunks the model has been shown in full: those of the run's searches so far.

    :param tool_history: The run's `ToolStep`s.
    :returns: The ids.
    """
    return {doc_id for step in tool_history if step.action == "search" for doc_id in step.returned_chunk_ids}


def find_chunk(chunks: Sequence[Document], chunk_id: str) -> tuple[Document | None, str | None]:
    """
    The chunk a `read_chunk` call names: by its id, or a unique prefix of it (the short id).

    :param chunks: The run's chunks (`LoopState.chunks`).
    :param chunk_id: The id the model gave.
    :returns: `(chunk, None)`, or `(None, why not)`.
    """
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
    """
    The text a `read_chunk` call returns: the chunk's id, title and text (cut at `max_chars`).

    :param doc: The chunk.
    :param max_chars: Most characters of its text.
    :returns: The tool result text.
    """
    title = (doc.meta or {}).get("title")
    content = (doc.content or "").strip()
    if len(content) > max_chars:
        content = content[:max_chars].rstrip() + " [...]"
    return f"id={short_id(doc.id)}" + (f" title={title}" if title else "") + f"\n{content}"
