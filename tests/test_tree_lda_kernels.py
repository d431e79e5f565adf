"""Tree-LDA samplers (models/_kernels/tree_lda.py) against the slow twin (eq. 1 by enumeration)."""
import numpy as np
import pytest

from models._kernels import tree_lda as T
from models._kernels.rng import make_rng_states
from models.tree import build_tree
from tests.reference import tree_lda_reference as ref

K, V = 5, 9
SYN = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7]]


def random_state(seed, merge=False):
    rng = np.random.default_rng(seed)
    tree = build_tree(SYN, V, beta_root=0.05, beta_synset=2.0, merge=merge)
    lens = rng.integers(3, 15, size=12)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    term_ids = rng.integers(0, V, doc_ptr[-1]).astype(np.int32)
    z = rng.integers(0, K, doc_ptr[-1]).astype(np.int32)
    zp = np.array([rng.integers(tree.word_path_ptr[w], tree.word_path_ptr[w + 1])
                   for w in term_ids], dtype=np.int64)
    alpha = rng.uniform(0.05, 0.5, K)
    n_e, n_i, n_dk = ref.counts(tree, doc_ptr, term_ids, z, zp, K)
    n_e, n_i, n_dk = (a.astype(np.int32) for a in (n_e, n_i, n_dk))
    return tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk


def inv_of(tree, n_i):
    with np.errstate(divide="ignore"):
        return 1.0 / (tree.beta_sum[:, None] + n_i)


def args(tree):
    return (tree.word_path_ptr, tree.path_edges, tree.path_len, tree.parent)


@pytest.mark.parametrize("seed", range(4))
def test_bucket_conditionals_equal_naive_to_1e12(seed):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(seed)
    inv = inv_of(tree, n_i)
    prior = tree.path_prior()
    for d in range(len(doc_ptr) - 1):
        for w in range(V):
            want = ref.conditional(tree, w, d, n_e, n_i, n_dk, alpha)
            P = want.shape[1]
            s, r, q = np.zeros((K, P)), np.zeros((K, P)), np.zeros((K, P))
            T.fast_buckets(w, d, *args(tree), tree.beta, prior, n_e, n_dk, inv, alpha, s, r, q)
            T.s_bucket(w, *args(tree), prior, inv, alpha, s)
            fast = (s + r + q) / (s + r + q).sum()
            np.testing.assert_allclose(fast, want, rtol=1e-12, atol=0)
            naive = np.zeros((K, P))
            T.naive_masses(w, d, *args(tree), tree.beta, tree.beta_sum, n_e, n_i, n_dk, alpha, naive)
            np.testing.assert_allclose(naive / naive.sum(), want, rtol=1e-12, atol=0)
            # the refined bucket's bound holds
            assert s.sum() <= T.path_bound(tree, alpha)[w] * (1 + 1e-12)


@pytest.mark.parametrize("variant", range(6))
def test_every_sampler_draws_from_the_conditional(variant):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(7)
    inv = inv_of(tree, n_i)
    w, d = 1, 3  # word 1 has three paths
    want = ref.conditional(tree, w, d, n_e, n_i, n_dk, alpha)
    P = want.shape[1]
    rng = make_rng_states(variant + 1)
    bufs = [np.zeros((K, P)) for _ in range(3)]
    n = 40000
    order = np.argsort(-n_dk[d], kind="mergesort")
    hits = np.zeros(K * P)
    bound = T.path_bound(tree, alpha)
    for _ in range(n):
        hits[T.sample_token(variant, w, d, *args(tree), tree.beta, tree.beta_sum, tree.path_prior(),
                            bound, n_e, n_i, n_dk, inv, alpha, *bufs, rng, order)] += 1
    # every cell within 5 binomial standard deviations
    p = want.ravel()
    assert (np.abs(hits / n - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-9).all()


@pytest.mark.parametrize("variant", range(6))
def test_sweep_keeps_counts_and_same_seed_same_state(variant):
    tree, doc_ptr, term_ids, z, zp, alpha, n_e, n_i, n_dk = random_state(3, merge=True)
    inv = inv_of(tree, n_i)
    bound = T.path_bound(tree, alpha)
    runs = []
    for _ in range(2):
        st = [a.copy() for a in (z, zp, n_e, n_i, n_dk, inv)]
        rng = make_rng_states(11)
        for _ in range(3):
            T.sweep(variant, doc_ptr, term_ids, st[0], st[1], *args(tree), tree.beta,
                    tree.beta_sum, tree.path_prior(), bound, st[2], st[3], st[4], st[5], alpha, rng)
        runs.append(st)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    z2, zp2, n_e2, n_i2, n_dk2, inv2 = runs[0]
    assert (z2 != z).any()
    assert all(tree.path_word[p] == w for p, w in zip(zp2, term_ids))
    for got, want in zip((n_e2, n_i2, n_dk2), ref.counts(tree, doc_ptr, term_ids, z2, zp2, K)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(inv2[n_i2.sum(1) > 0], inv_of(tree, n_i2)[n_i2.sum(1) > 0], rtol=1e-15)
