# SPDX-License-Identifier: Apache-2.0
"""Record real tools-mode controller replies (content + native tool calls) for the text-tool-call recovery tests.

Run from the repository root:
`PYTHONPATH=. python tests/data/text_tool_calls/record.py MODEL.gguf OUT.json [N_QUESTIONS [TURNS [FIRST]]]`.
Starts llama.cpp in this process (xllamacpp, n_ctx 4096, Jinja template, 2 threads), and for N questions (from the
FIRST, 0-based) of the shared HotpotQA sample sends AgenticRouter's tools-mode prompt once or twice (TURNS, default
2): turn 1 (the question only) and turn 2 (after the search recovered from turn 1, else one for the question, that
returned the question's gold paragraphs and distractors). max_tokens 256, temperature 0. Replies are written as they
come.
"""

import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path

from haystack import Document
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.utils import Secret

from haystack_agentic import AgenticRouter, LoopController
from haystack_agentic.llm.llamacpp_server import LlamaCppServer
from haystack_agentic.llm.text_tool_calls import call_text, recover_tool_calls

DATA = Path("/work/shared/data/hotpotqa_dev_sample.jsonl")


def sha256_prefix(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def documents(row: dict) -> list[Document]:
    gold = {title for title, _ in row["supporting_facts"]}
    paragraphs = [(title, "".join(sentences)) for title, sentences in row["context"]]
    ordered = [p for p in paragraphs if p[0] in gold] + [p for p in paragraphs if p[0] not in gold]
    return [Document(content=text, meta={"title": title}) for title, text in ordered[:5]]


def reply_record(reply: ChatMessage) -> dict:
    return {
        "content": reply.text,
        "tool_calls": [{"name": c.tool_name, "arguments": c.arguments} for c in reply.tool_calls],
        "finish_reason": (reply.meta or {}).get("finish_reason"),
    }


def main() -> None:
    model, out = Path(sys.argv[1]), Path(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    turns = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    first = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    rows = [json.loads(line) for line in DATA.read_text().splitlines()[first : first + count]]
    meta = {
        "model": model.name,
        "sha256_prefix": sha256_prefix(model),
        "recorded": dt.datetime.now(dt.UTC).date().isoformat(),
        "max_tokens": 256,
        "temperature": 0.0,
        "n_ctx": 4096,
        "threads": 2,
        "data": DATA.name,
        "first": first,
    }
    server = LlamaCppServer(model, n_ctx=4096, threads=2)
    records: list[dict] = []

    def record(row: dict, turn: int, reply: ChatMessage, seconds: float) -> None:
        records.append(
            {
                "id": row["id"],
                "turn": turn,
                "question": row["question"],
                "seconds": round(seconds, 1),
                **reply_record(reply),
            }
        )
        out.write_text(json.dumps({"meta": meta, "replies": records}, indent=1, ensure_ascii=False) + "\n")

    with server:
        generator = OpenAIChatGenerator(
            api_key=Secret.from_token("none"),
            model=server.model_name,
            api_base_url=server.base_url,
            timeout=3600,
            max_retries=0,
            generation_kwargs={"max_tokens": 256, "temperature": 0.0},
        )
        router = AgenticRouter(chat_generator=generator, mode="tools")
        controller = LoopController()
        for row in rows:
            state = controller.run(query=row["question"])["state"]
            _, messages, tools = router._prepare(state)
            started = time.monotonic()
            reply1 = generator.run(messages=messages, tools=tools)["replies"][0]
            record(row, 1, reply1, time.monotonic() - started)
            if turns < 2:
                continue
            # Turn 2 as the router sends it: the model's own text with the search recovered from it, else a search for
            # the question in the native form the router writes (the call, also as its JSON text).
            recovered = recover_tool_calls(reply1.text, tools, id_prefix="text-call-1")
            recovered = [c for c in recovered if c.tool_name == "search"]
            if recovered and not reply1.tool_calls:
                call, assistant = recovered[0], ChatMessage.from_assistant(text=reply1.text, tool_calls=recovered[:1])
            else:
                call = ToolCall(tool_name="search", arguments={"query": row["question"]}, id="call_1")
                assistant = ChatMessage.from_assistant(text=call_text([call]), tool_calls=[call])
            result = controller.format_search_result(call.arguments["query"], documents(row))
            second_messages = [*messages, assistant, ChatMessage.from_tool(result, origin=call)]
            started = time.monotonic()
            second = generator.run(messages=second_messages, tools=tools)["replies"][0]
            record(row, 2, second, time.monotonic() - started)
            print(json.dumps(records[-2:])[:600], flush=True)


if __name__ == "__main__":
    main()
