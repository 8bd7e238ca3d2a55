# SPDX-License-Identifier: Apache-2.0
"""`LLMJudgeGrounder`: sentence-level grounding of the loop's answer by any chat generator, for users without HHEM."""

import re
import time
from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging
from haystack.components.generators.chat.types import ChatGenerator
from haystack.dataclasses import ChatMessage

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.assembly import skip_reason, skipped
from haystack_agentic.grounding.citations import cite, claim_sentences, settle, strip_markers
from haystack_agentic.grounding.sentence_splitter import plain
from haystack_agentic.llm.calls import call_generator, call_generator_async, describe_error, role_options
from haystack_agentic.llm.prompts import render
from haystack_agentic.llm.serialization import generator_from_dict_inplace, generator_to_dict, warm_up_generator
from haystack_agentic.llm.valid_text import decode_json

logger = logging.getLogger(__name__)

#: The judge prompt. Variables: `question`, `chunks` (list of str, indexed from 0), `sentences` (list of str,
#: numbered from 1).
DEFAULT_JUDGE_PROMPT = """\
You check whether each sentence of an answer is supported by the context chunks.

Context chunks:
{% for chunk in chunks %}
[{{ loop.index0 }}] {{ chunk }}
{% endfor %}

Question: {{ question }}

Answer sentences:
{% for sentence in sentences %}
{{ loop.index }}. {{ sentence }}
{% endfor %}

For every sentence, reply with one JSON object and nothing else:
{"claims": [{"sentence": <number>, "claim": "<the claim it makes>", "supported": true or false, \
"chunks": [<indices of the chunks that support it>]}]}"""

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", flags=re.DOTALL | re.IGNORECASE)
_TRUE_WORDS = {"true", "yes", "supported", "faithful", "entailed", "correct"}


def _json_candidates(text: str) -> list[str]:
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    for opener, closer in (("{", "}"), ("[", "]")):
        first, last = text.find(opener), text.rfind(closer)
        if 0 <= first < last:
            candidates.append(text[first : last + 1])
    return [text, *candidates]


def parse_claims(text: str) -> list[dict[str, Any]] | None:
    """
    Parse the judge's reply leniently: a JSON object with `claims`, or a bare list, in a code fence or prose.

    :param text: The reply.
    :returns: The claim dicts, or `None` when no JSON with claims is found.
    """
    for candidate in _json_candidates(text or ""):
        try:
            data = decode_json(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            data = data.get("claims") or data.get("sentences") or data.get("verdicts")
        if isinstance(data, list) and all(isinstance(item, dict) for item in data):
            return data
    return None


def _verdict(claim: dict[str, Any]) -> bool:
    value = claim.get("supported", claim.get("verdict", claim.get("faithful")))
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE_WORDS


def _failed(state: LoopState, exc: Exception) -> LoopState:
    return skipped(state, f"the grounder failed: {type(exc).__name__}: {exc}")


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        return None


@component
class LLMJudgeGrounder:
    """
    Grounds the loop's answer sentence by sentence with a chat generator as judge.

    Grounds the loop's answer sentence by sentence with a chat generator as judge (usage role `grounding`), with the
    same result as `HHEMGrounder`.

    ### Usage example
    ```python
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack_agentic import LLMJudgeGrounder

    grounder = LLMJudgeGrounder(chat_generator=OpenAIChatGenerator(model="gpt-4o-mini"), temperature=0.0)
    ```
    """

    def __init__(
        self,
        chat_generator: ChatGenerator,
        temperature: float | None = 0.0,
        generation_kwargs: dict[str, Any] | None = None,
        judge_prompt: str | None = None,
        threshold: float = 0.5,
        max_chunks: int = 10,
        chunk_chars: int = 2000,
        language: str = "en",
    ) -> None:
        """
        Create the judge grounder.

        :param chat_generator: Any Haystack chat generator.
        :param temperature: Sampling temperature of the judge. Default 0.0.
        :param generation_kwargs: Extra generation kwargs.
        :param judge_prompt: Jinja template replacing `DEFAULT_JUDGE_PROMPT` (variables `question`, `chunks`,
            `sentences`).
        :param threshold: Supported at score >= this. Default 0.5.
        :param max_chunks: Most chunks (best first) shown to the judge. Default 10.
        :param chunk_chars: Most characters of each chunk shown. Default 2000.
        :param language: Sentence splitter language (ISO 639-1). Default `en`.
        :raises ValueError: If `threshold` is outside [0, 1] or a size is below 1.
        """
        if not 0.0 <= threshold <= 1.0:
            msg = f"threshold must be in [0, 1], got {threshold}"
            raise ValueError(msg)
        if max_chunks < 1 or chunk_chars < 1:
            msg = "max_chunks and chunk_chars must be at least 1"
            raise ValueError(msg)
        self.chat_generator = chat_generator
        self.temperature = temperature
        self.generation_kwargs = generation_kwargs
        self.judge_prompt = judge_prompt
        self.threshold = threshold
        self.max_chunks = max_chunks
        self.chunk_chars = chunk_chars
        self.language = language

    def warm_up(self) -> None:
        """Warm up the judge's chat generator."""
        warm_up_generator(self.chat_generator)

    def _prepare(self, state: LoopState) -> tuple[LoopState, list[Any], list[Any], list[ChatMessage]] | str:
        reason = skip_reason(state)
        if reason is not None:
            return reason
        sentences = claim_sentences(state.outcome.answer or "", self.language)
        if not sentences:
            return "the answer has no sentence to check"
        if not any(doc.content and doc.content.strip() for doc in state.chunks):
            return "no chunk has text content"
        if not state.outcome.citations:  # an answer from outside the package's answer paths: cite it first
            state = cite(state, state.outcome.answer or "", language=self.language)
            sentences = claim_sentences(state.outcome.answer or "", self.language)
        # The judge sees the cited chunks (each once, in citation order), then the run's best others.
        by_id = {doc.id: doc for doc in state.chunks if doc.content and doc.content.strip()}
        cited = [c["document_id"] for c in state.outcome.citations]
        ids = [*dict.fromkeys(i for i in cited if i in by_id)]
        ids += [i for i in by_id if i not in ids]
        chunks = [by_id[i] for i in ids][: max(self.max_chunks, len(set(cited)))]
        texts = [doc.content[: self.chunk_chars] for doc in chunks]
        claims = [strip_markers(s.text) for s in sentences]
        prompt = render(
            self.judge_prompt or DEFAULT_JUDGE_PROMPT, question=state.question, chunks=texts, sentences=claims
        )
        return state, sentences, chunks, [ChatMessage.from_user(prompt)]

    def _judge(self, state: LoopState, sentences: list[Any], chunks: list[Any], call: Any, seconds: float) -> LoopState:
        state = call.state
        if call.error is not None:
            return skipped(state, f"the judge failed: {describe_error(call.error)}")
        claims = parse_claims(call.text)
        if claims is None:
            return skipped(state, f"the judge's reply has no JSON claims: {call.text[:200]!r}")
        verdicts: dict[int, tuple[float, list[str]]] = {}
        dropped = 0
        for claim in claims:
            number = _as_int(claim.get("sentence", claim.get("index", claim.get("id"))))
            if number is None or not 1 <= number <= len(sentences):
                dropped += 1
                continue
            supported = _verdict(claim)
            score = claim.get("score")
            score = float(score) if isinstance(score, (int, float)) and 0 <= score <= 1 else float(supported)
            raw = claim.get("chunks", claim.get("chunk_indices", claim.get("sources"))) or []
            raw = raw if isinstance(raw, list) else [raw]
            ids = []
            for value in raw:
                index = _as_int(value)
                if index is None or not 0 <= index < len(chunks):
                    dropped += 1
                    continue
                if chunks[index].id not in ids:
                    ids.append(chunks[index].id)
            if number in verdicts:  # several claims for one sentence: all must hold
                previous = verdicts[number]
                score, ids = min(score, previous[0]), [*previous[1], *(i for i in ids if i not in previous[1])]
            verdicts[number] = (score, ids)
        # A citation holds when the judge finds its sentence supported by its chunk (or names no chunk at all);
        # a sentence the judge skipped is unsupported.
        by_claim = {plain(strip_markers(s.text)): number for number, s in enumerate(sentences, start=1)}
        scores: list[float | None] = []
        for citation in state.outcome.citations:
            score, ids = verdicts.get(by_claim.get(citation["claim"], 0), (0.0, []))
            scores.append(score if not ids or citation["document_id"] in ids else 0.0)
        model = str((call.replies[0].meta or {}).get("model") or type(self.chat_generator).__name__)
        settled = settle(
            state,
            scores,
            self.threshold,
            "llm_judge",
            model,
            self.language,
            ignored_indices=dropped,
            judged_sentences=sorted(verdicts),
            seconds=round(seconds, 4),
        )
        return state.with_outcome(**settled)

    @component.output_types(state=LoopState)
    def run(self, state: LoopState) -> dict[str, LoopState]:
        """
        Ground the run's answer with the judge.

        :param state: The ended run.
        :returns: `{"state": LoopState}` with `grounding` filled, or `None` and `metadata["grounding_skipped"]`
            saying why (error run, no answer, no chunks, the judge failing or replying without claims).
        """
        prepared = self._prepare(state)
        if isinstance(prepared, str):
            return {"state": skipped(state, prepared)}
        started = time.perf_counter()
        try:
            call = call_generator(self.chat_generator, prepared[0], "grounding", prepared[3], **role_options(self))
            return {"state": self._judge(*prepared[:3], call, time.perf_counter() - started)}
        except Exception as exc:
            return {"state": _failed(prepared[0], exc)}

    @component.output_types(state=LoopState)
    async def run_async(self, state: LoopState) -> dict[str, LoopState]:
        """Async twin of `run`."""
        prepared = self._prepare(state)
        if isinstance(prepared, str):
            return {"state": skipped(state, prepared)}
        started = time.perf_counter()
        try:
            call = await call_generator_async(
                self.chat_generator, prepared[0], "grounding", prepared[3], **role_options(self)
            )
            return {"state": self._judge(*prepared[:3], call, time.perf_counter() - started)}
        except Exception as exc:
            return {"state": _failed(prepared[0], exc)}

    def to_dict(self) -> dict[str, Any]:
        """:returns: The serialised component, with the chat generator serialised."""
        names = (
            "temperature",
            "generation_kwargs",
            "judge_prompt",
            "threshold",
            "max_chunks",
            "chunk_chars",
            "language",
        )
        generator = generator_to_dict(self.chat_generator)
        return default_to_dict(self, chat_generator=generator, **{name: getattr(self, name) for name in names})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LLMJudgeGrounder":
        """:returns: The component from `to_dict()` output."""
        generator_from_dict_inplace(data["init_parameters"])
        return default_from_dict(cls, data)
