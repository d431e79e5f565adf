"""Sparse machinery of tree-LDA's FAST samplers (Hu & Boyd-Graber 2012, section 4): nonzero-topic
lists, the cached root sums, the s / r / q buckets of eq. 5 per token and the draw.

Why each piece:
- q is nonzero only for topics with a nonzero edge-masked count on the path, and an edge's count
  is never below a descendant edge's, so the path's first edge (out of the root) decides it: one
  list of nonzero topics per root edge (``etop``), kept by decreasing count for SW.
- r is nonzero only for the document's topics (the document list ``dl``). Its total is cached
  for one-edge paths, so the list's order serves only a draw that lands in r, a rare one: SD
  sorts it by decreasing n_dk then, not on every count change.
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
array it touches. So during a sweep the counts of the root's edges live only in their lists, and
so do their nodes' (every token through the edge into a synset node j0 leaves j0: n_i[j0] is the
edge's count), so 1 / N_{j0,k} is computed from the list where a draw reads it; the rows of
``n_e``, ``n_i`` and ``inv`` a sweep changed are rebuilt at its end. What a token reads of its
word and paths sits in one row each of the tables of :mod:`models.tree_lda.tables`, prefetched a few
tokens ahead; a draw in q returns the topic's place in the list, so adding the token back scans
nothing. ``resample`` works on borrowed views (:mod:`models.common.kernels.borrow`) of every array,
because its inlined helpers rebind each array argument and every rebinding of a counted array is
a locked reference-count update. None of this changes a value or the order of an operation: the
draws are the plain kernel's, bit for bit (tests/test_tree_lda_kernels.py checks the samplers
against each other and against eq. 1).

Arguments travel in groups: the tree (:class:`models.tree_lda.state.TreeArrays`), the chain
(:class:`models.tree_lda.state.Chain`), the sweep order (:class:`models.tree_lda.state.Runs`),
the chain's tables and lists (:class:`models.tree_lda.tables.Tables`), the document's caches
(:class:`models.tree_lda.tables.DocCache`, with its list's length ``dnz`` beside it, since the
kernels change it) and a draw's buffers (:class:`models.tree_lda.tables.Scratch`).
"""
import numpy as np
from numba import config, literally
from ..common.jit import njit

from ..common.kernels.borrow import borrowed
from ..common.kernels.rng import uniform
from .lists import find, list_dec, list_inc, sort_doc_list, topic_list
from .tables import (P_B0, P_B1, P_BS0, P_DOWN, P_E1, P_J0, P_LEN, P_S, W_BOUND, W_HI, W_LO,
                     DocCache, Scratch, begin_lists, end_lists, prefetch_ahead, sweep_tables)

if config.DISABLE_JIT:
    def _borrow(arr):
        """The array itself without the JIT (``borrowed`` is an intrinsic)."""
        return arr
else:
    _borrow = borrowed


@njit(cache=True)
def doc_sums(d, tree, chain, doc, dnz):
    """Per-document caches from scratch: ``doc.coef`` and doc.acc = [s_root, r_root]."""
    n_dk, inv, alpha, root = chain.n_dk, chain.inv, chain.alpha, tree.root
    dl, coef, acc = doc.dl, doc.coef, doc.acc
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
def first_inv(p, tables, inv0):
    """inv0[k] = 1 / N_{j0, k} for the node j0 of path p's root edge, from j0's list: during a
    sweep j0's count lives there (every token through the edge into j0 leaves j0, so n_i[j0] is
    the edge's count), and ``inv``'s row of j0 is refreshed only at the sweep's end. Computed as
    ``inv`` always is, 1.0 / (beta_sum + n), so the values are the same."""
    etop, ecnt = tables.etop, tables.ecnt
    j0 = tables.pint[p, P_J0]
    bs = tables.ptab[p, P_BS0]
    base = 1.0 / bs
    for k in range(len(inv0)):
        inv0[k] = base
    for a in range(tables.enz[j0]):
        inv0[etop[j0, a]] = 1.0 / (bs + ecnt[j0, a])


@njit(cache=True, inline="always")
def s_exact(p, tables, tree, chain, doc, inv0, filled=False):
    """Bucket s of one path: S_p sum_k alpha_k / N_{k,p} (``filled``: ``inv0`` holds the
    path's :func:`first_inv` already)."""
    pint, ptab = tables.pint, tables.ptab
    if pint[p, P_LEN] == 1:
        return ptab[p, P_S] * doc.acc[0]
    if not filled:
        first_inv(p, tables, inv0)
    path_edges, parent, root = tree.path_edges, tree.parent, tree.root
    inv, alpha = chain.inv, chain.alpha
    # prod over the path's edges below the root edge of 1 / N_{parent, k}: the first from inv0,
    # the deeper ones from inv. Written out, not an inlined helper: a helper called per topic
    # rebinds its array arguments, and the reference counts that go with it stay in the loop.
    L = pint[p, P_LEN]
    t = 0.0
    for k in range(len(alpha)):
        x = inv0[k]
        for l in range(2, L):
            x *= inv[parent[path_edges[p, l]], k]
        t += alpha[k] * inv[root, k] * x
    return ptab[p, P_S] * t


@njit(cache=True, inline="always")
def r_exact(p, tables, tree, chain, doc, dnz, inv0):
    """Bucket r of one path over S_p: sum over the document's topics of n_dk / N_{k,p}."""
    path_edges, parent, root = tree.path_edges, tree.parent, tree.root
    inv, dl = chain.inv, doc.dl
    L = tables.pint[p, P_LEN]
    if L > 1:
        first_inv(p, tables, inv0)
    r = 0.0
    for a in range(dnz):
        k = dl[0, a]
        x = inv0[k] if L > 1 else 1.0  # the downstream product, as in s_exact
        for l in range(2, L):
            x *= inv[parent[path_edges[p, l]], k]
        r += dl[1, a] * inv[root, k] * x
    return r


@njit(cache=True, inline="always")
def buckets(w, exact, tables, tree, chain, doc, dnz, scratch):
    """Per path c of word w: s and r (exact, or for a path below a synset node their upper
    bounds S_p s_root and S_p r_root times prod 1/beta_sum below the root when not ``exact``)
    in ``scratch.tot[0, c]`` and ``tot[1, c]``, and the q cells (values ``scratch.qv`` in the
    order of the path's root-edge list, path c's cells ending at ``scratch.qe[0, c]``, their sum
    in ``tot[2, c]``). Returns (s total, r total, q total)."""
    wint, pint, ptab = tables.wint, tables.pint, tables.ptab
    etop, ecnt, enz = tables.etop, tables.ecnt, tables.enz
    path_edges, parent, beta = tree.path_edges, tree.parent, tree.beta
    n_e, inv = chain.n_e, chain.inv
    coef, acc = doc.coef, doc.acc
    inv0, tot, qv, qe = scratch.inv0, scratch.tot, scratch.qv, scratch.qe
    m = 0
    st = 0.0
    rt = 0.0
    qt = 0.0
    lo = wint[w, W_LO]
    for c in range(wint[w, W_HI] - lo):
        p = lo + c
        S = ptab[p, P_S]
        j0 = pint[p, P_J0]
        L = pint[p, P_LEN]
        qt0 = qt
        if L == 1:
            for a in range(enz[j0]):
                x = coef[etop[j0, a]] * ecnt[j0, a]
                qv[m] = x
                qt += x
                m += 1
            tot[1, c] = S * acc[1]
            tot[0, c] = S * acc[0]
        else:
            b0 = ptab[p, P_B0]
            bs0 = ptab[p, P_BS0]
            b1 = ptab[p, P_B1]
            e1 = pint[p, P_E1]
            for a in range(enz[j0]):
                k = etop[j0, a]
                n0 = ecnt[j0, a]  # the root edge's count: its list's
                # 1 / N_{j0, k} from the list's count (see first_inv): no gather from inv's row
                dn = 1.0 / (bs0 + n0)
                ob = (b0 + n0) * (b1 + n_e[e1, k])
                for l in range(2, L):
                    e = path_edges[p, l]
                    dn *= inv[parent[e], k]
                    ob *= beta[e] + n_e[e, k]
                x = coef[k] * dn * (ob - S)
                qv[m] = x
                qt += x
                m += 1
            if exact:
                tot[1, c] = S * r_exact(p, tables, tree, chain, doc, dnz, inv0[0])
                # r_exact filled inv0
                tot[0, c] = s_exact(p, tables, tree, chain, doc, inv0[0], True)
            else:
                down = ptab[p, P_DOWN]
                tot[1, c] = S * acc[1] * down
                tot[0, c] = S * acc[0] * down
        qe[0, c] = m
        tot[2, c] = qt - qt0
        st += tot[0, c]
        rt += tot[1, c]
    return st, rt, qt


@njit(cache=True, inline="always")
def _pick_path(tot, row, n, u):
    """Index c < n where the running sum of tot[row] passes u (the last positive one on rounding)."""
    last = 0
    for c in range(n):
        if tot[row, c] > 0.0:
            last = c
            if u < tot[row, c]:
                return c, u
            u -= tot[row, c]
    return last, 0.0


@njit(cache=True, inline="always")
def _picked_path(row, n, u, lo, tables, scratch):
    """The path that u picks from bucket ``row`` of the word's paths (numbered from ``lo``), u
    rescaled by its S_p, and the reciprocals of its first edge (``first_inv``, into inv0[0])."""
    c, u = _pick_path(scratch.tot, row, n, u)
    p = lo + c
    i0 = scratch.inv0[0]
    if tables.pint[p, P_LEN] > 1:
        first_inv(p, tables, i0)
    return p, u / tables.ptab[p, P_S], i0


@njit(cache=True, inline="always")
def draw(rb, sd, sw, w, tables, tree, chain, doc, dnz, scratch, rng):
    """One draw of (topic, path) from eq. 5 for word w in the document of list ``doc.dl`` (token
    removed). With ``rb`` (refined bucket) s and the synset paths' r are first replaced by upper
    bounds (for s the smaller of eq. 6's s'_w and the per-path bound) and computed only when the
    draw lands in one; a draw in a bound's slack is redrawn from the exact totals, which keeps
    the draw exact. Returns (k, path id, k's index in the path's root-edge list when the draw
    landed in q, else -2)."""
    wint, pint = tables.wint, tables.pint
    etop = tables.etop
    path_edges, parent, root = tree.path_edges, tree.parent, tree.root
    inv, alpha = chain.inv, chain.alpha
    dl = doc.dl
    tot, qv, qe = scratch.tot, scratch.qv, scratch.qe
    lo = wint[w, W_LO]
    npw = wint[w, W_HI] - lo
    st, rt, qt = buckets(w, not rb, tables, tree, chain, doc, dnz, scratch)
    if rb:
        st = min(st, tables.wtab[w, W_BOUND])
    u = uniform(rng) * (st + rt + qt)
    if rb and u < st + rt:  # in a bound: compute the bucket it bounds
        in_s = u < st
        if in_s:
            st = _s_paths(w, tables, tree, chain, doc, scratch)
            slack = u >= st
        else:
            rt = _r_paths(w, tables, tree, chain, doc, dnz, scratch)
            slack = u - st >= rt
        if slack:  # in the slack of a bound: redraw from the exact totals
            if in_s:
                rt = _r_paths(w, tables, tree, chain, doc, dnz, scratch)
            else:
                st = _s_paths(w, tables, tree, chain, doc, scratch)
            u = uniform(rng) * (st + rt + qt)
    if u < st:
        p, u, i0 = _picked_path(0, npw, u, lo, tables, scratch)
        last = 0
        L = pint[p, P_LEN]
        for k in range(len(alpha)):
            y = i0[k] if L > 1 else 1.0  # the downstream product, as in s_exact
            for l in range(2, L):
                y *= inv[parent[path_edges[p, l]], k]
            x = alpha[k] * inv[root, k] * y
            if x > 0.0:
                last = k
                if u < x:
                    return k, p, -2
                u -= x
        return last, p, -2
    u -= st
    if u < rt:
        p, u, i0 = _picked_path(1, npw, u, lo, tables, scratch)
        if sd:  # walk the document's topics by decreasing n_dk
            sort_doc_list(dl, dnz)
        last = dl[0, 0]
        L = pint[p, P_LEN]
        for a in range(dnz):
            k = dl[0, a]
            last = k
            y = i0[k] if L > 1 else 1.0  # the downstream product, as in s_exact
            for l in range(2, L):
                y *= inv[parent[path_edges[p, l]], k]
            x = dl[1, a] * inv[root, k] * y
            if u < x:
                return k, p, -2
            u -= x
        return last, p, -2
    u -= rt
    # q: path by path; with SW paths by decreasing q mass, topics by decreasing edge count
    order = qe[1]
    if sw and npw > 1:
        _path_order(tot, npw, order)
    last = 0
    lastc = 0
    for t in range(npw):
        c = order[t] if sw and npw > 1 else t
        a0 = 0 if c == 0 else qe[0, c - 1]
        for a in range(a0, qe[0, c]):
            last = a
            lastc = c
            if u < qv[a]:
                return etop[pint[lo + c, P_J0], a - a0], lo + c, a - a0
            u -= qv[a]
    a0 = 0 if lastc == 0 else qe[0, lastc - 1]
    return etop[pint[lo + lastc, P_J0], last - a0], lo + lastc, last - a0


@njit(cache=True, inline="always")
def _s_paths(w, tables, tree, chain, doc, scratch):
    """Exact bucket s of every path of w into ``scratch.tot[0]``; returns their total."""
    wint, tot, inv0 = tables.wint, scratch.tot, scratch.inv0
    st = 0.0
    lo = wint[w, W_LO]
    for c in range(wint[w, W_HI] - lo):
        tot[0, c] = s_exact(lo + c, tables, tree, chain, doc, inv0[0])
        st += tot[0, c]
    return st


@njit(cache=True, inline="always")
def _r_paths(w, tables, tree, chain, doc, dnz, scratch):
    """Exact bucket r of every path of w into ``scratch.tot[1]`` (a one-edge path's is exact
    already); returns their total. ``scratch.inv0`` (2, K) is scratch here. A path of two edges
    (below a synset node) sums, in the document list's order as :func:`r_exact` does, n_dk /
    N_root,k (the same for every path, computed once) times 1 / N_{j0, k}, that of the
    document's topics only (1 / beta_sum where j0's list has no k): the same products, added in
    the same order."""
    wint, pint, ptab = tables.wint, tables.pint, tables.ptab
    etop, ecnt, enz = tables.etop, tables.ecnt, tables.enz
    inv, root, dl = chain.inv, tree.root, doc.dl
    tot, inv0 = scratch.tot, scratch.inv0
    rt = 0.0
    lo = wint[w, W_LO]
    y = inv0[1]
    v = inv0[0]
    have_y = False
    for c in range(wint[w, W_HI] - lo):
        p = lo + c
        L = pint[p, P_LEN]
        if L == 2:
            if not have_y:
                for a in range(dnz):
                    y[a] = dl[1, a] * inv[root, dl[0, a]]
                have_y = True
            j0 = pint[p, P_J0]
            bs = ptab[p, P_BS0]
            base = 1.0 / bs
            for a in range(dnz):
                v[a] = base
            for b in range(enz[j0]):
                a = dl[2, etop[j0, b]]
                if a >= 0:
                    v[a] = 1.0 / (bs + ecnt[j0, b])
            r = 0.0
            for a in range(dnz):
                r += y[a] * v[a]
            tot[1, c] = ptab[p, P_S] * r
        elif L > 2:
            tot[1, c] = ptab[p, P_S] * r_exact(p, tables, tree, chain, doc, dnz, inv0[0])
        rt += tot[1, c]
    return rt


@njit(cache=True, inline="always")
def _path_order(tot, n, order):
    """``order[:n]``: the paths by decreasing q total ``tot[2]``, ties by index (a stable
    insertion sort; a word has few paths), once per walk instead of a rank count per step."""
    for i in range(n):
        c = order[i] = i
        x = tot[2, c]
        j = i
        while j > 0 and tot[2, order[j - 1]] < x:
            order[j] = order[j - 1]
            j -= 1
        order[j] = c


@njit(cache=True, error_model="numpy")
def resample(r, runs, rb, sd, sw, tables, tree, chain, doc, dnz, scratch, rng):
    """Tokens of run r (``runs``) in turn: remove the token from the counts, draw its (topic,
    path) with :func:`draw`, add it back. Every count change also updates the reciprocal
    normalisers of the path's nodes (its cousin set) below the root edge's node, both lists,
    ``doc.coef`` and the root sums; the root edge's count, and so its node's, changes in its
    list only (its touched flag marks the edge).
    One loop body for both changes (removal and addition), so the code is compiled once. A call
    per run, not per token: every array of a call is a reference count to update. numpy's error
    model: no zero-division checks, since every divisor is a positive prior sum or path prior.
    Returns the document list's new length."""
    # borrowed here, not by the caller: the views' null memory-info pointers are then constants
    # of this function, so the reference-count calls of the helpers' bindings can be optimised out
    B = _borrow
    runs, tables, tree, chain, doc, scratch, rng = (B(runs), B(tables), B(tree), B(chain), B(doc),
                                                    B(scratch), B(rng))
    term_ids = runs.term_ids
    z, zp, n_dk, inv, alpha = chain.z, chain.zp, chain.n_dk, chain.inv, chain.alpha
    root = tree.root
    wint, pint, n_e = tables.wint, tables.pint, chain.n_e
    etop, ecnt, enz, touched = tables.etop, tables.ecnt, tables.enz, tables.touched
    dl, coef, acc = doc.dl, doc.coef, doc.acc
    dtop, dcnt, dpos = dl[0:1], dl[1:2], dl[2:3]
    d = runs.run_doc[r]
    K = len(alpha)
    for t in range(runs.run_ptr[r], runs.run_ptr[r + 1]):
        prefetch_ahead(t, term_ids, wint, pint, enz, n_e, K)
        w = term_ids[t]
        k = z[t]
        p = zp[t]
        i = -2
        for sign in (-1, 1):
            if sign > 0:
                k, p, i = draw(rb, sd, sw, w, tables, tree, chain, doc, dnz, scratch, rng)
                z[t] = k
                zp[t] = p
            acc[0] -= alpha[k] * inv[root, k]
            acc[1] -= n_dk[d, k] * inv[root, k]
            move_below(d, k, p, sign, tables, tree, chain)
            j = pint[p, P_J0]
            touched[j] = 1
            if sign < 0 or i == -2:  # a draw in q knows k's place in the list
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
def move_below(d, k, p, sign, tables, tree, chain):
    """:func:`models.tree_lda.kernels.move_token` in a sparse sweep: the root edge's count lives
    in its list, and so does its node's (n_i and inv of the root edge's node are rebuilt from the
    list at the end of the sweep, :func:`end_lists`); the root's own row and every deeper node
    change here."""
    pint, path_edges, parent = tables.pint, tree.path_edges, tree.parent
    beta_sum, root = tree.beta_sum, tree.root
    n_e, n_i, n_dk, inv = chain.n_e, chain.n_i, chain.n_dk, chain.inv
    n_dk[d, k] += sign
    n_i[root, k] += sign
    inv[root, k] = 1.0 / (beta_sum[root] + n_i[root, k])
    L = pint[p, P_LEN]
    if L > 1:
        n_e[pint[p, P_E1], k] += sign
        for l in range(2, L):
            j = path_edges[p, l]
            i = parent[j]
            n_e[j, k] += sign
            n_i[i, k] += sign
            inv[i, k] = 1.0 / (beta_sum[i] + n_i[i, k])


@njit(cache=True)
def root_of(parent):
    for j in range(len(parent)):
        if parent[j] < 0:
            return j
    return 0


@njit(cache=True, nogil=True)
def sparse_sweep(rb, sd, sw, runs, tree, chain, work, begin, end, rng):
    """One sequential sweep over ``runs`` with the FAST buckets; ``tree.root`` is the row the
    root's edges count in. ``work`` (:class:`models.tree_lda.kernels.SweepWork`): the word and
    path tables (:mod:`models.tree_lda.tables`) and the root edges' lists, ``pairs`` (n_nodes,
    1 + width, 2), width >= K (:func:`list_views`): with ``begin`` they are built from the
    counts, with ``end`` the rows of the edges a sweep changed are rebuilt from them
    (:func:`end_lists`); a sweep cut in two calls at a document boundary (the first without
    ``end``, the second without ``begin``) is the same sweep.
    The flags rb, sd, sw are compile-time constants: one specialised kernel per sampler, with
    no test of a flag left in its token loop."""
    literally(rb)
    literally(sd)
    literally(sw)
    K = chain.n_dk.shape[1]
    wint = work.wint
    maxp = 1
    for w in range(len(wint)):
        maxp = max(maxp, wint[w, W_HI] - wint[w, W_LO])
    tables = sweep_tables(wint, work.pint, work.pairs)
    if begin:
        begin_lists(tables, tree, chain.n_e, sw)
    dl = np.empty((3, K), np.int32)
    doc = DocCache(dl, np.empty(K), np.zeros(2))
    scratch = Scratch(np.empty((2, K)), np.empty((3, maxp)), np.empty(maxp * K),
                      np.empty((2, maxp), np.int64))
    for r in range(len(runs.run_doc)):
        d = runs.run_doc[r]
        dnz = topic_list(chain.n_dk, d, False, dl[0:1], dl[1:2], dl[2:3], 0)
        doc_sums(d, tree, chain, doc, dnz)
        dnz = resample(r, runs, rb, sd, sw, tables, tree, chain, doc, dnz, scratch, rng)
    if end:
        end_lists(tables, tree, chain)
