# SPDX-License-Identifier: Apache-2.0
"""
Property-based test (hypothesis) of the whole loop pipeline (issue 26): whatever every LLM role replies and whatever
the retriever returns, a run ends in a result.

The LLMs (controller in tools or json mode, answer LLM, fallback, evidence judge beside the lexical or the MiniLM
evidence check) are scripted with arbitrary turns:
any Unicode text (lone surrogates, format characters such as U+202E and U+200B, control characters), tool calls
with known and unknown names and any arguments (JSON values of every type, non-finite numbers, raw strings), text
where a tool call is expected and the reverse, empty replies and raised exceptions. The retriever returns arbitrary
documents (any float score, NaN and infinities included, or none; duplicate ids; no content; odd metadata), or,
behind a `SafeRetriever`, raises.

Properties: no exception escapes `Pipeline.run`; the result is strict JSON (`json.dumps(allow_nan=False)`) and
encodable as UTF-8; the answer is a non-blank string, or `None` with a reason; a run that ends in error says why.

`LOOP_EXAMPLES` sets the number of examples (default 300: about 10 s here); `LOOP_RANDOM=1` draws new ones
each run (default: the same ones).
"""

import json
import math
import os
from collections import Counter
from typing import Any

import pytest
from haystack import Document, component
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, Answerer, FallbackSynthesizer, LoopController, build_loop_pipeline
from haystack_agentic.components.evidence.evidence_checker import PACKAGED_MINILM, EvidenceChecker
from haystack_agentic.components.loop.loop_result_builder import result_to_dict
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever

EXAMPLES = int(os.environ.get("LOOP_EXAMPLES", "300"))
QUESTION = "Where is the director of the film Big Stone Gap based?"
TERMINATIONS = {"answered", "gave_up", "max_iterations", "error"}
#: Runs per (controller mode, how the run ended, answered or not), printed at the end (`pytest -s`).
OUTCOMES: Counter = Counter()


@pytest.fixture(scope="module", autouse=True)
def print_outcomes():
    yield
    print(f"\n{sum(OUTCOMES.values())} runs:")
    for (mode, ended, answered), count in sorted(OUTCOMES.items()):
        print(f"  {mode:5} {ended:14} {answered:9} {count}")


# --- values ---------------------------------------------------------------------------------------------------

#: Any text: every category, lone surrogates (Cs) and format characters (Cf) included.
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
special_text = st.sampled_from(
    [
        "",
        " ",
        "\n",
        "\ud83d",
        "x\udfffy",
        "\x00",
        "\u202e\u200b\u2066",
        "\ufeff",
        "null",
        "{}",
        "[1]",
        "NO ANSWER",
        "{{ question }}",
        "{% for %}",
        "<|im_end|>",
        "Greenwich Village",
        "search",
        "\U0001f600" * 3,
    ]
)
texts = st.one_of(any_text, special_text)
numbers = st.one_of(
    st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([10**400, -0.0, 1e308])
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
tool_names = st.one_of(st.sampled_from(["search", "answer", "give_up", "read_chunk", "reflect", "browse"]), texts)
#: Arguments shaped like the real tools' (so runs get past validation), or anything at all.
shaped_arguments = st.fixed_dictionaries(
    {},
    optional={
        "query": texts | json_values,
        "text": texts | json_values,
        "reason": texts | json_values,
        "top_k": numbers | texts,
        "id": texts,
        "collections": json_values,
    },
)
arguments = st.one_of(shaped_arguments, json_values, texts)
tool_calls = st.lists(st.fixed_dictionaries({"tool_name": tool_names, "arguments": arguments}), min_size=1, max_size=3)
#: A json-mode decision: a known or unknown action, in prose or fences, or broken JSON.
decisions = st.builds(
    lambda action, extra, wrap: wrap.format(json.dumps({"action": action, **extra})),
    st.sampled_from(["search", "reflect", "generate", "answer", "dance"]) | texts,
    st.dictionaries(st.sampled_from(["reasoning", "query", "answer"]), texts, max_size=2),
    st.sampled_from(["{}", "```json\n{}\n```", "Sure! {} Hope that helps.", "{}}}", "{{{}"]),
)
#: A well-formed search for a question word: runs reach the later stages (several searches, the fallback) this way.
plain_searches = st.builds(
    lambda q: {"tool_calls": [{"tool_name": "search", "arguments": {"query": q}}]},
    st.sampled_from(["Big Stone Gap", "Adriana Trigiani", "director", "Greenwich Village", "film"]),
)
turns = st.one_of(
    plain_searches,
    st.builds(lambda t: {"text": t}, texts | decisions),
    st.builds(lambda c: {"tool_calls": c}, tool_calls),
    st.builds(lambda t, c: {"text": t, "tool_calls": c}, texts, tool_calls),
    st.builds(lambda m: {"raise": m}, texts),
    st.just({"empty": True}),
    st.builds(lambda t: {"text": t, "template": True}, texts),  # a Jinja template that may not render
)
scripts = st.lists(turns, min_size=1, max_size=6)
scores = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True))
documents = st.builds(
    lambda doc_id, content, score, meta: {"id": doc_id, "content": content, "score": score, "meta": meta},
    st.sampled_from(["a", "b", "c"]) | texts,
    st.none() | texts | st.just("Adriana Trigiani, who directed Big Stone Gap, is based in Greenwich Village."),
    scores,
    st.dictionaries(st.sampled_from(["title", "file_path", "page"]), json_values, max_size=2),
)
#: What each search returns, in order (cycled): documents, or (behind a SafeRetriever) an exception.
search_results = st.lists(st.one_of(st.lists(documents, max_size=5), st.just("raise")), min_size=1, max_size=4)


@component
class ArbitraryRetriever:
    """Returns the next drawn result on each search (cycling); raises on a `"raise"` result."""

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.calls = 0

    @component.output_types(documents=list[Document])
    def run(self, query: str, filters: dict[str, Any] | None = None, top_k: int | None = None) -> dict[str, Any]:
        result = self.results[self.calls % len(self.results)]
        self.calls += 1
        if result == "raise":
            msg = "store exploded"
            raise RuntimeError(msg)
        return {
            "documents": [Document(id=d["id"], content=d["content"], score=d["score"], meta=d["meta"]) for d in result]
        }


def build(mode, controller, answer, fallback, judge, evidence, results, safe, max_iterations):
    router = AgenticRouter(
        chat_generator=ScriptedChatGenerator(controller, per_call=mode == "json"), mode=mode, max_retries=0
    )
    answer_llm = ScriptedChatGenerator(answer, per_call=True) if answer is not None else None
    fallback_llm = ScriptedChatGenerator(fallback, per_call=True) if fallback is not None else None
    retriever = ArbitraryRetriever(results if safe else [r for r in results if r != "raise"] or [[]])
    checker = None
    if evidence:
        judge_llm = ScriptedChatGenerator(judge, per_call=True) if judge is not None else None
        model = PACKAGED_MINILM if evidence == "minilm" else None  # MiniLM's tokenizer raises on a lone surrogate
        checker = EvidenceChecker(embedding_model=model, chat_generator=judge_llm, max_retries=0)
    return build_loop_pipeline(
        router,
        SafeRetriever(retriever=retriever) if safe else retriever,
        controller=LoopController(max_iterations=max_iterations),
        answerer=Answerer(chat_generator=answer_llm, max_retries=0) if mode == "tools" else None,
        fallback=FallbackSynthesizer(chat_generator=fallback_llm, max_retries=0),
        evidence_checker=checker,
        check_evidence=evidence is not None,
    )


def check_result(result: dict[str, Any]) -> None:
    text = json.dumps(result_to_dict(result), allow_nan=False, ensure_ascii=False)  # strict JSON: no NaN, no objects
    text.encode("utf-8")  # no lone surrogate anywhere
    assert result["terminated_by"] in TERMINATIONS
    answer = result["answer"]
    if answer is None:
        # no answer: the run says why (an error, the fallback's failure, or a give-up / exhausted run)
        assert result["error"] or result["terminated_by"] in {"max_iterations", "gave_up"}, result
    else:
        assert isinstance(answer, str) and answer.strip(), result
    if result["terminated_by"] == "error":
        assert isinstance(result["error"], str) and result["error"].strip(), result
    assert isinstance(result["tool_history"], list) and all(isinstance(s, dict) for s in result["tool_history"])
    for doc in result["documents"]:
        assert doc.score is None or math.isfinite(doc.score), doc


@settings(
    max_examples=EXAMPLES,
    phases=[Phase.generate, Phase.shrink] if os.environ.get("LOOP_SHRINK") else [Phase.generate],
    deadline=None,
    database=None,
    derandomize=not os.environ.get("LOOP_RANDOM"),
    suppress_health_check=list(HealthCheck),
)
@given(
    mode=st.sampled_from(["tools", "json"]),
    controller=scripts,
    answer=st.none() | scripts,
    fallback=st.none() | scripts,
    judge=st.none() | scripts,
    evidence=st.sampled_from([None, "lexical", "minilm"]),
    results=search_results,
    safe=st.booleans(),
    max_iterations=st.integers(1, 4),
)
@pytest.mark.integration  # the packaged MiniLM in some examples
def test_no_llm_reply_and_no_retriever_output_breaks_a_run(
    mode, controller, answer, fallback, judge, evidence, results, safe, max_iterations
):
    pipeline = build(mode, controller, answer, fallback, judge, evidence, results, safe, max_iterations)
    result = pipeline.run({"controller": {"query": QUESTION}})["result"]
    check_result(result)
    OUTCOMES[(mode, result["terminated_by"], "answer" if result["answer"] is not None else "no answer")] += 1
