# SPDX-License-Identifier: Apache-2.0
"""The gold paragraphs of a HotpotQA-style question, as ids of the Documents `hotpotqa_documents` makes."""

from typing import Any

from haystack_agentic.indexing.hotpotqa import hotpotqa_document_id, is_musique


def gold_titles(row: dict[str, Any]) -> list[str]:
    """The distinct titles of a question's supporting facts, in first-mention order."""
    return list(dict.fromkeys(title for title, _ in row["supporting_facts"]))


def gold_document_ids(row: dict[str, Any]) -> list[str]:
    """
    The distinct `hotpotqa_documents` ids of a question's gold paragraphs: MuSiQue's `context[i]` for `i` in
    `supporting_paragraph_idx`, HotpotQA's titles in `supporting_facts`.
    """
    if not is_musique(row):
        return [hotpotqa_document_id(t, source="hotpotqa") for t in gold_titles(row)]
    paragraphs = (row["context"][i] for i in row["supporting_paragraph_idx"])
    return list(dict.fromkeys(hotpotqa_document_id(t, "".join(s), source="musique") for t, s in paragraphs))
