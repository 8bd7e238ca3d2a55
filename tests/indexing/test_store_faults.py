# SPDX-License-Identifier: Apache-2.0
"""
Store faults on the command line: a damaged Milvus Lite database (corrupt collection schema.json, missing data
files, a collection manifest.json that is missing or does not parse: fewer documents than the package recorded),
a path that is a file of random bytes, an unreadable in-memory store file. Each is one line on stderr naming
the path and what to do, exit code 2, no traceback and no library log dump; `--debug` shows the traceback.

The CLI runs in a subprocess, as a user runs it, so that whatever pymilvus or Milvus Lite print reaches the test.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import load_yaml
from haystack import Document

ROOT = Path(__file__).parents[2]
COLLECTION = "haystack_agentic"


def run_cli(*args: object, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "haystack_agentic.cli.main", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line(done: subprocess.CompletedProcess, *needles: str) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2, err
    assert "Traceback" not in err and "init_parameters" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> Path:
    """A Milvus Lite database with a collection of 384-d documents, closed and released."""
    from milvus_lite import server_manager_instance

    from haystack_agentic.document_stores import milvus_support
    from haystack_agentic.indexing.document_stores import milvus_document_store

    path = tmp_path_factory.mktemp("milvus") / "good.db"
    store = milvus_document_store(str(path))
    store.write_documents(
        [Document(content=f"Paragraph {i} about Fnordville.", embedding=[0.1] * 384) for i in range(3)]
    )
    milvus_support.flush(store)  # records the count (3), as the package's writes do
    store.client.close()
    server_manager_instance.release_server(str(path))
    return path


def damaged(good_db: Path, tmp_path: Path, kind: str) -> Path:
    from haystack_agentic.document_stores.document_counts import record_path

    path = tmp_path / f"{kind}.db"
    if kind == "random-bytes":
        path.write_bytes(os.urandom(4096))
        return path
    shutil.copytree(good_db, path)
    shutil.copyfile(record_path(good_db), record_path(path))  # the count the package recorded after its write
    collection = path / "collections" / COLLECTION
    if kind == "corrupt-schema":
        (collection / "schema.json").write_text("{not json", encoding="utf-8")
    elif kind == "corrupt-manifest":  # Milvus Lite would open manifest.json.prev, which lists no data file yet
        (collection / "manifest.json").write_text('{"partitions": {"_default": {"data_fi', encoding="utf-8")
    elif kind == "missing-manifest":
        (collection / "manifest.json").unlink()
    elif kind == "missing-data":
        data_files = list(collection.rglob("*.parquet"))
        assert data_files
        for file in data_files:
            file.unlink()
    return path


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "town.txt").write_text("The mayor of Fnordville is Zorblax Quintessa.", encoding="utf-8")
    return folder


#: Lost documents: Milvus Lite opens the database (falling back to `manifest.json.prev`, or without the data files)
#: with fewer documents than the package recorded after its last write.
LOST = ("is damaged", "holds 0 documents, 3 when haystack-agentic last wrote it", ".db.counts.json records")
KINDS = {
    "corrupt-schema": ("schema.json", "damaged"),
    "random-bytes": ("not a Milvus Lite database",),
    "missing-data": LOST,
    "corrupt-manifest": LOST,
    "missing-manifest": LOST,
}
#: Faults refused before Milvus Lite has opened the database (it cleans up what it opens: orphaned files, manifests).
REFUSED_UNOPENED = ("corrupt-schema", "random-bytes")


@pytest.mark.integration
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_milvus_lite_faults_are_one_line_for_ask_and_index(good_db, tmp_path, docs, kind):
    path = damaged(good_db, tmp_path, kind)
    before = sorted(p.relative_to(path) for p in path.rglob("*")) if path.is_dir() else path.read_bytes()
    manifests = {p: p.read_bytes() for p in path.rglob("manifest.json*")} if path.is_dir() else {}
    ask = run_cli("ask", "Who is the mayor of Fnordville?", "--llm", "embedded", "--backend", "milvus", "--uri", path)
    assert_one_line(ask, str(path), *KINDS[kind])
    index = run_cli("index", docs, "--backend", "milvus", "--uri", path, "--quiet")
    assert_one_line(index, str(path), *KINDS[kind])
    if kind in REFUSED_UNOPENED:
        after = sorted(p.relative_to(path) for p in path.rglob("*")) if path.is_dir() else path.read_bytes()
        assert before == after  # nothing was written into the damaged database
        assert manifests == ({p: p.read_bytes() for p in path.rglob("manifest.json*")} if path.is_dir() else {})


@pytest.mark.integration
def test_debug_shows_the_traceback(good_db, tmp_path, docs):
    path = damaged(good_db, tmp_path, "corrupt-schema")
    done = run_cli("--debug", "index", docs, "--backend", "milvus", "--uri", path, "--quiet")
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: ")
    # after the command too
    done = run_cli("ask", "q?", "--llm", "embedded", "--backend", "milvus", "--uri", tmp_path / "none.db", "--debug")
    assert done.returncode == 2 and "Traceback (most recent call last)" in done.stderr


@pytest.mark.integration
def test_index_pipeline_and_serve_report_a_damaged_milvus_lite_database(good_db, tmp_path, docs):
    from haystack_agentic.resources import pipeline_path

    path = damaged(good_db, tmp_path, "missing-data")
    done = run_cli("index", docs, "--pipeline", pipeline_path("indexing_milvus"), "--uri", path, "--quiet")
    assert_one_line(done, str(path), "damaged")
    served = tmp_path / "served.yml"
    yaml_text = pipeline_path("agentic_rag_embedded_milvus").read_text(encoding="utf-8")
    served.write_text(yaml_text.replace("uri: haystack_agentic_milvus.db", f"uri: {path}"), encoding="utf-8")
    assert str(path) in served.read_text(encoding="utf-8")
    done = run_cli("serve", "--pipeline", served, "--port", "1", "--mcp-port", "0", timeout=120)
    assert_one_line(done, str(path), "damaged")


@pytest.mark.slow  # runs for many seconds
def test_an_unreadable_in_memory_store_is_one_line(tmp_path):
    store = tmp_path / "s.json"
    store.write_bytes(os.urandom(2048))
    done = run_cli("ask", "q?", "--llm", "embedded", "--store", store)
    assert_one_line(done, str(store))
    done = run_cli("serve", "--store", store, "--llm", "embedded", "--port", "1", "--mcp-port", "0", timeout=120)
    assert_one_line(done, str(store))


HOLD = """
import sys, time
from haystack_agentic.indexing.document_stores import milvus_document_store
milvus_document_store(sys.argv[1]).count_documents()
print("holding", flush=True)
time.sleep(600)
"""


@pytest.mark.integration
def test_a_database_in_use_and_an_unreachable_server_are_one_line(good_db, tmp_path, docs):
    path = tmp_path / "busy.db"
    shutil.copytree(good_db, path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        done = run_cli("index", docs, "--backend", "milvus", "--uri", path, "--quiet")
        assert_one_line(done, str(path), "in use by another process")
    finally:
        holder.kill()
        holder.wait(timeout=30)
    done = run_cli("index", docs, "--backend", "milvus", "--uri", "http://127.0.0.1:9", "--quiet")
    assert_one_line(done, "http://127.0.0.1:9", "Is the server running")


@pytest.mark.integration
def test_loading_the_packaged_milvus_yaml_writes_nothing(tmp_path, monkeypatch):
    """Milvus Lite creates a database when a store is made: loading a loop pipeline must not (issue 26, case 8)."""
    from haystack_agentic.indexing.store_faults import StoreError
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match=r"There is no Milvus Lite database at haystack_agentic_milvus.db"):
        load_loop_pipeline("agentic_rag_embedded_milvus")
    assert list(tmp_path.iterdir()) == []


#: Bytes named .pdf that pypdf cannot read: a header, binary noise, no cross-reference table, no EOF marker.
BROKEN_PDF = b"%PDF-1.4\n\x00\x01\x02garbage\xff\xfe not a pdf at all\n"


def test_an_unreadable_pdf_is_skipped_with_a_one_line_reason(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "broken.pdf").write_bytes(BROKEN_PDF)
    (docs / "ok.txt").write_text("The mayor of Fnordville is Zorblax Quintessa.", encoding="utf-8")
    done = run_cli("index", docs, "--store", tmp_path / "store.json", "--quiet")
    assert done.returncode == 0, done.stderr  # the other file was indexed: skipped files do not change the code
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        f"Skipped {docs / 'broken.pdf'}: not a readable PDF (PdfStreamError: Stream has ended unexpectedly)."
    ], done.stderr
    assert "ByteStream" not in done.stderr and "garbage" not in done.stderr and "EOF marker" not in done.stderr
    (docs / "ok.txt").unlink()
    nothing = run_cli("index", docs, "--store", tmp_path / "other.json", "--quiet")
    assert nothing.returncode == 2 and "No documents found" in nothing.stderr
    assert not (tmp_path / "other.json").exists()


def rolled_back(path: Path, kind: str) -> None:
    """Lose documents the way Milvus Lite does, leaving a manifest that reads (nothing left to see on open)."""
    collection = path / "collections" / COLLECTION
    manifest = collection / "manifest.json"
    if kind == "rolled-back":  # what Milvus Lite saves after it fell back to manifest.json.prev
        shutil.copyfile(collection / "manifest.json.prev", manifest)
    else:  # a data file gone, and gone from the manifest too
        import json

        data = json.loads(manifest.read_text(encoding="utf-8"))
        files = data["partitions"]["_default"]["data_files"]
        assert len(files) == 2, files
        gone = collection / "partitions" / "_default" / files.pop()
        for file in [gone, *gone.parent.parent.glob(f"indexes/{gone.stem}.*")]:  # with its index
            file.unlink()
        manifest.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["rolled-back", "data-file-dropped"])
def test_a_milvus_lite_database_with_fewer_documents_than_recorded_is_damage(tmp_path, docs, kind):
    """Issue 26 case 6: a rollback that leaves a valid manifest is seen by the count recorded after each write."""
    from haystack_agentic.document_stores.document_counts import record_path
    from haystack_agentic.indexing.store_faults import StoreError
    from haystack_agentic.pipelines.loop_builder import load_loop_pipeline

    path = tmp_path / "store.db"
    more = tmp_path / "more"
    more.mkdir()
    (more / "river.txt").write_text("The river of Fnordville is the Quux.\n\nIts bridge is red.", encoding="utf-8")
    for folder in (docs, more):
        assert run_cli("index", folder, "--backend", "milvus", "--uri", path, "--quiet").returncode == 0
    record = json.loads(record_path(path).read_text(encoding="utf-8"))
    held = record["collections"][COLLECTION]
    assert held == {"documents": held["documents"], "writing": False} and held["documents"] >= 2
    question = ("ask", "Who is the mayor of Fnordville?", "--llm", "embedded", "--backend", "milvus", "--uri", path)
    assert run_cli(*question).returncode == 0  # what was recorded is what the store holds: no false alarm

    rolled_back(path, kind)
    files = {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}
    needles = (
        str(path),
        "is damaged",
        "documents",
        f"{held['documents']} when haystack-agentic last wrote it",
        "store.db.counts.json",
    )
    assert_one_line(run_cli(*question), *needles)
    assert_one_line(run_cli("index", more, "--backend", "milvus", "--uri", path, "--quiet"), *needles)
    with pytest.raises(StoreError, match="is damaged"):
        load_loop_pipeline("agentic_rag_embedded_milvus", store_uri=str(path))  # AgenticRAG and serving load this way
    if kind == "data-file-dropped":  # opening the rolled-back one deletes its newer data files as orphans (Milvus Lite)
        assert files == {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}  # nothing was written


@pytest.mark.integration
def test_the_count_record_follows_the_packages_writes(tmp_path):
    """Recorded after a write; a write cut short (still `writing`) or more documents than recorded is not damage."""
    from milvus_lite import server_manager_instance

    from haystack_agentic.document_stores import document_counts, milvus_support
    from haystack_agentic.indexing.document_stores import milvus_document_store
    from haystack_agentic.indexing.store_faults import StoreError, check_document_count

    path = tmp_path / "counted.db"
    store = milvus_document_store(str(path))
    try:
        check_document_count(store)  # no record yet: nothing to compare
        documents = [Document(id=f"d{i}", content=f"Paragraph {i}.", embedding=[0.1] * 384) for i in range(3)]
        store.write_documents(documents)
        milvus_support.flush(store)
        entry = json.loads((tmp_path / "counted.db.counts.json").read_text(encoding="utf-8"))
        assert entry == {"format": 1, "collections": {COLLECTION: {"documents": 3, "writing": False}}}
        store.write_documents([Document(id="d9", content="More.", embedding=[0.2] * 384)])
        check_document_count(store)  # 4 held, 3 recorded: another program's write is no damage
        store.delete_documents(["d0", "d1"])
        with pytest.raises(StoreError, match="holds 2 documents, 3 when haystack-agentic last wrote it"):
            check_document_count(store)
        document_counts.begin_write(store)  # a write under way (or killed): the count is not known
        check_document_count(store)
        milvus_support.flush(store)
        check_document_count(store)
        assert json.loads(document_counts.record_path(path).read_text())["collections"][COLLECTION]["documents"] == 2
    finally:
        store.client.close()
        server_manager_instance.release_server(str(path))


@pytest.mark.integration
def test_pipeline_loads_of_the_milvus_yaml_writes_nothing_and_a_run_opens_the_store(tmp_path, monkeypatch):
    """Issue 26 case 8: `Pipeline.loads` (what hayhooks deploy-yaml does) leaves the stores closed until first use."""
    from milvus_lite import server_manager_instance

    from haystack_agentic.resources import pipeline_path

    monkeypatch.chdir(tmp_path)
    text = pipeline_path("agentic_rag_embedded_milvus").read_text(encoding="utf-8")
    pipeline = load_yaml(text)
    again = load_yaml(pipeline.dumps())  # a round trip opens nothing either
    assert again.to_dict() == pipeline.to_dict()
    assert list(tmp_path.iterdir()) == []

    store = pipeline.get_component("retriever").document_store  # first use: Milvus Lite creates the database now
    try:
        store.write_documents(
            [
                Document(
                    id="mayor",
                    content="The mayor of Fnordville is Zorblax Quintessa.",
                    meta={"title": "Fnordville"},
                    embedding=[0.1] * 384,
                )
            ]
        )
        result = pipeline.run({"controller": {"query": "Who is the mayor of Fnordville?"}})["result"]
        assert [d.id for d in result["documents"]] == ["mayor"]
        assert result["terminated_by"] != "error", result["error"]
    finally:
        store.client.close()
        server_manager_instance.release_server("haystack_agentic_milvus.db")
    assert (tmp_path / "haystack_agentic_milvus.db").is_dir()
