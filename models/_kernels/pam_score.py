"""PAM document model P_PAM(w | d) for retrieval, and the sampler's conditional for tests (see
:mod:`models._kernels.pam`).
"""
import numpy as np
from numba import njit, prange

from .pam_buckets import block_E, doc_bucket, prior_bucket
from .sparse import add_weighted_rows, doc_chunk, n_doc_chunks, store_chunk

# ---------------------------------------------------------------------------------------------
# Document model P_PAM(w | d) for retrieval


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
def _doc_sample(cs, d, dp_ptr, dp_key, dp_count, n_d, n_sub, alpha_r, alpha_sum, phi_b, sp_ptr,
                sp_term, sp_val, G, base, out, sup, coef):
    """out[t] = P_PAM(term t | d) under sample cs (overwrites out[:T]; ``sup``, ``coef``:
    scratch of n_super entries).

    sum_i theta_i (G_it + sum_{j in d} n_ij phi_jt) / (n_i + S_i), theta_i = (n_i + a_r) / (n_d + s a_r);
    the super-topics absent from d share the term ``a_r / (n_d + s a_r) * base[cs, t]`` with
    base = sum_i G_i / S_i, and the present ones correct it (their G rows added at the end).
    phi_jt is phi_b[cs, j], the part every term shares, plus the sparse count part of
    :func:`sparse_phi`.
    """
    n_super = G.shape[1]
    T = G.shape[2]
    den = 1.0 / (n_d + n_super * alpha_r)
    r0 = alpha_r * den
    for t in range(T):
        out[t] = r0 * base[cs, t]
    shared = 0.0
    n_present = 0
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
        th = (n_i + alpha_r) * den
        f = th / (n_i + alpha_sum[cs, i])
        sup[n_present] = i
        coef[n_present] = f - r0 / alpha_sum[cs, i]
        n_present += 1
        for p in range(q, e):
            c = f * dp_count[p]
            j = dp_key[p] - i * n_sub
            shared += c * phi_b[cs, j]
            for r in range(sp_ptr[cs, j], sp_ptr[cs, j + 1]):
                out[sp_term[r]] += c * sp_val[r]
        q = e
    add_weighted_rows(out, G[cs], sup, coef, 0, n_present, 1.0)
    for t in range(T):
        out[t] += shared


@njit(cache=True, parallel=True)
def score_p_w_d(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi_b, sp_ptr,
                sp_term, sp_val, G, base, out):
    """out[t, d] = mean over samples cs of P_PAM(term t | d) (overwrites out; term-major, so
    that a query's terms are rows).

    dp_ptr : (n_cs, n_docs + 1) int64 offsets into the flat dp_key/dp_count;
    phi_b : (n_cs, n_sub) b / (n_j + V b); sp_* : :func:`sparse_phi`;
    G, base : :func:`prior_tables`.
    """
    n_cs, n_super, T = G.shape
    n_docs = out.shape[1]
    inv = 1.0 / n_cs
    for ch in prange(n_doc_chunks(n_docs)):
        d0, d1 = doc_chunk(ch, n_docs)
        buf = np.empty(T)
        sup = np.empty(n_super, dtype=np.int64)
        coef = np.empty(n_super)
        acc = np.zeros((d1 - d0, T))
        for cs in range(n_cs):
            for d in range(d0, d1):
                _doc_sample(cs, d, dp_ptr, dp_key, dp_count, doc_len[d], n_sub, alpha_r,
                            alpha_sum, phi_b, sp_ptr, sp_term, sp_val, G, base, buf, sup, coef)
                for t in range(T):
                    acc[d - d0, t] += buf[t]
        store_chunk(acc, out, d0, inv)


@njit(cache=True, parallel=True)
def score_p_w_d_per_sample(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi_b,
                           sp_ptr, sp_term, sp_val, G, base, out):
    """out[cs, d, t] = P_PAM(term t | d) under sample cs (overwrites out)."""
    n_cs, n_super = G.shape[0], G.shape[1]
    n_docs = out.shape[1]
    for d in prange(n_docs):
        sup = np.empty(n_super, dtype=np.int64)
        coef = np.empty(n_super)
        for cs in range(n_cs):
            _doc_sample(cs, d, dp_ptr, dp_key, dp_count, doc_len[d], n_sub, alpha_r, alpha_sum,
                        phi_b, sp_ptr, sp_term, sp_val, G, base, out[cs, d], sup, coef)


# ---------------------------------------------------------------------------------------------
# For tests: the conditional as the fast sampler decomposes it


@njit(cache=True)
def token_conditional(w, d, n_wj, n_j, n_ds, cap_ptr, dp_key, dp_count, dp_nnz, alpha_r, alpha,
                      alpha_sum, beta):
    """Normalised p(i, j | rest), shape (n_super, n_sub), for a token of term w in doc d,
    through the doc bucket and the prior bucket (G from E plus the term's sparse part, then a_ij
    c_j / G_i within super-topic i) exactly as ``_sweep_block`` draws it. The token must already
    be removed from the counts."""
    n_super, n_sub = alpha.shape
    V = n_wj.shape[0]
    vbeta = V * beta
    alpha_T = np.ascontiguousarray(alpha.T)
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
    base = cap_ptr[d]
    pbuf = np.empty(max(dp_nnz[d], 1))
    dsum = doc_bucket(d, base, dp_nnz[d], n_sub, dp_key, dp_count, n_ds, alpha_r, alpha_sum, c,
                      pbuf)
    prev = 0.0
    for q in range(dp_nnz[d]):
        key = dp_key[base + q]
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
