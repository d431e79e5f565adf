"""PAM trainer: fast vs slow sampler, invariants, reproducibility, resume, alpha, document
model, model files, and recovery of a planted super/sub structure."""
import numpy as np
import pytest

from models import corpus_from_docs, synthetic_corpus
from models.pam.counts import build_doc_lists, ml_alpha, moment_match, z_from_doc_order
from models.pam.kernels import DocPairs, PamPrior, PamState
from models.pam.score_kernels import token_conditional
from models.pam.model import PAM, pam_log_lik
from tests.helpers import assert_same_fit, resume_after_kill, save_and_load
from tests.reference import pam_reference as ref


def tiny_corpus():
    docs = [[0, 1, 2, 1, 3], [4, 5, 4, 6], [0, 2, 2, 7, 1, 1], [5, 6, 7, 4], [3, 3, 0], [7]]
    return corpus_from_docs(docs, n_terms=8, fingerprint="tiny")


def small_corpus():
    return synthetic_corpus(100, 200, 25, seed=3, n_latent=5)


def planted_corpus(n_docs=200, seed=0, n_tokens=40):
    """2 super-topics, each owning 4 of 8 sub-topics; sub-topic j owns words 3j..3j+2.

    Document d belongs to super-topic d % 2, picks 3 of its 4 sub-topics and mixes them with
    Dirichlet(2) proportions. Returns the corpus and the planted pair key of every token."""
    rng = np.random.default_rng(seed)
    docs, keys = [], []
    for d in range(n_docs):
        sup = d % 2
        subs = 4 * sup + rng.choice(4, size=3, replace=False)
        sub = subs[rng.choice(3, size=n_tokens, p=rng.dirichlet([2.0] * 3))]
        docs.append(3 * sub + rng.integers(0, 3, size=n_tokens))
        keys.append(sup * 8 + sub)
    return corpus_from_docs(docs, n_terms=24, fingerprint="planted"), np.concatenate(keys)


def prepared(model, corpus):
    """A model with allocated, randomly initialised chains, before any sweep."""
    model._check_params(corpus)
    model.fingerprint_ = corpus.fingerprint
    model._build_layout(corpus)
    model._alloc_chain_state(corpus)
    model._start(corpus)
    return model


def check_invariants(model, corpus):
    s, s2 = model.n_super, model.n_sub
    for c in range(model.n_chains):
        z = model._z_doc(c)
        n_dij, n_wj, n_j = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, z, s, s2,
                                             corpus.n_terms)
        assigned = z >= 0
        assert (model.n_wj_[c] >= 0).all() and (model.n_j_[c] >= 0).all()
        assert (model.n_ds_[c] >= 0).all()
        assert model.n_wj_[c].sum() == assigned.sum() == model.n_j_[c].sum()
        np.testing.assert_array_equal(model.n_wj_[c], n_wj)
        np.testing.assert_array_equal(model.n_j_[c], n_j)
        np.testing.assert_array_equal(model.n_ds_[c], n_dij.sum(2))
        cap = model._lay["cap_ptr"]
        for d in range(corpus.n_docs):
            nnz = model.dp_nnz_[c, d]
            keys = model.dp_key_[c, cap[d]:cap[d] + nnz]
            counts = model.dp_count_[c, cap[d]:cap[d] + nnz]
            assert (counts > 0).all() and (np.diff(keys) > 0).all()
            dense = np.zeros(s * s2, dtype=np.int64)
            dense[keys] = counts
            np.testing.assert_array_equal(dense.reshape(s, s2), n_dij[d])
            assert dense.sum() == assigned[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]].sum()


# -- fast vs slow -------------------------------------------------------------------------------


def test_one_sweep_matches_reference_sampler():
    corpus = tiny_corpus()
    for seed in range(3):
        m = prepared(PAM(n_super=3, n_sub=4, alpha_root=0.3, beta=0.05, n_chains=1, n_iter=2,
                         burn_in=1, sample_every=1, n_shards=1, seed=seed), corpus)
        m.alpha_[0] = np.random.default_rng(seed).gamma(1.0, 0.3, size=(3, 4))
        z0 = m._z_doc(0)
        rng = m.rng_[0, 0].copy()
        z_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, z0, 3, 4, corpus.n_terms, 0.3,
                          m.alpha_[0], 0.05, rng)
        m._sweep(0)
        np.testing.assert_array_equal(m._z_doc(0), z_ref)
        np.testing.assert_array_equal(m.rng_[0, 0], rng)
        z_ref2 = ref.sweep(corpus.doc_ptr, corpus.term_ids, z_ref, 3, 4, corpus.n_terms, 0.3,
                           m.alpha_[0], 0.05, rng)
        m._sweep(0)
        np.testing.assert_array_equal(m._z_doc(0), z_ref2)


def test_one_sweep_matches_reference_on_synthetic_corpus_after_alpha_learning():
    corpus = synthetic_corpus(15, 40, 12, seed=2, n_latent=3)
    m = prepared(PAM(n_super=3, n_sub=5, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                     n_shards=1, seed=11), corpus)
    for _ in range(3):
        m._sweep(0)
        m._update_alpha(0)
    z0 = m._z_doc(0)
    rng = m.rng_[0, 0].copy()
    z_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, z0, 3, 5, corpus.n_terms, m._alpha_r(),
                      m.alpha_[0], m.beta, rng)
    m._sweep(0)
    np.testing.assert_array_equal(m._z_doc(0), z_ref)


def test_pruned_sweep_matches_reference_sampler():
    corpus = synthetic_corpus(20, 40, 12, seed=5, n_latent=3)
    m = prepared(PAM(n_super=3, n_sub=6, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                     n_shards=1, seed=7, sampler="pruned", prune_mass=0.6, prune_max_edges=3),
                 corpus)
    for _ in range(2):
        m._sweep(0)
        m._update_alpha(0)
    edge_ptr, edge_sub = m._make_edges(m.alpha_[0])[:2]
    keep = np.zeros((3, 6), dtype=bool)
    for i in range(3):
        keep[i, edge_sub[edge_ptr[i]:edge_ptr[i + 1]]] = True
    assert 3 <= keep.sum() < 18
    z0 = m._z_doc(0)
    rng = m.rng_[0, 0].copy()
    z_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, z0, 3, 6, corpus.n_terms, m._alpha_r(),
                      m.alpha_[0], m.beta, rng, edges=keep)
    m._sweep(0, pruned=True)
    np.testing.assert_array_equal(m._z_doc(0), z_ref)
    np.testing.assert_array_equal(m.rng_[0, 0], rng)


def test_conditionals_match_reference():
    corpus = small_corpus()
    m = prepared(PAM(n_super=4, n_sub=6, alpha_root=0.2, beta=0.03, n_chains=1, n_iter=2,
                     burn_in=1, sample_every=1, n_shards=2, seed=4), corpus)
    for _ in range(3):
        m._sweep(0)
        m._update_alpha(0)
    n_dij, n_wj, n_j = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 4, 6,
                                         corpus.n_terms)
    alpha = m.alpha_[0]
    rng = np.random.default_rng(0)
    for _ in range(40):
        d = int(rng.integers(corpus.n_docs))
        w = int(rng.integers(corpus.n_terms))
        fast = token_conditional(
            w, d, PamState(m.z_ord_[0], m.n_wj_[0], m.n_j_[0], m.n_ds_[0]),
            DocPairs(m._lay["cap_ptr"], m.dp_key_[0], m.dp_count_[0], m.dp_nnz_[0]),
            PamPrior(0.2, alpha, np.ascontiguousarray(alpha.T), alpha.sum(1), 0.03))
        slow = ref.conditional(w, d, n_dij, n_wj, n_j, 0.2, alpha, 0.03)
        np.testing.assert_allclose(fast, slow, rtol=1e-12, atol=0)


def test_log_lik_matches_reference_and_pam_log_lik():
    corpus = small_corpus()
    m = PAM(n_super=3, n_sub=4, n_chains=1, n_iter=3, burn_in=2, sample_every=1, log_lik_every=1,
            n_shards=2).fit(corpus)
    z = m._z_doc(0)
    want = ref.log_lik(corpus.doc_ptr, corpus.term_ids, z, 3, 4, corpus.n_terms, m._alpha_r(),
                       m.alpha_[0], m.beta)
    assert m.log_lik_.shape == (3, 1)
    np.testing.assert_allclose(m.log_lik_[-1, 0], want, rtol=1e-10)
    got = pam_log_lik(corpus, m.z_super_[0], m.z_sub_[0], 3, 4, m._alpha_r(), m.alpha_[0], m.beta)
    np.testing.assert_allclose(got, want, rtol=1e-10)


# -- alpha ----------------------------------------------------------------------------------------


def test_moment_matching_hand_case():
    # super-topic 0, two sub-topics: doc 0 has pairs (0,0) x2 -> ratios [1, 0]; doc 1 has (0,0)
    # and (0,1) -> [.5, .5]; doc 2 only uses super-topic 1? no: it is unassigned; super-topic 1
    # is used by nobody and keeps its row. With the pseudo-document [.5, .5]:
    # mean = [2/3, 1/3], var = [1/18, 1/18], m = [3, 3], S = 3, alpha_0 = [2, 1].
    doc_ptr = np.array([0, 2, 4, 5])
    z = np.array([0, 0, 0, 1, -1], dtype=np.int32)
    n_super, n_sub = 2, 2
    cap_ptr = np.array([0, 2, 4, 5])
    dp_key = np.zeros(5, np.int32)
    dp_count = np.zeros(5, np.int32)
    dp_nnz = np.zeros(3, np.int32)
    n_ds = np.zeros((3, n_super), np.int32)
    build_doc_lists(doc_ptr, z, n_sub, cap_ptr, dp_key, dp_count, dp_nnz, n_ds)
    alpha = np.array([[0.01, 0.01], [0.7, 0.2]])
    moment_match(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, np.ones(3, np.uint8), alpha)
    np.testing.assert_allclose(alpha, [[2.0, 1.0], [0.7, 0.2]], rtol=1e-12)


def test_moment_matching_without_dispersion_keeps_the_precision():
    # one doc with ratios (1/3, 1/3, 1/3), equal to the pseudo-document's: var = 0 everywhere
    doc_ptr = np.array([0, 3])
    z = np.array([0, 1, 2], dtype=np.int32)
    cap_ptr = np.array([0, 3])
    dp_key, dp_count = np.zeros(3, np.int32), np.zeros(3, np.int32)
    dp_nnz, n_ds = np.zeros(1, np.int32), np.zeros((1, 1), np.int32)
    build_doc_lists(doc_ptr, z, 3, cap_ptr, dp_key, dp_count, dp_nnz, n_ds)
    alpha = np.array([[0.2, 0.3, 1.0]])
    moment_match(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, np.ones(1, np.uint8), alpha)
    np.testing.assert_allclose(alpha, [[0.5, 0.5, 0.5]], rtol=1e-12)


def test_moment_matching_matches_reference():
    corpus = small_corpus()
    m = prepared(PAM(n_super=4, n_sub=7, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                     n_shards=1, seed=2, alpha_estimator="moments"), corpus)
    for _ in range(4):
        m._sweep(0)
    n_dij, _, _ = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 4, 7,
                                    corpus.n_terms)
    want = ref.moment_match(n_dij, m.alpha_[0])
    m._update_alpha(0)
    np.testing.assert_allclose(m.alpha_[0], want, rtol=1e-10)
    assert not np.allclose(want, 0.01)


def test_minka_matches_reference():
    corpus = small_corpus()
    m = prepared(PAM(n_super=4, n_sub=7, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                     n_shards=1, seed=2), corpus)
    for _ in range(3):
        m._sweep(0)
        m._update_alpha(0)
    m._sweep(0)
    n_dij, _, _ = ref.counts_from_z(corpus.doc_ptr, corpus.term_ids, m._z_doc(0), 4, 7,
                                    corpus.n_terms)
    want = ref.ml_alpha(n_dij, m.alpha_[0], PAM._FP_ITERS, PAM._FP_SHAPE, PAM._FP_SCALE)
    m._update_alpha(0)
    np.testing.assert_allclose(m.alpha_[0], want, rtol=1e-10)
    assert not np.allclose(want, 0.01)


def planted_doc_lists(n_sub):
    """Doc lists of the planted corpus's own pairs, its 8 sub-topics among ``n_sub``."""
    corpus, keys = planted_corpus()
    z = ((keys // 8) * n_sub + keys % 8).astype(np.int32)
    cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(np.diff(corpus.doc_ptr), 2 * n_sub))])
    dp_key = np.zeros(cap_ptr[-1], np.int32)
    dp_count = np.zeros(cap_ptr[-1], np.int32)
    dp_nnz, n_ds = np.zeros(corpus.n_docs, np.int32), np.zeros((corpus.n_docs, 2), np.int32)
    build_doc_lists(corpus.doc_ptr, z, n_sub, cap_ptr.astype(np.int64), dp_key, dp_count, dp_nnz,
                    n_ds)
    return (cap_ptr.astype(np.int64), dp_key, dp_count, dp_nnz, n_ds,
            np.ones(corpus.n_docs, np.uint8))


def test_minka_climbs_to_a_fixed_point_of_the_dm_posterior():
    lists = planted_doc_lists(8)
    cap_ptr, dp_key, dp_count, dp_nnz, n_ds, _ = lists
    z = np.concatenate([dp_key[cap_ptr[d]:cap_ptr[d] + dp_nnz[d]].repeat(
        dp_count[cap_ptr[d]:cap_ptr[d] + dp_nnz[d]]) for d in range(len(dp_nnz))])
    doc_ptr = np.concatenate([[0], np.cumsum(n_ds.sum(1))])
    n_dij, _, _ = ref.counts_from_z(doc_ptr, np.zeros(len(z), np.int64), z, 2, 8, 1)
    alpha = np.full((2, 8), 0.01)
    start = ref.dm_log_posterior(n_dij, alpha, 1.001, 1.0)
    ml_alpha(*lists, alpha, 500, 1.001, 1.0)
    top = ref.dm_log_posterior(n_dij, alpha, 1.001, 1.0)
    assert top > start + 100
    again = alpha.copy()
    ml_alpha(*lists, again, 1, 1.001, 1.0)
    np.testing.assert_allclose(again, alpha, rtol=1e-6)
    for f in (0.9, 1.1):  # a maximum along the precision too
        assert ref.dm_log_posterior(n_dij, alpha * f, 1.001, 1.0) < top
    # the 4 sub-topics a super-topic owns get its mass, the others stay at the prior's floor
    assert (alpha[0, :4] > 0.3).all() and (alpha[0, 4:] < 1e-3).all()
    assert (alpha[1, 4:] > 0.3).all() and (alpha[1, :4] < 1e-3).all()


def test_many_sub_topics_inflate_the_moment_precision_but_not_minkas():
    # The same planted pairs among 8, 64 and 256 sub-topics: the unused ones pull the moment
    # estimate's S_i towards s' (so theta_i ~ alpha_i / S_i ignores the document), Minka's
    # S_i does not move.
    S_mom, S_ml = [], []
    for n_sub in (8, 64, 256):
        lists = planted_doc_lists(n_sub)
        a = np.full((2, n_sub), 0.01)
        moment_match(*lists, a)
        S_mom.append(a.sum(1))
        a = np.full((2, n_sub), 0.01)
        ml_alpha(*lists, a, 500, 1.001, 1.0)
        S_ml.append(a.sum(1))
    S_mom, S_ml = np.array(S_mom), np.array(S_ml)
    assert (S_mom[1] > 40).all() and (S_mom[2] > 200).all()
    np.testing.assert_allclose(S_ml, np.broadcast_to(S_ml[0], S_ml.shape), rtol=0.01)
    assert ((S_ml > 1) & (S_ml < 3)).all()


# -- invariants, reproducibility, resume ---------------------------------------------------------


@pytest.mark.parametrize("init,n_shards,sampler", [("random", 1, "exact"), ("random", 3, "exact"),
                                                    ("sparse", 2, "exact"), ("random", 2, "pruned")])
def test_invariants_after_every_sweep(init, n_shards, sampler):
    corpus = small_corpus()
    seen = []

    def cb(model, it, n_iter):
        check_invariants(model, corpus)
        seen.append(it)

    m = PAM(n_super=3, n_sub=5, n_chains=2, n_iter=10, burn_in=8, sample_every=1, init=init,
            sparse_init_frac=0.25, sparse_init_every=2, n_shards=n_shards, seed=5, sampler=sampler,
            prune_start=2, prune_max_edges=2).fit(corpus, callback=cb)
    assert seen == list(range(1, 11))
    st = m.sweep_stats_
    assert st.shape == (10, 7) and (st[:, 2] == 2 * corpus.n_tokens).all() == (init == "random")
    assert st[:, 1].sum() == (4 if sampler == "pruned" else 0)


def test_same_seed_same_z_whatever_the_thread_count():
    corpus = small_corpus()
    for sampler in ("exact", "pruned"):
        kw = dict(n_super=4, n_sub=6, n_chains=2, n_iter=6, burn_in=4, sample_every=1, n_shards=4,
                  seed=9, sampler=sampler, prune_start=2)
        z1 = PAM(n_jobs=1, **kw).fit(corpus).z_
        z2 = PAM(n_jobs=2, **kw).fit(corpus).z_
        np.testing.assert_array_equal(z1, z2)
        assert z1.dtype == np.int32 and z1.shape == (2, corpus.n_tokens)
        assert (z1[0] != z1[1]).mean() > 0.3  # chains differ
    z3 = PAM(**dict(kw, seed=10)).fit(corpus).z_
    assert (z3[0] != z2[0]).mean() > 0.3


def test_sweep_order_is_shard_group_term_then_position():
    """The counting sorts give the stable order of (shard, term group, term) keys."""
    corpus = small_corpus()
    model = PAM(n_super=2, n_sub=3, n_shards=3)
    model._build_layout(corpus)
    lay = model._lay
    tok_shard = np.searchsorted(lay["shard_doc"], lay["ord_doc"], side="right") - 1
    terms = corpus.term_ids[lay["ord_pos"]]
    key = (tok_shard * 3 + lay["group"][terms]) * corpus.n_terms + terms
    np.testing.assert_array_equal(np.sort(lay["ord_pos"]), np.arange(corpus.n_tokens))
    key_doc = np.empty_like(key)
    key_doc[lay["ord_pos"]] = key
    np.testing.assert_array_equal(lay["ord_pos"], np.argsort(key_doc, kind="stable"))
    np.testing.assert_array_equal(np.repeat(lay["run_word"], np.diff(lay["run_ptr"])), terms)


def test_default_root_prior_is_fifty_over_the_super_topics():
    corpus = small_corpus()
    kw = dict(n_super=4, n_sub=6, n_chains=1, n_iter=4, burn_in=2, sample_every=1, seed=2)
    default = PAM(**kw).fit(corpus)
    assert default.alpha_root is None and default._alpha_r() == 12.5
    np.testing.assert_array_equal(default.z_, PAM(alpha_root=12.5, **kw).fit(corpus).z_)
    assert (default.z_ != PAM(alpha_root=0.01, **kw).fit(corpus).z_).mean() > 0.2


@pytest.mark.parametrize("init,sampler", [("random", "exact"), ("sparse", "pruned")])
def test_resume_from_checkpoint_equals_uninterrupted(tmp_path, init, sampler):
    corpus = small_corpus()
    kw = dict(n_super=3, n_sub=5, n_chains=2, n_iter=12, burn_in=6, sample_every=2, n_shards=3,
              seed=3, init=init, sparse_init_frac=0.25, sparse_init_every=1, sampler=sampler,
              prune_start=3, checkpoint_every=3, log_lik_every=2)
    full = PAM(**kw).fit(corpus)
    resumed = resume_after_kill(PAM, kw, corpus, tmp_path / "run.ckpt.npz", kill_at=10)
    assert_same_fit(resumed, full, "z_", "alpha_", "sweep_stats_")


def test_checkpoint_refuses_other_corpus_or_params(tmp_path):
    corpus = small_corpus()
    path = tmp_path / "c.npz"
    kw = dict(n_super=2, n_sub=3, n_chains=1, n_iter=4, burn_in=2, sample_every=1, checkpoint_every=2)
    PAM(**kw).fit(corpus, checkpoint=path)
    other = synthetic_corpus(100, 200, 25, seed=4, n_latent=5)
    with pytest.raises(ValueError, match="fingerprint") as e:
        PAM(**kw).fit(other, checkpoint=path)
    assert corpus.fingerprint in str(e.value) and other.fingerprint in str(e.value)
    with pytest.raises(ValueError, match="n_sub"):
        PAM(**dict(kw, n_sub=4)).fit(corpus, checkpoint=path)


def test_params_are_validated():
    corpus = tiny_corpus()
    with pytest.raises(ValueError, match="burn_in"):
        PAM(n_iter=10, burn_in=10).fit(corpus)
    with pytest.raises(ValueError, match="n_sub"):
        PAM(n_super=2, n_sub=1).fit(corpus)
    with pytest.raises(ValueError, match="sampler"):
        PAM(n_super=2, n_sub=3, n_iter=10, burn_in=5, sample_every=5, sampler="fast").fit(corpus)
    with pytest.raises(ValueError, match="alpha_root"):
        PAM(n_super=2, n_sub=3, alpha_root=0, n_iter=10, burn_in=5, sample_every=5).fit(corpus)
    with pytest.raises(ValueError, match="alpha_estimator"):
        PAM(n_super=2, n_sub=3, n_iter=10, burn_in=5, sample_every=5,
            alpha_estimator="ml").fit(corpus)
    m = PAM(n_super=3)
    assert m.get_params()["n_super"] == 3 and m.n_sub == 800  # __init__ stores unchanged


# -- document model, views, files ---------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    corpus = synthetic_corpus(60, 40, 20, seed=7, n_latent=4)
    m = PAM(n_super=3, n_sub=5, n_chains=2, n_iter=16, burn_in=8, sample_every=4, n_shards=2,
            seed=1).fit(corpus)
    return corpus, m


def test_p_w_d_rows_are_distributions_and_match_formula(fitted):
    corpus, m = fitted
    terms = np.arange(corpus.n_terms)
    p = m.p_w_d(terms)
    assert p.shape == (corpus.n_docs, corpus.n_terms) and p.dtype == np.float64
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    assert (p > 0).all()
    per = m.p_w_d_per_sample(terms)
    assert per.shape == (2, 2, corpus.n_docs, corpus.n_terms)
    np.testing.assert_allclose(per.mean((0, 1)), p, rtol=1e-12)
    # chain 1, sample 0 straight from its dense counts
    cs = 1 * m.n_samples_ + 0
    V, s, s2 = corpus.n_terms, m.n_super, m.n_sub
    n_dij = np.zeros((corpus.n_docs, s, s2))
    for d in range(corpus.n_docs):
        sup, sub, cnt = m._doc_pairs(cs, d)
        n_dij[d, sup, sub] = cnt
    n_wj = (m.phi_matrix(cs) * (m.n_j_samples_[cs][:, None] + V * m.beta) - m.beta).T
    want = ref.p_w_d(n_dij, np.rint(n_wj), m.n_j_samples_[cs], m._alpha_r(), m.alpha_samples_[cs],
                     m.beta)
    np.testing.assert_allclose(per[1, 0], want, rtol=1e-12)
    sub_terms = np.array([3, 0, 3, 17])
    np.testing.assert_allclose(m.p_w_d(sub_terms), p[:, sub_terms], rtol=1e-12)


def test_views(fitted):
    corpus, m = fitted
    ids, probs = m.doc_super_topics(3, top=3)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    ids, probs = m.doc_topics(3, top=m.n_sub)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    ids, probs = m.topic_words(2, top=corpus.n_terms)
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-12)
    corr = m.correlations(chain=1, top_subs=2)
    assert len(corr) == 3 and abs(sum(r["share"] for r in corr) - 1) < 1e-12
    assert all(len(r["subs"]) == 2 and r["subs"][0][1] >= r["subs"][1][1] for r in corr)


def test_save_load_round_trip_and_fingerprint_refusal(fitted, tmp_path):
    corpus, m = fitted
    path = tmp_path / "pam.npz"
    m2 = save_and_load(m, path, corpus.fingerprint)
    terms = np.arange(3)
    np.testing.assert_array_equal(m2.p_w_d_per_sample(terms), m.p_w_d_per_sample(terms))
    with pytest.raises(ValueError) as e:
        PAM.load(path, fingerprint="lucene:robust04")
    assert corpus.fingerprint in str(e.value) and "lucene:robust04" in str(e.value)
    m.save(path, full=True)
    np.testing.assert_array_equal(PAM.load(path).z_, m.z_)
    from models import LDA

    with pytest.raises(ValueError, match="not LDA"):
        LDA.load(path)


# -- recovery ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["exact", "pruned"])
def test_planted_super_sub_structure_recovered(sampler):
    # From random starts, PAM with alpha_r = 0.01 freezes each document's super-topic during
    # the first sweep, before sub-topics exist (tomotopy's PAModel does the same on this
    # corpus), so the planted state is tested as an attractor: 40 % of the tokens get a
    # uniformly random (super, sub) pair, and 30 sweeps with alpha learning must restore it.
    corpus, planted = planted_corpus()
    m = prepared(PAM(n_super=2, n_sub=8, alpha_root=0.01, n_chains=1, n_iter=31, burn_in=30,
                     sample_every=1, n_shards=2, seed=2, sampler=sampler, prune_start=0, prune_max_edges=4),
                 corpus)
    rng = np.random.default_rng(0)
    z = planted.copy()
    noisy = rng.random(len(z)) < 0.4
    z[noisy] = rng.integers(0, 16, size=noisy.sum())
    z_from_doc_order(z.astype(np.int32), m._lay["ord_pos"], m.z_ord_[0])
    m._rebuild_counts(corpus, 0)
    for it in range(30):
        m._sweep(0, m._is_pruned(it))
        m._update_alpha(0)
    n_wj = m.n_wj_[0]
    # every sub-topic is one planted word block (sub-topic labels are kept by the start)
    block = n_wj.reshape(8, 3, 8).sum(1)
    np.testing.assert_array_equal(block.argmax(0), np.arange(8))
    assert (block.max(0) > 0.9 * block.sum(0)).all()
    # every super-topic puts its alpha on the four sub-topics of its planted super-topic
    for sup in range(2):
        top = set(np.argsort(-m.alpha_[0, sup])[:4].tolist())
        assert top == set(range(4 * sup, 4 * sup + 4))
    # and documents sit in their planted super-topic
    n_ds = m.n_ds_[0]
    assert (n_ds.argmax(1) == np.arange(corpus.n_docs) % 2).mean() > 0.9, (n_ds.argmax(1) == np.arange(corpus.n_docs) % 2).mean()
