# SPDX-License-Identifier: Apache-2.0
"""
`build_loop`: the one place that turns `LoopOptions` into a loop pipeline.

A packaged pipeline is built by the builder its YAML is written from, with the options as arguments; a user's YAML is
loaded as it is and the options are set on its components.
"""

import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from haystack import Pipeline, logging
from haystack.core.serialization import component_from_dict, component_to_dict

from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.grounders.hhem_grounder import HHEMGrounder
from haystack_agentic.components.loop.loop_controller import LoopController
from haystack_agentic.indexing.store_faults import check_document_count, check_milvus_lite_uri, watch_store
from haystack_agentic.llm.local_server_key import openai_api_key
from haystack_agentic.loop_loading import loop_pipeline_from_dict, read_loop_yaml, use_openai_server
from haystack_agentic.pipelines.default_pipelines import (
    INDEX_NAME,
    LOOP_PIPELINES,
    MILVUS_URI,
    OPENAI_LOOPS,
    STORE_LOOPS,
    LLMSettings,
    loop_pipeline,
)
from haystack_agentic.pipelines.loop_pipeline import max_runs_for
from haystack_agentic.resources import pipeline_path, pipelines_dir
from haystack_agentic.settings import (
    DEFAULT_OPENAI_MODEL,
    DEFAULT_WEAVIATE_URL,
    default_milvus_uri,
    default_weaviate_url,
    model_from_env,
    openai_configured,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopOptions:
    """
    What a run's loop pipeline is built from (`build_loop`); `None` keeps what the pipeline YAML says.

    ### Usage example
    ```python
    pipeline = build_loop(LoopOptions(llm="embedded", max_iterations=3))
    ```

    :param pipeline: A loop pipeline YAML path or a packaged pipeline's name (default: the packaged one for `llm`,
        `mode` and `backend`).
    :param llm: `openai`, `embedded` or `auto`, resolved when the options are made (then `llm` holds the result):
        `openai` when `base_url`, `OPENAI_API_KEY` or `OPENAI_BASE_URL` is set, else `embedded`.
    :param mode: Router mode of the packaged OpenAI-compatible pipeline: `tools` (default) or `json`.
    :param model: Model of every `OpenAIChatGenerator` (default: `$HAYSTACK_AGENTIC_MODEL`, else the YAML's).
    :param base_url: Base URL of every `OpenAIChatGenerator` (a local server, e.g. Ollama or llama.cpp).
    :param backend: `memory`, `milvus` or `weaviate`: the packaged embedded pipeline of that store.
    :param store_uri: URI of every Milvus store (Lite file or server) and URL of every Weaviate store (default for a
        packaged `backend` pipeline: `settings.default_milvus_uri()` / `default_weaviate_url()`).
    :param max_iterations: The controller's `max_iterations`, with a matching `max_runs_per_component`.
    :param timeout: Seconds one LLM call of any role may take.
    :param max_tokens: Most tokens one LLM reply of any role may have.
    :param on_insufficient_evidence: `give_up` or `answer_with_warning`, set on the `evidence` component.
    :param grounding: `auto`: an `HHEMGrounder` without its local model becomes the router's LLM as judge
        (`LLMJudgeGrounder`) in an `openai` run and is skipped (with the reason) otherwise; `pipeline`: as written.
    :param context_tokens: The LLM server's context size (llama.cpp's `/props`): every role's prompt budget fits it.
    :param new_store: A Milvus Lite database the pipeline names may be created (a run otherwise writes nothing).
    :raises ValueError: If an option is out of range, or `mode` / `base_url` are given for the embedded LLM (the
        message names the command-line flag).
    """

    pipeline: str | None = None
    llm: str = "auto"
    mode: str | None = None
    model: str | None = None
    base_url: str | None = None
    backend: str = "memory"
    store_uri: str | None = None
    max_iterations: int | None = None
    timeout: float | None = None
    max_tokens: int | None = None
    on_insufficient_evidence: Literal["give_up", "answer_with_warning"] | None = None
    grounding: str = "auto"
    context_tokens: int | None = None
    new_store: bool = False

    def __post_init__(self) -> None:
        choices = {
            "llm": ("auto", "openai", "embedded"),
            "mode": (None, "tools", "json"),
            "backend": ("memory", "milvus", "weaviate"),
            "on_insufficient_evidence": (None, "give_up", "answer_with_warning"),
            "grounding": ("auto", "pipeline"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                msg = f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                raise ValueError(msg)
        if self.max_iterations is not None and self.max_iterations < 1:
            msg = f"--max-iterations must be at least 1, got {self.max_iterations}"
            raise ValueError(msg)
        if self.timeout is not None and not self.timeout > 0:
            msg = f"--timeout must be a positive number of seconds, got {self.timeout}"
            raise ValueError(msg)
        if self.max_tokens is not None and self.max_tokens < 1:
            msg = f"--max-tokens must be at least 1, got {self.max_tokens}"
            raise ValueError(msg)
        if self.base_url is not None and not urlsplit(self.base_url).netloc.strip():
            msg = f"--base-url must be an http(s) URL such as http://127.0.0.1:8080/v1, got {self.base_url!r}"
            raise ValueError(msg)
        if self.llm == "auto":  # resolved once, here: every later step reads `llm`
            object.__setattr__(self, "llm", "openai" if self.base_url or openai_configured() else "embedded")
        if self.llm == "embedded" and not self.pipeline:
            given = [flag for flag, value in (("--mode", self.mode), ("--base-url", self.base_url)) if value]
            if given:
                msg = (
                    f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} to an OpenAI-compatible LLM; "
                    "the embedded LLM runs the bridge-entity policy (no router mode, no server). Add --llm openai, "
                    "or drop them."
                )
                raise ValueError(msg)

    def resolved_store_uri(self) -> str | None:
        """The store URI the run uses: `store_uri`, else the default of `backend` for a packaged pipeline."""
        if self.store_uri or self.pipeline:
            return self.store_uri
        if self.backend == "milvus":
            return str(default_milvus_uri())
        return default_weaviate_url() if self.backend == "weaviate" else None

    def pipeline_path(self) -> Path:
        """
        Choose the loop pipeline YAML (or packaged pipeline) of the run.

        The loop pipeline YAML the run reads: `pipeline`, else the packaged one for the LLM and backend (for a Milvus
        server, the dense one when its collection has no BM25 field or the server is older than 2.5).

        :raises ValueError: For a packaged OpenAI pipeline without `OPENAI_API_KEY` or base URL, or a packaged backend
            pipeline with `llm` `openai`.
        :raises FileNotFoundError: For a name that is no packaged pipeline (the message lists them).
        """
        if self.pipeline:
            path = Path(self.pipeline)
            return path if path.exists() or path.name != str(path) else pipeline_path(path.name)
        if self.backend != "memory":
            if self.llm != "embedded":
                msg = f"--backend {self.backend} has a packaged pipeline for --llm embedded only; pass --pipeline."
                raise ValueError(msg)
            if self.backend == "milvus" and not milvus_has_bm25(str(self.resolved_store_uri())):
                return pipeline_path("agentic_rag_embedded_milvus_dense")
            return pipeline_path(f"agentic_rag_embedded_{self.backend}")
        if self.llm == "embedded":
            return pipeline_path("agentic_rag_embedded")
        openai_api_key(self.base_url)  # refuses a missing key and base URL now, not at warm-up
        return pipeline_path("agentic_rag_json" if self.mode == "json" else "agentic_rag")


def milvus_has_bm25(uri: str) -> bool:
    """
    Check whether a Milvus server has BM25 for the hybrid pipeline.

    Whether the Milvus at `uri` can serve the hybrid pipeline: `False` when the packaged collection has no BM25
    field, or none yet on a server older than 2.5; `True` for a Lite file or an unreachable server (loading says so).
    """
    if "://" not in uri:
        return True
    from haystack_agentic.document_stores import milvus_support  # noqa: PLC0415
    from haystack_agentic.indexing.document_stores import MILVUS_COLLECTION  # noqa: PLC0415

    try:
        from pymilvus import MilvusClient  # noqa: PLC0415

        client = MilvusClient(uri=uri)
        try:
            sparse = milvus_support.collection_has_sparse_field(client, MILVUS_COLLECTION)
            version = milvus_support.server_version(client)
        finally:
            client.close()
    except Exception:
        return True
    return not (sparse is False or (sparse is None and not milvus_support.supports_bm25(version)))


def build_loop(options: LoopOptions | None = None, notify: Callable[[str], None] | None = None) -> Pipeline:
    """
    Build the loop pipeline for `options` (default: the packaged one chosen from the environment).

    A packaged pipeline is built in Python (`default_pipelines.loop_pipeline`, the builder its YAML is written from)
    with the options as its arguments; a pipeline YAML of the user's is loaded as it is (`loop_pipeline_from_dict`),
    then the options are set on its components (`LoopController`, `EvidenceChecker`, the LLM roles and their chat
    generators; `--uri` is refused: the file names its stores).

    :param notify: Called with a one-line notice the user should hear (grounding without its model); default: a
        logged warning.
    :returns: The pipeline (not warmed up). Loading writes nothing unless `options.new_store`.
    :raises StoreError: If a Milvus Lite database it names does not exist, or a store cannot be opened.
    :raises ValueError: If an option does not fit the pipeline, or the file cannot be read or is no loop pipeline.
    :raises FileNotFoundError: For a bare name that is no packaged pipeline (the message lists them).
    """
    from haystack_agentic.document_stores.milvus_support import check_pipeline  # noqa: PLC0415 - Milvus on demand

    options = options or LoopOptions()
    notify = notify or logger.warning
    path = options.pipeline_path()
    name = packaged_loop_name(path)
    pipeline = _packaged_loop(name, options, notify) if name else _user_loop(path, options, notify)
    check_pipeline(pipeline)
    return pipeline


def packaged_loop_name(path: Path) -> str | None:
    """The name of the packaged loop pipeline whose YAML `path` is (`None`: any other file)."""
    resolved = path.expanduser().resolve()
    is_packaged = resolved.parent == pipelines_dir().resolve() and resolved.suffix == ".yml"
    return resolved.stem if is_packaged and resolved.stem in LOOP_PIPELINES else None


def load_loop_pipeline(
    path: Path | str,
    *,
    model: str | None = None,
    api_base_url: str | None = None,
    max_iterations: int | None = None,
    store_uri: str | None = None,
) -> Pipeline:
    """
    Build a loop pipeline from a YAML path or packaged name with overrides: `build_loop` with the pipeline's grounder.

    :param path: The YAML file, or a packaged pipeline's name (`"agentic_rag_embedded"`, with or without `.yml`).
    :param model, api_base_url, max_iterations, store_uri: See `LoopOptions` (`model`, `base_url`, ...). With a base
        URL and no `OPENAI_API_KEY`, a generator gets a `LocalServerKey` (`llm.local_server_key`).
    :returns: The pipeline (not warmed up).
    :raises StoreError, ValueError, FileNotFoundError: As `build_loop`.
    """
    options = LoopOptions(
        pipeline=str(path),
        model=model,
        base_url=api_base_url,
        max_iterations=max_iterations,
        store_uri=store_uri,
        grounding="pipeline",
    )
    return build_loop(options)


def _packaged_loop(name: str, options: LoopOptions, notify: Callable[[str], None]) -> Pipeline:
    """The packaged loop pipeline `name` built with `options` as the builder's arguments."""
    api_key = None
    with contextlib.suppress(ValueError):  # no key, no base URL: the generators say so at warm-up
        api_key = openai_api_key(options.base_url)
    llm = LLMSettings(
        model=options.model or model_from_env() or DEFAULT_OPENAI_MODEL,
        api_base_url=options.base_url,
        api_key=api_key,
        timeout=options.timeout,
        max_tokens=options.max_tokens,
        context_tokens=options.context_tokens,
    )
    arguments: dict[str, Any] = {
        "llm": llm,
        "max_iterations": options.max_iterations,
        "on_insufficient_evidence": options.on_insufficient_evidence or "give_up",
        "index": f"{INDEX_NAME}-{uuid.uuid4().hex[:12]}",  # in-memory stores of one index share storage
    }
    if options.grounding == "auto" and not name.endswith("_ungrounded"):
        judge = name in OPENAI_LOOPS and options.llm == "openai"
        missing = _hhem_missing(HHEMGrounder(local_files_only=True), judge, notify)
        if name in OPENAI_LOOPS:
            arguments["judge"] = judge and missing
    store = _open_store(name, options) if name in STORE_LOOPS else None
    return loop_pipeline(name, store=store, **arguments)


def _open_store(name: str, options: LoopOptions) -> Any:
    """The store of a packaged Milvus or Weaviate pipeline at the run's URI (default: the one its YAML names)."""
    from haystack_agentic.indexing.document_stores import milvus_document_store, weaviate_document_store  # noqa: PLC0415

    uri = options.resolved_store_uri()
    if "weaviate" in name:
        return weaviate_document_store(uri or DEFAULT_WEAVIATE_URL)
    uri = uri or MILVUS_URI
    check_milvus_lite_uri(uri, must_exist=not options.new_store)
    with watch_store(f"the milvus store at {uri}", uri):
        store = milvus_document_store(uri, bm25=name == "agentic_rag_embedded_milvus")
        check_document_count(store)
    return store


def _user_loop(path: Path, options: LoopOptions, notify: Callable[[str], None]) -> Pipeline:
    """A loop pipeline YAML of the user's, loaded as it is, then `options` set on its components."""
    if options.store_uri:
        msg = (
            f"--uri applies to the packaged pipelines (--backend); {path} names its own stores: set the uri (Milvus) "
            "or url (Weaviate) of its document store in the file."
        )
        raise ValueError(msg)
    from haystack_agentic.components.grounders.llm_judge_grounder import LLMJudgeGrounder  # noqa: PLC0415
    from haystack_agentic.components.routers.agentic_router import AgenticRouter  # noqa: PLC0415

    data = read_loop_yaml(path)
    if options.max_iterations:  # the run bound is the pipeline's own parameter, fixed when it is made
        searches = data["components"]["controller"]["init_parameters"].get("max_searches_per_turn")
        data["max_runs_per_component"] = max_runs_for(options.max_iterations, *([int(searches)] if searches else []))
    model = options.model or model_from_env()
    pipeline = loop_pipeline_from_dict(
        data, path, model=model, base_url=options.base_url, must_exist=not options.new_store
    )
    if model and options.llm == "openai":
        pipeline.metadata["llm"] = f"OpenAI-compatible ({model})"
    components = dict(pipeline.walk())
    controller = components["controller"]
    if options.max_iterations:
        if not isinstance(controller, LoopController):
            msg = (
                f"--max-iterations needs a LoopController named `controller`; {path} has a {type(controller).__name__}."
            )
            raise ValueError(msg)
        controller.max_iterations = options.max_iterations
    if options.on_insufficient_evidence:
        evidence = components.get("evidence")
        if not isinstance(evidence, EvidenceChecker):
            msg = "--on-insufficient-evidence needs a pipeline with an `evidence` component (an EvidenceChecker)."
            raise ValueError(msg)
        evidence.on_insufficient_evidence = options.on_insufficient_evidence
    grounder, router_llm = components.get("grounder"), getattr(components.get("router"), "chat_generator", None)
    if options.grounding == "auto" and isinstance(grounder, HHEMGrounder):
        judge = options.llm == "openai" and router_llm is not None
        if _hhem_missing(grounder, judge, notify) and judge:
            components["grounder"] = LLMJudgeGrounder(chat_generator=_copy_of(router_llm))
            _replace_component(pipeline, "grounder", components["grounder"])
            use_openai_server(pipeline, model, options.base_url)  # the copy's key is serialised as the default one
    for instance in components.values():
        roles = (AgenticRouter, Answerer, FallbackSynthesizer, EvidenceChecker, LLMJudgeGrounder)  # the LLM roles
        if isinstance(instance, roles) and instance.chat_generator is not None:
            _limit_role(instance, options)
    return pipeline


def _copy_of(generator: Any) -> Any:
    """A new chat generator made as `generator` was (its serialised parameters)."""
    return component_from_dict(type(generator), component_to_dict(generator, "chat_generator"), "chat_generator")


def _replace_component(pipeline: Pipeline, name: str, instance: Any) -> None:
    """Put `instance` in the place of the pipeline's component `name`, connected as it was."""
    links = [
        (link["sender"], link["receiver"])
        for link in pipeline.to_dict()["connections"]
        if name in (link["sender"].split(".")[0], link["receiver"].split(".")[0])
    ]
    pipeline.remove_component(name)
    pipeline.add_component(name, instance)
    for sender, receiver in links:
        pipeline.connect(sender, receiver)


def _limit_role(role: Any, options: LoopOptions) -> None:
    """An LLM role and its chat generator with the run's seconds and tokens per call, its prompt fitting the server."""
    from haystack_agentic.llm.server_info import ServerInfo  # noqa: PLC0415

    for part in (role, role.chat_generator):  # the generator's own HTTP timeout would cut a call the role allows
        if options.timeout is not None and hasattr(part, "timeout"):
            part.timeout = options.timeout
        if options.max_tokens is not None and hasattr(part, "generation_kwargs"):
            part.generation_kwargs = {**(part.generation_kwargs or {}), "max_tokens": options.max_tokens}
    budget = getattr(role, "context_budget_tokens", None)
    if options.context_tokens and isinstance(budget, int):
        role.context_budget_tokens = ServerInfo(n_ctx=options.context_tokens).prompt_budget(budget)


def _hhem_missing(grounder: HHEMGrounder, judge: bool, notify: Callable[[str], None]) -> bool:
    """Whether `grounder` lacks its model; if so, tell `notify` (the router's LLM judges instead when `judge`)."""
    from haystack_agentic.grounding.hhem_loading import HOW_TO_GET, hhem_missing  # noqa: PLC0415

    missing = hhem_missing(grounder.model, grounder.revision, grounder.foundation, grounder.local_files_only)
    if missing is None:
        return False
    then = (
        "Grounding with the configured LLM as judge instead (LLMJudgeGrounder)."
        if judge
        else "Running without grounding."
    )
    notify(f"Grounding: {missing}. To get it: {HOW_TO_GET}. {then}")
    return True
