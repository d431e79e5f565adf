"""A batch ranked to a depth with a kind that bounds its document model (PAM): the P_TM tables
are exact only where a query's top documents can be, and the runs are those of the exact
tables, scores and order included."""
import numpy as np
import pytest

import retrieval.core.ranking as ranking
from models.pam.model import PAM
from retrieval.core.index import build_index
from retrieval.core.modelfiles import train_model
from retrieval.core.ranking import run_topics, sweep_topics
from retrieval.core.scoring import Scorer
from retrieval.core.trec import Topic
from retrieval.datasets.ap_synth import Generator, generate

N_DOCS = 600


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    root = tmp_path_factory.mktemp("pruned")
    files = generate(root / "ap", N_DOCS, n_terms=3000, seed=3, docs_per_file=300, progress=False)
    index = build_index(files, root / "index")
    model, _ = train_model(index, "pam", root / "pam.npz", progress=False, n_super=4, n_sub=12,
                           n_chains=2, n_iter=12, burn_in=6, sample_every=3, seed=2)
    queries = Generator(3000, 3).queries(30, seed=1)
    return index, model, [Topic(str(i + 1), q, "", "") for i, q in enumerate(queries)]


class Spy:
    """Counts the entries the bounds are asked to make exact."""

    def __init__(self, monkeypatch):
        self.entries, self.docs, real = [], [], PAM.p_w_d_bounds

        def bounds(model, term_ids):
            out = real(model, term_ids)
            make_exact = out.make_exact

            def spied(docs, ptr, cols):
                self.docs.append(len(docs))
                self.entries.append(len(cols))
                make_exact(docs, ptr, cols)

            out.make_exact = spied
            return out

        monkeypatch.setattr(PAM, "p_w_d_bounds", bounds)


@pytest.mark.parametrize("depth, most", [(10, 0.1), (100, 0.6)])
def test_bounded_tables_rank_as_the_exact_ones(collection, monkeypatch, depth, most):
    index, model, topics = collection
    spy = Spy(monkeypatch)
    bounded = run_topics(index, topics, model=model, depth=depth, progress=False)
    assert spy.entries, "the bounded path did not run"
    scorer = Scorer(index.stats)
    union = np.unique(np.concatenate([scorer.query(t.title, index.analyze(t.title)).term_ids for t in topics]))
    assert sum(spy.entries) < most * N_DOCS * len(union)  # the rest are left at their bounds
    monkeypatch.setattr(ranking, "bounded_table", lambda *a, **k: None)
    exact = run_topics(index, topics, model=model, depth=depth, progress=False)
    assert bounded == exact  # the same documents, order and scores, to the bit
    assert len(exact) == depth * len(topics)


def test_many_settings_and_whole_rankings_read_exact_tables(collection, monkeypatch):
    index, model, topics = collection
    spy = Spy(monkeypatch)
    runs = sweep_topics(index, topics[:5], [(1000.0, 0.7), (500.0, 0.5)], model=model, depth=20, progress=False)
    run_topics(index, topics[:5], model=model, depth=N_DOCS, progress=False)
    assert not spy.entries  # several settings, or every document ranked: no bounds
    one = run_topics(index, topics[:5], model=model, mu=500.0, lam=0.5, depth=20, progress=False)
    assert spy.entries and one == runs[(500.0, 0.5)]


def test_a_model_whose_bounds_do_not_hold_is_ranked_exactly(collection, monkeypatch):
    index, model, topics = collection
    want = run_topics(index, topics[:5], model=model, depth=20, progress=False)
    monkeypatch.setattr(PAM, "p_w_d_bounds", lambda self, term_ids: None)
    assert run_topics(index, topics[:5], model=model, depth=20, progress=False) == want


def test_scores_on_the_bounds_are_those_of_the_bound_tables(collection):
    index, model, topics = collection
    scorer = Scorer(index.stats, model=model)
    queries = [scorer.query(t.title, index.analyze(t.title)) for t in topics[:8]]
    queries.append(scorer.query("x", [index.analyze(topics[0].title)[0]] * 3))  # a repeated term
    union = np.unique(np.concatenate([q.term_ids for q in queries]))
    bounds = model.p_w_d_bounds(union)
    doc_gap = bounds.doc_gap.copy()
    doc_gap[::7] = 0.0  # a document whose bounds meet
    for q in queries:
        cols = np.searchsorted(union, q.term_ids)
        low, high = scorer.score_bounds(q, bounds.lower.T, cols, doc_gap, bounds.term_gap[cols])
        upper = bounds.lower[:, cols] + np.multiply.outer(doc_gap, bounds.term_gap[cols])
        assert np.array_equal(low, scorer.score(q, bounds.lower[:, cols]))
        assert np.array_equal(high, scorer.score(q, upper))
        assert np.all(high >= low) and np.any(high > low)
        assert np.array_equal(high[::7], low[::7])
    with pytest.raises(ValueError, match="lam < 1"):
        Scorer(index.stats, lam=1.0, model=model).score_bounds(queries[0], bounds.lower.T, cols, doc_gap,
                                                                bounds.term_gap[cols])
