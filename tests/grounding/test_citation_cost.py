# SPDX-License-Identifier: Apache-2.0
"""Citing is per-question work only: a chunk's sentences are tokenized once, not again at every question citing it."""

import pytest
from haystack import Document

from haystack_agentic import LoopState
from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.evidence.features import tokens
from haystack_agentic.grounding import citations

TEXT = (
    "Lumen Quartet\nThe Lumen Quartet is a string quartet founded in Tallinn in 1998. Its first violinist was "
    "Maarja Kask. The quartet recorded the complete Haydn cycle in 2011."
)


@pytest.fixture
def counted_tokens(monkeypatch):
    """The texts `citations` tokenizes, in order."""
    seen: list[str] = []

    def counting(text):
        seen.append(text)
        return tokens(text)

    monkeypatch.setattr(citations, "tokens", counting)
    return seen


@pytest.mark.parametrize("stored_spans", [True, False])
def test_a_chunk_cited_again_is_not_tokenized_again(counted_tokens, stored_spans):
    doc = Document(id=f"lumen-{stored_spans}", content=TEXT, meta={"title": "Lumen Quartet"})
    if stored_spans:
        (doc,) = SentenceSpanAnnotator().run(documents=[doc])["documents"]
    sentences = TEXT.split("\n")[1].split(". ")

    def quotes(question, answer):
        state = LoopState(question=question, chunks=(doc,))
        return [c["quote"] for c in citations.cite(state, answer).outcome.citations]

    first = quotes("Who was the first violinist of the Lumen Quartet?", "Maarja Kask was its first violinist.")
    assert first == ["Its first violinist was Maarja Kask."]
    assert any(text.startswith(sentences[1]) for text in counted_tokens)  # the chunk's sentences were tokenized
    counted_tokens.clear()
    second = quotes("When did the Lumen Quartet record the Haydn cycle?", "The quartet recorded it in 2011.")
    assert second == ["The quartet recorded the complete Haydn cycle in 2011."]
    # Only the quote is tokenized again, by its offline check; no sentence is tokenized to choose it.
    again = [text for text in counted_tokens if any(s[:30] in text for s in sentences)]
    assert again == second


@pytest.mark.parametrize(
    "title", ["Lumen Quartet", "Jr.", "AT&amp", "AT&T", "Café &", "", "Smiths'", "Ünïcödé Straße", "5", "x-", "(a)"]
)
@pytest.mark.parametrize("sentence", ["It was founded in 1998.", "'s own & co.", "Éva's quartet", "-5 degrees", ""])
def test_a_title_and_a_sentence_tokenize_as_their_join(title, sentence):
    """A sentence's words with its chunk's title are the words of `"{title}. {sentence}"` (what `cite` relies on)."""
    assert set(tokens(f"{title}. {sentence}")) == set(tokens(title)) | set(tokens(sentence))


@pytest.mark.parametrize("stored_spans", [True, False])
def test_a_chunk_with_stored_offsets_is_tokenized_by_sentence_only(monkeypatch, stored_spans):
    """Finding a claim's sentence tokenizes a chunk once: by its stored sentences, or (none stored) its whole text."""
    from haystack_agentic.grounding import chunk_sentences

    seen: list[str] = []

    def counting(text):
        seen.append(text)
        return tokens(text)

    monkeypatch.setattr(chunk_sentences, "tokens", counting)
    text = TEXT.replace("Tallinn", f"Tartu-{stored_spans}")  # a text no other test has cached
    doc = Document(id=f"tartu-{stored_spans}", content=text, meta={"title": "Lumen Quartet"})
    if stored_spans:
        (doc,) = SentenceSpanAnnotator().run(documents=[doc])["documents"]
    state = LoopState(question="Who was the first violinist of the Lumen Quartet?", chunks=(doc,))
    quotes = [c["quote"] for c in citations.cite(state, "Maarja Kask was its first violinist.").outcome.citations]
    assert quotes == ["Its first violinist was Maarja Kask."]
    assert (text in seen) is not stored_spans  # the whole text is tokenized only when no sentences are stored
