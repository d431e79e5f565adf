"""Kernels of tree-based LDA (Hu & Boyd-Graber 2012): the joint (topic, path) conditional of
eq. 1 by enumeration (NAIVE) and by the s / r / q buckets of eq. 5 (FAST), the refined bucket
(FAST-RB) and the sorted scans (-SD, -SW, -SDW), and a sequential sweep over one chain.

Counts of one chain: ``n_e[j, k]`` tokens of topic k through the edge into node j, ``n_i[i, k]``
tokens of topic k leaving internal node i, ``n_dk``. The normaliser N_{k,p} is cached as
reciprocals ``inv[i, k] = 1 / (beta_sum_i + n_i[i, k])`` per internal node: changing a path's
counts changes the reciprocals of its own nodes only, i.e. exactly its cousin set's normalisers.

Refined bucket: Algorithm 1 as printed rescales a draw that lands in s' but past s into the
r + q range, which makes the front of that range too likely; here such a draw is redrawn from
the exact s + r + q instead, which keeps the sampler exact (tested against NAIVE).
"""
import numpy as np
from numba import njit

from .rng import uniform

NAIVE, FAST, FAST_RB, FAST_RB_SD, FAST_RB_SW, FAST_RB_SDW = range(6)
SAMPLERS = ("naive", "fast", "fast-rb", "fast-rb-sd", "fast-rb-sw", "fast-rb-sdw")


@njit(cache=True)
def naive_masses(w, d, ptr, path_edges, path_len, parent, beta, beta_sum, n_e, n_i, n_dk,
                 alpha, out):
    """out[k, p - ptr[w]] = (alpha_k + n_dk) prod_e (beta_e + n_ek) / (beta_sum + n_ik)."""
    K = n_dk.shape[1]
    for k in range(K):
        for p in range(ptr[w], ptr[w + 1]):
            m = alpha[k] + n_dk[d, k]
            for l in range(path_len[p]):
                j = path_edges[p, l]
                i = parent[j]
                m *= (beta[j] + n_e[j, k]) / (beta_sum[i] + n_i[i, k])
            out[k, p - ptr[w]] = m


@njit(cache=True)
def s_bucket(w, ptr, path_edges, path_len, parent, path_prior, inv, alpha, s):
    """The smoothing-only bucket alpha_k S_p / N_{k,p} per (topic, path); returns its total."""
    K = s.shape[0]
    st = 0.0
    for p in range(ptr[w], ptr[w + 1]):
        for k in range(K):
            invn = 1.0
            for l in range(path_len[p]):
                invn *= inv[parent[path_edges[p, l]], k]
            s[k, p - ptr[w]] = alpha[k] * path_prior[p] * invn
            st += s[k, p - ptr[w]]
    return st


@njit(cache=True)
def fast_buckets(w, d, ptr, path_edges, path_len, parent, beta, path_prior, n_e, n_dk, inv,
                 alpha, s, r, q):
    """Buckets r and q of eq. 5 per (topic, path) (s: :func:`s_bucket`); r only over the doc's topics and q only
    where the path has an observed edge (nonzero edge-masked count). Returns (r total, q total)."""
    K = n_dk.shape[1]
    rt = 0.0
    qt = 0.0
    for p in range(ptr[w], ptr[w + 1]):
        c = p - ptr[w]
        S = path_prior[p]
        for k in range(K):
            nd = n_dk[d, k]
            seen = False
            for l in range(path_len[p]):
                if n_e[path_edges[p, l], k] > 0:
                    seen = True
            if nd == 0 and not seen:  # zero edge-masked count and no doc count: nothing to add
                r[k, c] = 0.0
                q[k, c] = 0.0
                continue
            invn = 1.0
            obs = 1.0
            for l in range(path_len[p]):
                j = path_edges[p, l]
                invn *= inv[parent[j], k]
                obs *= beta[j] + n_e[j, k]
            r[k, c] = nd * S * invn if nd > 0 else 0.0
            q[k, c] = (alpha[k] + nd) * (obs - S) * invn if seen else 0.0
            rt += r[k, c]
            qt += q[k, c]
    return rt, qt


@njit(cache=True)
def _pick(buf, u, order_rows, sort_rows, sort_cells):
    """Cell of ``buf`` (K, P) where the running sum passes u. Topic-major in topic order, or
    in ``order_rows`` (SD: topics by decreasing n_dk at the document's start); with
    ``sort_cells`` (SW) the cells of above-mean mass are scanned first, a linear-time stand-in
    for a full sort. Any order is exact; it only changes how far the scan goes."""
    K, P = buf.shape
    last = -1
    total = 0.0
    if sort_cells:
        for a in range(K):
            for c in range(P):
                total += buf[a, c]
    cut = total / (K * P)
    for rnd in range(2 if sort_cells else 1):
        for a in range(K):
            k = order_rows[a] if sort_rows else a
            for c in range(P):
                x = buf[k, c]
                if x <= 0.0:
                    continue
                if sort_cells and (x >= cut) != (rnd == 0):
                    continue
                last = k * P + c
                if u < x:
                    return last
                u -= x
    return last  # rounding at the end of the bucket


@njit(cache=True)
def sample_token(variant, w, d, ptr, path_edges, path_len, parent, beta, beta_sum, path_prior,
                 s_bound, n_e, n_i, n_dk, inv, alpha, s, r, q, rng, order):
    """Draw (topic, path index within w's paths) from the conditional with the token removed;
    ``order`` is the SD topic order. Returns k * n_paths(w) + c."""
    if variant == NAIVE:
        naive_masses(w, d, ptr, path_edges, path_len, parent, beta, beta_sum, n_e, n_i, n_dk,
                     alpha, s)
        return _pick(s, uniform(rng) * s.sum(), order, False, False)
    rt, qt = fast_buckets(w, d, ptr, path_edges, path_len, parent, beta, path_prior, n_e, n_dk,
                          inv, alpha, s, r, q)
    sd = variant == FAST_RB_SD or variant == FAST_RB_SDW
    sw = variant == FAST_RB_SW or variant == FAST_RB_SDW
    if variant >= FAST_RB:
        # s' (eq. 6) bounds s; s is computed only when the draw lands in s'
        u = uniform(rng) * (s_bound[w] + rt + qt)
        if u >= s_bound[w]:
            u -= s_bound[w]
            if u < rt:
                return _pick(r, u, order, sd, False)
            return _pick(q, u - rt, order, sd, sw)
        st = s_bucket(w, ptr, path_edges, path_len, parent, path_prior, inv, alpha, s)
        if u >= st:  # in the slack s' - s: redraw from the exact distribution
            u = uniform(rng) * (st + rt + qt)
    else:
        st = s_bucket(w, ptr, path_edges, path_len, parent, path_prior, inv, alpha, s)
        u = uniform(rng) * (st + rt + qt)
    if u < st:
        return _pick(s, u, order, False, False)
    u -= st
    if u < rt:
        return _pick(r, u, order, sd, False)
    return _pick(q, u - rt, order, sd, sw)


@njit(cache=True)
def move_token(w, d, k, p, sign, path_edges, path_len, parent, beta_sum, n_e, n_i, n_dk, inv):
    """Add (sign 1) or remove (-1) a token of word w, doc d on topic k and path p, refreshing
    the reciprocals of the path's nodes (the cousin set)."""
    n_dk[d, k] += sign
    for l in range(path_len[p]):
        j = path_edges[p, l]
        i = parent[j]
        n_e[j, k] += sign
        n_i[i, k] += sign
        inv[i, k] = 1.0 / (beta_sum[i] + n_i[i, k])


@njit(cache=True)
def sweep(variant, doc_ptr, term_ids, z, zp, ptr, path_edges, path_len, parent, beta, beta_sum,
          path_prior, s_bound, n_e, n_i, n_dk, inv, alpha, rng):
    """One sequential sweep in document order: every token's (topic z, path zp) redrawn."""
    K = n_dk.shape[1]
    P = path_edges.shape[0]
    maxp = 1
    for w in range(len(ptr) - 1):
        maxp = max(maxp, ptr[w + 1] - ptr[w])
    s = np.empty(K * maxp)
    r = np.empty(K * maxp)
    q = np.empty(K * maxp)
    order = np.arange(K)
    sd = variant == FAST_RB_SD or variant == FAST_RB_SDW
    for d in range(len(doc_ptr) - 1):
        if sd:
            order = np.argsort(-n_dk[d], kind="mergesort")
        for t in range(doc_ptr[d], doc_ptr[d + 1]):
            w = term_ids[t]
            move_token(w, d, z[t], zp[t], -1, path_edges, path_len, parent, beta_sum, n_e, n_i,
                       n_dk, inv)
            np_w = ptr[w + 1] - ptr[w]
            x = sample_token(variant, w, d, ptr, path_edges, path_len, parent, beta, beta_sum,
                             path_prior, s_bound, n_e, n_i, n_dk, inv, alpha,
                             s[:K * np_w].reshape(K, np_w), r[:K * np_w].reshape(K, np_w),
                             q[:K * np_w].reshape(K, np_w), rng, order)
            z[t] = x // np_w
            zp[t] = ptr[w] + x % np_w
            move_token(w, d, z[t], zp[t], 1, path_edges, path_len, parent, beta_sum, n_e, n_i,
                       n_dk, inv)
    return P


def path_bound(tree, alpha):
    """s'_w of eq. 6 for every word: sum over w's paths of S_p / prod beta_sum, times sum(alpha)."""
    b = tree.path_prior()
    for p in range(tree.n_paths):
        for e in tree.path_edges[p, :tree.path_len[p]]:
            b[p] /= tree.beta_sum[tree.parent[e]]
    return np.bincount(tree.path_word, weights=b, minlength=tree.n_terms) * float(np.sum(alpha))
