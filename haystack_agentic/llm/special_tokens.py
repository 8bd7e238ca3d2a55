# SPDX-License-Identifier: Apache-2.0
"""
Chat-template tokens in prompt text broken with a zero-width space.

Chat-template tokens in prompt text (`<|im_end|>` in a document would end the user's turn for a local model)
broken with a zero-width space, on the copy of every LLM call's messages sent (`call_generator`).
"""

import re
from collections.abc import Sequence
from typing import Any

from haystack import logging
from haystack.dataclasses import ChatMessage

from haystack_agentic.llm.tokens import IdentityMemo, hf_tokenizer

logger = logging.getLogger(__name__)

#: Put after the first character of a special token's text (a zero-width space).
TOKEN_BREAK = "\u200b"

#: Turn markup of the common chat templates, broken whatever the model: `<|...|>` (ChatML's `<|im_start|>`,
#: `<|im_end|>`, `<|endoftext|>`; Llama 3's `<|start_header_id|>`, `<|eot_id|>`; Phi's `<|user|>`, `<|end|>`),
#: Llama 2 / Mistral `<s>`, `</s>`, `[INST]`, `[/INST]`, `<<SYS>>`, and Gemma's `<start_of_turn>`, `<end_of_turn>`.
CHAT_MARKUP = r"<\|[^\s<>|]{1,64}\|>|</?s>|\[/?INST\]|<</?SYS>>|<(?:start|end)_of_turn>"

_GENERIC = re.compile(CHAT_MARKUP)

_BY_TOKENIZER: "IdentityMemo[re.Pattern[str]]" = IdentityMemo()


def tokenizer_pattern(tokenizer: Any) -> re.Pattern[str]:
    """The texts to break for a `transformers` tokenizer: its added and special tokens and `CHAT_MARKUP`."""
    return _BY_TOKENIZER.get(tokenizer, _build_pattern)


def _build_pattern(tokenizer: Any) -> re.Pattern[str]:
    added = getattr(tokenizer, "get_added_vocab", None)
    texts = set(added() if callable(added) else ()) | set(getattr(tokenizer, "all_special_tokens", None) or ())
    texts = sorted((t for t in texts if isinstance(t, str) and len(t) > 1), key=len, reverse=True)
    return re.compile("|".join([*(re.escape(t) for t in texts), CHAT_MARKUP]))


def pattern_for(generator: Any) -> re.Pattern[str]:
    """The texts to break for `generator`: `tokenizer_pattern` of its tokenizer, if exposed, else `CHAT_MARKUP`."""
    tokenizer = hf_tokenizer(generator)
    return _GENERIC if tokenizer is None else tokenizer_pattern(tokenizer)


def neutral_text(text: str, pattern: re.Pattern[str] = _GENERIC) -> str:
    """`text` with every match of `pattern` broken by `TOKEN_BREAK` after its first character."""
    return pattern.sub(lambda m: m.group()[0] + TOKEN_BREAK + m.group()[1:], text)


def neutral_messages(messages: Sequence[ChatMessage], pattern: re.Pattern[str] = _GENERIC) -> list[ChatMessage]:
    """The messages with `neutral_text` applied to every text and tool-result text (unchanged ones not copied)."""
    neutral = []
    for message in messages:
        texts = [*message.texts, *(r.result for r in message.tool_call_results if isinstance(r.result, str))]
        if not any(pattern.search(text) for text in texts):
            neutral.append(message)
            continue
        data = message.to_dict()
        for part in data.get("content") or []:
            for holder, key in ((part, "text"), (part.get("tool_call_result"), "result")):
                if isinstance(holder, dict) and isinstance(holder.get(key), str):
                    holder[key] = neutral_text(holder[key], pattern)
        neutral.append(ChatMessage.from_dict(data))
    return neutral
