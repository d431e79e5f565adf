"""Grouped LDA: conditionals and sweeps equal to the reference, count invariants, determinism,
resume, model files and the registry, and the LDA tools' view of a gLDA model."""
import numpy as np
import pytest

from models import LDA, corpus_from_docs, registry, synthetic_corpus
from models.glda import kernels as G_
from models.glda import sparse_kernels as GS
from models.glda import sweep_kernels as SW_
from models.glda.model import GroupedLDA, doc_runs
from models.common.kernels.rng import make_rng_states
from models.lda.model import joint_log_lik
from tests.helpers import assert_same_fit, resume_after_kill, save_and_load
from tests.reference import glda_reference as ref


def block_corpus(n_docs=60, seed=0):
    """3 topics with 3 disjoint words each; every doc draws 12 tokens from one block."""
    rng = np.random.default_rng(seed)
    docs = [3 * (d % 3) + rng.integers(0, 3, size=12) for d in range(n_docs)]
    return corpus_from_docs(docs, n_terms=9, fingerprint="block")


def long_group_corpus():
    """Docs whose groups (group_size 40) and (doc, term) runs exceed the 16 factors the kernel
    multiplies in one product (longer groups go LINEAR_MAX tokens at a time)."""
    rng = np.random.default_rng(5)
    docs = [[0] * 20 + list(rng.integers(0, 8, size=20)), list(rng.integers(0, 8, size=37)),
            [3] * 18 + [4] * 3, [], [1, 2, 1]]
    return corpus_from_docs(docs, n_terms=8, fingerprint="long")


def small_corpus():
    return synthetic_corpus(80, 200, 30, seed=3, n_latent=5)


def prepared(model, corpus, sweeps=0):
    """A model with initialised chains after ``sweeps`` sweeps."""
    model._check_params(corpus)
    model.fingerprint_ = corpus.fingerprint
    model._build_layout(corpus)
    model._alloc_chain_state(corpus)
    model._start(corpus)
    for it in range(sweeps):
        model._step(corpus, it)
    return model


def check_invariants(m, corpus):
    lay = m._lay
    G = np.diff(lay["grp_ptr"])
    tok_doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    for c in range(m.n_chains):
        g, zg = m.g_[c], m.zg_[c]
        assert (g >= 0).all() and (g < G[tok_doc]).all()
        assert (zg >= 0).all() and (zg < m.n_topics).all()
        n_kw, n_k, n_dk, _ = ref.counts(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], g, zg,
                                        m.n_topics, corpus.n_terms)
        np.testing.assert_array_equal(m.n_kw_[c], n_kw)
        np.testing.assert_array_equal(m.n_k_[c], n_k)
        assert m.n_k_[c].sum() == corpus.n_tokens
        np.testing.assert_array_equal(n_dk.sum(1), np.diff(corpus.doc_ptr))
        if m.restricted:  # groups are the (doc, term) runs, fixed
            _, _, tok_run, first = doc_runs(corpus)
            np.testing.assert_array_equal(g, tok_run - first[tok_doc])


@pytest.mark.parametrize("group_size", [4.0, 2.5])
def test_layout_has_ceil_n_over_group_size_groups(group_size):
    corpus = small_corpus()
    m = prepared(GroupedLDA(n_topics=5, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                            group_size=group_size), corpus)
    np.testing.assert_array_equal(np.diff(m.group_ptr_),
                                  np.ceil(np.diff(corpus.doc_ptr) / group_size).astype(int))


@pytest.mark.parametrize("restricted,doc_counts", [(False, "groups"), (False, "tokens"),
                                                   (True, "groups")])
def test_invariants_after_every_sweep(restricted, doc_counts):
    corpus = small_corpus()
    m = prepared(GroupedLDA(n_topics=6, n_chains=2, n_iter=5, burn_in=4, sample_every=1, seed=2,
                            restricted=restricted, doc_counts=doc_counts), corpus)
    check_invariants(m, corpus)
    for it in range(4):
        m._step(corpus, it)
        check_invariants(m, corpus)


def _eq2_kernel(m, corpus, c, i, d):
    """Kernel eq. 2 for token i with the token removed: probability of every doc group."""
    lay = m._lay
    g0, G = lay["grp_ptr"][d], lay["grp_ptr"][d + 1] - lay["grp_ptr"][d]
    zg = m.zg_[c]
    n_kw, n_k = m.n_kw_[c].copy(), m.n_k_[c].copy()
    y, k_i = corpus.term_ids[i], zg[g0 + m.g_[c][i]]
    n_kw[y, k_i] -= 1
    n_k[k_i] -= 1
    n_grp = np.bincount(zg[g0:g0 + G], minlength=m.n_topics)
    topics = np.flatnonzero(n_grp)
    K, vbeta = m.n_topics, m.beta * corpus.n_terms
    inv1 = 1.0 / (vbeta + n_k)
    wbits, gbits = np.zeros((corpus.n_terms, (K + 63) // 64), np.uint64), np.zeros((K + 63) // 64, np.uint64)
    GS.build_word_bits(n_kw, wbits)
    GS.build_word_bits(n_grp[None, :], gbits[None, :])
    tk, tw = np.zeros(K, np.int64), np.zeros(K)
    cnt, wsum = G_.word_part(y, n_grp, gbits, wbits, n_kw, inv1, tk, tw)
    assert np.all(np.diff(tk[:cnt]) > 0) and wsum == pytest.approx(tw[:cnt].sum(), rel=1e-14)
    per_topic = m.beta * n_grp * inv1
    per_topic[tk[:cnt]] += tw[:cnt]
    per_topic /= per_topic[topics].sum()
    # spread a topic's mass uniformly over its groups, as the kernel's draw does
    return np.array([per_topic[zg[g0 + h]] / n_grp[zg[g0 + h]] for h in range(G)])


def _eq3_kernel(m, corpus, c, d, h):
    """Kernel eq. 3 for group h of doc d with its tokens removed: p(z_g = k), normalised."""
    lay = m._lay
    g0 = lay["grp_ptr"][d]
    g, zg = m.g_[c], m.zg_[c]
    lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
    members = [i for i in range(lo, hi) if g[i] == h]
    words = corpus.term_ids[members].astype(np.int64)
    offs = np.array([np.sum(words[:j] == words[j]) for j in range(len(words))], dtype=np.int64)
    k_h = zg[g0 + h]
    n_kw, n_k = m.n_kw_[c].copy(), m.n_k_[c].copy()
    np.subtract.at(n_kw, (words, k_h), 1)
    n_k[k_h] -= len(words)
    if m._unit():  # token counts
        m_dk = np.bincount(zg[g0 + g[lo:hi]], minlength=m.n_topics)
        m_dk[k_h] -= len(words)
    else:
        m_dk = np.bincount(zg[g0:lay["grp_ptr"][d + 1]], minlength=m.n_topics)
        m_dk[k_h] -= 1
    w = np.zeros(m.n_topics)
    wbits = np.zeros((corpus.n_terms, (m.n_topics + 63) // 64), np.uint64)
    GS.build_word_bits(n_kw, wbits)
    gw = GS.GroupWeights(m_dk, np.zeros((m.n_topics + 63) // 64, np.uint64), wbits, n_kw,
                         np.zeros((m.n_topics, G_.LINEAR_MAX + 1)), m.alpha_[c], m._unit(), m.beta)
    total = GS.group_topic_weights(words, offs, len(words), gw, n_k, m.beta * corpus.n_terms, w,
                                   np.zeros((2, m.n_topics)), long_cache(m.alpha_[c]))
    return w / total, len(words)


@pytest.mark.parametrize("restricted,group_size,doc_counts", [
    (False, 4.0, "groups"), (False, 40.0, "groups"), (False, 40.0, "tokens"), (True, 4.0, "groups")])
def test_conditionals_match_reference(restricted, group_size, doc_counts):
    corpus = long_group_corpus()
    m = prepared(GroupedLDA(n_topics=5, alpha=0.3, beta=0.05, n_chains=1, n_iter=3, burn_in=2,
                            sample_every=1, seed=1, restricted=restricted, doc_counts=doc_counts,
                            group_size=group_size), corpus, sweeps=2)
    lay, c = m._lay, 0
    args = (corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], m.g_[c], m.zg_[c], m.n_topics,
            corpus.n_terms)
    sizes = []
    for d in range(corpus.n_docs):
        if not restricted:
            for i in range(corpus.doc_ptr[d], corpus.doc_ptr[d + 1]):
                want = ref.eq2_probs(i, d, *args, m.beta)
                np.testing.assert_allclose(_eq2_kernel(m, corpus, c, i, d), want, rtol=0, atol=1e-12)
        for h in range(lay["grp_ptr"][d + 1] - lay["grp_ptr"][d]):
            got, n = _eq3_kernel(m, corpus, c, d, h)
            want = ref.eq3_probs(h, d, *args, m.alpha_[c], m.beta, restricted, doc_counts)
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
            assert abs(got.sum() - 1) < 1e-12
            sizes.append(n)
    assert max(sizes) > G_.LINEAR_MAX and min(sizes) <= G_.LINEAR_MAX  # both paths were compared


def long_cache(alpha):
    K = len(alpha)
    return GS.long_cache(np.zeros(K), np.zeros(K, np.int64), np.zeros((K + 63) // 64, np.uint64),
                         True)


def _eq3_sparse_kernel(m, corpus, c, d, h):
    """Kernel eq. 3 of a group of at most LINEAR_MAX tokens as its sparse sampler splits it:
    (normalised conditional, sparse parts (K,), smoothing parts (K,), smoothing total A S_n)."""
    lay, K = m._lay, m.n_topics
    g0 = lay["grp_ptr"][d]
    g, zg = m.g_[c], m.zg_[c]
    lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
    words = corpus.term_ids[[i for i in range(lo, hi) if g[i] == h]].astype(np.int64)
    dw, dc = np.unique(words, return_counts=True)
    k_h, n = zg[g0 + h], len(words)
    n_kw, n_k = m.n_kw_[c].copy(), m.n_k_[c].copy()
    np.subtract.at(n_kw, (words, k_h), 1)
    n_k[k_h] -= n
    if m._unit():
        m_dk = np.bincount(zg[g0 + g[lo:hi]], minlength=K)
        m_dk[k_h] -= n
    else:
        m_dk = np.bincount(zg[g0:lay["grp_ptr"][d + 1]], minlength=K)
        m_dk[k_h] -= 1
    vbeta, alpha = m.beta * corpus.n_terms, m.alpha_[c]
    tk, tw = np.zeros(K, np.int64), np.zeros(K)
    wbits, dbits = np.zeros((corpus.n_terms, (K + 63) // 64), np.uint64), np.zeros((K + 63) // 64, np.uint64)
    GS.build_word_bits(n_kw, wbits)
    GS.build_word_bits(m_dk[None, :], dbits[None, :])
    S, D, inv_r = np.zeros(G_.LINEAR_MAX + 1), np.zeros(G_.LINEAR_MAX + 1), np.zeros((K, G_.LINEAR_MAX + 1))
    GS.smooth_sums(alpha, m._unit(), n_k, vbeta, n, S, inv_r)
    GS.doc_sums(dbits, m_dk, alpha, m._unit(), inv_r, n, D)
    gw = GS.GroupWeights(m_dk, dbits, wbits, n_kw, inv_r, alpha, m._unit(), m.beta)
    cnt, total, A = GS.word_group_weights(dw, dc, len(dw), n, gw, tk, tw)
    word = np.zeros(K)
    word[tk[:cnt]] = tw[:cnt]
    assert np.all(np.diff(tk[:cnt]) > 0) and total == pytest.approx(word.sum(), rel=1e-14)
    assert np.all(n_kw[dw][:, tk[:cnt]].sum(0) > 0) and cnt == np.sum(n_kw[dw].sum(0) > 0)
    smooth = np.array([GS.smooth_weight(k, n, A, alpha, m._unit(), inv_r) for k in range(K)])
    doc = np.array([A * (m_dk[k] if not m._unit() == 1 else
                         (ref._rising(alpha[k] + m_dk[k], n) - ref._rising(alpha[k], n)))
                    * inv_r[k, n] for k in range(K)])
    w = word + doc + smooth
    return w / w.sum(), (word, doc, smooth), (A * D[n], A * S[n])


@pytest.mark.parametrize("restricted,doc_counts,K", [(False, "groups", 7), (False, "tokens", 7),
                                                     (True, "groups", 7), (False, "groups", 130)])
def test_sparse_group_topic_step_matches_reference(restricted, doc_counts, K):
    corpus = long_group_corpus()
    m = prepared(GroupedLDA(n_topics=K, alpha=0.3, beta=0.05, n_chains=1, n_iter=3, burn_in=2,
                            sample_every=1, seed=1, restricted=restricted, doc_counts=doc_counts,
                            group_size=3.0), corpus, sweeps=2)
    lay, c = m._lay, 0
    args = (corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], m.g_[c], m.zg_[c], m.n_topics,
            corpus.n_terms, m.alpha_[c], m.beta, restricted, doc_counts)
    n_checked = n_sparse = 0
    for d in range(corpus.n_docs):
        for h in range(lay["grp_ptr"][d + 1] - lay["grp_ptr"][d]):
            if np.sum(m.g_[c][corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] == h) > G_.LINEAR_MAX:
                continue
            got, parts, totals = _eq3_sparse_kernel(m, corpus, c, d, h)
            np.testing.assert_allclose(got, ref.eq3_probs(h, d, *args), rtol=0, atol=1e-12)
            for part, want, total in zip(parts, ref.eq3_parts(h, d, *args), (None,) + totals):
                np.testing.assert_allclose(part, want, rtol=1e-12, atol=0)
                if total is not None:
                    assert total == pytest.approx(part.sum(), rel=1e-12)
            n_checked += 1
            n_sparse += np.sum(parts[0] + parts[1] == 0)
    assert n_checked > 10 and n_sparse > 10  # the sparse part does skip topics


@pytest.mark.parametrize("unit", [0, 1])
def test_smoothing_sums_follow_count_moves(unit):
    rng = np.random.default_rng(0)
    alpha, vbeta, n_max = rng.uniform(0.05, 2.0, 6), 3.7, G_.LINEAR_MAX
    n_k = rng.integers(0, 50, 6)
    S, inv_r = np.zeros(n_max + 1), np.zeros((6, n_max + 1))
    fresh, fresh_inv = np.zeros(n_max + 1), np.zeros((6, n_max + 1))
    GS.smooth_sums(alpha, unit, n_k, vbeta, n_max, S, inv_r)
    for _ in range(300):
        k, step = rng.integers(6), rng.integers(-3, 4)
        if n_k[k] + step >= 0:
            n_k[k] += step
            GS.smooth_move(S, inv_r, n_max, k, alpha[k], unit, vbeta + n_k[k])
    GS.smooth_sums(alpha, unit, n_k, vbeta, n_max, fresh, fresh_inv)
    np.testing.assert_array_equal(inv_r, fresh_inv)
    np.testing.assert_allclose(S, fresh, rtol=1e-12)
    a = [ref._rising(alpha[k], 5) if unit else alpha[k] for k in range(6)]
    assert fresh[5] == pytest.approx(sum(a[k] / ref._rising(vbeta + n_k[k], 5) for k in range(6)),
                                     rel=1e-13)


@pytest.mark.parametrize("unit", [0, 1])
def test_doc_sums_follow_topic_moves(unit):
    rng = np.random.default_rng(1)
    K, vbeta, n_max = 70, 2.5, G_.LINEAR_MAX
    alpha, n_k, m_dk = rng.uniform(0.05, 2.0, K), rng.integers(0, 40, K), rng.integers(0, 3, K)
    S, D, inv_r = np.zeros(n_max + 1), np.zeros(n_max + 1), np.zeros((K, n_max + 1))
    bits = np.zeros((1, 2), np.uint64)
    GS.smooth_sums(alpha, unit, n_k, vbeta, n_max, S, inv_r)
    GS.build_word_bits(m_dk[None, :], bits)
    GS.doc_sums(bits[0], m_dk, alpha, unit, inv_r, n_max, D)
    for _ in range(300):
        k, step, dm = rng.integers(K), rng.integers(-3, 4), rng.integers(-1, 2)
        if n_k[k] + step >= 0 and m_dk[k] + dm >= 0:
            n_k[k] += step
            m_dk[k] += dm
            GS.topic_move(S, D, inv_r, n_max, k, alpha[k], unit, vbeta + n_k[k], m_dk[k] - dm, m_dk[k])
    fresh_s, fresh_d, fresh_inv = np.zeros(n_max + 1), np.zeros(n_max + 1), np.zeros((K, n_max + 1))
    GS.smooth_sums(alpha, unit, n_k, vbeta, n_max, fresh_s, fresh_inv)
    GS.build_word_bits(m_dk[None, :], bits)
    GS.doc_sums(bits[0], m_dk, alpha, unit, fresh_inv, n_max, fresh_d)
    np.testing.assert_array_equal(inv_r, fresh_inv)
    np.testing.assert_allclose(S, fresh_s, rtol=1e-12)
    np.testing.assert_allclose(D, fresh_d, rtol=1e-12)
    b = [(ref._rising(alpha[k] + m_dk[k], 3) - ref._rising(alpha[k], 3)) if unit else m_dk[k]
         for k in range(K)]
    assert fresh_d[3] == pytest.approx(sum(b[k] / ref._rising(vbeta + n_k[k], 3) for k in range(K)),
                                       rel=1e-12)


def test_refinement_matches_reference():
    corpus = long_group_corpus()
    m = prepared(GroupedLDA(n_topics=3, n_chains=1, n_iter=3, burn_in=2, sample_every=1, seed=4,
                            group_size=2.0), corpus, sweeps=1)
    lay, g, zg = m._lay, m.g_[0], m.zg_[0]
    run_ptr, tok_run = lay["run_ptr"], lay["tok_run"]
    rg = [np.zeros(lay["max_len"], dtype=np.int64) for _ in range(3)]
    n_checked = n_moved = 0
    for d in range(corpus.n_docs):
        g0, G = lay["grp_ptr"][d], lay["grp_ptr"][d + 1] - lay["grp_ptr"][d]
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        G_.run_groups_build(lo, hi, g, run_ptr, tok_run, *rg)
        for i in range(lo, hi):
            r = tok_run[i]
            for h in range(G):
                k0 = zg[g0 + h]
                got = h
                if run_ptr[r + 1] - run_ptr[r] > 1:  # the kernel asks only then
                    got = G_.refine_group(i, h, k0, g, zg, g0, run_ptr[r] - lo, *rg)
                want = ref.refine(i, h, k0, d, corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], g, zg)
                assert got == want
                n_checked += 1
                n_moved += got != h
    assert n_checked > 100 and n_moved > 10


def test_run_group_lists_follow_moves():
    """The run-group lists kept through token moves equal the lists built afresh."""
    corpus = long_group_corpus()
    m = prepared(GroupedLDA(n_topics=3, n_chains=1, n_iter=3, burn_in=2, sample_every=1, seed=4,
                            group_size=2.0), corpus, sweeps=1)
    lay, g = m._lay, m.g_[0].copy()
    run_ptr, tok_run = lay["run_ptr"], lay["tok_run"]
    rng = np.random.default_rng(0)

    def lists(rg, lo, hi):
        return {int(run_ptr[tok_run[i]] - lo): sorted(zip(rg[0][s:s + rg[2][s]], rg[1][s:s + rg[2][s]]))
                for i in range(lo, hi) for s in [run_ptr[tok_run[i]] - lo]
                if run_ptr[tok_run[i] + 1] - run_ptr[tok_run[i]] > 1}
    for d in range(corpus.n_docs):
        lo, hi, G = corpus.doc_ptr[d], corpus.doc_ptr[d + 1], np.diff(lay["grp_ptr"])[d]
        kept = [np.zeros(lay["max_len"], dtype=np.int64) for _ in range(3)]
        G_.run_groups_build(lo, hi, g, run_ptr, tok_run, *kept)
        for _ in range(3 * (hi - lo)):
            i, h = rng.integers(lo, hi), rng.integers(G)
            r = tok_run[i]
            if run_ptr[r + 1] - run_ptr[r] > 1 and h != g[i]:
                G_._run_remove(run_ptr[r] - lo, g[i], *kept)
                G_._run_add(run_ptr[r] - lo, h, *kept)
            g[i] = h
        fresh = [np.zeros(lay["max_len"], dtype=np.int64) for _ in range(3)]
        G_.run_groups_build(lo, hi, g, run_ptr, tok_run, *fresh)
        assert lists(kept, lo, hi) == lists(fresh, lo, hi)


@pytest.mark.parametrize("restricted,doc_counts,K,group_size", [
    (False, "groups", 4, 4.0), (False, "tokens", 4, 40.0), (True, "groups", 4, 4.0),
    (False, "groups", 70, 4.0)])
def test_online_start_matches_reference(restricted, doc_counts, K, group_size):
    """The online start draws every group's topic from eq. 3 given the groups before it, as
    the reference's pass does from the same groups and rng stream, and leaves the counts a
    rebuild from its topics gives."""
    corpus = long_group_corpus() if group_size > 4 else block_corpus(12)
    kw = dict(n_topics=K, alpha=0.5, beta=0.1, n_chains=2, n_iter=3, burn_in=2, sample_every=1,
              seed=6, restricted=restricted, doc_counts=doc_counts, group_size=group_size)
    m = prepared(GroupedLDA(init="online", **kw), corpus)
    check_invariants(m, corpus)
    lay = m._lay
    rng = make_rng_states(6, 2)
    for c in range(2):
        g = np.zeros(corpus.n_tokens, dtype=np.int32)
        G_.init_random(corpus.doc_ptr, lay["grp_ptr"], lay["tok_run"], lay["run_doc_first"],
                       not restricted, g, np.zeros(lay["grp_ptr"][-1], np.int32), 0, rng[c],
                       0, corpus.n_docs)
        np.testing.assert_array_equal(m.g_[c], g)
        want = ref.online_pass(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], g, K,
                               corpus.n_terms, m.alpha_[c], m.beta, rng[c], restricted, doc_counts)
        np.testing.assert_array_equal(m.zg_[c], want)
        np.testing.assert_array_equal(m.rng_[c, 0], rng[c])
    random = prepared(GroupedLDA(init="random", **kw), corpus)
    np.testing.assert_array_equal(random.g_, m.g_)  # the same groups, other topics
    assert (random.zg_ != m.zg_).any()


def test_online_start_ends_higher_than_random():
    corpus = small_corpus()
    kw = dict(n_topics=10, n_chains=2, n_iter=20, burn_in=19, sample_every=1, seed=1,
              log_lik_every=1)
    online = GroupedLDA(init="online", **kw).fit(corpus)
    random = GroupedLDA(init="random", **kw).fit(corpus)
    assert (online.log_lik_[0] > random.log_lik_[0]).all()
    assert online.log_lik_[-1].mean() > random.log_lik_[-1].mean()


def test_files_without_init_read_as_random_start():
    params = GroupedLDA(n_topics=4).get_params()
    del params["init"]
    assert GroupedLDA._from_params(params).init == "random"
    with pytest.raises(ValueError, match="init"):
        GroupedLDA(init="sparse")._check_params(small_corpus())


@pytest.mark.parametrize("restricted,doc_counts,K", [(False, "groups", 4), (False, "tokens", 4),
                                                     (True, "groups", 4), (False, "groups", 70)])
def test_one_sweep_matches_reference_sampler(restricted, doc_counts, K):
    corpus = long_group_corpus() if restricted else block_corpus(12)
    m = prepared(GroupedLDA(n_topics=K, alpha=0.5, beta=0.1, n_chains=1, n_iter=3, burn_in=2,
                            sample_every=1, seed=6, restricted=restricted, doc_counts=doc_counts),
                 corpus, sweeps=1)
    lay = m._lay
    g0, zg0, rng0 = m.g_[0].copy(), m.zg_[0].copy(), m.rng_[0, 0].copy()
    want_g, want_zg = ref.sweep(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], g0, zg0,
                                m.n_topics, corpus.n_terms, m.alpha_[0], m.beta, rng0, restricted,
                                doc_counts)
    m._step(corpus, 1)
    np.testing.assert_array_equal(m.g_[0], want_g)
    np.testing.assert_array_equal(m.zg_[0], want_zg)
    np.testing.assert_array_equal(m.rng_[0, 0], rng0)
    assert (want_zg != zg0).any()


@pytest.mark.parametrize("restricted,doc_counts", [(False, "groups"), (False, "tokens"), (True, "groups")])
def test_a_sharded_sweep_samples_each_shard_against_the_counts_at_its_start(restricted, doc_counts):
    """n_shards > 1: every shard's documents as the reference sweeps them against the chain's
    counts as the sweep started (the other shards' documents unchanged), on the shard's own
    stream; the counts are then those of the new assignments."""
    corpus = long_group_corpus() if restricted else block_corpus(12)
    m = prepared(GroupedLDA(n_topics=4, alpha=0.5, beta=0.1, n_chains=2, n_shards=3, n_iter=3,
                            burn_in=2, sample_every=1, seed=6, restricted=restricted,
                            doc_counts=doc_counts), corpus, sweeps=1)
    lay, shard_doc = m._lay, m._shard_doc
    assert len(np.unique(shard_doc)) == 4  # three shards, none empty
    want = []
    for c in range(2):
        g, zg, rng = m.g_[c].copy(), m.zg_[c].copy(), m.rng_[c].copy()
        for s in range(3):
            gs, zgs = ref.sweep(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], m.g_[c], m.zg_[c],
                                m.n_topics, corpus.n_terms, m.alpha_[c], m.beta, rng[s], restricted,
                                doc_counts, docs=(shard_doc[s], shard_doc[s + 1]))
            t0, t1 = corpus.doc_ptr[shard_doc[s]], corpus.doc_ptr[shard_doc[s + 1]]
            h0, h1 = lay["grp_ptr"][shard_doc[s]], lay["grp_ptr"][shard_doc[s + 1]]
            g[t0:t1], zg[h0:h1] = gs[t0:t1], zgs[h0:h1]
        want.append((g, zg, rng))
    m._step(corpus, 1)
    for c, (g, zg, rng) in enumerate(want):
        np.testing.assert_array_equal(m.g_[c], g)
        np.testing.assert_array_equal(m.zg_[c], zg)
        np.testing.assert_array_equal(m.rng_[c], rng)
    check_invariants(m, corpus)


def test_sharded_chains_same_model_whatever_the_threads_and_resume_bit_identically(tmp_path):
    corpus = small_corpus()
    kw = dict(n_topics=6, n_chains=2, n_shards=3, n_iter=6, burn_in=3, sample_every=1, seed=9,
              checkpoint_every=2)
    a = GroupedLDA(n_jobs=1, **kw).fit(corpus)
    b = GroupedLDA(n_jobs=2, **kw).fit(corpus)
    np.testing.assert_array_equal(a.gz_, b.gz_)
    np.testing.assert_array_equal(a.log_lik_, b.log_lik_)
    check_invariants(a, corpus)
    sequential = GroupedLDA(**dict(kw, n_shards=1)).fit(corpus)
    assert (sequential.z_ != a.z_).mean() > 0.3  # another chain, of about the same fit
    assert abs(sequential.log_lik_[-1].mean() - a.log_lik_[-1].mean()) < 0.05 * abs(a.log_lik_[-1].mean())
    resumed = resume_after_kill(GroupedLDA, kw, corpus, tmp_path / "run.ckpt.npz", kill_at=3)
    assert_same_fit(resumed, a, "z_", "gz_", "alpha_", "rng_")


def test_log_lik_is_log_p_w_z_of_token_topics():
    corpus = long_group_corpus()
    m = GroupedLDA(n_topics=4, alpha=0.2, beta=0.05, n_chains=2, n_iter=3, burn_in=2,
                   sample_every=1, log_lik_every=1).fit(corpus)
    for c in range(2):
        z = m.z_[c]
        want = ref.log_p_w_z(corpus.doc_ptr, corpus.term_ids, z, 4, corpus.n_terms,
                             np.full(4, 0.2), 0.05) / corpus.n_tokens
        assert m.log_lik_[-1, c] == pytest.approx(want, rel=1e-12)
        assert m.log_lik_[-1, c] == pytest.approx(joint_log_lik(corpus, z, 4, 0.2, 0.05), rel=1e-12)


def test_block_topics_recovered_and_above_lda():
    corpus = block_corpus(90)
    kw = dict(n_topics=3, alpha=0.1, beta=0.01, n_chains=1, n_iter=30, burn_in=29, sample_every=1,
              seed=0)
    m = GroupedLDA(**kw).fit(corpus)
    for k in range(3):
        words, _ = m.topic_words(k, top=3)
        assert len({int(w) // 3 for w in words}) == 1  # every topic is one block
    lda = LDA(init="random", n_shards=1, **kw).fit(corpus)
    assert m.log_lik_[-1, 0] >= lda.log_lik_[-1, 0] - 1e-9


def test_same_seed_same_state_whatever_the_thread_count():
    corpus = small_corpus()
    kw = dict(n_topics=6, n_chains=3, n_iter=4, burn_in=3, sample_every=1, seed=9)
    a = GroupedLDA(n_jobs=1, **kw).fit(corpus)
    b = GroupedLDA(n_jobs=2, **kw).fit(corpus)
    np.testing.assert_array_equal(a.gz_, b.gz_)
    np.testing.assert_array_equal(a.z_, b.z_)
    assert (a.z_[0] != a.z_[1]).mean() > 0.3  # chains differ
    other = GroupedLDA(n_jobs=2, **dict(kw, seed=10)).fit(corpus)
    assert (other.z_[0] != a.z_[0]).mean() > 0.3


def test_sweep_splits_chains_into_parts_without_changing_them():
    """Fewer threads than chains cut each chain's sweep into parts run in rounds: the state after
    a sweep is the same whatever the number of parts."""
    corpus = small_corpus()
    m = prepared(GroupedLDA(n_topics=7, n_chains=5, seed=4), corpus, sweeps=1)
    start = [m.g_.copy(), m.zg_.copy(), m.n_kw_.copy(), m.n_k_.copy(), m.rng_[:, 0].copy()]
    lay = m._lay
    states = []
    for n_threads in (1, 2, 3, 4, 8):  # parts per chain: 1, 2, 3, 4, 1
        g, zg, n_kw, n_k, rng = (a.copy() for a in start)
        wbits = G_.word_bits(n_kw)
        for _ in range(2):
            SW_.sweep_chains(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], lay["run_ptr"],
                            lay["tok_run"], g, zg, n_kw, n_k, m.alpha_, float(m.beta), m._unit(),
                            True, rng, lay["max_groups"], lay["max_len"], n_threads, wbits, corpus.n_terms)
            np.testing.assert_array_equal(wbits, G_.word_bits(n_kw))  # kept exact by the sweep
        states.append((g, zg, n_kw, n_k, rng))
    assert (states[0][1] != start[1]).mean() > 0.3
    for other in states[1:]:
        for a, b in zip(states[0], other):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("restricted", [False, True])
def test_resume_from_checkpoint_equals_uninterrupted(tmp_path, restricted):
    corpus = small_corpus()
    kw = dict(n_topics=5, n_chains=2, n_iter=12, burn_in=5, sample_every=2, seed=3,
              restricted=restricted, checkpoint_every=3, log_lik_every=2)
    full = GroupedLDA(**kw).fit(corpus)
    resumed = resume_after_kill(GroupedLDA, kw, corpus, tmp_path / "run.ckpt.npz", kill_at=8)
    assert_same_fit(resumed, full, "z_", "gz_", "alpha_")


def test_checkpoint_refuses_other_params(tmp_path):
    corpus = small_corpus()
    path = tmp_path / "c.npz"
    kw = dict(n_topics=4, n_chains=1, n_iter=4, burn_in=2, sample_every=1, checkpoint_every=2)
    GroupedLDA(**kw).fit(corpus, checkpoint=path)
    with pytest.raises(ValueError, match="group_size"):
        GroupedLDA(**dict(kw, group_size=3.0)).fit(corpus, checkpoint=path)
    with pytest.raises(ValueError, match="GroupedLDA.* checkpoint, not LDA"):
        LDA(**kw).fit(corpus, checkpoint=path)


def test_model_file_and_registry(tmp_path):
    corpus = small_corpus()
    cls = registry.model_class("glda")
    assert cls is GroupedLDA and "glda" in registry.kinds()
    m = cls(n_topics=5, n_chains=2, n_iter=4, burn_in=2, sample_every=1).fit(corpus)
    back = save_and_load(m, tmp_path / "m.npz", corpus.fingerprint)
    assert type(registry.load(tmp_path / "m.npz")) is GroupedLDA
    # P(w | d) is LDA's formula over the token-level counts of the kept samples
    p = back.p_w_d(np.arange(corpus.n_terms))
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-9)
    ids, probs = back.doc_topics(0, top=5)
    assert len(ids) == 5 and np.all(np.diff(probs) <= 0)
    m.save(tmp_path / "full.npz", full=True)
    np.testing.assert_array_equal(GroupedLDA.load(tmp_path / "full.npz").gz_, m.gz_)
    with pytest.raises(AttributeError, match="full=True"):
        back.gz_


def test_params_are_validated():
    corpus = small_corpus()
    base = dict(n_topics=4, n_iter=2, burn_in=1, sample_every=1)
    for bad, match in [(dict(group_size=0), "group_size"), (dict(group_size="x"), "group_size"),
                       (dict(restricted="yes"), "restricted"), (dict(doc_counts="x"), "doc_counts"), (dict(beta=-1.0), "beta"),
                       (dict(alpha=0.0), "alpha"), (dict(n_topics=0), "n_topics"),
                       (dict(burn_in=2), "burn_in")]:
        with pytest.raises(ValueError, match=match):
            GroupedLDA(**dict(base, **bad)).fit(corpus)


def test_the_shards_parameter_at_one_names_the_models_trained_before_it_existed():
    """n_shards=1 is the sampler of before: a file, settings hash or measured table without the
    parameter names the same model; another value is another model."""
    from retrieval.core.modelfiles import settings_hash, shaping

    params = GroupedLDA().get_params()
    assert params["n_shards"] == 1 and "n_shards" not in shaping("glda", params)
    assert shaping("glda", dict(params, n_shards=2))["n_shards"] == 2
    assert settings_hash("glda", {}) == settings_hash("glda", {"n_shards": 1}) != settings_hash("glda", {"n_shards": 2})
    old = {k: v for k, v in params.items() if k != "n_shards"}
    assert shaping("glda", old) == shaping("glda", params)
    assert shaping("lda", LDA().get_params())["n_shards"] == 4  # LDA's shards were always there


def test_a_shard_s_changes_are_read_off_its_tokens_and_taken_back_out_of_the_counts():
    rng = np.random.default_rng(0)
    V, K, N = 7, 5, 300
    terms = rng.integers(0, V, N).astype(np.int32)
    before = rng.integers(-1, K, N).astype(np.int32)  # -1: no topic yet (a start)
    after = np.where(rng.random(N) < 0.5, before, rng.integers(0, K, N)).astype(np.int32)

    def counts(z):
        n = np.zeros((V, K), np.int32)
        np.add.at(n, (terms[z >= 0], z[z >= 0]), 1)
        return n

    start = counts(before) + 3
    work, total = start + counts(after) - counts(before), np.zeros((V, K), np.int32)
    SW_.take_back_changes(terms, before, after, work, total)
    np.testing.assert_array_equal(work, start)
    np.testing.assert_array_equal(total, counts(after) - counts(before))
    assert total.any()


def test_a_checkpoint_written_before_shards_existed_resumes(tmp_path):
    """Such a checkpoint holds one stream a chain, (chains, 4), and no n_shards: it resumes as
    the one-shard chain it is."""
    from models.common import checkpoint as ckpt
    from tests.helpers import kill_after

    corpus = small_corpus()
    kw = dict(n_topics=6, n_chains=2, n_iter=6, burn_in=3, sample_every=1, seed=9, checkpoint_every=2)
    full = GroupedLDA(**kw).fit(corpus)
    path = tmp_path / "run.ckpt.npz"
    kill_after(GroupedLDA, kw, corpus, path, kill_at=3)
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    header = dict(f.header, params={k: v for k, v in f.header["params"].items() if k != "n_shards"})
    arrays = dict(f.arrays, rng=f.arrays["rng"][:, 0])
    assert arrays["rng"].shape == (2, 4)
    ckpt.write_model_file(path, header, arrays, kind=ckpt.CHECKPOINT_FORMAT)
    assert_same_fit(GroupedLDA(**kw).fit(corpus, checkpoint=path), full, "gz_", "rng_")
