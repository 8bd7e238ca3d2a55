# SPDX-License-Identifier: Apache-2.0
"""
Load HotpotQA-style multi-hop QA files (HotpotQA, MuSiQue) as questions and Haystack Documents.

One JSONL schema: `{"id", "question", "answer", "supporting_facts", "context", ...}`, `context` being
`[[title, [sentence, ...]], ...]`. The paragraphs of all questions form a small Wikipedia corpus;
`hotpotqa_documents` turns them into deduplicated `Document`s with stable ids.

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
from typing import Any

from haystack import Document, logging

logger = logging.getLogger(__name__)

REQUIRED_FIELDS = ("id", "question", "answer", "supporting_facts", "context")


def load_hotpotqa_questions(path: str | PathLike) -> list[dict[str, Any]]:
    """
    Read a HotpotQA-style JSONL file (UTF-8, one question per line, blank lines skipped).

    :returns: The rows, in file order, as dicts (unchanged).
    :raises FileNotFoundError: If the file does not exist.
    :raises ValueError: If a line is not a JSON object with the `REQUIRED_FIELDS` and a `context` of
        `[title, [sentence, ...]]` pairs; the message names the file and the 1-based line number.
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
    """Why `context` is not a list of `[title, [sentence, ...]]` pairs, or None."""
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
    The stable id of a corpus paragraph: a SHA-256 hex digest of `(source, title)`, or of `(source, title, text)`
    when `text` is given (MuSiQue, where one title can have several paragraphs).
    """
    parts = [source, title] if text is None else [source, title, text]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def _is_musique(row: dict[str, Any]) -> bool:
    return "supporting_paragraph_idx" in row


def hotpotqa_documents(
    path_or_rows: str | PathLike | list[dict[str, Any]], source: str | None = None, title_in_content: bool = False
) -> list[Document]:
    """
    One Haystack `Document` per distinct paragraph of all questions' `context`.

    `content` is the paragraph's sentences joined with `""`, `meta` is `{"title": title, "source": source}`.
    HotpotQA rows give one Document per title (the longest text is kept when a title comes with several; id from
    `(source, title)`); MuSiQue rows (with `supporting_paragraph_idx`) one per `(title, text)`.

    :param path_or_rows: A JSONL path (read with `load_hotpotqa_questions`) or already loaded rows.
    :param source: The `meta["source"]` value and id namespace; None: `"musique"` for MuSiQue rows, else `"hotpotqa"`.
    :param title_in_content: Prefix `content` with `"<title>\n"`, so keyword retrievers match the title (ids do not
        change).
    :returns: The Documents, in first-seen order.
    :raises ValueError: If the file is malformed (see `load_hotpotqa_questions`).
    """
    rows = (
        load_hotpotqa_questions(path_or_rows) if isinstance(path_or_rows, (str, PathLike)) else list(path_or_rows)
    )
    by_text = bool(rows) and _is_musique(rows[0])
    if source is None:
        source = "musique" if by_text else "hotpotqa"

    # key -> (title, text), insertion-ordered
    paragraphs: dict[Any, tuple[str, str]] = {}
    for row in rows:
        for title, sentences in row["context"]:
            text = "".join(sentences)
            key: Any = (title, text) if by_text else title
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
            id=hotpotqa_document_id(title, text if by_text else None, source=source),
            content=f"{title}\n{text}" if title_in_content else text,
            meta={"title": title, "source": source},
        )
        for title, text in paragraphs.values()
    ]


def gold_titles(row: dict[str, Any]) -> list[str]:
    """The distinct titles of a question's supporting facts, in first-mention order."""
    return list(dict.fromkeys(title for title, _ in row["supporting_facts"]))


def gold_document_ids(row: dict[str, Any]) -> list[str]:
    """
    The distinct ids (as `hotpotqa_documents` makes them) of a question's gold paragraphs: for MuSiQue rows
    `context[i]` for `i` in `supporting_paragraph_idx`, for HotpotQA rows the titles in `supporting_facts`.
    """
    if not _is_musique(row):
        return [hotpotqa_document_id(t, source="hotpotqa") for t in gold_titles(row)]
    ids = []
    for i in row["supporting_paragraph_idx"]:
        title, sentences = row["context"][i]
        ids.append(hotpotqa_document_id(title, "".join(sentences), source="musique"))
    return list(dict.fromkeys(ids))
