# SPDX-License-Identifier: Apache-2.0
"""
JSON-mode routing decisions of a tiny model through a real llama.cpp server: how many parse as valid decisions.

Starts llama.cpp's server in-process (`xllamacpp`, the `llamacpp` extra) with the packaged SmolLM2-135M GGUF on
127.0.0.1, and runs the loop in json mode on the first `--questions` questions of the shipped HotpotQA sample (BM25
over the whole sample, `max_iterations` 3, no evidence check: the decisions are what is measured) through Haystack's
`OpenAIChatGenerator`: the router sends its `response_format` JSON schema, which llama.cpp turns into a grammar.
Per decision (a controller reply): valid (a JSON object whose `action` is one of the allowed ones), and of those,
searches, repeated searches (refused after parsing), `generate`/`reflect`; invalid replies with their reason. Also
the seconds per decision and how the runs ended. `--no-schema` sends no `response_format`, for the figure before.

    python benchmarks/llamacpp_routing.py [--questions 50] [--no-schema]
"""

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.utils import Secret

from haystack_agentic import AgenticRouter, Answerer, LoopController, build_loop_pipeline
from haystack_agentic.components.generators.embedded_chat_generator import GGUF_FILE_NAME
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.indexing.hotpotqa import hotpotqa_documents, load_hotpotqa_questions
from haystack_agentic.llm.gguf_models import MODELS_DIR
from haystack_agentic.llm.json_decisions import JSON_ACTIONS
from haystack_agentic.llm.llamacpp_server import LlamaCppServer
from haystack_agentic.pipelines.default_pipelines import ROLE_MAX_TOKENS
from haystack_agentic.resources import sample_corpus_path

GOAL = 0.99


def generator(base_url: str, max_tokens: int) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(
        model="smollm2",
        api_base_url=base_url,
        api_key=Secret.from_token("none"),
        max_retries=0,
        timeout=120.0,
        generation_kwargs={"max_tokens": max_tokens, "temperature": 0.0},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--no-schema", action="store_true", help="Send no response_format (the figure before).")
    args = parser.parse_args()

    rows = load_hotpotqa_questions(sample_corpus_path())
    store = SparseBM25DocumentStore(index="llamacpp-routing")
    store.write_documents(hotpotqa_documents(rows, title_in_content=True))
    decisions: collections.Counter = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    endings: collections.Counter = collections.Counter()
    with LlamaCppServer(MODELS_DIR / GGUF_FILE_NAME, n_ctx=4096, threads=2) as server:
        router = AgenticRouter(
            chat_generator=generator(server.base_url, ROLE_MAX_TOKENS["controller_json"]),
            mode="json",
            temperature=0.0,
            structured_output=not args.no_schema,
        )
        pipeline = build_loop_pipeline(
            router,
            SafeRetriever(InMemoryBM25Retriever(store, top_k=5)),
            controller=LoopController(max_iterations=3),
            answerer=Answerer(chat_generator=generator(server.base_url, 48), temperature=0.0),
            check_evidence=False,
        )
        start = time.perf_counter()
        for number, row in enumerate(rows[: args.questions], 1):
            result = pipeline.run({"controller": {"query": row["question"]}})["result"]
            endings[result["terminated_by"]] += 1
            for step in result["tool_history"]:
                action = (step.get("arguments") or {}).get("action")
                if step["action"] == "invalid" and action not in JSON_ACTIONS:
                    decisions["invalid"] += 1
                    reasons[str(step.get("result"))[:60]] += 1
                elif step["action"] == "invalid":
                    decisions["valid: repeated or refused search"] += 1
                elif step["action"] in ("search", "reflect", "generate"):
                    decisions[f"valid: {step['action']}"] += 1
            print(f"{number:3d}/{args.questions} {result['terminated_by']:<15} {dict(decisions)}", flush=True)
        wall = time.perf_counter() - start
    valid = sum(v for k, v in decisions.items() if k.startswith("valid"))
    total = valid + decisions["invalid"]
    print(
        f"\n{args.questions} questions, {total} decisions in {wall:.0f} s ({wall / max(total, 1):.1f} s per decision, "
        f"answers included); response_format {'off' if args.no_schema else 'on'}"
    )
    print(f"valid decisions: {valid}/{total} = {valid / max(total, 1):.1%} (goal >= {GOAL:.0%})")
    for key, count in sorted(decisions.items()):
        print(f"  {key:<36} {count}")
    for reason, count in reasons.most_common(5):
        print(f"  invalid because {reason!r}: {count}")
    print(f"endings: {dict(endings)}")


if __name__ == "__main__":
    main()
