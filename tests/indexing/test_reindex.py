# SPDX-License-Identifier: Apache-2.0
"""
Lossless indexing: `index` adds to an existing store, a re-indexed file replaces its own earlier chunks, `--replace`
rebuilds, and an interrupted `index` leaves the previous store readable. In-memory store files and Milvus Lite (real,
embedded); Weaviate through the same code path when `WEAVIATE_URL` is set.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from haystack import Document
from haystack.core.serialization import component_from_dict, component_to_dict
from haystack.document_stores.in_memory import InMemoryDocumentStore

from haystack_agentic.cli.main import main

ZORBLAX = "The mayor of Fnordville is Zorblax Quintessa."
BLORT = "The river Blort floods Fnordville every spring."
EDITED = "The mayor of Fnordville is Mirela Vantongeren since the last election."
GAMMA = "Gamma is the third letter of the Greek alphabet."


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def index(*args: object) -> int:
    return main(["index", *map(str, args), "--quiet"])


def contents(store_file: Path) -> list[str]:
    return sorted(d.content for d in InMemoryDocumentStore.load_from_disk(str(store_file)).filter_documents())


def hotpot_row(qid: str, paragraphs: dict[str, str]) -> str:
    return json.dumps(
        {
            "id": qid,
            "question": "q?",
            "answer": "a",
            "supporting_facts": [],
            "context": [[title, [text]] for title, text in paragraphs.items()],
        }
    )


# --- in-memory store files -------------------------------------------------------------------------------------


def test_index_adds_to_an_existing_in_memory_store(tmp_path, capsys):
    store = tmp_path / "s.json"
    first = tmp_path / "first"
    more = tmp_path / "more_docs"
    write(first, "town.txt", ZORBLAX)
    write(more, "river.txt", BLORT)
    assert index(first, "--store", store) == 0
    assert index(more, "--store", store) == 0
    assert "(2 in the store)" in capsys.readouterr().out
    assert contents(store) == sorted([ZORBLAX, BLORT])


def test_an_edited_file_replaces_its_earlier_chunks_in_memory(tmp_path):
    store = tmp_path / "s.json"
    docs = tmp_path / "docs"
    town = write(docs, "town.txt", ZORBLAX)
    write(docs, "river.txt", BLORT)
    assert index(docs, "--store", store) == 0
    town.write_text(EDITED, encoding="utf-8")
    assert index(docs, "--store", store) == 0
    assert contents(store) == sorted([EDITED, BLORT])
    # One file on its own, given by another (relative) spelling of the same path: still the same source.
    town.write_text(ZORBLAX, encoding="utf-8")
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        assert index(Path("docs") / ".." / "docs" / "town.txt", "--store", store) == 0
    finally:
        os.chdir(cwd)
    assert contents(store) == sorted([ZORBLAX, BLORT])
    # A file emptied since the last index leaves none of its chunks behind.
    town.write_text("", encoding="utf-8")
    assert index(docs, "--store", store) == 0
    assert contents(store) == [BLORT]


def test_a_long_file_that_shrinks_leaves_no_stale_chunks(tmp_path):
    store = tmp_path / "s.json"
    docs = tmp_path / "docs"
    long = write(docs, "long.txt", " ".join(f"word{i}" for i in range(1000)))  # 200-word chunks
    assert index(docs, "--store", store) == 0
    assert len(contents(store)) >= 5
    long.write_text("Only one short paragraph is left.", encoding="utf-8")
    assert index(docs, "--store", store) == 0
    assert contents(store) == ["Only one short paragraph is left."]


def test_replace_rebuilds_the_store_from_scratch(tmp_path, capsys):
    store = tmp_path / "s.json"
    write(tmp_path / "first", "town.txt", ZORBLAX)
    write(tmp_path / "second", "river.txt", BLORT)
    assert index(tmp_path / "first", "--store", store) == 0
    assert index(tmp_path / "second", "--store", store, "--replace") == 0
    assert "(1 in the store)" in capsys.readouterr().out
    assert contents(store) == [BLORT]


def test_a_jsonl_file_is_one_source(tmp_path):
    """In a HotpotQA-format JSONL file every paragraph's source is the file: re-indexing the file replaces them all."""
    store = tmp_path / "s.json"
    qa = tmp_path / "qa.jsonl"
    qa.write_text(hotpot_row("1", {"Fnordville": ZORBLAX, "Blort": BLORT}) + "\n", encoding="utf-8")
    other = tmp_path / "other.jsonl"
    other.write_text(hotpot_row("2", {"Gamma": GAMMA}) + "\n", encoding="utf-8")
    assert index(qa, "--store", store) == 0
    assert index(other, "--store", store) == 0
    assert len(contents(store)) == 3
    qa.write_text(hotpot_row("1", {"Fnordville": EDITED}) + "\n", encoding="utf-8")
    assert index(qa, "--store", store) == 0
    saved = contents(store)
    assert saved == sorted([f"Fnordville\n{EDITED}", f"Gamma\n{GAMMA}"])
    meta = [d.meta for d in InMemoryDocumentStore.load_from_disk(str(store)).filter_documents()]
    assert {m["file_path"] for m in meta} == {str(qa.resolve()), str(other.resolve())}


def test_a_store_that_cannot_be_read_is_left_alone(tmp_path, capsys):
    store = tmp_path / "s.json"
    store.write_text("{not a store", encoding="utf-8")
    write(tmp_path / "docs", "town.txt", ZORBLAX)
    assert index(tmp_path / "docs", "--store", store) == 2
    err = capsys.readouterr().err
    assert str(store) in err and "--replace" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert store.read_text(encoding="utf-8") == "{not a store"
    assert index(tmp_path / "docs", "--store", store, "--replace") == 0
    assert contents(store) == [ZORBLAX]


def test_an_exception_mid_save_leaves_the_previous_store(tmp_path, monkeypatch, capsys):
    store = tmp_path / "s.json"
    write(tmp_path / "first", "town.txt", ZORBLAX)
    assert index(tmp_path / "first", "--store", store) == 0
    before = store.read_bytes()

    def failing_save(self, path):  # half a file, then the disk is full
        Path(path).write_text('{"documents": [{"id": ', encoding="utf-8")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(InMemoryDocumentStore, "save_to_disk", failing_save)
    write(tmp_path / "second", "river.txt", BLORT)
    assert index(tmp_path / "second", "--store", store) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert store.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["s.json"]  # no temporary file left


KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    def dying_save(self, path):
        Path(path).write_text('{"documents": [{"id": ', encoding="utf-8")
        os.kill(os.getpid(), signal.SIGKILL)

    InMemoryDocumentStore.save_to_disk = dying_save
    from haystack_agentic.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.slow  # runs for many seconds
def test_a_killed_index_leaves_the_previous_store_readable(tmp_path):
    store = tmp_path / "s.json"
    write(tmp_path / "first", "town.txt", ZORBLAX)
    assert index(tmp_path / "first", "--store", store) == 0
    write(tmp_path / "second", "river.txt", BLORT)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", KILLED_SAVE, "index", str(tmp_path / "second"), "--store", str(store), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -9, done.stderr
    assert contents(store) == [ZORBLAX]
    # The next index goes through.
    assert index(tmp_path / "second", "--store", store) == 0
    assert contents(store) == sorted([ZORBLAX, BLORT])


@pytest.mark.slow  # runs for many seconds
def test_concurrent_index_runs_into_one_store_lose_nothing(tmp_path):
    store = tmp_path / "s.json"
    folders = []
    for n in range(3):
        folder = tmp_path / f"docs{n}"
        for i in range(30):
            write(folder, f"f{i}.txt", f"Folder {n} file {i} is about Fnordville.")
        folders.append(folder)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "haystack_agentic.cli.main", "index", str(f), "--store", str(store), "--quiet"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in folders
    ]
    for run in runs:
        assert run.wait(timeout=300) == 0, run.stderr.read()
    assert len(contents(store)) == 90


@pytest.mark.integration
def test_embedded_and_plain_stores_are_not_mixed(tmp_path, capsys):
    store = tmp_path / "s.json"
    write(tmp_path / "first", "town.txt", ZORBLAX)
    write(tmp_path / "second", "river.txt", BLORT)
    assert index(tmp_path / "first", "--store", store, "--embed") == 0
    assert index(tmp_path / "second", "--store", store) == 2
    assert "--embed" in capsys.readouterr().err
    assert index(tmp_path / "second", "--store", store, "--embed") == 0
    saved = InMemoryDocumentStore.load_from_disk(str(store)).filter_documents()
    assert len(saved) == 2 and all(len(d.embedding) == 384 for d in saved)


# --- the writer component of YAML indexing pipelines ---------------------------------------------------------------


def test_source_replacing_writer_replaces_each_sources_chunks():
    from haystack_agentic.components.writers.source_replacing_document_writer import SourceReplacingDocumentWriter

    store = InMemoryDocumentStore()
    writer = SourceReplacingDocumentWriter(document_store=store)
    a = [
        Document(content=ZORBLAX, meta={"file_path": "/d/a.txt"}),
        Document(content="a2", meta={"file_path": "/d/a.txt"}),
    ]
    b = [Document(content=BLORT, meta={"file_path": "/d/b.txt"})]
    assert writer.run(documents=a + b) == {"documents_written": 3, "documents_removed": 0}
    assert writer.run(documents=[Document(content=EDITED, meta={"file_path": "/d/a.txt"})]) == {
        "documents_written": 1,
        "documents_removed": 2,
    }
    assert sorted(d.content for d in store.filter_documents()) == sorted([EDITED, BLORT])
    # `sources` names files that gave no chunks this time (emptied): their chunks go too.
    assert writer.run(documents=[], sources=["/d/b.txt"]) == {"documents_written": 0, "documents_removed": 1}
    assert [d.content for d in store.filter_documents()] == [EDITED]
    # Chunks without a source are only upserted.
    writer.run(documents=[Document(content="no source")])
    assert store.count_documents() == 2


def test_source_replacing_writer_round_trips(allow_deserialization):
    from haystack_agentic.components.writers.source_replacing_document_writer import SourceReplacingDocumentWriter

    writer = SourceReplacingDocumentWriter(document_store=InMemoryDocumentStore(), source_field="meta_source")
    data = component_to_dict(writer, "writer")
    again = component_from_dict(SourceReplacingDocumentWriter, data, "writer")
    assert again.source_field == "meta_source" and isinstance(again.document_store, InMemoryDocumentStore)


# --- Milvus Lite (real, embedded) ------------------------------------------------------------------------------------


def milvus_contents(uri: str) -> list[str]:
    from milvus_lite import server_manager_instance

    from haystack_agentic.indexing.document_stores import milvus_document_store

    store = milvus_document_store(uri)
    try:
        return sorted(d.content for d in store.filter_documents())
    finally:
        store.client.close()
        server_manager_instance.release_server(uri)


@pytest.mark.integration
def test_milvus_lite_reindex_adds_replaces_edited_files_and_rebuilds(tmp_path, capsys):
    uri = str(tmp_path / "m.db")
    docs = tmp_path / "docs"
    town = write(docs, "town.txt", ZORBLAX)
    write(docs, "river.txt", BLORT)
    milvus = ["--backend", "milvus", "--uri", uri]
    assert index(docs, *milvus) == 0
    town.write_text(EDITED, encoding="utf-8")
    assert index(docs, *milvus) == 0
    assert "(2 in the store)" in capsys.readouterr().out
    write(tmp_path / "more_docs", "gamma.txt", GAMMA)
    assert index(tmp_path / "more_docs", *milvus) == 0
    assert milvus_contents(uri) == sorted([EDITED, BLORT, GAMMA])
    assert index(tmp_path / "more_docs", *milvus, "--replace") == 0
    assert "(1 in the store)" in capsys.readouterr().out
    assert milvus_contents(uri) == [GAMMA]


@pytest.mark.integration
def test_milvus_indexing_pipeline_yaml_replaces_an_edited_file(tmp_path, capsys):
    from haystack_agentic.resources import pipeline_path

    uri = str(tmp_path / "p.db")
    docs = tmp_path / "docs"
    town = write(docs, "town.md", f"# Town\n\n{ZORBLAX}")
    write(docs, "river.txt", BLORT)
    yaml_path = str(pipeline_path("indexing_milvus"))
    assert index(docs, "--pipeline", yaml_path, "--uri", uri) == 0
    town.write_text(f"# Town\n\n{EDITED}", encoding="utf-8")
    assert index(docs, "--pipeline", yaml_path, "--uri", uri) == 0
    assert "(2 in the store)" in capsys.readouterr().out
    text = " ".join(milvus_contents(uri))
    assert "Mirela" in text and "Zorblax" not in text and "Blort" in text
    write(tmp_path / "more_docs", "gamma.txt", GAMMA)
    assert index(tmp_path / "more_docs", "--pipeline", yaml_path, "--uri", uri, "--replace") == 0
    assert milvus_contents(uri) == [GAMMA]


KILLED_WRITE = textwrap.dedent("""
    import os, signal, sys
    from milvus_haystack import MilvusDocumentStore

    real = MilvusDocumentStore.write_documents

    def dying_write(self, documents, policy=None):
        real(self, documents, policy)  # the new chunks are in; the stale ones not removed yet
        os.kill(os.getpid(), signal.SIGKILL)

    MilvusDocumentStore.write_documents = dying_write
    from haystack_agentic.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.integration
def test_a_killed_milvus_lite_index_leaves_the_earlier_documents_readable(tmp_path):
    uri = str(tmp_path / "k.db")
    docs = tmp_path / "docs"
    town = write(docs, "town.txt", ZORBLAX)
    write(docs, "river.txt", BLORT)
    assert index(docs, "--backend", "milvus", "--uri", uri) == 0
    from milvus_lite import server_manager_instance

    server_manager_instance.release_server(uri)  # the subprocess needs the database's lock
    town.write_text(EDITED, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITE, "index", str(docs), "--backend", "milvus", "--uri", uri, "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == -9, done.stderr
    after_kill = milvus_contents(uri)
    assert BLORT in after_kill and (ZORBLAX in after_kill or EDITED in after_kill)
    # Indexing again finishes the job.
    assert index(docs, "--backend", "milvus", "--uri", uri) == 0
    assert milvus_contents(uri) == sorted([EDITED, BLORT])


# --- Weaviate: the same code path, live only with a server -----------------------------------------------------------


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("WEAVIATE_URL"), reason="needs a Weaviate server (WEAVIATE_URL)")
def test_weaviate_reindex_replaces_an_edited_file(tmp_path):
    from haystack_agentic.indexing.document_stores import weaviate_document_store

    collection = "ReindexTest"
    docs = tmp_path / "docs"
    town = write(docs, "town.txt", ZORBLAX)
    write(docs, "river.txt", BLORT)
    weaviate = ["--backend", "weaviate", "--store-collection", collection]
    assert index(docs, *weaviate, "--replace") == 0
    town.write_text(EDITED, encoding="utf-8")
    assert index(docs, *weaviate) == 0
    store = weaviate_document_store(os.environ["WEAVIATE_URL"], collection)
    assert sorted(d.content for d in store.filter_documents()) == sorted([EDITED, BLORT])


# --- files that fail to convert lose nothing --------------------------------------------------------------------


def test_replace_with_files_that_give_no_chunk_is_refused_and_the_store_is_kept(tmp_path, capsys):
    store = tmp_path / "s.json"
    write(tmp_path / "good", "town.txt", ZORBLAX)
    assert index(tmp_path / "good", "--store", store) == 0
    bad = tmp_path / "bad"
    write(bad, "fake.pdf", "not a pdf\n")  # a text file named .pdf: the PDF converter skips it
    capsys.readouterr()
    assert index(bad, "--store", store, "--replace") == 2
    err = capsys.readouterr().err
    # the unreadable PDF is skipped first (one line), then nothing is left to index: refused, nothing written
    assert "fake.pdf: not a readable PDF" in err and ("nothing was changed" in err or "No documents found" in err)
    assert contents(store) == [ZORBLAX]


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica (written by hand: pypdf reads its text back)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>"
        ),
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_a_file_that_no_longer_converts_keeps_its_earlier_chunks(tmp_path):
    store = tmp_path / "s.json"
    docs = tmp_path / "docs"
    write(docs, "town.txt", ZORBLAX)
    page = docs / "river.pdf"
    page.write_bytes(minimal_pdf(BLORT))
    assert index(docs, "--store", store) == 0
    assert contents(store) == sorted([ZORBLAX, BLORT])
    page.write_bytes(page.read_bytes()[:40])  # truncated: the PDF converter skips it now
    assert index(docs, "--store", store) == 0
    assert contents(store) == sorted([ZORBLAX, BLORT])  # its chunks stay until it converts again (or --replace)


def test_an_indexing_pipeline_whose_writer_has_no_store_is_refused(tmp_path):
    from haystack import Pipeline, component

    from haystack_agentic.indexing.indexer import run_indexing_pipeline

    @component
    class Printer:
        @component.output_types(documents_written=int)
        def run(self, documents: list[Document]) -> dict[str, int]:
            return {"documents_written": len(documents)}

    pipeline = Pipeline()
    pipeline.add_component("writer", Printer())
    (tmp_path / "a.txt").write_text("Some text.")
    with pytest.raises(ValueError, match=r"`writer` \(Printer\) has no `document_store`"):
        run_indexing_pipeline(pipeline, [tmp_path / "a.txt"])
