# SPDX-License-Identifier: Apache-2.0

import asyncio
from typing import Any, Literal

from haystack import Document, component, default_to_dict, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import ChatMessage

from haystack_agentic.components.embedders._packaged_minilm import PACKAGED_MINILM
from haystack_agentic.dataclasses.loop_state import LoopState, ToolStep
from haystack_agentic.evidence.features import chunk_title, lexical_coverage
from haystack_agentic.evidence.judge import DEFAULT_EVIDENCE_PROMPT, contradicts_itself, parse_verdict
from haystack_agentic.evidence.scoring import LEXICAL_MODEL, MIN_SIMILARITY, OFFLINE_MODEL, EvidenceModel
from haystack_agentic.evidence.similarity import QuestionChunkSimilarity
from haystack_agentic.llm.calls import call_generator, call_generator_async, describe_error, role_options
from haystack_agentic.llm.prompts import render
from haystack_agentic.llm.retries import DEFAULT_MAX_RETRIES
from haystack_agentic.llm.serialization import generator_to_dict, role_from_dict, warm_up_generator

logger = logging.getLogger(__name__)

#: The offline verdict's reason for a question without content words or names.
UNCHECKABLE_REASON = "the question names nothing to look for in the documents (no content word or name)"

#: The answer of a run that gives up for want of evidence. Variables: `queries` (list of str), `reason`, `score`,
#: `threshold`.
DEFAULT_GIVE_UP_TEMPLATE = """\
I could not find the answer in the documents. \
{% if queries %}I searched for {% for q in queries %}"{{ q }}"\
{% if not loop.last %}{% if loop.revindex == 2 %} and {% else %}, {% endif %}{% endif %}{% endfor %}, \
but the passages found do not contain the answer{% else %}The evidence is not enough{% endif %}: {{ reason }} \
(evidence score {{ "%.2f" | format(score) }}, needed {{ "%.2f" | format(threshold) }})."""

#: The warning attached to an answer given without sufficient evidence. Variables: `reason`, `score`, `threshold`.
DEFAULT_WARNING_TEMPLATE = """\
The documents found may not contain the answer: {{ reason }} \
(evidence score {{ "%.2f" | format(score) }}, needed {{ "%.2f" | format(threshold) }})."""

#: Values of `on_insufficient_evidence`.
POLICIES = ("give_up", "answer_with_warning")

#: Offline evidence score from which an LLM judge's refusal does not decide alone: well above the calibrated models'
#: thresholds (about 0.35), where the offline check's sufficient verdicts were right on the benchmarks.
STRONG_OFFLINE_SCORE = 0.8


#: Init parameters serialised as they are (`chat_generator` is serialised apart).
_PLAIN_PARAMETERS = (
    "on_insufficient_evidence",
    "threshold",
    "embedding_model",
    "temperature",
    "generation_kwargs",
    "judge_prompt",
    "search_again",
    "max_chunks",
    "chunk_chars",
    "max_retries",
    "timeout",
)
#: The offline features read off the lexical coverage (`haystack_agentic.evidence.features`), in order.
_COVERAGE_FEATURES = (
    "entity_coverage",
    "entity_min",
    "subject_min",
    "word_coverage",
    "best_chunk_word_share",
    "title_share",
    "best_pair_word_share",
)


@component
class EvidenceChecker:
    """
    Checks that the chunks found support answering the question, before the final answer.

    Checks, before the loop's final answer, that the chunks found support answering the question: with an LLM judge
    when a `chat_generator` is given, else (or when it fails) offline (`haystack_agentic.evidence.scoring`).

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic import EvidenceChecker, LoopState

    checker = EvidenceChecker()
    checker.warm_up()
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    verdict = checker.check(question, [Document(content="Movieline was an American film magazine.")])
    print(verdict["sufficient"], verdict["reason"])  # False, "no passage mentions Arthur's Magazine, ..."
    ```
    """

    def __init__(
        self,
        on_insufficient_evidence: Literal["give_up", "answer_with_warning"] = "give_up",
        threshold: float | None = None,
        embedding_model: str | None = PACKAGED_MINILM,
        chat_generator: ChatGenerator | None = None,
        temperature: float | None = 0.0,
        generation_kwargs: dict[str, Any] | None = None,
        judge_prompt: str | None = None,
        search_again: int = 2,
        max_chunks: int = 10,
        chunk_chars: int = 1200,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float | None = None,
    ) -> None:
        """
        Create an EvidenceChecker.

        :param on_insufficient_evidence: Once searching again is not possible: `"give_up"` (default: the run ends
            `gave_up`) or `"answer_with_warning"` (answered; the result's `evidence` carries `warning`).
        :param threshold: Sufficient at offline score >= this, in [0, 1]. `None` (default): the model's calibrated one.
        :param embedding_model: The similarity feature's sentence-transformers model: `PACKAGED_MINILM` (default),
            a folder or a model name; `None` (or a model that fails to load, logged once): lexical features only.
        :param chat_generator: An LLM judge (any Haystack chat generator). `None` (default): offline check only.
        :param temperature: The judge's sampling temperature. Default 0.0.
        :param generation_kwargs: Extra generation kwargs for the judge.
        :param judge_prompt: Jinja template replacing `DEFAULT_EVIDENCE_PROMPT` (variables `question`, `chunks`).
        :param search_again: Most times per run a failed check sends the run back to search (0: never). Default 2.
        :param max_chunks: Most chunks (best first) given to the similarity feature and the judge. Default 10.
        :param chunk_chars: Most characters of each chunk shown to the judge. Default 1200.
        :param max_retries: Retries of a transient judge failure. Default 2.
        :param timeout: Seconds one judge call may take (`None`: no limit).
        :raises ValueError: On an unknown policy, a threshold outside [0, 1], or a count below its minimum.
        """
        if on_insufficient_evidence not in POLICIES:
            msg = f"on_insufficient_evidence must be one of {', '.join(POLICIES)}, got {on_insufficient_evidence!r}"
            raise ValueError(msg)
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            msg = f"threshold must be in [0, 1] (or None for the calibrated one), got {threshold}"
            raise ValueError(msg)
        if search_again < 0 or max_chunks < 1 or chunk_chars < 1:
            msg = "search_again must be >= 0, max_chunks and chunk_chars >= 1"
            raise ValueError(msg)
        self.on_insufficient_evidence = on_insufficient_evidence
        self.threshold = threshold
        self.embedding_model = embedding_model
        self.chat_generator = chat_generator
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.judge_prompt = judge_prompt
        self.search_again = search_again
        self.max_chunks = max_chunks
        self.chunk_chars = chunk_chars
        self.max_retries = max_retries
        self.timeout = timeout
        self._similarity = QuestionChunkSimilarity(embedding_model) if embedding_model else None
        self.load_error: str | None = None

    def warm_up(self) -> None:
        """Load the embedding model (a failure is logged once, and the lexical model used) and warm up the judge."""
        if self._similarity is not None and self.load_error is None:
            try:
                self._similarity.warm_up()
            except Exception as exc:
                self.load_error = f"{type(exc).__name__}: {exc}"
                message = "EvidenceChecker cannot load the embedding model {model} ({error}); using the lexical check."
                logger.warning(message, model=self.embedding_model, error=self.load_error)
        warm_up_generator(self.chat_generator)

    @property
    def model(self) -> EvidenceModel:
        """The offline model in use: `OFFLINE_MODEL` with the embedding model loaded, else `LEXICAL_MODEL`."""
        return OFFLINE_MODEL if self._similarity is not None and self.load_error is None else LEXICAL_MODEL

    def check(self, question: str, chunks: list[Document]) -> dict[str, Any]:
        """
        The offline check of `chunks` for `question` (no LLM call).

        :param question: The question.
        :param chunks: The chunks found, best first.
        :returns: The verdict: `sufficient` (bool), `score` and `threshold` (in [0, 1]), `method`, `reason` (one
            line), `missing` (entities not found or without a passage of their own, else words not found),
            `missing_kind` (`entities` or `words`), `entities`, `features` (by name), `best_chunk_id`, `chunk_ids`.
        """
        if self._similarity is not None and self._similarity._embedder is None and self.load_error is None:
            self.warm_up()
        model = self.model
        threshold = model.threshold if self.threshold is None else self.threshold
        texts = [doc.content or "" for doc in chunks]
        coverage = lexical_coverage(
            question, texts, [chunk_title(text, doc.meta) for text, doc in zip(texts, chunks, strict=True)]
        )
        features = {name: getattr(coverage, name) for name in _COVERAGE_FEATURES}
        best_id = None
        if model is OFFLINE_MODEL:
            similarity, best = self._similarity.best(question, chunks[: self.max_chunks])
            features["similarity"] = similarity
            best_id = chunks[best].id if best is not None else None
        # A question with no content word and no name ("What is it?") has every coverage at 1.0: never sufficient.
        checkable = bool(coverage.words or coverage.entities)
        score = model.score(features) if chunks and checkable else 0.0
        missing = coverage.missing_entities or coverage.entities_without_passage or coverage.missing_words
        reason = _reason(coverage, features, bool(chunks)) if checkable else UNCHECKABLE_REASON
        # A closest chunk this far from the question is not about it, however many of its words it holds.
        unrelated = bool(chunks) and features.get("similarity", 1.0) < MIN_SIMILARITY
        if unrelated and checkable:
            score = 0.0
            closest = features["similarity"]
            reason = f"no passage is about the question (closest similarity {closest:.2f}, below {MIN_SIMILARITY})"
        return {
            "sufficient": bool(chunks) and checkable and not unrelated and score >= threshold,
            "score": round(score, 4),
            "threshold": threshold,
            "method": model.name,
            "reason": reason,
            "missing": missing,
            "missing_kind": "entities" if coverage.missing_entities or coverage.entities_without_passage else "words",
            "entities": coverage.entities,
            "features": {name: round(value, 4) for name, value in features.items()},
            "best_chunk_id": best_id,
            "chunk_ids": [doc.id for doc in chunks],
        }

    def _judge_messages(self, state: LoopState) -> list[ChatMessage]:
        chunks = [(doc.content or "")[: self.chunk_chars] for doc in state.chunks[: self.max_chunks]]
        prompt = render(self.judge_prompt or DEFAULT_EVIDENCE_PROMPT, question=state.question, chunks=chunks)
        return [ChatMessage.from_user(prompt)]

    @staticmethod
    def _judged(offline: dict[str, Any], call: Any) -> dict[str, Any]:
        """The verdict from the judge's reply, or the offline one (with why) when the judge failed."""
        judged = None if call.error is not None else parse_verdict(call.text)
        if judged is None:
            why = describe_error(call.error) if call.error is not None else f"no verdict in {call.text[:120]!r}"
            logger.warning("The evidence judge failed ({why}); using the offline check.", why=why)
            return {**offline, "judge_error": why}
        # The judge does not decide alone when its words contradict its verdict, or when it refuses what the offline
        # check finds strongly supported: the offline verdict stands, with the judge's view noted.
        if contradicts_itself(judged):
            logger.info("The evidence judge contradicts itself ({verdict}); using the offline check.", verdict=judged)
            return {**offline, "judge_overruled": f"verdict contradicts its reason: {judged['reason'][:160]}"}
        if not judged["sufficient"] and offline["sufficient"] and offline["score"] >= STRONG_OFFLINE_SCORE:
            return {**offline, "judge_overruled": f"refused strong offline evidence: {judged['reason'][:160]}"}
        reason = judged["reason"] or ("the documents support an answer" if judged["sufficient"] else "")
        if not judged["sufficient"] and judged["missing"]:
            reason = (
                f"{reason.rstrip('.')}; missing: {judged['missing']}" if reason else f"missing: {judged['missing']}"
            )
        return {
            **offline,
            "sufficient": judged["sufficient"],
            "score": 1.0 if judged["sufficient"] else 0.0,
            "threshold": 0.5,
            "method": "llm_judge",
            "reason": reason or "the documents do not contain the answer",
            "missing": [judged["missing"]] if judged["missing"] else offline["missing"],
            "offline_score": offline["score"],
        }

    @component.output_types(answer=LoopState, fallback=LoopState, retry=LoopState, finished=LoopState)
    def run(self, state: LoopState | None = None, exhausted: LoopState | None = None) -> dict[str, LoopState]:
        """
        Check the evidence before the final answer, and route the run.

        :param state: A run the router sends to be answered (`pending_action` `answer`; `reflect`/`draft` pass).
        :param exhausted: A run that reached `max_iterations`, on its way to the fallback.
        :returns: Exactly one of: `answer` (to the answerer), `fallback` (to the fallback), `retry` (back into the
            loop to search again, with the turn uncounted so the controller counts it once), `finished` (ended
            `gave_up`). Every checked state carries the verdict in `evidence`.
        :raises ValueError: If neither input is given.
        """
        target, current = self._target(state, exhausted)
        if target == "pass":
            return {"answer": current}
        offline = self.check(current.question, list(current.chunks))
        if self.chat_generator is None or not current.chunks:
            return self._route(current, target, offline)
        call = call_generator(
            self.chat_generator, current, "evidence", self._judge_messages(current), **role_options(self)
        )
        return self._route(call.state, target, self._judged(offline, call))

    @component.output_types(answer=LoopState, fallback=LoopState, retry=LoopState, finished=LoopState)
    async def run_async(
        self, state: LoopState | None = None, exhausted: LoopState | None = None
    ) -> dict[str, LoopState]:
        """Async twin of `run`: awaits the judge's `run_async` when it has one."""
        target, current = self._target(state, exhausted)
        if target == "pass":
            return {"answer": current}
        # The offline check is CPU work (an embedding): a thread keeps the event loop serving other runs.
        offline = await asyncio.to_thread(self.check, current.question, list(current.chunks))
        if self.chat_generator is None or not current.chunks:
            return self._route(current, target, offline)
        call = await call_generator_async(
            self.chat_generator, current, "evidence", self._judge_messages(current), **role_options(self)
        )
        return self._route(call.state, target, self._judged(offline, call))

    @staticmethod
    def _target(state: LoopState | None, exhausted: LoopState | None) -> tuple[str, LoopState]:
        if exhausted is not None:
            return "fallback", exhausted
        if state is None:
            msg = "EvidenceChecker needs a `state` (from the router) or an `exhausted` state."
            raise ValueError(msg)
        if (state.pending_action or "answer") != "answer":
            return "pass", state  # json mode reflect/draft: not a final answer
        return "answer", state

    def _route(self, state: LoopState, target: str, verdict: dict[str, Any]) -> dict[str, LoopState]:
        previous = state.evidence or {}
        verdict = {**verdict, "checks": int(previous.get("checks", 0)) + 1}
        verdict["searched_again"] = int(previous.get("searched_again", 0))
        if verdict["sufficient"]:
            return {target: state.evolve(evidence={**verdict, "action": "answer"})}
        if target == "answer" and self._can_search_again(state, verdict, previous):
            verdict.update(action="search_again", searched_again=verdict["searched_again"] + 1)
            result = f"insufficient evidence ({verdict['score']:.2f}): {verdict['reason']}; searching again"
            step = ToolStep(iteration=state.iteration, action="evidence", result=result)
            # The router counted this turn as the run's last (count_final_turn); going back round the loop, the
            # controller counts it, so it is uncounted here.
            back = state.with_step(step).evolve(
                evidence=verdict, pending_action=None, iteration=max(0, state.iteration - 1)
            )
            return {"retry": back}
        variables = {"reason": verdict["reason"], "score": verdict["score"], "threshold": verdict["threshold"]}
        if self.on_insufficient_evidence == "answer_with_warning":
            verdict.update(action="answer_with_warning", warning=render(DEFAULT_WARNING_TEMPLATE, **variables))
            return {target: state.evolve(evidence=verdict)}
        verdict["action"] = "give_up"
        answer = render(DEFAULT_GIVE_UP_TEMPLATE, queries=list(state.queries_tried), **variables)
        result = f"insufficient evidence ({verdict['score']:.2f}): {verdict['reason']}"
        step = ToolStep(iteration=state.iteration, action="give_up", result=result)
        return {"finished": state.with_step(step).finish("gave_up", answer=answer, evidence=verdict)}

    def _can_search_again(self, state: LoopState, verdict: dict[str, Any], previous: dict[str, Any]) -> bool:
        if verdict["searched_again"] >= self.search_again or state.stop_reason:
            return False
        if state.iteration + 2 > state.limits.max_iterations:  # no room for one more search and an answer
            return False
        # After a refusal, only a run whose chunks changed is worth sending back again.
        return previous.get("action") != "search_again" or previous.get("chunk_ids") != verdict["chunk_ids"]

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary, its judge with `generator_to_dict`."""
        data = default_to_dict(self, **{name: getattr(self, name) for name in _PLAIN_PARAMETERS})
        data["init_parameters"]["chat_generator"] = generator_to_dict(self.chat_generator)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvidenceChecker":
        """:returns: The component from `to_dict()` output (`role_from_dict`)."""
        return role_from_dict(cls, data)


def _names(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _reason(coverage: Any, features: dict[str, float], has_chunks: bool) -> str:
    """One line saying what the offline features found."""
    if not has_chunks:
        return "no passage was found"
    parts = []
    if coverage.missing_entities:
        parts.append(f"no passage mentions {_names(coverage.missing_entities)}")
    elif coverage.entities_without_passage:
        parts.append(f"no passage is about {_names(coverage.entities_without_passage)}")
    elif coverage.entities:
        parts.append(f"the passages mention {_names(coverage.entities)}")
    missing_words = coverage.missing_words
    if missing_words:
        parts.append(
            f"{len(missing_words)} of {len(coverage.words)} question words are absent ({_names(missing_words)})"
        )
    if "similarity" in features:
        parts.append(f"closest passage similarity {features['similarity']:.2f}")
    return "; ".join(parts) or "the passages cover the question's words"
