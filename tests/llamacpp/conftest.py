"""A real llama.cpp server (xllamacpp) with the packaged SmolLM2-135M GGUF, started once for these tests."""

from collections.abc import Iterator

import pytest

pytest.importorskip("xllamacpp", reason='needs the llamacpp extra: pip install "haystack-agentic[llamacpp]"')

from haystack_agentic.testing.llamacpp_server import MODEL_ALIAS, LlamaCppServer  # noqa: E402


@pytest.fixture(scope="session")
def llamacpp() -> Iterator[LlamaCppServer]:
    """The running server (base URL `llamacpp.base_url`, model name `MODEL_ALIAS`); stopped after the session."""
    try:
        server = LlamaCppServer(n_ctx=4096, threads=2)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with server:
        yield server


@pytest.fixture
def llamacpp_generator(llamacpp: LlamaCppServer):
    """A factory of Haystack `OpenAIChatGenerator`s on the server (`max_tokens` small: CI runs on 2 cores)."""
    from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: PLC0415
    from haystack.utils import Secret  # noqa: PLC0415

    def make(max_tokens: int = 48, **kwargs):
        return OpenAIChatGenerator(
            model=MODEL_ALIAS, api_base_url=llamacpp.base_url, api_key=Secret.from_token("none"), max_retries=0,
            timeout=60.0, generation_kwargs={"max_tokens": max_tokens, "temperature": 0.0, **kwargs},
        )  # fmt: skip

    return make
