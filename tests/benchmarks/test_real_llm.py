# SPDX-License-Identifier: Apache-2.0
"""
Smoke tests of the real-LLM benchmarks with the real Qwen2.5-Coder-0.5B GGUF behind an in-process llama.cpp server.

`benchmarks/real_llm.py` at its smallest setting: one question, the offline default and one-shot RAG, then a resumed
run from its records. `benchmarks/answer_replay.py` on one recorded run.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from haystack_agentic.llm.gguf_models import installed_model

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "real_llm.py"
DATA = ROOT / "examples" / "data" / "hotpotqa_dev_sample.jsonl"
MODEL = "qwen2.5-coder-0.5b"
GGUF_NAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def small_gguf() -> Path | None:
    """The 0.5B GGUF: `$REAL_LLM_GGUF`, else the one `install-model --model qwen2.5-coder-0.5b` installed, else the
    copy in /work/models."""
    candidates = [os.environ.get("REAL_LLM_GGUF"), installed_model(MODEL), Path("/work/models") / GGUF_NAME]
    return next((Path(c) for c in candidates if c and Path(c).is_file()), None)


@pytest.fixture
def gguf() -> Path:
    """The 0.5B GGUF and the llamacpp extra, or a skip saying how to get them."""
    found = small_gguf()
    if found is None:
        pytest.skip(
            f"{GGUF_NAME} not found (set REAL_LLM_GGUF or run `haystack-agentic install-model --model {MODEL}`)"
        )
    pytest.importorskip("xllamacpp", reason="needs the llamacpp extra")
    return found


def run_script(*args: str, script: Path = SCRIPT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.slow
@pytest.mark.integration
def test_real_llm_prints_its_figures_and_resumes(tmp_path, gguf):
    records = tmp_path / "records.jsonl"
    args = ["--data", str(DATA), "--n", "1", "--gguf", str(gguf), "--systems", "offline,one-shot"]
    args += ["--json", str(records)]

    first = run_script(*args)

    assert first.returncode == 0, first.stderr[-2000:]
    table = [line for line in first.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| system | N | exact match | F1 | all gold paragraphs seen |")
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in table[1:]}
    assert set(rows) == {"offline", "one-shot"}, first.stdout
    for cells in rows.values():
        n, em, f1, seen = (cell.strip() for cell in cells[:4])
        assert n == "1" and em in ("0/1", "1/1") and 0.0 <= float(f1) <= 1.0 and seen in ("0/1", "1/1")
    ended, without_words, calls = (cell.strip() for cell in rows["one-shot"][4:7])
    assert ended == "1 answered" and without_words == "0" and calls == "1, 1.0"
    saved = [json.loads(line) for line in records.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["system"] for r in saved) == ["offline", "one-shot"]
    assert all(r["model_sha256"] == "1d9614638d18" for r in saved)
    assert next(r for r in saved if r["system"] == "one-shot")["answer"].strip()

    again = run_script(*args)  # everything is in the records: no model is started, the same table is printed

    assert again.returncode == 0, again.stderr[-2000:]
    assert "2 records resumed" in again.stdout
    assert [line for line in again.stdout.splitlines() if line.startswith("| ")] == table
    assert len(records.read_text(encoding="utf-8").splitlines()) == 2


@pytest.mark.slow
@pytest.mark.integration
def test_answer_replay_prints_each_prompts_figures(tmp_path, gguf):
    row = json.loads(DATA.read_text(encoding="utf-8").splitlines()[0])
    record = {"system": "json", "id": row["id"], "question": row["question"], "queries": [row["question"]], "f1": 0.5}
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record) + "\n", encoding="utf-8")
    args = ["--records", str(records), "--data", str(DATA), "--gguf", str(gguf), "--variants", "current,lines"]

    done = run_script(*args, script=ROOT / "benchmarks" / "answer_replay.py")

    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 recorded json runs of hotpotqa_dev_sample.jsonl; the loop's own F1 0.500" in done.stdout
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| answer prompt | N | exact match | F1 | prompts holding all gold |"
    assert [line.split("|")[1].strip() for line in table[1:]] == ["current", "lines"]
    for line in table[1:]:
        n, em, f1, gold = (cell.strip() for cell in line.split("|")[2:-1])
        assert n == "1" and em in ("0/1", "1/1") and 0.0 <= float(f1) <= 1.0 and gold in ("0/1", "1/1")


def test_answer_replay_refuses_records_of_another_file(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"system": "json", "id": "not-in-the-file", "queries": []}) + "\n", encoding="utf-8")
    args = ["--records", str(records), "--data", str(DATA), "--gguf", str(tmp_path / "none.gguf")]

    done = run_script(*args, script=ROOT / "benchmarks" / "answer_replay.py")

    assert done.returncode == 2 and "no 'json' record of a question in hotpotqa_dev_sample.jsonl" in done.stderr


def test_answer_replay_rebuilds_the_recorded_chunks_of_each_search():
    from haystack import Document
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from benchmarks.answer_replay import replayed_state

    store = InMemoryDocumentStore()
    store.write_documents([Document(id=f"d{i}", content=f"Paris page {i} " + "river " * i) for i in range(1, 6)])
    steps = [
        {"action": "search", "query": "Paris river", "returned_chunk_ids": ["d5", "d4"]},
        {"action": "generate", "query": "None", "returned_chunk_ids": []},
        {"action": "search", "query": "page", "returned_chunk_ids": ["d1", "gone"]},  # a narrowed page search
    ]
    record = {"question": "Which river?", "queries": ["Paris river", "page"], "steps": steps}

    state = replayed_state(record, store)

    assert [s.returned_chunk_ids for s in state.tool_history] == [("d5", "d4"), ("d1",)]
    assert {d.id for d in state.chunks} == {"d5", "d4", "d1"} and all(d.score is not None for d in state.chunks)
    old = replayed_state({"question": "Which river?", "queries": ["Paris river", "Paris river"]}, store)
    assert len(old.tool_history) == 1 and len(old.tool_history[0].returned_chunk_ids) == 5
