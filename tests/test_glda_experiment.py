"""The gLDA experiment's table: the paper's improvement figure, the t-test, the cost column, and a
tiny end-to-end run of the fit worker."""
import numpy as np
import pytest

from models import corpus_from_docs
from retrieval.experiments import glda as X
from retrieval.experiments import glda_corpora


def _run(model, seed, init, final, cpu):
    return dict(name="c", variant="raw", model=model, seed=seed, initial=init, trace=[init / 2, final],
                iters_rec=[20, 40], cpu=cpu, n_tokens=1000)


def test_improvement_is_relative_to_ldas_own_progress():
    runs = [_run("LDA", 0, -100.0, -60.0, 1.0), _run("LDA", 1, -110.0, -70.0, 1.0),
            _run("gLDA", 0, -100.0, -52.0, 3.0), _run("gLDA", 1, -110.0, -58.0, 3.0)]
    rows = {r["model"]: r for r in X.summarize(runs)}
    # seed 0: (-52 + 60) / (-60 + 100) = 20 %; seed 1: (-58 + 70) / 40 = 30 %
    assert rows["gLDA"]["improvement"] == pytest.approx(25.0)
    assert rows["gLDA"]["improvement_sd"] == pytest.approx(np.std([20.0, 30.0], ddof=1))
    assert rows["gLDA"]["cost"] == pytest.approx(3.0)
    from scipy.stats import ttest_rel

    assert rows["gLDA"]["p"] == pytest.approx(ttest_rel([-52.0, -58.0], [-60.0, -70.0]).pvalue)
    assert "| +25.0 ± 7.1 |" in X.table_md(X.summarize(runs))


def test_fit_worker_records_the_trace_and_the_random_start(tmp_path):
    rng = np.random.default_rng(0)
    docs = [list(3 * (d % 3) + rng.integers(0, 3, size=12)) for d in range(30)]
    corpus = corpus_from_docs(docs, n_terms=9, fingerprint="x")
    tag = tmp_path / "toy-raw.npz"
    np.savez_compressed(tag, doc_ptr=corpus.doc_ptr, term_ids=corpus.term_ids,
                        vocab=np.array([f"w{i}" for i in range(9)]))
    task = dict(data="unused", name="toy", variant="raw", cache=str(tmp_path), docs=None, k=3,
                iters=10, seed=0, group_size=4.0, record_every=5)
    out = {m: X.fit_one(dict(task, model=m)) for m in X.MODELS}
    for r in out.values():
        assert r["iters_rec"] == [5, 10] and len(r["trace"]) == 2 and r["n_kw"].sum() == corpus.n_tokens
        assert r["initial"] < r["trace"][-1]  # 10 sweeps beat the uniform start
    assert out["LDA"]["initial"] == out["gLDA"]["initial"]  # the same start per seed
    # 9 terms: every topic's top 10 is the whole vocabulary, "the" included
    md = X.topics_md(list(out.values()), {("toy", "raw"): ["the"] + [f"w{i}" for i in range(1, 9)]},
                     n_pairs=2)
    assert "- gLDA: 3 of 27 top words; 3 topics hold at least one" in md
    assert md.count("\n| 0.") + md.count("\n| 1.") == 2  # two matched pairs


def test_corpora_keep_terms_of_two_documents_or_more():
    corpus, vocab = glda_corpora._to_corpus([["a", "b", "a"], ["a", "c"], ["b"]], "t")
    assert vocab == ["a", "b"] and corpus.n_tokens == 5
    with pytest.raises(ValueError, match="variant"):
        glda_corpora.build(None, "cacm", "porter")
