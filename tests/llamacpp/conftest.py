"""A real llama.cpp server (xllamacpp) with the packaged SmolLM2-135M GGUF, started once for these tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("xllamacpp", reason='needs the llamacpp extra: pip install "haystack-agentic[llamacpp]"')

from haystack_agentic.components.generators.embedded_chat_generator import GGUF_FILE_NAME
from haystack_agentic.llm.gguf_models import MODELS_DIR
from haystack_agentic.llm.llamacpp_server import LlamaCppServer

#: The packaged SmolLM2-135M GGUF, where `haystack-agentic install-model` puts it.
SMOLLM2_GGUF: Path = MODELS_DIR / GGUF_FILE_NAME


@pytest.fixture(scope="session")
def llamacpp() -> Iterator[LlamaCppServer]:
    """The running server (base URL `llamacpp.base_url`, model name `llamacpp.model_name`); stopped after the
    session."""
    if not SMOLLM2_GGUF.is_file():
        pytest.skip(f"no SmolLM2 GGUF at {SMOLLM2_GGUF} (run `haystack-agentic install-model`)")
    with LlamaCppServer(SMOLLM2_GGUF, n_ctx=4096, threads=2) as server:
        yield server


@pytest.fixture
def llamacpp_generator(llamacpp: LlamaCppServer):
    """A factory of Haystack `OpenAIChatGenerator`s on the server (`max_tokens` small: CI runs on 2 cores)."""
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    def make(max_tokens: int = 48, **kwargs):
        return OpenAIChatGenerator(
            model=llamacpp.model_name,
            api_base_url=llamacpp.base_url,
            api_key=Secret.from_token("none"),
            max_retries=0,
            timeout=60.0,
            generation_kwargs={"max_tokens": max_tokens, "temperature": 0.0, **kwargs},
        )

    return make
