# SPDX-License-Identifier: Apache-2.0
"""ShortAnswerExtractor: the span rules on SmolLM2-135M replies recorded from the offline default on the shared
HotpotQA sample (`eval --configs bridge-entity`), with sentences of the chunks they were written from; the component
alone, in a pipeline after the Answerer, and serialised."""

import copy

import pytest
import yaml
from conftest import load_yaml
from haystack import Document, Pipeline
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack.dataclasses import StreamingChunk
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import Answerer, LoopState, ShortAnswerExtractor, ToolStep
from haystack_agentic.components.extractors._comparison_answer import compare_by_year
from haystack_agentic.components.extractors.short_answer_extractor import extract_short_answer
from haystack_agentic.grounding.citations import strip_markers
from haystack_agentic.llm.streaming import ANSWER_META, ROLE_META


def short_answer(question, reply, chunks=(), option_pages=None) -> str:
    return extract_short_answer(question, reply, chunks, option_pages).text


THAT_70S_SHOW = (
    "That '70s Show\nThat '70s Show is an American television period sitcom that originally aired on Fox from August "
    "23, 1998, to May 18, 2006. The series focused on the lives of a group of teenage friends living in the fictional "
    "suburban town of Point Place, Wisconsin, from May 17, 1976, to December 31, 1979."
)
YAKUZA_KIWAMI = (
    "Yakuza Kiwami\nYakuza Kiwami is a 2016 action-adventure game developed by Sega for the PlayStation 3 and "
    'PlayStation 4. It is a remake of "Yakuza", the first video game in the "Yakuza" series.'
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
            (
                "The band God Lives Underwater or the band The Dear Hunter do not come from a larger state. The band "
                "God Lives Underwater is a product of a larger state."
            ),
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


MORGAN_LLYWELYN = (
    "Morgan Llywelyn\nMorgan Llywelyn (born December 3, 1937) is an American-Irish historical fantasy, historical "
    "fiction, and historical non-fiction writer."
)
ROBERT_JORDAN = (
    "Robert Jordan\nJames Oliver Rigney Jr. (October 17, 1948 – September 16, 2007), better known by his pen name "
    "Robert Jordan, was an American author of epic fantasy."
)
RED_BRANCH = (
    "Red Branch (novel)\nRed Branch (ISBN , 1989), by the Irish-American author Morgan Llywelyn, is a novel about the "
    "life of the Irish hero Cú Chulainn."
)


def test_a_born_first_question_is_settled_by_the_years_of_each_options_own_page():
    question = "Who was born first,  Morgan Llywelyn or Robert Jordan?"
    chunks = [MORGAN_LLYWELYN, RED_BRANCH, ROBERT_JORDAN]
    assert short_answer(question, "The short answer is:", chunks) == "Morgan Llywelyn"
    assert short_answer(question, "Robert Jordan was born first.", chunks) == "Morgan Llywelyn"
    later = "Who was born later, Morgan Llywelyn or Robert Jordan?"
    assert compare_by_year(later, ("Morgan Llywelyn", "Robert Jordan"), chunks) == "Robert Jordan"


def test_a_page_that_only_names_an_option_does_not_date_it():
    # Red Branch names Morgan Llywelyn but is a novel's page (1989): with Llywelyn's own page missing, no decision.
    question = "Who was born first, Morgan Llywelyn or Robert Jordan?"
    options, chunks = ("Morgan Llywelyn", "Robert Jordan"), [RED_BRANCH, ROBERT_JORDAN]
    assert compare_by_year(question, options, chunks) is None
    assert short_answer(question, "Robert Jordan.", chunks) == "Robert Jordan"  # the model's choice stands


def test_released_first_compares_the_years_the_pages_open_with():
    question = "Which was released first, The Greatest Game Ever Played or Hot Lead and Cold Feet?"
    chunks = [
        (
            "Hot Lead and Cold Feet\nHot Lead and Cold Feet (originally titled Welcome to Bloodshy) is a 1978 American "
            "comedy-western film produced by Walt Disney Productions."
        ),
        (
            "The Greatest Game Ever Played\nThe Greatest Game Ever Played is a 2005 biographical sports film based on "
            "the early life of golf champion Francis Ouimet."
        ),
    ]
    reply = "The Greatest Game Ever Played was released first."
    assert short_answer(question, reply, chunks) == "Hot Lead and Cold Feet"


def test_lived_longer_compares_life_spans_and_gives_up_without_both():
    west = (
        "Nathanael West\nNathanael West (born Nathan Weinstein; October 17, 1903 – December 22, 1940) was an "
        "American author, screenwriter and satirist."
    )
    options = ("Nelson Algren", "Nathanael West")
    assert compare_by_year("Which author lived longer, Nelson Algren or Nathanael West?", options, [west]) is None
    algren = "Nelson Algren\nNelson Ahlgren Abraham (March 28, 1909 – May 9, 1981) was an American writer."
    question = "Which author lived longer, Nelson Algren or Nathanael West?"
    assert compare_by_year(question, options, [west, algren]) == "Nelson Algren"


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)
_WORDY = st.lists(
    st.sampled_from(
        [
            *"The answer is : or and Between Who when born first Paris 1978 Hot Lead of the , . ?".split(),
            *["\n\n", "Question:", "'", '"', "(", ")", "É", "7"],
        ]
    ),
    max_size=40,
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(
    question=st.one_of(_TEXT, _WORDY),
    reply=st.one_of(_TEXT, _WORDY),
    chunks=st.lists(st.one_of(_TEXT, _WORDY), max_size=3),
)
def test_any_reply_gets_a_defined_answer(question, reply, chunks):
    """Whatever the model writes, the rule returns a string: the reply, "yes"/"no", or text from the reply, the
    question's options or the chunks; it never raises."""
    answer = short_answer(question, reply, chunks)
    assert isinstance(answer, str)
    if answer in (reply, reply.strip(), "yes", "no"):
        return
    assert answer in reply or answer in question or any(answer in c for c in chunks), answer


def test_inputs_a_direct_caller_may_pass_are_handled():
    # None among the chunks, one string as the chunks, a number with a comma as an option
    born_first = "Who was born first, Vladimir Nabokov or Harper Lee?"
    assert short_answer(born_first, "Harper Lee.", [None, "x"]) == "Harper Lee"
    assert short_answer("Who directed X?", "The answer is:", [None]) == "The answer is:"
    assert short_answer("Who directed Jaws?", "Steven Spielberg", "Jaws was directed by Steven Spielberg.") == (
        "Steven Spielberg"
    )
    assert short_answer("Which is larger, 1,000 or 2,000?", "2,000 is larger.") == "2,000"
    assert short_answer("Which city?", "Paris (France).") == "Paris"


def test_a_long_winded_reply_is_cut_in_linear_time():
    # the span search looks at the reply's first 2,000 characters and at parts of at most 8 words
    reply = "The director is " + "blah " * 20000  # the search used to grow with the cube of a run's length
    answer = short_answer("Who directed X?", reply, ["x blah y"])
    assert answer.startswith("blah blah") and len(answer) <= 2000


def test_glued_dates_and_measures():
    lee = "Harper Lee\nNelle Harper Lee (April 28, 1926February 19, 2016) was an American novelist."
    nabokov = "Vladimir Nabokov\nVladimir Nabokov (22 April 1899 – 2 July 1977) was a Russian-American novelist."
    options = ("Harper Lee", "Vladimir Nabokov")
    assert compare_by_year("Which author lived longer, Harper Lee or Vladimir Nabokov?", options, [lee, nabokov]) == (
        "Harper Lee"
    )
    peaks = ["A\nA (1850 m) was first climbed in 1970.", "B\nB was first climbed in 1950."]
    assert compare_by_year("Which was climbed first, A or B?", ("A", "B"), peaks) == "B"


NABOKOV_QUESTION = "Who was born first, Vladimir Nabokov or Harper Lee?"
NABOKOV_PAGES = [  # real pages of the shared HotpotQA sample, opening sentences
    ("stories", "The Stories of Vladimir Nabokov\nThe Stories of Vladimir Nabokov is a 1995 collection.", 9.0),
    ("lee", "Harper Lee\nNelle Harper Lee (April 28, 1926February 19, 2016) was an American novelist.", 8.0),
    ("nabokov", "Vladimir Nabokov\nVladimir Nabokov (22 April 1899 – 2 July 1977) was a novelist.", 7.0),
]


def _nabokov_state(**changes) -> LoopState:
    docs = tuple(
        Document(id=i, content=text, meta={"title": text.split("\n")[0]}, score=s) for i, text, s in NABOKOV_PAGES
    )
    step = ToolStep(1, "search", query=NABOKOV_QUESTION, returned_chunk_ids=("stories", "lee", "nabokov"))
    return LoopState(question=NABOKOV_QUESTION, chunks=docs, pending_action="answer", tool_history=(step,), **changes)


def _answer_then_extract(reply: str, **answerer_options) -> Pipeline:
    pipeline = Pipeline()
    llm = ScriptedChatGenerator([{"text": reply}], per_call=True)
    pipeline.add_component("answerer", Answerer(chat_generator=llm, stream_answer=False, **answerer_options))
    pipeline.add_component(
        "extractor", ShortAnswerExtractor(chunks_per_search=answerer_options.get("chunks_per_search"))
    )
    pipeline.connect("answerer.finished", "extractor.state")
    return pipeline


def test_in_a_pipeline_a_date_comparison_reads_an_option_page_outside_the_prompt():
    """`chunks_per_search=2` keeps the first search's top 2 chunks for the prompt; the date comparison still reads
    the option's own page that ranked 3rd."""
    pipeline = _answer_then_extract("Harper Lee was born first.", chunks_per_search=2)
    done = pipeline.run({"answerer": {"state": _nabokov_state()}})["extractor"]["state"]
    assert strip_markers(done.outcome.answer) == "Vladimir Nabokov"
    # an option of the question is not read from a chunk: it is cited to a sentence that names it
    assert [c["claim"] for c in done.outcome.citations] == ["Vladimir Nabokov"]
    assert "Vladimir Nabokov" in done.outcome.citations[0]["quote"]


@pytest.mark.parametrize("run_async", [False, True])
async def test_in_a_pipeline_the_answer_tagged_stream_is_the_final_answer(run_async):
    pipeline = _answer_then_extract("The novelist Harper Lee was born in 1926.")
    chunks: list[StreamingChunk] = []
    data = {
        "answerer": {"state": _nabokov_state(), "streaming_callback": chunks.append},
        "extractor": {"streaming_callback": chunks.append},
    }
    outputs = await pipeline.run_async(data) if run_async else pipeline.run(data)
    done = outputs["extractor"]["state"]
    assert strip_markers(done.outcome.answer) == "Vladimir Nabokov"  # the pages' years settle it
    assert "".join(c.content for c in chunks if c.meta.get(ANSWER_META)) == done.outcome.answer
    assert (
        "".join(c.content for c in chunks if not c.meta.get(ANSWER_META)) == "The novelist Harper Lee was born in 1926."
    )
    assert {c.meta[ROLE_META] for c in chunks} == {"answer"}


def test_only_an_answer_written_from_the_chunks_is_cut():
    extractor = ShortAnswerExtractor()
    kept_draft = _nabokov_state(draft="Harper Lee was born in 1926.").finish(
        "answered", answer="Harper Lee was born in 1926."
    )
    error = _nabokov_state().finish("error", error="Answer LLM failed")
    gave_up = _nabokov_state().finish("gave_up", answer="Not enough evidence.")
    for state in (kept_draft, error, gave_up):
        assert extractor.run(state=state)["state"] is state
    chunks: list[StreamingChunk] = []
    extractor.run(state=error, streaming_callback=chunks.append)
    assert chunks == []  # no answer, nothing streamed


def test_the_usage_example_cuts_and_cites():
    chunk = Document(content="Adriana Trigiani is an author based in Greenwich Village, New York City.")
    state = LoopState(question="Where is Adriana Trigiani based?", chunks=(chunk,)).finish(
        "answered", answer="Adriana Trigiani is based in Greenwich Village, New York City."
    )
    done = ShortAnswerExtractor().run(state=state)["state"]
    assert done.outcome.answer == "Greenwich Village, New York City [1]"
    assert done.outcome.citations[0]["document_id"] == chunk.id


def test_to_dict_from_dict_and_a_yaml_round_trip():
    extractor = ShortAnswerExtractor(max_chunks=4, chunks_per_search=2)
    data = component_to_dict(extractor, "extractor")
    assert data == {
        "type": "haystack_agentic.components.extractors.short_answer_extractor.ShortAnswerExtractor",
        "init_parameters": {"max_chunks": 4, "chunks_per_search": 2},
    }
    restored = component_from_dict(ShortAnswerExtractor, copy.deepcopy(data), "extractor")
    assert (restored.max_chunks, restored.chunks_per_search) == (4, 2)
    pipeline = _answer_then_extract("Harper Lee.", chunks_per_search=2)
    loaded = load_yaml(pipeline.dumps())
    assert loaded.to_dict() == pipeline.to_dict()
    assert yaml.safe_load(pipeline.dumps())["connections"] == [
        {"sender": "answerer.finished", "receiver": "extractor.state"}
    ]
    with pytest.raises(ValueError, match="at least 1"):
        ShortAnswerExtractor(chunks_per_search=0)
