# SPDX-License-Identifier: Apache-2.0
"""
The `Host` check of `serve`'s HTTP and MCP apps (`security.host_check`, Starlette's `TrustedHostMiddleware`): a
request passes only when its `Host` is a plain `host` or `host:port` naming an accepted host, whatever else an
attacker puts around it (user info, several colons, spaces, an empty port, brackets, paths, control characters).
"""

import asyncio
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from haystack_agentic.serving.security import ServeSecurity, check_host_name, host_check

SECURITY = ServeSecurity(bind_host="0.0.0.0", allowed_hosts=("rag.internal", "[fd00::1]"))
ACCEPTED = sorted(SECURITY.accepted_hosts())


def passes(*hosts: bytes) -> bool:
    """Whether a request with these `Host` header values reaches the app (else: the 400 it got)."""
    reached, sent = [], []

    async def app(scope, receive, send):
        reached.append(scope)

    async def receive():
        return {"type": "http.request", "body": b""}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/x",
        "raw_path": b"/x",
        "query_string": b"",
        "scheme": "http",
        "server": ("127.0.0.1", 1416),
        "headers": [(b"host", host) for host in hosts],
    }
    asyncio.run(host_check(app, SECURITY.accepted_hosts())(scope, receive, send))
    if not reached:
        assert sent[0]["status"] == 400 and b"host" in sent[1]["body"].lower()
    return bool(reached)


def expected(value: str) -> bool:
    """The rule: one of the accepted hosts, any case, then nothing or `:` and a port of digits."""
    match = re.fullmatch(r"(.+?)(?::([0-9]+))?", value, re.IGNORECASE | re.DOTALL)
    return match is not None and match[1].lower() in ACCEPTED


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1",
        "localhost",
        "LOCALHOST:1416",
        "[::1]",
        "[::1]:80",
        "0.0.0.0:1416",
        "rag.internal:8080",
        "[fd00::1]:1",
    ],
)
def test_a_plain_accepted_host_passes(value):
    assert passes(value.encode("latin-1"))


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1:1@evil.com",
        "user@127.0.0.1",
        "127.0.0.1@evil.com:80",
        "127.0.0.1:80:80",
        "localhost:",
        "::1",
        "127.0.0.1 :80",
        "127.0.0.1 evil.com",
        " 127.0.0.1",
        "[::1",
        "[::1]]",
        "[::1]x",
        "[127.0.0.1]",
        "",
        "127.0.0.1/evil",
        "127.0.0.1#@evil.com",
        "localhost\\@evil.com",
        "evil.com",
        "127.0.0.1.nip.io",
        "*",
    ],
)
def test_anything_else_is_refused(value):
    assert not passes(value.encode("latin-1"))


def test_a_request_without_host_is_refused():
    assert not passes()


@pytest.mark.parametrize("second", [b"evil.com", b"127.0.0.1"])
def test_two_host_headers_are_refused(second):
    assert not passes(b"127.0.0.1", second)


AROUND = st.text(alphabet=":@[] /\\#?%.\t\r\n0123456789abcdefEVIL", max_size=12)


@settings(max_examples=2000, deadline=None)
@given(host=st.sampled_from([*ACCEPTED, "evil.com", ""]), before=AROUND, after=AROUND)
@example(host="127.0.0.1", before="", after=":1@evil.com")
def test_hostile_host_values_pass_only_when_plain(host, before, after):
    value = before + host + after
    assert passes(value.encode("latin-1")) == expected(value)


@settings(max_examples=500, deadline=None)
@given(value=st.binary(max_size=30))
def test_any_host_value_follows_the_rule(value):
    assert passes(value) == expected(value.decode("latin-1"))


@pytest.mark.parametrize(
    "name",
    [
        "evil.com:80",
        "*",
        "*.evil.com",
        "user@evil.com",
        "evil.com/x",
        "a b",
        "",
        "[x]",
        "http://evil.com",
        "[::1]:80",
        "::1",
    ],
)
def test_allowed_host_names_are_plain(name):
    with pytest.raises(ValueError, match="--allowed-host"):
        check_host_name(name)


@pytest.mark.parametrize("name", ["rag.internal", "My-Host", "10.0.0.2", "[FD00::1]", "docker_service"])
def test_plain_allowed_host_names_are_accepted(name):
    assert check_host_name(name) == name.lower()
