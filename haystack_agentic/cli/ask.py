# SPDX-License-Identifier: Apache-2.0
"""`haystack-agentic ask`: answer a question with a packaged (or your own) loop pipeline and print the trace."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack_agentic.cli.ask_output import print_trace
from haystack_agentic.cli.common import (
    CLIError,
    add_backend_arguments,
    add_command,
    add_loop_arguments,
    hide_model_progress_bars,
    local_gguf,
)
from haystack_agentic.presentation import printable
from haystack_agentic.settings import ENV_OPENAI_BASE_URL, default_store_path, store_path_from_env

if TYPE_CHECKING:
    from haystack import Pipeline
    from rich.console import Console

    from haystack_agentic.pipelines.loop_builder import LoopOptions

_DESCRIPTION = """\
Answer a question with the agentic loop: an LLM decides, turn by turn, to
search the document store again, answer, or give up. It prints each turn's
action and the chunks found, the answer with its [n] markers and the sources
they cite (title and quoted sentence; unsupported ones flagged), why the loop
stopped, the LLM calls and tokens, and how far each answer sentence is
supported by the chunks.

The LLM (--llm auto): an OpenAI-compatible endpoint when OPENAI_API_KEY or
OPENAI_BASE_URL is set (Ollama, vLLM and llama.cpp servers via --base-url),
else the packaged SmolLM2-135M, offline, with a fixed bridge-entity policy.
The store: the default store file (the shipped HotpotQA sample is indexed into
it on first use), --store FILE, or --backend milvus/weaviate. See `index`.

Exit codes: 0 answered (or gave up), 1 the loop ended in an error, 2 bad input.
"""

_EXAMPLES = """\
examples:
  # offline, over the shipped HotpotQA sample
  haystack-agentic ask 'Who directed Big Stone Gap?'
  # over your own documents (see `haystack-agentic index --help`)
  haystack-agentic ask 'What do my notes say?' --store my_store.json
  # a local GGUF model, run by llama.cpp in this process (the llamacpp extra)
  haystack-agentic ask 'Who directed Big Stone Gap?' --gguf model.gguf
  # a local OpenAI-compatible server, JSON routing for models without tools
  haystack-agentic ask 'Who directed Big Stone Gap?' --llm openai \\
      --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b --mode json
  # search only documents whose metadata match; print the whole result as JSON
  haystack-agentic ask 'Who wrote the novel?' --json \\
      --filters '{"field": "meta.title", "operator": "==",
                 "value": "Adriana Trigiani"}'
  # the packaged Milvus Lite pipeline (the file from `index --backend milvus`)
  haystack-agentic ask 'Who directed Big Stone Gap?' \\
      --backend milvus --uri my_docs.db
  # your own loop pipeline YAML
  haystack-agentic ask 'Who directed Big Stone Gap?' --pipeline my_loop.yml
"""


def add_ask_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `ask` sub-command."""
    summary = "Answer a question with the agentic loop and print the trace."
    ask = add_command(subparsers, "ask", summary, _DESCRIPTION, _EXAMPLES)
    ask.add_argument("question", help="The question.")
    ask.add_argument("--json", action="store_true", help="Print the result as JSON.")
    add_loop_arguments(ask)
    add_backend_arguments(ask)
    return ask


def check_server(options: LoopOptions, err: Console) -> LoopOptions:
    """
    Complete the options with what the server at `--base-url` reports.

    Returns the options with what the server at `--base-url` reports (llama.cpp's `/props`): its context size, and json
    routing (said on `err`) when its chat template has no tools and no `--mode` was given.

    :raises CLIError: With `--mode tools` on a server whose template cannot call tools.
    """
    from haystack_agentic.llm.server_info import read_server_info

    base_url = options.base_url or os.environ.get(ENV_OPENAI_BASE_URL)
    if options.llm != "openai" or not base_url:
        return options
    info = read_server_info(base_url)
    options = replace(options, context_tokens=info.n_ctx)
    if info.supports_tools is False and not options.pipeline:
        if options.mode == "tools":
            msg = (
                "The server's chat template cannot call tools (its /props: supports_tools false). Use --mode json, or "
                "start llama.cpp with a template that has tools (--jinja --chat-template-file <template>)."
            )
            raise CLIError(msg)
        if options.mode is None:
            err.print("The server's chat template has no tool support: routing in JSON mode (--mode json).")
            options = replace(options, mode="json")
    return options


def say_on_stderr(quiet: bool) -> Callable[[str], None]:
    """A function that prints one line on stderr (nothing when `quiet`)."""
    from rich.console import Console

    err = Console(stderr=True, quiet=quiet, soft_wrap=True)
    return lambda line: err.print(line, highlight=False, markup=False)


def load_store_into(
    pipeline: Pipeline, store_path: Path, console: Console, quiet: bool, auto_index: bool = True
) -> None:
    """
    Fill the pipeline's empty in-memory store from a store file and check the retriever's store.

    The store file is read into the pipeline's empty in-memory store (with `auto_index`, a missing one is first made
    from the shipped sample), then the retriever's store is checked.

    :raises CLIError: If the store cannot be read or reached, is empty, lacks the embeddings a dense pipeline needs,
        or does not exist and `auto_index` is off.
    """
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_agentic.cli.index import index_path
    from haystack_agentic.components.retrievers.safe_retriever import describe_store_address
    from haystack_agentic.loop_loading import fill_in_memory_store, retriever_store
    from haystack_agentic.resources import sample_corpus_path

    store = retriever_store(pipeline)
    in_memory = isinstance(store, InMemoryDocumentStore)
    if store is None or (in_memory and store.count_documents() > 0):
        return
    if in_memory:
        if not store_path.exists():
            if not auto_index:
                msg = (
                    f"The store {store_path} does not exist: check the path, or create it with "
                    f"`haystack-agentic index PATH --store {store_path}`."
                )
                raise CLIError(msg)
            corpus = sample_corpus_path()
            if not quiet:
                console.print(f"[dim]No index at {store_path}; indexing the shipped sample {corpus.name} first.[/dim]")
            index_path(corpus, store_path, console, quiet)
        try:
            fill_in_memory_store(pipeline, store_path)
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
    where = f"{type(store).__name__} at {describe_store_address(store)}"
    try:
        count = store.count_documents()
    except Exception as exc:
        msg = f"Cannot reach the store {where}: {type(exc).__name__}: {exc}"
        raise CLIError(msg) from exc
    if count == 0:
        msg = f"The store {where} has no documents: index some first with `haystack-agentic index`."
        raise CLIError(msg)
    if "query_embedder" in dict(pipeline.walk()) and in_memory:
        sample = store.filter_documents()[:1]
        if sample and sample[0].embedding is None:
            msg = (
                f"The store {where} has no embeddings, which this dense pipeline needs: "
                "re-index with `haystack-agentic index PATH --embed`."
            )
            raise CLIError(msg)


def warm_grounder(pipeline: Pipeline, err: Console) -> None:
    """Load the pipeline's grounding model before the run, with a status line on `err` (its warnings muted)."""
    import logging as std_logging

    grounder = dict(pipeline.walk()).get("grounder")
    if grounder is None or not hasattr(grounder, "warm_up"):
        return
    grounder_logger = std_logging.getLogger("haystack_agentic.components.grounders.hhem_grounder")
    level = grounder_logger.level
    grounder_logger.setLevel(std_logging.ERROR)
    try:
        with err.status("Loading the grounding model..."):
            grounder.warm_up()
    finally:
        grounder_logger.setLevel(level)


@dataclass
class PreparedLoop:
    """A loop pipeline loaded, limited and filled once, with what every question of a session shares."""

    pipeline: Pipeline
    filters: dict[str, Any] | None
    describe: dict[str, str]
    err: Any  # the stderr Console progress goes to
    #: One event loop for every question of the session (an OpenAI client's connections stay on their loop).
    runner: asyncio.Runner = field(default_factory=asyncio.Runner)

    def close(self) -> None:
        """Close the session's event loop."""
        self.runner.close()


def prepare_loop(args: argparse.Namespace, quiet: bool, first_question: str | None = None) -> PreparedLoop:
    """
    Build the loop pipeline `ask` / `chat` runs, fill its store, check `first_question` (before models load).

    :raises CLIError: On malformed filters, flags that do not fit the LLM, or a refused question.
    """
    from rich.console import Console

    from haystack_agentic.components.loop.loop_controller import validate_filters
    from haystack_agentic.pipelines import loop_builder

    try:  # malformed filters fail here, once, not mid-loop
        filters = json.loads(args.filters) if args.filters else None
    except ValueError as exc:
        msg = f"--filters must be a JSON object of Haystack filters ({exc})."
        raise CLIError(msg) from exc
    if filters is not None and not isinstance(filters, dict):
        msg = f"--filters must be a JSON object of Haystack filters, got {type(filters).__name__}."
        raise CLIError(msg)
    try:
        filters = validate_filters(filters)
    except ValueError as exc:
        msg = f"--filters: {exc}"  # the message already says it is not a valid Haystack filter, and why
        raise CLIError(msg) from exc
    try:
        options = loop_builder.LoopOptions(
            pipeline=args.pipeline,
            llm=args.llm,
            mode=args.mode,
            model=args.model,
            base_url=args.base_url,
            backend=args.backend,
            store_uri=args.uri,
            max_iterations=args.max_iterations,
            timeout=args.timeout,
            max_tokens=args.max_tokens,
            on_insufficient_evidence=args.on_insufficient_evidence,
        )  # flags that do not fit the LLM fail now
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    if quiet:
        hide_model_progress_bars()
    err = Console(stderr=True, quiet=quiet, soft_wrap=True)
    options = check_server(options, err)
    notices: list[str] = []  # said once the store and the question are known to be fine
    try:
        pipeline = loop_builder.build_loop(options, notify=notices.append)
    except (ValueError, FileNotFoundError) as exc:  # FileNotFoundError: no packaged pipeline of that name
        raise CLIError(str(exc)) from exc
    explicit_store = bool(args.store or store_path_from_env())
    store_path = Path(args.store) if args.store else default_store_path()
    load_store_into(pipeline, store_path, err, quiet, auto_index=not explicit_store)
    from haystack_agentic.components.loop.loop_controller import LoopController

    controller = dict(pipeline.walk()).get("controller")
    if first_question is not None and isinstance(controller, LoopController):  # e.g. too long: before models load
        try:
            controller.validate_inputs(query=first_question, collections=args.collection)
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
    for notice in notices:
        err.print(notice, highlight=False, markup=False)
    warm_grounder(pipeline, err)
    described = {key: pipeline.metadata.get(key, "configured in the pipeline YAML") for key in ("llm", "policy")}
    return PreparedLoop(pipeline, filters, described, err)


def run_question(
    loop: PreparedLoop, args: argparse.Namespace, question: str, messages: list[Any] | None = None
) -> tuple[dict[str, Any], float]:
    """
    Run the prepared loop on a question, showing each iteration; returns `(result, seconds)`.

    The loop runs on `question` (or `messages`, the question last), each iteration shown on stderr; `result` is what
    `LoopResultBuilder` outputs (Haystack objects: `result_to_dict` makes it JSON).

    :raises CLIError: When the loop refuses its input or fails outside a defined termination.
    """
    from haystack.core.errors import PipelineRuntimeError

    from haystack_agentic.pipelines.progress import ProgressEvent, run_with_progress

    start = time.perf_counter()
    with loop.err.status("Running the agentic loop (the first run loads the model)...") as status:

        def show(event: ProgressEvent) -> None:
            if event.step is not None:
                query = f' "{printable(event.step.query)}"' if event.step.query else ""
                status.update(f"Iteration {event.step.iteration}: {event.step.action}{query}")

        inputs: dict[str, Any] = {"filters": loop.filters, "collections": args.collection}  # None: no scope
        inputs.update({"messages": messages} if messages is not None else {"query": question})
        try:
            result = run_with_progress(loop.pipeline, {"controller": inputs}, show, runner=loop.runner)
        except PipelineRuntimeError as exc:  # e.g. a filter that does not fit the stored metadata's types
            cause = exc.__cause__ or exc
            from haystack_agentic.components.loop.loop_controller import InvalidLoopInputError

            refused = isinstance(cause, InvalidLoopInputError)  # e.g. an unknown collection: the message says all
            raise CLIError(str(cause) if refused else f"The loop failed: {type(cause).__name__}: {cause}") from exc
    return result, time.perf_counter() - start


def cmd_ask(args: argparse.Namespace, console: Console) -> int:
    """Run `haystack-agentic ask`: prepare the loop, answer the question, print the trace (or `--json`)."""
    question = args.question
    if not question or not question.strip():
        msg = "The question is empty: ask something, e.g. haystack-agentic ask 'Who directed Big Stone Gap?'"
        raise CLIError(msg)
    with local_gguf(args, say_on_stderr(args.quiet or args.json)) as served:
        loop = prepare_loop(served, args.quiet or args.json, question)
        try:
            result, seconds = run_question(loop, served, question)
        finally:
            loop.close()
    from haystack_agentic.components.loop.loop_result_builder import result_to_dict

    result = result_to_dict(result)
    if args.json:
        payload = {**result, "question": question, **loop.describe, "seconds": round(seconds, 3)}
        print(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_trace(console, question, result, seconds, loop.describe)
    return 0 if result["terminated_by"] != "error" else 1
