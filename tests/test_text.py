# SPDX-License-Identifier: Apache-2.0
"""The text rules' shared pieces (`haystack_agentic.text`), and that the rules keep no copies of them."""

import re
from pathlib import Path

import haystack_agentic
from haystack_agentic.text import (
    NAME_CONNECTORS,
    NON_CONTENT_WORDS,
    QUESTION_STOPWORDS,
    STOPWORDS,
    alternation,
    content_words,
    fold,
    folded_words,
    stem,
    strip_qualifier,
)

PACKAGE = Path(haystack_agentic.__file__).parent


def test_fold_drops_case_accents_and_entities():
    assert fold("César CUI &amp; Co") == "cesar cui & co"
    assert fold("Tom &amp; Jerry") == "tom & jerry"  # entities are decoded in ASCII text too
    assert fold("Café Müller, Ångström") == "cafe muller, angstrom"


def test_fold_keeps_the_combining_marks_of_other_scripts():
    assert fold("東京はどこの首都ですか") == "東京はどこの首都ですか"  # voicing marks are part of the kana
    assert fold("हिन्दी") == "हिन्दी"  # Devanagari vowel signs and virama stay


def test_content_words_keep_order_and_repeats_and_drop_non_content_words():
    assert content_words("Who directed the film, the FILM Big Stone Gap in March?") == [
        "directed",
        "film",
        "film",
        "big",
        "stone",
        "gap",
    ]
    assert folded_words("Ángel's 2 cats") == ["angel", "s", "2", "cats"]


def test_word_lists_nest_as_their_rules_need():
    assert STOPWORDS < NON_CONTENT_WORDS and STOPWORDS < QUESTION_STOPWORDS
    assert "may" in NON_CONTENT_WORDS and "march" in NON_CONTENT_WORDS  # month names
    assert "first" in QUESTION_STOPWORDS and "first" not in NON_CONTENT_WORDS  # "First for Women" is a name


def test_stem_removes_one_suffix_and_keeps_four_characters():
    assert [stem(w) for w in ("started", "starting", "words", "magazines", "string", "goes", "is")] == [
        "start",
        "start",
        "word",
        "magazin",
        "string",
        "goes",
        "is",
    ]


def test_strip_qualifier_removes_only_a_trailing_parenthetical():
    assert strip_qualifier("Big Stone Gap (film)") == "Big Stone Gap"
    assert strip_qualifier("(band)") == ""
    assert strip_qualifier("Paris (Texas) Hotel") == "Paris (Texas) Hotel"


def test_alternation_matches_whole_connectors_in_a_name():
    name = re.compile(rf"[A-Z]\w*(?: {alternation(NAME_CONNECTORS)} [A-Z]\w*)*")
    assert name.search("in the Bank of America tower").group(0) == "Bank of America"
    assert name.search("Ludwig van Beethoven and del Monte").group(0) == "Ludwig van Beethoven"
    assert alternation(["a.b", "a"]) == r"(?:a\.b|a)"


def test_the_rules_keep_no_copy_of_the_word_lists_or_patterns():
    copies = {
        "a name-connector list": re.compile(r"\bvon\b.*\bvan\b|\bvan\b.*\bvon\b"),
        "a qualifier pattern": re.compile(re.escape(r"\s*\([^")),
        "a month list": re.compile(r"january\s+february"),
    }
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "text.py" and path.parent == PACKAGE:
            continue
        source = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(PACKAGE)}: {what}" for what, pattern in copies.items() if pattern.search(source)]
    assert found == [], "import these from haystack_agentic.text instead"
