"""Sparse machinery of tree-LDA's FAST samplers (Hu & Boyd-Graber 2012, section 4): nonzero-topic
lists, the cached root sums, the s / r / q buckets of eq. 5 per token and the draw.

Why each piece:
- q is nonzero only for topics with a nonzero edge-masked count on the path, and an edge's count
  is never below a descendant edge's, so the path's first edge (out of the root) decides it: one
  list of nonzero topics per root edge (``etop``), kept by decreasing count for SW.
- r is nonzero only for the document's topics (the document list ``dl``). Its total is cached
  for one-edge paths, so the list's order serves only a draw that lands in r (0.2% of the
  draws on 20 Newsgroups): SD sorts it by decreasing n_dk then, instead of keeping it sorted
  through every count change, which cost more than the shorter walks saved.
- The root normaliser is shared by all paths: for a path of one edge s and r are S_p times the
  cached sums ``s_root = sum_k alpha_k / N_root,k`` and ``r_root = sum_k n_dk / N_root,k``, kept
  up to date on every count change (two topics per token) and recomputed at each document start
  so that rounding cannot drift. Longer paths (synset subtrees) multiply the downstream
  normaliser per topic: their s costs O(K) and their r a pass over the document's topics. The
  refined samplers bound both (the root sums times prod 1/beta_sum below the root) and compute
  them only when a draw lands in a bound.
- ``coef[k] = (alpha_k + n_dk) / N_root,k`` per document turns q of a one-edge path into one
  product per nonzero topic, as in SparseLDA.

Memory, not arithmetic, bounds a sweep: a token's word picks a random row of every (nodes, K)
array it touches. So during a sweep the counts of the root's edges live only in their lists
(``n_e``'s rows of the edges a sweep changed are rebuilt from them at its end), and an edge
list's topics and counts sit side by side in one array, next to the scan that finds a topic in an
edge's list (``tree_lda_lists``): fewer rows touched per token. ``resample`` gets borrowed views
(:mod:`borrow`) of every array, because its inlined helpers rebind each array argument and every
rebinding of a counted array is a locked reference-count update; the draws are unchanged.
"""
import numpy as np
from numba import literally, njit

from .borrow import borrowed
from .rng import uniform
from .tree_lda_lists import (
    edge_counts,
    edge_lists,
    find,
    list_dec,
    list_inc,
    sort_doc_list,
    topic_list,
)


@njit(cache=True)
def doc_sums(d, n_dk, inv, root, alpha, dl, dnz, coef, acc):
    """Per-document caches from scratch: ``coef`` and acc = [s_root, r_root]."""
    K = n_dk.shape[1]
    s = 0.0
    for k in range(K):
        s += alpha[k] * inv[root, k]
        coef[k] = (alpha[k] + n_dk[d, k]) * inv[root, k]
    r = 0.0
    for a in range(dnz):
        k = dl[0, a]
        r += dl[1, a] * inv[root, k]
    acc[0] = s
    acc[1] = r


@njit(cache=True, inline="always")
def downstream(p, k, path_edges, path_len, parent, inv):
    """prod over the path's edges below the root edge of 1 / N_{parent, k}."""
    x = 1.0
    for l in range(1, path_len[p]):
        x *= inv[parent[path_edges[p, l]], k]
    return x


@njit(cache=True, inline="always")
def s_exact(p, path_edges, path_len, parent, path_prior, inv, root, alpha, acc):
    """Bucket s of one path: S_p sum_k alpha_k / N_{k,p}."""
    if path_len[p] == 1:
        return path_prior[p] * acc[0]
    t = 0.0
    for k in range(len(alpha)):
        t += alpha[k] * inv[root, k] * downstream(p, k, path_edges, path_len, parent, inv)
    return path_prior[p] * t


@njit(cache=True, inline="always")
def r_exact(p, path_edges, path_len, parent, inv, root, dl, dnz):
    """Bucket r of one path over S_p: sum over the document's topics of n_dk / N_{k,p}."""
    r = 0.0
    for a in range(dnz):
        k = dl[0, a]
        r += dl[1, a] * inv[root, k] * downstream(p, k, path_edges, path_len, parent, inv)
    return r


@njit(cache=True, inline="always")
def buckets(w, exact, ptr, path_edges, path_len, parent, beta, path_prior, n_e, inv, root,
            alpha, etop, ecnt, enz, dl, dnz, coef, acc, down_bound, stp, rtp, qtp, qv, qe):
    """Per path c of word w: s and r (exact, or for a path below a synset node their upper
    bounds S_p s_root and S_p r_root times prod 1/beta_sum below the root when not ``exact``)
    and the q cells (values ``qv`` in the order of the path's root-edge list, path c's cells
    ending at ``qe[c]``). Returns (s total, r total, q total)."""
    m = 0
    st = 0.0
    rt = 0.0
    qt = 0.0
    for c in range(ptr[w + 1] - ptr[w]):
        p = ptr[w] + c
        S = path_prior[p]
        j0 = path_edges[p, 0]
        qt0 = qt
        if path_len[p] == 1:
            for a in range(enz[j0]):
                x = coef[etop[j0, a]] * ecnt[j0, a]
                qv[m] = x
                qt += x
                m += 1
            rtp[c] = S * acc[1]
            stp[c] = S * acc[0]
        else:
            for a in range(enz[j0]):
                k = etop[j0, a]
                dn = 1.0
                ob = beta[j0] + ecnt[j0, a]  # the root edge's count: its list's
                for l in range(1, path_len[p]):
                    e = path_edges[p, l]
                    dn *= inv[parent[e], k]
                    ob *= beta[e] + n_e[e, k]
                x = coef[k] * dn * (ob - S)
                qv[m] = x
                qt += x
                m += 1
            if exact:
                rtp[c] = S * r_exact(p, path_edges, path_len, parent, inv, root, dl, dnz)
                stp[c] = s_exact(p, path_edges, path_len, parent, path_prior, inv, root, alpha, acc)
            else:
                rtp[c] = S * acc[1] * down_bound[p]
                stp[c] = S * acc[0] * down_bound[p]
        qe[c] = m
        qtp[c] = qt - qt0
        st += stp[c]
        rt += rtp[c]
    return st, rt, qt


@njit(cache=True, inline="always")
def _pick_path(tot, n, u):
    """Index c < n where the running sum of tot passes u (the last positive one on rounding)."""
    last = 0
    for c in range(n):
        if tot[c] > 0.0:
            last = c
            if u < tot[c]:
                return c, u
            u -= tot[c]
    return last, 0.0


@njit(cache=True, inline="always")
def draw(rb, sd, sw, w, ptr, path_edges, path_len, parent, beta, path_prior, s_bound, n_e,
         inv, root, alpha, etop, ecnt, enz, dl, dnz, coef, acc, down_bound, stp, rtp, qtp, qv,
         qe, rng):
    """One draw of (topic, path) from eq. 5 for word w in the document of list ``dl`` (token
    removed). With ``rb`` (refined bucket) s and the synset paths' r are first replaced by upper
    bounds (for s the smaller of eq. 6's s'_w and the per-path bound) and computed only when the
    draw lands in one; a draw in a bound's slack is redrawn from the exact totals, which keeps
    the draw exact. Returns (k, path id).
    At most 30 arguments: CPython passes more as *args, which numba cannot inline."""
    npw = ptr[w + 1] - ptr[w]
    st, rt, qt = buckets(w, not rb, ptr, path_edges, path_len, parent, beta, path_prior, n_e,
                         inv, root, alpha, etop, ecnt, enz, dl, dnz, coef, acc, down_bound, stp,
                         rtp, qtp, qv, qe)
    if rb:
        st = min(st, s_bound[w])
    u = uniform(rng) * (st + rt + qt)
    if rb and u < st + rt:  # in a bound: compute the bucket it bounds
        in_s = u < st
        if in_s:
            st = _s_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, alpha, acc,
                          stp)
            slack = u >= st
        else:
            rt = _r_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, dl, dnz,
                          rtp)
            slack = u - st >= rt
        if slack:  # in the slack of a bound: redraw from the exact totals
            if in_s:
                rt = _r_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, dl,
                              dnz, rtp)
            else:
                st = _s_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, alpha,
                              acc, stp)
            u = uniform(rng) * (st + rt + qt)
    if u < st:
        c, u = _pick_path(stp, npw, u)
        p = ptr[w] + c
        u /= path_prior[p]
        last = 0
        for k in range(len(alpha)):
            x = alpha[k] * inv[root, k] * downstream(p, k, path_edges, path_len, parent, inv)
            if x > 0.0:
                last = k
                if u < x:
                    return k, p
                u -= x
        return last, p
    u -= st
    if u < rt:
        c, u = _pick_path(rtp, npw, u)
        p = ptr[w] + c
        u /= path_prior[p]
        if sd:  # walk the document's topics by decreasing n_dk
            sort_doc_list(dl, dnz)
        last = dl[0, 0]
        for a in range(dnz):
            k = dl[0, a]
            last = k
            x = dl[1, a] * inv[root, k] * downstream(p, k, path_edges, path_len, parent, inv)
            if u < x:
                return k, p
            u -= x
        return last, p
    u -= rt
    # q: path by path; with SW paths by decreasing q mass, topics by decreasing edge count
    last = 0
    lastc = 0
    for t in range(npw):
        c = _kth_path(qtp, npw, t) if sw and npw > 1 else t
        a0 = 0 if c == 0 else qe[c - 1]
        for a in range(a0, qe[c]):
            last = a
            lastc = c
            if u < qv[a]:
                return etop[path_edges[ptr[w] + c, 0], a - a0], ptr[w] + c
            u -= qv[a]
    a0 = 0 if lastc == 0 else qe[lastc - 1]
    return etop[path_edges[ptr[w] + lastc, 0], last - a0], ptr[w] + lastc


@njit(cache=True, inline="always")
def _s_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, alpha, acc, stp):
    """Exact bucket s of every path of w into ``stp``; returns their total."""
    st = 0.0
    for c in range(ptr[w + 1] - ptr[w]):
        stp[c] = s_exact(ptr[w] + c, path_edges, path_len, parent, path_prior, inv, root, alpha,
                         acc)
        st += stp[c]
    return st


@njit(cache=True, inline="always")
def _r_paths(w, ptr, path_edges, path_len, parent, path_prior, inv, root, dl, dnz, rtp):
    """Exact bucket r of every path of w into ``rtp`` (a one-edge path's is exact already);
    returns their total."""
    rt = 0.0
    for c in range(ptr[w + 1] - ptr[w]):
        p = ptr[w] + c
        if path_len[p] > 1:
            rtp[c] = path_prior[p] * r_exact(p, path_edges, path_len, parent, inv, root, dl, dnz)
        rt += rtp[c]
    return rt


@njit(cache=True, inline="always")
def _kth_path(tot, n, t):
    """Index of the path with the t-th largest total (ties by index); a word has few paths."""
    for c in range(n):
        rank = 0
        for b in range(n):
            if tot[b] > tot[c] or (tot[b] == tot[c] and b < c):
                rank += 1
        if rank == t:
            return c
    return t


@njit(cache=True, error_model="numpy")
def resample(t0, t1, d, term_ids, z, zp, rb, sd, sw, ptr, path_edges, path_len, parent, beta,
             beta_sum, path_prior, s_bound, n_e, n_i, n_dk, inv, root, alpha, etop, ecnt, enz,
             touched, dl, dnz, coef, acc, down_bound, stp, rtp, qtp, qv, qe, rng):
    """Tokens t0..t1-1 of doc d in turn: remove the token from the counts, draw its (topic,
    path) with :func:`draw`, add it back. Every count change also updates the reciprocal
    normalisers of the path's nodes (its cousin set), both lists, ``coef`` and the root sums;
    the root edge's count changes in its list only (``touched`` marks the edge).
    One loop body for both changes (removal and addition), so the code is compiled once. A call
    per document, not per token: a call passes some 25 arrays, each with a reference count to
    update. numpy's error model: no zero-division checks, since every divisor is a positive prior
    sum or path prior.
    Returns the document list's new length."""
    dtop, dcnt, dpos = dl[0:1], dl[1:2], dl[2:3]
    for t in range(t0, t1):
        w = term_ids[t]
        k = z[t]
        p = zp[t]
        for sign in (-1, 1):
            if sign > 0:
                k, p = draw(rb, sd, sw, w, ptr, path_edges, path_len, parent, beta, path_prior,
                            s_bound, n_e, inv, root, alpha, etop, ecnt, enz, dl, dnz, coef, acc,
                            down_bound, stp, rtp, qtp, qv, qe, rng)
                z[t] = k
                zp[t] = p
            acc[0] -= alpha[k] * inv[root, k]
            acc[1] -= n_dk[d, k] * inv[root, k]
            move_token(d, k, p, sign, path_edges, path_len, parent, beta_sum, n_e, n_i, n_dk, inv, 1)
            j = path_edges[p, 0]
            touched[j] = True
            i = find(etop, j, enz[j], k)  # edge lists keep no position index: dpos stands in, unused
            if sign > 0:
                dnz = list_inc(dtop, dcnt, dpos, 0, dnz, k, dpos[0, k], False, True)
                enz[j] = list_inc(etop, ecnt, dpos, j, enz[j], k, i, sw, False)
            else:
                dnz = list_dec(dtop, dcnt, dpos, 0, dnz, k, dpos[0, k], False, True)
                enz[j] = list_dec(etop, ecnt, dpos, j, enz[j], k, i, sw, False)
            acc[0] += alpha[k] * inv[root, k]
            acc[1] = acc[1] + n_dk[d, k] * inv[root, k] if dnz > 0 else 0.0
            coef[k] = (alpha[k] + n_dk[d, k]) * inv[root, k]
    return dnz


@njit(cache=True, inline="always")
def move_token(d, k, p, sign, path_edges, path_len, parent, beta_sum, n_e, n_i, n_dk, inv, l0):
    """Add (sign 1) or remove (-1) a token of doc d on topic k and path p, refreshing the
    reciprocals of the path's nodes (the cousin set); ``n_e`` changes from the path's l0-th
    edge on (1: the root edge's count is kept elsewhere)."""
    n_dk[d, k] += sign
    for l in range(path_len[p]):
        j = path_edges[p, l]
        i = parent[j]
        if l >= l0:
            n_e[j, k] += sign
        n_i[i, k] += sign
        inv[i, k] = 1.0 / (beta_sum[i] + n_i[i, k])


@njit(cache=True)
def root_of(parent):
    for j in range(len(parent)):
        if parent[j] < 0:
            return j
    return 0


@njit(cache=True)
def down_bounds(path_edges, path_len, parent, beta_sum):
    """prod over a path's edges below the root edge of 1 / beta_sum: bounds the downstream
    normaliser's reciprocal (counts only add to beta_sum)."""
    out = np.ones(len(path_len))
    for p in range(len(path_len)):
        for l in range(1, path_len[p]):
            out[p] /= beta_sum[parent[path_edges[p, l]]]
    return out


@njit(cache=True, nogil=True)
def sparse_sweep(rb, sd, sw, root, run_ptr, run_doc, term_ids, z, zp, ptr, path_edges, path_len,
                 parent, beta, beta_sum, path_prior, s_bound, n_e, n_i, n_dk, inv, alpha, rng):
    """One sequential sweep over runs (tokens ``run_ptr[r]:run_ptr[r + 1]`` of document
    ``run_doc[r]``) with the FAST buckets (lists built from the counts at the start, then kept up
    to date, and the root edges' rows of ``n_e`` rebuilt from them at the end); ``root`` is the
    row the root's edges count in. The flags are compile-time constants: one specialised kernel
    per sampler (with run-time flags the kernel ran about twice as slow)."""
    literally(rb)
    literally(sd)
    literally(sw)
    K = n_dk.shape[1]
    n_nodes = len(parent)
    maxp = 1
    for w in range(len(ptr) - 1):
        maxp = max(maxp, ptr[w + 1] - ptr[w])
    pairs = np.empty((n_nodes, K, 2), np.int32)  # an edge list's topics and counts side by side
    etop = pairs[:, :, 0]
    ecnt = pairs[:, :, 1]
    enz = np.zeros(n_nodes, np.int64)
    touched = np.zeros(n_nodes, np.bool_)
    edge_lists(n_e, parent, root, sw, etop, ecnt, enz)
    dl = np.empty((3, K), np.int32)
    coef = np.empty(K)
    acc = np.zeros(2)
    down_bound = down_bounds(path_edges, path_len, parent, beta_sum)
    stp = np.empty(maxp)
    rtp = np.empty(maxp)
    qtp = np.empty(maxp)
    qe = np.empty(maxp, np.int64)
    qv = np.empty(maxp * K)
    B = borrowed  # resample's inlined helpers rebind every array: no reference counting there
    for r in range(len(run_doc)):
        d = run_doc[r]
        dnz = topic_list(n_dk, d, False, dl[0:1], dl[1:2], dl[2:3], 0)
        doc_sums(d, n_dk, inv, root, alpha, dl, dnz, coef, acc)
        dnz = resample(run_ptr[r], run_ptr[r + 1], d, B(term_ids), B(z), B(zp), rb, sd, sw,
                       B(ptr), B(path_edges), B(path_len), B(parent), B(beta), B(beta_sum),
                       B(path_prior), B(s_bound), B(n_e), B(n_i), B(n_dk), B(inv), root, B(alpha),
                       B(etop), B(ecnt), B(enz), B(touched), B(dl), dnz, B(coef), B(acc),
                       B(down_bound), B(stp), B(rtp), B(qtp), B(qv), B(qe), B(rng))
    edge_counts(etop, ecnt, enz, touched, n_e)
