"""The LDA benchmark's synthetic run: its collection statistics and its report."""
import numpy as np

from models.common.corpus import synthetic_corpus
from retrieval.bench.lda import synthetic_stats
from retrieval.ui.cli import main


def test_synthetic_stats_are_the_corpus_counts():
    c = synthetic_corpus(300, 500, 40, seed=0)
    st = synthetic_stats(c)
    assert st.terms == sorted(st.terms) and st.n_docs == c.n_docs and st.n_tokens == c.n_tokens
    dense = np.zeros((c.n_docs, c.n_terms), dtype=np.int64)
    np.add.at(dense, (np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr)), c.term_ids), 1)
    for w in range(c.n_terms):
        docs, tf = st.postings(w)
        np.testing.assert_array_equal(docs, np.flatnonzero(dense[:, w]))
        np.testing.assert_array_equal(tf, dense[docs, w])


def test_synthetic_run_reports_training_and_ranking(capsys):
    assert main(["-q", "bench", "lda", "--synthetic", "--syn-docs", "400", "--syn-terms", "300", "--syn-len", "30",
                 "--syn-iters", "2", "--syn-samples", "2"]) == 0
    out = capsys.readouterr().out
    assert "K=800 chains=3 sweeps=2 samples/chain=2" in out
    assert "ranking: 100 queries x 3 terms over 400 docs, 6 samples" in out


def test_tomotopy_is_imported_without_its_deprecation_warning():
    """Issue 59: `topicir bench lda` printed "warning: builtin type _VocabDict has no __module__
    attribute", Python's DeprecationWarning on importing tomotopy's C extension (a type spec named
    without its module; harmless). The benchmarks import it through one helper that silences it."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    shown = [sys.executable, "-W", "always::DeprecationWarning", "-c"]
    plain = subprocess.run(shown + ["import tomotopy"], cwd=ROOT, capture_output=True, text=True)
    assert "DeprecationWarning: builtin type _VocabDict has no __module__ attribute" in plain.stderr  # its source
    ours = subprocess.run(shown + ["from retrieval.bench import import_tomotopy; print(import_tomotopy().__name__)"],
                          cwd=ROOT, capture_output=True, text=True)
    assert ours.returncode == 0 and ours.stdout == "tomotopy\n" and ours.stderr == "", ours.stderr
