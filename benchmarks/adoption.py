# SPDX-License-Identifier: Apache-2.0
"""
What a Haystack developer meets first, side by side with Haystack's own `Agent`: the install, the import, the first
answer, and the lines of code.

1. Builds a wheel of this checkout (`pip wheel --no-deps`), installs it **with no extras** into a fresh virtualenv
   (or `--venv` to reuse one), runs `pip check`, and runs the README's "own pipeline" Python block verbatim there,
   from a folder outside the source tree.
2. Import: wall time and peak RSS of `from haystack_agentic import AgenticRAG` against
   `from haystack.components.agents import Agent`, each in a fresh interpreter of that virtualenv (median of
   `--trials`, the two alternating). Goal: <= 1.1x both.
3. First answer: process start to the answer on stdout of the same scripted run over 20 documents of the shipped
   HotpotQA sample (an in-memory BM25 store, one search, then the answer), ours through `AgenticRAG` (with its
   default evidence check, which runs lexically without the embeddings extra) and `Agent` with the retriever as a
   `ComponentTool`; both use the same tiny scripted chat generator (written next to the scripts, no package of
   ours). Goal: <= 1.2x Agent's. The process' exit is printed too: after a `Pipeline.run` (ours runs one, a bare
   `Agent.run` does not) Haystack's telemetry sends its event at exit, which waits for the network (offline here,
   about 1 s; `HAYSTACK_TELEMETRY_ENABLED=False` turns it off).
4. Lines of user code of the two scripts (not blank, not comments).

    python benchmarks/adoption.py [--trials 5] [--venv /tmp/adoption-venv]
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "data" / "hotpotqa_dev_sample.jsonl"
IMPORT_GOAL, ANSWER_GOAL = 1.1, 1.2

SCRIPTED_LLM = '''\
from haystack import component
from haystack.dataclasses import ChatMessage, ToolCall


@component
class ScriptedLLM:
    """Searches once, then answers (with the `answer` tool when it is offered, else in text)."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage], tools=None, **kwargs):
        if not any(m.tool_call_result for m in messages):
            call = ToolCall(tool_name="search", arguments={"query": "Big Stone Gap director"}, id="c1")
            return {"replies": [ChatMessage.from_assistant(tool_calls=[call])]}
        if any(t.name == "answer" for t in tools or []):
            call = ToolCall(tool_name="answer", arguments={"text": "Adriana Trigiani"}, id="c2")
            return {"replies": [ChatMessage.from_assistant(tool_calls=[call])]}
        return {"replies": [ChatMessage.from_assistant("Adriana Trigiani")]}
'''

OURS = """\
import json

from haystack import Document
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic import AgenticRAG, AgenticRouter, build_loop_pipeline
from scripted_llm import ScriptedLLM

store = InMemoryDocumentStore()
store.write_documents([Document.from_dict(d) for d in json.load(open("docs.json"))])
rag = AgenticRAG(pipeline=build_loop_pipeline(AgenticRouter(chat_generator=ScriptedLLM()), InMemoryBM25Retriever(store)))
print(rag.run(query="Who directed Big Stone Gap?")["answer"])
"""

AGENT = """\
import json

from haystack import Document
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.tools import ComponentTool

from scripted_llm import ScriptedLLM

store = InMemoryDocumentStore()
store.write_documents([Document.from_dict(d) for d in json.load(open("docs.json"))])
search = ComponentTool(component=InMemoryBM25Retriever(store), name="search", description="Search the documents.")
agent = Agent(chat_generator=ScriptedLLM(), tools=[search])
print(agent.run(messages=[ChatMessage.from_user("Who directed Big Stone Gap?")])["last_message"].text)
"""

IMPORT = (
    "import resource, time; t = time.perf_counter(); {statement}; "
    "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
)


def run(command: list[str], cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, command))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def fresh_venv(folder: Path, wheel_dir: Path) -> tuple[Path, float]:
    """A new virtualenv with the wheel of this checkout and no extras; returns its python and the install seconds."""
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheel_dir), str(ROOT)])
    wheel = next(wheel_dir.glob("haystack_agentic-*.whl"))
    run([sys.executable, "-m", "venv", str(folder)])
    python = folder / "bin" / "python"
    start = time.perf_counter()
    run([str(python), "-m", "pip", "install", "--quiet", str(wheel)])
    return python, time.perf_counter() - start


def twenty_documents() -> list[dict]:
    """The 20 paragraphs of the first two sample questions that include "Big Stone Gap" (10 each)."""
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    picked = [r for r in rows if "Big Stone Gap" in r["question"]][:1] + rows[:1]
    documents = []
    for row in picked:
        for title, sentences in row["context"]:
            documents.append({"content": f"{title}. {''.join(sentences)}", "meta": {"title": title}})
    return documents[:20]


def time_to_answer(python: Path, script: Path) -> tuple[float, float]:
    """Seconds from process start to the answer line on its stdout, and to the process' exit."""
    start = time.perf_counter()
    process = subprocess.Popen(
        [str(python), script.name], cwd=script.parent, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    line = process.stdout.readline()
    answered = time.perf_counter() - start
    process.wait(timeout=300)
    if "Adriana Trigiani" not in line or process.returncode != 0:
        sys.exit(f"{script.name} printed {line!r} and exited with {process.returncode}")
    return answered, time.perf_counter() - start


def readme_block() -> str:
    """The README's "own pipeline" block: the one that builds an `AgenticRAG` into a pipeline of its own."""
    blocks = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S | re.M)
    return next(b for b in blocks if "AgenticRAG(pipeline=loop)" in b)


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument(
        "--venv", type=Path, help="Reuse this virtualenv (made by an earlier run) instead of a new one."
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if args.venv and (args.venv / "bin" / "python").exists():
            python, install = args.venv / "bin" / "python", None
        else:
            python, install = fresh_venv(args.venv or work / "venv", work / "wheel")
        check = run([str(python), "-m", "pip", "check"]).stdout.strip()
        extras = run(
            [
                str(python),
                "-c",
                (
                    "import importlib.util as u; print([m for m in ('torch', 'transformers', "
                    "'sentence_transformers', 'pymilvus', 'hayhooks') if u.find_spec(m)])"
                ),
            ]
        ).stdout.strip()
        (work / "readme.py").write_text(readme_block(), encoding="utf-8")
        readme = run([str(python), "readme.py"], cwd=work).stdout.strip().splitlines()[0]

        (work / "scripted_llm.py").write_text(SCRIPTED_LLM, encoding="utf-8")
        (work / "docs.json").write_text(json.dumps(twenty_documents()), encoding="utf-8")
        (work / "ours.py").write_text(OURS, encoding="utf-8")
        (work / "agent.py").write_text(AGENT, encoding="utf-8")

        imports: dict[str, list[tuple[float, float]]] = {"ours": [], "agent": []}
        answers: dict[str, list[float]] = {"ours": [], "agent": []}
        exits: dict[str, list[float]] = {"ours": [], "agent": []}
        statements = {
            "ours": "from haystack_agentic import AgenticRAG",
            "agent": "from haystack.components.agents import Agent",
        }
        for trial in range(args.trials):
            for side in ("ours", "agent") if trial % 2 == 0 else ("agent", "ours"):
                out = run([str(python), "-c", IMPORT.format(statement=statements[side])], cwd=work).stdout.split()
                imports[side].append((float(out[0]), int(out[1]) / 1024))
                answered, exited = time_to_answer(python, work / f"{side}.py")
                answers[side].append(answered)
                exits[side].append(exited)

    def median(values):
        return statistics.median(values)

    seconds = {side: median([t for t, _ in imports[side]]) for side in imports}
    rss = {side: median([m for _, m in imports[side]]) for side in imports}
    first = {side: median(answers[side]) for side in answers}
    exit_ = {side: median(exits[side]) for side in exits}
    print(f"wheel, no extras: installed in {install:.1f} s" if install else "wheel, no extras: reused virtualenv")
    print(f"  pip check: {check}; heavy modules importable: {extras}")
    print(f"  README 'own pipeline' block, verbatim, outside the source tree: {readme!r}")
    print(f"median of {args.trials} fresh processes each      ours      Agent     ratio   goal")
    print(
        f"  import time (s)                        {seconds['ours']:8.2f}  {seconds['agent']:8.2f}  "
        f"{seconds['ours'] / seconds['agent']:6.2f}x  <= {IMPORT_GOAL}x"
    )
    print(
        f"  import peak RSS (MB)                   {rss['ours']:8.0f}  {rss['agent']:8.0f}  "
        f"{rss['ours'] / rss['agent']:6.2f}x  <= {IMPORT_GOAL}x"
    )
    print(
        f"  first answer, process start to print (s) {first['ours']:6.2f}  {first['agent']:8.2f}  "
        f"{first['ours'] / first['agent']:6.2f}x  <= {ANSWER_GOAL}x"
    )
    print(
        f"  process exit (s)                       {exit_['ours']:8.2f}  {exit_['agent']:8.2f}  "
        f"{exit_['ours'] / exit_['agent']:6.2f}x  (after the answer: Haystack's telemetry flush of a Pipeline.run)"
    )
    print(f"  lines of user code                     {code_lines(OURS):8d}  {code_lines(AGENT):8d}")


if __name__ == "__main__":
    main()
