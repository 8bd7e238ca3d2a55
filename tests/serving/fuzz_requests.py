# SPDX-License-Identifier: Apache-2.0
"""
Hypothesis strategies for malformed requests to every endpoint `haystack-agentic serve` exposes, and a sender
that records what the server answered.

A request is a `FuzzRequest` (method, path, headers, body bytes, port, and whether it streams). Bodies come from
JSON values of every type (non-finite numbers and lone UTF-16 surrogates included), serialised several ways
(ASCII-escaped JSON, UTF-8 with surrogates passed through, UTF-16, Latin-1, truncated JSON, raw bytes) with
several content types, and padded up to 5 MB. The endpoints: `/<name>/run` of every served pipeline,
`/v1/chat/completions` (streamed and not), the MCP server's streamable HTTP transport (`/mcp`) and SSE message
endpoint (`/messages/`), and the runtime-deployment routes (`/deploy_files`, `/deploy-yaml`, `/undeploy/<name>`).
"""

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import strategies as st

#: Pipelines the fuzzed server serves (see `test_fuzz.py`); deploy/undeploy requests never name them.
SERVED = ["scripted", "plain", "raising", "garbage"]
MCP_CORE_TOOLS = ["deploy_pipeline", "undeploy_pipeline", "get_pipeline_status", "get_all_pipeline_statuses"]
BIG_SIZES = [1_000, 100_000, 1_000_000, 5_000_000]


@dataclass
class FuzzRequest:
    """One generated request."""

    endpoint: str  # a label for the counts: "run", "chat", "chat-stream", "mcp", "deploy", ...
    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    mcp: bool = False  # sent to the MCP port
    stream: bool = False


@dataclass
class FuzzLog:
    """What the server answered: counts per status code (overall and per endpoint), and the 5xx / broken ones."""

    statuses: Counter = field(default_factory=Counter)
    by_endpoint: dict[str, Counter] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def record(self, request: FuzzRequest, status: int | str, detail: str = "") -> None:
        self.statuses[status] += 1
        self.by_endpoint.setdefault(request.endpoint, Counter())[status] += 1
        if not isinstance(status, int) or status >= 500:
            body = request.body[:200]
            self.failures.append(f"{status} {request.method} {request.path} body={body!r}: {detail[:300]}")

    @property
    def total(self) -> int:
        return sum(self.statuses.values())

    def summary(self) -> str:
        lines = [f"{self.total} requests; by status: {dict(sorted(self.statuses.items(), key=str))}"]
        for endpoint, counts in sorted(self.by_endpoint.items()):
            lines.append(f"  {endpoint}: {dict(sorted(counts.items(), key=str))}")
        return "\n".join(lines)


# --- values -------------------------------------------------------------------------------------------------

#: Any text, lone surrogates included (hypothesis leaves category Cs out unless asked).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)
special_text = st.sampled_from(["", " ", "\ud800", "x\udfffy", "\x00", "é" * 3, "{{ question }}", "\u202e", "null"])
texts = st.one_of(any_text, special_text)
special_numbers = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 10**30, -(2**63)])
#: Half the time a real question, so that requests also get past validation and run the loop.
questions = st.one_of(st.just("Where is Adriana Trigiani based?"), texts)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), special_numbers, texts
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=10
)


def _pad(draw: Any) -> str:
    """Usually nothing; sometimes a long string (1 kB .. 5 MB) of one character."""
    if draw(st.integers(0, 9)) != 0:
        return ""
    char = draw(st.sampled_from(["x", "é", " ", "\ud800", "{"]))
    return char * (draw(st.sampled_from(BIG_SIZES)) // len(json.dumps(char)))  # at most ~5 MB once serialised


# --- encodings ----------------------------------------------------------------------------------------------


@st.composite
def encoded(draw: Any, value: Any) -> tuple[bytes, dict[str, str]]:
    """Serialise `value` one of several ways, with a content type that may or may not match."""
    how = draw(st.sampled_from(["ascii-json"] * 4 + ["utf8-json"] * 3 + ["utf16", "latin1", "truncated", "raw"]))
    text = json.dumps(value, allow_nan=True, ensure_ascii=how == "ascii-json")
    if how in ("ascii-json", "utf8-json"):
        body = text.encode("utf-8", "surrogatepass")
    elif how == "utf16":
        body = text.encode("utf-16", "surrogatepass")
    elif how == "latin1":
        body = text.encode("latin-1", "replace")
    elif how == "truncated":
        body = text.encode("utf-8", "surrogatepass")[: draw(st.integers(0, max(0, len(text) - 1)))]
    else:
        body = draw(st.binary(max_size=200))
    content_type = draw(
        st.sampled_from(
            [
                *["application/json"] * 6,
                "application/json; charset=latin-1",
                "text/plain",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=xyz",
                None,
            ]
        )
    )
    return body, ({"content-type": content_type} if content_type else {})


# --- requests per endpoint ----------------------------------------------------------------------------------


@st.composite
def run_requests(draw: Any) -> FuzzRequest:
    name = draw(st.sampled_from([*SERVED, "nope"]))
    if draw(st.booleans()):
        body: Any = {"query": draw(st.one_of(json_values, questions)) if draw(st.booleans()) else "Where?" + _pad(draw)}
        if draw(st.booleans()):
            body["filters"] = draw(json_values)
        body.update(draw(st.dictionaries(texts, json_values, max_size=2)))
    else:
        body = draw(json_values)
    data, headers = draw(encoded(body))
    return FuzzRequest("run", "POST", f"/{name}/run", data, headers)


@st.composite
def chat_messages(draw: Any) -> Any:
    def part() -> Any:
        kind = draw(st.sampled_from(["text", "image_url", "other"]))
        if kind == "text":
            text = draw(st.one_of(questions, json_values))
            return {"type": draw(st.sampled_from(["text", "input_text"])), "text": text}
        return draw(json_values) if kind == "other" else {"type": "image_url", "image_url": {"url": "http://x"}}

    def message() -> Any:
        role = draw(st.sampled_from(["user", "user", "system", "assistant", "tool", None]))
        content = draw(st.sampled_from(["text", "parts", "value"]))
        if content == "text":
            value: Any = draw(questions) + _pad(draw)
        elif content == "parts":
            value = [part() for _ in range(draw(st.integers(0, 3)))]
        else:
            value = draw(json_values)
        return {"role": role, "content": value} if draw(st.integers(0, 5)) else draw(json_values)

    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(json_values)
    if kind <= 5:  # a conversation that ends with a user question: text, or content parts
        parts = [part() for _ in range(draw(st.integers(1, 3)))]
        question = draw(st.sampled_from([draw(questions) + _pad(draw), parts]))
        before = [{"role": "system", "content": "Be brief."}] if draw(st.booleans()) else []
        return [*before, {"role": "user", "content": question}]
    return [message() for _ in range(draw(st.integers(0, 3)))]


@st.composite
def chat_requests(draw: Any) -> FuzzRequest:
    stream = draw(st.booleans())
    body: Any = {
        "model": draw(st.sampled_from(SERVED)) if draw(st.integers(0, 5)) else draw(json_values),
        "messages": draw(chat_messages()),
        "stream": stream if draw(st.integers(0, 5)) else draw(json_values),
    }
    body.update(draw(st.dictionaries(st.sampled_from(["temperature", "max_tokens", "tools", "n", "x"]), json_values)))
    if draw(st.integers(0, 7)) == 0:
        body = draw(json_values)
    data, headers = draw(encoded(body))
    path = draw(st.sampled_from(["/v1/chat/completions", "/v1/chat/completions", "/chat/completions"]))
    return FuzzRequest("chat-stream" if stream is True else "chat", "POST", path, data, headers, stream=True)


@st.composite
def mcp_requests(draw: Any) -> FuzzRequest:
    method = draw(st.sampled_from(["initialize", "tools/list", "tools/call", "tools/call", "ping", "nope"]))
    params: Any = draw(json_values)
    if method == "tools/call" and draw(st.integers(0, 4)):
        names = [*SERVED, *MCP_CORE_TOOLS]
        arguments: Any = draw(json_values)
        if draw(st.booleans()):
            arguments = {"query": draw(st.one_of(questions, json_values)), "pipeline_name": "fz_" + draw(any_text)}
        if draw(st.integers(0, 3)) == 0:
            arguments = {
                "name": "fz_" + draw(any_text),
                "files": draw(json_values),
                "overwrite": False,
                "save_files": draw(json_values),
            }
        params = {
            "name": draw(st.sampled_from(names)) if draw(st.integers(0, 4)) else draw(any_text),
            "arguments": arguments,
        }
    elif method == "initialize" and draw(st.booleans()):
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}
    request_id = draw(st.integers(0, 10**6)) if draw(st.integers(0, 4)) else draw(json_values)
    envelope: Any = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if draw(st.integers(0, 3)):
        envelope["params"] = params
    if draw(st.integers(0, 6)) == 0:
        envelope = draw(json_values)
    data, headers = draw(encoded(envelope))
    accept = draw(st.sampled_from(["application/json, text/event-stream"] * 3 + ["application/json", "*/*", ""]))
    if accept:
        headers["accept"] = accept
    if draw(st.booleans()):
        path = "/mcp" if draw(st.integers(0, 9)) == 0 else "/mcp/"  # /mcp redirects (307) to /mcp/
        return FuzzRequest("mcp", "POST", path, data, headers, mcp=True, stream=True)
    session = draw(st.sampled_from(["", "?session_id=", "?session_id=0123456789abcdef0123456789abcdef", "?x=1"]))
    return FuzzRequest("mcp-sse-messages", "POST", f"/messages/{session}", data, headers, mcp=True)


@st.composite
def deploy_requests(draw: Any) -> FuzzRequest:
    route = draw(st.sampled_from(["/deploy_files", "/deploy-yaml", "/undeploy"]))
    name = "fz_" + draw(st.text(st.sampled_from("abc_-./ \\é\x00"), max_size=8)) if draw(st.integers(0, 5)) else ""
    if route == "/undeploy":
        return FuzzRequest("deploy", "POST", f"/undeploy/{quote(name or 'fz', safe='')}", b"", {})
    if route == "/deploy_files":
        wrappers = ["", "x = (", "import os\n", "class PipelineWrapper: pass\n"]
        files: Any = {"pipeline_wrapper.py": draw(st.sampled_from(wrappers))}
        files.update(draw(st.dictionaries(st.sampled_from(["../x.py", "a/b.txt", "/etc/x", "ok.txt", "\x00"]), texts)))
        body: Any = {
            "name": name,
            "files": files if draw(st.integers(0, 4)) else draw(json_values),
            "overwrite": False,
            "save_files": draw(st.booleans()),
        }
    else:
        source = draw(
            st.sampled_from(
                [
                    (
                        "components: {x: {type: os.system, init_parameters: {}}}\nconnections: []\n"
                        "inputs: {q: x.command}\noutputs: {r: x.r}\n"
                    ),
                    "components: {x: {type: builtins.eval}}\nconnections: []\n",
                    "components: [1, 2]\n",
                    ": : :\n",
                    "",
                    "inputs: {}\noutputs: {}\n",
                ]
            )
        )
        body = {
            "name": name,
            "source_code": source if draw(st.integers(0, 4)) else draw(json_values),
            "overwrite": False,
            "save_file": draw(st.booleans()),
        }
    if draw(st.integers(0, 6)) == 0:
        body = draw(json_values)
    data, headers = draw(encoded(body))
    return FuzzRequest("deploy", "POST", route, data, headers)


any_request = st.one_of(run_requests(), chat_requests(), mcp_requests(), deploy_requests())


# --- sending ------------------------------------------------------------------------------------------------


def send(client: httpx.Client, base_url: str, request: FuzzRequest, log: FuzzLog, auth: str | None) -> None:
    """Send one request and record its status (or `broken: <error>` when the connection failed mid-way)."""
    headers = dict(request.headers)
    if auth is not None:
        headers["authorization"] = auth
    try:
        with client.stream(request.method, base_url + request.path, content=request.body, headers=headers) as reply:
            text = (
                b"".join(reply.iter_bytes()).decode("utf-8", "replace")
                if request.stream
                else reply.read().decode("utf-8", "replace")
            )
            log.record(request, reply.status_code, text)
    except httpx.HTTPError as exc:
        log.record(request, f"broken: {type(exc).__name__}", str(exc))
