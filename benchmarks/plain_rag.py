# SPDX-License-Identifier: Apache-2.0
"""
The baseline of `benchmarks/ask_startup.py`: a plain Haystack one-shot RAG script doing the least `ask`'s job needs.

Load the saved store, one BM25 search (Haystack's `InMemoryBM25Retriever`, 3 chunks of at most 700 characters: what
the embedded default's answer prompt holds for a question with two searches, `chunks_per_search: 2`), the same
embedded model (`EmbeddedChatGenerator`, SmolLM2-135M, its default generation settings) answering from them with
the embedded default's system and answer prompts, print the answer (token usage on stderr).

    python benchmarks/plain_rag.py QUESTION --store STORE.json
"""

import argparse
import sys

from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.components.generators.embedded_chat_generator import EmbeddedChatGenerator

#: The embedded default's answer prompts (`pipelines/agentic_rag_embedded.yml`, `answerer`).
SYSTEM = "You answer questions from documents. Give the shortest possible answer, a few words, no explanation."
PROMPT = """\
Documents:
{chunks}

Question: {question}
Short answer:"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question")
    parser.add_argument("--store", required=True)
    args = parser.parse_args()
    store = InMemoryDocumentStore.load_from_disk(args.store)
    documents = InMemoryBM25Retriever(store, top_k=3).run(query=args.question)["documents"]
    chunks = "\n\n".join(f"[{i}] {d.content[:700]}" for i, d in enumerate(documents, 1))
    llm = EmbeddedChatGenerator()
    llm.warm_up()
    messages = [
        ChatMessage.from_system(SYSTEM),
        ChatMessage.from_user(PROMPT.format(chunks=chunks, question=args.question)),
    ]
    reply = llm.run(messages=messages)["replies"][0]
    print(reply.text)
    print(f"usage: {reply.meta.get('usage')}", file=sys.stderr)


if __name__ == "__main__":
    main()
