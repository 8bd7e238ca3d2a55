# SPDX-License-Identifier: Apache-2.0
"""
Issue 39: an interrupted index is reported. A real `haystack-agentic index` into a Milvus Lite file is killed with
SIGKILL from outside while it writes (its record, `<uri>.counts.json`, says `writing: true`); the next `index` of that
store says on stderr that the store was not fully written and what to do (run the same `index` again: it replaces
each file's chunks by source), and so does opening the store as `ask` does; once that index has run, nothing is said.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


def cli(*args: object) -> list[str]:
    return [sys.executable, "-m", "haystack_agentic.cli.main", *map(str, args)]


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "HAYSTACK_TELEMETRY_ENABLED": "False",
    }


def writing(record: Path) -> bool:
    try:
        entries = json.loads(record.read_text(encoding="utf-8"))["collections"].values()
    except (OSError, ValueError, KeyError):
        return False
    return any(entry.get("writing") for entry in entries)


@pytest.mark.integration  # Milvus Lite and the packaged MiniLM, in subprocesses
@pytest.mark.slow  # two index runs: a minute or more
def test_an_index_killed_mid_write_is_reported_by_the_next_index_and_ask(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(5):  # ~30 chunks a file: three write batches
        paragraphs = [" ".join(WORDS[(n * 7 + i * 3 + j) % len(WORDS)] for j in range(120)) + "." for i in range(30)]
        (docs / f"f{n}.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")
    uri = tmp_path / "s.db"
    record = tmp_path / "s.db.counts.json"
    command = cli("index", docs, "--backend", "milvus", "--uri", uri, "--quiet")
    run = subprocess.Popen(command, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not writing(record) and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writing(record), f"the index never began writing: {run.communicate()}"
    run.send_signal(signal.SIGKILL)
    assert run.wait(timeout=60) == -signal.SIGKILL

    # `ask` opens the store this way (and so does `index`): the warning says what happened and what to do.
    from milvus_lite import server_manager_instance

    from haystack_agentic.indexing.document_stores import open_document_store
    from haystack_agentic.indexing.store_faults import check_document_count

    store = open_document_store("milvus", str(uri))
    warning = check_document_count(store)
    assert warning and "was not fully written" in warning and "Run the same `haystack-agentic index`" in warning
    store.client.close()
    server_manager_instance.release_server(str(uri))  # the next index needs the database's lock

    again = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr
    assert "was not fully written" in again.stderr and "replaces each file's chunks by source" in again.stderr
    assert not writing(record)

    quiet = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=900)
    assert quiet.returncode == 0 and "was not fully written" not in quiet.stderr, quiet.stderr
