# SPDX-License-Identifier: Apache-2.0
"""
The packaged YAML files, written for people to read.

Only the init parameters that differ from the defaults, a comment per component, one connection per line, a shared
document store written once (`&store`, `*store`).
"""

import importlib
import inspect
import textwrap
from enum import Enum
from typing import Any

import yaml
from haystack import Pipeline

from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES, LoopResultBuilder

#: What hayhooks serves of a packaged loop YAML (`hayhooks pipeline deploy-yaml`; `Pipeline.loads` ignores both): the
#: input `query` (hayhooks makes every declared input required) and one output per key of the loop's JSON result
#: (answered as `{"result": {"result": {...}}}`).
HAYHOOKS_INPUTS = {"query": "controller.query"}
HAYHOOKS_OUTPUTS = {key: f"result.{key}" for key in RESULT_TYPES if key != "answers"}

# The comments of the packaged files: what each file is for, what each component does and what to change in it.
GENERATED_NOTE = (
    "Written by `make pipelines` (haystack_agentic/pipelines/default_pipelines.py): edit a copy, not this file. "
    "Only the parameters that differ from each component's defaults are listed; the class docstrings list the rest.\n"
    "Load it with `haystack_agentic.load_loop_pipeline(path)`, or with `Pipeline.loads(text, "
    "allowed_modules=haystack_agentic.allowed_modules_for(text))`: the exact modules it names (importing the package "
    "trusts none)."
)

_OFFLINE = (
    "Offline: a fixed bridge-entity policy routes (search the question, then the entities it leads to) and the "
    "packaged SmolLM2-135M writes the answer. No API key, no server."
)

_OPENAI = (
    "An LLM decides each turn to search, answer or give up (AgenticRouter, {mode}) on an OpenAI-compatible "
    "endpoint: OPENAI_API_KEY, or OPENAI_BASE_URL for Ollama, vLLM or llama.cpp servers. The model is set in the "
    "chat generators (or with `ask --model`)."
)

_INDEXING = (
    "Indexing: .txt/.md/.html/.pdf files -> text -> cleaned 200-word chunks -> MiniLM embeddings -> {store}.\n"
    "Run: `haystack-agentic index PATH --pipeline {file} [--uri ...]`, or in Python "
    '`pipeline.run({{"router": {{"sources": paths}}}})`.\n'
    "Writing upserts by id and replaces a re-indexed file's earlier chunks, so indexing again duplicates nothing."
)

_GROUNDED = "The answer's sentences are checked against the chunks found (HHEMGrounder)."
_UNGROUNDED = "No grounding stage (cheaper): the same loop as {grounded} without the HHEM grounder."

_MILVUS = (
    "Milvus (a Milvus Lite file or a server), hybrid retrieval: dense MiniLM + BM25, fused by RRF.\n"
    "Compared with agentic_rag_embedded.yml only the store, the retriever, the query embedder and the search "
    'connections differ: the README ("Switching the store by hand") shows the 15-line change.'
)

#: The header comment of each packaged file.
FILE_NOTES = {
    "agentic_rag.yml": _OPENAI.format(mode="tools mode: native tool calling") + "\n" + _GROUNDED,
    "agentic_rag_json.yml": _OPENAI.format(mode="json mode, for models without tool calling") + "\n" + _GROUNDED,
    "agentic_rag_ungrounded.yml": _OPENAI.format(mode="tools mode")
    + "\n"
    + _UNGROUNDED.format(grounded="agentic_rag.yml"),
    "agentic_rag_embedded.yml": _OFFLINE + " In-memory BM25 store.\n" + _GROUNDED,
    "agentic_rag_embedded_ungrounded.yml": _OFFLINE
    + " In-memory BM25 store.\n"
    + _UNGROUNDED.format(grounded="agentic_rag_embedded.yml"),
    "agentic_rag_embedded_dense.yml": _OFFLINE + "\nIn-memory dense retrieval (MiniLM): index with "
    "`haystack-agentic index PATH --embed`.\n" + _GROUNDED,
    "agentic_rag_embedded_milvus.yml": _OFFLINE + "\n" + _MILVUS + "\n" + _GROUNDED,
    "agentic_rag_embedded_milvus_dense.yml": _OFFLINE + "\nMilvus, dense retrieval only (MiniLM): for Milvus servers "
    "older than 2.5, which have no BM25 (`ask --backend milvus` picks it by itself).\n" + _GROUNDED,
    "agentic_rag_embedded_weaviate.yml": _OFFLINE
    + "\nA Weaviate server, hybrid retrieval (dense MiniLM + BM25).\n"
    + _GROUNDED,
    "indexing_milvus.yml": _INDEXING.format(store="Milvus (Lite file or server)", file="indexing_milvus"),
    "indexing_weaviate.yml": _INDEXING.format(store="a Weaviate server", file="indexing_weaviate"),
}

#: Comments of components known by their name in the packaged pipelines (the loop's joiner).
NAME_NOTES = {
    "finish": "where every way a run ends (answer, give-up, error, fallback) meets: one result per run.\n"
    "Nothing to change.",
}

#: Comments by component class: what it is, then (on a line of its own) what to change.
COMPONENT_NOTES = {
    "LoopController": "the loop's bookkeeping: merges the chunks each search finds and stops the loop.\n"
    "Change: max_iterations (most turns), chunk_cap (most chunks kept; the lowest-scored go first),\n"
    "max_searches_per_turn (parallel searches one turn runs; max_runs_per_component must grow with it).",
    "BridgeEntityRouter": "a fixed multi-hop policy, no LLM: search the question (first_top_k chunks, default 4), "
    "then up to max_follow_ups (2) entities named in what it found, follow_up_top_k (1) chunk each; the entities are "
    "the titles in document_store.\n"
    "Change: those numbers. Its document_store is the retriever's (*store): change the store there.",
    "AgenticRouter": "the controller LLM: one call per turn decides to search (and for what), answer or give up; "
    "first, the question is searched without an LLM call; in json mode search_policy (the bridge-entity policy) then "
    "searches the entities its chunks name, also without one.\n"
    "Change: chat_generator (model, api_base_url), mode (tools/json), system_prompt, default_top_k, max_top_k, "
    "search_policy (null: the LLM picks every search after the question).",
    "MiniLMTextEmbedder": "embeds the search query with the packaged all-MiniLM-L6-v2 (384 dimensions, offline).\n"
    "Change: model, only together with the embedder the documents were indexed with.",
    "SafeRetriever": "the search: wraps a Haystack retriever so that a store error or a timeout is a failed search "
    "the loop goes on from, not a crash.\n"
    "Change: retriever (its type and document_store choose the backend; the store is defined here once, &store, "
    "and the router reads the same one), timeout (seconds).",
    "Answerer": "writes the final answer from the chunks (no chat_generator: the router's answer stands).\n"
    "Change: chat_generator, system_prompt, generate_prompt (Jinja: {{ chunks }}, {{ question }}), max_chunks.",
    "ShortAnswerExtractor": "cuts the answer the model wrote in a sentence down to the short answer it adds to the "
    'question (a name, date, number, yes/no, or an option of an "A or B" question), cited by its chunk sentence.\n'
    "Change: max_chunks, chunks_per_search, as the answerer's (the chunks the span is looked up in).",
    "FallbackSynthesizer": "when the loop reaches max_iterations, one LLM call answers from the chunks found.\n"
    "Change: chat_generator, synthesis_prompt; enabled: false to end without an answer instead.",
    "HHEMGrounder": "checks each sentence of the answer against the chunks (Vectara HHEM-2.1-Open). Local weights "
    "only here: without them grounding is skipped and the result says why.\n"
    "Change: threshold (0-1); local_files_only: false to let it download the model.",
    "EvidenceChecker": "checks, before the final answer, that the chunks found support one (offline: key entities and "
    "content words covered, MiniLM similarity, calibrated weights; with chat_generator: an LLM judge). When they do "
    "not: search again while turns remain, else give up saying what was searched.\n"
    "Change: on_insufficient_evidence (give_up / answer_with_warning), threshold, chat_generator.",
    "LoopResultBuilder": "builds the result (answer, termination, documents, grounding, usage).\nNothing to change.",
    "FileTypeRouter": "sends each file to the converter for its MIME type.\n"
    "Change: mime_types, together with the converters.",
    "TextFileToDocument": "reads plain-text files.\nChange: encoding (default UTF-8).",
    "MarkdownToDocument": "reads Markdown files as plain text.\nNothing to change.",
    "HTMLToDocument": "extracts the main text of HTML pages.\nChange: extraction_kwargs (trafilatura's options).",
    "PyPDFToDocument": "reads the text layer of PDF files (scanned pages without text give nothing).\n"
    "Change: extraction_mode.",
    "DocumentJoiner": "merges the converters' documents into one list.\nNothing to change.",
    "DocumentCleaner": "removes empty lines and extra whitespace.\nChange: remove_regex, remove_repeated_substrings.",
    "DocumentSplitter": "splits documents into chunks.\nChange: split_by, split_length, split_overlap.",
    "ChunkMetadataCleaner": "drops metadata a vector store cannot hold (the splitter's _split_overlap) and gives each "
    "chunk an id from its content, so that indexing again overwrites.\nChange: keys (the metadata keys to drop).",
    "SentenceSpanAnnotator": "stores each chunk's sentence boundaries in its metadata (sentence_spans), so that "
    "citations do not split the chunk again at every question.\nNothing to change.",
    "MiniLMDocumentEmbedder": "embeds each chunk with the packaged all-MiniLM-L6-v2 (384 dimensions, offline).\n"
    "Change: model, together with the query embedder of the loop pipelines that read this store.",
    "SourceReplacingDocumentWriter": "writes the chunks to the store (upsert by id), then removes the chunks of "
    "the same source files that were not written again: an edited file leaves no stale chunks.\n"
    "Change: document_store (the backend, its uri or url, the collection), source_field.",
}


def class_defaults(type_path: str) -> dict[str, Any] | None:
    """The defaults of `type_path`'s `__init__` parameters, or `None` when the class cannot be imported."""
    module, _, name = type_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _is_default(value: Any, default: Any) -> bool:
    """Whether a serialised init parameter equals the parameter's default (serialised the way Haystack does)."""
    if isinstance(default, Enum):
        default = default.value
    elif hasattr(default, "to_dict") and not isinstance(default, type):
        default = default.to_dict()  # e.g. Secret.from_env_var("OPENAI_API_KEY")
    if isinstance(value, bool) != isinstance(default, bool):  # True == 1 in Python, not in a YAML file
        return False
    if default is None and value in ({}, []):  # `x or {}` in __init__: None serialises as an empty container
        return True
    return value == default


def minimal(node: Any, top_level: bool = True) -> Any:
    """
    A serialised pipeline (or part) without the init parameters equal to their class's defaults.

    Nested objects lose theirs too. A component left with no parameters loses `init_parameters`; a nested object
    keeps an empty one (some integrations' `from_dict` read it unconditionally). `top_level`: `node` is a pipeline
    or a `components` entry.
    """
    if isinstance(node, list):
        return [minimal(value, top_level=False) for value in node]
    if not isinstance(node, dict):
        return node
    params = node.get("init_parameters")
    if isinstance(node.get("type"), str) and isinstance(params, dict):
        defaults = class_defaults(node["type"]) or {}
        kept = {
            key: minimal(value, top_level=False)
            for key, value in sorted(params.items())
            if not (key in defaults and _is_default(value, defaults[key]))
        }
        return {"type": node["type"], **({"init_parameters": kept} if kept or not top_level else {})}
    if top_level and "components" in node:
        return {**node, "components": {name: minimal(spec) for name, spec in node["components"].items()}}
    return {key: minimal(value, top_level=False) for key, value in node.items()}


class _Dumper(yaml.SafeDumper):
    """Block style with `|` for multi-line text; anchors only for document stores shared between components."""

    def ignore_aliases(self, data: Any) -> bool:
        return not (isinstance(data, dict) and str(data.get("type", "")).endswith("DocumentStore"))

    def generate_anchor(self, _node: Any) -> str:
        self.anchor_count = getattr(self, "anchor_count", 0) + 1
        return "store" if self.anchor_count == 1 else f"store{self.anchor_count}"


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _text)


def _share_stores(components: dict[str, Any]) -> None:
    """Make equal document store mappings one object, so the YAML defines each store once."""
    seen: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, dict) and str(value.get("type", "")).endswith("DocumentStore"):
                node[key] = next((s for s in seen if s == value), value)
                if node[key] is value:
                    seen.append(value)
            visit(value)

    visit(components)


def _comment(text: str, indent: str = "", width: int = 118) -> str:
    """`text` as comment lines of at most `width` columns; each of its lines starts a new comment line."""
    lines = [part for line in text.strip().splitlines() for part in textwrap.wrap(line, width - len(indent) - 2)]
    return "".join(f"{indent}# {line}\n" for line in lines)


def _component_note(name: str, spec: dict[str, Any]) -> str:
    class_name = spec["type"].rpartition(".")[2]
    note = NAME_NOTES.get(name) or COMPONENT_NOTES.get(class_name)
    if note is None:
        msg = f"No comment for component {name!r} ({class_name}): add one to COMPONENT_NOTES."
        raise KeyError(msg)
    return f"{name} ({class_name}): {note}"


def packaged_yaml(pipeline: Pipeline, file_name: str) -> str:
    """
    The YAML text of a packaged pipeline.

    `file_name` (e.g. `agentic_rag_embedded.yml`) picks the header comment; a loop pipeline's text declares hayhooks'
    `inputs` and `outputs` too.

    :raises KeyError: If the file or one of its components has no comment in `FILE_NOTES`/`COMPONENT_NOTES`.
    """
    data = minimal(pipeline.to_dict())
    # Sorted by name as `Pipeline.dumps` does (their order decides the connections' order in `to_dict()`).
    components = dict(sorted(data["components"].items()))
    _share_stores(components)
    body = yaml.dump({"components": components}, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    out = [_comment(FILE_NOTES[file_name]), _comment(GENERATED_NOTE), "\n"]
    for line in body.splitlines(keepends=True):
        name = line.strip()[:-1]
        if line.startswith("  ") and not line.startswith("   ") and name in components:
            out.append(
                ("\n" if out[-1] != "components:\n" else "") + _comment(_component_note(name, components[name]), "  ")
            )
        out.append(line)
    out.append("\nconnections:\n")
    for connection in data["connections"]:
        out.append(f"- {{sender: {connection['sender']}, receiver: {connection['receiver']}}}\n")
    rest = {k: v for k, v in data.items() if k not in ("components", "connections")}
    if rest.get("connection_type_validation") is True:  # the default
        del rest["connection_type_validation"]
    if any(isinstance(instance, LoopResultBuilder) for _, instance in pipeline.walk()):
        rest.update(inputs=dict(HAYHOOKS_INPUTS), outputs=dict(HAYHOOKS_OUTPUTS))
    out.append("\n" + yaml.dump(rest, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True))
    return "".join(out)
