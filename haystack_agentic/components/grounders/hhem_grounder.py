# SPDX-License-Identifier: Apache-2.0
"""`HHEMGrounder`: sentence-level faithfulness of the loop's answer with Vectara's HHEM-2.1-Open."""

import asyncio
import threading
import time
from typing import Any

from haystack import component, logging

from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.grounding.assembly import skip_reason, skipped
from haystack_agentic.grounding.citations import cite, claim_sentences, settle

# HHEM_MODEL, HHEM_PROMPT and HOW_TO_GET are public names of this module too.
from haystack_agentic.grounding.hhem_loading import (
    HHEM_MODEL,
    HHEM_PROMPT,
    HOW_TO_GET,
    HHEMUnavailableError,
    load_hhem_native,
    load_hhem_remote_code,
    pick_device,
)

logger = logging.getLogger(__name__)

#: Overlap, in tokens, between the pieces of a chunk longer than a window.
WINDOW_OVERLAP_TOKENS = 64
#: The smallest window, in tokens, `max_input_tokens` may set.
MIN_INPUT_TOKENS = 16


@component
class HHEMGrounder:
    """
    Grounds the loop's answer sentence by sentence with HHEM-2.1-Open.

    Grounds the loop's answer sentence by sentence with HHEM-2.1-Open, the last stage of the loop pipeline: each
    citation's claim is scored against its chunk; any failure only skips grounding (`metadata["grounding_skipped"]`).

    ### Usage example
    ```python
    from haystack import Document
    from haystack_agentic import HHEMGrounder, LoopState

    grounder = HHEMGrounder(model="/models/hhem-2.1-open", foundation="/models/flan-t5-base")
    grounder.warm_up()
    state = LoopState(question="Where is Paris?", chunks=(Document(content="Paris is the capital of France."),))
    state = state.finish("answered", answer="Paris is in France.")
    print(grounder.run(state)["state"].outcome.grounding["score"])
    ```
    """

    def __init__(
        self,
        model: str = HHEM_MODEL,
        revision: str | None = None,
        foundation: str | None = None,
        trust_remote_code: bool = False,
        threshold: float = 0.5,
        batch_size: int = 8,
        device: str | None = None,
        max_input_tokens: int = 2048,
        language: str = "en",
        local_files_only: bool = False,
    ) -> None:
        """
        Create the grounder (nothing is loaded until `warm_up`).

        :param model: Hub id or local folder of the HHEM checkpoint. Default `vectara/hallucination_evaluation_model`.
        :param revision: Hub revision (commit sha, tag or branch) to pin; `None`: the default branch.
        :param foundation: Hub id or local folder of the foundation model (config + tokenizer); `None`: the one the
            checkpoint's `config.json` names (`google/flan-t5-base`).
        :param trust_remote_code: Load through the checkpoint's own modeling code instead. Default `False`.
        :param threshold: A citation is supported when its score is >= this. Default 0.5 (HHEM's decision point).
        :param batch_size: Premise/hypothesis pairs per forward pass. Default 8.
        :param device: Torch device (`"cpu"`, `"cuda:1"`, `"mps"`); `None`/`"auto"`: CUDA, MPS, then CPU.
        :param max_input_tokens: Most tokens of one encoded pair before chunks are split into windows. Default 2048.
        :param language: Language of the sentence splitter rules (ISO 639-1). Default `en`.
        :param local_files_only: Never contact the Hub (local folders or the Hub cache only). Default `False`.
        :raises ValueError: If `threshold` is outside [0, 1], `batch_size` below 1 or `max_input_tokens` below 16.
        """
        if not 0.0 <= threshold <= 1.0:
            msg = f"threshold must be in [0, 1], got {threshold}"
            raise ValueError(msg)
        if batch_size < 1 or max_input_tokens < MIN_INPUT_TOKENS:
            msg = "batch_size must be >= 1 and max_input_tokens >= 16"
            raise ValueError(msg)
        self.model = model
        self.revision = revision
        self.foundation = foundation
        self.trust_remote_code = trust_remote_code
        self.threshold = threshold
        self.batch_size = batch_size
        self.device = device
        self.max_input_tokens = max_input_tokens
        self.language = language
        self.local_files_only = local_files_only
        self._network: Any = None
        self._tokenizer: Any = None
        self._prompt = HHEM_PROMPT
        self._device: str | None = None
        self.load_error: str | None = None  # why the model could not be loaded (after `warm_up`)
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        """Load the model once; a failure is kept in `load_error` (not raised) and every run skips grounding."""
        with self._lock:
            if self._network is not None or self.load_error is not None:
                return
            try:
                self._device = pick_device(self.device)
                if self.trust_remote_code:
                    loaded = load_hhem_remote_code(self.model, self.revision, self.local_files_only, self._device)
                else:
                    args = (self.model, self.revision, self.foundation, self.local_files_only, self._device)
                    loaded = load_hhem_native(*args)
                self._network, self._tokenizer, self._prompt = loaded
            except Exception as exc:
                self.load_error = f"HHEM model {self.model!r} is not available ({type(exc).__name__}: {exc})"
                logger.warning("{error}. To ground answers: {how}", error=self.load_error, how=HOW_TO_GET)

    @property
    def is_available(self) -> bool:
        """Whether the model is loaded (loads it if `warm_up` was not called yet)."""
        self.warm_up()
        return self._network is not None

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[float]:
        """
        Score (premise, hypothesis) pairs with HHEM, in batches of `batch_size` (sorted by length to pad less).

        :param pairs: `(premise, hypothesis)` pairs.
        :returns: P(consistent) for each pair, in [0, 1], in input order.
        :raises HHEMUnavailableError: If the model is not available.
        """
        if not self.is_available:
            raise HHEMUnavailableError(self.load_error or "HHEM model not loaded")
        import torch  # noqa: PLC0415

        texts = [self._prompt.format(text1=premise, text2=hypothesis) for premise, hypothesis in pairs]
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        scores = [0.0] * len(texts)
        for begin in range(0, len(order), self.batch_size):
            batch = order[begin : begin + self.batch_size]
            encoded = self._tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True, truncation=False)
            encoded = {key: value.to(self._device) for key, value in encoded.items() if key != "token_type_ids"}
            with torch.inference_mode():
                logits = self._network(**encoded).logits[:, 0, :]
            probabilities = torch.softmax(logits.float(), dim=-1)[:, 1].tolist()
            for index, probability in zip(batch, probabilities, strict=True):
                scores[index] = float(probability)
        return scores

    def _count(self, text: str) -> int:
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _pieces(self, text: str, budget: int) -> list[str]:
        """Cut a text longer than `budget` tokens into overlapping pieces at token boundaries."""
        encoded = self._tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets = encoded["offset_mapping"]
        stride = max(1, budget - min(WINDOW_OVERLAP_TOKENS, budget // 2))
        pieces = []
        for first in range(0, len(offsets), stride):
            last = min(first + budget, len(offsets)) - 1
            pieces.append(text[offsets[first][0] : offsets[last][1]])
            if last >= len(offsets) - 1:
                break
        return pieces

    def _premises(self, doc: Any, hypothesis: str) -> list[str]:
        """The cited chunk whole when it fits `max_input_tokens` with the prompt and the claim, else its windows."""
        overhead = self._count(self._prompt.format(text1="", text2="")) + 2
        budget = max(32, self.max_input_tokens - overhead - self._count(hypothesis))
        content = doc.content or ""
        return [content] if self._count(content) <= budget else self._pieces(content, budget)

    def _ground(self, state: LoopState) -> LoopState | str:
        """The state with its citations scored and `grounding` settled, or why there is nothing to ground."""
        started = time.perf_counter()
        if not claim_sentences(state.outcome.answer or "", self.language):
            return "the answer has no sentence to check"
        if not any(doc.content and doc.content.strip() for doc in state.chunks):
            return "no chunk has text content"
        if not state.outcome.citations:
            state = cite(state, state.outcome.answer or "", language=self.language)
        by_id = {doc.id: doc for doc in state.chunks}
        pairs: list[tuple[str, str]] = []
        owners: list[int] = []
        windows = False
        for index, citation in enumerate(state.outcome.citations):
            doc = by_id.get(citation["document_id"])
            if doc is None or not (doc.content or "").strip():
                continue
            hypothesis = citation["claim"]
            premises = self._premises(doc, hypothesis)
            windows = windows or len(premises) > 1
            pairs.extend((premise, hypothesis) for premise in premises)
            owners.extend([index] * len(premises))
        scores = self.score_pairs(pairs) if pairs else []
        verdicts: list[float | None] = [None] * len(state.outcome.citations)
        for index, score in zip(owners, scores, strict=True):
            verdicts[index] = max(score, verdicts[index] or 0.0)
        seconds = round(time.perf_counter() - started, 4)
        mode = "windows" if windows else "chunk"
        settled = settle(
            state,
            verdicts,
            self.threshold,
            "hhem",
            self.model,
            self.language,
            premise_mode=mode,
            pairs_scored=len(pairs),
            seconds=seconds,
        )
        return state.with_outcome(**settled)

    @component.output_types(state=LoopState)
    def run(self, state: LoopState) -> dict[str, LoopState]:
        """
        Ground the run's answer.

        :param state: The ended run (from `finish`).
        :returns: `{"state": LoopState}` with `grounding` filled, or `None` with `metadata["grounding_skipped"]`
            saying why (error run, no answer, no chunks, model not available, a failure while grounding).
        """
        reason = skip_reason(state)
        if reason is not None:
            return {"state": skipped(state, reason)}
        self.warm_up()
        if self.load_error is not None:
            return {"state": skipped(state, f"{self.load_error}; to ground answers, {HOW_TO_GET}")}
        try:
            grounding = self._ground(state)
        except Exception as exc:
            logger.warning("Grounding failed: {error}", error=repr(exc))
            return {"state": skipped(state, f"the grounder failed: {type(exc).__name__}: {exc}")}
        if isinstance(grounding, str):
            return {"state": skipped(state, grounding)}
        return {"state": grounding}

    @component.output_types(state=LoopState)
    async def run_async(self, state: LoopState) -> dict[str, LoopState]:
        """Async twin of `run`: the model runs in a worker thread."""
        return await asyncio.to_thread(self.run, state)
