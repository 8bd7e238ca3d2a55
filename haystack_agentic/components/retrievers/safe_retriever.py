# SPDX-License-Identifier: Apache-2.0

import asyncio
import contextvars
import copy
import inspect
import threading
import typing
from typing import Any

from haystack import Document, component, logging
from haystack.core.serialization import (
    component_from_dict,
    component_to_dict,
    default_from_dict,
    default_to_dict,
    import_class_by_name,
)

from haystack_agentic.llm.timeouts import run_with_timeout
from haystack_agentic.llm.valid_text import valid_text
from haystack_agentic.sockets import NotAComponentError, component_sockets
from haystack_agentic.tracing import tag_current_span

logger = logging.getLogger(__name__)


class DocumentStoreUnavailableError(RuntimeError):
    """The retriever's document store could not be reached when the pipeline started."""


@component
class SafeRetriever:
    """
    Wraps a Haystack retriever so that a failing search becomes a tool error, not a crash.

    Wraps any Haystack retriever so that a failing search becomes a tool error for the loop instead of a crash, and
    an unreachable store fails at `warm_up`.

    ### Usage example
    ```python
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever

    retriever = SafeRetriever(InMemoryBM25Retriever(InMemoryDocumentStore()))
    print(retriever.run(query="anything"))  # {'documents': [], 'error': None}
    ```
    """

    def __init__(self, retriever: Any, timeout: float | None = None) -> None:
        """
        Create a SafeRetriever.

        :param retriever: A Haystack retriever component (a `documents` output), or its serialised dict: that one
            is built on first use, so loading a pipeline YAML opens no store (with the modules the load allowed).
        :param timeout: Seconds one search may take (`None`: no limit); a slower search is reported as failed.
        :raises ValueError: If `retriever` is not a Haystack component with a `documents` output.
        """
        self._lock = threading.Lock()
        self._spec: dict[str, Any] | None = None
        if isinstance(retriever, dict):
            self._spec, self._retriever = copy.deepcopy(retriever), None
            retriever_class = import_class_by_name(retriever["type"])
            # Built later with what this load allowed (Haystack keeps a load's `allowed_modules` in a context variable)
            self._load_context = contextvars.copy_context()
        else:
            self._retriever = _checked(retriever)
            retriever_class = type(retriever)
        for name, (annotation, default) in _class_inputs(retriever_class).items():
            given = {} if default is inspect.Parameter.empty else {"default": default}
            component.set_input_type(self, name, annotation, **given)
        self.timeout = timeout
        self._warmed_up = False

    @property
    def retriever(self) -> Any:
        """The wrapped retriever (a serialised one is built here, once)."""
        if self._retriever is None:
            with self._lock:
                if self._retriever is None:
                    spec = copy.deepcopy(self._spec)  # from_dict methods may change what they are given
                    built = self._load_context.run(
                        lambda: component_from_dict(import_class_by_name(spec["type"]), spec, "retriever")
                    )
                    self._retriever = _checked(built)
        return self._retriever

    @property
    def _retriever_name(self) -> str:
        """The wrapped retriever's class name, for messages (never builds it)."""
        return type(self._retriever).__name__ if self._retriever is not None else self._spec["type"].rsplit(".", 1)[-1]

    @property
    def document_store(self) -> Any:
        """The wrapped retriever's document store (`None` if it has none)."""
        if getattr(self, "_store", None) is None:
            self._store = retriever_document_store(self.retriever)
        return self._store

    def warm_up(self) -> None:
        """
        Warm up the wrapped retriever and check that its document store answers (`count_documents()`).

        :raises DocumentStoreUnavailableError: If the store cannot be reached.
        """
        if self._warmed_up:
            return
        if hasattr(self.retriever, "warm_up"):
            self.retriever.warm_up()
        store = self.document_store
        if store is not None:
            try:
                store.count_documents()
            except Exception as exc:
                msg = (
                    f"The document store {type(store).__name__} at {describe_store_address(store)} is not "
                    f"reachable ({type(exc).__name__}: {exc}). Start it, or fix its URL/URI in the pipeline YAML."
                )
                raise DocumentStoreUnavailableError(msg) from exc
        self._warmed_up = True

    @component.output_types(documents=list[Document], error=str | None)
    def run(self, **kwargs: Any) -> dict[str, Any]:
        """
        Search with the wrapped retriever; on any exception return no documents and the error.

        :param kwargs: The wrapped retriever's inputs.
        :returns: `{"documents": list[Document], "error": str | None}`.
        """
        try:
            documents = run_with_timeout(self.retriever, kwargs, self.timeout, "the retriever")["documents"]
        except Exception as exc:
            return self._failed(kwargs, valid_text(f"{type(exc).__name__}: {exc}"))
        return _traced(kwargs, list(documents or []), None)

    @component.output_types(documents=list[Document], error=str | None)
    async def run_async(self, **kwargs: Any) -> dict[str, Any]:
        """Async twin of `run`: awaits the wrapped retriever's `run_async` when it has one."""
        if not hasattr(self.retriever, "run_async"):
            return self.run(**kwargs)
        try:
            documents = (await asyncio.wait_for(self.retriever.run_async(**kwargs), timeout=self.timeout))["documents"]
        except TimeoutError:
            return self._failed(kwargs, f"TimeoutError: the retriever did not answer within {self.timeout} s")
        except Exception as exc:
            return self._failed(kwargs, valid_text(f"{type(exc).__name__}: {exc}"))
        return _traced(kwargs, list(documents or []), None)

    def _failed(self, inputs: dict[str, Any], error: str) -> dict[str, Any]:
        logger.warning("Search failed in {retriever}: {error}", retriever=self._retriever_name, error=error)
        return _traced(inputs, [], error)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component to a dictionary (the wrapped retriever nested with its own type)."""
        built = self._retriever is not None
        retriever = component_to_dict(self._retriever, "retriever") if built else copy.deepcopy(self._spec)
        return default_to_dict(self, retriever=retriever, timeout=self.timeout)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SafeRetriever":
        """Deserialize the component from a dictionary; the wrapped retriever is built on first use."""
        return cls(**dict(data.get("init_parameters", {})))


def _traced(inputs: dict[str, Any], documents: list[Document], error: str | None) -> dict[str, Any]:
    """Tag the search's tracing span (query, top_k, chunks found, error) and build the output."""
    query = inputs.get("query") or inputs.get("query_text")
    tag_current_span(query=query, top_k=inputs.get("top_k"), chunks_found=len(documents), search_error=error)
    return {"documents": documents, "error": error}


def describe_store_address(store: Any) -> str:
    """
    Describe where a document store lives, for error messages.

    Where a document store lives, for error messages: the `url`, or the Milvus `connection_args` `uri`, of its
    `to_dict()` init parameters, if it has one.
    """
    try:
        parameters = store.to_dict()["init_parameters"]
    except Exception:
        parameters = {}
    connection = parameters.get("connection_args")
    for address in (parameters.get("url"), connection.get("uri") if isinstance(connection, dict) else None):
        if isinstance(address, str) and address:
            return address
    return "its configured address"


def retriever_document_store(retriever: Any) -> Any:
    """
    Return a retriever's document store, or `None` if it names none.

    A retriever's document store (`None` if it names none): its `document_store` attribute, else one rebuilt from
    its `to_dict` (Weaviate's retrievers keep theirs private; the copy talks to the same server).
    """
    store = getattr(retriever, "document_store", None)
    if store is not None or not callable(getattr(retriever, "to_dict", None)):
        return store
    try:
        return store_from_dict(retriever.to_dict()["init_parameters"]["document_store"])
    except Exception:
        return None


def store_from_dict(data: dict[str, Any]) -> Any:
    """A document store from its serialised dict (not changed): its class's `from_dict`, else `default_from_dict`."""
    data = copy.deepcopy(data)
    store_class = import_class_by_name(data["type"])
    return store_class.from_dict(data) if hasattr(store_class, "from_dict") else default_from_dict(store_class, data)


def _checked(retriever: Any) -> Any:
    """
    Check that `retriever` is a Haystack component with a `documents` output; returns it.

    `retriever`, if it is a Haystack component with a `documents` output (`ValueError` otherwise, or if it is
    already in a pipeline).
    """
    try:
        _, outputs = component_sockets(retriever)
    except NotAComponentError:
        outputs = {}
    if "documents" not in outputs:
        msg = (
            "SafeRetriever wraps a Haystack retriever component with a `documents` output, "
            f"got {type(retriever).__name__}."
        )
        raise ValueError(msg)
    return retriever


def _class_inputs(retriever_cls: type) -> dict[str, tuple[Any, Any]]:
    """The inputs of a component class's `run`: name -> (type, default)."""
    run = getattr(retriever_cls, "run", None)
    if not callable(run):
        msg = f"SafeRetriever wraps a Haystack retriever component, got the class {retriever_cls.__name__}."
        raise ValueError(msg)
    hints = typing.get_type_hints(run)
    parameters = list(inspect.signature(run).parameters.values())[1:]  # after `self`
    named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return {p.name: (hints.get(p.name, Any), p.default) for p in named}
