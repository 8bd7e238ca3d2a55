# SPDX-License-Identifier: Apache-2.0
"""`ShortAnswerExtractor`, and the rules that cut a full-sentence answer down to the short answer span it contains."""

import re
from collections.abc import Sequence
from typing import NamedTuple

from haystack import component, logging
from haystack.dataclasses import StreamingCallbackT, StreamingChunk

from haystack_agentic.components.extractors._comparison_answer import compare_by_year
from haystack_agentic.components.generators.answerer import prompt_chunks
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.citations import cite, strip_markers
from haystack_agentic.llm.streaming import emit, emit_async, pick_callback, tagged
from haystack_agentic.text import MONTHS, NAME_CONNECTORS, NON_CONTENT_WORDS, alternation, fold

logger = logging.getLogger(__name__)

_WORD_RE = re.compile(r"[\w'’]+", re.UNICODE)
_YES_NO_START = frozenset("is are was were do does did can could has have had will would should".split())
_NEGATION_RE = re.compile(r"\b(no|not|never|neither|nor)\b|n't\b", re.IGNORECASE)
_OPTIONS_RE = re.compile(r"(?:,|:)?\s*([^,?:]+?)\s+or\s+([^,?]+?)\s*\??$")
#: Questions whose answer is a number or a date: a span with a digit is preferred.
_NUMBER_QUESTION_RE = re.compile(
    r"\b(when|what year|which year|what decade|what century|how many|how much|how old|how long|what age|what date)\b",
    re.IGNORECASE,
)
#: Where a clause ends inside a question: a colon, semicolon or a comma that is not inside a number ("1,000").
_CLAUSE_BREAK_RE = re.compile(r"[:;]|,(?!\d)")
_BETWEEN_RE = re.compile(r"^(?:between|of)\s+(.+?)\s+and\s+(.+?)[,\s]+(?:which|who)\b", re.IGNORECASE)
#: Words that never start or carry a span. Month names are content here (they are part of dates), unlike in
#: the entity scoring's list; the rest are the words small models wrap an answer in ("The short answer is").
_REPLY_WORDS = frozenset("answer answers short question reply document documents context".split())
_SPAN_FUNCTION_WORDS = (NON_CONTENT_WORDS - MONTHS) | _REPLY_WORDS
#: How much of a reply is searched for a span (64 tokens of the packaged model are ~300 characters).
_MAX_REPLY_CHARS = 2000
#: The longest part of a run looked up in the chunks (a name or date is rarely longer; keeps the lookup linear).
_MAX_PART_WORDS = 8
#: Connector words (`of`, `de`...) a name may run through in a row.
_MAX_PENDING_CONNECTORS = 2
#: Question word stems a chunk sentence must share to be searched for the answer span.
_MIN_SHARED_STEMS = 2
#: Where a small model starts inventing the next example of its prompt: the reply is cut there.
_RUNAWAY_RE = re.compile(r"\n\s*(?:question|context|documents?|q|a)\s*:", re.IGNORECASE)
#: A sentence end between two words: ., ! or ? (after a word of 3+ characters, so "D.C." and "St. Louis" stay
#: whole), a semicolon, or a line break.
_SENTENCE_END_RE = re.compile(r"[!?;]|\n|(?<=\w{3})\.\s")
#: An option of an "A or B" question: quoted text, or a run of capitalised words / numbers (joiners inside).
_NAME_TOKEN_RE = re.compile(r"[\"“'‘][^\"”’]+[\"”'’]|\d[\d,.]*\d|[\w'’.-]+", re.UNICODE)


def _name_run(text: str, from_end: bool, skip_first: bool = False) -> str:
    """The run of name tokens ending `text` (or, skipping lowercase words, starting it), as `text` writes it."""
    tokens = list(_NAME_TOKEN_RE.finditer(text))[1 if skip_first else 0 :]
    seq = list(reversed(tokens)) if from_end else tokens
    run: list[re.Match] = []
    for token in seq:
        word = token.group(0)
        if word[0] in "\"“'‘" or word[0].isupper() or word[0].isdigit():
            run.append(token)
        elif run and fold(word) in NAME_CONNECTORS:
            run.append(token)
        elif run or from_end:
            break
    while run and run[-1].group(0) in NAME_CONNECTORS:  # a lowercase "of"/"the" at the edge; "The" in a title stays
        run.pop()
    if not run:
        return ""
    first, last = (run[-1], run[0]) if from_end else (run[0], run[-1])
    return text[first.start() : last.end()]


def _options(question: str) -> tuple[str, str] | None:
    """The two options of an "A or B" question: named ones around the " or " anywhere, lowercase ones at its end."""
    text = question.strip().rstrip("?").strip()
    sides: list[tuple[str, str, bool]] = []
    if " or " in text:
        left, right = text.rsplit(" or ", 1)
        # Without a clause break the left part starts the question: its first word is capitalised as a sentence start.
        opening = not _CLAUSE_BREAK_RE.search(left)
        sides.append((_CLAUSE_BREAK_RE.split(left)[-1], _CLAUSE_BREAK_RE.split(right)[0], opening))
    between = _BETWEEN_RE.search(text)  # "Between A and B, which ...", "Of the players A and B, which ..."
    if between:
        sides.append((between.group(1), between.group(2), False))
    for left, right, opening in sides:
        first, second = _name_run(left, from_end=True, skip_first=opening), _name_run(right, from_end=False)
        if first and second:
            return first, second
    match = _OPTIONS_RE.search(question.strip())
    return (match.group(1).strip(), match.group(2).strip()) if match else None


def _choose_option(answer: str, options: tuple[str, str]) -> str | None:
    folded = fold(answer)
    hits = []
    for option in options:
        words = [w for w in _WORD_RE.findall(fold(option)) if w not in NON_CONTENT_WORDS]
        positions = [folded.find(w) for w in words if w in folded]
        if positions:
            hits.append((len(positions) / max(len(words), 1), -min(positions), option))
    return max(hits)[2].strip("\"“”'‘’") if hits else None


def _clean_reply(text: str) -> str:
    """The reply without an invented next example or a lead-in such as "The short answer is:"."""
    runaway = _RUNAWAY_RE.search(text)
    if runaway and text[: runaway.start()].strip():
        text = text[: runaway.start()]
    return text.strip()


def _runs(answer: str, question_words: set[str]) -> list[tuple[int, int, int]]:
    """`(start, end, sentence number)` of each maximal run of words the question lacks (joiners inside)."""
    spans: list[tuple[int, int, int]] = []
    start = end = None
    pending = 0
    sentence = 0
    previous_end = 0
    for match in _WORD_RE.finditer(answer):
        if _SENTENCE_END_RE.search(answer, previous_end, match.start()):
            if start is not None:
                spans.append((start, end, sentence))
                start, end, pending = None, None, 0
            sentence += 1
        previous_end = match.end()
        word = fold(match.group(0))
        new = word not in question_words and word not in _SPAN_FUNCTION_WORDS
        if new:
            start = match.start() if start is None else start
            end, pending = match.end(), 0
        elif start is not None and word in NAME_CONNECTORS and pending < _MAX_PENDING_CONNECTORS:
            pending += 1  # may continue the run
        elif start is not None:
            spans.append((start, end, sentence))
            start, end, pending = None, None, 0
    if start is not None:
        spans.append((start, end, sentence))
    return spans


_CHUNK_SENTENCE_RE = re.compile(r"(?<=\w{3}[.!?])\s+|\n+")
_NUMBER_SPAN_RE = re.compile(
    r"(?:\d{1,2}\s+)?(?:(?:" + "|".join(month.title() for month in sorted(MONTHS)) + r")"
    r"\s+(?:\d{1,2},?\s+)?)?\d[\d,.]*(?:\s+(?:million|billion|thousand|hundred))?"
)
_CAPITALISED_RUN_RE = re.compile(
    rf"[A-Z0-9][\w'’.-]*(?:\s+(?:{alternation(NAME_CONNECTORS - {'and'})}\s+){{0,2}}[A-Z0-9][\w'’.-]*)*", re.UNICODE
)


def _stems(text: str) -> set[str]:
    """Content words of `text`, folded and cut to 5 characters (a crude stem: "headquartered" ~ "headquarter")."""
    return {w[:5] for w in _WORD_RE.findall(fold(text)) if w not in _SPAN_FUNCTION_WORDS}


def _from_chunks(
    question: str, chunk_texts: Sequence[str], wants_number: bool
) -> tuple[str, tuple[int, int, int]] | None:
    """The name (or number) a chunk sentence sharing most question words adds, nearest them, and where it is."""
    q_stems = _stems(question)
    best: tuple[float, str, tuple[int, int, int]] | None = None
    for index, text in enumerate(chunk_texts):
        offsets = [0, *(m.end() for m in _CHUNK_SENTENCE_RE.finditer(text))]
        for offset, sentence in zip(offsets, _CHUNK_SENTENCE_RE.split(text), strict=False):
            words = [(m.start(), fold(m.group(0))[:5]) for m in _WORD_RE.finditer(sentence)]
            shared = [pos for pos, stem in words if stem in q_stems]
            overlap = len({stem for _, stem in words if stem in q_stems})
            if overlap < _MIN_SHARED_STEMS:
                continue
            pattern = _NUMBER_SPAN_RE if wants_number else _CAPITALISED_RUN_RE
            for match in pattern.finditer(sentence):
                span = match.group(0).strip(" ,.")
                if match.start() == 0 and " " not in span:
                    continue  # one capitalised word opening the sentence ("Similarly", "It")
                span_stems = _stems(span)
                if not span_stems or len(span_stems & q_stems) * 2 >= len(span_stems):
                    continue  # the question's own words, or a sentence start such as "The"
                distance = min(abs(match.start() - pos) for pos in shared) / 100
                score = overlap - distance
                if best is None or score > best[0]:
                    begin = offset + match.start() + match.group(0).index(span)
                    best = (score, span, (index, begin, begin + len(span)))
    return (best[1], best[2]) if best else None


def _texts(chunk_texts: Sequence[str] | str | None) -> list[str]:
    """Chunk contents as a list of strings (one string is one chunk; `None` entries are dropped)."""
    return [chunk_texts] if isinstance(chunk_texts, str) else [c for c in chunk_texts or () if isinstance(c, str)]


class ShortAnswer(NamedTuple):
    """
    A short answer and where it is.

    `location` is `(chunk index, start, end)` of the first chunk holding it (case aside), or `None`.
    """

    text: str
    location: tuple[int, int, int] | None = None


def _located(piece: str, chunk_texts: Sequence[str]) -> ShortAnswer:
    """The span with the first chunk that contains it (folded), when folding keeps that chunk's offsets."""
    wanted = fold(piece)
    for index, chunk in enumerate(chunk_texts):
        folded = fold(chunk)
        position = folded.find(wanted) if wanted and len(folded) == len(chunk) else -1
        if position >= 0:
            return ShortAnswer(piece, (index, position, position + len(piece)))
    return ShortAnswer(piece)


def extract_short_answer(
    question: str,
    answer: str,
    chunk_texts: Sequence[str] = (),
    option_pages: Sequence[str] | None = None,
) -> ShortAnswer:
    """
    Extract the short answer span of `answer`, or return the answer unchanged.

    The short answer span of `answer`: the run of words it adds to the question, from its first sentence that has
    one, ranked by a digit (number questions), a chunk containing it (in the chunk's spelling), a name, then length;
    "yes"/"no" for yes/no questions; the option of an "A or B" question (by year for date comparisons); read off the
    chunks when the reply adds nothing. Deterministic; when nothing qualifies, the answer is returned unchanged.

    :param question: The user's question.
    :param answer: The model's answer.
    :param chunk_texts: The contents of the chunks the answer was written from (`None` entries are skipped).
    :param option_pages: Where a date comparison's option pages are looked for (default: `chunk_texts`).
    :returns: The span and its location in `chunk_texts` (see `ShortAnswer`).
    """
    text = _clean_reply(answer or "")
    if not text:
        return ShortAnswer(answer)
    chunk_texts = _texts(chunk_texts)
    q_words = _WORD_RE.findall(fold(question or ""))
    options = _options(question or "")
    if options is not None:
        by_year = compare_by_year(question, options, chunk_texts if option_pages is None else _texts(option_pages))
        if by_year is not None:
            return ShortAnswer(by_year.strip("\"“”'‘’"))
        chosen = _choose_option(text, options)
        if chosen is not None:
            return ShortAnswer(chosen)
    if q_words and q_words[0] in _YES_NO_START and options is None:
        return ShortAnswer("no" if _NEGATION_RE.search(text) else "yes")
    runs = _runs(text[:_MAX_REPLY_CHARS], set(q_words))  # the span is at the start; padding can be very long
    wants_number = _NUMBER_QUESTION_RE.search(question) is not None
    if not runs:
        read = _from_chunks(question, chunk_texts, wants_number)
        return ShortAnswer(*read) if read else _located(text, chunk_texts)
    first_sentence = min(run[2] for run in runs)
    runs = [run for run in runs if run[2] == first_sentence]  # later sentences are the model's padding
    folded_chunks = [fold(c) for c in chunk_texts]

    def in_chunks(span: tuple[int, int, int]) -> tuple[int, int] | None:
        """The span, or its longest named part (at most `_MAX_PART_WORDS` words), that a chunk contains."""
        words = list(_WORD_RE.finditer(text, span[0], span[1]))
        if not folded_chunks or not words:
            return None
        whole_text = fold(text[words[0].start() : words[-1].end()])
        if any(whole_text in c for c in folded_chunks):
            return words[0].start(), words[-1].end()
        for size in range(min(len(words) - 1, _MAX_PART_WORDS), 0, -1):
            for i in range(len(words) - size + 1):
                part = words[i : i + size]
                raw = fold(text[part[0].start() : part[-1].end()])
                named = any(w.group(0)[0].isupper() or w.group(0)[0].isdigit() for w in part)
                edges = {fold(part[0].group(0)), fold(part[-1].group(0))}
                if named and not edges & _SPAN_FUNCTION_WORDS and any(raw in c for c in folded_chunks):
                    return part[0].start(), part[-1].end()
        return None

    def ranked(span: tuple[int, int, int]) -> tuple[tuple[bool, bool, bool, int, int], tuple[int, int]]:
        """The run's rank and the span it stands for (its part in a chunk, if a chunk has one)."""
        found = in_chunks(span)
        best = found or span[:2]
        words = _WORD_RE.findall(text[best[0] : best[1]])
        typed = any(any(ch.isdigit() for ch in w) for w in words) if wants_number else True
        named = any(w[0].isupper() or w[0].isdigit() for w in words)
        return (typed, found is not None, named, best[1] - best[0], -best[0]), best

    _, best = max((ranked(run) for run in runs), key=lambda pair: pair[0])
    piece = text[best[0] : best[1]].strip(" ,;:.\"“”'‘’()")
    if piece.count("(") > piece.count(")"):  # "Paris (France" -> "Paris"
        piece = piece[: piece.rindex("(")].rstrip(" ,;:")
    return _located(piece or text, chunk_texts)


@component
class ShortAnswerExtractor:
    """
    Cuts the loop's final answer down to the short answer span it contains.

    Cuts the loop's final answer down to the short answer span it contains (`extract_short_answer`), cited by the
    chunk sentence it was taken from, for models that answer in sentences.

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic import LoopState, ShortAnswerExtractor

    chunk = Document(content="Adriana Trigiani is an author based in Greenwich Village, New York City.")
    state = LoopState(question="Where is Adriana Trigiani based?", chunks=(chunk,)).finish(
        "answered", answer="Adriana Trigiani is based in Greenwich Village, New York City."
    )
    print(ShortAnswerExtractor().run(state=state)["state"].outcome.answer)  # Greenwich Village, New York City [1]
    ```
    """

    def __init__(self, max_chunks: int = 6, chunks_per_search: int | None = None) -> None:
        """
        Create a ShortAnswerExtractor.

        Set both parameters to the `Answerer`'s, so the span is looked up in the chunks the answer was written from
        (date comparisons read every chunk of the run).

        :param max_chunks: Most chunks (best first). Default 6.
        :param chunks_per_search: `None` (default): the best `max_chunks` by score; N: the best N of each search.
        :raises ValueError: If `max_chunks` or `chunks_per_search` is below 1.
        """
        if max_chunks < 1 or (chunks_per_search is not None and chunks_per_search < 1):
            msg = "max_chunks and chunks_per_search must be at least 1"
            raise ValueError(msg)
        self.max_chunks = max_chunks
        self.chunks_per_search = chunks_per_search

    @component.output_types(state=LoopState)
    def run(self, state: LoopState, streaming_callback: StreamingCallbackT | None = None) -> dict[str, LoopState]:
        """
        Cut the answer to its short answer span, and stream the final answer.

        :param state: The ended run's state from the `Answerer` (`finished`).
        :param streaming_callback: A sync callback; receives the final answer as one answer-tagged `StreamingChunk`.
        :returns: `{"state": LoopState}`: the answer cut and cited, or the state unchanged unless it ended
            `answered` without a controller draft.
        :raises ValueError: If the callback is an async function (use `run_async`).
        """
        out = self._extract(state)
        emit(pick_callback(None, streaming_callback, is_async=False), _answer_chunk(out))
        return {"state": out}

    @component.output_types(state=LoopState)
    async def run_async(
        self, state: LoopState, streaming_callback: StreamingCallbackT | None = None
    ) -> dict[str, LoopState]:
        """Async twin of `run` (a sync or async callback)."""
        out = self._extract(state)
        await emit_async(pick_callback(None, streaming_callback, is_async=True), _answer_chunk(out))
        return {"state": out}

    def _extract(self, state: LoopState) -> LoopState:
        if state.outcome.terminated_by != "answered" or state.outcome.answer is None or state.draft:
            return state
        reply = strip_markers(state.outcome.answer) or state.outcome.answer
        shown = prompt_chunks(state, self.max_chunks, self.chunks_per_search)
        # A date comparison's option pages: every chunk of the run (one may rank outside the prompt's).
        pages = [c.content or "" for c in state.chunks]
        short = extract_short_answer(state.question, reply, [c.content or "" for c in shown], option_pages=pages)
        if short.text != reply:
            logger.debug("Short answer {short!r} from the reply {text!r}", short=short.text, text=reply)
        return cite(state, short.text, shown=shown, located=short.location)


def _answer_chunk(state: LoopState) -> list[StreamingChunk]:
    """The final answer as one answer-tagged chunk (none without an answer)."""
    answer = state.outcome.answer
    return [] if answer is None else [tagged(StreamingChunk(content=answer), "answer", answer=True)]
