# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path
from typing import ClassVar

import pytest
from haystack import Document

from benchmarks.harness.gold import gold_document_ids, gold_titles
from haystack_agentic.indexing.hotpotqa import (
    hotpotqa_document_id,
    hotpotqa_documents,
    load_hotpotqa_questions,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data" / "hotpotqa_dev_sample.jsonl"


def _row(qid, context, supporting=None, **extra):
    return {
        "id": qid,
        "question": f"question {qid}?",
        "answer": "answer",
        "supporting_facts": supporting or [[context[0][0], 0]],
        "context": context,
        **extra,
    }


def _write(tmp_path, lines):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


ROWS = [
    _row(
        "q1",
        [
            ["Big Stone Gap (film)", ["Big Stone Gap is a 2014 film.", " It was directed by Adriana Trigiani."]],
            ["Adriana Trigiani", ["Adriana Trigiani is an author.", " She is based in New York City."]],
        ],
        supporting=[["Big Stone Gap (film)", 1], ["Adriana Trigiani", 1]],
    ),
    _row(
        "q2",
        [
            ["Adriana Trigiani", ["Adriana Trigiani is an author."]],  # shorter text, same title
            ["Greenwich Village", ["Greenwich Village is a neighborhood."]],
        ],
    ),
]


class TestLoadQuestions:
    def test_reads_rows_and_skips_blank_lines(self, tmp_path):
        path = _write(tmp_path, [json.dumps(ROWS[0]), "", json.dumps(ROWS[1])])
        rows = load_hotpotqa_questions(path)
        assert [r["id"] for r in rows] == ["q1", "q2"]
        assert rows[0] == ROWS[0]

    def test_bad_json_names_file_and_line(self, tmp_path):
        path = _write(tmp_path, [json.dumps(ROWS[0]), "{not json"])
        with pytest.raises(ValueError, match=r"rows\.jsonl:2: invalid JSON"):
            load_hotpotqa_questions(path)

    def test_missing_field_names_file_line_and_field(self, tmp_path):
        row = dict(ROWS[0])
        del row["supporting_facts"]
        path = _write(tmp_path, [json.dumps(row)])
        with pytest.raises(ValueError, match=r"rows\.jsonl:1: missing field\(s\) supporting_facts"):
            load_hotpotqa_questions(path)

    def test_not_an_object(self, tmp_path):
        path = _write(tmp_path, ["[1, 2]"])
        with pytest.raises(ValueError, match=r":1: expected a JSON object"):
            load_hotpotqa_questions(path)

    def test_malformed_context(self, tmp_path):
        row = _row("q", [["Title", "not a list of sentences"]])
        path = _write(tmp_path, [json.dumps(row)])
        with pytest.raises(ValueError, match=r":1: malformed 'context'"):
            load_hotpotqa_questions(path)

    def test_missing_file(self, tmp_path):
        with pytest.raises(FileNotFoundError):
            load_hotpotqa_questions(tmp_path / "nope.jsonl")


class TestDocuments:
    def test_one_document_per_title_longest_text_kept(self):
        docs = hotpotqa_documents(ROWS)
        assert [d.meta["title"] for d in docs] == ["Big Stone Gap (film)", "Adriana Trigiani", "Greenwich Village"]
        trigiani = docs[1]
        assert trigiani.content == "Adriana Trigiani is an author. She is based in New York City."
        assert trigiani.meta == {"title": "Adriana Trigiani", "source": "hotpotqa"}
        assert all(isinstance(d, Document) for d in docs)

    def test_ids_are_stable_and_depend_on_title_only(self):
        first = hotpotqa_documents(ROWS)
        again = hotpotqa_documents(list(reversed(ROWS)))
        assert {d.meta["title"]: d.id for d in first} == {d.meta["title"]: d.id for d in again}
        assert first[1].id == hotpotqa_document_id("Adriana Trigiani")
        assert len({d.id for d in first}) == len(first)

    def test_reads_a_path(self, tmp_path):
        path = _write(tmp_path, [json.dumps(r) for r in ROWS])
        assert [d.id for d in hotpotqa_documents(path)] == [d.id for d in hotpotqa_documents(ROWS)]
        assert [d.id for d in hotpotqa_documents(str(path))] == [d.id for d in hotpotqa_documents(ROWS)]

    def test_title_in_content_keeps_ids(self):
        plain = hotpotqa_documents(ROWS)
        titled = hotpotqa_documents(ROWS, title_in_content=True)
        assert [d.id for d in plain] == [d.id for d in titled]
        assert titled[0].content == "Big Stone Gap (film)\n" + plain[0].content

    def test_gold_ids_match_documents(self):
        ids = {d.meta["title"]: d.id for d in hotpotqa_documents(ROWS)}
        assert gold_titles(ROWS[0]) == ["Big Stone Gap (film)", "Adriana Trigiani"]
        assert gold_document_ids(ROWS[0]) == [ids["Big Stone Gap (film)"], ids["Adriana Trigiani"]]


class TestMusique:
    ROWS: ClassVar[list[dict]] = [
        _row(
            "m1",
            [["Paris", ["Paris is the capital of France."]], ["Paris", ["Paris is a town in Texas."]]],
            supporting=[["Paris", 0]],
            supporting_paragraph_idx=[1],
        ),
        _row(
            "m2",
            [["Paris", ["Paris is a town in Texas."]], ["Texas", ["Texas is a state."]]],
            supporting=[["Texas", 0]],
            supporting_paragraph_idx=[1],
        ),
    ]

    def test_dedupe_by_title_and_text(self):
        docs = hotpotqa_documents(self.ROWS)
        assert [(d.meta["title"], d.content) for d in docs] == [
            ("Paris", "Paris is the capital of France."),
            ("Paris", "Paris is a town in Texas."),
            ("Texas", "Texas is a state."),
        ]
        assert len({d.id for d in docs}) == 3
        assert docs[1].id == hotpotqa_document_id("Paris", "Paris is a town in Texas.", source="musique")
        assert all(d.meta["source"] == "musique" for d in docs)

    def test_gold_ids_use_paragraph_indices(self):
        docs = hotpotqa_documents(self.ROWS)
        assert gold_document_ids(self.ROWS[0]) == [docs[1].id]
        assert gold_document_ids(self.ROWS[1]) == [docs[2].id]


@pytest.mark.skipif(not EXAMPLE.exists(), reason="example data not present")
def test_example_file_loads():
    rows = load_hotpotqa_questions(EXAMPLE)
    docs = hotpotqa_documents(rows)
    assert len(rows) == 360
    assert 3000 < len(docs) < 4000
    ids = {d.id for d in docs}
    assert all(g in ids for row in rows for g in gold_document_ids(row))
