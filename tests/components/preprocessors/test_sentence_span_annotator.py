# SPDX-License-Identifier: Apache-2.0
from conftest import load_yaml
from haystack import Document, Pipeline

from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY, split_sentences

TEXT = "Big Stone Gap\nBig Stone Gap is a 2014 film. It was directed by Adriana Trigiani."


def test_each_chunk_gets_its_sentence_spans_and_keeps_its_id():
    chunks = [Document(content=TEXT, meta={"title": "Big Stone Gap"}), Document(content="No sentence here: ---")]
    out = SentenceSpanAnnotator().run(documents=chunks)["documents"]
    assert [d.id for d in out] == [d.id for d in chunks]
    spans = out[0].meta[SENTENCE_SPANS_KEY]
    assert spans == [offset for s in split_sentences(TEXT) for offset in (s.start, s.end)]
    sentences = [TEXT[a:b] for a, b in zip(spans[::2], spans[1::2], strict=True)]
    assert sentences == ["Big Stone Gap", "Big Stone Gap is a 2014 film.", "It was directed by Adriana Trigiani."]
    assert out[0].meta["title"] == "Big Stone Gap"
    assert SENTENCE_SPANS_KEY not in chunks[0].meta  # the input is not changed


def test_stale_spans_are_replaced_and_chunks_without_text_pass_unchanged():
    stale = Document(content="One. Two.", meta={SENTENCE_SPANS_KEY: [0, 99]})
    empty = Document(content=None, meta={"kind": "image"})
    out = SentenceSpanAnnotator().run(documents=[stale, empty])["documents"]
    assert out[0].meta[SENTENCE_SPANS_KEY] == [0, 4, 5, 9]
    assert out[1] is empty


def test_round_trips_in_a_pipeline():
    pipeline = Pipeline()
    pipeline.add_component("sentence_spans", SentenceSpanAnnotator())
    loaded = load_yaml(pipeline.dumps())
    assert isinstance(loaded.get_component("sentence_spans"), SentenceSpanAnnotator)
    out = loaded.run({"sentence_spans": {"documents": [Document(content="One. Two.")]}})
    assert out["sentence_spans"]["documents"][0].meta[SENTENCE_SPANS_KEY] == [0, 4, 5, 9]
