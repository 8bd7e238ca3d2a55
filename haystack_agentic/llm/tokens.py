# SPDX-License-Identifier: Apache-2.0
"""
Counting prompt tokens, and fitting a tool-calling conversation into a token budget.

Counting prompt tokens (the model's Hugging Face tokenizer, `tiktoken`, or a conservative estimate:
`token_counter_for`), and fitting a tool-calling conversation into a token budget (`compact_messages`).
"""

import json
import math
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Generic, TypeVar

from haystack import logging
from haystack.dataclasses import ChatMessage, FileContent, ImageContent, TextContent, ToolCallResult
from haystack.tools import flatten_tools_or_toolsets

from haystack_agentic.llm.valid_text import valid_text

logger = logging.getLogger(__name__)

#: Tokens a chat template adds around each message (role markers, separators): ChatML spends 4-5.
MESSAGE_OVERHEAD_TOKENS = 5
#: Flat token charges for content without text (Haystack's `ApproximateTokenCounter` defaults).
TOKENS_PER_IMAGE = 85
TOKENS_PER_FILE = 1000
#: Tool lists whose schema token count a counter keeps (a router's tools are the same list every turn).
_TOOL_COUNTS_KEPT = 64
#: Seconds `tiktoken` may take to load an encoding (it downloads it the first time) before the estimate is used.
TIKTOKEN_LOAD_TIMEOUT = 10.0

_ASCII_LETTERS = re.compile(r"[A-Za-z]+")
_ASCII_OTHER = re.compile(r"[0-9!-/:-@\[-`{-~]")
_WHITESPACE = re.compile(r"\s+")
_SPACE_BEFORE_NON_LETTER = re.compile(r" (?=[^A-Za-z\s])")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
#: Tokens of a non-ASCII character by its UTF-8 size: 1.5 for two bytes (accented Latin, Greek, Cyrillic), else
#: one per byte.
_UTF8_SIZE_TOKENS = {2: 1.5}
#: Chunk ids a compacted tool result still names.
_DIGEST_SHOWN_IDS = 10


V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """
    A memo of values computed per object, kept while the object lives.

    `get(obj, compute)`: `compute(obj)` the first time, the stored value while `obj` lives (by identity and a weak
    reference; objects that cannot be weakly referenced are computed every time). A value must not refer to its
    object (the memo would keep the object alive). Thread-safe (a race computes a value twice).
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref, V]] = {}

    def get(self, obj: Any, compute: Callable[[Any], V]) -> V:
        """The value `compute(obj)` computed for this very object, computed now if it has none yet."""
        key = id(obj)
        entry = self._values.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = compute(obj)
        values = self._values  # the callback holds the dict, not the memo
        try:
            # The callback runs when `obj` is freed, before its id can be given to another object.
            ref = weakref.ref(obj, lambda _: values.pop(key, None))
        except TypeError:
            return value
        self._values[key] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._values)


class TokenCounter:
    """
    Counts the tokens of texts and chat prompts, with caches.

    Counts the tokens of texts and chat prompts (like Haystack's `TokenCounter`, plus `count_text`); subclasses
    count one text (`_count_text`). Counts of texts (the 1024 most recent) and of each live message are cached.
    """

    name = "token counter"

    def __init__(self) -> None:
        self._cached_count: Callable[[str], int] = lru_cache(maxsize=1024)(self._count_text)
        self._message_counts: IdentityMemo[int] = IdentityMemo()
        self._tool_counts: dict[tuple[int, ...], tuple[tuple[Any, ...], int]] = {}

    def _count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_text(self, text: str) -> int:
        """Tokens of a text (0 for '')."""
        if not text:
            return 0
        text = valid_text(text)  # lone surrogates: not encodable as UTF-8, tokenizers raise on them
        return self._cached_count(text)

    def count(self, messages: Sequence[ChatMessage], tools: Any = None) -> int:
        """Tokens of a prompt: the messages (plus `MESSAGE_OVERHEAD_TOKENS` each), the tool schemas, images, files."""
        total = sum(self._message_counts.get(m, self._count_message) for m in messages)
        if tools:
            total += self._count_tools(tools)
        return total

    def _count_tools(self, tools: Any) -> int:
        """Tokens of the tool schemas; a list of the same tool objects as before is not rendered again."""
        if not isinstance(tools, (list, tuple)):
            return self.count_text(render_tools(tools))
        key = tuple(map(id, tools))
        known = self._tool_counts.get(key)
        if known is not None and all(a is b for a, b in zip(known[0], tools, strict=True)):
            return known[1]
        tokens = self.count_text(render_tools(tools))
        if len(self._tool_counts) >= _TOOL_COUNTS_KEPT:
            self._tool_counts.clear()
        self._tool_counts[key] = (tuple(tools), tokens)  # the tools themselves: their ids stay theirs
        return tokens

    def _count_message(self, message: ChatMessage) -> int:
        return self.count_text(render_message(message)) + MESSAGE_OVERHEAD_TOKENS + non_text_tokens(message)

    def most_tokens(self, text: str) -> int | None:  # noqa: ARG002 - a counter without a bound
        """An upper bound of `count_text(text)` found without counting, or `None` when this counter has none."""
        return None


def render_message(message: ChatMessage) -> str:
    """
    Render one message as plain text.

    One message as plain text: `[role] text`, `[role -> tool_call] name({json})` per tool call, `[tool:name] result`
    per tool result, `<image>` / `<file: name>` stand-ins.
    """
    role = message.role.value
    if message.tool_call_results:
        return "\n".join(
            f"[tool:{r.origin.tool_name}{' (error)' if r.error else ''}] {_tool_result_text(r.result)}"
            for r in message.tool_call_results
        )
    lines = [f"[{role}] " + "\n".join(message.texts)] if message.texts else []
    lines += [
        f"[{role} -> tool_call] {call.tool_name}({json.dumps(call.arguments, default=str, sort_keys=True)})"
        for call in message.tool_calls
    ]
    lines += [f"[{role}] {_stand_in(content)}" for content in (*message.images, *message.files)]
    return "\n".join(lines) if lines else f"[{role}] <no content>"


def render_tools(tools: Any) -> str:
    """Tool schemas (a list of `Tool`s and `Toolset`s, or a `Toolset`) as one JSON text ('' for no tools)."""
    if not tools:
        return ""
    return json.dumps([tool.tool_spec for tool in flatten_tools_or_toolsets(tools)], default=str, sort_keys=True)


def non_text_tokens(message: ChatMessage) -> int:
    """Flat charges for a message's images and files, those inside tool results included."""
    parts = [*message.images, *message.files]
    for result in message.tool_call_results:
        if not isinstance(result.result, str):
            parts += result.result
    images = sum(isinstance(part, ImageContent) for part in parts)
    files = sum(isinstance(part, FileContent) for part in parts)
    return images * TOKENS_PER_IMAGE + files * TOKENS_PER_FILE


def _stand_in(content: Any) -> str:
    if isinstance(content, ImageContent):
        return "<image>"
    if isinstance(content, FileContent):
        return f"<file: {content.filename or 'unnamed'}>"
    return f"<{type(content).__name__}>"


def _tool_result_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    return "".join(part.text if isinstance(part, TextContent) else _stand_in(part) for part in result)


class ConservativeTokenCounter(TokenCounter):
    """
    A tokenizer-free estimate that does not undercount, for models whose tokenizer is unknown.

    A run of ASCII letters counts one token per 4 letters (rounded up); an ASCII digit or punctuation mark, 1;
    whitespace other than a single space before a letter, 1; a character of 2 UTF-8 bytes, 1.5; a character of 3
    or 4 bytes (CJK, kana, hangul, Thai, Devanagari, emoji), its byte count, the most a byte-level tokenizer spends.
    """

    name = "conservative estimate"

    def most_tokens(self, text: str) -> int:
        """
        At most a token per UTF-8 byte, plus one per non-ASCII character (a whitespace run's token).

        A non-ASCII character has 2 bytes or more, so `bytes - characters` is at least their number.
        """
        if text.isascii():
            return len(text)
        return 2 * len(text.encode("utf-8", "surrogatepass")) - len(text)

    def _count_text(self, text: str) -> int:
        tokens: float = sum(math.ceil(len(run) / 4) for run in _ASCII_LETTERS.findall(text))
        tokens += len(_ASCII_OTHER.findall(text))
        tokens += sum(1 for run in _WHITESPACE.findall(text) if run != " ")
        tokens += len(_SPACE_BEFORE_NON_LETTER.findall(text))
        for run in _NON_ASCII.findall(text):
            for char in run:
                size = len(char.encode("utf-8"))
                tokens += _UTF8_SIZE_TOKENS.get(size, size)
        return math.ceil(tokens)


class HuggingFaceTokenCounter(TokenCounter):
    """Counts with a Hugging Face tokenizer (anything with `encode(text, add_special_tokens=False)`)."""

    name = "model tokenizer"

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        super().__init__()

    def _count_text(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


class TiktokenTokenCounter(TokenCounter):
    """Counts with a loaded `tiktoken.Encoding` (OpenAI's models)."""

    name = "tiktoken"

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        super().__init__()

    def _count_text(self, text: str) -> int:
        return len(self.encoding.encode(text, disallowed_special=()))


#: The counter for models whose tokenizer is unknown.
CONSERVATIVE = ConservativeTokenCounter()

_BY_TOKENIZER: "IdentityMemo[HuggingFaceTokenCounter]" = IdentityMemo()
_TIKTOKEN: dict[str, TiktokenTokenCounter | None] = {}
_LOCK = threading.Lock()


def hf_tokenizer(generator: Any) -> Any:
    """The Hugging Face tokenizer a (warmed-up) local chat generator exposes, or `None`."""
    for tokenizer in (
        getattr(generator, "tokenizer", None),
        getattr(getattr(generator, "pipeline", None), "tokenizer", None),
    ):
        if tokenizer is not None and callable(getattr(tokenizer, "encode", None)):
            return tokenizer
    return None


@lru_cache(maxsize=256)
def _encoding_name_for_model(tiktoken: Any, model: str) -> str | None:
    """tiktoken's encoding name for a model, or `None` (cached: an unknown name scans all prefixes and raises)."""
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None


def _tiktoken_counter(model: str) -> TiktokenTokenCounter | None:
    """A tiktoken counter for an OpenAI model name, or `None`."""
    try:
        import tiktoken  # noqa: PLC0415 - optional
    except ImportError:
        return None
    encoding_name = _encoding_name_for_model(tiktoken, model)
    if encoding_name is None:
        return None
    with _LOCK:
        if encoding_name not in _TIKTOKEN:
            _TIKTOKEN[encoding_name] = _load_tiktoken(tiktoken, encoding_name)
        return _TIKTOKEN[encoding_name]


def _load_tiktoken(tiktoken: Any, encoding_name: str) -> TiktokenTokenCounter | None:
    # tiktoken downloads an encoding the first time, with no timeout of its own: a daemon thread with a deadline.
    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            loaded["encoding"] = tiktoken.get_encoding(encoding_name)
        except Exception as exc:
            loaded["error"] = exc

    thread = threading.Thread(target=load, name=f"tiktoken-{encoding_name}", daemon=True)
    thread.start()
    thread.join(TIKTOKEN_LOAD_TIMEOUT)
    if "encoding" in loaded:
        return TiktokenTokenCounter(loaded["encoding"])
    why = repr(loaded.get("error", f"no answer within {TIKTOKEN_LOAD_TIMEOUT} s"))
    logger.warning(
        "tiktoken could not load the {encoding} encoding ({why}); token budgets use the conservative estimate.",
        encoding=encoding_name,
        why=why[:300],
    )
    return None


def token_counter_for(generator: Any) -> TokenCounter:
    """
    The best token counter for a chat generator's model.

    The best token counter for a chat generator's model: its Hugging Face tokenizer when exposed (after
    `warm_up`), else `tiktoken` for an OpenAI model name (`generator.model`) when it loads, else `CONSERVATIVE`.
    """
    if generator is None:
        return CONSERVATIVE
    tokenizer = hf_tokenizer(generator)
    if tokenizer is not None:
        return _BY_TOKENIZER.get(tokenizer, HuggingFaceTokenCounter)
    model = getattr(generator, "model", None)
    return (isinstance(model, str) and model and _tiktoken_counter(model)) or CONSERVATIVE


def longest_prefix_within(text: str, fits: Callable[[str], bool]) -> str:
    """The longest prefix of `text` for which `fits` (monotonic) holds, by binary search ('' when none fits)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(text[:middle]):
            low = middle
        else:
            high = middle - 1
    return text[:low]


def compact_messages(
    messages: Sequence[ChatMessage], budget_tokens: int, tools: Any = None, counter: TokenCounter | None = None
) -> list[ChatMessage]:
    """
    Fit the messages into `budget_tokens` by shortening tool results, oldest first.

    The messages fitted into `budget_tokens` (tool schemas included; counted by `counter`, default `CONSERVATIVE`):
    tool results are replaced, oldest first, by a one-line digest (first line, chunk ids) until they fit; then the
    latest is cut from its end (its lowest-ranked chunks go first). Other messages are never changed. A prompt
    within budget by the counter's `most_tokens` bound is returned without counting.
    """
    counter = counter or CONSERVATIVE
    result = list(messages)
    if _surely_fits(result, budget_tokens, tools, counter):
        return result
    sizes = [counter.count([message]) for message in result]  # each message counted once, then kept up to date
    total = counter.count([], tools) + sum(sizes)
    if total <= budget_tokens:
        return result
    # A tool result with images or files is compacted from its text, stand-ins included (`render_message`'s).
    tool_results = [(i, tool) for i, m in enumerate(result) if (tool := m.tool_call_result) is not None]
    for i, tool in tool_results[:-1]:
        result[i] = _with_tool_text(tool, _digest(_tool_result_text(tool.result)))
        size = counter.count([result[i]])
        total += size - sizes[i]
        sizes[i] = size
        if total <= budget_tokens:
            return result
    if tool_results:
        last, original = tool_results[-1]
        others = total - sizes[last]
        marker = " [... cut to fit the context budget]"

        def fits(prefix: str) -> bool:
            return others + counter.count([_with_tool_text(original, prefix.rstrip() + marker)]) <= budget_tokens

        kept = longest_prefix_within(_tool_result_text(original.result), fits)
        result[last] = _with_tool_text(original, kept.rstrip() + marker)
    return result


def _surely_fits(messages: list[ChatMessage], budget_tokens: int, tools: Any, counter: TokenCounter) -> bool:
    """Whether the prompt fits by the counter's upper bound of each message's tokens (`False`: count them)."""
    total = counter.count([], tools)
    for message in messages:
        most = counter.most_tokens(render_message(message))
        if most is None:
            return False
        total += most + MESSAGE_OVERHEAD_TOKENS + non_text_tokens(message)
    return total <= budget_tokens


def _digest(text: str) -> str:
    first_line = (text or "").split("\n", 1)[0][:200]
    ids = re.findall(r"id=(\S+)", text or "")
    shown = ", ".join(ids[:_DIGEST_SHOWN_IDS])
    if len(ids) > _DIGEST_SHOWN_IDS:
        shown += f" and {len(ids) - _DIGEST_SHOWN_IDS} more"
    return f"[compacted to save context] {first_line}" + (f" Chunk ids: {shown}." if ids else "")


def _with_tool_text(result: ToolCallResult, text: str) -> ChatMessage:
    return ChatMessage.from_tool(tool_result=text, origin=result.origin, error=result.error)
