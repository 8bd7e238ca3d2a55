# SPDX-License-Identifier: Apache-2.0
"""
`haystack-agentic`: index documents and ask questions through the agentic loop, from the command line.

- `haystack-agentic index [PATH]` writes documents (HotpotQA-format JSONL, or .txt/.md files) into an in-memory
  document store saved to a file (default: the shipped HotpotQA sample into the user cache).
- `haystack-agentic ask QUESTION` runs a packaged loop pipeline and prints the answer with its trace
  (`--json` for machine output). Without an LLM configured it runs the embedded offline default.

LLM choice: `--llm openai` (or `auto` with `OPENAI_API_KEY` or `OPENAI_BASE_URL` set) uses Haystack's
`OpenAIChatGenerator` (`--model` / `HAYSTACK_AGENTIC_MODEL`, `--base-url` / `OPENAI_BASE_URL` for Ollama, vLLM
or llama.cpp servers); `--llm embedded` uses the packaged SmolLM2-135M with the deterministic bridge-entity policy.
"""

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from haystack import Document, Pipeline
from haystack.core.errors import PipelineRuntimeError
from haystack.document_stores.in_memory import InMemoryDocumentStore
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from haystack_agentic.hotpotqa import hotpotqa_documents
from haystack_agentic.loop_controller import validate_filters
from haystack_agentic.loop_loading import (
    choose_llm,
    fill_in_memory_store,
    load_loop_pipeline,
    packaged_pipeline_for,
    retriever_store,
)
from haystack_agentic.resources import sample_corpus_path

#: Environment variables the CLI reads.
ENV_MODEL = "HAYSTACK_AGENTIC_MODEL"
ENV_STORE = "HAYSTACK_AGENTIC_STORE"
ENV_CACHE = "HAYSTACK_AGENTIC_CACHE"

_WRITE_BATCH = 200


class CLIError(Exception):
    """An error the CLI reports as one line (exit code 2), with what to change."""


def default_store_path() -> Path:
    """
    Where `index` saves and `ask` loads the document store by default.

    :returns: `$HAYSTACK_AGENTIC_STORE`, else `$HAYSTACK_AGENTIC_CACHE/store.json`, else
        `~/.cache/haystack-agentic/store.json`.
    """
    if os.environ.get(ENV_STORE):
        return Path(os.environ[ENV_STORE])
    cache = Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "haystack-agentic")
    return cache / "store.json"


# --- indexing -------------------------------------------------------------------------------------------------


def read_documents(path: Path) -> list[Document]:
    """
    Read documents from a HotpotQA/MuSiQue-format JSONL file, a .txt/.md file, or a directory of them.

    :param path: The file or directory.
    :returns: The documents (one per paragraph for JSONL, one per file otherwise).
    :raises CLIError: If the path does not exist or holds no supported file.
    """
    if not path.exists():
        raise CLIError(f"{path} does not exist: give a .jsonl file in the HotpotQA format, a .txt/.md file or a folder.")
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    documents: list[Document] = []
    for file in files:
        suffix = file.suffix.lower()
        if suffix == ".jsonl":
            try:
                documents.extend(hotpotqa_documents(file, title_in_content=True))
            except ValueError as exc:
                raise CLIError(str(exc)) from exc
        elif suffix in (".txt", ".md", ".markdown"):
            text = file.read_text(encoding="utf-8", errors="replace")
            if text.strip():
                documents.append(Document(content=text, meta={"title": file.stem, "file_path": str(file)}))
    if not documents:
        raise CLIError(f"No documents found in {path}: supported are .jsonl (HotpotQA format), .txt and .md files.")
    return documents


def index_documents(documents: list[Document], store_path: Path, console: Console, quiet: bool = False) -> int:
    """
    Write documents into a fresh in-memory store (overwriting same ids) and save it to `store_path`.

    :param documents: The documents.
    :param store_path: The JSON file to save the store to (its folder is created).
    :param console: Where progress goes.
    :param quiet: No progress bar.
    :returns: The number of documents in the store.
    """
    from haystack.document_stores.types import DuplicatePolicy

    store = InMemoryDocumentStore()
    with Progress(
        TextColumn("[bold]Indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("documents"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("index", total=len(documents))
        for start in range(0, len(documents), _WRITE_BATCH):
            batch = documents[start : start + _WRITE_BATCH]
            store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE)
            progress.advance(task, len(batch))
    store_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = store_path.with_suffix(store_path.suffix + ".tmp")
    store.save_to_disk(str(tmp))
    tmp.replace(store_path)
    return store.count_documents()


def load_store_into(
    pipeline: Pipeline, store_path: Path, console: Console, quiet: bool, auto_index: bool = True
) -> int:
    """
    Fill the pipeline's empty in-memory store from a saved store file, indexing the shipped sample first if needed.

    :param pipeline: The loop pipeline (its retriever's store is filled).
    :param store_path: The saved store (made from the shipped sample when it does not exist and `auto_index`).
    :param console: Where progress goes.
    :param quiet: No progress output.
    :param auto_index: Index the shipped sample when `store_path` does not exist (the default store only); else
        a missing store is an error.
    :returns: The number of documents in the retriever's store.
    :raises CLIError: If the store cannot be read, or does not exist and `auto_index` is off.
    """
    store = retriever_store(pipeline)
    if not isinstance(store, InMemoryDocumentStore) or store.count_documents() > 0:
        return store.count_documents() if store is not None else 0
    if not store_path.exists():
        if not auto_index:
            raise CLIError(
                f"The store {store_path} does not exist: check the path, or create it with "
                f"`haystack-agentic index PATH --store {store_path}`."
            )
        corpus = sample_corpus_path()
        if not quiet:
            console.print(f"[dim]No index at {store_path}; indexing the shipped sample {corpus.name} first.[/dim]")
        index_documents(read_documents(corpus), store_path, console, quiet)
    try:
        return fill_in_memory_store(pipeline, store_path)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


# --- asking ---------------------------------------------------------------------------------------------------


def load_pipeline(args: argparse.Namespace, llm: str) -> Pipeline:
    """
    Load the pipeline YAML for `ask` and apply the command-line overrides.

    :param args: Parsed arguments (`pipeline`, `mode`, `model`, `base_url`, `max_iterations`).
    :param llm: `openai` or `embedded`.
    :returns: The pipeline.
    :raises CLIError: If the YAML cannot be read or loaded, or `openai` has no key or base URL.
    """
    model = args.model or os.environ.get(ENV_MODEL)
    try:
        packaged = packaged_pipeline_for(llm, args.mode, args.base_url)
        path = Path(args.pipeline) if args.pipeline else packaged
        pipeline = load_loop_pipeline(
            path, model=model, api_base_url=args.base_url, max_iterations=args.max_iterations
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if model and llm == "openai":
        pipeline.metadata["llm"] = f"OpenAI-compatible ({model})"
    return pipeline


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """Escape control characters (e.g. terminal escape codes in a question) before they reach the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _titles(result: dict[str, Any]) -> dict[str, str]:
    return {d["id"]: (d.get("meta") or {}).get("title") or d["id"][:12] for d in result.get("documents", [])}


def print_trace(console: Console, question: str, result: dict[str, Any], seconds: float, describe: dict[str, str]):
    """
    Print the answer with its trace: each iteration's action, query and chunks found, and the termination reason.

    :param console: Where to print.
    :param question: The question.
    :param result: The loop's result dict.
    :param seconds: Wall time of the run.
    :param describe: `llm` and `policy` descriptions.
    """
    console.print(f"[bold]LLM:[/bold] {describe['llm']}   [bold]Policy:[/bold] {describe['policy']}")
    console.print(f"[bold]Question:[/bold] {_printable(question)}", highlight=False)
    titles = _titles(result)
    for step in result["tool_history"]:
        line = f"  {step['iteration']:>2}. {step['action']:<8}"
        if step.get("query"):
            line += f' "{step["query"]}"'
        if step["action"] == "search":
            found = step.get("returned_chunk_ids") or []
            names = ", ".join(titles.get(i, i[:12]) for i in found) or "no results"
            line += f" -> {len(found)} chunk(s): {names}"
        elif step.get("result") and step["action"] != "search":
            line += f"  ({step['result'][:120]})"
        console.print(_printable(line), highlight=False, markup=False)
    answer = result.get("answer")
    shown = _printable(answer) if answer is not None else "(no answer)"
    console.print("[bold]Answer:[/bold] ", end="")
    console.print(shown, highlight=False, markup=False)
    usage = result.get("usage", {})
    per_role = ", ".join(f"{role} {u['calls']}" for role, u in usage.items() if role != "total") or "none"
    total = usage.get("total", {})
    console.print(
        f"[bold]Terminated by:[/bold] {result['terminated_by']} after {result['iterations']} iteration(s); "
        f"LLM calls: {total.get('calls', 0)} ({per_role}); tokens: {total.get('prompt_tokens', 0)} prompt + "
        f"{total.get('completion_tokens', 0)} completion; {seconds:.1f} s",
        highlight=False,
    )
    if result.get("error"):
        console.print(f"[bold red]Error:[/bold red] {result['error']}", highlight=False)


def cmd_index(args: argparse.Namespace, console: Console) -> int:
    path = Path(args.path) if args.path else sample_corpus_path()
    store_path = Path(args.store) if args.store else default_store_path()
    start = time.perf_counter()
    documents = read_documents(path)
    count = index_documents(documents, store_path, console, args.quiet)
    console.print(
        f"Indexed {len(documents)} documents from {path} into {store_path} "
        f"({count} in the store) in {time.perf_counter() - start:.1f} s"
    )
    return 0


def cmd_ask(args: argparse.Namespace, console: Console) -> int:
    question = args.question
    if not question or not question.strip():
        raise CLIError("The question is empty: ask something, e.g. haystack-agentic ask 'Who directed Big Stone Gap?'")
    try:  # malformed filters fail here, not mid-loop
        filters = validate_filters(json.loads(args.filters) if args.filters else None)
    except ValueError as exc:
        raise CLIError(f"--filters is not a valid Haystack filter: {exc}") from exc
    llm = choose_llm(args.llm)
    pipeline = load_pipeline(args, llm)
    explicit_store = bool(args.store or os.environ.get(ENV_STORE))
    store_path = Path(args.store) if args.store else default_store_path()
    quiet = args.quiet or args.json
    err = Console(stderr=True, quiet=quiet, soft_wrap=True)
    load_store_into(pipeline, store_path, err, quiet, auto_index=not explicit_store)
    describe = {
        "llm": pipeline.metadata.get("llm", "configured in the pipeline YAML"),
        "policy": pipeline.metadata.get("policy", "configured in the pipeline YAML"),
    }
    start = time.perf_counter()
    with err.status("Running the agentic loop (the first run loads the model)..."):
        try:
            output = pipeline.run({"controller": {"query": question, "filters": filters}})
        except PipelineRuntimeError as exc:  # e.g. a filter that does not fit the stored metadata's types
            cause = exc.__cause__ or exc
            raise CLIError(f"The loop failed: {type(cause).__name__}: {cause}") from exc
    seconds = time.perf_counter() - start
    result = output["result"]["result"]
    if args.json:
        payload = {**result, "question": question, "llm": describe["llm"], "policy": describe["policy"]}
        payload["seconds"] = round(seconds, 3)
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_trace(console, question, result, seconds, describe)
    return 0 if result["terminated_by"] != "error" else 1


def build_parser() -> argparse.ArgumentParser:
    """
    The argument parser of `haystack-agentic`.

    :returns: The parser.
    """
    parser = argparse.ArgumentParser(prog="haystack-agentic", description="Agentic RAG loops for Haystack.")
    sub = parser.add_subparsers(dest="command", required=True)

    index = sub.add_parser("index", help="Index documents into a saved in-memory document store.")
    index.add_argument("path", nargs="?", help="JSONL (HotpotQA format), .txt/.md file or folder (default: sample).")
    index.add_argument("--store", help="Store file to write (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    index.add_argument("--quiet", action="store_true", help="No progress bar.")

    ask = sub.add_parser("ask", help="Answer a question with the agentic loop and print the trace.")
    ask.add_argument("question", help="The question.")
    ask.add_argument("--json", action="store_true", help="Print the result as JSON.")
    ask.add_argument("--llm", choices=["auto", "openai", "embedded"], default="auto", help="Which LLM drives the loop.")
    ask.add_argument("--mode", choices=["tools", "json"], default="tools", help="Router mode for --llm openai.")
    ask.add_argument("--model", help=f"Model name for --llm openai (default: ${ENV_MODEL} or the YAML's).")
    ask.add_argument("--base-url", help="OpenAI-compatible base URL (Ollama, vLLM, llama.cpp); or OPENAI_BASE_URL.")
    ask.add_argument("--pipeline", help="A pipeline YAML to run instead of the packaged one.")
    ask.add_argument("--store", help="Store file to load (default: $HAYSTACK_AGENTIC_STORE or the user cache).")
    ask.add_argument("--filters", help='Haystack metadata filters as JSON, applied to every search.')
    ask.add_argument("--max-iterations", type=int, help="Override the loop's max_iterations.")
    ask.add_argument("--quiet", action="store_true", help="No progress output.")

    from haystack_agentic.eval_cli import add_eval_parser  # noqa: PLC0415
    from haystack_agentic.serve import add_serve_parser  # noqa: PLC0415 - hayhooks is needed for `serve` only

    add_eval_parser(sub)
    add_serve_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """
    Entry point of `haystack-agentic`.

    :param argv: Arguments (default: `sys.argv[1:]`).
    :returns: The exit code: 0 on success, 1 when the loop ended in error, 2 on bad input.
    """
    args = build_parser().parse_args(argv)
    console = Console(soft_wrap=True)
    try:
        if args.command == "index":
            return cmd_index(args, console)
        if args.command == "serve":
            return args.func(args)
        if args.command == "eval":
            from haystack_agentic.eval_cli import cmd_eval  # noqa: PLC0415

            return cmd_eval(args, console)
        if args.max_iterations is not None and args.max_iterations < 1:
            raise CLIError("--max-iterations must be at least 1.")
        if args.filters:
            try:
                if not isinstance(json.loads(args.filters), dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                raise CLIError(f"--filters must be a JSON object of Haystack filters ({exc}).") from exc
        return cmd_ask(args, console)
    except CLIError as exc:
        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        return 2


if __name__ == "__main__":
    sys.exit(main())
