# SPDX-License-Identifier: Apache-2.0
"""
`AgenticLoopWrapper`: a hayhooks `PipelineWrapper` that serves a loop pipeline YAML.

It serves it over REST, the OpenAI-compatible chat API (with streamed progress) and MCP.
"""

import asyncio
import threading
from collections.abc import AsyncGenerator, Coroutine
from pathlib import Path
from typing import Any, ClassVar

from fastapi_openai_compat.chat_completions.models import ChatCompletion
from hayhooks import BasePipelineWrapper
from haystack import Pipeline, logging
from haystack.dataclasses import StreamingChunk

from haystack_agentic.components.loop.loop_controller import InvalidLoopInputError, validate_filters, validate_question
from haystack_agentic.components.loop.loop_result_builder import LoopResultBuilder, result_to_dict
from haystack_agentic.dataclasses.loop_state import LoopState
from haystack_agentic.indexing.collections import normalise_scope
from haystack_agentic.loop_loading import fill_in_memory_store
from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
from haystack_agentic.pipelines.loop_pipeline import loop_inputs
from haystack_agentic.serving.chat_completions import (  # noqa: F401 - answer_text, progress_line: public here too
    BadRequest,
    ChatReplyStream,
    answer_text,
    completion,
    conversation_from_request,
    progress_line,
)
from haystack_agentic.serving.security import ServeSecurity
from haystack_agentic.settings import store_path_from_env

logger = logging.getLogger(__name__)


def check_question(query: Any, max_chars: int | None = None) -> str:
    """The request's question, cleaned and stripped, at most `max_chars` long (`BadRequest`: missing, blank, long)."""
    try:
        return validate_question(query, max_chars)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def load_served_pipeline(
    path: Path | str, overrides: dict[str, Any] | None = None, store_path: Path | str | None = None
) -> Pipeline:
    """
    The loop pipeline YAML `path` built for serving: its store filled, the pipeline warmed up.

    It is built by `build_loop` with `overrides` (`LoopOptions` fields); its in-memory store is filled from
    `store_path` (default: `$HAYSTACK_AGENTIC_STORE`, if set).

    :raises ValueError: If an override is out of range, or the YAML or the store file cannot be loaded.
    """
    pipeline = build_loop(LoopOptions(pipeline=str(path), **(overrides or {})))
    store_path = store_path or store_path_from_env()
    if store_path:
        fill_in_memory_store(pipeline, Path(store_path))
    pipeline.warm_up()
    return pipeline


class PipelineThread:
    """
    An event loop in a daemon thread, where a served pipeline runs.

    A request's CPU work (prompt fitting, Haystack's copies of the inputs, parsing replies) then never holds the
    server's event loop, which keeps answering `/health`, the other routes and MCP. One loop per pipeline, for its
    whole life: the async clients its components create (e.g. `OpenAIChatGenerator`'s) stay on the loop that made
    them.
    """

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    async def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run `coroutine` on this thread's loop and return its result; cancelling the caller cancels it there."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coroutine, self.loop))


class AgenticLoopWrapper(BasePipelineWrapper):
    """
    Serves an agentic loop pipeline with hayhooks: `POST /<name>/run`, `/v1/chat/completions` and an MCP tool.

    Every request runs on `Pipeline.run_async`, in the wrapper's `PipelineThread` (off the server's event loop); one
    pipeline instance serves concurrent requests. A chat request may hold at most `$HAYSTACK_AGENTIC_MAX_MESSAGES`
    messages (default 1,000). Subclass it in a hayhooks pipeline directory (`<name>/pipeline_wrapper.py`), or let
    `haystack-agentic serve` write that file.

    ### Usage example
    ```python
    # pipelines/agentic_rag/pipeline_wrapper.py, served by `hayhooks run --pipelines-dir pipelines`
    from haystack_agentic.serving import AgenticLoopWrapper

    class PipelineWrapper(AgenticLoopWrapper):
        pipeline_file = "/path/to/agentic_rag.yml"
    ```
    """

    #: The pipeline YAML to serve (absolute, or relative to the wrapper's module file).
    pipeline_file: ClassVar[str | None] = None
    #: `LoopOptions` fields for `load_served_pipeline` (`model`, `base_url`, `max_iterations`, ...).
    overrides: ClassVar[dict[str, Any]] = {}
    #: A saved in-memory store to load at start-up (default: `$HAYSTACK_AGENTIC_STORE`).
    store_file: ClassVar[str | None] = None

    def setup(self) -> None:
        """
        Load and warm up the pipeline, once per worker, and start its `PipelineThread`.

        :raises ValueError: If there is no `pipeline_file`, it does not load, or `$HAYSTACK_AGENTIC_MAX_MESSAGES` is
            not a whole number >= 1.
        """
        if not self.pipeline_file:
            msg = f"{type(self).__name__}.pipeline_file is not set: name the loop pipeline YAML to serve."
            raise ValueError(msg)
        self.max_messages = ServeSecurity.from_env().max_messages
        self.pipeline = load_served_pipeline(self.pipeline_file, dict(self.overrides), self.store_file)
        self.pipeline_thread = PipelineThread(f"pipeline-{type(self).__module__}")

    async def run_api_async(
        self, query: str, filters: dict[str, Any] | None = None, collections: str | list[str] | None = None
    ) -> dict:
        """
        Answer a question with agentic RAG: an LLM searches the documents as often as it needs, then answers.

        :param query: The question.
        :param filters: Optional Haystack metadata filters that scope every search.
        :param collections: Optional collection scope: `"all"`, a collection name or a list of names (unknown: 422).
        :returns: `{"result": {answer, terminated_by, iterations, ...}}` (hayhooks wraps it in `{"result": ...}`).
        """
        question = check_question(query, self._max_question_chars())
        return {"result": await self._run(self._inputs({"query": question}, filters, collections))}

    async def run_chat_completion_async(
        self, model: str, messages: list[dict], body: dict
    ) -> ChatCompletion | AsyncGenerator[ChatCompletion, None]:
        """
        OpenAI-compatible chat: the conversation goes to the loop, its cited answer comes back.

        The conversation's last user message is the question; the reply is the answer with its `[n]` markers and
        `Sources:` block, and `usage`; with `stream: true` the answer streams as `delta.content`, each loop step as
        `delta.reasoning_content` (see `serving.chat_completions`).

        :param model: The deployed pipeline's name.
        :param messages: The chat messages (OpenAI format): system, user and assistant messages.
        :param body: The request body (`stream`, `stream_options`, optionally `collections` as for REST).
        :returns: The `ChatCompletion`, or an async generator of `chat.completion.chunk`s when streaming.
        :raises BadRequest: For a conversation `conversation_from_request` refuses (more than `max_messages` messages
            included), or an unknown collection.
        """
        conversation = conversation_from_request(messages, self._max_question_chars(), self.max_messages)
        data = self._inputs({"messages": conversation}, None, body.get("collections"))
        if not body.get("stream"):
            return completion(model, await self._run(data))
        options = body.get("stream_options")
        if options is not None and not isinstance(options, dict):
            msg = '`stream_options` must be an object, e.g. {"include_usage": true}.'
            raise BadRequest(msg)
        include_usage = bool((options or {}).get("include_usage"))
        return self._stream(data, model, include_usage)

    async def _run(self, data: dict[str, Any]) -> dict[str, Any]:
        """The loop's result as JSON data, or an error result if the pipeline failed (`BadRequest`: input refused)."""
        try:
            return result_to_dict((await self.pipeline_thread.run(self.pipeline.run_async(data)))["result"])
        except Exception as exc:
            invalid = invalid_input(exc)
            if invalid is not None:
                raise BadRequest(str(invalid)) from exc
            logger.error("The loop pipeline failed: {error}", error=exc, exc_info=True)
            controller = data["controller"]
            question = controller.get("query") or (controller.get("messages") or [None])[-1].text
            return error_result(question, exc)

    async def _stream(
        self, data: dict[str, Any], model: str, include_usage: bool
    ) -> AsyncGenerator[ChatCompletion, None]:
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        done = object()
        server_loop = asyncio.get_running_loop()

        async def on_chunk(chunk: StreamingChunk) -> None:  # called in the pipeline's thread
            server_loop.call_soon_threadsafe(chunks.put_nowait, chunk)

        reply = ChatReplyStream(model)
        for name, sockets in loop_inputs(self.pipeline, streaming_callback=on_chunk).items():
            data[name] = {**data.get(name, {}), **sockets}
        run = asyncio.create_task(self._run(data))
        run.add_done_callback(lambda _: chunks.put_nowait(done))
        try:
            while (chunk := await chunks.get()) is not done:
                for piece in reply.on_chunk(chunk):
                    yield piece
            try:
                result = run.result()
            except Exception as exc:
                logger.error("Loop failed while streaming: {error}", error=exc)
                result = error_result(data["controller"]["messages"][-1].text or "", exc)
            for piece in reply.finish(result, include_usage):
                yield piece
        finally:
            if not run.done():  # the client went away: stop the run
                run.cancel()

    def _max_question_chars(self) -> int | None:
        return getattr(self.pipeline.get_component("controller"), "max_question_chars", None)

    def _inputs(self, inputs: dict[str, Any], filters: Any, collections: Any) -> dict[str, Any]:
        """The pipeline data: the controller's `inputs` (question or conversation) with the checked scope."""
        try:
            filters = validate_filters(filters)  # also refuses a filters value that is not an object
        except ValueError as exc:
            msg = f"`filters`: {exc}"
            raise BadRequest(msg) from exc
        if filters:
            inputs["filters"] = filters
        if collections is not None:
            try:
                inputs["collections"] = normalise_scope(collections)
            except ValueError as exc:
                msg = f"`collections`: {exc}"
                raise BadRequest(msg) from exc
        return {"controller": inputs}


def error_result(question: str, exc: BaseException) -> dict[str, Any]:
    """The loop result (JSON data) of a run whose pipeline raised: no answer, `terminated_by="error"`, the error."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc  # a PipelineRuntimeError wraps the component's error
    state = LoopState(question=question).finish("error", error=f"{type(cause).__name__}: {cause}")
    return result_to_dict(LoopResultBuilder().run(state=state))


def invalid_input(exc: BaseException | None) -> InvalidLoopInputError | None:
    """The `InvalidLoopInputError` in `exc`'s chain of causes (a pipeline wraps a component's error), or `None`."""
    seen = set()
    while exc is not None and id(exc) not in seen and not isinstance(exc, InvalidLoopInputError):
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc if isinstance(exc, InvalidLoopInputError) else None
