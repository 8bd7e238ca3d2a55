# SPDX-License-Identifier: Apache-2.0

import dataclasses
from typing import Any

from haystack import Document, component, logging
from haystack.dataclasses import ChatMessage, GeneratedAnswer

from haystack_agentic.dataclasses.loop_state import LoopState, jsonable
from haystack_agentic.grounding.markers import cited_count, strip_markers
from haystack_agentic.grounding.sentence_splitter import SENTENCE_SPANS_KEY
from haystack_agentic.llm.valid_text import strict_json, valid_document, valid_value
from haystack_agentic.tracing import tag_current_span

logger = logging.getLogger(__name__)

#: The loop result's keys and types: the output sockets of `LoopResultBuilder`.
RESULT_TYPES: dict[str, Any] = {
    "answer": str | None,
    "answers": list[GeneratedAnswer],
    "terminated_by": str,
    "iterations": int,
    "tool_history": list[dict[str, Any]],
    "documents": list[Document],
    "grounding": dict[str, Any] | None,
    "usage": dict[str, Any],
    "error": str | None,
    "metadata": dict[str, Any],
    "evidence": dict[str, Any] | None,
    "tool_state": dict[str, Any],
    "messages": list[ChatMessage],
    "citations": list[dict[str, Any]],
}


@component
class LoopResultBuilder:
    """
    Turns the final `LoopState` of the agentic loop into its result, one output socket per key.

    The answer comes as text and as Haystack `GeneratedAnswer`s, the chunks as `Document`s, the conversation as
    `ChatMessage`s, the rest as data.

    ### Usage example
    ```python
    from haystack_agentic import LoopResultBuilder, LoopState
    from haystack_agentic.components.loop.loop_result_builder import result_to_dict

    state = LoopState(question="q").finish("answered", answer="a")
    result = LoopResultBuilder().run(state=state)
    print(result["answer"], result["messages"][-1].text)  # a a
    print(result_to_dict(result)["messages"][-1]["role"])  # assistant (JSON, for a server or a file)
    ```
    """

    @component.output_types(**RESULT_TYPES)
    def run(self, state: LoopState) -> dict[str, Any]:
        """
        Build the result.

        :param state: The ended run's state.
        :returns: The result, one output socket per key, its text valid UTF-8 (a lone surrogate is U+FFFD) and its
            numbers finite (a non-finite one is `None`): `answer` (str, with its `[n]` markers, or `None`), `answers`
            (what Haystack's `AnswerBuilder` outputs, for its evaluators: one `GeneratedAnswer` with `data` the answer
            without markers, `query` the question, the cited chunks as `documents`, and `answer`, `terminated_by`,
            `evidence`, `grounding`, `citations` in `meta`; `[]` without an answer), `terminated_by`, `iterations`,
            `tool_history` (`ToolStep.to_dict()` dicts), `documents` (the run's chunks, best first, without embeddings
            and stored sentence offsets), `grounding`, `usage` (per role and `total`), `error`, `metadata`,
            `evidence`, `tool_state`, `messages` (the conversation the run started from, or the question, then the
            answer without its markers: the next turn's `messages`) and `citations` (one dict per `[n]` marker, see
            `haystack_agentic.grounding.citations`; `[]` without an answer). `result_to_dict` makes it JSON.
        """
        if state.outcome.terminated_by is None:
            logger.warning("LoopResultBuilder got a state that never ended; reporting it as an error.")
            state = state.finish("error", error="The loop ended without a termination reason.")
        result = _result(state)
        total = result["usage"]["total"]
        tag_current_span(
            terminated_by=result["terminated_by"],
            iterations=result["iterations"],
            chunks=len(result["documents"]),
            llm_calls=total["calls"],
            prompt_tokens=total["prompt_tokens"],
            completion_tokens=total["completion_tokens"],
            answered=result["answer"] is not None,
        )
        return result

    @component.output_types(**RESULT_TYPES)
    async def run_async(self, state: LoopState) -> dict[str, Any]:
        """Async twin of `run` (no I/O): runs on the event loop instead of a worker thread."""
        return self.run(state=state)


def result_to_dict(result: dict[str, Any]) -> dict[str, Any]:
    """
    The loop's result (`LoopResultBuilder`'s outputs, or `AgenticRAG`'s `result`) as strict JSON data.

    For a server, `--json` or a file: `documents` as `Document.to_dict(flatten=False)` without the embedding keys,
    `messages` as `ChatMessage.to_dict()`, without `answers` (the same answer, documents and citations again); every
    other key as it is. Lone surrogates become U+FFFD, non-finite floats `None`.
    """
    data = {key: value for key, value in result.items() if key != "answers"}
    data["documents"] = [_document_dict(doc) for doc in result.get("documents") or []]
    data["messages"] = [message.to_dict() for message in result.get("messages") or []]
    return strict_json(jsonable(data))


def _result(state: LoopState) -> dict[str, Any]:
    """The result of an ended run (the sockets of `LoopResultBuilder`)."""
    outcome = state.outcome
    # Valid text and finite numbers whatever the LLMs, tools and stores put in the state (a lone surrogate in an
    # exception message, a NaN score): the result is what `--json`, hayhooks and MCP send.
    answer = strict_json(outcome.answer)
    documents = [_result_document(doc) for doc in state.chunks]
    conversation = list(state.conversation or (ChatMessage.from_user(state.question),))
    if answer is not None:  # its markers number this run's citations, which the next run does not have
        conversation.append(ChatMessage.from_assistant(strip_markers(answer, cited_count(outcome.citations)) or answer))
    keys = ("calls", "prompt_tokens", "completion_tokens")
    total = {key: sum(int(counts.get(key, 0)) for counts in state.usage.values()) for key in keys}
    data = strict_json(
        jsonable(
            {
                "tool_history": [step.to_dict() for step in state.tool_history],
                "grounding": outcome.grounding,
                "usage": {**{role: dict(counts) for role, counts in state.usage.items()}, "total": total},
                "error": outcome.error,
                "metadata": state.metadata,
                "evidence": state.evidence,
                "tool_state": state.tool_state,
                "citations": outcome.citations if answer is not None else [],
            }
        )
    )
    result = {
        "answer": answer,
        "answers": [],
        "terminated_by": outcome.terminated_by,
        "iterations": state.iteration,
        "documents": documents,
        "messages": [_valid_message(message) for message in conversation],
        **data,
    }
    result["answers"] = _generated_answers(result, state.question)
    return {key: result[key] for key in RESULT_TYPES}


def _result_document(doc: Document) -> Document:
    """The chunk without its embeddings and stored sentence offsets (index data the citations already used)."""
    doc = valid_document(doc)
    meta = {key: value for key, value in doc.meta.items() if key != SENTENCE_SPANS_KEY}
    if doc.embedding is None and doc.sparse_embedding is None and len(meta) == len(doc.meta):
        return doc
    return dataclasses.replace(doc, meta=meta, embedding=None, sparse_embedding=None)


def _valid_message(message: ChatMessage) -> ChatMessage:
    """The message, or a copy with valid text when it held a lone surrogate."""
    data = message.to_dict()
    valid = valid_value(data)
    return message if valid is data else ChatMessage.from_dict(valid)


def _document_dict(doc: Document) -> dict[str, Any]:
    data = doc.to_dict(flatten=False)
    data.pop("embedding", None)
    data.pop("sparse_embedding", None)
    return data


def _generated_answers(result: dict[str, Any], question: str) -> list[GeneratedAnswer]:
    """The run's answer as Haystack's `GeneratedAnswer` (what `AnswerBuilder` outputs), or `[]` without one."""
    if result["answer"] is None:
        return []
    citations = result["citations"]
    by_id = {doc.id: doc for doc in result["documents"]}
    cited = [by_id[i] for i in dict.fromkeys(c["document_id"] for c in citations) if i in by_id]
    meta = {key: result[key] for key in ("answer", "terminated_by", "evidence", "grounding", "citations")}
    data = strip_markers(result["answer"], cited_count(citations)) or ""
    return [GeneratedAnswer(data=data, query=question, documents=cited, meta=meta)]
