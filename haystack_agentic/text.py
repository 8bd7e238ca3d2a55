# SPDX-License-Identifier: Apache-2.0
"""
The word-level pieces the deterministic text rules share.

The word-level pieces the deterministic text rules share: folding, word lists, a light stem, the words that join
the capitalised words of a name, and a title's trailing "(qualifier)".
"""

import html
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

#: A word token (Unicode letters, digits and underscore).
WORD_RE = re.compile(r"\w+", re.UNICODE)

#: C0 and C1 control characters except tab and newline.
CONTROL_CHARACTERS_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

#: A title's trailing parenthetical disambiguator: "Big Stone Gap (film)", "Mercury (planet)".
QUALIFIER_RE = re.compile(r"(?<!\s)\s*\([^()]*\)\s*$")  # starts where a whitespace run does: linear

#: English function words: articles, pronouns, prepositions, conjunctions, forms of "be".
STOPWORDS = frozenset(
    """a an the and or of in on at to for from by with as is was are were be been it its he she
    they them his her their this that these those there here who whom whose which what when where
    why how not no but if then than so also after before during since until while into onto over
    under about between through s""".split()
)

#: The month names (content in a date, noise when scoring a name's specificity).
MONTHS = frozenset("january february march april may june july august september october november december".split())

#: Words a question is phrased with that say nothing about its subject ("how many", "what is the name of").
PHRASING_WORDS = frozenset(
    "do does did has have had name named called many much more most one both same either other".split()
)

#: Words that never count as content when a text is matched against the store's pages.
NON_CONTENT_WORDS = STOPWORDS | PHRASING_WORDS | MONTHS | frozenset("being ones another known".split())

#: Words that carry no content in a question: function and phrasing words, modal verbs, pronouns, and the
#: nouns of "what kind/type of" and "which came first".
QUESTION_STOPWORDS = (
    STOPWORDS
    | PHRASING_WORDS
    | frozenset("can could would will shall should may might i you we us our your my me first kind type".split())
)

#: Lower-case words that may join the capitalised words of one name ("Bank of America", "Ludwig van Beethoven").
NAME_CONNECTORS = frozenset("of the de von van la le and du del da".split())

#: Light-stem suffixes, tried in this order: "starting" -> "start", "started" -> "start", "words" -> "word".
_STEM_SUFFIXES = ("ing", "ed", "es", "s")

#: The fewest characters a stem keeps ("string" stays, "starting" -> "start").
_MIN_STEM = 4


def fold(text: str) -> str:
    """Fold text for matching (NFC): HTML entities decoded, NFKD, lower case, Latin/Greek/Cyrillic accents removed."""
    if text.isascii() and "&" not in text:
        return text.lower()  # NFKD and entity decoding change nothing here: the common case, fast
    text = unicodedata.normalize("NFKD", html.unescape(text))
    kept = "".join(c for c in text if not "\u0300" <= c <= "\u036f")
    return unicodedata.normalize("NFC", kept).lower()


def folded_words(text: str) -> list[str]:
    """The folded word tokens of `text`, in order."""
    return WORD_RE.findall(fold(text))


def content_words(text: str) -> list[str]:
    """The folded word tokens of `text` that are not `NON_CONTENT_WORDS`, in order (repeats kept)."""
    return list(_content_words(text))


@lru_cache(maxsize=4096)
def _content_words(text: str) -> tuple[str, ...]:
    return tuple(w for w in WORD_RE.findall(fold(text)) if w not in NON_CONTENT_WORDS)


def stem(word: str) -> str:
    """A light stem: the first matching `_STEM_SUFFIXES` off if `_MIN_STEM` characters remain ("started" -> "start")."""
    for suffix in _STEM_SUFFIXES:
        if len(word) >= len(suffix) + _MIN_STEM and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def strip_qualifier(title: str) -> str:
    """A title without its trailing "(qualifier)", stripped: "Big Stone Gap (film)" -> "Big Stone Gap"."""
    return QUALIFIER_RE.sub("", title).strip()


def alternation(choices: Iterable[str]) -> str:
    """A regex group matching any of `choices` literally: `(?:a|b|c)`, longest first."""
    return "(?:" + "|".join(re.escape(c) for c in sorted(choices, key=lambda c: (-len(c), c))) + ")"
