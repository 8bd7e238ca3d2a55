# SPDX-License-Identifier: Apache-2.0
"""
Trust stays the user's (issue 39): importing the package, or loading with its loaders, leaves Haystack's own
`Pipeline.loads` refusing what it refuses in a plain process; the modules the loaders may allow do no I/O of their
own from their arguments.
"""

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from haystack.core.errors import DeserializationError

from haystack_agentic import ALLOWED_MODULES, allowed_modules_for
from haystack_agentic.loop_loading import TRUSTED_MODULES
from haystack_agentic.resources import pipeline_path, pipelines_dir

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = sorted(p.name for p in pipelines_dir().glob("*.yml"))

# --- the attacks: YAMLs that Haystack refuses in a plain process ---------------------------------------------

#: An Agent whose tool runs the package's CLI (any command: `index` a private file, `serve --host 0.0.0.0`, ...).
AGENT_RUNS_THE_CLI = """
components:
  agent:
    type: haystack.components.agents.agent.Agent
    init_parameters:
      chat_generator:
        type: haystack.components.generators.chat.openai.OpenAIChatGenerator
        init_parameters:
          api_key: {type: env_var, env_vars: [NO_SUCH_KEY_FOR_THIS_TEST], strict: false}
          api_base_url: http://127.0.0.1:9/v1
          model: any
      tools:
      - type: haystack.tools.tool.Tool
        data:
          name: index
          description: runs a command
          parameters: {type: object, properties: {argv: {type: array, items: {type: string}}}}
          function: haystack_agentic.cli.main.main
connections: []
"""
#: A Milvus store at a new file (Milvus Lite would create it while the YAML loads).
MILVUS_AT_A_NEW_FILE = """
components:
  retriever:
    type: milvus_haystack.milvus_embedding_retriever.MilvusEmbeddingRetriever
    init_parameters:
      document_store:
        type: milvus_haystack.document_store.MilvusDocumentStore
        init_parameters:
          connection_args: {{uri: {uri}}}
connections: []
"""
#: A Milvus store whose BM25 function is `subprocess.Popen`: `MilvusDocumentStore.from_dict` imports and calls it
#: itself, unchecked by Haystack's allow-list, once the YAML may name the Milvus store.
MILVUS_RUNS_A_COMMAND = """
components:
  retriever:
    type: milvus_haystack.milvus_embedding_retriever.MilvusEmbeddingRetriever
    init_parameters:
      document_store:
        type: milvus_haystack.document_store.MilvusDocumentStore
        init_parameters:
          connection_args: {{uri: {uri}}}
          builtin_function:
          - type: subprocess.Popen
            init_parameters: {{args: [touch, {marker}]}}
connections: []
"""
#: The package's scripted test LLM, which answers whatever its script says.
SCRIPTED_LLM = """
components:
  llm:
    type: scripted_chat_generator.ScriptedChatGenerator
    init_parameters: {script: [{text: hi}]}
connections: []
"""

#: What runs before the attacks: nothing, the import, then each of the package's loaders.
STAGES = {
    "plain": "",
    "import": "import haystack_agentic",
    "load_loop_pipeline": """
        from haystack_agentic import load_loop_pipeline
        pipeline = load_loop_pipeline("agentic_rag_embedded")
        pipeline.get_component("router").document_store  # the stores a loaded pipeline builds on first use
    """,
    "AgenticRAG.from_dict": """
        from haystack_agentic import AgenticRAG
        rag = AgenticRAG.from_dict(AgenticRAG("agentic_rag_embedded").to_dict())
        rag.pipeline.get_component("retriever").document_store
    """,
    "cli": """
        import haystack_agentic.cli.main  # every command's module
        from haystack_agentic.cli import ask, serve
        from haystack_agentic.pipelines.loop_builder import LoopOptions, build_loop
        build_loop(LoopOptions(pipeline="agentic_rag_embedded"))  # what `ask`, `chat` and the served wrapper load
    """,
}

ATTACKS = """
import json, os, re, sys
from haystack import Pipeline
outcomes = {}
for name, text in json.loads(sys.argv[1]).items():
    try:
        Pipeline.loads(text)
        outcomes[name] = "loaded"
    except Exception as exc:
        outcomes[name] = re.sub(" at 0x[0-9a-f]+", "", f"{type(exc).__name__}: {exc}")  # no object addresses
outcomes["environment"] = os.environ.get("HAYSTACK_DESERIALIZATION_ALLOWLIST")
print(json.dumps(outcomes))
"""


def _outcomes(stage: str, attacks: dict[str, str]) -> dict[str, str]:
    code = textwrap.dedent(STAGES[stage]) + ATTACKS
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAYSTACK_DESERIALIZATION")}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's package
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(attacks)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a fresh process per stage, each loading a packaged pipeline
def test_the_import_and_every_loader_leave_haystacks_refusals_as_in_a_plain_process(tmp_path):
    new_file = tmp_path / "created_by_loading.db"
    attacks = {
        "agent_runs_the_cli": AGENT_RUNS_THE_CLI,
        "milvus_at_a_new_file": MILVUS_AT_A_NEW_FILE.format(uri=new_file),
        "scripted_llm": SCRIPTED_LLM,
    }
    plain = _outcomes("plain", attacks)
    assert plain["environment"] is None
    assert "haystack_agentic.cli.main" in plain["agent_runs_the_cli"]
    assert "milvus_haystack" in plain["milvus_at_a_new_file"]
    assert "scripted_chat_generator" in plain["scripted_llm"]
    for name in attacks:
        assert plain[name].startswith("DeserializationError"), (name, plain[name])
    for stage in STAGES:
        if stage != "plain":
            assert _outcomes(stage, attacks) == plain, stage
    assert not new_file.exists()


def test_the_package_loaders_refuse_the_attacks_too(tmp_path, monkeypatch):
    from haystack_agentic.indexing.store_faults import StoreError
    from haystack_agentic.loop_loading import check_pipeline_stores, pipeline_from_dict

    for text, says in (
        (AGENT_RUNS_THE_CLI, "component 'agent' names haystack_agentic.cli.main.main, which is not on"),
        (SCRIPTED_LLM, "the pipeline names scripted_chat_generator, which is not on"),
    ):
        with pytest.raises(ValueError, match=r"Cannot load the pipeline attack.yml") as caught:
            pipeline_from_dict(yaml.safe_load(text), "attack.yml")
        assert isinstance(caught.value.__cause__, DeserializationError)
        message = str(caught.value)  # one line: what was refused and how to allow it, not the component's dict
        assert says in message and "HAYSTACK_DESERIALIZATION_ALLOWLIST" in message and "\n" not in message
    with monkeypatch.context() as patched:  # the advice works: the callable's module, allowed, loads
        patched.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "haystack_agentic.cli.main")
        assert pipeline_from_dict(yaml.safe_load(AGENT_RUNS_THE_CLI), "attack.yml").get_component("agent").tools
    # The Milvus store is the user's choice when the YAML names it, but loading never creates its database...
    new_file = tmp_path / "created_by_loading.db"
    data = yaml.safe_load(MILVUS_AT_A_NEW_FILE.format(uri=new_file))
    with pytest.raises(StoreError, match="no Milvus Lite database"):
        pipeline_from_dict(data, "attack.yml", must_exist=True)  # as `load_loop_pipeline`, `ask`, `serve` load
    assert not new_file.exists()
    # ...and a type the Milvus classes would import themselves is refused before anything is imported.
    marker = tmp_path / "command_ran"
    text = MILVUS_RUNS_A_COMMAND.format(uri=new_file, marker=marker)
    (tmp_path / "attack.yml").write_text(text, encoding="utf-8")
    for load in (
        lambda: pipeline_from_dict(yaml.safe_load(text), "attack.yml"),
        lambda: allowed_modules_for(text),
        lambda: check_pipeline_stores(tmp_path / "attack.yml"),
    ):
        with pytest.raises(ValueError, match=r"subprocess.Popen"):
            load()
    assert not marker.exists() and not new_file.exists()


def test_allowed_modules_for_names_exact_trusted_modules_only():
    assert all("*" not in m for m in TRUSTED_MODULES) and len(set(TRUSTED_MODULES)) == len(TRUSTED_MODULES)
    untrusted = tuple(f"haystack_agentic.{p}" for p in ("cli", "serving"))
    assert not any(m.startswith(untrusted) for m in TRUSTED_MODULES)
    assert all(m.startswith("haystack_agentic.") for m in TRUSTED_MODULES if m not in ALLOWED_MODULES)  # no test double
    assert set(ALLOWED_MODULES) <= set(TRUSTED_MODULES) and "pymilvus" not in TRUSTED_MODULES
    text = pipeline_path("agentic_rag_embedded").read_text(encoding="utf-8")
    allowed = allowed_modules_for(text)
    assert "haystack_agentic.components.loop.loop_controller" in allowed
    assert "haystack_agentic.dataclasses.loop_state" in allowed  # a `type_:` value
    assert "haystack_agentic.document_stores.sparse_bm25_document_store" in allowed  # nested in the retriever
    assert not any(m.startswith(("milvus", "pymilvus")) for m in allowed)  # third-party only when named
    milvus = allowed_modules_for(pipeline_path("agentic_rag_embedded_milvus").read_text(encoding="utf-8"))
    assert set(ALLOWED_MODULES) <= set(milvus)
    assert allowed_modules_for(AGENT_RUNS_THE_CLI) == allowed_modules_for(SCRIPTED_LLM) == []
    # a name under a trusted module's prefix is not that module
    assert allowed_modules_for({"type": "haystack_agentic.components.loop.loop_controller_x.C"}) == []
    with pytest.raises(ValueError, match="Cannot parse"):
        allowed_modules_for("a: [")
    assert allowed_modules_for("a: &a [*a, {type: haystack_agentic.dataclasses.loop_state.LoopState}]") == [
        "haystack_agentic.dataclasses.loop_state"
    ]  # a list that holds itself


@pytest.mark.parametrize("name", [n for n in PACKAGED if n.startswith("agentic_rag") and "milvus" not in n])
def test_each_packaged_loop_yaml_loads_with_its_allowed_modules(name, monkeypatch):
    from haystack import Pipeline

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = pipeline_path(name).read_text(encoding="utf-8")
    with pytest.raises(DeserializationError):
        Pipeline.loads(text)
    pipeline = Pipeline.loads(text, allowed_modules=allowed_modules_for(text))
    assert pipeline.get_component("retriever").document_store is not None  # built later, with what the load allowed


def test_the_loaders_trust_every_component_module_of_the_package():
    """A new component module must be added to `TRUSTED_MODULES` (after this file's I/O scan passes on it)."""
    components = ROOT / "haystack_agentic" / "components"
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in components.rglob("*.py")
        if not path.name.startswith("_")
    }
    assert modules <= set(TRUSTED_MODULES), sorted(modules - set(TRUSTED_MODULES))


# --- the modules the loaders may allow do no I/O from their arguments ----------------------------------------

#: Calls that run commands, touch files or open connections, by the called name.
IO_CALLS = {
    "open",
    "urlopen",
    "Popen",
    "system",
    "popen",
    "check_call",
    "check_output",
    "execv",
    "execve",
    "spawnv",
    "socket",
    "create_connection",
    "connect",
    "write_text",
    "write_bytes",
    "read_text",
    "read_bytes",
    "unlink",
    "rmdir",
    "rmtree",
    "makedirs",
    "mkdir",
    "touch",
    "chmod",
    "save_to_disk",
    "load_from_disk",
    "MilvusClient",
    "exec",
    "eval",
    "__import__",
    "import_module",
}
#: Calls that do I/O only on one of these modules (`subprocess.run`, `os.remove`, `requests.get`, ...).
IO_MODULE_CALLS = {"subprocess", "os", "shutil", "socket", "requests", "httpx", "urllib", "pathlib"}
#: (module, qualified name) of the callables that do I/O as a documented store operation, where the YAML's author
#: chose the store, each with the reason.
DOCUMENTED_STORE_OPERATIONS = {
    # InMemoryDocumentStore's file API (haystack.document_stores.in_memory has the same two methods)
    ("haystack_agentic.document_stores.sparse_bm25_document_store", "SparseBM25DocumentStore.save_to_disk"),
    ("haystack_agentic.document_stores.sparse_bm25_document_store", "SparseBM25DocumentStore.load_from_disk"),
    # the Milvus store connects to the `uri` its YAML names (allowed only for a YAML that names the Milvus store)
    ("milvus_haystack.document_store", "MilvusDocumentStore.__init__"),
    # these two import the type their YAML names (`builtin_function`, `reranker`) outside Haystack's allow-list:
    # `allowed_modules_for` refuses any type outside `loop_loading.MILVUS_SELF_IMPORTS` (tested above)
    ("milvus_haystack.document_store", "MilvusDocumentStore.from_dict"),
    ("milvus_haystack.milvus_embedding_retriever", "MilvusHybridRetriever.from_dict"),
}


def _callables(module) -> list[tuple[str, object]]:
    """Every function and class defined in `module`, and the functions, properties and static/class methods of
    those classes: `(qualified name, object)`."""
    found = []
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            found.append((name, obj))
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                for function in (
                    member.__func__ if isinstance(member, (staticmethod, classmethod)) else member,
                    *(getattr(member, f, None) for f in ("fget", "fset") if isinstance(member, property)),
                ):
                    if inspect.isfunction(function):
                        found.append((f"{name}.{attr}", function))
    return found


def _io_calls(function) -> list[str]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return []
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
        base = called.value.id if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name) else None
        if name in IO_CALLS or base in IO_MODULE_CALLS:
            calls.append(ast.unparse(node)[:100])
    return calls


def test_the_scan_finds_io():
    def writes(path, text):
        Path(path).write_text(text)

    def runs(argv):
        import subprocess as sp

        return subprocess.run(argv) or sp

    assert _io_calls(writes) and _io_calls(runs) and not _io_calls(_callables)


@pytest.mark.parametrize("module_name", TRUSTED_MODULES)
def test_no_callable_of_a_trusted_module_does_io_from_its_arguments(module_name):
    module = importlib.import_module(module_name)
    callables = _callables(module)
    assert callables, f"{module_name} defines nothing to scan"
    found = {
        qualname: calls
        for qualname, function in callables
        if (calls := _io_calls(function)) and (module_name, qualname) not in DOCUMENTED_STORE_OPERATIONS
    }
    assert not found, f"{module_name} does I/O where a YAML could call it: {found}"


def test_the_documented_store_operations_still_exist():
    for module_name, qualname in DOCUMENTED_STORE_OPERATIONS:
        assert module_name in TRUSTED_MODULES
        assert _io_calls(dict(_callables(importlib.import_module(module_name)))[qualname]), qualname


def test_load_loop_pipeline_takes_a_packaged_name():
    from haystack_agentic import load_loop_pipeline

    pipeline = load_loop_pipeline("agentic_rag_embedded")
    assert pipeline.get_component("controller") is not None
    with pytest.raises(FileNotFoundError, match="Known pipelines"):
        load_loop_pipeline("no_such_pipeline")
