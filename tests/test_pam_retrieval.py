"""PAM over an index: train/load/rank, the CLI, the correlation view, and the empirical
likelihood behind `topicir reproduce heldout` / `topicir reproduce comp5`."""
import io
import tarfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import avg2_map
from scipy.special import logsumexp

from models import LDA, synthetic_corpus
from models.pam.model import PAM
from retrieval.core.ranking import run_topics
from retrieval.ui.cli import main
from retrieval.core.index import build_index
from retrieval.core.modelfiles import load_model, train_model
from models.common.generate import log_dirichlet
from retrieval.experiments.pam_eval import COMP5, comp5_accuracy, empirical_log_lik, kind_params, sampled_log_p
from retrieval.adapters.pam import correlation_figure, correlation_rows, correlation_text
from retrieval.core.sources import load_topics

DATA = Path(__file__).parent / "data"
SMALL = dict(n_super=2, n_sub=3, n_chains=2, n_iter=20, burn_in=10, sample_every=5, seed=1)
# MAP of PAM smoothing (12 super-, 100 sub-topics, 2 chains, 60 sweeps, lam 0.7) on med; see the test
EXPECTED_MED_PAM = 0.6177  # QL: 0.4955


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("pam")
    index = build_index([DATA / "docs.trec"], root / "mini")
    model, path = train_model(index, "pam", root / "pam.npz", progress=False, **SMALL)
    return index, model, path


def test_train_load_and_rank(mini):
    index, model, path = mini
    loaded = load_model(path, index)
    assert isinstance(loaded, PAM) and loaded.get_params() == model.get_params()
    p = loaded.p_w_d(np.arange(index.stats.n_terms))
    assert p.shape == (index.stats.n_docs, index.stats.n_terms)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    topics = load_topics(DATA / "topics.trec")
    ranked = run_topics(index, topics, model=loaded, progress=False)
    assert ranked == run_topics(index, topics, model=model, progress=False)
    by_topic = {}
    for r in ranked:
        by_topic.setdefault(r.qid, []).append(r.docno)
    assert set(by_topic["1"][:2]) == {"AP880212-0001", "AP880212-0002"}


def test_cli_train_run_and_view(mini, tmp_path, capsys):
    index, _, _ = mini
    out = tmp_path / "m.npz"
    assert main(["-q", "train", "pam", "--index", str(index.path), "--out", str(out), "--super", "2",
                 "--sub", "3", "--chains", "1", "--iterations", "8", "--burn-in", "4",
                 "--sample-every", "2", "--sampler", "pruned", "--no-checkpoint"]) == 0
    assert out.exists()
    run_file = tmp_path / "run.txt"
    assert main(["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                 "--model", str(out), "--out", str(run_file)]) == 0
    assert run_file.read_text().count("\n") > 0
    capsys.readouterr()
    for suffix, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml")):
        pic = tmp_path / f"corr{suffix}"
        assert main(["-q", "pam-view", "--index", str(index.path), "--model", str(out),
                     "--supers", "2", "--subs", "2", "--words", "3", "--out", str(pic)]) == 0
        assert pic.read_bytes().startswith(magic)
    text = capsys.readouterr().out
    assert text.count("super ") == 4 and "alpha" in text


def test_view_rows_text_and_figure(mini):
    index, model, _ = mini
    rows = correlation_rows(model, index.stats.terms, n_super=2, n_sub=3, n_words=4)
    assert len(rows) == 2 and all(len(r.subs) == 3 for r in rows)
    assert all(r.subs[0].alpha >= r.subs[1].alpha >= r.subs[2].alpha for r in rows)
    assert all(w in index.stats.terms for r in rows for s in r.subs for w in s.words)
    assert "sub" in correlation_text(rows)
    assert correlation_figure(rows, "png").startswith(b"\x89PNG")
    with pytest.raises(ValueError, match="png"):
        correlation_figure(rows, "gif")


# -- empirical likelihood -----------------------------------------------------------------------


def test_log_dirichlet_is_a_distribution_even_for_tiny_alpha():
    rng = np.random.default_rng(0)
    for a in (np.full(5, 0.01), np.array([2.0, 0.5, 1e-3])):
        g = log_dirichlet(rng, a, 2000)
        np.testing.assert_allclose(logsumexp(g, axis=1), 0.0, atol=1e-12)
        assert np.isfinite(g).all()
    g = np.exp(log_dirichlet(rng, np.array([3.0, 1.0]), 20000))
    assert abs(g[:, 0].mean() - 0.75) < 0.01  # Dirichlet mean alpha / sum(alpha)


@pytest.mark.parametrize("kind", ["lda", "pam"])
def test_sampled_documents_and_empirical_likelihood(kind):
    corpus = synthetic_corpus(40, 30, 15, seed=2, n_latent=3)
    if kind == "lda":
        m = LDA(n_topics=3, n_chains=2, n_iter=10, burn_in=6, sample_every=2, seed=0).fit(corpus)
    else:
        m = PAM(n_super=2, n_sub=3, n_chains=2, n_iter=10, burn_in=6, sample_every=2, seed=0).fit(corpus)
    log_p = sampled_log_p(m, n_docs=50, seed=1)
    assert log_p.shape == (50, corpus.n_terms)
    np.testing.assert_allclose(logsumexp(log_p, axis=1), 0.0, atol=1e-10)
    docs = [corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] for d in range(3)] + [np.zeros(0, np.int32)]
    ll = empirical_log_lik(m, docs, corpus.n_terms, n_docs=50, seed=1)
    want = logsumexp(np.array([log_p[:, d].sum(1) for d in docs[:3]]), axis=1) - np.log(50)
    np.testing.assert_allclose(ll[:3], want, rtol=1e-12)
    assert ll[3] == pytest.approx(0.0, abs=1e-12)  # the empty document


def test_empirical_likelihood_is_the_models_own_draw():
    """The experiment asks the model for its draws (no kind branches): gLDA draws as LDA does,
    a kind without draws says so, and a kind without the paper's settings needs them given."""
    from models.glda.model import GroupedLDA
    from models.tcm.model import TCM

    corpus = synthetic_corpus(40, 30, 15, seed=2, n_latent=3)
    kw = dict(n_topics=3, n_chains=2, n_iter=10, burn_in=6, sample_every=2, seed=0)
    g = GroupedLDA(**kw).fit(corpus)
    phi = g.phi_matrix(1)
    np.testing.assert_allclose(phi.sum(1), 1.0, atol=1e-12)
    rng = np.random.default_rng(4)  # document 0 from kept sample 0, document 1 from sample 1
    thetas = [np.exp(log_dirichlet(rng, g.alpha_samples_[cs], 1)) for cs in (0, 1)]
    np.testing.assert_allclose(g.sample_word_probs(2, seed=4)[1], (thetas[1] @ phi)[0], rtol=1e-12)
    with pytest.raises(NotImplementedError, match="tcm models do not draw documents"):
        TCM(n_topics=2, n_iter=2, burn_in=1, sample_every=1).sample_word_probs(3)
    assert kind_params("glda", None)["n_topics"] == 50
    with pytest.raises(ValueError, match="no settings for 'tcm'"):
        kind_params("tcm", None)


def test_comp5_pipeline_on_a_tiny_tarball(tmp_path):
    # each group writes about its own five words; the classifier must get most test posts right
    path = tmp_path / "20news-bydate.tar.gz"
    rng = np.random.default_rng(0)
    with tarfile.open(path, "w:gz") as tar:
        for g, group in enumerate(COMP5):
            words = [f"w{g}x{k}" for k in range(5)] + ["shared", "common"]
            for n in range(8):
                body = " ".join(rng.choice(words, size=30)).encode()
                data = b"From: x\nSubject: y\n\n" + body
                info = tarfile.TarInfo(f"20news-bydate-train/{group}/{n}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    params = {"lda": dict(n_topics=2, n_chains=1, n_iter=8, burn_in=4, sample_every=2, seed=0),
              "pam": dict(n_super=2, n_sub=3, n_chains=1, n_iter=8, burn_in=4, sample_every=2, seed=0)}
    res = comp5_accuracy(path, params=params, n_docs=50)
    for kind in ("lda", "pam"):
        assert res[kind]["overall"] >= 80.0
        assert set(COMP5) <= set(res[kind])


def test_iteration_table_works_for_pam(mini):
    from retrieval.experiments.iterations import iteration_table
    from retrieval.core.sources import load_qrels

    index, model, _ = mini
    rows = iteration_table(index, model, load_topics(DATA / "topics.trec"), load_qrels(DATA / "qrels.txt"))
    assert [r["iteration"] for r in rows] == [15, 20]
    topics, qrels = load_topics(DATA / "topics.trec"), load_qrels(DATA / "qrels.txt")
    for s, row in enumerate(rows):
        assert row["avg2"] == pytest.approx(avg2_map(index, model, topics, qrels, s), abs=1e-12)
        chains = [float(m) for m in row["chains"].split()]  # printed to 4 decimals
        assert len(chains) == model.n_chains
        assert row["avg1"] == pytest.approx(sum(chains) / len(chains), abs=5e-5)


@pytest.mark.regression
@pytest.mark.long
def test_pam_smoothing_beats_ql_on_med(shared_data, med_index, tmp_path_factory):
    from retrieval.core.ranking import sweep_topics
    from retrieval.core.evaluate import aggregate
    from retrieval.core.sources import load_qrels

    index = med_index
    topics = load_topics(shared_data / "med" / "topics.trec")
    qrels = load_qrels(shared_data / "med" / "qrels.txt")
    model, _ = train_model(index, "pam", tmp_path_factory.mktemp("m") / "pam.npz", progress=False,
                           n_super=12, n_sub=100, n_chains=2, n_iter=60, burn_in=30, sample_every=10, seed=0)
    runs = sweep_topics(index, topics, [(1000.0, 1.0), (1000.0, 0.7)], model=model, progress=False)
    ql = aggregate(runs[(1000.0, 1.0)], qrels, ["AP"])["AP"]
    pam = aggregate(runs[(1000.0, 0.7)], qrels, ["AP"])["AP"]
    assert ql == pytest.approx(0.4955, abs=0.005)
    assert pam == pytest.approx(EXPECTED_MED_PAM, abs=0.02) and pam > ql + 0.07
