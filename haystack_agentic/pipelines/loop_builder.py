# SPDX-License-Identifier: Apache-2.0
"""
`build_loop`: the one place that turns `LoopOptions` into a loop pipeline (every option is applied to the YAML's
dict before the pipeline is built).
"""

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from haystack import Pipeline, logging

from haystack_agentic.llm.local_server_key import openai_api_key
from haystack_agentic.loop_loading import loop_pipeline_from_dict, read_loop_yaml, set_store_uri
from haystack_agentic.pipelines.loop_pipeline import max_runs_for
from haystack_agentic.pipelines.packaged_yaml import class_defaults
from haystack_agentic.resources import pipeline_path
from haystack_agentic.settings import default_milvus_uri, default_weaviate_url, model_from_env, openai_configured

logger = logging.getLogger(__name__)

_JUDGE_GROUNDER = "haystack_agentic.components.grounders.llm_judge_grounder.LLMJudgeGrounder"


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
    on_insufficient_evidence: str | None = None
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

    :param notify: Called with a one-line notice the user should hear (grounding without its model); default: a
        logged warning.
    :returns: The pipeline (not warmed up). Loading writes nothing unless `options.new_store`.
    :raises StoreError: If a Milvus Lite database it names does not exist, or a store cannot be opened.
    :raises ValueError: If an option does not fit the pipeline, or the file cannot be read or is no loop pipeline.
    :raises FileNotFoundError: For a bare name that is no packaged pipeline (the message lists them).
    """
    options = options or LoopOptions()
    notify = notify or logger.warning
    path = options.pipeline_path()
    data = read_loop_yaml(path)
    components = data["components"]
    model = options.model or model_from_env()
    if model and options.llm == "openai":
        data["metadata"] = {**(data.get("metadata") or {}), "llm": f"OpenAI-compatible ({model})"}
    store_uri = options.resolved_store_uri()
    if store_uri:
        set_store_uri(components, store_uri)
    if options.on_insufficient_evidence:
        if "evidence" not in components:
            msg = "--on-insufficient-evidence needs a pipeline with an `evidence` component."
            raise ValueError(msg)
        components["evidence"]["init_parameters"]["on_insufficient_evidence"] = options.on_insufficient_evidence
    if options.grounding == "auto":
        _choose_grounder(components, options.llm == "openai", notify)
    _set_limits(data, options)  # after the grounder is chosen: a judge grounder's generator gets the limits too
    return loop_pipeline_from_dict(data, path, model=model, base_url=options.base_url, must_exist=not options.new_store)


def load_loop_pipeline(
    path: Path | str,
    *,
    model: str | None = None,
    api_base_url: str | None = None,
    max_iterations: int | None = None,
    store_uri: str | None = None,
) -> Pipeline:
    """
    Read a loop pipeline YAML with the allow-list, applying overrides: `build_loop` with the YAML's own grounder.

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


def _set_limits(data: dict[str, Any], options: LoopOptions) -> None:
    """The loop's and the LLM roles' limits: turns, seconds and tokens per call, prompt budget."""
    from haystack_agentic.llm.server_info import ServerInfo  # noqa: PLC0415

    server = ServerInfo(n_ctx=options.context_tokens)
    for spec in data["components"].values():
        params = spec["init_parameters"]
        if str(spec.get("type", "")).endswith("LoopController") and options.max_iterations:
            params["max_iterations"] = options.max_iterations
            searches = params.get("max_searches_per_turn")
            bound = max_runs_for(options.max_iterations, *([int(searches)] if searches else []))
            data["max_runs_per_component"] = bound
        if not isinstance(params.get("chat_generator"), dict):  # not an LLM role
            continue
        defaults = class_defaults(str(spec.get("type", ""))) or {}
        if options.timeout is not None and "timeout" in defaults:
            params["timeout"] = options.timeout
        if options.max_tokens is not None and "generation_kwargs" in defaults:
            params["generation_kwargs"] = {**(params.get("generation_kwargs") or {}), "max_tokens": options.max_tokens}
        _limit_generator(params["chat_generator"], options)
        budget = params.get("context_budget_tokens", defaults.get("context_budget_tokens"))
        if options.context_tokens and isinstance(budget, int):
            params["context_budget_tokens"] = server.prompt_budget(budget)


def _limit_generator(generator: dict[str, Any], options: LoopOptions) -> None:
    """
    A role's serialised chat generator with the run's seconds and tokens per call: its own `timeout` (an HTTP
    client's, e.g. the packaged YAMLs' 60 s) would otherwise cut a call the role allows longer.
    """
    params = generator.setdefault("init_parameters", {})
    defaults = class_defaults(str(generator.get("type", ""))) or {}
    if options.timeout is not None and ("timeout" in defaults or "timeout" in params):
        params["timeout"] = options.timeout
    if options.max_tokens is not None and ("generation_kwargs" in defaults or "generation_kwargs" in params):
        params["generation_kwargs"] = {**(params.get("generation_kwargs") or {}), "max_tokens": options.max_tokens}


def _choose_grounder(components: dict[str, Any], judge_allowed: bool, notify: Callable[[str], None]) -> None:
    """An `HHEMGrounder` without its model: the router's LLM as judge when allowed, else a notice (it skips)."""
    from haystack_agentic.grounding.hhem_loading import HOW_TO_GET, hhem_missing  # noqa: PLC0415

    spec = components.get("grounder")
    if spec is None or not str(spec.get("type", "")).endswith("HHEMGrounder"):
        return
    params = {**(class_defaults(spec["type"]) or {}), **spec["init_parameters"]}
    missing = hhem_missing(
        params.get("model"), params.get("revision"), params.get("foundation"), bool(params.get("local_files_only"))
    )
    if missing is None:
        return
    judge_llm = components.get("router", {}).get("init_parameters", {}).get("chat_generator")
    then = "Running without grounding."
    if judge_allowed and isinstance(judge_llm, dict):
        judge = {"chat_generator": copy.deepcopy(judge_llm)}
        components["grounder"] = {"type": _JUDGE_GROUNDER, "init_parameters": judge}
        then = "Grounding with the configured LLM as judge instead (LLMJudgeGrounder)."
    notify(f"Grounding: {missing}. To get it: {HOW_TO_GET}. {then}")
