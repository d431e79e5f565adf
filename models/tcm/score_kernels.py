"""Topical Collocation Model: log-likelihood, alpha0's slice sampler, kept samples and the
document model P_TCM(c | d) for retrieval (see :mod:`models.tcm.kernels` for the model).
"""
import math

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.rng import uniform
from ..common.kernels.sparse import add_prior_rows32, doc_chunk, lower_bound, n_doc_chunks, store_chunk


# ---------------------------------------------------------------------------------------------
# Log-likelihood and alpha0


@njit(cache=True)
def entry_hist(tables, max_len):
    """Histogram of the Restaurants' entries by (collocation length, count): three arrays
    (length, count, multiplicity) over the non-empty cells, for alpha0's likelihood."""
    ty_len, ty_head, n_types = tables.ty_len, tables.ty_head, tables.n_types
    en_count, en_next = tables.en_count, tables.en_next
    max_n = 1
    for t in range(n_types):
        e = ty_head[t]
        while e >= 0:
            if en_count[e] > max_n:
                max_n = en_count[e]
            e = en_next[e]
    hist = np.zeros((max_len + 1, max_n + 1), dtype=np.int64)
    for t in range(n_types):
        e = ty_head[t]
        while e >= 0:
            if en_count[e] > 0:
                hist[ty_len[t], en_count[e]] += 1
            e = en_next[e]
    m = 0
    for i in range(max_len + 1):
        for n in range(max_n + 1):
            if hist[i, n] > 0:
                m += 1
    h_len = np.empty(m, dtype=np.int64)
    h_n = np.empty(m, dtype=np.int64)
    h_mult = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(max_len + 1):
        for n in range(max_n + 1):
            if hist[i, n] > 0:
                h_len[m] = i
                h_n[m] = n
                h_mult[m] = hist[i, n]
                m += 1
    return h_len, h_n, h_mult


@njit(cache=True)
def log_lik_restaurants(h_len, h_n, h_mult, n_k, p0_len, alpha0):
    """log p(collocations | topics) = sum_k [lgamma(a0) - lgamma(n_k + a0)]
    + sum_(k,c) [lgamma(n_kc + a0 P0(c)) - lgamma(a0 P0(c))] (the DP's marginal over a
    discrete base is Dirichlet-multinomial)."""
    lg0 = math.lgamma(alpha0)
    ll = 0.0
    for k in range(len(n_k)):
        if n_k[k] > 0:
            ll += lg0 - math.lgamma(n_k[k] + alpha0)
    for i in range(len(h_len)):
        a = alpha0 * p0_len[h_len[i]]
        ll += h_mult[i] * (math.lgamma(h_n[i] + a) - math.lgamma(a))
    return ll


@njit(cache=True)
def _alpha0_log_post(x, h_len, h_n, h_mult, n_k, p0_len, prior_rate):
    """log posterior of x = log(alpha0) under an Exponential(prior_rate) prior on alpha0
    (the + x is the Jacobian)."""
    a0 = math.exp(x)
    return log_lik_restaurants(h_len, h_n, h_mult, n_k, p0_len, a0) - prior_rate * a0 + x


@njit(cache=True)
def resample_alpha0(alpha0, h_len, h_n, h_mult, n_k, p0_len, prior_rate, n_steps, rng):
    """``n_steps`` slice-sampling updates (Neal 2003: stepping out with width 1, then shrinkage)
    of log(alpha0); returns the new alpha0. Advances rng."""
    x = math.log(alpha0)
    w = 1.0
    for _ in range(n_steps):
        fx = _alpha0_log_post(x, h_len, h_n, h_mult, n_k, p0_len, prior_rate)
        y = fx + math.log(1.0 - uniform(rng))  # log of a uniform height under f(x)
        lo = x - w * uniform(rng)
        hi = lo + w
        steps = 0
        while steps < 32 and _alpha0_log_post(lo, h_len, h_n, h_mult, n_k, p0_len, prior_rate) > y:
            lo -= w
            steps += 1
        steps = 0
        while steps < 32 and _alpha0_log_post(hi, h_len, h_n, h_mult, n_k, p0_len, prior_rate) > y:
            hi += w
            steps += 1
        for _ in range(200):
            x1 = lo + uniform(rng) * (hi - lo)
            if _alpha0_log_post(x1, h_len, h_n, h_mult, n_k, p0_len, prior_rate) > y:
                x = x1
                break
            if x1 < x:
                lo = x1
            else:
                hi = x1
    return math.exp(x)


# ---------------------------------------------------------------------------------------------
# Samples


@njit(cache=True)
def compact_tables(tables, out_ptr, out_topic, out_count):
    """Non-zero entries of every type of the Restaurants, sorted by topic, as CSR (out_ptr of
    length n_types + 1 must be allocated; returns the number of entries written)."""
    ty_head, n_types = tables.ty_head, tables.n_types
    en_topic, en_count, en_next = tables.en_topic, tables.en_count, tables.en_next
    m = 0
    out_ptr[0] = 0
    for t in range(n_types):
        e = ty_head[t]
        while e >= 0:
            if en_count[e] > 0:
                out_topic[m] = en_topic[e]
                out_count[m] = en_count[e]
                m += 1
            e = en_next[e]
        out_ptr[t + 1] = m
    return m


@njit(cache=True, parallel=True)
def compact_doc_lists(cap_ptr, dt_topic, dt_count, dt_nnz, out_ptr, out_topic, out_count):
    """The doc lists (a DocTopics' fields) as CSR (out_ptr = cumsum of dt_nnz)."""
    n_docs = len(dt_nnz)
    for d in prange(n_docs):
        a = cap_ptr[d]
        o = out_ptr[d]
        for j in range(dt_nnz[d]):
            out_topic[o + j] = dt_topic[a + j]
            out_count[o + j] = dt_count[a + j]


# ---------------------------------------------------------------------------------------------
# Document model P_TCM(c | d) for retrieval


@njit(cache=True, inline="always")
def _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, kalpha, phi, apart, scale, s, out):
    """out[t] += scale * P_cs(c_t | d); ``s``: float32 scratch of T entries."""
    lo, hi = dk_ptr[cs, d], dk_ptr[cs, d + 1]
    n_d = 0
    for j in range(lo, hi):
        n_d += dk_count[j]
    add_prior_rows32(out, s, phi[cs], dk_topic, dk_count, lo, hi, apart[cs], scale / (n_d + kalpha))


@njit(cache=True, parallel=True)
def score_p_c_d(dk_ptr, dk_topic, dk_count, alpha, phi, apart, out, first):
    """out[s, first + d] = mean over samples cs of (sum_k (n_dk + alpha) phi[cs, k, s]) /
    (N_d + K alpha), N_d = number of collocations of doc d in sample cs, for the documents d of
    ``dk_ptr`` (a range of the collection's, written in place into the whole table; term-major:
    a query's collocations are rows).

    dk_ptr : (n_cs, n_docs + 1) int64 offsets into the flat dk_topic/dk_count.
    phi : (n_cs, K, n_colloc) float32 with phi[cs, k, s] = P(c_s | k); apart[cs, s] = alpha
    sum_k phi. A (document, sample)'s sum over its topics is taken in float32, as tree-LDA's
    (:func:`models.tree_lda.score_kernels.p_w_d_mean`). phi and apart may have more columns
    than ``out`` has rows (:func:`models.common.kernels.sparse.pad_columns`); those are computed
    and left out: every column is summed on its own, so the padding changes no other.
    """
    n_cs, K, T = phi.shape
    n_docs = dk_ptr.shape[1] - 1
    kalpha = K * alpha
    for ch in prange(n_doc_chunks(n_docs)):
        d0, d1 = doc_chunk(ch, n_docs)
        s = np.empty(T, dtype=np.float32)
        acc = np.zeros((d1 - d0, T))
        for cs in range(n_cs):
            for d in range(d0, d1):
                _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, kalpha, phi, apart, 1.0, s,
                            acc[d - d0])
        store_chunk(acc, out, first + d0, 1.0 / n_cs)


@njit(cache=True)
def phi_table(ct_ptr, ct_type, ct_topic, ct_count, n_k, alpha0, p0, types, alpha, phi, apart):
    """phi[cs, k, s] = (n_kc + alpha0 P0(c)) / (n_k + alpha0) for collocation c = types[s]
    (-1: a type no sample has) with P0(c) = p0[s]; apart[cs, s] = alpha sum_k phi[cs, k, s].

    ct_ptr : (n_cs + 1,) offsets of every sample's (type, topic, count) entries, sorted by type.
    """
    n_cs, K, T = phi.shape
    for cs in range(n_cs):
        a0 = alpha0[cs]
        lo0 = ct_ptr[cs]
        hi0 = ct_ptr[cs + 1]
        for t in range(T):
            base = a0 * p0[t]
            for k in range(K):
                phi[cs, k, t] = base / (n_k[cs, k] + a0)
            u = types[t]
            if u >= 0:
                j = lower_bound(ct_type, lo0, hi0, u)
                while j < hi0 and ct_type[j] == u:
                    k = ct_topic[j]
                    phi[cs, k, t] = (ct_count[j] + base) / (n_k[cs, k] + a0)
                    j += 1
            acc = 0.0
            for k in range(K):
                acc += phi[cs, k, t]
            apart[cs, t] = alpha * acc


@njit(cache=True, parallel=True)
def score_p_c_d_per_sample(dk_ptr, dk_topic, dk_count, alpha, phi, apart, out):
    """out[cs, d, s] = (sum_k (n_dk + alpha) phi[cs, k, s]) / (N_d + K alpha) for every sample."""
    n_cs, K, T = phi.shape
    n_docs = out.shape[1]
    kalpha = K * alpha
    for d in prange(n_docs):
        s = np.empty(T, dtype=np.float32)
        for cs in range(n_cs):
            row = out[cs, d]
            for t in range(T):
                row[t] = 0.0
            _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, kalpha, phi, apart, 1.0, s, row)
