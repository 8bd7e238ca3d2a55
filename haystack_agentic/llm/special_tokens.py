# SPDX-License-Identifier: Apache-2.0
"""
Chat-template tokens inside prompt text, made plain text before any chat generator sees them.

A local model's tokenizer turns the text `<|im_end|>` or `<|im_start|>system` found in a document, a question or an
earlier turn into the real special token: transformers does when the chat template is applied, and so does a
llama.cpp server, which tokenizes the templated prompt with special tokens parsed. A document could then end the
user's turn and open a `system` one. `neutral_messages` breaks every such text with `TOKEN_BREAK` (a zero-width
space) after its first character, so the tokenizer reads it as ordinary characters and a person still reads the same
text; the chat template adds the prompt's only special tokens.

`call_generator` applies it to the messages of every LLM call of the loop (every role, every generator), on the
copy sent to the model: stored documents, the state and the result are left as they are. The texts broken
(`pattern_for`): every special or added token of the model's tokenizer when the generator exposes one
(`EmbeddedChatGenerator`, Haystack's Hugging Face generators), and for any generator `CHAT_MARKUP`, the turn markup
of the common chat templates, since a server's tokenizer (llama.cpp, Ollama, vLLM) is not known here.
"""

import re
import weakref
from collections.abc import Sequence
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage

from haystack_agentic.llm.tokens import hf_tokenizer

logger = logging.getLogger(__name__)

#: Put after the first character of a special token's text (a zero-width space): the tokenizer then reads
#: `<|im_end|>` in a document or a question as text, never as the token that ends a turn.
TOKEN_BREAK = "\u200b"

#: Turn markup of the common chat templates, broken whatever the model: `<|...|>` (ChatML's `<|im_start|>`,
#: `<|im_end|>`, `<|endoftext|>`; Llama 3's `<|start_header_id|>`, `<|eot_id|>`; Phi's `<|user|>`, `<|end|>`),
#: Llama 2 / Mistral `<s>`, `</s>`, `[INST]`, `[/INST]`, `<<SYS>>`, and Gemma's `<start_of_turn>`, `<end_of_turn>`.
CHAT_MARKUP = r"<\|[^\s<>|]{1,64}\|>|</?s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>"

_GENERIC = re.compile(CHAT_MARKUP)

#: The pattern of each tokenizer seen (built once: a tokenizer's vocabulary does not change).
_BY_TOKENIZER: "weakref.WeakKeyDictionary[Any, re.Pattern[str]]" = weakref.WeakKeyDictionary()


def tokenizer_pattern(tokenizer: Any) -> re.Pattern[str]:
    """
    The texts to break for a Hugging Face tokenizer: its added and special tokens, and `CHAT_MARKUP`.

    :param tokenizer: A `transformers` tokenizer (`get_added_vocab`, `all_special_tokens`).
    :returns: The compiled pattern (longest token first, so `<|im_start|>` is not matched as a shorter token).
    """
    try:
        return _BY_TOKENIZER[tokenizer]
    except (KeyError, TypeError):
        pass
    added = getattr(tokenizer, "get_added_vocab", None)
    texts = set(added() if callable(added) else ()) | set(getattr(tokenizer, "all_special_tokens", None) or ())
    texts = sorted((t for t in texts if isinstance(t, str) and len(t) > 1), key=len, reverse=True)
    pattern = re.compile("|".join([*(re.escape(t) for t in texts), CHAT_MARKUP]))
    try:
        _BY_TOKENIZER[tokenizer] = pattern
    except TypeError:  # not weakly referenceable: built again next time
        pass
    return pattern


def pattern_for(generator: Any) -> re.Pattern[str]:
    """
    The texts to break in what `generator` is sent.

    :param generator: Any chat generator.
    :returns: `tokenizer_pattern` of its Hugging Face tokenizer when it exposes one (after `warm_up`), else the
        `CHAT_MARKUP` pattern.
    """
    tokenizer = hf_tokenizer(generator)
    return _GENERIC if tokenizer is None else tokenizer_pattern(tokenizer)


def neutral_text(text: str, pattern: re.Pattern[str] = _GENERIC) -> str:
    """
    `text` with every match of `pattern` broken by `TOKEN_BREAK` after its first character.

    :param text: Any text.
    :param pattern: What to break (default `CHAT_MARKUP`).
    :returns: The text (the same string when nothing matched).
    """
    return pattern.sub(lambda m: m.group()[0] + TOKEN_BREAK + m.group()[1:], text)


def neutral_messages(messages: Sequence[ChatMessage], pattern: re.Pattern[str] = _GENERIC) -> list[ChatMessage]:
    """
    The messages with `neutral_text` applied to every text part (system, user, assistant and tool-result text).

    :param messages: The prompt.
    :param pattern: What to break (`pattern_for(generator)`).
    :returns: A list holding the same message objects where nothing matched, and copies of the others.
    """
    neutral = []
    for message in messages:
        texts = [*message.texts, *(r.result for r in message.tool_call_results if isinstance(r.result, str))]
        if not any(pattern.search(text) for text in texts):
            neutral.append(message)  # the common case, without a copy
            continue
        data = message.to_dict()
        for part in data.get("content") or []:
            for holder, key in _texts(part):
                holder[key] = neutral_text(holder[key], pattern)
        neutral.append(ChatMessage.from_dict(data))
    return neutral


def _texts(part: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Where a serialised content part holds model-readable text: `text`, a tool result's `result` string."""
    found = [(part, "text")] if isinstance(part.get("text"), str) else []
    result = part.get("tool_call_result")
    if isinstance(result, dict) and isinstance(result.get("result"), str):
        found.append((result, "result"))
    return found
