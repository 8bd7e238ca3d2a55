# SPDX-License-Identifier: Apache-2.0
"""
Read loop pipeline YAMLs and open their stores.

Reading a loop pipeline YAML and its stores: the checks, the allow-list, the store URIs, the in-memory stores'
isolation and filling them from a saved store. It imports no `pipelines/`, `cli/` or `serving/` module, so
components may use it. Every function raises `ValueError` with a message that says what to change.
"""

import contextlib
import copy
import re
import uuid
from pathlib import Path
from typing import Any

import yaml
from haystack import Pipeline
from haystack.core.serialization_security import DESERIALIZATION_ALLOWLIST_ENV_VAR
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret

from haystack_agentic import ALLOWED_MODULES
from haystack_agentic.components.retrievers.safe_retriever import retriever_document_store
from haystack_agentic.indexing.store_faults import (
    StoreError,
    check_document_count,
    check_milvus_lite_uri,
    milvus_lite_path,
    watch_store,
)
from haystack_agentic.indexing.store_files import read_store_file
from haystack_agentic.llm.local_server_key import openai_api_key
from haystack_agentic.settings import DEFAULT_WEAVIATE_URL, ENV_OPENAI_API_KEY

#: The package's modules a pipeline YAML may name (exact module names): its components, its document store and its
#: dataclasses, none with a function that runs commands, writes files or opens connections from its arguments (not
#: `cli` nor `serving`; tests/test_yaml_trust.py checks), then the third-party modules of the packaged Milvus YAMLs
#: (`ALLOWED_MODULES`).
TRUSTED_MODULES = (
    "haystack_agentic.components.embedders.minilm_document_embedder",
    "haystack_agentic.components.embedders.minilm_text_embedder",
    "haystack_agentic.components.evidence.evidence_checker",
    "haystack_agentic.components.extractors.short_answer_extractor",
    "haystack_agentic.components.generators.answerer",
    "haystack_agentic.components.generators.embedded_chat_generator",
    "haystack_agentic.components.generators.fallback_synthesizer",
    "haystack_agentic.components.grounders.hhem_grounder",
    "haystack_agentic.components.grounders.llm_judge_grounder",
    "haystack_agentic.components.loop.agentic_rag",
    "haystack_agentic.components.loop.loop_controller",
    "haystack_agentic.components.loop.loop_result_builder",
    "haystack_agentic.components.loop.loop_state_joiner",
    "haystack_agentic.components.preprocessors.chunk_metadata_cleaner",
    "haystack_agentic.components.preprocessors.sentence_span_annotator",
    "haystack_agentic.components.retrievers.safe_retriever",
    "haystack_agentic.components.routers.agentic_router",
    "haystack_agentic.components.routers.bridge_entity_router",
    "haystack_agentic.components.writers.source_replacing_document_writer",
    "haystack_agentic.dataclasses.loop_state",
    "haystack_agentic.dataclasses.pending_search",
    "haystack_agentic.document_stores.sparse_bm25_document_store",
    *ALLOWED_MODULES,
)
#: Parameters whose `type` the Milvus classes import themselves (`importlib`, outside Haystack's allow-list): the
#: modules each may name.
MILVUS_SELF_IMPORTS = {"builtin_function": ("milvus_haystack.function",), "reranker": ("pymilvus.client.abstract",)}
#: A dotted name in a serialised type (`pkg.module.Class`, also inside `list[...]`).
_DOTTED_NAME = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+")
#: Haystack's error for a component it could not build (its name, then the component's whole dict).
_FAILED_COMPONENT = re.compile(r"Couldn't deserialize component '([^']*)'")
#: Haystack's allow-list refusal, naming the module of a class or the full name of a callable.
_REFUSED_MODULE = re.compile(r"Refusing to deserialize a class from module '([^']*)'")

#: Components every loop pipeline YAML has (see `build_loop_pipeline`).
REQUIRED_COMPONENTS = ("controller", "retriever", "result")
#: Type names (suffixes) of the served document stores, and of the in-memory stores whose storage `index` shares.
REMOTE_STORE_TYPES = ("MilvusDocumentStore", "WeaviateDocumentStore")
IN_MEMORY_STORE_TYPES = ("InMemoryDocumentStore", "SparseBM25DocumentStore")


def _read_yaml(path: Path | str) -> Any:
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        msg = f"Cannot read the pipeline {path}: {exc}"
        raise ValueError(msg) from exc


def read_loop_yaml(path: Path) -> dict[str, Any]:
    """
    Read a loop pipeline YAML into its dict (every component with an `init_parameters` dict).

    :raises ValueError: If the file cannot be read or parsed, or lacks a component of `REQUIRED_COMPONENTS`.
    """
    data = _read_yaml(path)
    components = data.get("components") if isinstance(data, dict) else None
    components = components if isinstance(components, dict) else {}
    missing = [n for n in REQUIRED_COMPONENTS if n not in components]
    if missing:
        msg = (
            f"{path} is not an agentic-loop pipeline: it has no component named {', '.join(missing)}. "
            'Start from a copy of a packaged one (its path: haystack_agentic.resources.pipeline_path("agentic_rag")).'
        )
        raise ValueError(msg)
    for spec in components.values():
        spec["init_parameters"] = spec.get("init_parameters") or {}  # a YAML may list none (null)
    return data


def allowed_modules_for(pipeline: dict[str, Any] | str) -> list[str]:
    """
    Name the trusted modules one pipeline needs, for its `allowed_modules`.

    The modules to pass as `allowed_modules` to Haystack's `Pipeline.loads` / `Pipeline.from_dict` for one pipeline:
    those of `TRUSTED_MODULES` that hold a class the pipeline names (every `type` and `type_` value, nested ones
    too: chat generators, document stores, tools' classes), in order, without repeats. Anything else it names stays
    refused by Haystack unless the caller allows it.

    :param pipeline: The pipeline's dict (`Pipeline.to_dict()`, or a YAML parsed) or its YAML text.
    :raises ValueError: If the YAML text cannot be parsed, or a Milvus class's `builtin_function` or `reranker` names
        a type outside `MILVUS_SELF_IMPORTS` (the Milvus classes import those themselves, unchecked by Haystack).
    """
    if isinstance(pipeline, str):
        try:
            pipeline = yaml.safe_load(pipeline)
        except yaml.YAMLError as exc:
            msg = f"Cannot parse the pipeline YAML: {exc}"
            raise ValueError(msg) from exc
    found: list[str] = []
    pending, seen = [pipeline], set()
    while pending:
        node = pending.pop()
        if isinstance(node, (list, dict)):
            if id(node) in seen:  # YAML aliases may repeat a node, or nest it in itself
                continue
            seen.add(id(node))
        if isinstance(node, list):
            pending.extend(reversed(node))
        elif isinstance(node, dict):
            _check_milvus_self_imports(node)
            for key, value in node.items():
                if key in ("type", "type_") and isinstance(value, str):
                    for name in _DOTTED_NAME.findall(value):
                        module = name.rsplit(".", 1)[0]
                        if module in TRUSTED_MODULES and module not in found:
                            found.append(module)
            pending.extend(reversed(list(node.values())))
    return found


def _check_milvus_self_imports(node: dict[str, Any]) -> None:
    """Refuse a Milvus class's self-imported parameter (`MILVUS_SELF_IMPORTS`) naming a type of another module."""
    params = node.get("init_parameters")
    if not str(node.get("type", "")).startswith("milvus_haystack.") or not isinstance(params, dict):
        return
    for key, modules in MILVUS_SELF_IMPORTS.items():
        value = params.get(key)
        for item in value if isinstance(value, list) else [value] if value is not None else []:
            named = str(item.get("type", "")) if isinstance(item, dict) else ""
            if named.rsplit(".", 1)[0] not in modules:
                msg = (
                    f"Refusing {node['type']}: its `{key}` names {named or item!r}, which the Milvus class would "
                    f"import itself, outside Haystack's allow-list; it may name a type of {', '.join(modules)} only."
                )
                raise ValueError(msg)


def pipeline_from_dict(data: dict[str, Any], path: Path | str, must_exist: bool = False) -> Pipeline:
    """
    Build a pipeline from its dict with the narrowest allow-list, its stores opened and checked.

    Build a pipeline from its dict (from the file `path`) allowing only `allowed_modules_for(data)`, its document
    stores opened and checked (`must_exist`: refuse a Milvus Lite database that does not exist yet, so loading writes
    nothing).

    :raises StoreError: If a document store of it cannot be opened (one line, with the store's path or address).
    :raises ValueError: If it does not load for another reason.
    """
    allowed = allowed_modules_for(data)
    stores = store_addresses(data.get("components") or {})
    for kind, address in stores:
        if kind == "milvus":
            check_milvus_lite_uri(address, must_exist=must_exist)
    milvus = next((address for kind, address in stores if kind == "milvus"), None)
    where = ", ".join(f"the {kind} store at {address}" for kind, address in stores) or f"the stores of {path}"
    try:
        with watch_store(where, milvus):
            pipeline = Pipeline.from_dict(data, allowed_modules=allowed)
            link_collection_store(pipeline)  # `collections` names are checked against the retriever's store
            for _, instance in pipeline.walk():  # open each store (loading leaves them closed) and check its count
                store = getattr(instance, "document_store", None)
                if store is not None:
                    check_document_count(store)
            return pipeline
    except StoreError:
        raise
    except Exception as exc:
        msg = f"Cannot load the pipeline {path}: {_load_problem(exc)}"
        raise ValueError(msg) from exc


def _load_problem(exc: Exception) -> str:
    """
    Say in one line why a pipeline dict did not load, for a user who has to act on it.

    Haystack's error for a component names the component and dumps its whole dict: keep the component's name and
    the original error (the cause). An allow-list refusal names the refused callable or class and how to allow it.
    """
    component = _FAILED_COMPONENT.match(str(exc))
    cause = exc.__cause__ if component and exc.__cause__ is not None else exc
    where = f"component '{component.group(1)}'" if component else "the pipeline"
    refused = _REFUSED_MODULE.match(str(cause))
    if refused is None:
        return f"{where}: {cause}" if component else str(cause)
    return (
        f"{where} names {refused.group(1)}, which is not on Haystack's deserialization allow-list. If you trust "
        f"this file, add its module to {DESERIALIZATION_ALLOWLIST_ENV_VAR} (comma-separated module names or "
        "`package.*` patterns) and load it again."
    )


def loop_pipeline_from_dict(
    data: dict[str, Any],
    path: Path | str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    must_exist: bool = True,
) -> Pipeline:
    """
    Build a loop pipeline from its YAML dict (`read_loop_yaml`), the last step of loading a loop YAML.

    The in-memory stores get their own storage (`isolate_in_memory_stores`, in `data`); the stores are opened and
    checked (`pipeline_from_dict`); then `use_openai_server` gives its `OpenAIChatGenerator`s `model` and `base_url`.
    Returns the pipeline, not warmed up.

    :raises StoreError: If a store cannot be opened, or a Milvus Lite database it names does not exist.
    :raises ValueError: If it does not load, or needs BM25 from a Milvus server older than 2.5.
    """
    from haystack_agentic.document_stores.milvus_support import check_pipeline  # noqa: PLC0415 - Milvus on demand

    isolate_in_memory_stores(data["components"])
    pipeline = pipeline_from_dict(data, path, must_exist=must_exist)
    check_pipeline(pipeline)
    use_openai_server(pipeline, model, base_url)
    return pipeline


def use_openai_server(pipeline: Pipeline, model: str | None = None, base_url: str | None = None) -> None:
    """
    Point the `OpenAIChatGenerator`s the pipeline's components hold at a model and server, before warm-up.

    Each one (a public attribute of a component, e.g. its `chat_generator`) gets `model` and `base_url` when given,
    and, where it reads the default `$OPENAI_API_KEY`, a local server's placeholder key (`llm.local_server_key`).
    """
    from haystack.components.generators.chat.openai import OpenAIChatGenerator  # noqa: PLC0415 - openai on demand

    default_key = Secret.from_env_var(ENV_OPENAI_API_KEY)
    for _, instance in pipeline.walk():
        for name, generator in vars(instance).items():
            if name.startswith("_") or not isinstance(generator, OpenAIChatGenerator):
                continue
            generator.model = model or generator.model
            generator.api_base_url = base_url or generator.api_base_url
            if generator.api_key == default_key:
                with contextlib.suppress(ValueError):  # no key, no base URL: the generator says so at warm-up
                    generator.api_key = openai_api_key(generator.api_base_url) or default_key


def link_collection_store(pipeline: Pipeline) -> None:
    """Let the pipeline's `controller` read collection names from the `retriever`'s store (if both are there)."""
    try:
        controller, retriever = pipeline.get_component("controller"), pipeline.get_component("retriever")
    except ValueError:
        return
    store = retriever_document_store(retriever)
    if hasattr(controller, "use_collection_store") and store is not None:
        controller.use_collection_store(store)


def _specs(node: Any, types: tuple[str, ...]) -> list[dict[str, Any]]:
    """The serialised objects in a pipeline dict (walked recursively) whose type ends with one of `types`."""
    if isinstance(node, list):
        return [spec for child in node for spec in _specs(child, types)]
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("init_parameters"), dict) and str(node.get("type", "")).endswith(types):
        return [node]
    return [spec for child in node.values() for spec in _specs(child, types)]


def store_addresses(node: Any) -> list[tuple[str, str]]:
    """
    List the addresses of the Milvus and Weaviate stores a pipeline dict names.

    The Milvus URIs and Weaviate URLs of the document stores in a pipeline dict: `[("milvus" | "weaviate", address)]`
    without repeats, in order.
    """
    found: list[tuple[str, str]] = []
    for spec in _specs(node, REMOTE_STORE_TYPES):
        params = spec["init_parameters"]
        if str(spec["type"]).endswith("MilvusDocumentStore"):
            address = ("milvus", str((params.get("connection_args") or {}).get("uri", "http://localhost:19530")))
        else:
            address = ("weaviate", str(params.get("url") or DEFAULT_WEAVIATE_URL))
        if address not in found:
            found.append(address)
    return found


def check_pipeline_stores(path: Path | str) -> None:
    """
    Open and close the Milvus stores a pipeline YAML names, to check them before serving.

    Open the Milvus stores a pipeline YAML names, then close them: before serving it, a missing, damaged or busy
    database is one line now rather than a traceback in the server's log later.

    :raises StoreError: If a Milvus Lite database does not exist or a Milvus store cannot be opened.
    :raises ValueError: If the YAML cannot be read, or names a type the Milvus classes would import unchecked.
    """
    data = _read_yaml(path)
    allowed_modules_for(data)  # refuses a Milvus store whose `builtin_function` would import another module
    for spec in _specs(data, REMOTE_STORE_TYPES):
        if not str(spec["type"]).endswith("MilvusDocumentStore"):
            continue  # Weaviate connects on first use; `SafeRetriever.warm_up` reports an unreachable server
        from milvus_haystack import MilvusDocumentStore  # noqa: PLC0415 - only with a Milvus store

        uri = str((spec["init_parameters"].get("connection_args") or {}).get("uri", ""))
        check_milvus_lite_uri(uri, must_exist=True)
        with watch_store(f"the milvus store at {uri}", uri):
            store = MilvusDocumentStore.from_dict(copy.deepcopy(spec))
            store.count_documents()
            check_document_count(store)
        store.client.close()
        if milvus_lite_path(uri) is not None:  # let the server (or its workers) open the database
            from milvus_lite import server_manager_instance  # noqa: PLC0415

            server_manager_instance.release_server(uri)


def set_store_uri(node: Any, uri: str) -> None:
    """Point every Milvus (`connection_args.uri`) and Weaviate (`url`) store in a pipeline dict at `uri`, in place."""
    for spec in _specs(node, REMOTE_STORE_TYPES):
        params = spec["init_parameters"]
        if str(spec["type"]).endswith("MilvusDocumentStore"):
            params["connection_args"] = {**(params.get("connection_args") or {}), "uri": uri}
        else:
            params["url"] = uri


def isolate_in_memory_stores(node: Any) -> None:
    """
    Give the in-memory stores of one pipeline dict their own storage.

    Give the in-memory stores of one pipeline dict their own storage: Haystack's in-memory stores with the same
    `index` share storage process-wide (so a pipeline's router and retriever see the same documents, but two
    pipelines of one process would too). Each `index` becomes `<index>-<random suffix>`, the same for the pipeline.
    """
    names: dict[str, str] = {}
    for spec in _specs(node, IN_MEMORY_STORE_TYPES):
        index = spec["init_parameters"].get("index") or "default"
        spec["init_parameters"]["index"] = names.setdefault(index, f"{index}-{uuid.uuid4().hex[:12]}")


def retriever_store(pipeline: Pipeline) -> Any:
    """The document store of the pipeline's `retriever` component, or `None` when it has none."""
    return getattr(pipeline.get_component("retriever"), "document_store", None)


def fill_in_memory_store(pipeline: Pipeline, store_path: Path | str) -> int:
    """
    Fill the retriever's empty in-memory store from a saved store file.

    Copy a saved in-memory store (`haystack-agentic index`) into the retriever's in-memory store, if empty, and let
    the controller read the run's collections from it.

    :returns: The number of documents in the retriever's store (0 when it is not an in-memory store).
    :raises StoreError: If the file cannot be read as a store (a `ValueError`; one line, with the path).
    """
    store = retriever_store(pipeline)
    if not isinstance(store, InMemoryDocumentStore):
        return 0
    if store.count_documents() == 0:
        _, documents = read_store_file(store_path)  # no throw-away store: its BM25 statistics would go unused
        store.write_documents(documents, policy=DuplicatePolicy.OVERWRITE)
    link_collection_store(pipeline)
    return store.count_documents()
