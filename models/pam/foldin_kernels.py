"""Fold-in of new documents under kept PAM samples (arrays in, arrays out): collapsed Gibbs
sampling of the new documents' (super-topic, sub-topic) pairs with the sample's sub-topic-word
counts and alpha held fixed.

With n_jw, n_j and alpha fixed, the conditional of a token of word w in document d (the token
removed from the document's counts) is, as in training (:mod:`models.pam.kernels`),

    p(i, j) ~ A_i (n_ij^d + a_ij) c_j,   A_i = (n_i^d + a_r) / (n_i^d + S_i),   c_j = (n_jw + b) inv_j

with inv_j = 1 / (n_j + V b), drawn from two buckets visited in this order:

    doc bucket    A_i n_ij^d c_j over the pairs present in d (in the order the document lists them)
    prior bucket  A_i G_i over the super-topics, G_i = sum_j a_ij c_j = E_i + sum_{j: n_jw > 0} a_ij n_jw inv_j

with E_i = b sum_j a_ij inv_j; G is computed once per distinct word of the document. When the
prior bucket is hit at super-topic i, j is drawn from a_ij c_j by a scan over the sub-topics with
the rest of the same uniform.

A document is independent of every other one given the sample, so documents and samples run in
parallel, each on its own random stream (seed, sample, document): results never depend on the
number of threads. Pair keys are ``i * n_sub + j``. A kept sample cs's term-major counts are
``tw_sub/tw_count[tw_ptr[cs, w]:tw_ptr[cs, w + 1]]`` (ascending sub-topics).
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.foldin import doc_stream, fold_loop, keep_listed, listed_add, listed_remove, write_listed
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound, upper_bound


class PamSample(NamedTuple):
    """One kept sample, fixed during fold-in."""

    row: np.ndarray        # (V + 1,) the sample's tw_ptr row
    tw_sub: np.ndarray
    tw_count: np.ndarray
    inv: np.ndarray        # (n_sub,) 1 / (n_j + V b)
    alpha: np.ndarray      # (n_super, n_sub)
    alpha_T: np.ndarray    # alpha.T, contiguous
    alpha_sum: np.ndarray  # (n_super,) S_i
    E: np.ndarray          # (n_super,) b sum_j a_ij inv_j
    alpha_r: float
    beta: float


class DocState(NamedTuple):
    """One document's counts while it is folded in (dense over the pair keys)."""

    z: np.ndarray       # (n,) pair key of every token
    n_i: np.ndarray     # (n_super,) n_i^d
    n_pair: np.ndarray  # (n_super * n_sub,) n_ij^d
    plist: np.ndarray   # keys with n_ij^d > 0, in listing order
    ppos: np.ndarray    # position of a present key in plist
    acc: np.ndarray     # (n_super * n_sub,) n_ij^d summed over the kept sweeps
    alist: np.ndarray   # keys with acc > 0
    pbuf: np.ndarray    # doc-bucket cumulative masses
    qbuf: np.ndarray    # prior-bucket cumulative masses
    G: np.ndarray       # (distinct words, n_super)


@njit(cache=True)
def sample_tables(n_j, alpha, V, beta, inv, alpha_sum, E):
    """inv_j, S_i and E_i of one kept sample (overwrites them)."""
    n_super, n_sub = alpha.shape
    for j in range(n_sub):
        inv[j] = 1.0 / (n_j[j] + V * beta)
    for i in range(n_super):
        s = 0.0
        e = 0.0
        for j in range(n_sub):
            s += alpha[i, j]
            e += alpha[i, j] * inv[j]
        alpha_sum[i] = s
        E[i] = beta * e


@njit(cache=True)
def word_G(w, smp, out):
    """G_i of word w for every super-topic i (overwrites out)."""
    for i in range(len(out)):
        out[i] = smp.E[i]
    for q in range(smp.row[w], smp.row[w + 1]):
        j = smp.tw_sub[q]
        t = smp.tw_count[q] * smp.inv[j]
        for i in range(len(out)):
            out[i] += smp.alpha_T[j, i] * t


@njit(cache=True)
def _n_jw(smp, w, j):
    lo = smp.row[w]
    hi = smp.row[w + 1]
    pos = lower_bound(smp.tw_sub, lo, hi, j)
    if pos < hi and smp.tw_sub[pos] == j:
        return smp.tw_count[pos]
    return 0


@njit(cache=True)
def draw(w, Gw, smp, st, pn, u01):
    """The pair key of a token of word w (``Gw``: its G row) given the document's counts in
    ``st`` (``pn`` present pairs) for the uniform ``u01``."""
    n_super = len(smp.alpha_sum)
    n_sub = len(smp.inv)
    a_r = smp.alpha_r
    Dm = 0.0
    for q in range(pn):
        key = st.plist[q]
        i = key // n_sub
        j = key - i * n_sub
        A = (st.n_i[i] + a_r) / (st.n_i[i] + smp.alpha_sum[i])
        Dm += A * st.n_pair[key] * (_n_jw(smp, w, j) + smp.beta) * smp.inv[j]
        st.pbuf[q] = Dm
    P = 0.0
    for i in range(n_super):
        P += (st.n_i[i] + a_r) / (st.n_i[i] + smp.alpha_sum[i]) * Gw[i]
        st.qbuf[i] = P
    u = u01 * (Dm + P)
    if u < Dm:
        return np.int64(st.plist[upper_bound(st.pbuf, 0, pn - 1, u)])
    u -= Dm
    i = upper_bound(st.qbuf, 0, n_super - 1, u)
    prev = st.qbuf[i - 1] if i > 0 else 0.0
    rem = (u - prev) / ((st.n_i[i] + a_r) / (st.n_i[i] + smp.alpha_sum[i]))
    # scan j, meeting the word's row (ascending sub-topics) on the way
    lo = smp.row[w]
    hi = smp.row[w + 1]
    acc = 0.0
    for j in range(n_sub):
        nw = 0
        if lo < hi and smp.tw_sub[lo] == j:
            nw = smp.tw_count[lo]
            lo += 1
        acc += smp.alpha[i, j] * (nw + smp.beta) * smp.inv[j]
        if acc > rem:
            return np.int64(i * n_sub + j)
    return np.int64(i * n_sub + n_sub - 1)


@njit(cache=True, inline="always")
def _add(st, key, n_sub, pn):
    st.n_i[key // n_sub] += 1
    return listed_add(st.n_pair, st.plist, st.ppos, pn, key)


@njit(cache=True, inline="always")
def _remove(st, key, n_sub, pn):
    st.n_i[key // n_sub] -= 1
    return listed_remove(st.n_pair, st.plist, st.ppos, pn, key)


@njit(cache=True)
def _pass(doc, pn, state, resample):
    """The online pass (every token drawn given those before it) or, with ``resample``, a
    sweep (every token taken out of the counts, then drawn)."""
    terms, uid, smp, st = doc
    n_sub = len(smp.inv)
    for i in range(len(terms)):
        if resample:
            pn = _remove(st, st.z[i], n_sub, pn)
        k = draw(terms[i], st.G[uid[i]], smp, st, pn, uniform(state))
        st.z[i] = k
        pn = _add(st, k, n_sub, pn)
    return pn


@njit(cache=True)
def _keep(doc, pn, anz):
    st = doc[3]
    return keep_listed(st.n_pair, st.plist, pn, st.acc, st.alist, anz)


_fold = fold_loop(_pass, _keep)


@njit(cache=True)
def fold_doc(terms, uid, smp, st, n_iter, n_keep, state):
    """Fold in one document (tokens ``terms``, ``uid``: the row of ``st.G`` of every token) by
    :func:`models.common.kernels.foldin.fold_loop`; n_ij^d of the last ``n_keep`` sweeps is
    summed into ``st.acc`` (its keys in ``st.alist``). Returns the number of keys in
    ``st.alist``."""
    return _fold((terms, uid, smp, st), np.int64(0), n_iter, n_keep, state)[1]


@njit(cache=True)
def new_doc_state(terms, n_super, n_sub, n_keep):
    """A zeroed DocState for the tokens ``terms``, and their rows of ``G`` (distinct words)."""
    n = len(terms)
    words = np.unique(terms)
    uid = np.searchsorted(words, terms)
    P = n_super * n_sub
    cap = max(min(n, P), 1)
    st = DocState(np.empty(n, dtype=np.int64), np.zeros(n_super, dtype=np.int64),
                  np.zeros(P, dtype=np.int32), np.empty(cap, dtype=np.int64),
                  np.empty(P, dtype=np.int32), np.zeros(P, dtype=np.int32),
                  np.empty(max(min(n * n_keep, P), 1), dtype=np.int64), np.empty(cap),
                  np.empty(n_super), np.empty((len(words), n_super)))
    return st, words, uid


@njit(cache=True)
def make_sample(cs, tw_ptr, tw_sub, tw_count, n_j, alpha, alpha_r, beta):
    n_super, n_sub = alpha.shape[1], alpha.shape[2]
    V = tw_ptr.shape[1] - 1
    inv = np.empty(n_sub)
    alpha_sum = np.empty(n_super)
    E = np.empty(n_super)
    sample_tables(n_j[cs], alpha[cs], V, beta, inv, alpha_sum, E)
    return PamSample(tw_ptr[cs], tw_sub, tw_count, inv, alpha[cs],
                     np.ascontiguousarray(alpha[cs].T), alpha_sum, E, alpha_r, beta)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def fold_in(doc_ptr, term_ids, doc0, css, tw_ptr, tw_sub, tw_count, n_j, alpha, alpha_r, beta,
            seed, n_iter, n_keep, cap_ptr, out_key, out_count, out_nnz):
    """Fold documents ``doc_ptr`` / ``term_ids`` in under every kept sample in ``css``; ``doc0``
    is the global index of the first document (random streams follow it, so batches change
    nothing). Document d's summed counts under sample css[j] go, sorted by key, into
    ``out_key/out_count[cap_ptr[j * D + d]:]``, ``out_nnz[j, d]`` of them."""
    D = len(doc_ptr) - 1
    J = len(css)
    n_super, n_sub = alpha.shape[1], alpha.shape[2]
    for item in prange(J * D):
        j = item // D
        d = item % D
        cs = css[j]
        smp = make_sample(cs, tw_ptr, tw_sub, tw_count, n_j, alpha, alpha_r, beta)
        state = doc_stream(seed, cs, doc0 + d)
        terms = term_ids[doc_ptr[d]:doc_ptr[d + 1]]
        st, words, uid = new_doc_state(terms, n_super, n_sub, n_keep)
        for u in range(len(words)):
            word_G(words[u], smp, st.G[u])
        anz = fold_doc(terms, uid, smp, st, n_iter, n_keep, state)
        write_listed(st.alist, anz, st.acc, out_key, out_count, cap_ptr[item])
        out_nnz[j, d] = anz


@njit(cache=True)
def doc_mix(f_key, f_count, f0, f1, n_d, n_keep, alpha, alpha_sum, alpha_r, base, out):
    """Sub-topic mixture of a folded document under one sample, sum_i theta_i (m_ij + a_ij) /
    (m_i + S_i) with theta_i = (m_i + a_r) / (n_d + s a_r) and m = summed counts / n_keep: the
    training document model's with the averaged counts (overwrites out). Super-topics absent from
    the document share ``a_r / (n_d + s a_r) * base`` (base_j = sum_i a_ij / S_i); the present
    ones correct it. ``f_key[f0:f1]`` ascending."""
    n_super, n_sub = alpha.shape
    den = 1.0 / (n_d + n_super * alpha_r)
    r0 = alpha_r * den
    for j in range(n_sub):
        out[j] = r0 * base[j]
    f = f0
    while f < f1:
        i = f_key[f] // n_sub
        e = f
        m_i = 0.0
        while e < f1 and f_key[e] // n_sub == i:
            m_i += f_count[e] / n_keep
            e += 1
        g = (m_i + alpha_r) * den / (m_i + alpha_sum[i])
        g0 = r0 / alpha_sum[i]
        for j in range(n_sub):
            out[j] += (g - g0) * alpha[i, j]
        for p in range(f, e):
            out[f_key[p] - i * n_sub] += g * f_count[p] / n_keep
        f = e


@njit(cache=True)
def _mix_tables(css, n_j, alpha, beta, V, inv, alpha_sum, base):
    n_super = alpha.shape[1]
    E = np.empty(n_super)
    for j in range(len(css)):
        cs = css[j]
        sample_tables(n_j[cs], alpha[cs], V, beta, inv[j], alpha_sum[j], E)
        for s in range(alpha.shape[2]):
            base[j, s] = 0.0
            for i in range(n_super):
                base[j, s] += alpha[cs, i, s] / alpha_sum[j, i]


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def mixtures(doc_len, css, rows, f_ptr, f_key, f_count, n_keep, n_j, alpha, alpha_r, beta, V, out):
    """out[d] = the sub-topic mixture of document d averaged over the samples ``css[rows]``."""
    J = len(css)
    n_sub = alpha.shape[2]
    inv = np.empty((J, n_sub))
    alpha_sum = np.empty((J, alpha.shape[1]))
    base = np.empty((J, n_sub))
    _mix_tables(css, n_j, alpha, beta, V, inv, alpha_sum, base)
    for d in prange(len(doc_len)):
        buf = np.empty(n_sub)
        out[d, :] = 0.0
        for r in rows:
            doc_mix(f_key, f_count, f_ptr[r, d], f_ptr[r, d + 1], doc_len[d], n_keep,
                    alpha[css[r]], alpha_sum[r], alpha_r, base[r], buf)
            out[d, :] += buf / len(rows)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def p_pairs(pair_ptr, pair_term, doc_len, css, f_ptr, f_key, f_count, n_keep, tw_ptr, tw_sub,
            tw_count, n_j, alpha, alpha_r, beta, out):
    """out[i] = P_PAM(w_i | d) = sum_j mix_j (n_jw + b) inv_j for the pairs i of document d
    (``pair_term[pair_ptr[d]:pair_ptr[d + 1]]``), averaged over the samples ``css``."""
    D = len(pair_ptr) - 1
    J = len(css)
    n_sub = alpha.shape[2]
    V = tw_ptr.shape[1] - 1
    inv = np.empty((J, n_sub))
    alpha_sum = np.empty((J, alpha.shape[1]))
    base = np.empty((J, n_sub))
    _mix_tables(css, n_j, alpha, beta, V, inv, alpha_sum, base)
    for d in prange(D):
        mix = np.empty(n_sub)
        for i in range(pair_ptr[d], pair_ptr[d + 1]):
            out[i] = 0.0
        for j in range(J):
            cs = css[j]
            doc_mix(f_key, f_count, f_ptr[j, d], f_ptr[j, d + 1], doc_len[d], n_keep, alpha[cs],
                    alpha_sum[j], alpha_r, base[j], mix)
            smooth = 0.0
            for s in range(n_sub):
                mix[s] *= inv[j, s]
                smooth += mix[s]
            smooth *= beta
            for i in range(pair_ptr[d], pair_ptr[d + 1]):
                w = pair_term[i]
                p = smooth
                for q in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                    p += mix[tw_sub[q]] * tw_count[q]
                out[i] += p / J


@njit(cache=True)
def token_conditional(w, Gw, smp, st, pn):
    """The normalised conditional (n_super, n_sub) that :func:`draw` samples from, assembled
    from its buckets (for the tests against the reference)."""
    n_super = len(smp.alpha_sum)
    n_sub = len(smp.inv)
    p = np.zeros((n_super, n_sub))
    total = 0.0
    for q in range(pn):
        key = st.plist[q]
        i = key // n_sub
        j = key - i * n_sub
        A = (st.n_i[i] + smp.alpha_r) / (st.n_i[i] + smp.alpha_sum[i])
        v = A * st.n_pair[key] * (_n_jw(smp, w, j) + smp.beta) * smp.inv[j]
        p[i, j] += v
        total += v
    for i in range(n_super):
        A = (st.n_i[i] + smp.alpha_r) / (st.n_i[i] + smp.alpha_sum[i])
        total += A * Gw[i]
        for j in range(n_sub):
            p[i, j] += A * smp.alpha[i, j] * (_n_jw(smp, w, j) + smp.beta) * smp.inv[j]
    return p / total
