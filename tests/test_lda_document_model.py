"""P_LDA(w|d), views, model files."""
import subprocess
import sys

import numba
import numpy as np
import pytest

from models import LDA, synthetic_corpus
from models.common.checkpoint import read_model_file
from tests.helpers import save_and_load


@pytest.fixture(scope="module")
def fitted():
    corpus = synthetic_corpus(80, 50, 20, seed=7, n_latent=4)
    m = LDA(n_topics=6, n_chains=2, n_iter=20, burn_in=10, sample_every=5, n_shards=2,
            optimize_alpha=True, optimize_every=5, seed=1).fit(corpus)
    return corpus, m


def test_p_w_d_rows_are_distributions(fitted):
    corpus, m = fitted
    p = m.p_w_d(np.arange(corpus.n_terms))
    assert p.shape == (corpus.n_docs, corpus.n_terms) and p.dtype == np.float64
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    assert (p > 0).all()


def test_p_w_d_is_mean_of_samples_and_matches_formula(fitted):
    corpus, m = fitted
    terms = np.array([3, 0, 3, 17])
    per = m.p_w_d_per_sample(terms)
    assert per.shape == (2, 2, corpus.n_docs, 4)
    np.testing.assert_allclose(per.mean((0, 1)), m.p_w_d(terms), rtol=1e-12)
    np.testing.assert_allclose(m.p_w_d_per_sample(np.arange(corpus.n_terms)).sum(3), 1.0,
                               rtol=1e-12)
    # chain 1, sample 0 straight from its counts (Wei & Croft 2006, eq. 3)
    cs = 1 * m.n_samples_ + 0
    V, Kt = corpus.n_terms, m.n_topics
    n_dk = np.zeros((corpus.n_docs, Kt))
    for k in range(Kt):
        lo, hi = m.kd_ptr_[cs, k], m.kd_ptr_[cs, k + 1]
        n_dk[m.kd_doc_[lo:hi], k] = m.kd_count_[lo:hi]
    np.testing.assert_array_equal(n_dk.sum(1), np.diff(corpus.doc_ptr))
    n_kw = np.zeros((V, Kt))
    for w in range(V):
        lo, hi = m.tw_ptr_[cs, w], m.tw_ptr_[cs, w + 1]
        n_kw[w, m.tw_topic_[lo:hi]] = m.tw_count_[lo:hi]
    a = m.alpha_samples_[cs]
    theta = (n_dk + a) / (n_dk.sum(1, keepdims=True) + a.sum())
    phi = (n_kw + m.beta) / (n_kw.sum(0) + V * m.beta)
    np.testing.assert_allclose(per[1, 0], theta @ phi[terms].T, rtol=1e-12)


def test_p_w_d_with_fixed_alpha_takes_the_shared_length_path():
    """alpha not optimised: every sample has the same 1 / (n_d + A), applied once per (term,
    document); the result is the per-sample mean, as with the per-posting product."""
    corpus = synthetic_corpus(80, 50, 20, seed=3, n_latent=4)
    m = LDA(n_topics=6, n_chains=2, n_iter=20, burn_in=10, sample_every=5, n_shards=2,
            seed=2).fit(corpus)
    terms = np.array([5, 1, 5, 30])
    p = m.p_w_d(terms)
    assert m._constants()[5] is True
    np.testing.assert_allclose(p, m.p_w_d_per_sample(terms).mean((0, 1)), rtol=1e-12)
    consts = m._doc_consts
    m._doc_consts = consts[:5] + (False,) + consts[6:]
    np.testing.assert_allclose(m.p_w_d(terms), p, rtol=1e-13)
    m._doc_consts = consts
    # rows of 64 bytes: ranges of 8 documents; every (term, document) adds the same postings in
    # the same order
    m.ROW_BYTES = 64
    np.testing.assert_array_equal(m.p_w_d(terms), p)
    threads = numba.get_num_threads()
    assert sorted(consts[6]) == [threads, threads * -(-10 // threads)]


def test_length_means_are_the_samples_mean_whatever_the_order_of_the_terms():
    """by_len of p_w_d: mean over samples of ap / (length + A), numba's (the samples summed in
    order, whatever the threads) against numpy's broadcast."""
    from models.lda.score_kernels import len_means

    rng = np.random.default_rng(0)
    ap, alpha_sum = rng.random((5, 7)), rng.random(5) * 10
    lengths = np.array([1, 3, 4, 17, 250])
    out = np.full((7, len(lengths)), np.nan)
    len_means(ap, alpha_sum, lengths, out)
    want = (ap[:, :, None] / (lengths[None, None, :] + alpha_sum[:, None, None])).mean(axis=0)
    np.testing.assert_allclose(out, want, rtol=1e-14)
    rev = np.empty_like(out)
    len_means(np.ascontiguousarray(ap[:, ::-1]), alpha_sum, lengths, rev)
    np.testing.assert_array_equal(rev[::-1], out)  # a term's row is its own sum alone


@pytest.mark.long  # postings past uint16 counts: a large corpus (make test-long)
def test_range_postings_keep_every_posting_and_counts_past_uint16():
    """p_w_d reads the postings relative to their document range, uint16 when the counts fit:
    each is its document's offset in its range, and a count past uint16 keeps int32 counts."""
    corpus = synthetic_corpus(40, 30, 20, seed=3, n_latent=3)
    m = LDA(n_topics=4, n_chains=2, n_iter=10, burn_in=5, sample_every=5, seed=4).fit(corpus)
    m.ROW_BYTES = 64  # ranges of 8 documents
    bounds, off, cnt = m._mean_postings()
    assert off.dtype == np.uint16 and cnt.dtype == np.uint16
    n_blocks = bounds.shape[2] - 1
    start = np.arange(n_blocks) * corpus.n_docs // n_blocks
    for cs in range(bounds.shape[0]):
        for k in range(bounds.shape[1]):
            for b in range(n_blocks):
                i = np.arange(bounds[cs, k, b], bounds[cs, k, b + 1])
                np.testing.assert_array_equal(off[i] + start[b], m.kd_doc_[i])
    np.testing.assert_array_equal(cnt, m.kd_count_)
    terms = np.array([1, 4, 9])
    m.kd_count_ = m.kd_count_.copy()
    m.kd_count_[0] += 70_000  # the document model of these counts, whatever their sums
    m._doc_consts = None
    assert m._mean_postings()[2].dtype == np.int32
    np.testing.assert_allclose(m.p_w_d(terms), m.p_w_d_per_sample(terms).mean((0, 1)), rtol=1e-12)


def test_constants_from_the_range_pass_equal_the_plain_pass():
    """The pass that writes p_w_d's range postings computes the per-document constants from the
    same read of the postings, bit for bit those of the plain pass, and a second block count
    leaves them as they are."""
    corpus = synthetic_corpus(60, 40, 20, seed=5, n_latent=3)
    m = LDA(n_topics=5, n_chains=2, n_iter=10, burn_in=5, sample_every=5, optimize_alpha=True,
            optimize_every=5, seed=6).fit(corpus)
    m.ROW_BYTES = 64  # ranges of 8 documents
    m._mean_postings()
    fused = [a.copy() for a in m._doc_consts[:3]]
    m._doc_consts = None
    m._constants()  # the plain pass
    for a, b in zip(fused, m._doc_consts[:3]):
        np.testing.assert_array_equal(a, b)
    assert (fused[1] > 0).all()
    m.ROW_BYTES = 128
    m._mean_postings()
    assert len(m._doc_consts[-1]) == 1 and m._doc_consts[1] is not None
    np.testing.assert_array_equal(m._doc_consts[1], fused[1])


def test_optimised_alpha_takes_the_per_sample_length_path(fitted):
    _, m = fitted
    assert m._constants()[5] is False
    terms = np.array([2, 9, 40])
    p = m.p_w_d(terms)
    m.ROW_BYTES = 64
    try:
        np.testing.assert_array_equal(m.p_w_d(terms), p)
    finally:
        del m.ROW_BYTES


def _random_samples(rng, n_cs, D, K, V, empty, big, shared):
    """Random sparse n_dk (n_cs, D, K) and n_kw (n_cs, K, V) of kept samples: the topics
    ``empty`` in no document and no term, a document in one topic, counts below ``big`` and
    alpha per sample (with equal sums when ``shared``)."""
    n_dk = rng.integers(1, big, (n_cs, D, K)) * (rng.random((n_cs, D, K)) < 0.4)
    n_kw = rng.integers(1, 50, (n_cs, K, V)) * (rng.random((n_cs, K, V)) < 0.3)
    n_dk[:, :, empty] = 0
    n_kw[:, empty] = 0
    n_dk[:, 0] = 0
    n_dk[:, 0, 1] = 3
    alpha = rng.uniform(0.05, 0.5, (n_cs, K))
    if shared:
        alpha[:] = alpha[0]
    return n_dk, n_kw, alpha


@pytest.mark.parametrize("big, shared", [(40, True), (40, False), (90_000, False)])
def test_p_w_d_of_random_samples_is_theta_phi_averaged(fitted, big, shared):
    """p_w_d and p_w_d_per_sample of random kept samples (topics in no document and no term,
    one alpha for all samples or one per sample, uint16 or int32 counts, documents in ranges
    of 8) against dense theta phi per sample: the fast path's slow twin."""
    import copy

    corpus, fitted_m = fitted
    rng = np.random.default_rng(big + shared)
    n_cs, D, K, V = 4, 37, 7, corpus.n_terms  # 4 kept samples, as the fitted model's
    n_dk, n_kw, alpha = _random_samples(rng, n_cs, D, K, V, [2, 5], big, shared)
    m = copy.copy(fitted_m)
    kd = [np.nonzero(n_dk[cs].T) for cs in range(n_cs)]  # topic-major, documents ascending
    tw = [np.nonzero(n_kw[cs].T) for cs in range(n_cs)]  # term-major, topics ascending
    m._set_inference_arrays(
        kd_ptrs=[np.r_[0, np.cumsum(np.bincount(k, minlength=K))] for k, _ in kd],
        kd_docs=[d.astype(np.int32) for _, d in kd],
        kd_counts=[n_dk[cs].T[k, d].astype(np.int32) for cs, (k, d) in enumerate(kd)],
        tw_ptrs=[np.r_[0, np.cumsum(np.bincount(w, minlength=V))] for w, _ in tw],
        tw_topics=[k.astype(fitted_m.tw_topic_.dtype) for _, k in tw],
        tw_counts=[n_kw[cs].T[w, k].astype(np.int32) for cs, (w, k) in enumerate(tw)],
        n_k=n_kw.sum(2), alpha=alpha)
    m.doc_len_ = n_dk.sum(2).max(0)
    m.ROW_BYTES = 64
    terms = np.array([0, 7, 3, 7, V - 1])
    want = np.empty((n_cs, D, len(terms)))
    for cs in range(n_cs):
        theta = (n_dk[cs] + alpha[cs]) / (m.doc_len_[:, None] + alpha[cs].sum())
        phi = (n_kw[cs] + m.beta) / (n_kw[cs].sum(1, keepdims=True) + V * m.beta)
        want[cs] = theta @ phi[:, terms]
    np.testing.assert_allclose(m.p_w_d(terms), want.mean(0), rtol=1e-12)
    np.testing.assert_allclose(m.p_w_d_per_sample(terms).reshape(want.shape), want, rtol=1e-12)
    assert m._constants()[5] is shared
    assert m._mean_postings()[2].dtype == (np.uint16 if big < 1 << 16 else np.int32)


def test_views(fitted):
    corpus, m = fitted
    ids, probs = m.doc_topics(3, top=4)
    assert len(ids) == 4 and (np.diff(probs) <= 0).all() and probs.sum() <= 1 + 1e-12
    ids, probs = m.topic_words(2, top=5)
    assert len(ids) == 5 and (np.diff(probs) <= 0).all()
    full = m.topic_words(2, top=corpus.n_terms)[1]
    np.testing.assert_allclose(full.sum(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(m.doc_topics(3, top=m.n_topics)[1].sum(), 1.0, rtol=1e-12)


def test_save_load_round_trip_and_fingerprint_refusal(fitted, tmp_path):
    corpus, m = fitted
    path = tmp_path / "lda.npz"
    m2 = save_and_load(m, path, corpus.fingerprint)
    np.testing.assert_array_equal(m2.doc_topics(5)[1], m.doc_topics(5)[1])
    with pytest.raises(ValueError) as e:
        LDA.load(path, fingerprint="lucene:robust04")
    assert corpus.fingerprint in str(e.value) and "lucene:robust04" in str(e.value)
    m.save(path, full=True)
    np.testing.assert_array_equal(LDA.load(path).z_, m.z_)
    (tmp_path / "junk.npz").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.npz"):
        LDA.load(tmp_path / "junk.npz")


def test_files_of_earlier_versions_load_without_their_retired_parameters(fitted, tmp_path,
                                                                         monkeypatch):
    corpus, m = fitted
    params = m.get_params()
    # files written before the document-order sampler also hold "parallel" and "sampler"
    monkeypatch.setattr(m, "get_params", lambda: dict(params, parallel="adlda", sampler="fplus"))
    m.save(tmp_path / "old.npz")
    monkeypatch.undo()
    assert read_model_file(tmp_path / "old.npz").header["params"]["parallel"] == "adlda"
    back = LDA.load(tmp_path / "old.npz", fingerprint=corpus.fingerprint)
    assert back.get_params() == params
    np.testing.assert_array_equal(back.p_w_d([0, 3]), m.p_w_d([0, 3]))


def test_log_lik_history_improves(fitted):
    _, m = fitted
    assert m.log_lik_.shape == (len(m.log_lik_iter_), 2)
    assert (m.log_lik_[-1] > m.log_lik_[0]).all()


def test_models_does_not_import_retrieval_or_jvm():
    code = ("import sys, models, models.lda.model, models.common.checkpoint, models.common.corpus;"
            "bad = [m for m in ('retrieval', 'jnius', 'pyserini') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert r.returncode == 0, r.stdout + r.stderr


def test_p_w_d_rows_of_a_few_documents_are_their_rows_of_p_w_d(fitted):
    """The per-document path (feedback's few documents) gives p_w_d's rows, in the order asked
    (repeats kept), for LDA's own kernel and the protocol's default (here through TopicModel)."""
    from models.common.base import TopicModel

    corpus, m = fitted
    terms = np.array([3, 0, 7, 19, 3])
    docs = np.array([5, 0, 79, 5, 12])
    want = m.p_w_d(terms)[docs]
    np.testing.assert_allclose(m.p_w_d_rows(terms, docs), want, rtol=1e-12)
    np.testing.assert_array_equal(TopicModel.p_w_d_rows(m, terms, docs), want)
    with pytest.raises(ValueError, match="document 80 is out of range"):
        m.p_w_d_rows(terms, [80])


def test_doc_topics_is_theta_averaged_over_the_chains_samples(fitted):
    corpus, m = fitted
    K = m.n_topics
    for d in (0, 3, 79):
        for chain in range(m.n_chains):
            css = m._cs_of_chain(chain)
            want = np.zeros(K)
            for cs in css:  # the document's count in every topic's postings, one topic at a time
                n_dk = np.array([m.kd_count_[m.kd_ptr_[cs, k]:m.kd_ptr_[cs, k + 1]][
                    m.kd_doc_[m.kd_ptr_[cs, k]:m.kd_ptr_[cs, k + 1]] == d].sum() for k in range(K)])
                a = m.alpha_samples_[cs]
                want += (n_dk + a) / (m.doc_len_[d] + a.sum())
            ids, p = m.doc_topics(d, top=K, chain=chain)
            assert sorted(ids) == list(range(K))
            np.testing.assert_allclose(p, want[ids] / len(css), rtol=1e-12)
