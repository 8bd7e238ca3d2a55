# SPDX-License-Identifier: Apache-2.0
"""
Assemble the agentic loop as a Haystack `Pipeline` with a cycle.

This is how the packaged YAMLs are made, and how Python users build the same graph around their own retriever and chat
generators.
"""

from typing import Any

from haystack import Pipeline
from haystack.dataclasses import ChatMessage, StreamingCallbackT

from haystack_agentic.components.evidence.evidence_checker import EvidenceChecker
from haystack_agentic.components.generators.answerer import Answerer
from haystack_agentic.components.generators.fallback_synthesizer import FallbackSynthesizer
from haystack_agentic.components.loop.loop_controller import DEFAULT_MAX_SEARCHES_PER_TURN, LoopController
from haystack_agentic.components.loop.loop_result_builder import LoopResultBuilder
from haystack_agentic.components.loop.loop_state_joiner import LoopStateJoiner
from haystack_agentic.llm.streaming import plain_function
from haystack_agentic.loop_loading import link_collection_store
from haystack_agentic.sockets import component_sockets


def max_runs_for(max_iterations: int, max_searches_per_turn: int = DEFAULT_MAX_SEARCHES_PER_TURN) -> int:
    """The `max_runs_per_component` a loop needs: (searches + 1) controller runs per turn, plus start and returns."""
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

    Graph: `controller.state -> router`; a search goes `router.query -> [query_embedder ->] retriever` (with
    `router.filters`, `router.top_k`), its documents (and a `SafeRetriever`'s `error`) back into `controller`;
    `router.answer -> [evidence ->] answerer [-> extractor]`, the answerer's reflect/draft result back to
    `controller.revised`; `controller.exhausted -> [evidence ->] fallback`; the evidence check's `retry` goes back to
    `controller.refused`. Every end meets in `finish` (a `LoopStateJoiner`), then the optional `grounder`, then
    `result` (`LoopResultBuilder`).

    :param router: An `AgenticRouter` or a component with its sockets (input `state`; outputs `query`, `filters`,
        `top_k`, `loop`, `answer`, `finished`).
    :param retriever: A Haystack retriever taking `query` / `query_text` and/or `query_embedding`, `filters`,
        `top_k`, returning `documents` (a hybrid one gets both the text and the embedding).
    :param controller: The `LoopController` (default: `LoopController()`).
    :param answerer: The `Answerer` (default: in json mode one with the router's chat generator, else one without
        an LLM, which keeps the controller's draft).
    :param extractor: A stage (input and output `state`) after the answerer, e.g. `ShortAnswerExtractor`, or `None`.
    :param fallback: The `FallbackSynthesizer` (default: one with the router's chat generator and temperature).
    :param query_embedder: A text embedder (input `text`, output `embedding`) for dense retrievers, or `None`.
    :param grounder: A grounding stage (input and output `state`), or `None`.
    :param metadata: Pipeline metadata (kept in YAML).
    :param evidence_checker: The evidence check before the final answer (default: `EvidenceChecker()`, offline).
    :param check_evidence: `False` builds the loop without an evidence check.
    :returns: The pipeline: inputs `controller.query` / `controller.messages` (optional `controller.filters`,
        `controller.collections`), outputs the result's keys under `result` (see `LoopResultBuilder`).
    :raises ValueError: If the retriever searches by embedding only and no `query_embedder` is given, is not a
        Haystack component, or is already in another pipeline.
    """
    retriever_inputs, retriever_outputs = component_sockets(retriever)
    takes = {name for name in ("query", "query_text", "query_embedding") if name in retriever_inputs}
    text_input = next((name for name in ("query", "query_text") if name in takes), None)
    if query_embedder is None and text_input is None and "query_embedding" in takes:
        msg = (
            f"The retriever {type(retriever).__name__} searches by embedding and takes no query text: pass the "
            "embedder of its chunks' model as `build_loop_pipeline(..., query_embedder=...)` (for the packaged "
            "MiniLM store: `query_embedder=MiniLMTextEmbedder()`), or use a BM25 or hybrid retriever."
        )
        raise ValueError(msg)
    controller = controller or LoopController()
    # Unset roles fall back to the controller's chat generator (DESIGN.md).
    controller_llm = getattr(router, "chat_generator", None)
    controller_temperature = getattr(router, "temperature", None)
    if answerer is None:
        json_mode = getattr(router, "mode", "tools") == "json"
        answerer = Answerer(chat_generator=controller_llm if json_mode else None, temperature=controller_temperature)
    if fallback is None:
        fallback = FallbackSynthesizer(chat_generator=controller_llm, temperature=controller_temperature)
    max_runs = max_runs_for(controller.max_iterations, controller.max_searches_per_turn)
    pipeline = Pipeline(max_runs_per_component=max_runs, metadata=metadata or {})
    if check_evidence and evidence_checker is None:
        evidence_checker = EvidenceChecker()
    stages = {
        "controller": controller,
        "router": router,
        "query_embedder": query_embedder,
        "retriever": retriever,
        "answerer": answerer,
        "extractor": extractor,
        "fallback": fallback,
        "evidence": evidence_checker if check_evidence else None,
        "finish": LoopStateJoiner(),
        "grounder": grounder,
        "result": LoopResultBuilder(),
    }
    for name, instance in stages.items():
        if instance is not None:
            pipeline.add_component(name, instance)
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
    if "error" in retriever_outputs:  # e.g. a SafeRetriever: failed searches
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
    Build the `data` for `pipeline.run` / `run_async` of a loop pipeline.

    The `data` for `pipeline.run` / `run_async` of a loop pipeline: the question (or the conversation `messages`,
    ending with the question) and `filters` for `controller`, and `streaming_callback` (sync, or async for
    `run_async`) for every component that takes one, as a plain function (Haystack deep-copies inputs).

    ### Usage example
    ```python
    from haystack.components.generators.utils import print_streaming_chunk
    from haystack_agentic.pipelines.loop_pipeline import loop_inputs

    data = loop_inputs(pipeline, "Who directed Big Stone Gap?", streaming_callback=print_streaming_chunk)
    result = pipeline.run(data)["result"]
    ```
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
        for name, sockets in pipeline.inputs(include_components_with_connected_inputs=True).items():
            if "streaming_callback" in sockets:
                data.setdefault(name, {})["streaming_callback"] = callback
    return data
