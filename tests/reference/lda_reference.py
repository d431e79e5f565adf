"""Slow, obvious LDA Gibbs sampler written straight from the papers (STYLE rule 5).

Dense counts, Python loops, no caches. It visits tokens in the fast sampler's order for one
shard (document order) and draws from the same rng functions (``models.common.kernels.rng.uniform``),
so with equal state it must reproduce the fast sampler's z exactly. The decomposition it samples
from is SparseLDA's (Yao et al. 2009) with y_k = (n_dk + alpha_k) / (n_k + V beta): a word bucket
n_kw y_k over the topics of the term's row, in increasing topic order, then the dense bucket
beta y_k selected through an F+ tree over the y_k (Yu et al. 2015). Like the fast sampler, it
computes y_k as (n_dk + alpha_k) times the reciprocal 1 / (n_k + V beta), so both round
identically.
"""
import math

import numpy as np

from models.common.kernels.rng import uniform


def counts_from_z(doc_ptr, term_ids, z, n_topics, n_terms):
    """Dense n_dk (D, K), n_kw (V, K), n_k (K,) from doc-order z (z < 0 ignored)."""
    D = len(doc_ptr) - 1
    n_dk = np.zeros((D, n_topics), dtype=np.int64)
    n_kw = np.zeros((n_terms, n_topics), dtype=np.int64)
    n_k = np.zeros(n_topics, dtype=np.int64)
    for d in range(D):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            k = z[i]
            if k >= 0:
                n_dk[d, k] += 1
                n_kw[term_ids[i], k] += 1
                n_k[k] += 1
    return n_dk, n_kw, n_k


def conditional(w, d, n_dk, n_kw, n_k, alpha, beta):
    """p(z = k | rest) ~ (n_dk + alpha_k)(n_kw + beta)/(n_k + V beta) (Griffiths & Steyvers 2004, eq. 5)."""
    V = n_kw.shape[0]
    p = [(n_dk[d, k] + alpha[k]) * (n_kw[w, k] + beta) / (n_k[k] + V * beta) for k in range(len(n_k))]
    s = math.fsum(p)
    return np.array([x / s for x in p])


def _tree_select(leaves, u):
    """Leaf chosen by an F+ tree (pairwise sums over a power-of-two padding) for mass u."""
    P = 1
    while P < len(leaves):
        P *= 2
    tree = [0.0] * (2 * P)
    for k, v in enumerate(leaves):
        tree[P + k] = v
    for i in range(P - 1, 0, -1):
        tree[i] = tree[2 * i] + tree[2 * i + 1]
    i = 1
    while i < P:
        if u < tree[2 * i]:
            i = 2 * i
        else:
            u -= tree[2 * i]
            i = 2 * i + 1
    return min(i - P, len(leaves) - 1), tree[1]


def tree_total(leaves):
    return _tree_select(leaves, 0.0)[1]


def sweep(doc_ptr, term_ids, z, n_topics, n_terms, alpha, beta, rng_state):
    """One sequential Gibbs sweep (one shard): tokens in document order. Returns the new
    doc-order z; advances rng_state."""
    z = np.array(z, dtype=np.int64)
    D = len(doc_ptr) - 1
    n_dk, n_kw, n_k = counts_from_z(doc_ptr, term_ids, z, n_topics, n_terms)
    vbeta = n_terms * beta
    for d in range(D):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w, k_old = term_ids[i], z[i]
            if k_old >= 0:
                n_dk[d, k_old] -= 1
                n_kw[w, k_old] -= 1
                n_k[k_old] -= 1
            y = [(n_dk[d, k] + alpha[k]) * (1.0 / (n_k[k] + vbeta)) for k in range(n_topics)]
            word_topics = [k for k in range(n_topics) if n_kw[w, k] > 0]
            cum, wsum = [], 0.0
            for k in word_topics:
                wsum += float(n_kw[w, k]) * y[k]
                cum.append(wsum)
            u = uniform(rng_state) * (wsum + beta * tree_total(y))
            if u < wsum:
                j = 0
                while cum[j] <= u:
                    j += 1
                k_new = word_topics[j]
            else:
                k_new, _ = _tree_select(y, (u - wsum) * (1.0 / beta))
            n_dk[d, k_new] += 1
            n_kw[w, k_new] += 1
            n_k[k_new] += 1
            z[i] = k_new
    return z


def log_lik(doc_ptr, term_ids, z, n_topics, n_terms, alpha, beta):
    """Collapsed log p(w, z) (Griffiths & Steyvers 2004, eq. 2-3) per assigned token."""
    n_dk, n_kw, n_k = counts_from_z(doc_ptr, term_ids, z, n_topics, n_terms)
    lg = math.lgamma
    V = n_terms
    ll = 0.0
    for k in range(n_topics):
        ll += lg(V * beta) - lg(n_k[k] + V * beta)
        ll += sum(lg(n_kw[w, k] + beta) - lg(beta) for w in range(V))
    A = float(np.sum(alpha))
    for d in range(len(n_dk)):
        if n_dk[d].sum() == 0:
            continue
        ll += lg(A) - lg(n_dk[d].sum() + A)
        ll += sum(lg(n_dk[d, k] + alpha[k]) - lg(alpha[k]) for k in range(n_topics))
    return ll / n_k.sum()


def minka_alpha(n_dk, alpha, n_iter=200, shape=1.001, scale=1.0):
    """Minka's fixed point for a Dirichlet over doc-topic counts (Wallach 2008 eq. 2.52 / Mallet,
    with a Gamma(shape, scale) prior), using scipy's digamma."""
    from scipy.special import digamma

    alpha = np.array(alpha, dtype=np.float64)
    n_d = n_dk.sum(1)
    keep = n_d > 0
    n_dk, n_d = n_dk[keep], n_d[keep]
    for _ in range(n_iter):
        A = alpha.sum()
        denom = np.sum(digamma(n_d + A) - digamma(A))
        num = np.sum(digamma(n_dk + alpha) - digamma(alpha), axis=0)
        alpha = np.maximum((alpha * num + shape) / (denom + 1.0 / scale), 1e-10)
    return alpha
