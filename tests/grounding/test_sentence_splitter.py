# SPDX-License-Identifier: Apache-2.0
import pytest

from haystack_agentic.grounding.sentence_splitter import plain, split_sentences

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
    assert all(a.end <= b.start for a, b in zip(sentences, sentences[1:]))


def test_blank_text_has_no_sentences():
    assert split_sentences("") == []
    assert split_sentences("  \n ---") == []


def test_plain_removes_markdown():
    assert plain("Some **bold** and `code` and [a link](http://x).") == "Some bold and code and a link."
