# SPDX-License-Identifier: Apache-2.0
"""
Throughput and latency of the loop served by hayhooks, under concurrent questions, against the ideal and against
Haystack's own `Agent` served the same way.

Two servers, each with one worker on 127.0.0.1 (a free port), over the same store (every paragraph of the shipped
HotpotQA sample, `SparseBM25DocumentStore`), driven by the same `ScriptedChatGenerator` (search the question,
then answer; `--latency` seconds per call):
- ours: `python -m haystack_agentic.cli.serve` with the loop pipeline as the package builds it
  (`build_loop_pipeline`: AgenticRouter in tools mode, the packaged `SafeRetriever` + BM25 retriever, top_k 5;
  no evidence check), `POST /scripted/run`;
- Agent: `hayhooks run` with a pipeline wrapper (written to a temp dir) around `haystack.components.agents.Agent`,
  the same retriever as a `ComponentTool` named `search`, answering with a text reply (an Agent's exit),
  `run_api_async` awaiting `Agent.run_async`, `POST /agent/run`.
Both get the same environment (hayhooks tracing off, its span buffer off). For each concurrency level it sends
`--requests` questions (at least `concurrency`; at most `concurrency` in flight) to one server, then the same to
the other (the order alternating level by level, so load from other processes hits both alike), and prints
requests per second, median and p95 latency, the wall time of the level against the ideal (LLM calls per
question x latency x requests / concurrency: no queuing, no overhead), the server's CPU time per question
(user + system, from psutil), and the ratio of our throughput to the Agent's. `--ceiling` adds a zero-latency
level (`--ceiling-concurrency`, default 64; the requests/s ceiling) for both.

    python benchmarks/serve_throughput.py [--latency 0.2] [--levels 1,8,64,256] [--requests 64] [--ceiling]
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import corpus_store
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.types import DuplicatePolicy
from scripted_chat_generator import ScriptedChatGenerator

from haystack_agentic import AgenticRouter, LoopController, build_loop_pipeline
from haystack_agentic.components.preprocessors.sentence_span_annotator import SentenceSpanAnnotator
from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from haystack_agentic.grounding.markers import strip_markers

LLM_CALLS_PER_QUESTION = 2  # search, answer
TARGET = 1.15  # wall of 64 concurrent questions / ideal
REPO = Path(__file__).resolve().parents[1]
#: The servers import this checkout's package (a worktree), not whichever one is installed in the venv, and the
#: scripted LLM of the tests.
PYTHONPATH = os.pathsep.join([str(REPO), str(REPO / "tests"), *filter(None, [os.environ.get("PYTHONPATH")])])
SERVER_ENV = {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "HAYHOOKS_TRACING_ENABLED": "false",
    "HAYHOOKS_TRACING_INCLUDE_HAYSTACK_SPANS": "false",  # what `serve` turns off itself; the Agent gets it too
    "HAYHOOKS_LOG_LEVEL": "WARNING",
    "PYTHONPATH": PYTHONPATH,
    # the scripted LLM in the served YAML: ours to trust (serve trusts no module the package does not ship)
    "HAYSTACK_DESERIALIZATION_ALLOWLIST": ScriptedChatGenerator.__module__,
}

#: The `hayhooks` command (its console entry point; `python -m hayhooks` does nothing in hayhooks 2.1).
HAYHOOKS_CLI = "from hayhooks.cli import hayhooks_cli; hayhooks_cli()"

#: Runs a server's command under cProfile, one profiler per thread on that thread's CPU clock (the served loop runs
#: in a thread of its own, which a main-thread profile does not see), recording between SIGUSR1 (the main thread's
#: starts, the other threads' are cleared) and SIGUSR2, which dumps all threads' profiles merged to the file named by
#: the first argument (`--profile`).
PROFILED = """\
import cProfile, pstats, runpy, signal, sys, threading, time
out, kind, target = sys.argv[1:4]
sys.argv = [target, *sys.argv[4:]]
profiles = []

def start(*_):
    profile = cProfile.Profile(time.thread_time)
    profiles.append(profile)
    profile.enable()  # replaces this hook in the new thread

class Snapshot:  # what pstats.Stats loads, read without disabling a profiler that runs in another thread
    def __init__(self, profile):
        profile.snapshot_stats()
        self.stats = profile.stats
    def create_stats(self):
        pass

def dump(*_):
    stats = pstats.Stats(Snapshot(profiles[0]))
    for profile in profiles[1:]:
        stats.add(Snapshot(profile))
    stats.dump_stats(out)

def begin(*_):
    for profile in profiles:  # the threads' (started with their thread): what they recorded so far is dropped
        profile.clear()
    main.enable()

main = cProfile.Profile(time.thread_time)
profiles.append(main)
threading.setprofile(start)
signal.signal(signal.SIGUSR1, begin)
signal.signal(signal.SIGUSR2, dump)
if kind == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(target)
"""

#: The Agent's scripted LLM: search the question, then answer (the loop's two turns, `scripted_loop_yaml`).
AGENT_SCRIPT = [
    {"template": True, "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}]},
    {"template": True, "text": "Answer to: {{ question }}"},
]

#: hayhooks pipeline wrapper serving Haystack's Agent (formatted with the store file and the latency).
AGENT_WRAPPER = """\
from hayhooks import BasePipelineWrapper
from haystack.components.agents import Agent
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.tools import ComponentTool

from haystack_agentic.components.retrievers.safe_retriever import SafeRetriever
from haystack_agentic.document_stores.sparse_bm25_document_store import SparseBM25DocumentStore
from scripted_chat_generator import ScriptedChatGenerator

SCRIPT = {script!r}


class PipelineWrapper(BasePipelineWrapper):
    def setup(self) -> None:
        store = SparseBM25DocumentStore.load_from_disk({store!r})
        retriever = SafeRetriever(InMemoryBM25Retriever(store, top_k=5))  # the loop's default top_k
        tool = ComponentTool(component=retriever, name="search", description="Search the corpus.")
        self.agent = Agent(chat_generator=ScriptedChatGenerator(SCRIPT, latency={latency!r}), tools=[tool])
        self.agent.warm_up()

    async def run_api_async(self, query: str) -> dict:
        result = await self.agent.run_async(messages=[ChatMessage.from_user(query.strip())])
        return {{"result": {{"answer": result["last_message"].text}}}}  # the same envelope as ours
"""


def scripted_loop_yaml(latency: float) -> str:
    """The served pipeline: the package's loop graph around a scripted LLM (search the question, then answer)."""
    script = [
        {"template": True, "tool_calls": [{"tool_name": "search", "arguments": {"query": "{{ question }}"}}]},
        {"template": True, "tool_calls": [{"tool_name": "answer", "arguments": {"text": "Answer to: {{ question }}"}}]},
    ]
    llm = ScriptedChatGenerator(script, latency=latency)
    retriever = SafeRetriever(InMemoryBM25Retriever(SparseBM25DocumentStore(index="serve-bench"), top_k=5))
    controller = LoopController(max_iterations=4)
    # Without the evidence check: the goal is the loop's and the server's overhead (the MiniLM check costs ~150 ms
    # CPU a question on its own, `benchmarks/evidence_check.py speed`, and refuses some scripted answers).
    pipeline = build_loop_pipeline(
        AgenticRouter(chat_generator=llm), retriever, controller=controller, check_evidence=False
    )
    pipeline.metadata = {"llm": f"scripted ({latency} s/call)", "policy": "search the question, then answer"}
    return pipeline.dumps()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(process: subprocess.Popen, url: str, log: Path, path: str = "/status", timeout: float = 180) -> None:
    """Poll `url + path` until it answers 200; raise with the log's tail if the process dies or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(log.read_text()[-3000:])
        try:
            if httpx.get(f"{url}{path}", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop(process)
    msg = f"the server did not start in {timeout:.0f} s: {log.read_text()[-3000:]}"
    raise RuntimeError(msg)


def stop(process: subprocess.Popen) -> None:
    """Stop a server we started (SIGTERM, then SIGKILL after 30 s)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _popen(command: list[str], workdir: Path, log_name: str, profile_dir: Path | None) -> subprocess.Popen:
    if profile_dir is not None:  # python -m X args / python -c CODE args -> the PROFILED launcher
        command = [command[0], "-c", PROFILED, str(profile_dir / f"{log_name[:-4]}.prof"), *command[1:]]
    log = open(workdir / log_name, "w")
    return subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **SERVER_ENV}, cwd=workdir
    )


def start_ours(workdir: Path, latency: float, workers: int, profile_dir: Path | None) -> tuple[subprocess.Popen, str]:
    """`haystack-agentic serve` with the scripted loop pipeline as `scripted`, over `workdir/store.json`."""
    yaml_path = workdir / "bench_loop.yml"
    yaml_path.write_text(scripted_loop_yaml(latency))
    port = free_port()
    process = _popen(
        [
            sys.executable,
            "-m",
            "haystack_agentic.cli.serve",
            "--port",
            str(port),
            "--mcp-port",
            "0",
            "--workers",
            str(workers),
            "--pipeline",
            f"scripted={yaml_path}",
            "--pipelines-dir",
            str(workdir / "p"),
            "--store",
            str(workdir / "store.json"),
        ],
        workdir,
        "ours.log",
        profile_dir,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(process, url, workdir / "ours.log")
    return process, url


def start_agent(workdir: Path, latency: float, workers: int, profile_dir: Path | None) -> tuple[subprocess.Popen, str]:
    """`hayhooks run` serving Haystack's Agent (`AGENT_WRAPPER`) as `agent`, over `workdir/store.json`."""
    folder = workdir / "agent_pipelines" / "agent"
    folder.mkdir(parents=True)
    (folder / "pipeline_wrapper.py").write_text(
        AGENT_WRAPPER.format(store=str(workdir / "store.json"), latency=latency, script=AGENT_SCRIPT)
    )
    port = free_port()
    process = _popen(
        [
            sys.executable,
            "-c",
            HAYHOOKS_CLI,
            "run",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--pipelines-dir",
            str(workdir / "agent_pipelines"),
            "--workers",
            str(workers),
        ],
        workdir,
        "agent.log",
        profile_dir,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_up(process, url, workdir / "agent.log")
    return process, url


class Connection:
    """
    One keep-alive HTTP/1.1 connection that POSTs JSON: a minimal client, so the load generator (on the same 2
    cores as the servers) costs little CPU and nothing that grows with the number of connections (httpx's
    connection pool scans all its connections per request: opening 256 took 2.4 s here, and its default keeps
    only 20 alive).
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def post(self, path: str, payload: dict) -> tuple[int, bytes]:
        """POST `payload` as JSON; returns `(status, body)`. Reconnects first if the server closed the connection."""
        if self.writer is None or self.writer.is_closing():
            await self.open()
        body = json.dumps(payload).encode()
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        status = int(head.split(" ", 2)[1])
        headers = dict(line.split(": ", 1) for line in head.split("\r\n")[1:] if ": " in line)
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        else:  # chunked
            parts = []
            while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            await self.reader.readexactly(2)
            data = b"".join(parts)
        if headers.get("connection") == "close":
            self.close()
        return status, data


async def _level(
    url: str, route: str, concurrency: int, requests: int, questions: list[str], server: psutil.Process
) -> dict:
    """`requests` questions through `concurrency` connections, each sending its next question when answered."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    latencies: list[float] = []
    failures = 0
    errors: list[str] = []
    queue = list(range(requests))[::-1]

    async def worker(connection: Connection) -> None:
        nonlocal failures
        while queue:
            question = questions[queue.pop() % len(questions)]
            start = time.perf_counter()
            try:
                status, body = await connection.post(route, {"query": question})
                answer = json.loads(body)["result"]["result"]["answer"] if status == 200 else None
                ok = _words(strip_markers(answer)) == _words(f"Answer to: {question}")  # ours cites: "... [1]?"
            except (OSError, asyncio.IncompleteReadError, ValueError, KeyError) as exc:
                connection.close()
                status, body, ok = 0, repr(exc).encode(), False
            latencies.append(time.perf_counter() - start)
            if not ok:
                failures += 1
                if len(errors) < 3:
                    errors.append(f"{status} {body[:300].decode(errors='replace')}")

    connections = [Connection(host, int(port)) for _ in range(concurrency)]
    await asyncio.gather(*(c.open() for c in connections))  # connected before the clock starts
    cpu = _cpu_seconds(server)
    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    wall = time.perf_counter() - start
    cpu = _cpu_seconds(server) - cpu
    for connection in connections:
        connection.close()
    latencies.sort()
    return {
        "concurrency": concurrency,
        "requests": requests,
        "throughput": requests / wall,
        "median": statistics.median(latencies),
        "p95": latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "failures": failures,
        "errors": errors,
        "wall": wall,
        "cpu_per_question": cpu / requests,
    }


def _words(text: str | None) -> list[str]:
    """`text` split at whitespace, "?" a word of its own: a citation marker moves a spaced "... year ?" to "year?"."""
    return (text or "").replace("?", " ? ").split()


def _cpu_seconds(server: psutil.Process) -> float:
    """User + system CPU seconds of the server process and its children (hayhooks workers)."""
    total = 0.0
    for process in [server, *server.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


SERVERS = {"ours": (start_ours, "/scripted/run"), "Agent": (start_agent, "/agent/run")}


def run_levels(
    latency: float,
    levels: list[int],
    requests: int,
    workers: int,
    store,
    questions: list[str],
    profile_dir: Path | None = None,
) -> dict[str, list[dict]]:
    """Start both servers, run every level on each (alternating which goes first), stop both; `profile_dir`: the
    servers run under cProfile, recording the levels, and write their profiles there (`ours.prof`, `agent.prof`)."""
    results: dict[str, list[dict]] = {name: [] for name in SERVERS}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        store.save_to_disk(str(workdir / "store.json"))
        started: dict[str, tuple[subprocess.Popen, str, psutil.Process]] = {}
        try:
            for name, (start, _) in SERVERS.items():
                process, url = start(workdir, latency, workers, profile_dir)
                started[name] = (process, url, psutil.Process(process.pid))
            for name, (_, route) in SERVERS.items():  # warm-up (builds the BM25 matrix, first-call caches)
                _, url, server = started[name]
                warm = asyncio.run(_level(url, route, 8, 16, questions, server))
                if warm["failures"]:
                    msg = f"{name}: warm-up failed: {warm['errors']}"
                    raise RuntimeError(msg)
            for i, concurrency in enumerate(levels):
                order = list(SERVERS) if i % 2 == 0 else list(reversed(SERVERS))
                for name in order:
                    process, url, server = started[name]
                    route = SERVERS[name][1]
                    if profile_dir is not None:
                        process.send_signal(signal.SIGUSR1)
                    results[name].append(
                        asyncio.run(_level(url, route, concurrency, max(requests, concurrency), questions, server))
                    )
                    if profile_dir is not None:
                        process.send_signal(signal.SIGUSR2)
        finally:
            for process, _, _ in started.values():
                stop(process)
    return results


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds per scripted LLM call (default 0.2).")
    parser.add_argument("--levels", default="1,8,64,256", help="Concurrency levels (default 1,8,64,256).")
    parser.add_argument("--requests", type=int, default=64, help="Requests per level, at least the level (default 64).")
    parser.add_argument("--ceiling", action="store_true", help="Also a zero-latency level at 64 concurrent.")
    parser.add_argument("--ceiling-requests", type=int, default=256, help="Requests of the zero-latency level.")
    parser.add_argument("--ceiling-concurrency", type=int, default=64, help="Concurrency of that level (default 64).")
    parser.add_argument("--workers", type=int, default=1, help="hayhooks worker processes (default 1).")
    parser.add_argument(
        "--split-at-serve",
        action="store_true",
        help="Store the chunks without their sentence spans (as a store not written by `index`).",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="Run the servers under cProfile (CPU clock) and write "
        "DIR/ours.prof and DIR/agent.prof of the zero-latency level (implies --ceiling).",
    )
    args = parser.parse_args()
    profile_dir = Path(args.profile).resolve() if args.profile else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
        args.ceiling = True
    store, _, rows = corpus_store(questions=100_000)  # every paragraph of the shipped sample
    if not args.split_at_serve:  # the chunks' sentence spans, as `haystack-agentic index` writes them
        spans = SentenceSpanAnnotator().run(documents=store.filter_documents())["documents"]
        store.write_documents(spans, policy=DuplicatePolicy.OVERWRITE)
    questions = [row["question"] for row in rows]
    ideal = LLM_CALLS_PER_QUESTION * args.latency
    print(f"machine: {os.cpu_count()} CPUs, load average {_load()} at start", flush=True)
    levels = [int(x) for x in args.levels.split(",")]
    results = run_levels(args.latency, levels, args.requests, args.workers, store, questions)
    print(
        f"hayhooks, {args.workers} worker(s), {store.count_documents()} paragraphs; scripted LLM "
        f"{args.latency:.3f} s/call, {LLM_CALLS_PER_QUESTION} calls/question "
        f"-> ideal latency {ideal:.3f} s"
    )
    print(
        f"{'server':>6} {'concurrency':>11} {'requests':>8} {'req/s':>8} {'median s':>9} {'p95 s':>7} {'wall s':>7} "
        f"{'ideal wall s':>12} {'wall/ideal':>10} {'CPU ms/q':>9} {'failures':>8} {'ours/Agent req/s':>16}"
    )
    for i, _ in enumerate(levels):
        agent = results["Agent"][i]
        for name in SERVERS:
            r = results[name][i]
            ideal_wall = ideal * -(-r["requests"] // r["concurrency"])
            ratio = f"{results['ours'][i]['throughput'] / agent['throughput']:>16.2f}" if name == "ours" else ""
            print(
                f"{name:>6} {r['concurrency']:>11} {r['requests']:>8} {r['throughput']:>8.1f} {r['median']:>9.3f} "
                f"{r['p95']:>7.3f} {r['wall']:>7.3f} {ideal_wall:>12.3f} {r['wall'] / ideal_wall:>10.2f} "
                f"{1000 * r['cpu_per_question']:>9.2f} {r['failures']:>8} {ratio}"
            )
            for error in r["errors"]:
                print(f"       {name} failure: {error}")
    print(f"load average {_load()} after the levels", flush=True)
    if args.ceiling:
        ceiling = run_levels(
            0.0, [args.ceiling_concurrency], args.ceiling_requests, args.workers, store, questions, profile_dir
        )
        for name in SERVERS:
            c = ceiling[name][0]
            print(
                f"zero-latency LLM, {name}, concurrency {c['concurrency']}, {c['requests']} requests: "
                f"{c['throughput']:.1f} req/s, "
                f"CPU {1000 * c['cpu_per_question']:.2f} ms/question, failures {c['failures']}"
            )
        print(f"ceiling ours/Agent: {ceiling['ours'][0]['throughput'] / ceiling['Agent'][0]['throughput']:.2f}")
        print(f"load average {_load()} at end")
    for i, concurrency in enumerate(levels):
        ours, agent = results["ours"][i], results["Agent"][i]
        if concurrency in (64, 256):
            ratio = ours["throughput"] / agent["throughput"]
            print(
                f"{concurrency} concurrent: ours/Agent throughput {ratio:.2f} (goal >= 1.0): "
                f"{'met' if ratio >= 1.0 else 'NOT met'}"
            )
        if concurrency == 64:
            ratio = ours["wall"] / (ideal * -(-ours["requests"] // 64))
            print(
                f"64 concurrent questions: wall/ideal {ratio:.2f} (target <= {TARGET}): "
                f"{'met' if ratio <= TARGET else 'NOT met'}"
            )


if __name__ == "__main__":
    main()
