# SPDX-License-Identifier: Apache-2.0
"""
Load HotpotQA-style multi-hop QA files (HotpotQA, MuSiQue) as questions and Haystack Documents.

Both files share one JSONL schema: `{"id", "question", "answer", "supporting_facts", "context", ...}`
where `context` is `[[title, [sentence, ...]], ...]`. The paragraphs of all questions together
form a small Wikipedia corpus for multi-hop retrieval; `hotpotqa_documents` turns them into
deduplicated `Document`s with stable ids, so re-indexing the same file gives the same ids.

Usage example:
```python
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack_agentic.datasets.hotpotqa import hotpotqa_documents, load_hotpotqa_questions

rows = load_hotpotqa_questions("examples/data/hotpotqa_dev_sample.jsonl")
store = InMemoryDocumentStore()
store.write_documents(hotpotqa_documents(rows))
print(rows[0]["question"], store.count_documents())
```
"""

import hashlib
import json
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from haystack import Document, logging

logger = logging.getLogger(__name__)

REQUIRED_FIELDS = ("id", "question", "answer", "supporting_facts", "context")

DedupeMode = Literal["title", "title_text"]


def load_hotpotqa_questions(path: str | PathLike) -> list[dict[str, Any]]:
    """
    Read a HotpotQA-style JSONL file (one question per line).

    Blank lines are skipped. Each row must be a JSON object with the fields
    `id`, `question`, `answer`, `supporting_facts` and `context`; `context` must be a list of
    `[title, [sentence, ...]]` pairs.

    :param path: Path of the JSONL file (UTF-8).
    :returns: The rows, in file order, as dicts (unchanged).
    :raises FileNotFoundError: If the file does not exist.
    :raises ValueError: If a line is not valid JSON, not an object, lacks a required field, or has
        a malformed `context`; the message names the file and the 1-based line number.
    """
    path = Path(path)
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{line_no}: invalid JSON ({e.msg} at column {e.colno}).") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}.")
            missing = [field for field in REQUIRED_FIELDS if field not in row]
            if missing:
                raise ValueError(
                    f"{path}:{line_no}: missing field(s) {', '.join(missing)}; "
                    f"a HotpotQA row needs {', '.join(REQUIRED_FIELDS)}."
                )
            problem = _context_problem(row["context"])
            if problem:
                raise ValueError(f"{path}:{line_no}: malformed 'context': {problem}.")
            rows.append(row)
    return rows


def _context_problem(context: Any) -> str | None:
    """Return why `context` is not a list of `[title, [sentence, ...]]` pairs, or None if it is."""
    if not isinstance(context, list):
        return f"expected a list, got {type(context).__name__}"
    for i, item in enumerate(context):
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            return f"item {i} is not a [title, sentences] pair"
        title, sentences = item
        if not isinstance(title, str):
            return f"item {i} has a non-string title"
        if not (isinstance(sentences, list) and all(isinstance(s, str) for s in sentences)):
            return f"item {i} ({title!r}) has sentences that are not a list of strings"
    return None


def hotpotqa_document_id(title: str, text: str | None = None, source: str = "hotpotqa") -> str:
    """
    The stable id of a corpus paragraph: a SHA-256 hex digest of `(source, title)`, or of
    `(source, title, text)` when `text` is given (MuSiQue, where one title can have several
    paragraphs).

    :param title: The Wikipedia title of the paragraph.
    :param text: The paragraph text, or None to identify the paragraph by title alone.
    :param source: The corpus name that namespaces the id (default `"hotpotqa"`).
    :returns: A 64-character hexadecimal id, the same on every run and machine.
    """
    parts = [source, title] if text is None else [source, title, text]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def hotpotqa_documents(
    path_or_rows: str | PathLike | list[dict[str, Any]],
    dedupe: DedupeMode | None = None,
    source: str | None = None,
    title_in_content: bool = False,
) -> list[Document]:
    """
    One Haystack `Document` per distinct paragraph of all questions' `context`.

    `content` is the paragraph's sentences joined with `""` (sentences carry their own leading
    spaces), `meta` is `{"title": title, "source": source}`. With `title_in_content=True` the
    content starts with the title and a newline, so that keyword retrievers (which index
    `content` only) can match the title.

    Deduplication:
    - `"title"` (HotpotQA): one Document per title; if one title comes with different texts,
      the longest text is kept and the conflict is logged. Id = hash of `(source, title)`.
    - `"title_text"` (MuSiQue, where a title can carry several different paragraphs): one
      Document per `(title, text)`. Id = hash of `(source, title, text)`.

    :param path_or_rows: A JSONL path (read with `load_hotpotqa_questions`) or already loaded rows.
    :param dedupe: `"title"`, `"title_text"`, or None (default) to choose from the data: rows
        with `supporting_paragraph_idx` (MuSiQue) use `"title_text"`, others `"title"`.
    :param source: The `meta["source"]` value and id namespace; None (default) means `"musique"`
        for MuSiQue-shaped rows and `"hotpotqa"` otherwise.
    :param title_in_content: Prefix `content` with `"<title>\n"` (default False). Ids do not
        change (they never depend on this flag).
    :returns: The Documents, in first-seen order.
    :raises ValueError: If the file is malformed (see `load_hotpotqa_questions`) or `dedupe` is
        not one of the modes above.
    """
    rows = (
        load_hotpotqa_questions(path_or_rows) if isinstance(path_or_rows, (str, PathLike)) else list(path_or_rows)
    )
    is_musique = bool(rows) and "supporting_paragraph_idx" in rows[0]
    if dedupe is None:
        dedupe = "title_text" if is_musique else "title"
    if dedupe not in ("title", "title_text"):
        raise ValueError(f"dedupe must be 'title' or 'title_text', got {dedupe!r}.")
    if source is None:
        source = "musique" if is_musique else "hotpotqa"

    # key -> (title, text), insertion-ordered
    paragraphs: dict[Any, tuple[str, str]] = {}
    for row in rows:
        for title, sentences in row["context"]:
            text = "".join(sentences)
            key: Any = title if dedupe == "title" else (title, text)
            seen = paragraphs.get(key)
            if seen is None:
                paragraphs[key] = (title, text)
            elif seen[1] != text:
                keep = text if len(text) > len(seen[1]) else seen[1]
                logger.info(
                    "Title {title} comes with different paragraph texts ({len_a} and {len_b} chars); "
                    "keeping the longest.",
                    title=title,
                    len_a=len(seen[1]),
                    len_b=len(text),
                )
                paragraphs[key] = (title, keep)

    return [
        Document(
            id=hotpotqa_document_id(title, text if dedupe == "title_text" else None, source=source),
            content=f"{title}\n{text}" if title_in_content else text,
            meta={"title": title, "source": source},
        )
        for title, text in paragraphs.values()
    ]


def gold_titles(row: dict[str, Any]) -> list[str]:
    """
    The titles of a question's gold (supporting) paragraphs, in first-mention order.

    :param row: A HotpotQA or MuSiQue row.
    :returns: Distinct titles from `supporting_facts`.
    """
    return list(dict.fromkeys(title for title, _ in row["supporting_facts"]))


def gold_document_ids(row: dict[str, Any], dedupe: DedupeMode | None = None, source: str | None = None) -> list[str]:
    """
    The ids (as produced by `hotpotqa_documents`) of a question's gold paragraphs.

    For MuSiQue rows the gold paragraphs are `context[i]` for `i` in `supporting_paragraph_idx`;
    for HotpotQA rows they are the titles in `supporting_facts`.

    :param row: A HotpotQA or MuSiQue row.
    :param dedupe: As in `hotpotqa_documents`; None chooses from the row's shape.
    :param source: As in `hotpotqa_documents`; None chooses from the row's shape.
    :returns: The distinct gold document ids.
    :raises ValueError: If `dedupe="title_text"` and the row has no `supporting_paragraph_idx`.
    """
    is_musique = "supporting_paragraph_idx" in row
    dedupe = dedupe or ("title_text" if is_musique else "title")
    source = source or ("musique" if is_musique else "hotpotqa")
    if dedupe == "title":
        return [hotpotqa_document_id(t, source=source) for t in gold_titles(row)]
    if not is_musique:
        raise ValueError("dedupe='title_text' needs rows with 'supporting_paragraph_idx' (MuSiQue).")
    ids = []
    for i in row["supporting_paragraph_idx"]:
        title, sentences = row["context"][i]
        ids.append(hotpotqa_document_id(title, "".join(sentences), source=source))
    return list(dict.fromkeys(ids))
