"""Slow, obvious LDA fold-in written from the model: dense counts, Python loops.

A new document's tokens are resampled from

    p(z = k | rest) ~ (n_dk + alpha_k) (n_kw + beta) / (n_k + V beta)

with the kept sample's n_kw and n_k fixed (n_kw dense here). To reproduce the fast kernel's
draws exactly from the same uniforms, :func:`fold_doc` picks the topic from the same three
buckets in the same order (the word's topics ascending, the document's topics in the order the
fast kernel lists them, then the prior bucket) and keeps the running sums as it does.
"""
import math

import numpy as np

from models.common.kernels.rng import uniform


def conditional(w, ndk, n_kw, n_k, alpha, beta):
    """The fold-in conditional over all K topics (normalised)."""
    V = n_kw.shape[0]
    p = [(ndk[k] + alpha[k]) * (n_kw[w, k] + beta) / (n_k[k] + V * beta) for k in range(len(n_k))]
    s = math.fsum(p)
    return np.array([x / s for x in p])


def _draw(w, ndk, dlist, R, n_kw, inv, alpha, beta, u01):
    K = len(inv)
    q = []
    Q = 0.0
    for k in range(K):
        if n_kw[w, k] > 0:
            Q += (ndk[k] + alpha[k]) * n_kw[w, k] * inv[k]
            q.append((Q, k))
    s_cum, acc = [], 0.0
    for k in range(K):
        acc += alpha[k] * (beta * inv[k])
        s_cum.append(acc)
    u = u01 * (Q + R + s_cum[-1])
    if u < Q:
        return next((k for c, k in q if c > u), q[-1][1])
    u -= Q
    if u < R and dlist:
        for k in dlist:
            u -= ndk[k] * (beta * inv[k])
            if u < 0.0:
                return k
        return dlist[-1]
    u -= R
    return next((k for k in range(K) if s_cum[k] > u), K - 1)


def fold_doc(terms, n_kw, n_k, alpha, beta, n_iter, n_keep, state):
    """Fold in one document: online pass, ``n_iter`` sweeps, n_dk summed over the last
    ``n_keep``. Returns (z, summed counts (K,)); advances ``state``."""
    V, K = n_kw.shape
    inv = [1.0 / (n_k[k] + V * beta) for k in range(K)]
    ndk = [0] * K
    dlist = []  # topics with n_dk > 0, listed as the fast kernel lists them
    R = 0.0
    z = []

    def add(k):
        nonlocal R
        if ndk[k] == 0:
            dlist.append(k)
        ndk[k] += 1
        R += beta * inv[k]

    def remove(k):
        nonlocal R
        ndk[k] -= 1
        R -= beta * inv[k]
        if ndk[k] == 0:  # the last listed topic takes the removed one's place
            i = dlist.index(k)
            dlist[i] = dlist[-1]
            dlist.pop()

    for w in terms:
        k = _draw(w, ndk, dlist, R, n_kw, inv, alpha, beta, uniform(state))
        z.append(k)
        add(k)
    acc = np.zeros(K, dtype=np.int64)
    for it in range(n_iter):
        for i, w in enumerate(terms):
            remove(z[i])
            k = _draw(w, ndk, dlist, R, n_kw, inv, alpha, beta, uniform(state))
            z[i] = k
            add(k)
        if it >= n_iter - n_keep:
            acc += np.array(ndk)
    return np.array(z), acc


def p_w_d(summed, n_keep, n_kw, n_k, alpha, beta):
    """P(w | d) (V,) of a folded-in document with summed counts ``summed`` under one sample."""
    V = n_kw.shape[0]
    theta = (summed / n_keep + alpha) / (summed.sum() / n_keep + alpha.sum())
    phi = (n_kw + beta) / (n_k + V * beta)  # (V, K)
    return phi @ theta
