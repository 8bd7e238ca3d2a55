# SPDX-License-Identifier: Apache-2.0
"""
Drop the agentic-loop components into a pipeline of your own, wired by hand.

Your documents, your retriever, your chat generator: here an in-memory BM25 store with a few paragraphs, the
deterministic `BridgeEntityRouter` (swap in `AgenticRouter(chat_generator=OpenAIChatGenerator(...))` to let an
LLM route), and the packaged SmolLM2 writing the answer, so it runs offline:

    .venv/bin/python examples/own_pipeline.py
"""

from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic import (
    Answerer,
    BridgeEntityRouter,
    FallbackSynthesizer,
    LoopController,
    LoopResultBuilder,
    LoopStateJoiner,
)
from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator

DOCUMENTS = [
    (
        "Big Stone Gap (film)",
        (
            "Big Stone Gap is a 2014 American drama romantic comedy film written and directed by "
            "Adriana Trigiani and produced by Donna Gigliotti. It is based on Trigiani's 2000 novel of the same name."
        ),
    ),
    (
        "Adriana Trigiani",
        (
            "Adriana Trigiani is an Italian American best-selling author of sixteen books, television "
            "writer, film director, and entrepreneur based in Greenwich Village, New York City."
        ),
    ),
    ("Greenwich Village", "Greenwich Village is a neighborhood on the west side of Lower Manhattan, New York City."),
    ("Big Stone Gap, Virginia", "Big Stone Gap is a town in Wise County, Virginia, United States."),
]


def build() -> Pipeline:
    store = InMemoryDocumentStore()
    store.write_documents([Document(content=f"{t}\n{text}", meta={"title": t}) for t, text in DOCUMENTS])
    llm = EmbeddedChatGenerator()

    pipeline = Pipeline(max_runs_per_component=20)
    pipeline.add_component("controller", LoopController(max_iterations=4, chunk_cap=4))
    pipeline.add_component("router", BridgeEntityRouter(document_store=store, first_top_k=2, max_follow_ups=2))
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store))
    pipeline.add_component("answerer", Answerer(chat_generator=llm))
    pipeline.add_component("fallback", FallbackSynthesizer(chat_generator=llm))
    pipeline.add_component("finish", LoopStateJoiner())
    pipeline.add_component("result", LoopResultBuilder())

    pipeline.connect("controller.state", "router.state")
    pipeline.connect("controller.exhausted", "fallback.state")
    pipeline.connect("router.query", "retriever.query")
    pipeline.connect("router.filters", "retriever.filters")
    pipeline.connect("router.top_k", "retriever.top_k")
    pipeline.connect("router.loop", "controller.state")
    pipeline.connect("retriever.documents", "controller.documents")
    pipeline.connect("router.answer", "answerer.state")
    pipeline.connect("answerer.state", "controller.revised")  # reflect/draft turns come back here
    for end in ("router.finished", "answerer.finished", "fallback.finished", "controller.failed"):
        pipeline.connect(end, "finish.value")
    pipeline.connect("finish.value", "result.state")
    return pipeline


if __name__ == "__main__":
    result = build().run({"controller": {"query": "Where is the director of Big Stone Gap based?"}})["result"]
    for step in result["tool_history"]:
        print(step["iteration"], step["action"], step["query"] or "")
    print("Answer:", result["answer"], f"({result['terminated_by']})")
