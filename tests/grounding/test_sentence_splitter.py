# SPDX-License-Identifier: Apache-2.0
import itertools

import pytest

from haystack_agentic.grounding.sentence_splitter import plain, pysbd_segments, split_sentences

CASES = [
    ("Paris is in France. It is big", ["Paris is in France.", "It is big"]),  # no final period
    ("Dr. Smith met him. They talked e.g. about art.", ["Dr. Smith met him.", "They talked e.g. about art."]),
    ("It cost $3.50 today. Pi is 3.14 roughly.", ["It cost $3.50 today.", "Pi is 3.14 roughly."]),
    ("Steps:\n1. Boil water.\n2. Add tea.", ["Steps:", "Boil water.", "Add tea."]),
    ("Items:\n- first item\n- second item\n* third", ["Items:", "first item", "second item", "third"]),
    ("东京是日本的首都。它很大。", ["东京是日本的首都。", "它很大。"]),
    ('He said "It is late." (Then he left.) Done.', ['He said "It is late." (Then he left.) Done.']),
    ("# Title\n\nSome **bold** text. More.\n\n---\n> A quote.", ["Title", "Some **bold** text.", "More.", "A quote."]),
    ("Same. Same. Same.", ["Same.", "Same.", "Same."]),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_split_sentences(text, expected):
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == expected
    for s in sentences:
        assert text[s.start : s.end] == s.text
    assert all(a.end <= b.start for a, b in itertools.pairwise(sentences))


def test_blank_text_has_no_sentences():
    assert split_sentences("") == []
    assert split_sentences("  \n ---") == []


def test_plain_removes_markdown():
    assert plain("Some **bold** and `code` and [a link](http://x).") == "Some bold and code and a link."


def test_offsets_hold_for_any_text():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from([*"ab .!?。\n-#*1)\"'", "Dr.", "e.g.", "3.5", "  ", "东京", "\t"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(alphabet, max_size=40).map("".join))
    def check(text):
        sentences = split_sentences(text)
        for s in sentences:
            assert s.text and text[s.start : s.end] == s.text and s.text == s.text.strip()
        assert all(a.end <= b.start for a, b in itertools.pairwise(sentences))

    check()


def test_without_pysbd_a_punctuation_splitter_is_used_and_said_once(monkeypatch, caplog):
    from haystack_agentic.grounding import sentence_splitter

    monkeypatch.setitem(__import__("sys").modules, "pysbd", None)  # `import pysbd` raises ImportError
    sentence_splitter._warn_without_pysbd.cache_clear()  # a fresh process: not said yet
    text = "Paris is in France. It is big!\n- an item"
    for _ in range(3):  # a run splits the answer and several chunks
        assert [s.text for s in split_sentences(text)] == ["Paris is in France.", "It is big!", "an item"]
    said = [r for r in caplog.records if "pysbd is not installed" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"


def test_threads_splitting_at_once_get_their_own_sentences():
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"Sentence {i} one. Sentence {i} two has more words in it. And {i} three." * 3 for i in range(16)]
    expected = [[s.text for s in split_sentences(t)] for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(5):
            got = list(pool.map(lambda t: [s.text for s in split_sentences(t)], texts))
            assert got == expected


@pytest.mark.parametrize(("text", "_"), CASES)
def test_stored_spans_give_the_same_sentences(text, _):
    from haystack_agentic.grounding.sentence_splitter import sentence_spans, sentences_at

    spans = sentence_spans(text)
    assert sentences_at(text, spans) == split_sentences(text)
    assert sentences_at(text, tuple(spans)) == split_sentences(text)


@pytest.mark.parametrize(
    "spans",
    [
        [0, 19, 20],  # odd count
        [0, 19.0, 20, 30],  # not an integer
        [0, True, 20, 30],  # a bool is not an offset
        ["0", "19"],
        [0, 19, 10, 30],  # overlapping
        [20, 30, 0, 19],  # out of order
        [0, 19, 20, 31],  # past the end
        [-1, 19],  # before the start
        [5, 5],  # empty
        [0, 20],  # ends on the space after the sentence
        [],  # no sentence in a text with words
    ],
)
def test_stored_spans_that_cannot_be_the_texts_sentences_are_refused(spans):
    from haystack_agentic.grounding.sentence_splitter import sentences_at

    assert sentences_at("Paris is in France. It is big.", spans) is None


def test_no_stored_span_fits_a_text_without_words():
    from haystack_agentic.grounding.sentence_splitter import sentence_spans, sentences_at

    assert sentence_spans("  --- ") == []
    assert sentences_at("  --- ", []) == []
    assert sentence_spans("Paris is in France. It is big.") == [0, 19, 20, 30]


SEGMENT_CASES = [
    *(text for text, _ in CASES),
    "Hi. Hi. Hi.",  # the same sentence again: each occurrence after the previous one's
    "A.  A.\u00a0 A.\n\nA.",  # the whitespace after a sentence, Unicode spaces included, goes with it
    "U.S.A. is big. U.S.A. is big.",
    "Answer to: Which magazine was started first, Arthur's Magazine or First for Women?",
    "...",
    "x",
]


@pytest.mark.parametrize("text", SEGMENT_CASES)
def test_pysbd_segments_are_pysbds_own(text):
    import pysbd

    def segmenter():
        return pysbd.Segmenter(language="en", clean=False, char_span=False)

    assert pysbd_segments(segmenter(), text) == segmenter().segment(text)


def test_pysbd_segments_are_pysbds_own_for_any_text():
    import pysbd
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from(
        [*"ab .!?\n-*1)\"'(", "Dr.", "Mr. ", "U.S.", "e.g.", "3.5", "  ", "\u00a0", "\t", "Hi. "]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(alphabet, max_size=30).map("".join))
    def check(text):
        segmenter = pysbd.Segmenter(language="en", clean=False, char_span=False)
        assert pysbd_segments(segmenter, text) == segmenter.segment(text)

    check()
