"""Topic models trained on an index and used for ranking (LBDM), end to end."""
from pathlib import Path

import numpy as np
import pytest

from retrieval.core.ranking import batch_tables, prepare, rank, run_topics, sweep_topics
from retrieval.core.evaluate import aggregate
from retrieval.core.index import build_index
from retrieval.experiments.iterations import iteration_table
from retrieval.core.modelfiles import index_corpus, load_model, train_model
from retrieval.core.sources import load_qrels, load_topics
from tests.helpers import avg2_map, med_map_of_default_model

DATA = Path(__file__).parent / "data"
SMALL = dict(n_topics=4, n_chains=2, n_iter=20, burn_in=10, sample_every=5, seed=1)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("tm")
    index = build_index([DATA / "docs.trec"], root / "mini")
    model, path = train_model(index, "lda", root / "lda.npz", progress=False, **SMALL)
    return index, model, path


def test_corpus_is_the_index_token_stream(mini):
    index, _, _ = mini
    corpus = index_corpus(index)
    assert corpus.fingerprint == index.fingerprint
    assert np.array_equal(corpus.term_ids, index.stats.term_ids)
    assert corpus.n_docs == index.stats.n_docs


def test_model_document_probabilities_are_proper(mini):
    index, model, path = mini
    p = load_model(path, index).p_w_d(np.arange(index.stats.n_terms))
    assert p.shape == (index.stats.n_docs, index.stats.n_terms)
    assert np.allclose(p.sum(axis=1), 1.0)


def test_model_refuses_another_index(mini, tmp_path):
    _, _, path = mini
    (tmp_path / "d.trec").write_text("<DOC>\n<DOCNO> X </DOCNO>\n<TEXT>other words entirely</TEXT>\n</DOC>\n")
    other = build_index([tmp_path / "d.trec"], tmp_path / "other")
    with pytest.raises(ValueError, match="fingerprint"):
        load_model(path, other)


def test_sweep_equals_single_runs(mini):
    index, model, _ = mini
    topics = load_topics(DATA / "topics.trec")
    runs = sweep_topics(index, topics, [(1000.0, 0.7), (500.0, 0.5)], model=model, progress=False)
    for (mu, lam), run in runs.items():
        assert run == run_topics(index, topics, mu=mu, lam=lam, model=model, progress=False)


@pytest.mark.parametrize("table_bytes", [1, 10**9])
def test_query_tables_are_the_queries_own(mini, monkeypatch, table_bytes):
    """Tables computed for groups of queries (one query a group under a 1-byte budget, all in one
    otherwise) are each query's own P_TM columns, and the batch ranks as one query at a time."""
    index, model, _ = mini
    topics = load_topics(DATA / "topics.trec")
    texts = [t.title for t in topics] + ["zzzunknownzzz"]
    calls = []
    real = model.p_w_d
    monkeypatch.setattr(model, "p_w_d", lambda ids: calls.append(len(ids)) or real(ids))
    tables = [p_w for p_w, _ in batch_tables(index, texts, model, table_bytes=table_bytes)]
    assert len(tables) == len(texts) and tables[-1] is None
    assert len(calls) == (len(topics) if table_bytes == 1 else 1)
    for text, table in zip(texts[:-1], tables):
        own = real(prepare(index, text).query.term_ids)
        np.testing.assert_allclose(table, own, rtol=1e-13, atol=0)
    monkeypatch.setattr("retrieval.core.ranking.TABLE_BYTES", table_bytes)
    run = run_topics(index, topics, model=model, progress=False)
    one_by_one = [d for t in topics for d in rank(index, t.qid, t.title, model=model)]
    assert [(d.qid, d.docno) for d in run] == [(d.qid, d.docno) for d in one_by_one]
    np.testing.assert_allclose([d.score for d in run], [d.score for d in one_by_one], rtol=1e-12)


def test_iteration_table_has_a_row_per_sample(mini):
    index, model, _ = mini
    rows = iteration_table(index, model, load_topics(DATA / "topics.trec"), load_qrels(DATA / "qrels.txt"))
    assert [r["iteration"] for r in rows] == [15, 20]
    topics, qrels = load_topics(DATA / "topics.trec"), load_qrels(DATA / "qrels.txt")
    for s, row in enumerate(rows):
        assert row["avg2"] == pytest.approx(avg2_map(index, model, topics, qrels, s), abs=1e-12)
        chains = [float(m) for m in row["chains"].split()]
        assert len(chains) == model.n_chains and row["avg1"] == pytest.approx(sum(chains) / len(chains))


def test_resumed_training_equals_uninterrupted(mini, tmp_path):
    index, _, _ = mini
    full, _ = train_model(index, "lda", tmp_path / "full.npz", progress=False, **SMALL)

    class Stop(Exception):
        pass

    from models.lda.model import LDA
    from retrieval.core.modelfiles import index_corpus as corpus_of

    def stop_at_12(model, it, n):
        if it == 12:
            raise Stop

    ckpt = tmp_path / "part.npz.ckpt"
    with pytest.raises(Stop):
        LDA(**SMALL, checkpoint_every=4).fit(corpus_of(index), callback=stop_at_12, checkpoint=ckpt)
    resumed, _ = train_model(index, "lda", tmp_path / "part.npz", progress=False, **SMALL, checkpoint_every=4)
    assert not ckpt.exists()
    assert np.array_equal(resumed.p_w_d(np.arange(5)), full.p_w_d(np.arange(5)))


@pytest.mark.regression
def test_lda_smoothing_beats_ql_on_med(shared_data, med_index, tmp_path_factory):
    index = med_index
    topics = load_topics(shared_data / "med" / "topics.trec")
    qrels = load_qrels(shared_data / "med" / "qrels.txt")
    model, _ = train_model(index, "lda", tmp_path_factory.mktemp("m") / "lda.npz", progress=False,
                           n_topics=100, n_chains=2, n_iter=60, burn_in=30, sample_every=10, seed=0)
    runs = sweep_topics(index, topics, [(1000.0, 1.0), (1000.0, 0.7)], model=model, progress=False)
    ql = aggregate(runs[(1000.0, 1.0)], qrels, ["AP"])["AP"]
    lbdm = aggregate(runs[(1000.0, 0.7)], qrels, ["AP"])["AP"]
    assert ql == pytest.approx(0.4955, abs=0.005)
    assert lbdm > ql + 0.07  # the reference run here: 0.496 -> 0.649


# MAP of LDA smoothing on med (K = 800, 3 chains x 100 sweeps, seed 0, the trainer's defaults;
# mu = 1000, lam = 0.7, title queries, depth 1000), as `topicir reproduce smoothing` reports it in the README.
EXPECTED_LDA_MED = 0.6229


@pytest.mark.regression
@pytest.mark.long
def test_lda_smoothing_on_med_matches_the_readme(shared_data, med_index):
    maps, _, _ = med_map_of_default_model(shared_data, med_index, "lda", lams=(0.7,))
    assert maps[0.7] == pytest.approx(EXPECTED_LDA_MED, abs=0.01)


def test_experiments_reuse_their_cached_model_and_retrain_a_stale_one(tmp_path, monkeypatch):
    """The experiments' model cache (``<index>/models/``) loads a model trained with the same
    settings (model files leave out where training ran, e.g. the executor) and retrains one
    whose header holds other settings."""
    from retrieval.experiments import smoothing

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    train = dict(n_chains=1, n_iter=6, burn_in=2, sample_every=2, seed=3)
    first = smoothing._model(index, "lda", 4, train)
    trained = []
    real_train, real_header = smoothing.train_model, smoothing.read_header
    monkeypatch.setattr(smoothing, "train_model", lambda *a, **kw: trained.append(kw) or real_train(*a, **kw))
    again = smoothing._model(index, "lda", 4, train)
    assert trained == []
    assert np.array_equal(again.p_w_d([0, 1]), first.p_w_d([0, 1]))

    def stale(path):
        header = real_header(path)
        header["params"]["beta"] = 0.5
        return header
    monkeypatch.setattr(smoothing, "read_header", stale)
    smoothing._model(index, "lda", 4, train)
    assert len(trained) == 1


@pytest.mark.long
def test_experiments_train_a_variational_kind_at_the_grid_size(tmp_path):
    """The smoothing grid trains any kind: a kind without chains or sweeps (aviPAM) takes the
    schedule's seed alone and its own size, K sub-topics under K / 8 super-topics."""
    from retrieval.experiments import smoothing

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    train = dict(n_chains=1, n_iter=6, burn_in=2, sample_every=2, seed=3)
    model = smoothing._model(index, "avipam", 16, train)
    assert model.arch == "4pam:2,16" and model.seed == 3 and model.epochs == 100
    p = model.p_w_d([0, 1])
    assert p.shape == (index.stats.n_docs, 2) and np.all(p > 0)
