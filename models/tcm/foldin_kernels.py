"""Fold-in of new documents under kept TCM samples (arrays in, arrays out): point-wise Gibbs
sampling of the new documents' boundary variables (segmentation and collocation topics) with the
sample's restaurants held fixed.

With the restaurants fixed, a collocation c has P(c | k) = (n_kc + alpha0 P0(c)) / (n_k + alpha0)
in topic k whatever the new document holds, and the training conditional of a free position j
(:mod:`models.tcm.kernels`, L = [s, j], R = [j + 1, e], LR = [s, e], kr the topic of the
collocation ending at e, L and R or LR removed from the document's counts, N_d collocations left)
becomes

    p(b_j = none) ~ (n_d,kr + alpha) P(LR | kr) (N_d + 1 + K alpha)       (0 if LR > max_len)
    p(b_j = k)    ~ (n_dk + alpha) P(L | k) (n_d,kr + [k = kr] + alpha) P(R | kr)

and at a document's last token (a forced boundary) p(k) ~ (n_dk + alpha) P(L | k). These K + 1
weights are evaluated densely. A new document starts from an online pass: collocation lengths
drawn as P0 draws them (a collocation ends after a token with probability p#), every
collocation's topic given those before it.

Splits (a stopword or punctuation between two tokens, as in training) are forced boundaries: a
collocation crossing one has P(c | k) = 0, so the position before a split has only its K topic
weights and the online pass ends a collocation there.

``span_type[i, m - 1]`` is the collocation type of tokens i..i + m - 1 (-1: a type no kept
sample has, or past the document's end; CROSSES: it crosses a split), found in the model's
sorted type table. A sample's
restaurant entries are ``ct_type/ct_topic/ct_count[ct_lo:ct_hi]``, sorted by type then topic.
Documents and samples run in parallel, each on its own random stream (seed, sample, document).
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.foldin import doc_stream, fold_loop, keep_dense, write_dense
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound

CROSSES = -2  # span type of tokens that cross a split: no collocation


class TcmSample(NamedTuple):
    """One kept sample's restaurants and priors, fixed during fold-in."""

    ct_type: np.ndarray
    ct_topic: np.ndarray
    ct_count: np.ndarray
    ct_lo: int
    ct_hi: int
    n_k: np.ndarray    # (K,)
    alpha0: float
    p0_len: np.ndarray  # (max_len + 1,) P0 of a collocation by its length
    alpha: float
    p_stop: float


@njit(cache=True)
def find_type(type_ptr, type_terms, blocks, terms, a, m):
    """Type id of the collocation terms[a:a + m] (types sorted by length, then terms), or -1."""
    lo = blocks[m]
    end = blocks[m + 1]
    hi = end
    while lo < hi:
        mid = (lo + hi) >> 1
        o = type_ptr[mid]
        c = 0
        for i in range(m):
            if type_terms[o + i] != terms[a + i]:
                c = -1 if type_terms[o + i] < terms[a + i] else 1
                break
        if c < 0:
            lo = mid + 1
        else:
            hi = mid
    if lo < end:
        o = type_ptr[lo]
        for i in range(m):
            if type_terms[o + i] != terms[a + i]:
                return -1
        return lo
    return -1


@njit(cache=True, parallel=True)
def span_types(doc_ptr, term_ids, split, type_ptr, type_terms, blocks, out):
    """out[i, m - 1] = type of the span of m tokens from token i within its document (or -1),
    CROSSES where ``split`` (uint8, 1: no collocation continues past this token) cuts it."""
    L = out.shape[1]
    for d in prange(len(doc_ptr) - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            cut = False
            for m in range(1, L + 1):
                out[i, m - 1] = -1
                if i + m <= doc_ptr[d + 1]:
                    if cut:
                        out[i, m - 1] = CROSSES
                    else:
                        out[i, m - 1] = find_type(type_ptr, type_terms, blocks, term_ids, i, m)
                        cut = split[i + m - 1] != 0


@njit(cache=True)
def p_col(smp, t, m, k):
    """P(c | k) of a collocation of type t (-1: unseen; CROSSES: none) and length m."""
    if t == CROSSES:
        return 0.0
    base = smp.alpha0 * smp.p0_len[m]
    n = 0
    if t >= 0:
        lo = lower_bound(smp.ct_type, smp.ct_lo, smp.ct_hi, t)
        hi = lo
        while hi < smp.ct_hi and smp.ct_type[hi] == t:
            hi += 1
        j = lower_bound(smp.ct_topic, lo, hi, k)
        if j < hi and smp.ct_topic[j] == k:
            n = smp.ct_count[j]
    return (n + base) / (smp.n_k[k] + smp.alpha0)


@njit(cache=True)
def p_col_all(smp, t, m, out):
    """P(c | k) for every topic k (overwrites out)."""
    base = 0.0 if t == CROSSES else smp.alpha0 * smp.p0_len[m]
    for k in range(len(out)):
        out[k] = base / (smp.n_k[k] + smp.alpha0)
    if t >= 0:
        j = lower_bound(smp.ct_type, smp.ct_lo, smp.ct_hi, t)
        while j < smp.ct_hi and smp.ct_type[j] == t:
            k = smp.ct_topic[j]
            out[k] = (smp.ct_count[j] + base) / (smp.n_k[k] + smp.alpha0)
            j += 1


@njit(cache=True)
def _pick(w, n, u01):
    tot = 0.0
    for i in range(n):
        tot += w[i]
    x = u01 * tot
    for i in range(n):
        x -= w[i]
        if x < 0.0:
            return i
    return n - 1


@njit(cache=True)
def position_weights(j, spans, smp, b, ndk, N, pl, w):
    """The K + 1 weights of position j (w[K]: no boundary) with L, R / LR already removed from
    ``ndk`` and ``N``; ``spans`` are the document's span types. Returns the number of weights
    (1 + K at a free position, K at the last token and wherever L and R may not join)."""
    K = len(ndk)
    n = len(b)
    s = j
    while s > 0 and b[s - 1] == -1:
        s -= 1
    p_col_all(smp, spans[s, j - s], j - s + 1, pl)
    if j == n - 1:
        for k in range(K):
            w[k] = (ndk[k] + smp.alpha) * pl[k]
        return K
    e = j + 1
    while b[e] == -1:
        e += 1
    kr = b[e]
    pR = p_col(smp, spans[j + 1, e - j - 1], e - j, kr)
    for k in range(K):
        w[k] = (ndk[k] + smp.alpha) * pl[k] * (ndk[kr] + (1 if k == kr else 0) + smp.alpha) * pR
    m = e - s + 1
    if m > len(smp.p0_len) - 1 or spans[s, m - 1] == CROSSES:
        return K
    w[K] = (ndk[kr] + smp.alpha) * p_col(smp, spans[s, m - 1], m, kr) * (N + 1 + K * smp.alpha)
    return K + 1


@njit(cache=True)
def _end_of(b, j):
    e = j + 1
    while b[e] == -1:
        e += 1
    return e


@njit(cache=True)
def _start(doc, N, state):
    """The online pass: a collocation continues past a token as P0 draws lengths, or ends
    there with a topic given the collocations before."""
    ndk, _, spans, smp, b, pl, w = doc
    n = len(b)
    K = len(ndk)
    L = len(smp.p0_len) - 1
    s = 0
    for i in range(n):
        if i < n - 1 and i - s + 1 < L and spans[s, i - s + 1] != CROSSES and uniform(state) >= smp.p_stop:
            b[i] = -1
            continue
        p_col_all(smp, spans[s, i - s], i - s + 1, pl)
        for k in range(K):
            w[k] = (ndk[k] + smp.alpha) * pl[k]
        k = _pick(w, K, uniform(state))
        b[i] = k
        ndk[k] += 1
        N += 1
        s = i + 1
    return N


@njit(cache=True)
def _sweep(doc, N, state):
    """Every position j resampled: L and R (or LR) removed, b_j drawn, the new collocations
    added."""
    ndk, _, spans, smp, b, pl, w = doc
    n = len(b)
    K = len(ndk)
    for j in range(n):
        if j == n - 1:
            ndk[b[j]] -= 1
            N -= 1
        else:
            kr = b[_end_of(b, j)]
            ndk[kr] -= 1
            N -= 1
            if b[j] >= 0:
                ndk[b[j]] -= 1
                N -= 1
        nw = position_weights(j, spans, smp, b, ndk, N, pl, w)
        k = _pick(w, nw, uniform(state))
        if j < n - 1:
            ndk[b[_end_of(b, j)]] += 1
            N += 1
        if k == K:
            b[j] = -1
        else:
            b[j] = k
            ndk[k] += 1
            N += 1
    return N


@njit(cache=True)
def _pass(doc, N, state, resample):
    return _sweep(doc, N, state) if resample else _start(doc, N, state)


_fold = fold_loop(_pass, keep_dense)


@njit(cache=True)
def fold_doc(spans, smp, n_iter, n_keep, state, b, ndk, acc, pl, w):
    """Fold in one document (span types ``spans``) by
    :func:`models.common.kernels.foldin.fold_loop` over its positions; n_dk of the last
    ``n_keep`` sweeps is summed into ``acc``. Leaves ``ndk`` zero."""
    _fold((ndk, acc, spans, smp, b, pl, w), np.int64(0), n_iter, n_keep, state)
    for k in range(len(ndk)):
        ndk[k] = 0


@njit(cache=True)
def make_sample(cs, ct_ptr, ct_type, ct_topic, ct_count, n_k, alpha0, p0_len, alpha, p_stop):
    return TcmSample(ct_type, ct_topic, ct_count, ct_ptr[cs], ct_ptr[cs + 1], n_k[cs], alpha0[cs],
                     p0_len, alpha, p_stop)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def fold_in(doc_ptr, span_type, doc0, css, ct_ptr, ct_type, ct_topic, ct_count, n_k, alpha0,
            p0_len, alpha, p_stop, seed, n_iter, n_keep, cap_ptr, out_key, out_count, out_nnz):
    """Fold documents ``doc_ptr`` (span types ``span_type``) in under the samples css[j];
    ``doc0`` is the global index of the first document. Document d's collocation-topic counts
    under sample j go, by ascending topic, into ``out_key/out_count`` from ``cap_ptr[j * D + d]``,
    ``out_nnz[j, d]`` of them."""
    D = len(doc_ptr) - 1
    J = len(css)
    K = n_k.shape[1]
    for item in prange(J * D):
        j = item // D
        d = item % D
        smp = make_sample(css[j], ct_ptr, ct_type, ct_topic, ct_count, n_k, alpha0, p0_len, alpha,
                          p_stop)
        state = doc_stream(seed, css[j], doc0 + d)
        n = doc_ptr[d + 1] - doc_ptr[d]
        acc = np.zeros(K, dtype=np.int64)
        fold_doc(span_type[doc_ptr[d]:doc_ptr[d + 1]], smp, n_iter, n_keep, state,
                 np.empty(n, dtype=np.int64), np.zeros(K, dtype=np.int64), acc, np.empty(K),
                 np.empty(K + 1))
        out_nnz[j, d] = write_dense(acc, out_key, out_count, cap_ptr[item])


@njit(cache=True)
def doc_theta(f_key, f_count, f0, f1, n_keep, alpha, out):
    """theta of a folded document under one sample, (m_dk + alpha) / (N_d + K alpha) with
    m = summed counts / n_keep and N_d = sum_k m_dk: the training document model's with the
    averaged counts (overwrites out)."""
    K = len(out)
    N = 0.0
    for f in range(f0, f1):
        N += f_count[f] / n_keep
    den = 1.0 / (N + K * alpha)
    for k in range(K):
        out[k] = alpha * den
    for f in range(f0, f1):
        out[f_key[f]] += f_count[f] / n_keep * den


@njit(cache=True, parallel=True)
def p_pairs(pair_ptr, pair_col, f_ptr, f_key, f_count, n_keep, alpha, phi, out):
    """out[i] = P_TCM(c_i | d) = sum_k theta_dk P(c_i | k) for the pairs i of document d
    (``pair_col[pair_ptr[d]:pair_ptr[d + 1]]``, columns of ``phi[j]`` (K, n_colloc)), averaged
    over the samples j."""
    D = len(pair_ptr) - 1
    J, K, _ = phi.shape
    for d in prange(D):
        theta = np.empty(K)
        for i in range(pair_ptr[d], pair_ptr[d + 1]):
            out[i] = 0.0
        for j in range(J):
            doc_theta(f_key, f_count, f_ptr[j, d], f_ptr[j, d + 1], n_keep, alpha, theta)
            for i in range(pair_ptr[d], pair_ptr[d + 1]):
                c = pair_col[i]
                p = 0.0
                for k in range(K):
                    p += theta[k] * phi[j, k, c]
                out[i] += p / J
