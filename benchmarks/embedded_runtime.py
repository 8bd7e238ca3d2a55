# SPDX-License-Identifier: Apache-2.0
"""
The offline default's LLM on two runtimes: transformers + torch (the GGUF converted to safetensors, what
`EmbeddedChatGenerator` does) against llama.cpp running the same GGUF directly (`xllamacpp`'s in-process server,
reached through Haystack's `OpenAIChatGenerator`).

Each runtime runs in its own fresh process: the packaged `agentic_rag_embedded` pipeline over the shipped HotpotQA
sample, on the first `--questions` questions; for llama.cpp every `EmbeddedChatGenerator` of the pipeline (answerer,
fallback) is replaced by an `OpenAIChatGenerator` on the server with the same limits (64 new tokens, greedy). The
router (the bridge-entity policy) is deterministic, so both runtimes answer from the same chunks. Printed per
runtime: start-up (process start to a warm pipeline, model load included), median seconds per question, peak RSS,
mean answer F1 against the gold answers (SQuAD-style), and how many answers the two runtimes share exactly.

    python benchmarks/embedded_runtime.py [--questions 30]
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

START = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def child(runtime: str, questions: int) -> None:
    """Run one runtime and print its figures as one JSON line."""
    import tempfile

    from rich.console import Console

    from benchmarks.harness.metrics import f1
    from haystack_agentic.cli.index import index_path
    from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator
    from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions
    from haystack_agentic.loop_loading import fill_in_memory_store
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline
    from haystack_agentic.resources import sample_corpus_path

    server = None
    pipeline = load_loop_pipeline("agentic_rag_embedded")
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "store.json"
        index_path(sample_corpus_path(), store, Console(stderr=True), quiet=True)
        fill_in_memory_store(pipeline, store)
    if runtime == "llamacpp":
        from haystack.components.generators.chat import OpenAIChatGenerator
        from haystack.utils import Secret

        from haystack_agentic.components.generators.embedded_chat_generator import GGUF_FILE_NAME
        from haystack_agentic.llm.gguf_models import MODELS_DIR
        from haystack_agentic.llm.llamacpp_server import LlamaCppServer

        server = LlamaCppServer(MODELS_DIR / GGUF_FILE_NAME, n_ctx=4096, threads=2).__enter__()
        for _, component in pipeline.walk():
            if isinstance(getattr(component, "chat_generator", None), EmbeddedChatGenerator):
                component.chat_generator = OpenAIChatGenerator(
                    model=server.model_name,
                    api_base_url=server.base_url,
                    api_key=Secret.from_token("none"),
                    max_retries=0,
                    timeout=300.0,
                    generation_kwargs={"max_tokens": 64, "temperature": 0.0},
                )
    pipeline.warm_up()
    startup = time.perf_counter() - START
    rows = load_hotpotqa_questions(sample_corpus_path())[:questions]
    seconds, answers, scores = [], [], []
    for row in rows:
        start = time.perf_counter()
        result = pipeline.run({"controller": {"query": row["question"]}})["result"]
        seconds.append(time.perf_counter() - start)
        answers.append(result["answer"])
        scores.append(f1(result["answer"], row["answer"]))
    if server is not None:
        server.__exit__(None, None, None)
    print(
        json.dumps(
            {
                "startup": startup,
                "seconds": seconds,
                "answers": answers,
                "f1": scores,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--child", choices=["transformers", "llamacpp"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.questions)
        return
    figures = {}
    for runtime in ("transformers", "llamacpp"):
        done = subprocess.run(
            [sys.executable, __file__, "--child", runtime, "--questions", str(args.questions)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"{runtime} failed:\n{done.stderr[-3000:]}")
        figures[runtime] = json.loads(done.stdout.strip().splitlines()[-1])
    same = sum(a == b for a, b in zip(figures["transformers"]["answers"], figures["llamacpp"]["answers"], strict=True))
    print(
        f"{args.questions} HotpotQA sample questions, agentic_rag_embedded (bridge-entity policy), fresh process each"
    )
    print(f"{'runtime':<14}{'start-up s':>12}{'s/question':>12}{'peak RSS MB':>13}{'answer F1':>11}")
    for runtime, fig in figures.items():
        print(
            f"{runtime:<14}{fig['startup']:>12.1f}{statistics.median(fig['seconds']):>12.2f}{fig['rss_mb']:>13.0f}"
            f"{statistics.mean(fig['f1']):>11.3f}"
        )
    print(f"identical answers: {same}/{args.questions}")


if __name__ == "__main__":
    main()
