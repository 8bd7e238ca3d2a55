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

import yaml
from haystack import Document, Pipeline
from haystack.core.errors import PipelineRuntimeError
from haystack.document_stores.in_memory import InMemoryDocumentStore
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from haystack_agentic.components.loop.loop_controller import validate_filters
from haystack_agentic.pipelines.loop_loading import (
    choose_llm,
    fill_in_memory_store,
    load_loop_pipeline,
    packaged_pipeline_for,
    retriever_store,
)
from haystack_agentic.pipelines.loop_pipeline import ALLOWED_MODULES
from haystack_agentic.pipelines.progress import ProgressEvent, run_with_progress
from haystack_agentic.resources import pipeline_path, sample_corpus_path

#: Environment variables the CLI reads.
ENV_MODEL = "HAYSTACK_AGENTIC_MODEL"
ENV_STORE = "HAYSTACK_AGENTIC_STORE"
ENV_CACHE = "HAYSTACK_AGENTIC_CACHE"
ENV_MILVUS_URI = "HAYSTACK_AGENTIC_MILVUS_URI"

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
        raise CLIError(
            f"{path} does not exist: give a .jsonl file in the HotpotQA format, a .txt/.md/.html/.pdf file or a folder."
        )
    from haystack_agentic.indexing.indexing_pipeline import convert_files  # noqa: PLC0415 - converters load only for indexing

    files = readable_files(path)
    try:
        documents = convert_files(files)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if not documents:
        raise CLIError(
            f"No documents found in {path}: supported are .jsonl (HotpotQA format), .txt, .md, .html and .pdf files."
        )
    return documents


def readable_files(path: Path) -> list[Path]:
    """
    The supported files under `path`, without those that cannot give text; each skipped file is reported on
    stderr with the reason.

    :param path: A file or folder.
    :returns: The files to index.
    """
    from haystack_agentic.indexing.indexing_pipeline import collect_files, unreadable_files  # noqa: PLC0415

    files = collect_files(path)
    skipped = unreadable_files(files)
    for file, reason in skipped.items():
        Console(stderr=True, soft_wrap=True).print(f"Skipped {file}: {reason}.", highlight=False, markup=False)
    return [f for f in files if f not in skipped]


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
    return save_store(store, store_path)


def save_store(store: InMemoryDocumentStore, store_path: Path) -> int:
    """
    Save an in-memory store to a JSON file atomically (a temporary file, then a rename), creating its folder.

    :param store: The store.
    :param store_path: The file.
    :returns: The number of documents saved.
    """
    try:
        store_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = store_path.with_suffix(store_path.suffix + ".tmp")
        store.save_to_disk(str(tmp))
        tmp.replace(store_path)
    except OSError as exc:
        raise CLIError(
            f"Cannot write the store {store_path} ({type(exc).__name__}: {exc.strerror or exc}): "
            "choose another --store (or HAYSTACK_AGENTIC_STORE / HAYSTACK_AGENTIC_CACHE)."
        ) from exc
    return store.count_documents()


def index_into_store(
    documents: list[Document], store: Any, embedder: Any, console: Console, quiet: bool = False
) -> int:
    """
    Embed and write documents into any document store (overwriting same ids), with a progress bar (count, rate).

    :param documents: The documents.
    :param store: The document store (Milvus, Weaviate, in-memory...).
    :param embedder: A document embedder, or `None`.
    :param console: Where progress goes.
    :param quiet: No progress bar.
    :returns: The number of documents in the store.
    :raises CLIError: On an embedding dimension mismatch (nothing is written) or a store error.
    """
    from haystack_agentic.indexing.document_stores import EmbeddingDimensionError  # noqa: PLC0415
    from haystack_agentic.indexing.indexing_pipeline import write_documents  # noqa: PLC0415

    with Progress(
        TextColumn("[bold]Indexing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("documents"),
        TextColumn("[dim]{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as progress:
        task = progress.add_task("index", total=len(documents), rate="")
        start = time.perf_counter()

        def advance(n: int) -> None:
            done = progress.tasks[0].completed + n
            rate = done / max(time.perf_counter() - start, 1e-9)
            progress.update(task, advance=n, rate=f"{rate:.0f} docs/s")

        try:
            return write_documents(documents, store, embedder, on_batch=advance)
        except EmbeddingDimensionError as exc:
            raise CLIError(str(exc)) from exc


def open_index_store(backend: str, uri: str | None, collection: str | None) -> Any:
    """
    The document store `index --backend` writes to.

    :param backend: `milvus` or `weaviate`.
    :param uri: Milvus Lite file / Milvus server URI, or Weaviate URL (defaults: the user cache's milvus.db,
        http://localhost:8080).
    :param collection: Collection name (default: the packaged pipelines').
    :returns: The store.
    :raises CLIError: If the integration is missing or the store cannot be reached.
    """
    from haystack_agentic.indexing import document_stores as ds  # noqa: PLC0415

    try:
        if backend == "milvus":
            store = ds.milvus_document_store(uri or str(default_milvus_uri()), collection or ds.MILVUS_COLLECTION)
        else:
            store = ds.weaviate_document_store(uri or default_weaviate_url(), collection or ds.WEAVIATE_COLLECTION)
        store.count_documents()
    except ImportError as exc:
        raise CLIError(f"{exc}: install it with `pip install 'haystack-agentic[{backend}]'`.") from exc
    except Exception as exc:  # noqa: BLE001 - one line with the address, not a stack trace
        address = uri or (default_milvus_uri() if backend == "milvus" else default_weaviate_url())
        raise CLIError(f"Cannot open the {backend} store at {address}: {type(exc).__name__}: {exc}") from exc
    return store


def default_weaviate_url() -> str:
    """
    The Weaviate server `--backend weaviate` uses by default.

    :returns: `$WEAVIATE_URL`, else `http://localhost:8080`.
    """
    return os.environ.get("WEAVIATE_URL") or "http://localhost:8080"


def default_milvus_uri() -> Path:
    """
    The Milvus Lite file `--backend milvus` uses by default.

    :returns: `$HAYSTACK_AGENTIC_MILVUS_URI`, else `milvus.db` next to the default store file.
    """
    if os.environ.get(ENV_MILVUS_URI):
        return Path(os.environ[ENV_MILVUS_URI])
    return default_store_path().parent / "milvus.db"


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
    if store is None:
        return 0
    if not isinstance(store, InMemoryDocumentStore):
        return _check_store_has_documents(pipeline, store)
    if store.count_documents() > 0:
        return store.count_documents()
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
        fill_in_memory_store(pipeline, store_path)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    return _check_store_has_documents(pipeline, store)


def _check_store_has_documents(pipeline: Pipeline, store: Any) -> int:
    """One-line errors for a store that cannot be reached, is empty, or lacks the embeddings a dense pipeline needs."""
    from haystack_agentic.components.retrievers.safe_retriever import describe_store_address  # noqa: PLC0415

    where = f"{type(store).__name__} at {describe_store_address(store)}"
    try:
        count = store.count_documents()
    except Exception as exc:  # noqa: BLE001 - an unreachable server: one line with its address
        raise CLIError(f"Cannot reach the store {where}: {type(exc).__name__}: {exc}") from exc
    if count == 0:
        raise CLIError(f"The store {where} has no documents: index some first with `haystack-agentic index`.")
    if "query_embedder" in pipeline.graph.nodes and isinstance(store, InMemoryDocumentStore):
        sample = store.filter_documents()[:1]
        if sample and sample[0].embedding is None:
            raise CLIError(
                f"The store {where} has no embeddings, which this dense pipeline needs: "
                "re-index with `haystack-agentic index PATH --embed`."
            )
    return count


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
        backend = getattr(args, "backend", "memory")
        store_uri = getattr(args, "uri", None)
        if backend != "memory" and not args.pipeline:
            if llm != "embedded":
                raise ValueError(f"--backend {backend} has a packaged pipeline for --llm embedded only; pass --pipeline.")
            packaged = pipeline_path(f"agentic_rag_embedded_{backend}")
            if backend == "milvus" and not store_uri:
                store_uri = str(default_milvus_uri())
            if backend == "weaviate" and not store_uri:
                store_uri = default_weaviate_url()
        if backend == "milvus" and store_uri and "://" not in store_uri and not Path(store_uri).exists():
            # Milvus Lite would create an empty database there: a query run must not write anything.
            raise ValueError(
                f"There is no Milvus Lite database at {store_uri}: index into it first with "
                f"`haystack-agentic index PATH --backend milvus --uri {store_uri}`."
            )
        path = Path(args.pipeline) if args.pipeline else packaged
        pipeline = load_loop_pipeline(
            path, model=model, api_base_url=args.base_url, max_iterations=args.max_iterations, store_uri=store_uri
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
    print_evidence(console, result)
    print_grounding(console, result)


def print_evidence(console: Console, result: dict[str, Any]) -> None:
    """
    Print the evidence check's verdict (score, threshold, method, reason) and any warning.

    :param console: Where to print.
    :param result: The loop's result dict.
    """
    evidence = result.get("evidence")
    if not evidence:
        return
    verdict = "sufficient" if evidence.get("sufficient") else "insufficient"
    console.print(
        f"[bold]Evidence:[/bold] {verdict}, score {evidence.get('score', 0):.2f} (needed "
        f"{evidence.get('threshold', 0):.2f}, {evidence.get('method')}); ",
        end="",
        highlight=False,
    )
    console.print(_printable(str(evidence.get("reason") or "")), highlight=False, markup=False)
    if evidence.get("warning"):
        console.print("[bold yellow]Warning:[/bold yellow] ", end="")
        console.print(_printable(evidence["warning"]), highlight=False, markup=False)


def print_grounding(console: Console, result: dict[str, Any]) -> None:
    """
    Print the answer's grounding sentence by sentence (supported or not, score, source chunk), or why it was skipped.

    :param console: Where to print.
    :param result: The loop's result dict.
    """
    grounding = result.get("grounding")
    if not grounding:
        reason = (result.get("metadata") or {}).get("grounding_skipped")
        if reason:
            if reason.startswith("HHEM model") and "not available" in reason:
                reason = "the HHEM model is not available here (see the note on stderr for how to get it)"
            console.print("[bold]Grounding:[/bold] skipped: ", end="")
            console.print(_printable(reason), highlight=False, markup=False)
        return
    console.print(
        f"[bold]Grounding:[/bold] {grounding['score']:.2f} ({grounding['method']}, {grounding['model']}; "
        f"supported at >= {grounding['threshold']})",
        highlight=False,
    )
    spans = sorted([*grounding["faithful_spans"], *grounding["hallucinated_spans"]], key=lambda s: s["start"])
    for span in spans:
        mark = "supported    " if span["supported"] else "NOT supported"
        line = f"  {mark} {span['score']:.2f}  \"{span['text']}\""
        if span["sources"]:
            first = span["sources"][0]
            line += f" <- {first.get('title') or first['chunk_id'][:12]}"
            if first.get("iteration") is not None:
                line += f" (search {first['iteration']}: \"{first.get('query') or ''}\")"
            if len(span["sources"]) > 1:
                line += f" +{len(span['sources']) - 1} more"
        console.print(_printable(line), highlight=False, markup=False)


def prepare_grounder(pipeline: Pipeline, llm: str, err: Console) -> None:
    """
    Load the pipeline's HHEM grounder before the run; when its model is not available, say so with how to get it and
    use the LLM as judge instead (`--llm openai`) or run without grounding.

    :param pipeline: The loop pipeline.
    :param llm: `openai` or `embedded`.
    :param err: Where the notice goes (stderr).
    """
    from haystack_agentic.components.grounders.hhem_grounder import HOW_TO_GET, HHEMGrounder  # noqa: PLC0415
    from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder  # noqa: PLC0415

    try:
        grounder = pipeline.get_component("grounder")
    except ValueError:
        return
    if not isinstance(grounder, HHEMGrounder):
        return
    import logging as std_logging  # noqa: PLC0415

    grounder_logger = std_logging.getLogger("haystack_agentic.components.grounders.hhem_grounder")
    level = grounder_logger.level
    grounder_logger.setLevel(std_logging.ERROR)  # the notice below says it once, with how to get the model
    try:
        with err.status("Loading the HHEM grounding model..."):
            grounder.warm_up()
    finally:
        grounder_logger.setLevel(level)
    if grounder.load_error is None:
        return
    judge_llm = getattr(pipeline.get_component("router"), "chat_generator", None) if llm == "openai" else None
    err.print("[yellow]Grounding:[/yellow] ", end="")
    err.print(f"{grounder.load_error}.", highlight=False, markup=False)
    err.print(f"To get it: {HOW_TO_GET}.", highlight=False, markup=False)
    if judge_llm is None:
        err.print("Running without grounding.", highlight=False)
        return
    err.print("Grounding with the configured LLM as judge instead (LLMJudgeGrounder).", highlight=False)
    pipeline.remove_component("grounder")
    pipeline.add_component("grounder", LLMJudgeGrounder(chat_generator=judge_llm))
    pipeline.connect("finish.value", "grounder.state")
    pipeline.connect("grounder.state", "result.state")


def set_evidence_policy(pipeline: Pipeline, policy: str) -> None:
    """
    Set `on_insufficient_evidence` on the pipeline's evidence check.

    :param pipeline: The loop pipeline.
    :param policy: `give_up` or `answer_with_warning`.
    :raises CLIError: If the pipeline has no evidence check.
    """
    try:
        checker = pipeline.get_component("evidence")
    except ValueError as exc:
        raise CLIError("--on-insufficient-evidence needs a pipeline with an `evidence` component.") from exc
    checker.on_insufficient_evidence = policy


def _index_with_pipeline(args: argparse.Namespace, path: Path, console: Console, start: float) -> int:
    """`index PATH --pipeline YAML`: run a YAML indexing pipeline over the files (dimension checked first)."""
    from haystack_agentic.indexing.indexing_pipeline import run_indexing_pipeline  # noqa: PLC0415
    from haystack_agentic.pipelines.loop_loading import set_store_uri  # noqa: PLC0415

    if not path.exists():
        raise CLIError(f"{path} does not exist: give a file or a folder of .txt/.md/.html/.pdf files.")
    files = readable_files(path)
    try:
        data = yaml.safe_load(Path(args.pipeline).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "writer" not in (data.get("components") or {}):
            raise ValueError("it is not an indexing pipeline (no component named `writer`)")
        if args.uri:
            set_store_uri(data["components"], args.uri)
        pipeline = Pipeline.from_dict(data, allowed_modules=ALLOWED_MODULES)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
        raise CLIError(f"Cannot use the indexing pipeline {args.pipeline}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - e.g. the store cannot be reached while loading
        raise CLIError(f"Cannot load the indexing pipeline {args.pipeline}: {type(exc).__name__}: {exc}") from exc
    try:
        with Console(stderr=True, quiet=args.quiet).status(f"Indexing {len(files)} file(s) with {args.pipeline}..."):
            count = run_indexing_pipeline(pipeline, files)
    except ValueError as exc:  # unsupported files, a dimension mismatch: nothing was written
        raise CLIError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - e.g. the store's server cannot be reached
        raise CLIError(f"Indexing with {args.pipeline} failed: {type(exc).__name__}: {exc}") from exc
    console.print(
        f"Indexed {len(files)} file(s) from {path} with {args.pipeline} ({count} in the store) "
        f"in {time.perf_counter() - start:.1f} s"
    )
    return 0


def cmd_index(args: argparse.Namespace, console: Console) -> int:
    path = Path(args.path) if args.path else sample_corpus_path()
    store_path = Path(args.store) if args.store else default_store_path()
    start = time.perf_counter()
    if args.pipeline:
        return _index_with_pipeline(args, path, console, start)
    documents = read_documents(path)
    backend = getattr(args, "backend", "memory")
    if backend == "memory" and args.embed:
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415

        memory = InMemoryDocumentStore()
        index_into_store(documents, memory, MiniLMDocumentEmbedder(), console, args.quiet)
        count = save_store(memory, store_path)
        target = f"{store_path} (with MiniLM embeddings)"
    elif backend == "memory":
        count = index_documents(documents, store_path, console, args.quiet)
        target = store_path
    else:
        from haystack_agentic.components.embedders.minilm_document_embedder import MiniLMDocumentEmbedder  # noqa: PLC0415

        store = open_index_store(backend, args.uri, args.collection)
        count = index_into_store(documents, store, MiniLMDocumentEmbedder(), console, args.quiet)
        target = f"{backend} at {args.uri or (default_milvus_uri() if backend == 'milvus' else default_weaviate_url())}"
    console.print(
        f"Indexed {len(documents)} documents from {path} into {target} "
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
    prepare_grounder(pipeline, llm, err)
    if getattr(args, "on_insufficient_evidence", None):
        set_evidence_policy(pipeline, args.on_insufficient_evidence)
    describe = {
        "llm": pipeline.metadata.get("llm", "configured in the pipeline YAML"),
        "policy": pipeline.metadata.get("policy", "configured in the pipeline YAML"),
    }
    start = time.perf_counter()
    with err.status("Running the agentic loop (the first run loads the model)...") as status:

        def show(event: ProgressEvent) -> None:
            if event.step is not None:
                query = f' "{_printable(event.step.query)}"' if event.step.query else ""
                status.update(f"Iteration {event.step.iteration}: {event.step.action}{query}")

        try:
            result = run_with_progress(pipeline, {"controller": {"query": question, "filters": filters}}, show)
        except PipelineRuntimeError as exc:  # e.g. a filter that does not fit the stored metadata's types
            cause = exc.__cause__ or exc
            raise CLIError(f"The loop failed: {type(cause).__name__}: {cause}") from exc
    seconds = time.perf_counter() - start
    if args.json:
        payload = {**result, "question": question, "llm": describe["llm"], "policy": describe["policy"]}
        payload["seconds"] = round(seconds, 3)
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_trace(console, question, result, seconds, describe)
    return 0 if result["terminated_by"] != "error" else 1


def _add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        choices=["memory", "milvus", "weaviate"],
        default="memory",
        help="Document store: memory (JSON file, BM25), milvus (Milvus Lite file or server, hybrid), weaviate (server).",
    )
    parser.add_argument(
        "--uri", help=f"Milvus Lite file or server URI (default: ${ENV_MILVUS_URI} or milvus.db in the cache); Weaviate URL."
    )
    if parser.prog.endswith("index"):
        parser.add_argument("--collection", help="Collection name (default: the packaged pipelines').")


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
    index.add_argument(
        "--embed",
        action="store_true",
        help="With the in-memory backend: also store MiniLM embeddings (for pipelines/agentic_rag_embedded_dense.yml).",
    )
    index.add_argument(
        "--pipeline",
        help="Run this YAML indexing pipeline (e.g. pipelines/indexing_milvus.yml) instead; --uri sets its store.",
    )
    _add_backend_arguments(index)

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
    ask.add_argument(
        "--on-insufficient-evidence",
        choices=["give_up", "answer_with_warning"],
        help="When the documents found do not support an answer: give up saying so (the packaged default), or "
        "answer with a warning.",
    )
    ask.add_argument("--quiet", action="store_true", help="No progress output.")
    _add_backend_arguments(ask)

    from haystack_agentic.cli.eval import add_eval_parser  # noqa: PLC0415
    from haystack_agentic.cli.serve import add_serve_parser  # noqa: PLC0415 - hayhooks is needed for `serve` only

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
    # Piped output has no terminal width; tables (eval) then get room instead of rich's 80-column fallback.
    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)
    try:
        if args.command == "index":
            return cmd_index(args, console)
        if args.command == "serve":
            return args.func(args)
        if args.command == "eval":
            from haystack_agentic.cli.eval import cmd_eval  # noqa: PLC0415

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
