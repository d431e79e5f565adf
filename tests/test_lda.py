"""LDA trainer: recovery, invariants, fast-vs-slow equality, reproducibility, resume."""
import numpy as np
import pytest

from models import LDA, corpus_from_docs, synthetic_corpus
from models.lda import kernels as K_
from models.lda import doc_kernels as lda_doc
from tests.helpers import assert_doc_lists, assert_same_fit, resume_after_kill
from tests.reference import lda_reference as ref


def block_corpus(n_docs=60, seed=0):
    """3 topics with 3 disjoint words each; every doc draws 12 tokens from one block."""
    rng = np.random.default_rng(seed)
    docs = [3 * (d % 3) + rng.integers(0, 3, size=12) for d in range(n_docs)]
    return corpus_from_docs(docs, n_terms=9, fingerprint="block")


def tiny_corpus():
    docs = [[0, 1, 2, 1, 3], [4, 5, 4, 6], [0, 2, 2, 7, 1, 1], [5, 6, 7, 4], [3, 3, 0], [7]]
    return corpus_from_docs(docs, n_terms=8, fingerprint="tiny")


def small_corpus():
    return synthetic_corpus(120, 300, 30, seed=3, n_latent=5)


def prepared(model, corpus):
    """A model with allocated and initialised chains, before any sweep."""
    model._check_params(corpus)
    model.fingerprint_ = corpus.fingerprint
    model._build_layout(corpus)
    model._alloc_chain_state(corpus)
    model._start(corpus)
    return model


def check_invariants(model, corpus):
    for c in range(model.n_chains):
        z = model._z_doc(c)
        n_dk, n_kw, n_k = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, z, model.n_topics,
                                            corpus.n_terms)
        assigned = z >= 0
        assert (model.n_kw_[c] >= 0).all() and (model.n_k_[c] >= 0).all()
        assert model.n_kw_[c].sum() == assigned.sum()
        np.testing.assert_array_equal(model.n_kw_[c], n_kw)
        np.testing.assert_array_equal(model.n_k_[c], n_k)
        np.testing.assert_array_equal(model.n_kw_[c].sum(0), model.n_k_[c])
        sh = model._lay["cshift"]
        assert_doc_lists(model.dt_[c] >> sh, model.dt_[c] & ((1 << sh) - 1), model.dt_nnz_[c],
                         model._lay["cap_ptr"], n_dk, ordered=False)
        sh = model._lay["wshift"]
        assert_doc_lists(model.wl_[c] >> sh, model.wl_[c] & ((1 << sh) - 1), model.wl_nnz_[c],
                         model._lay["wcap_ptr"], n_kw)
        doc_of = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
        np.testing.assert_array_equal(n_dk.sum(1), np.bincount(doc_of[assigned], minlength=corpus.n_docs))


@pytest.mark.parametrize("n_docs,n_shards", [(60, 1), (300, 2), (300, 4)])
def test_block_diagonal_topics_recovered_in_50_sweeps(n_docs, n_shards):
    corpus = block_corpus(n_docs)
    m = LDA(n_topics=3, alpha=0.1, beta=0.01, n_chains=1, n_iter=50, burn_in=40, sample_every=10,
            n_shards=n_shards, seed=1).fit(corpus)
    blocks = set()
    for k in range(3):
        ids, probs = m.topic_words(k, top=3)
        assert probs.sum() > 0.95
        blocks.add(frozenset(ids.tolist()))
    assert blocks == {frozenset({0, 1, 2}), frozenset({3, 4, 5}), frozenset({6, 7, 8})}
    for d in range(corpus.n_docs):
        ids, probs = m.doc_topics(d, top=1)
        assert probs[0] > 0.8


@pytest.mark.parametrize("init,n_shards", [("random", 1), ("random", 3), ("sparse", 2), ("online", 3)])
def test_invariants_after_every_sweep(init, n_shards):
    corpus = small_corpus()
    seen = []

    def cb(model, it, n_iter):
        check_invariants(model, corpus)
        seen.append(it)

    LDA(n_topics=7, n_chains=2, n_iter=12, burn_in=10, sample_every=1, init=init,
        sparse_init_frac=0.25, sparse_init_every=2, n_shards=n_shards, seed=5,
        optimize_alpha=True, optimize_every=3).fit(corpus, callback=cb)
    assert seen == list(range(1, 13))


def test_one_sweep_matches_reference_sampler():
    corpus = tiny_corpus()
    ref_sweep = ref.sweep
    for seed in range(3):
        m = prepared(LDA(n_topics=5, alpha=0.3, beta=0.05, n_chains=1, n_iter=2, burn_in=1,
                         sample_every=1, n_shards=1, seed=seed), corpus)
        z0 = m._z_doc(0)
        rng = m.rng_[0, 0].copy()
        z_ref = ref_sweep(corpus.doc_ptr, corpus.term_ids, z0, 5, corpus.n_terms,
                          m.alpha_[0], 0.05, rng)
        m._sweep(0)
        np.testing.assert_array_equal(m._z_doc(0), z_ref)
        np.testing.assert_array_equal(m.rng_[0, 0], rng)
        # a second sweep from the new state agrees too
        z_ref2 = ref_sweep(corpus.doc_ptr, corpus.term_ids, z_ref, 5, corpus.n_terms,
                           m.alpha_[0], 0.05, rng)
        m._sweep(0)
        np.testing.assert_array_equal(m._z_doc(0), z_ref2)


# K = 37: visits patch a few leaves of the tree; 70: some rebuild it in full
@pytest.mark.parametrize("K", [6, 37, 70])
def test_one_sweep_matches_reference_on_synthetic_corpus(K):
    corpus = synthetic_corpus(15, 40, 12, seed=2, n_latent=3)
    m = prepared(LDA(n_topics=K, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=1,
                     seed=11), corpus)
    for _ in range(3):
        m._sweep(0)
    z0 = m._z_doc(0)
    rng = m.rng_[0, 0].copy()
    z_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, z0, K, corpus.n_terms, m.alpha_[0],
                      m.beta, rng)
    m._sweep(0)
    np.testing.assert_array_equal(m._z_doc(0), z_ref)


def test_conditionals_match_reference():
    corpus = small_corpus()
    m = prepared(LDA(n_topics=9, alpha=0.2, beta=0.03, n_chains=1, n_iter=2, burn_in=1,
                     sample_every=1, n_shards=2, seed=4), corpus)
    for _ in range(3):
        m._sweep(0)
    n_dk, n_kw, n_k = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 9,
                                        corpus.n_terms)
    rng = np.random.default_rng(0)
    for _ in range(50):
        d = int(rng.integers(corpus.n_docs))
        w = int(rng.integers(corpus.n_terms))
        fast = lda_doc.token_conditional(
            w, d, m.n_kw_[0], m.n_k_[0], m._lay["cap_ptr"], m.dt_[0], m._lay["cshift"],
            m.dt_nnz_[0], m.alpha_[0], 0.03)
        slow = ref.conditional(w, d, n_dk, n_kw, n_k, m.alpha_[0], 0.03)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=0)


def test_log_lik_matches_reference():
    corpus = small_corpus()
    m = LDA(n_topics=4, n_chains=1, n_iter=3, burn_in=2, sample_every=1, log_lik_every=1,
            n_shards=2, optimize_alpha=True, optimize_every=1).fit(corpus)
    want = ref.log_lik(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 4, corpus.n_terms,
                       m.alpha_[0], m.beta)
    assert m.log_lik_.shape == (3, 1)
    np.testing.assert_allclose(m.log_lik_[-1, 0], want, rtol=1e-10)


def test_alpha_optimisation_matches_digamma_fixed_point():
    corpus = small_corpus()
    m = prepared(LDA(n_topics=6, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=1,
                     seed=2), corpus)
    for _ in range(5):
        m._sweep(0)
    n_dk, _, _ = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 6, corpus.n_terms)
    a0 = m.alpha_[0].copy()
    K_._optimize_alpha(m.alpha_[0], m._lay["cap_ptr"], m.dt_[0], m._lay["cshift"],
                       m.dt_nnz_[0], m._active[0], int(m._lay["doc_len"].max()), 50, 1.001, 1.0)
    want = ref.minka_alpha(n_dk, a0, n_iter=50)
    np.testing.assert_allclose(m.alpha_[0], want, rtol=1e-9)
    assert not np.allclose(want, a0)


def test_same_seed_same_z_whatever_the_thread_count():
    corpus = small_corpus()
    kw = dict(n_topics=10, n_chains=2, n_iter=6, burn_in=4, sample_every=1, n_shards=4, seed=9)
    z1 = LDA(n_jobs=1, **kw).fit(corpus).z_
    z2 = LDA(n_jobs=2, **kw).fit(corpus).z_
    np.testing.assert_array_equal(z1, z2)
    z3 = LDA(n_jobs=2, **kw).fit(corpus).z_
    np.testing.assert_array_equal(z2, z3)
    assert z1.dtype == np.int32 and z1.shape == (2, corpus.n_tokens)


def test_online_init_draws_every_token_given_those_before():
    corpus = block_corpus(300)
    kw = dict(n_topics=3, alpha=0.1, n_chains=2, n_iter=1, burn_in=0, sample_every=1, seed=4,
              n_shards=4, log_lik_every=1)
    m = prepared(LDA(init="online", **kw), corpus)
    assert (m.z_ord_ >= 0).all()
    check_invariants(m, corpus)
    # the sequential pass starts far above uniform noise
    noise = prepared(LDA(init="random", **kw), corpus)
    for c in range(2):
        assert m._log_lik(c) > noise._log_lik(c) + 0.5
    # and one sweep after it beats one sweep from uniform noise
    online = LDA(init="online", **kw).fit(corpus)
    assert online.log_lik_[0, 0] > LDA(init="random", **kw).fit(corpus).log_lik_[0, 0] + 0.1


def test_chains_and_seeds_differ():
    corpus = small_corpus()
    kw = dict(n_topics=10, n_chains=2, n_iter=3, burn_in=2, sample_every=1, n_shards=2)
    z = LDA(seed=1, **kw).fit(corpus).z_
    assert (z[0] != z[1]).mean() > 0.3
    z_other = LDA(seed=2, **kw).fit(corpus).z_
    assert (z[0] != z_other[0]).mean() > 0.3


@pytest.mark.parametrize("init", ["online", "random", "sparse"])
def test_resume_from_checkpoint_equals_uninterrupted(tmp_path, init):
    corpus = small_corpus()
    kw = dict(n_topics=8, n_chains=2, n_iter=14, burn_in=6, sample_every=2, n_shards=3, seed=3,
              init=init, sparse_init_frac=0.25, sparse_init_every=1, optimize_alpha=True,
              optimize_every=4, checkpoint_every=3, log_lik_every=2)
    full = LDA(**kw).fit(corpus)
    resumed = resume_after_kill(LDA, kw, corpus, tmp_path / "run.ckpt.npz", kill_at=10)
    assert_same_fit(resumed, full, "z_", "alpha_")


def test_params_are_validated():
    corpus = tiny_corpus()
    with pytest.raises(ValueError, match="burn_in"):
        LDA(n_iter=10, burn_in=10).fit(corpus)
    with pytest.raises(ValueError, match="init"):
        LDA(n_topics=3, n_iter=10, burn_in=5, sample_every=5, init="kmeans").fit(corpus)
    with pytest.raises(ValueError, match="n_topics"):
        LDA(n_topics=0).fit(corpus)
    with pytest.raises(ValueError, match="sparse"):
        LDA(n_topics=3, n_iter=10, burn_in=2, sample_every=1, init="sparse",
            sparse_init_frac=0.1, sparse_init_every=5).fit(corpus)
    m = LDA(n_topics=3)
    assert m.alpha is None and m.get_params()["n_topics"] == 3  # __init__ stores unchanged


def test_shards_agree_with_one_shard_in_distribution():
    """The partition scheme reaches the sequential sampler's log-likelihood on a block corpus."""
    corpus = block_corpus(300)
    lls = [LDA(n_topics=3, alpha=0.1, n_chains=1, n_iter=40, burn_in=39, sample_every=1, seed=2,
               n_shards=s, init=init).fit(corpus).log_lik_[-1, 0]
           for s in (1, 4) for init in ("online", "random")]
    assert max(lls) - min(lls) < 0.02


def test_layout_partitions_tokens_into_blocks():
    corpus = small_corpus()
    m = LDA(n_topics=5, n_shards=3, n_iter=2, burn_in=1, sample_every=1)
    m._check_params(corpus)
    m._build_layout(corpus)
    lay = m._lay
    ord_pos = lay["ord_pos"]
    np.testing.assert_array_equal(np.sort(ord_pos), np.arange(corpus.n_tokens))
    np.testing.assert_array_equal(lay["ord_word"], corpus.term_ids[ord_pos])
    bvp = lay["block_visit_ptr"]
    assert bvp[0, 0] == 0 and bvp[-1, -1] == len(lay["visit_doc"])
    np.testing.assert_array_equal(bvp[1:, 0], bvp[:-1, -1])
    doc_of = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    group_of = {}
    for s in range(3):
        for g in range(3):
            docs = lay["visit_doc"][bvp[s, g]:bvp[s, g + 1]]
            assert (np.diff(docs) > 0).all()  # each doc visited once per block, in order
            assert ((docs >= lay["shard_doc"][s]) & (docs < lay["shard_doc"][s + 1])).all()
            for v in range(bvp[s, g], bvp[s, g + 1]):
                toks = ord_pos[lay["visit_ptr"][v]:lay["visit_ptr"][v + 1]]
                assert (doc_of[toks] == lay["visit_doc"][v]).all() and (np.diff(toks) > 0).all()
                for w in corpus.term_ids[toks].tolist():
                    assert group_of.setdefault(w, g) == g  # a term is in one group for all shards


@pytest.mark.long  # compiles the kernels for int64 term lists, which nothing else in the suite uses
def test_term_lists_switch_to_int64_when_a_term_count_needs_it():
    # K = 40000 leaves 15 bits for the count in an int32 entry; term 0 occurs 40,000 times
    docs = [[0] * 900 + [1, 2] * 50 for _ in range(45)]
    corpus = corpus_from_docs(docs, n_terms=3, fingerprint="frequent")
    m = LDA(n_topics=40000, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=2, seed=0)
    m.fit(corpus)
    assert m.wl_.dtype == np.int64 and m._lay["wshift"] == 63 - 16
    check_invariants(m, corpus)


def test_prefetch_takes_arrays_of_any_dtype_in_one_kernel():
    """The prefetch intrinsic declares one LLVM function per module whatever the array's dtype,
    and changes nothing it reads."""
    from numba import njit

    from models.common.kernels.prefetch import prefetch

    @njit
    def total(a, b):
        s = 0.0
        for i in range(len(a)):
            prefetch(a, min(i + 8, len(a) - 1))
            prefetch(b, min(i + 8, len(b) - 1))
            s += a[i] + b[i]
        return s

    a, b = np.arange(40, dtype=np.int64), np.arange(40, dtype=np.uint16)
    assert total(a, b) == 2 * a.sum()
    assert total(a.astype(np.float64), b.astype(np.int32)) == 2 * a.sum()
