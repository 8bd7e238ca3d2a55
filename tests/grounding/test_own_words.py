# SPDX-License-Identifier: Apache-2.0
"""`has_own_words`: what counts as an answer with no words of its own (never a result `answered`)."""

import pytest

from haystack_agentic.grounding.markers import has_own_words

CALL = '{"name": "search", "arguments": {"query": "Dow Chemical Company headquarters"}}'


@pytest.mark.parametrize(
    "text",
    [None, "", "  \n ", "\u200b\u2060", "[5]", "[5][6].", "[1, 2]", CALL, f"<tool_call>{CALL}</tool_call>",
     f"<tools>\n{CALL}\n</tools>", f"```json\n{CALL}\n```", f"[{CALL}, {CALL}]", f"Calling search.\n{CALL} [1]",
     f"Searching for the question first.\n{CALL}"],
)  # fmt: skip
def test_no_words_of_its_own(text):
    assert has_own_words(text) is False


@pytest.mark.parametrize(
    "text",
    ["Midland, Michigan", "1998 [2]", "Yes.", '{"answer": 1}', "Greenwich Village [1][2]",
     f"The headquarters are in Midland, Michigan.\nI searched with {CALL} and read the second result, which says so."],
)  # fmt: skip
def test_words_of_its_own(text):
    assert has_own_words(text) is True
