"""PAM document model P_PAM(w | d) for retrieval, and the sampler's conditional for tests (see
:mod:`models.pam.kernels`).
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from .buckets import block_E, doc_bucket, prior_bucket
from ..common.kernels.sparse import add_weighted_rows, add_weighted_rows_at, doc_chunk, n_doc_chunks

# ---------------------------------------------------------------------------------------------
# Document model P_PAM(w | d) for retrieval


class SampleTables(NamedTuple):
    """What :func:`_add_doc_sample` reads of every kept sample (see :func:`score_p_w_d`)."""

    dp_ptr: np.ndarray
    dp_key: np.ndarray
    dp_count: np.ndarray
    n_sub: int
    alpha_r: float
    alpha_sum: np.ndarray
    phi_b: np.ndarray
    sp_ptr: np.ndarray
    sp_term: np.ndarray
    sp_val: np.ndarray
    G: np.ndarray


@njit(cache=True)
def sparse_phi(tw_ptr, tw_sub, tw_count, n_j, beta, term_ids):
    """The count part of phi for the query terms, sub-topic-major: for sample cs and sub-topic
    j, the entries ``[sp_ptr[cs, j], sp_ptr[cs, j + 1])`` hold every term t with n_jw > 0 and
    n_jw / (n_j + V b); phi[cs, j, t] is that plus the part every term shares, b / (n_j + V b).
    Returns sp_ptr (n_cs, n_sub + 1) int64, sp_term int32, sp_val float64."""
    n_cs, n_sub = n_j.shape
    V = tw_ptr.shape[1] - 1
    vbeta = V * beta
    sp_ptr = np.zeros((n_cs, n_sub + 1), dtype=np.int64)
    nnz = 0
    for cs in range(n_cs):
        sp_ptr[cs, 0] = nnz
        for t in range(len(term_ids)):
            w = term_ids[t]
            for q in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                sp_ptr[cs, tw_sub[q] + 1] += 1
        for j in range(n_sub):
            nnz += sp_ptr[cs, j + 1]
            sp_ptr[cs, j + 1] = nnz
    sp_term = np.empty(nnz, dtype=np.int32)
    sp_val = np.empty(nnz)
    fill = sp_ptr[:, :n_sub].copy()
    for cs in range(n_cs):
        for t in range(len(term_ids)):
            w = term_ids[t]
            for q in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                j = tw_sub[q]
                sp_term[fill[cs, j]] = t
                sp_val[fill[cs, j]] = tw_count[q] / (n_j[cs, j] + vbeta)
                fill[cs, j] += 1
    return sp_ptr, sp_term, sp_val


@njit(cache=True, parallel=True)
def prior_tables(alpha, alpha_sum, phi_b, sp_ptr, sp_term, sp_val, T):
    """G[cs, i, t] = sum_j alpha_ij phi_jt (alpha @ phi) and base[cs, t] = sum_i G_it / S_i,
    with phi_jt = phi_b[cs, j] + the sparse count part of :func:`sparse_phi`: the shared part
    is one number per super-topic, the count part only the (sub-topic, term) pairs that have
    counts. Returns G (n_cs, n_super, T) and base (n_cs, T)."""
    n_cs, n_super, n_sub = alpha.shape
    G = np.empty((n_cs, n_super, T))
    base = np.zeros((n_cs, T))
    for cs in prange(n_cs):
        for i in range(n_super):
            g0 = 0.0
            for j in range(n_sub):
                g0 += alpha[cs, i, j] * phi_b[cs, j]
            for t in range(T):
                G[cs, i, t] = g0
        for j in range(n_sub):
            for r in range(sp_ptr[cs, j], sp_ptr[cs, j + 1]):
                t = sp_term[r]
                v = sp_val[r]
                for i in range(n_super):
                    G[cs, i, t] += alpha[cs, i, j] * v
        for i in range(n_super):
            inv = 1.0 / alpha_sum[cs, i]
            for t in range(T):
                base[cs, t] += G[cs, i, t] * inv
    return G, base


@njit(cache=True, inline="always")
def _doc_pass(cs, d, den, tab, scratch, counts):
    """The pass over document d's pairs under sample cs that :func:`_add_doc_sample` makes:
    fills ``sup``/``coef`` with the present super-topics and their G-row weights and, with
    ``counts``, ``w``/``subs`` with the summed weights of the sub-topics that hold query terms;
    returns (the part every term shares (0 without ``counts``), the number of present
    super-topics, the number of such sub-topics)."""
    dp_ptr, dp_key, dp_count, n_sub = tab.dp_ptr, tab.dp_key, tab.dp_count, tab.n_sub
    alpha_r, alpha_sum, phi_b, sp_ptr = tab.alpha_r, tab.alpha_sum, tab.phi_b, tab.sp_ptr
    sup, coef, w, subs = scratch
    r0 = alpha_r * den
    shared = 0.0
    n_present = 0
    n_subs = 0
    hi = dp_ptr[cs, d + 1]
    q = dp_ptr[cs, d]
    while q < hi:
        i = dp_key[q] // n_sub
        # the pairs of super-topic i are contiguous (keys sorted)
        key_end = (i + 1) * n_sub
        e = q
        n_i = 0
        while e < hi and dp_key[e] < key_end:
            n_i += dp_count[e]
            e += 1
        f = (n_i + alpha_r) * den / (n_i + alpha_sum[cs, i])
        sup[n_present] = i
        coef[n_present] = f - r0 / alpha_sum[cs, i]
        n_present += 1
        if counts:
            for p in range(q, e):
                c = f * dp_count[p]
                j = dp_key[p] - i * n_sub
                shared += c * phi_b[cs, j]
                if sp_ptr[cs, j + 1] > sp_ptr[cs, j]:
                    if w[j] == 0.0:  # c > 0: the first pair of j in d
                        subs[n_subs] = j
                        n_subs += 1
                    w[j] += c
        q = e
    return shared, n_present, n_subs


@njit(cache=True, inline="always")
def _add_counts(cs, tab, scratch, n_subs, out):
    """out[t] += the count part of :func:`_add_doc_sample` (after :func:`_doc_pass`, whose ``w``
    it leaves zero again)."""
    sp_ptr, sp_term, sp_val = tab.sp_ptr, tab.sp_term, tab.sp_val
    _, _, w, subs = scratch
    for k in range(n_subs):
        j = subs[k]
        c = w[j]
        w[j] = 0.0
        for r in range(sp_ptr[cs, j], sp_ptr[cs, j + 1]):
            out[sp_term[r]] += c * sp_val[r]


@njit(cache=True, inline="always")
def _add_doc_sample(cs, d, den, tab, out, rows_out, scratch, with_rows=True):
    """out[t] += the count part of P_PAM(term t | d) under sample cs and, ``with_rows``,
    rows_out[t] += its G rows; returns the part every term shares (``den`` = 1 / (n_d + s a_r),
    r0 = a_r den). What is left of P_PAM is ``r0 * base[cs, t]``.

    sum_i theta_i (G_it + sum_{j in d} n_ij phi_jt) / (n_i + S_i), theta_i = (n_i + a_r) den: the
    super-topics absent from d share the term ``r0 * base[cs, t]`` with base = sum_i G_i / S_i,
    and the present ones correct it (their G rows). phi_jt is phi_b[cs, j], the part every term
    shares, plus the count part, sparse over (j, t) (:func:`sparse_phi`): a sub-topic's pairs
    in d (under every super-topic) are summed into one weight w_j = sum_i f_i n_ij first, so
    each of its query-term entries is added once, however many super-topics hold it.
    ``scratch``: (sup int64 (n_super,), coef (n_super,), w (n_sub,) all zero, subs int64
    (n_sub,)); w is zero again on return. ``tab``: :class:`SampleTables`.
    """
    shared, n_present, n_subs = _doc_pass(cs, d, den, tab, scratch, True)
    if with_rows:
        add_weighted_rows(rows_out, tab.G[cs], scratch[0], scratch[1], 0, n_present, 1.0)
    _add_counts(cs, tab, scratch, n_subs, out)
    return shared


@njit(cache=True, inline="always")
def _scratch(n_super, n_sub):
    """The scratch of :func:`_add_doc_sample`."""
    return (np.empty(n_super, dtype=np.int64), np.empty(n_super), np.zeros(n_sub),
            np.empty(n_sub, dtype=np.int64))


@njit(cache=True, parallel=True)
def score_p_w_d(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi_b,
                sp_ptr, sp_term, sp_val, G, base, with_rows, out):
    """out[t, d] = mean over samples cs of P_PAM(term t | d) (overwrites out; term-major, so
    that a query's terms are rows); without ``with_rows``, a lower bound of it.

    dp_ptr : (n_cs, n_docs + 1) int64 offsets into the flat dp_key/dp_count;
    phi_b : (n_cs, n_sub) b / (n_j + V b); sp_ptr, sp_term, sp_val : :func:`sparse_phi`;
    G, base : :func:`prior_tables`. r0 = a_r / (n_d + s a_r) is the same
    under every sample, so the absent super-topics' term is r0 times the samples' summed base,
    once per document, and the shared parts are summed before they are added. The entry is
    the sum of two means, that of the shared and count parts and that of the G rows with
    ``r0 * base``, each summed in the order :func:`add_rows_at` sums it.

    Without ``with_rows`` the entry is the first mean alone. The second is
    sum_{i absent} r0 G_it / S_i + sum_{i present} f_i G_it >= 0, and its G rows alone, weights
    coef_i = den n_i (S_i - a_r) / (S_i (n_i + S_i)) times G_it >= 0, are <= 0 wherever every
    S_i <= a_r: the entry then lies in [out, out + r0 * sum_cs base[cs, t] / n_cs].
    Flat arguments: a parallel kernel cannot take tuples (models/common/kernels/__init__.py).
    """
    n_cs, n_super, T = G.shape
    n_docs = out.shape[1]
    base_sum = _base_sum(base)
    scale = 1.0 / n_cs
    for ch in prange(n_doc_chunks(n_docs)):
        d0, d1 = doc_chunk(ch, n_docs)
        scratch = _scratch(n_super, n_sub)
        tab = SampleTables(dp_ptr, dp_key, dp_count, n_sub, alpha_r, alpha_sum, phi_b, sp_ptr,
                           sp_term, sp_val, G)
        acc = np.zeros((d1 - d0, T))
        rows = np.empty((d1 - d0, T))
        shared = np.zeros(d1 - d0)
        den = np.empty(d1 - d0)
        for d in range(d0, d1):
            den[d - d0] = 1.0 / (doc_len[d] + n_super * alpha_r)
            if with_rows:
                r0 = alpha_r * den[d - d0]
                for t in range(T):
                    rows[d - d0, t] = r0 * base_sum[t]
        for cs in range(n_cs):
            for d in range(d0, d1):
                shared[d - d0] += _add_doc_sample(cs, d, den[d - d0], tab, acc[d - d0], rows[d - d0],
                                                  scratch, with_rows)
        for t in range(T):
            for r in range(d1 - d0):
                out[t, d0 + r] = (acc[r, t] + shared[r]) * scale
                if with_rows:
                    out[t, d0 + r] += rows[r, t] * scale


@njit(cache=True)
def _base_sum(base):
    """sum over samples of base, (T,), summed in sample order."""
    n_cs, T = base.shape
    out = np.zeros(T)
    for cs in range(n_cs):
        for t in range(T):
            out[t] += base[cs, t]
    return out


@njit(cache=True, parallel=True)
def add_rows_at(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi_b,
                sp_ptr, sp_term, sp_val, G, base, G_t, docs, need_ptr, need_col, out):
    """out[t, docs[k]] += the mean of the G rows with ``r0 * base``, for the columns t in
    ``need_col[need_ptr[k]:need_ptr[k + 1]]`` (each once) of each document ``docs[k]``: on
    :func:`score_p_w_d`'s entries without its rows, its entries with them, bit for bit. The pass
    over the document's pairs finds the G rows' weights alone, and they are added at those columns only,
    from ``G_t`` (n_cs, T, n_super), G transposed."""
    n_cs, n_super, T = G.shape
    base_sum = _base_sum(base)
    scale = 1.0 / n_cs
    # in chunks of documents, a sample at a time: a sample's G stays in cache for the chunk
    for ch in prange(n_doc_chunks(len(docs))):
        k0, k1 = doc_chunk(ch, len(docs))
        scratch = _scratch(n_super, n_sub)
        tab = SampleTables(dp_ptr, dp_key, dp_count, n_sub, alpha_r, alpha_sum, phi_b, sp_ptr,
                           sp_term, sp_val, G)
        rows = np.empty((k1 - k0, T))
        den = np.empty(k1 - k0)
        for k in range(k0, k1):
            den[k - k0] = 1.0 / (doc_len[docs[k]] + n_super * alpha_r)
            r0 = alpha_r * den[k - k0]
            for t in need_col[need_ptr[k]:need_ptr[k + 1]]:
                rows[k - k0, t] = r0 * base_sum[t]
        for cs in range(n_cs):
            for k in range(k0, k1):
                _, n_present, _ = _doc_pass(cs, docs[k], den[k - k0], tab, scratch, False)
                add_weighted_rows_at(rows[k - k0], G_t[cs], scratch[0], scratch[1], 0, n_present, 1.0,
                                     need_col[need_ptr[k]:need_ptr[k + 1]])
        for k in range(k0, k1):
            for t in need_col[need_ptr[k]:need_ptr[k + 1]]:
                out[t, docs[k]] += rows[k - k0, t] * scale


@njit(cache=True, parallel=True)
def score_p_w_d_per_sample(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum,
                           phi_b, sp_ptr, sp_term, sp_val, G, base, out):
    """out[cs, d, t] = P_PAM(term t | d) under sample cs (overwrites out). Flat arguments: a
    parallel kernel cannot take tuples (models/common/kernels/__init__.py)."""
    n_cs, n_super, T = G.shape
    n_docs = out.shape[1]
    for d in prange(n_docs):
        scratch = _scratch(n_super, n_sub)
        tab = SampleTables(dp_ptr, dp_key, dp_count, n_sub, alpha_r, alpha_sum, phi_b, sp_ptr,
                           sp_term, sp_val, G)
        den = 1.0 / (doc_len[d] + n_super * alpha_r)
        for cs in range(n_cs):
            row = out[cs, d]
            for t in range(T):
                row[t] = alpha_r * den * base[cs, t]
            shared = _add_doc_sample(cs, d, den, tab, row, row, scratch)
            for t in range(T):
                row[t] += shared


# ---------------------------------------------------------------------------------------------
# For tests: the conditional as the fast sampler decomposes it


@njit(cache=True)
def token_conditional(w, d, state, docs, prior):
    """Normalised p(i, j | rest), shape (n_super, n_sub), for a token of term w in doc d,
    through the doc bucket and the prior bucket (G from E plus the term's sparse part, then a_ij
    c_j / G_i within super-topic i) exactly as ``_sweep_block`` draws it. The token must already
    be removed from the counts. ``state``, ``docs``, ``prior``: a chain's PamState, DocPairs
    and PamPrior (:mod:`models.pam.kernels`)."""
    n_wj, n_j, n_ds = state.n_wj, state.n_j, state.n_ds
    alpha_r, alpha, alpha_T, alpha_sum, beta = prior
    n_super, n_sub = alpha.shape
    V = n_wj.shape[0]
    vbeta = V * beta
    inv = np.empty(n_sub)
    E = np.empty(n_super)
    block_E(n_j, alpha_T, beta, vbeta, inv, E)
    c = np.empty(n_sub)
    G = E.copy()
    for j in range(n_sub):
        c[j] = (n_wj[w, j] + beta) * inv[j]
        if n_wj[w, j] > 0:
            t = n_wj[w, j] * inv[j]
            for i in range(n_super):
                G[i] += alpha_T[j, i] * t
    p = np.zeros((n_super, n_sub))
    base = docs.cap_ptr[d]
    nnz = docs.nnz[d]
    pbuf = np.empty(max(nnz, 1))
    dsum = doc_bucket(d, docs, n_ds, prior, c, pbuf)
    prev = 0.0
    for q in range(nnz):
        key = docs.key[base + q]
        p[key // n_sub, key % n_sub] += pbuf[q] - prev
        prev = pbuf[q]
    qbuf = np.empty(n_super)
    A0 = np.empty(n_super)
    for i in range(n_super):
        A0[i] = alpha_r / alpha_sum[i]
    qsum = prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf)
    prev = 0.0
    for i in range(n_super):
        mass = qbuf[i] - prev
        prev = qbuf[i]
        tot = 0.0
        for j in range(n_sub):
            tot += alpha[i, j] * c[j]
        for j in range(n_sub):
            p[i, j] += mass * (alpha[i, j] * c[j] / tot)
    total = dsum + qsum
    for i in range(n_super):
        for j in range(n_sub):
            p[i, j] /= total
    return p
