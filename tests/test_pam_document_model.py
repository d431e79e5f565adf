"""PAM's document model on random kept samples against the dense formula: the fast path's slow
twin (tests/reference/pam_reference.py), with super-topics absent from documents, sub-topics
in no document and no term, sub-topics without the query's terms and documents without tokens."""
import copy

import numpy as np
import pytest

from models import synthetic_corpus
from models.common.checkpoint import AnonymousMap, is_mapped
from models.pam.infer import count_csr
from models.pam.model import PAM
from tests.reference import pam_reference as ref


@pytest.fixture(scope="module")
def fitted():
    corpus = synthetic_corpus(40, 30, 15, seed=5, n_latent=3)
    m = PAM(n_super=4, n_sub=6, n_chains=2, n_iter=6, burn_in=2, sample_every=2, n_shards=2,
            seed=2).fit(corpus)
    return corpus, m


def _random_samples(rng, n_cs, doc_len, n_super, n_sub, V):
    """Dense n_dij (n_cs, D, n_super, n_sub) with each document's tokens spread over a few
    random pairs per sample (super-topic 0 in no document of sample 0, sub-topic 2 in none at
    all), and n_wj (n_cs, V, n_sub) with the same sub-topic totals (sub-topic 2 empty, sub-topic
    4 only on the terms 0 and 1)."""
    D = len(doc_len)
    n_dij = np.zeros((n_cs, D, n_super, n_sub), dtype=np.int64)
    n_wj = np.zeros((n_cs, V, n_sub), dtype=np.int64)
    subs = np.array([0, 1, 3, 4, 5])
    for cs in range(n_cs):
        supers = np.arange(1 if cs == 0 else 0, n_super)
        for d in range(D):
            sup = rng.choice(supers, size=rng.integers(1, len(supers) + 1), replace=False)
            pairs = [(i, j) for i in sup for j in rng.choice(subs, size=rng.integers(1, 4), replace=False)]
            for k in rng.integers(0, len(pairs), doc_len[d]):
                n_dij[cs, d][pairs[k]] += 1
        n_j = n_dij[cs].sum((0, 1))
        for j in subs:
            words = np.array([0, 1]) if j == 4 else rng.choice(V, size=6, replace=False)
            np.add.at(n_wj[cs, :, j], rng.choice(words, size=n_j[j]), 1)
    return n_dij, n_wj


def _random_model(fitted_m, corpus, seed):
    """A copy of ``fitted_m`` whose kept samples are :func:`_random_samples` (41 documents, two
    of them empty) with random alpha; returns (model, n_dij, n_wj)."""
    rng = np.random.default_rng(seed)
    m = copy.copy(fitted_m)
    n_cs, n_super, n_sub, V = m.dp_ptr_.shape[0], m.n_super, m.n_sub, corpus.n_terms
    D = 41  # more than one chunk of documents
    doc_len = rng.integers(1, 30, D)
    doc_len[[0, 17]] = 0
    n_dij, n_wj = _random_samples(rng, n_cs, doc_len, n_super, n_sub, V)
    alpha = rng.uniform(0.01, 0.5, (n_cs, n_super, n_sub))
    dp = [np.nonzero(n_dij[cs].reshape(D, -1)) for cs in range(n_cs)]  # document-major, keys ascending
    m.dp_ptr_ = np.stack([np.r_[0, np.cumsum(np.bincount(d, minlength=D))] for d, _ in dp])
    m.dp_ptr_ += np.r_[0, np.cumsum([len(d) for d, _ in dp])][:-1, None]
    m.dp_key_samples_ = np.concatenate([k for _, k in dp]).astype(np.int32)
    m.dp_count_samples_ = np.concatenate([n_dij[cs].reshape(D, -1)[d, k] for cs, (d, k) in enumerate(dp)]
                                         ).astype(fitted_m.dp_count_samples_.dtype)
    tw = [count_csr(n_wj[cs]) for cs in range(n_cs)]
    m.tw_ptr_ = np.stack([p + sum(len(c) for _, c, _ in tw[:cs]) for cs, (p, _, _) in enumerate(tw)])
    m.tw_sub_ = np.concatenate([s for _, s, _ in tw])
    m.tw_count_ = np.concatenate([c for _, _, c in tw])
    m.n_j_samples_ = n_wj.sum(1)
    m.alpha_samples_ = alpha
    m.doc_len_ = doc_len.astype(np.int64)
    m.n_terms_ = V
    return m, n_dij, n_wj


@pytest.mark.parametrize("seed", [0, 1])
def test_p_w_d_of_random_samples_is_the_dense_formula(fitted, seed):
    corpus, fitted_m = fitted
    m, n_dij, n_wj = _random_model(fitted_m, corpus, seed)
    n_cs, D, V = m.dp_ptr_.shape[0], len(m.doc_len_), corpus.n_terms
    want = np.stack([ref.p_w_d(n_dij[cs], n_wj[cs], m.n_j_samples_[cs], m._alpha_r(), m.alpha_samples_[cs], m.beta)
                     for cs in range(n_cs)])
    terms = np.array([0, 7, 1, 7, V - 1, 4])
    np.testing.assert_allclose(m.p_w_d(terms), want.mean(0)[:, terms], rtol=1e-12)
    per = m.p_w_d_per_sample(terms)
    np.testing.assert_allclose(per.reshape(n_cs, D, -1), want[:, :, terms], rtol=1e-12)
    np.testing.assert_allclose(m.p_w_d(np.arange(V)).sum(1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_bounds_hold_and_their_exact_entries_are_p_w_d_bit_for_bit(fitted, seed):
    corpus, fitted_m = fitted
    m, _, _ = _random_model(fitted_m, corpus, seed)
    assert m.alpha_samples_.sum(2).max() <= m._alpha_r()  # a_r = 50 / 4
    terms = np.array([0, 7, 1, 7, corpus.n_terms - 1, 4])
    full = m.p_w_d(terms)
    bounds = m.p_w_d_bounds(terms)
    lower = bounds.lower.copy()
    upper = lower + np.multiply.outer(bounds.doc_gap, bounds.term_gap)
    assert np.all(lower <= full * (1 + 1e-12)) and np.all(full <= upper * (1 + 1e-12))
    assert np.all(lower < full * (1 - 1e-6))  # the G rows are a real part, not a rounding
    # a document with no pair has no G rows: its lower bound misses only r0 * base
    np.testing.assert_allclose(upper[0], full[0], rtol=1e-12)
    docs = np.array([0, 3, 16, 17, 40])
    ptr = np.array([0, 2, 2, 5, 6, 9])
    cols = np.array([1, 4, 0, 2, 5, 3, 0, 1, 5])
    bounds.make_exact(docs, ptr, cols)
    want = lower.copy()
    for k, d in enumerate(docs):
        want[d, cols[ptr[k]:ptr[k + 1]]] = full[d, cols[ptr[k]:ptr[k + 1]]]
    np.testing.assert_array_equal(bounds.lower, want)
    with pytest.raises(RuntimeError, match="already run"):
        bounds.make_exact(docs, ptr, cols)
    bounds = m.p_w_d_bounds(terms)
    with pytest.raises(ValueError, match="ascending, each once"):
        bounds.make_exact(np.array([3, 3]), np.array([0, 1, 2]), np.array([0, 1]))
    with pytest.raises(ValueError, match="columns must be ascending"):
        bounds.make_exact(np.array([3]), np.array([0, 2]), np.array([1, 1]))
    with pytest.raises(ValueError, match="documents must be in"):
        bounds.make_exact(np.array([41]), np.array([0, 1]), np.array([0]))
    with pytest.raises(ValueError, match="columns must be in"):
        bounds.make_exact(np.array([1]), np.array([0, 1]), np.array([6]))
    with pytest.raises(ValueError, match="ptr must run"):
        bounds.make_exact(np.array([1]), np.array([0, 2]), np.array([0]))


def test_no_bounds_where_an_alpha_sum_passes_alpha_root(fitted):
    corpus, fitted_m = fitted
    m, _, _ = _random_model(fitted_m, corpus, 0)
    m.alpha_samples_ = m.alpha_samples_.copy()
    m.alpha_samples_[1, 2] *= 1.01 * m._alpha_r() / m.alpha_samples_[1, 2].sum()
    assert m.p_w_d_bounds(np.array([0, 1])) is None


def test_a_fitted_models_pairs_survive_its_document_model():
    # the kept samples' pairs live in anonymous mappings (models.pam.infer.anon_empty); the
    # passes over them release the pages of file mappings only, which zeroes nothing
    corpus = synthetic_corpus(500, 400, 80, seed=3, n_latent=6)
    m = PAM(n_super=4, n_sub=12, n_chains=2, n_iter=6, burn_in=2, sample_every=2, n_shards=2, seed=1).fit(corpus)
    assert isinstance(m.dp_key_samples_.base.obj, AnonymousMap) and not is_mapped(m.dp_key_samples_)
    key, count = m.dp_key_samples_.copy(), m.dp_count_samples_.copy()
    terms = np.arange(0, 400, 7)
    first = m.p_w_d(terms)
    np.testing.assert_array_equal(m.dp_key_samples_, key)
    np.testing.assert_array_equal(m.dp_count_samples_, count)
    np.testing.assert_array_equal(m.p_w_d(terms), first)
