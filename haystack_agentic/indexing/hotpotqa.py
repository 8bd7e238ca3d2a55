# SPDX-License-Identifier: Apache-2.0
"""
Load HotpotQA-style multi-hop QA files as questions and deduplicated Haystack Documents.

Load HotpotQA-style multi-hop QA files (HotpotQA, MuSiQue: JSONL rows `{"id", "question", "answer",
"supporting_facts", "context": [[title, [sentence, ...]], ...]}`) as questions and deduplicated Haystack Documents.
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
    The rows of a HotpotQA-style JSONL file (UTF-8, one question per line, blank lines skipped), in file order.

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
                msg = f"{path}:{line_no}: invalid JSON ({e.msg} at column {e.colno})."
                raise ValueError(msg) from e
            if not isinstance(row, dict):
                msg = f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}."
                raise ValueError(msg)
            missing = ", ".join(field for field in REQUIRED_FIELDS if field not in row)
            if missing:
                needed = ", ".join(REQUIRED_FIELDS)
                msg = f"{path}:{line_no}: missing field(s) {missing}; a HotpotQA row needs {needed}."
                raise ValueError(msg)
            problem = _context_problem(row["context"])
            if problem:
                msg = f"{path}:{line_no}: malformed 'context': {problem}."
                raise ValueError(msg)
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
    """The stable id of a paragraph: SHA-256 of `(source, title)`, or with `text` (MuSiQue: a title has several)."""
    parts = [source, title] if text is None else [source, title, text]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def is_musique(row: dict[str, Any]) -> bool:
    """Whether a row is MuSiQue's (it lists `supporting_paragraph_idx`), whose titles may have several paragraphs."""
    return "supporting_paragraph_idx" in row


def hotpotqa_documents(
    path_or_rows: str | PathLike | list[dict[str, Any]], source: str | None = None, title_in_content: bool = False
) -> list[Document]:
    """
    One `Document` per distinct paragraph of all questions' `context`, in first-seen order.

    A Document's `content` is its paragraph's sentences joined, `meta` `{"title", "source"}`. HotpotQA rows give one per
    title (the longest text is kept); MuSiQue rows (with `supporting_paragraph_idx`) one per `(title, text)`.

    :param path_or_rows: A JSONL path (`load_hotpotqa_questions`) or loaded rows.
    :param source: `meta["source"]` and id namespace; `None`: `"musique"` for MuSiQue rows, else `"hotpotqa"`.
    :param title_in_content: Prefix `content` with `"<title>\n"` so keyword retrievers match the title (same ids).
    :raises ValueError: If the file is malformed (see `load_hotpotqa_questions`).
    """
    rows = load_hotpotqa_questions(path_or_rows) if isinstance(path_or_rows, (str, PathLike)) else list(path_or_rows)
    by_text = bool(rows) and is_musique(rows[0])
    source = ("musique" if by_text else "hotpotqa") if source is None else source
    paragraphs: dict[Any, tuple[str, str]] = {}  # key -> (title, text), insertion-ordered
    for row in rows:
        for title, sentences in row["context"]:
            text = "".join(sentences)
            key: Any = (title, text) if by_text else title
            seen = paragraphs.get(key)
            if seen is None:
                paragraphs[key] = (title, text)
            elif seen[1] != text:
                logger.info(
                    "Title {title} comes with different paragraph texts ({len_a} and {len_b} chars); "
                    "keeping the longest.",
                    title=title,
                    len_a=len(seen[1]),
                    len_b=len(text),
                )
                paragraphs[key] = (title, text if len(text) > len(seen[1]) else seen[1])

    return [
        Document(
            id=hotpotqa_document_id(title, text if by_text else None, source=source),
            content=f"{title}\n{text}" if title_in_content else text,
            meta={"title": title, "source": source},
        )
        for title, text in paragraphs.values()
    ]
