# SPDX-License-Identifier: Apache-2.0
import pytest
import yaml
from conftest import load_yaml
from haystack import Document
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import HHEMGrounder
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.pipelines.loop_pipeline import build_loop_pipeline

from .conftest import ended_state


@pytest.fixture
def grounder(tiny_hhem):
    checkpoint, _foundation = tiny_hhem
    g = HHEMGrounder(model=str(checkpoint), device="cpu", batch_size=3)
    g.warm_up()
    assert g.load_error is None
    return g


def test_tiny_model_grounds_with_offsets_and_sources(grounder):
    state = ended_state()
    grounder.threshold = 0.0  # random weights: force every sentence supported to check attribution
    out = grounder.run(state)["state"]
    g = out.outcome.grounding
    assert g["method"] == "hhem" and 0.0 <= g["score"] <= 1.0
    assert g["premise_mode"] == "chunk"  # each citation's claim against its own chunk
    spans = g["faithful_spans"]
    assert len(spans) == 2 and g["hallucinated_spans"] == []
    for span in spans:
        assert out.outcome.answer[span["start"] : span["end"]] == span["text"]
        assert 0.0 <= span["score"] <= 1.0 and span["chunk_ids"]
        for source in span["sources"]:
            assert source["iteration"] == {"paris": 1, "london": 2}[source["chunk_id"]]
    assert strip_markers(out.outcome.answer) == state.outcome.answer  # cited (markers added), the text unchanged
    assert [(c["document_id"], c["check"]) for c in out.outcome.citations] == [("paris", "hhem"), ("london", "hhem")]


def test_scores_in_unit_interval_and_batching_is_order_independent(grounder):
    pairs = [("Paris is in France.", "Paris is in France."), ("a", "b " * 40), ("London is big.", "Paris")]
    grounder.batch_size = 1
    one = grounder.score_pairs(pairs)
    grounder.batch_size = 8
    many = grounder.score_pairs(pairs)
    assert all(0.0 <= s <= 1.0 for s in one)
    assert one == pytest.approx(many, abs=1e-5)


def test_prompt_starts_with_pad_token(grounder):
    ids = grounder._tokenizer(grounder._prompt.format(text1="a", text2="b"))["input_ids"]
    assert ids[0] == grounder._tokenizer.pad_token_id == 0


def test_threshold_splits_faithful_and_hallucinated(grounder):
    grounder.threshold = 1.0
    g = grounder.run(ended_state())["state"].outcome.grounding
    assert g["faithful_spans"] == [] and len(g["hallucinated_spans"]) == 2
    assert all(s["chunk_ids"] == [] for s in g["hallucinated_spans"])


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"terminated_by": "error", "error": "boom"}, "error"),
        ({"answer": None}, "no answer"),
        ({"answer": "  "}, "no answer"),
        ({"chunks": ()}, "no chunks"),
    ],
)
def test_skip_conditions(grounder, changes, reason):
    out = grounder.run(ended_state(**changes))["state"]
    assert out.outcome.grounding is None
    assert reason in out.metadata["grounding_skipped"]


def test_failure_is_swallowed_and_answer_kept(grounder, monkeypatch):
    def boom(pairs):
        msg = "CUDA out of memory"
        raise RuntimeError(msg)

    monkeypatch.setattr(grounder, "score_pairs", boom)
    state = ended_state()
    out = grounder.run(state)["state"]
    assert out.outcome.answer == state.outcome.answer and out.outcome.grounding is None
    assert "CUDA out of memory" in out.metadata["grounding_skipped"]


def test_missing_model_skips_with_how_to_get_it(tmp_path):
    g = HHEMGrounder(model=str(tmp_path / "nope"), local_files_only=True)
    g.warm_up()  # never raises
    assert g.load_error
    out = g.run(ended_state())["state"]
    assert out.outcome.grounding is None and "huggingface-cli download" in out.metadata["grounding_skipped"]


def test_long_premise_uses_windows_and_finds_fact_at_the_end(grounder, monkeypatch):
    filler = "the river of the town was big . " * 60
    chunks = [Document(id=f"c{i}", content=filler) for i in range(3)]
    chunks.append(Document(id="fact", content=filler + " adriana trigiani directed big stone gap ."))
    grounder.max_input_tokens = 200
    hypothesis = "Adriana Trigiani directed Big Stone Gap."

    def fake(pairs):  # supported only when the premise really contains the fact
        return [1.0 if "adriana trigiani directed" in p else 0.0 for p, _ in pairs]

    monkeypatch.setattr(grounder, "score_pairs", fake)
    seen = []
    real_fake = fake

    def recording(pairs):
        seen.extend(pairs)
        return real_fake(pairs)

    monkeypatch.setattr(grounder, "score_pairs", recording)
    g = grounder.run(ended_state(answer=hypothesis, chunks=chunks))["state"].outcome.grounding
    assert g["premise_mode"] == "windows"
    assert g["faithful_spans"][0]["chunk_ids"] == ["fact"]
    assert all(h == hypothesis for _, h in seen)  # the hypothesis is never cut
    for premise, _ in seen:  # every premise fits the budget
        assert grounder._count(premise) <= grounder.max_input_tokens


def test_yaml_round_trip_with_grounder(tiny_hhem):
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_agentic import AgenticRouter

    grounder = HHEMGrounder(model=str(tiny_hhem[0]), threshold=0.4, batch_size=2, device="cpu")
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=ScriptedChatGenerator(script=[{"text": "x"}])),
        InMemoryBM25Retriever(document_store=InMemoryDocumentStore()),
        grounder=grounder,
    )
    text = pipeline.dumps()
    assert "HHEMGrounder" in text and isinstance(yaml.safe_load(text), dict)
    loaded = load_yaml(text)
    assert loaded.to_dict()["components"] == pipeline.to_dict()["components"]
    assert load_yaml(loaded.dumps()).to_dict() == loaded.to_dict()
    assert loaded.get_component("grounder").threshold == 0.4


@pytest.mark.integration  # the packaged MiniLM (the evidence check's embeddings)
def test_grounder_in_a_running_pipeline(tiny_hhem, store_factory=None):
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_agentic import AgenticRouter

    store = InMemoryDocumentStore()
    store.write_documents([Document(id="paris", content="Paris is the capital of France.")])
    llm = ScriptedChatGenerator(
        script=[
            {"tool_calls": [{"tool_name": "search", "arguments": {"query": "Paris"}}]},
            {"tool_calls": [{"tool_name": "answer", "arguments": {"text": "Paris is in France. It is big"}}]},
        ]
    )
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm, search_question_first=False),  # the script makes every search
        InMemoryBM25Retriever(document_store=store),
        grounder=HHEMGrounder(model=str(tiny_hhem[0]), device="cpu", threshold=0.0),
    )
    result = pipeline.run({"controller": {"query": "Where is Paris?"}})["result"]
    assert result["answer"] == "Paris is in France [1]. It is big"
    spans = result["grounding"]["faithful_spans"]
    assert [s["text"] for s in spans] == ["Paris is in France [1]."]  # "It is big" has no citation: unsupported
    assert [s["text"] for s in result["grounding"]["hallucinated_spans"]] == ["It is big"]
    assert spans[0]["sources"][0]["query"] == "Paris"


def test_invalid_parameters():
    with pytest.raises(ValueError):
        HHEMGrounder(threshold=1.5)
    with pytest.raises(ValueError):
        HHEMGrounder(batch_size=0)
