# SPDX-License-Identifier: Apache-2.0
"""
The baseline of `benchmarks/ask_startup.py`: a plain Haystack one-shot RAG script doing the least `ask`'s job needs.

Load the saved store, one BM25 search (Haystack's `InMemoryBM25Retriever`, 6 chunks: as many as `ask`'s answer
prompt holds), the same embedded model (`EmbeddedChatGenerator`, SmolLM2-135M, its default generation settings)
answering from them with the Answerer's prompt, print the answer.

    python benchmarks/plain_rag.py QUESTION --store STORE.json
"""

import argparse

from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator

PROMPT = """\
Answer the question using only the context. Reply with a short answer (a name, place, date or phrase).

Context:
{chunks}

Question: {question}
Answer:"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question")
    parser.add_argument("--store", required=True)
    args = parser.parse_args()
    store = InMemoryDocumentStore.load_from_disk(args.store)
    documents = InMemoryBM25Retriever(store, top_k=6).run(query=args.question)["documents"]
    chunks = "\n\n".join(f"[{i}] {d.content[:1200]}" for i, d in enumerate(documents, 1))
    llm = EmbeddedChatGenerator()
    llm.warm_up()
    reply = llm.run(messages=[ChatMessage.from_user(PROMPT.format(chunks=chunks, question=args.question))])
    print(reply["replies"][0].text)


if __name__ == "__main__":
    main()
