# SPDX-License-Identifier: Apache-2.0
"""
Assemble the agentic loop as a Haystack `Pipeline` with a cycle, from its components.

The YAML files under `pipelines/` are what users load (`Pipeline.loads` with the allow-list); this module is
how they are made, and how Python users build the same graph around their own retriever and chat generators.
"""

from typing import Any

from haystack import Pipeline, logging
from haystack.dataclasses import ChatMessage, StreamingCallbackT

from haystack_agentic import ALLOWED_MODULES  # noqa: F401 - the packaged YAMLs' allow-list, re-exported here

from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.loop.loop_controller import DEFAULT_MAX_SEARCHES_PER_TURN, LoopController
from haystack_agentic.components.loop.loop_result_builder import LoopResultBuilder
from haystack_agentic.components.loop.loop_state_joiner import LoopStateJoiner
from haystack_agentic.llm.streaming import plain_function
from haystack_agentic.loop_loading import link_collection_store

logger = logging.getLogger(__name__)


def max_runs_for(max_iterations: int, max_searches_per_turn: int = DEFAULT_MAX_SEARCHES_PER_TURN) -> int:
    """
    The `max_runs_per_component` a loop pipeline needs: the controller runs once per search of a turn (once for a
    turn without one), plus the run's start and the answerer's and the evidence check's returns.

    :param max_iterations: The controller's `max_iterations`.
    :param max_searches_per_turn: The controller's `max_searches_per_turn`.
    :returns: A bound that a correct run never reaches.
    """
    return (max_searches_per_turn + 1) * max_iterations + 4


def build_loop_pipeline(
    router: Any,
    retriever: Any,
    *,
    controller: LoopController | None = None,
    answerer: Answerer | None = None,
    extractor: Any = None,
    fallback: FallbackSynthesizer | None = None,
    query_embedder: Any = None,
    grounder: Any = None,
    metadata: dict[str, Any] | None = None,
    evidence_checker: Any = None,
    check_evidence: bool = True,
) -> Pipeline:
    """
    Wire the agentic loop around a router and a retriever.

    Graph: `controller.state -> router`; a search goes `router.query -> [query_embedder ->] retriever` with
    `router.filters`/`router.top_k`, and `router.loop -> controller.state` with the retriever's documents
    into `controller.documents`; `router.answer -> answerer`, whose reflect/draft result goes back to
    `controller.revised` (two sockets instead of a `BranchJoiner`: one component less to run every turn);
    `controller.exhausted -> fallback`; every end (`router.finished`, `answerer.finished`, `fallback.finished`,
    `controller.failed`)
    meets in `finish` (a `LoopStateJoiner`: a `BranchJoiner` with `run_async`), then the optional `grounder`, then
    `result` (`LoopResultBuilder`).
    With the evidence check (the default), `evidence` sits on both answer paths: `router.answer -> evidence.state`
    and `controller.exhausted -> evidence.exhausted`; it sends the run on to `answerer` / `fallback`, back into
    the loop (`evidence.retry -> controller.refused`) to search again, or to `finish` (gave up).

    :param router: An `AgenticRouter` or any component with the same sockets (input `state`; outputs `query`,
        `filters`, `top_k`, `loop`, `answer`, `finished`).
    :param retriever: A Haystack retriever with a `query` or `query_text` (text) and/or `query_embedding` input,
        `filters`, `top_k`, and a `documents` output. With a `query_embedder` and a text input too (a hybrid
        retriever), the query goes to both. An `error` output (a `SafeRetriever`) goes to
        `controller.search_error`, so a failed search is a tool error, not a crash.
    :param controller: The `LoopController` (default: `LoopController()`).
    :param answerer: The `Answerer` (default: in json mode one with the router's chat generator; otherwise one
        without its own LLM, which keeps the controller's draft as the answer).
    :param extractor: A stage between the answerer and `finish` (input `state`, output `state`) that changes the
        answerer's final answer, e.g. a `ShortAnswerExtractor` (`answerer.finished -> extractor.state`), or `None`.
    :param fallback: The `FallbackSynthesizer` (default: one with the router's chat generator and temperature;
        disabled when the router has no chat generator).
    :param query_embedder: A text embedder (input `text`, output `embedding`) for dense retrievers, or `None`.
    :param grounder: A grounding stage (input `state`, output `state`), or `None`.
    :param metadata: Pipeline metadata (kept in YAML).
    :param evidence_checker: The evidence check before the final answer: an `EvidenceChecker` or any component with
        its sockets (inputs `state`, `exhausted`; outputs `answer`, `fallback`, `retry`, `finished`). `None`
        (default): `EvidenceChecker()`, the offline check (pass one with a `chat_generator` for the LLM judge).
    :param check_evidence: `False` builds the loop without an evidence check (answers are never held back).
    :returns: The pipeline. Its inputs are `controller.query` / `controller.messages` (and optional
        `controller.filters`, `controller.collections`); its outputs are the result's keys under `result`
        (`pipeline.run(data)["result"]["answer"]`, see `LoopResultBuilder`). `pipeline.inputs()` also lists the
        loop's internal sockets (`controller.documents`, `controller.state`, `finish.value`, ...: they are fed
        inside the cycle, never by the caller); `AgenticRAG` wraps the pipeline with only the real inputs.
    :raises ValueError: If the retriever searches by embedding only and no `query_embedder` is given.
    """
    takes = {name for name in ("query", "query_text", "query_embedding") if _has_socket(retriever, "__haystack_input__", name)}
    text_input = next((name for name in ("query", "query_text") if name in takes), None)
    if query_embedder is None and text_input is None and "query_embedding" in takes:
        raise ValueError(
            f"The retriever {type(retriever).__name__} searches by embedding and takes no query text: pass the "
            "embedder of its chunks' model as `build_loop_pipeline(..., query_embedder=...)` (for the packaged "
            "MiniLM store: `query_embedder=MiniLMTextEmbedder()`), or use a BM25 or hybrid retriever."
        )
    controller = controller or LoopController()
    # Unset roles fall back to the controller's chat generator (DESIGN.md). In tools mode the controller's answer
    # is final by default (no rewrite); json mode needs an answer LLM to write the answer from the chunks.
    controller_llm = getattr(router, "chat_generator", None)
    controller_temperature = getattr(router, "temperature", None)
    if answerer is None:
        json_mode = getattr(router, "mode", "tools") == "json"
        answerer = Answerer(chat_generator=controller_llm if json_mode else None, temperature=controller_temperature)
    if fallback is None:
        fallback = FallbackSynthesizer(chat_generator=controller_llm, temperature=controller_temperature)
    max_runs = max_runs_for(controller.max_iterations, controller.max_searches_per_turn)
    pipeline = Pipeline(max_runs_per_component=max_runs, metadata=metadata or {})
    pipeline.add_component("controller", controller)
    pipeline.add_component("router", router)
    if query_embedder is not None:
        pipeline.add_component("query_embedder", query_embedder)
    pipeline.add_component("retriever", retriever)
    pipeline.add_component("answerer", answerer)
    if extractor is not None:
        pipeline.add_component("extractor", extractor)
    pipeline.add_component("fallback", fallback)
    if check_evidence:
        pipeline.add_component("evidence", evidence_checker if evidence_checker is not None else EvidenceChecker())
    pipeline.add_component("finish", LoopStateJoiner())
    if grounder is not None:
        pipeline.add_component("grounder", grounder)
    pipeline.add_component("result", LoopResultBuilder())

    link_collection_store(pipeline)
    pipeline.connect("controller.state", "router.state")
    exhausting = ("evidence.exhausted", "evidence.fallback") if check_evidence else None
    _connect_through(pipeline, "controller.exhausted", exhausting, "fallback.state")
    if query_embedder is not None:
        pipeline.connect("router.query", "query_embedder.text")
        pipeline.connect("query_embedder.embedding", "retriever.query_embedding")
        if text_input is not None:  # a hybrid retriever takes the text as well as the embedding
            pipeline.connect("router.query", f"retriever.{text_input}")
    else:
        pipeline.connect("router.query", f"retriever.{text_input or 'query'}")
    pipeline.connect("router.filters", "retriever.filters")
    pipeline.connect("router.top_k", "retriever.top_k")
    pipeline.connect("router.loop", "controller.state")
    pipeline.connect("retriever.documents", "controller.documents")
    if _has_socket(retriever, "__haystack_output__", "error"):  # e.g. a SafeRetriever: failed searches
        pipeline.connect("retriever.error", "controller.search_error")
    checking = ("evidence.state", "evidence.answer") if check_evidence else None
    _connect_through(pipeline, "router.answer", checking, "answerer.state")
    if check_evidence:
        pipeline.connect("evidence.retry", "controller.refused")
        pipeline.connect("evidence.finished", "finish.value")
    pipeline.connect("answerer.state", "controller.revised")
    pipeline.connect("router.finished", "finish.value")
    extracting = ("extractor.state", "extractor.state") if extractor is not None else None
    _connect_through(pipeline, "answerer.finished", extracting, "finish.value")
    pipeline.connect("fallback.finished", "finish.value")
    pipeline.connect("controller.failed", "finish.value")
    grounding = ("grounder.state", "grounder.state") if grounder is not None else None
    _connect_through(pipeline, "finish.value", grounding, "result.state")
    return pipeline


def _connect_through(pipeline: Pipeline, sender: str, stage: tuple[str, str] | None, receiver: str) -> None:
    """Connect `sender` to `receiver`, or, given an optional stage's (input, output) sockets, through that stage."""
    if stage is None:
        pipeline.connect(sender, receiver)
    else:
        pipeline.connect(sender, stage[0])
        pipeline.connect(stage[1], receiver)


def loop_inputs(
    pipeline: Pipeline,
    query: str | None = None,
    *,
    messages: list[ChatMessage] | None = None,
    filters: dict[str, Any] | None = None,
    streaming_callback: StreamingCallbackT | None = None,
) -> dict[str, Any]:
    """
    The `data` for `pipeline.run` / `run_async` of a loop pipeline: the question or conversation for `controller`,
    and the streaming callback for every component that takes one (the LLM roles and the controller).

    ### Usage example
    ```python
    from haystack.components.generators.utils import print_streaming_chunk
    from haystack_agentic.pipelines.loop_pipeline import loop_inputs

    data = loop_inputs(pipeline, "Who directed Big Stone Gap?", streaming_callback=print_streaming_chunk)
    result = pipeline.run(data)["result"]
    ```

    :param pipeline: A loop pipeline (a component named `controller`).
    :param query: The question (or pass `messages`).
    :param messages: The conversation so far, ending with the user's question (`ChatMessage`s).
    :param filters: Haystack metadata filters for every search of the run.
    :param streaming_callback: Called with every `StreamingChunk` of the run's LLM calls and with its step events
        (`haystack_agentic.llm.streaming`): a sync function for `run`, sync or async for `run_async`. It is wrapped
        in a plain function, so Haystack's deep copy of pipeline inputs never copies the object behind a bound
        method.
    :returns: The pipeline inputs.
    """
    controller: dict[str, Any] = {}
    if query is not None:
        controller["query"] = query
    if messages is not None:
        controller["messages"] = list(messages)
    if filters:
        controller["filters"] = filters
    data: dict[str, Any] = {"controller": controller}
    if streaming_callback is not None:
        callback = plain_function(streaming_callback)
        for name, instance in pipeline.walk():
            if _has_socket(instance, "__haystack_input__", "streaming_callback"):
                data.setdefault(name, {})["streaming_callback"] = callback
    return data


def _has_socket(instance: Any, attribute: str, name: str) -> bool:
    """Whether a component has an input (`__haystack_input__`) or output (`__haystack_output__`) socket `name`."""
    sockets = getattr(instance, attribute, None)
    return sockets is not None and name in sockets
