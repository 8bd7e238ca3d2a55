# SPDX-License-Identifier: Apache-2.0

from pathlib import Path
from typing import Any

from haystack import Document, Pipeline, component, default_to_dict, logging
from haystack.core.super_component import SuperComponent
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from haystack_agentic.components.loop.loop_controller import validate_filters
from haystack_agentic.components.loop.loop_result_builder import RESULT_TYPES
from haystack_agentic.llm.streaming import plain_function
from haystack_agentic.loop_loading import loop_pipeline_from_dict, pipeline_from_dict, read_loop_yaml
from haystack_agentic.resources import pipeline_path
from haystack_agentic.settings import model_from_env

logger = logging.getLogger(__name__)

#: The packaged pipeline `AgenticRAG()` wraps when given none: offline (no API key, no server).
DEFAULT_PIPELINE = "agentic_rag_embedded"

#: The loop inputs a caller gives; every other input socket of the loop pipeline is fed inside its cycle.
LOOP_INPUTS = ("query", "messages", "filters", "collections")


@component
class AgenticRAG(SuperComponent):
    """
    The agentic loop as one component: a question or conversation in, the cited answer out.

    A `SuperComponent` around a loop pipeline, whose graph stays editable in `agentic_rag.pipeline`: a question or
    conversation in, the cited answer, its documents and the result out.

    ### Usage example
    ```python
    from haystack import Document
    from haystack.components.generators.chat import MockChatGenerator
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage, ToolCall
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_agentic import AgenticRAG, AgenticRouter, build_loop_pipeline

    store = InMemoryDocumentStore()
    store.write_documents([Document(id="bsg", content="Big Stone Gap is a film directed by Adriana Trigiani.")])
    llm = MockChatGenerator([  # any Haystack chat generator with tool calling, e.g. OpenAIChatGenerator()
        ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="search", arguments={"query": "Big Stone Gap"})]),
        ChatMessage.from_assistant(tool_calls=[ToolCall(tool_name="answer", arguments={"text": "Adriana Trigiani"})]),
    ])
    loop = build_loop_pipeline(AgenticRouter(chat_generator=llm), InMemoryBM25Retriever(store), check_evidence=False)
    rag = AgenticRAG(pipeline=loop)  # or AgenticRAG("agentic_rag"), AgenticRAG("my.yml"); add it to any Pipeline
    out = rag.run(query="Who directed Big Stone Gap?")
    print(out["answer"], [d.id for d in out["documents"]])  # Adriana Trigiani [1] ['bsg']
    ```
    """

    def __init__(self, pipeline: Pipeline | str | Path = DEFAULT_PIPELINE, raise_on_failure: bool = True) -> None:
        """
        Wrap a loop pipeline.

        :param pipeline: The loop pipeline: a built `Pipeline` (`build_loop_pipeline`, or loaded), the name of a
            packaged pipeline (the files under `pipelines/`), or the path of a loop pipeline YAML, loaded as
            `load_loop_pipeline` loads it (its in-memory stores get their own storage: fill the one of
            `agentic_rag.pipeline.get_component("retriever")`). Default: `"agentic_rag_embedded"`, the offline one.
        :param raise_on_failure: `True` (default): a run that ends `terminated_by="error"` raises `AgenticRAGError`.
            `False`: the result is returned with `terminated_by="error"` and the error text.
        :raises FileNotFoundError: For an unknown packaged pipeline name (the message lists the known ones).
        :raises ValueError: If the YAML cannot be read or is not a loop pipeline, or the pipeline has no
            `controller` and `result` components.
        """
        if not isinstance(pipeline, Pipeline):
            path = _yaml_path(pipeline)
            pipeline = loop_pipeline_from_dict(read_loop_yaml(path), path, model=model_from_env())
        names = {name for name, _ in pipeline.walk()}
        if not {"controller", "result"} <= names:
            msg = (
                "AgenticRAG wraps a loop pipeline: one with a `controller` (LoopController) and a `result` "
                f"(LoopResultBuilder) component, as `build_loop_pipeline` builds it; this one has {sorted(names)}."
            )
            raise ValueError(msg)
        inputs = pipeline.inputs()
        input_mapping = {name: [f"controller.{name}"] for name in LOOP_INPUTS if name in inputs.get("controller", {})}
        streaming = [f"{name}.streaming_callback" for name, socket in inputs.items() if "streaming_callback" in socket]
        if streaming:
            input_mapping["streaming_callback"] = streaming
        output_mapping = {f"result.{key}": key for key in RESULT_TYPES}
        # Explicit: `@component` rebuilds the class, so `super()` would not find it.
        SuperComponent.__init__(self, pipeline=pipeline, input_mapping=input_mapping, output_mapping=output_mapping)
        self.raise_on_failure = raise_on_failure
        # Haystack's `set_output_types` annotates the types `type[Any]`, too narrow: it takes any type (as
        # `output_types` does), and `str | None` is a `UnionType`, not a `type`.
        component.set_output_types(
            self,
            answer=str | None,  # type: ignore[arg-type]
            answers=list[GeneratedAnswer],
            documents=list[Document],
            messages=list[ChatMessage],
            result=dict[str, Any],
        )

    def run(self, **kwargs: Any) -> dict[str, Any]:
        """
        Run the loop.

        :param query: The question (str), or pass `messages`.
        :param messages: The conversation so far (`list[ChatMessage]`), ending with the user's question.
        :param filters: Haystack metadata filters that scope every search of the run (dict), or `None`.
        :param collections: The run's collection scope (`"all"`, a name or a list of names), or `None`.
        :param streaming_callback: Called with each `StreamingChunk` of the run's LLM calls and its step events
            (sync for `run`; sync or async for `run_async`), or `None`.
        :returns: `answer` (str, or `None` when the run gave up or failed); `documents` (the run's chunks as
            `Document`s, best first, without embeddings); `result` (every output of the loop's
            `LoopResultBuilder`, the same objects; `result_to_dict` of that module makes it JSON);
            `answers` (what Haystack's `AnswerBuilder` outputs, for its evaluators: one `GeneratedAnswer`, `[]`
            without an answer, with `data` the answer without its `[n]` markers, the cited chunks as `documents`,
            and `answer`, `terminated_by`, `evidence`, `grounding`, `citations` in `meta`); `messages` (the
            conversation with the answer appended, ready to pass as `messages` next turn).
        :raises ValueError: If neither `query` nor `messages` is given, or `filters` are not valid Haystack filters
            (`InvalidLoopInputError`, naming the bad node), before anything runs.
        :raises PipelineRuntimeError: If the question is refused (`InvalidLoopInputError` as its cause).
        :raises AgenticRAGError: If the run ended with `terminated_by="error"` and `raise_on_failure` is set.
        """
        return self._checked(_outputs(SuperComponent.run(self, **_run_inputs(kwargs))))

    async def run_async(self, **kwargs: Any) -> dict[str, Any]:
        """Async twin of `run` (`Pipeline.run_async`): the same inputs and outputs."""
        return self._checked(_outputs(await SuperComponent.run_async(self, **_run_inputs(kwargs))))

    def _checked(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """The outputs, or `AgenticRAGError` for a failed run when `raise_on_failure` is set."""
        result = outputs["result"]
        if self.raise_on_failure and result["terminated_by"] == "error":
            msg = f"The agentic loop failed: {result['error']}"
            raise AgenticRAGError(msg, result=result)
        return outputs

    def to_dict(self) -> dict[str, Any]:
        """:returns: The component as a dictionary, the loop pipeline's whole dict under `pipeline`."""
        return default_to_dict(self, pipeline=self.pipeline.to_dict(), raise_on_failure=self.raise_on_failure)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "AgenticRAG":
        """:returns: The component from `to_dict()` output, its loop pipeline loaded with `allowed_modules_for` it."""
        params = data.get("init_parameters", {})
        pipeline = params.get("pipeline")
        if isinstance(pipeline, dict):
            pipeline = pipeline_from_dict(pipeline, "inside AgenticRAG")
        pipeline = DEFAULT_PIPELINE if pipeline is None else pipeline
        return cls(pipeline=pipeline, raise_on_failure=params.get("raise_on_failure", True))


class AgenticRAGError(RuntimeError):
    """A run of `AgenticRAG` ended with `terminated_by="error"`; `result` is the run's full result dict."""

    def __init__(self, message: str, result: dict[str, Any]) -> None:
        super().__init__(message)
        self.result = result


def _yaml_path(pipeline: str | Path) -> Path:
    """A pipeline YAML path, or the packaged pipeline of that name."""
    path = Path(pipeline)
    if path.suffix in (".yml", ".yaml") and (path.exists() or len(path.parts) > 1):
        return path
    return pipeline_path(str(pipeline))


def _given(value: Any) -> bool:
    """Whether an input was given: SuperComponent marks a missing one with a class (a callback is never one)."""
    return value is not None and not isinstance(value, type)


def _run_inputs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The run's inputs, checked, the streaming callback wrapped as a plain function (Haystack deep-copies inputs)."""
    if not _given(kwargs.get("query")) and not _given(kwargs.get("messages")):
        msg = "AgenticRAG needs a question: pass `query` (a string) or `messages` (a list of ChatMessage)."
        raise ValueError(msg)
    if _given(kwargs.get("filters")):  # here, not in a retriever mid-loop (wrapped in PipelineRuntimeError)
        kwargs = {**kwargs, "filters": validate_filters(kwargs["filters"])}
    callback = kwargs.get("streaming_callback")
    if callable(callback) and _given(callback):
        kwargs = {**kwargs, "streaming_callback": plain_function(callback)}
    return kwargs


def _outputs(mapped: dict[str, Any]) -> dict[str, Any]:
    """`answer`, `answers`, `documents`, `messages` and the whole `result` from the result component's outputs."""
    result = {key: mapped.get(key) for key in RESULT_TYPES}
    return {**{key: result[key] for key in ("answer", "answers", "documents", "messages")}, "result": result}
