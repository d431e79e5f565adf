"""Slow, obvious PAM fold-in written from the model: dense counts, Python loops.

A new document's tokens are resampled from

    p(i, j | rest) ~ (n_i^d + a_r) / (n_i^d + S_i) * (n_ij^d + a_ij) * (n_jw + beta) / (n_j + V beta)

with the kept sample's n_jw, n_j and alpha fixed (n_jw dense here). To reproduce the fast
kernel's draws exactly from the same uniforms, :func:`fold_doc` picks the pair from the same two
buckets in the same order (the document's pairs in the order the fast kernel lists them, then
the super-topics, then the sub-topics of the chosen one) with the sums formed as it forms them.
"""
import math

import numpy as np

from models.common.kernels.rng import uniform


def conditional(w, n_i, n_pair, n_wj, n_j, alpha, alpha_r, beta):
    """The fold-in conditional (n_super, n_sub), normalised; n_pair is (n_super, n_sub)."""
    V = n_wj.shape[0]
    S, Sp = alpha.shape
    p = [[(n_i[i] + alpha_r) / (n_i[i] + alpha[i].sum()) * (n_pair[i, j] + alpha[i, j])
          * (n_wj[w, j] + beta) / (n_j[j] + V * beta) for j in range(Sp)] for i in range(S)]
    s = math.fsum(x for row in p for x in row)
    return np.array([[x / s for x in row] for row in p])


def tables(n_j, alpha, V, beta):
    """inv_j, S_i, E_i summed in the fast kernel's order."""
    S, Sp = alpha.shape
    inv = [1.0 / (n_j[j] + V * beta) for j in range(Sp)]
    S_i, E = [], []
    for i in range(S):
        s = e = 0.0
        for j in range(Sp):
            s += alpha[i, j]
            e += alpha[i, j] * inv[j]
        S_i.append(s)
        E.append(beta * e)
    return inv, S_i, E


def fold_doc(terms, n_wj, n_j, alpha, alpha_r, beta, n_iter, n_keep, state):
    """Fold in one document: online pass, ``n_iter`` sweeps, n_ij^d summed over the last
    ``n_keep``. Returns (pair keys z, summed counts (n_super, n_sub)); advances ``state``."""
    V = n_wj.shape[0]
    S, Sp = alpha.shape
    inv, S_i, E = tables(n_j, alpha, V, beta)
    G = {}
    for w in set(terms):
        g = list(E)
        for j in range(Sp):
            if n_wj[w, j] > 0:
                for i in range(S):
                    g[i] += alpha[i, j] * (n_wj[w, j] * inv[j])
        G[w] = g
    n_i = [0] * S
    n_pair = np.zeros((S, Sp), dtype=np.int64)
    plist = []  # present pair keys, listed as the fast kernel lists them

    def A(i):
        return (n_i[i] + alpha_r) / (n_i[i] + S_i[i])

    def draw(w, u01):
        dm, dcum = 0.0, []
        for key in plist:
            i, j = divmod(key, Sp)
            dm += A(i) * n_pair[i, j] * (n_wj[w, j] + beta) * inv[j]
            dcum.append(dm)
        pm, pcum = 0.0, []
        for i in range(S):
            pm += A(i) * G[w][i]
            pcum.append(pm)
        u = u01 * (dm + pm)
        if u < dm:
            return next(k for c, k in zip(dcum, plist) if c > u)
        u -= dm
        i = next((i for i in range(S) if pcum[i] > u), S - 1)
        rem = (u - (pcum[i - 1] if i > 0 else 0.0)) / A(i)
        acc = 0.0
        for j in range(Sp):
            acc += alpha[i, j] * (n_wj[w, j] + beta) * inv[j]
            if acc > rem:
                return i * Sp + j
        return i * Sp + Sp - 1

    def add(key):
        i, j = divmod(key, Sp)
        if n_pair[i, j] == 0:
            plist.append(key)
        n_pair[i, j] += 1
        n_i[i] += 1

    def remove(key):
        i, j = divmod(key, Sp)
        n_pair[i, j] -= 1
        n_i[i] -= 1
        if n_pair[i, j] == 0:  # the last listed pair takes the removed one's place
            plist[plist.index(key)] = plist[-1]
            plist.pop()

    z = []
    for w in terms:
        k = draw(w, uniform(state))
        z.append(k)
        add(k)
    acc = np.zeros((S, Sp), dtype=np.int64)
    for it in range(n_iter):
        for t, w in enumerate(terms):
            remove(z[t])
            z[t] = draw(w, uniform(state))
            add(z[t])
        if it >= n_iter - n_keep:
            acc += n_pair
    return np.array(z), acc


def mixture(summed, n_keep, n_d, alpha, alpha_r):
    """Sub-topic mixture (n_sub,) of a folded-in document with summed pair counts ``summed``
    (n_super, n_sub) under one sample: sum_i theta_i (m_ij + a_ij) / (m_i + S_i), m = summed / n_keep."""
    m = summed / n_keep
    m_i = m.sum(1)
    theta = (m_i + alpha_r) / (n_d + alpha.shape[0] * alpha_r)
    return (theta / (m_i + alpha.sum(1))) @ (m + alpha)


def p_w_d(summed, n_keep, n_d, n_wj, n_j, alpha, alpha_r, beta):
    """P_PAM(w | d) (V,) of the document under the sample: sum_j mixture_j phi_jw."""
    V = n_wj.shape[0]
    phi = (n_wj + beta) / (n_j + V * beta)  # (V, n_sub)
    return phi @ mixture(summed, n_keep, n_d, alpha, alpha_r)
