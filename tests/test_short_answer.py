# SPDX-License-Identifier: Apache-2.0
"""The short answer span of SmolLM2-135M replies: replies recorded from the offline default on the shared HotpotQA
sample (`eval --configs bridge-entity`), with sentences of the chunks they were written from."""

import pytest

from haystack_agentic.components.generators._short_answer import short_answer

THAT_70S_SHOW = (
    "That '70s Show\nThat '70s Show is an American television period sitcom that originally aired on Fox from August "
    "23, 1998, to May 18, 2006. The series focused on the lives of a group of teenage friends living in the fictional "
    "suburban town of Point Place, Wisconsin, from May 17, 1976, to December 31, 1979."
)
YAKUZA_KIWAMI = (
    "Yakuza Kiwami\nYakuza Kiwami is a 2016 action-adventure game developed by Sega for the PlayStation 3 and "
    "PlayStation 4. It is a remake of \"Yakuza\", the first video game in the \"Yakuza\" series."
)


def test_an_invented_next_example_is_cut_off():
    question = (
        "What is the name of this South Asian island country, located in the Indian Ocean for which Ahmed Abdulla "
        "is a professional footballer?"
    )
    reply = f"The Maldives\n\nQuestion: {question}"
    chunk = "Maldives\nThe Maldives, officially the Republic of Maldives, is a South Asian island country."
    assert short_answer(question, reply, [chunk]) == "Maldives"


def test_a_span_never_crosses_a_sentence_end():
    question = "Pak Sao is a technique in the martial art specializing in what type of fighting?"
    reply = (
        "The short answer is that Pak Sao is a technique in the martial art of Wing Chun. The answer is not a "
        "complete answer to the question of what type of fighting is involved."
    )
    chunk = "Pak Sao\nIn Wing Chun martial arts, Pak Sao is a blocking technique similar to a parry."
    assert short_answer(question, reply, [chunk]) == "Wing Chun"


@pytest.mark.parametrize(
    ("question", "reply", "expected"),
    [
        (
            "Does the band God Lives Underwater or the band The Dear Hunter come from a larger state?",
            "The band God Lives Underwater or the band The Dear Hunter do not come from a larger state. The band "
            "God Lives Underwater is a product of a larger state.",
            "God Lives Underwater",
        ),
        (
            "Was Pennsylvania State University or University of California, San Francisco founded first?",
            "No, the Pennsylvania State University (PSTU) was founded on July 1, 1855.",
            "Pennsylvania State University",
        ),
        (
            "Which musician or band is from further north, Matthew Good or Modern Baseball?",
            "The answer is: Matthew Good.",
            "Matthew Good",
        ),
        (
            "Which movie was released first, 'Mean Girls' or the remake of 'April Fool's Day'?",
            "The movie released first was 'Mean Girls' (2003) and the movie released second was 'April Fool's Day'.",
            "Mean Girls",
        ),
    ],
)
def test_the_named_option_of_an_a_or_b_question_wherever_the_or_sits(question, reply, expected):
    assert short_answer(question, reply, []) == expected


def test_a_number_question_gets_the_number_of_the_reply():
    question = "When was the group formed whose Japanese debut EP/ video album is called Nobody for Everybody ?"
    reply = "The group was formed in 2006 by JYP Entertainment, which is a Japanese music company."
    chunk = "Wonder Girls\nWonder Girls was a South Korean girl group formed by JYP Entertainment in 2006."
    assert short_answer(question, reply, [chunk]) == "2006"
    dates = "The husband of William Roper was born on 7 February 1478."
    chunk = "Thomas More\nSir Thomas More (7 February 1478 - 6 July 1535) was an English lawyer."
    assert short_answer("When was the husband of William Roper born?", dates, [chunk]) == "7 February 1478"


def test_the_part_of_the_span_the_chunks_contain_is_kept():
    question = "Which gaming console was both Yakuza Kiwami and Yakuza 0 released on?"
    reply = "The short answer is: The Yakuza Kiwami and Yakuza 0 were both released on the Sony PlayStation 4."
    assert short_answer(question, reply, [YAKUZA_KIWAMI]) == "PlayStation 4"


def test_a_reply_without_an_answer_is_read_off_the_chunks():
    question = (
        "Matt McKenzie had a role on the television show that focused on the lives of teenage friends from what "
        "Wisconsin town?"
    )
    assert short_answer(question, "The answer is:", [THAT_70S_SHOW]) == "Point Place"


def test_nothing_to_read_leaves_the_reply_unchanged():
    assert short_answer("Who wrote it?", "The answer is:", []) == "The answer is:"
    assert short_answer("Who wrote it?", "", []) == ""
