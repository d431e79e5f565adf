"""Kernels of grouped LDA (Bart 2011): the token-to-group step (eq. 2 and the most-instances
refinement), the group-topic step (eq. 3) and one document's pass of both; the sweeps that run
it are :mod:`models.glda.sweep_kernels`.

Layout (shared by all chains): documents ``doc_ptr``; the groups of doc d are the global ids
``grp_ptr[d]:grp_ptr[d + 1]``; the (doc, word) runs, whose groups the refinement counts:
``tok_run`` maps a token to its run, and run r holds the positions ``run_ptr[r]:run_ptr[r + 1]``
of the tokens sorted by (doc, word), so the runs of doc d lie within ``doc_ptr[d]:doc_ptr[d + 1]``.
State of one chain: ``g`` (group of every token, local to its doc), ``zg`` (topic of every group),
``n_kw`` (V, K) and ``n_k`` (K,). ``unit`` says what eq. 3's doc factor counts: 0, groups (gLDA:
theta draws groups, alpha + M_dk); 1, tokens through a rising factorial (restricted LDA: theta
draws tokens, the groups are the fixed (doc, word) runs); 2, tokens in one factor, alpha + N_dk
(eq. 3 read with LDA's token counts).

The group-topic step (sparse for groups of at most LINEAR_MAX tokens, dense beyond) is in
:mod:`models.glda.sparse_kernels`.
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from .sparse_kernels import LINEAR_MAX, ONE, GroupWeights, bit_set, build_word_bits, doc_sums, draw_group_topic, group_topic_weights, pick_listed, smooth_move, topic_move, trailing_zeros
from ..common.kernels.prefetch import prefetch
from ..common.kernels.rng import randint, uniform

# Tokens between the prefetch of a token's counts and its draw.
PREFETCH_AHEAD = 4


class GroupLayout(NamedTuple):
    """The documents, their groups and (doc, word) runs (module docstring), shared by all chains,
    and the model's vocabulary size V (n_kw may hold only the rows of the documents' terms)."""

    doc_ptr: np.ndarray
    term_ids: np.ndarray
    grp_ptr: np.ndarray
    run_ptr: np.ndarray
    tok_run: np.ndarray
    n_terms: int


class ChainState(NamedTuple):
    """One chain's state (module docstring) and alpha."""

    g: np.ndarray
    zg: np.ndarray
    n_kw: np.ndarray
    n_k: np.ndarray
    alpha: np.ndarray


class DocScratch(NamedTuple):
    """One chain's per-document buffers, zero between documents where :func:`sweep_doc` says."""

    n_grp_k: np.ndarray  # (K,) the doc's groups per topic
    m_dk: np.ndarray     # (K,) eq. 3's doc counts (groups or tokens)
    topics: np.ndarray   # (K,) the doc's topics, increasing
    kbuf: np.ndarray     # (3, K) a long group's weights and their scratch
    gptr: np.ndarray     # (max_groups + 1,) members of every group, counting sort
    members: np.ndarray  # (max_len,)
    words: np.ndarray    # (max_len,) a group's terms
    offs: np.ndarray     # (max_len,) earlier tokens of the same term in the group
    seen: np.ndarray     # (V,) tokens per term in the group, zero between groups


class SparseState(NamedTuple):
    """The sparse steps' state of one chain: topic bitsets (words, doc, groups), the sums S and
    D and rows 1 / R_k of eq. 3, 1 / (V beta + n_k) of eq. 2, and scratch."""

    wbits: np.ndarray
    dbits: np.ndarray
    gbits: np.ndarray
    S: np.ndarray
    D: np.ndarray
    inv_r: np.ndarray
    inv1: np.ndarray
    n_max: int
    nk_before: np.ndarray
    dw: np.ndarray
    dc: np.ndarray
    tk: np.ndarray
    tw: np.ndarray
    gsort: np.ndarray
    gstart: np.ndarray
    rg_grp: np.ndarray
    rg_cnt: np.ndarray
    rg_nd: np.ndarray
    lc: tuple



@njit(cache=True)
def draw_token_topic(u01, y, n_grp_k, gbits, wbits, n_kw, inv1, present, beta, s_d, tk, tw):
    """Eq. 2 summed over the groups of each topic, drawn with u01 uniform in [0, 1): the weight
    of a doc topic k is n_groups(k) (beta + n_kw[y, k]) inv1[k], inv1[k] = 1 / (V beta + n_k),
    the token removed from the counts. It is drawn from its word part n_groups(k) n_kw[y, k]
    inv1[k] over the doc's topics where y has a count (``gbits & wbits[y]``, increasing), else
    from its smoothing part beta n_groups(k) inv1[k] (total beta ``s_d``) over the doc's topics
    ``present`` (increasing)."""
    cnt, wsum = word_part(y, n_grp_k, gbits, wbits, n_kw, inv1, tk, tw)
    u = u01 * (wsum + beta * s_d)
    if u < wsum:
        return pick_listed(u, tk, tw, cnt)
    u -= wsum
    acc = 0.0
    for j in range(len(present)):
        k = present[j]
        acc += beta * (n_grp_k[k] * inv1[k])
        if u < acc:
            return k
    return present[len(present) - 1]


@njit(cache=True)
def word_part(y, n_grp_k, gbits, wbits, n_kw, inv1, tk, tw):
    """The word part of eq. 2 (see :func:`draw_token_topic`): topics in ``tk``, parts in ``tw``.
    Returns (number of topics, total)."""
    cnt = 0
    total = 0.0
    for b in range(len(gbits)):
        x = gbits[b] & wbits[y, b]
        while x != 0:
            k = (b << 6) + trailing_zeros(x)
            x &= x - ONE
            tk[cnt] = k
            tw[cnt] = n_grp_k[k] * n_kw[y, k] * inv1[k]
            total += tw[cnt]
            cnt += 1
    return cnt, total


@njit(cache=True)
def run_groups_build(lo, hi, g, run_ptr, tok_run, rg_grp, rg_cnt, rg_nd):
    """The groups holding the tokens of every (doc, word) run of the doc with more than one
    token, with counts: run r's list is ``rg_grp/rg_cnt[s:s + rg_nd[s]]``, s = run_ptr[r] - lo
    (a run of L tokens holds at most L groups, so every run has room in its own slots)."""
    for i in range(lo, hi):
        r = tok_run[i]
        rg_nd[run_ptr[r] - lo] = 0
    for i in range(lo, hi):
        r = tok_run[i]
        if run_ptr[r + 1] - run_ptr[r] > 1:
            _run_add(run_ptr[r] - lo, g[i], rg_grp, rg_cnt, rg_nd)


@njit(cache=True, inline="always")
def _run_add(s, h, rg_grp, rg_cnt, rg_nd):
    nd = rg_nd[s]
    for q in range(s, s + nd):
        if rg_grp[q] == h:
            rg_cnt[q] += 1
            return
    rg_grp[s + nd] = h
    rg_cnt[s + nd] = 1
    rg_nd[s] = nd + 1


@njit(cache=True, inline="always")
def _run_remove(s, h, rg_grp, rg_cnt, rg_nd):
    nd = rg_nd[s]
    for q in range(s, s + nd):
        if rg_grp[q] == h:
            rg_cnt[q] -= 1
            if rg_cnt[q] == 0:  # the list is a set: the last entry takes the freed slot
                rg_grp[q] = rg_grp[s + nd - 1]
                rg_cnt[q] = rg_cnt[s + nd - 1]
                rg_nd[s] = nd - 1
            return


@njit(cache=True)
def refine_group(i, g_drawn, k0, g, zg, g0, s, rg_grp, rg_cnt, rg_nd):
    """The paper's refinement of eq. 2: among the doc's groups of topic ``k0`` the token ``i``
    joins the one holding the most other instances of its term; the drawn group ``g_drawn``
    keeps the token unless another holds strictly more (then the lowest such index). ``s`` is
    the slot of the token's run in the run-group lists (:func:`run_groups_build`); those count
    the token itself in its group ``g[i]``. The choice does not depend on the lists' order."""
    a = g[i]
    best, best_n, drawn_n = -1, 0, 0
    for q in range(s, s + rg_nd[s]):
        h = rg_grp[q]
        if zg[g0 + h] != k0:
            continue
        c = rg_cnt[q] - (h == a)
        if h == g_drawn:
            drawn_n = c
        if c > best_n or (c == best_n and c > 0 and h < best):
            best, best_n = h, c
    return g_drawn if drawn_n >= best_n else best


@njit(cache=True)
def _pick(w, n, u):
    """First j with cumulative weight > u (u < total), else the last positive one."""
    acc = 0.0
    last = 0
    for j in range(n):
        if w[j] > 0:
            last = j
        acc += w[j]
        if u < acc:
            return j
    return last


@njit(cache=True, inline="always")
def _prefetch_bits(wbits, y):
    """Ask for word y's topic bitset (up to two cache lines)."""
    row = wbits[y]
    prefetch(row, 0)
    prefetch(row, len(row) - 1)


@njit(cache=True, inline="always")
def _prefetch_counts(row, bits, blk):
    """Ask for the counts of ``row`` (n_kw[y]) at the topics of ``bits``, block ``blk`` of 64
    topics: the cache lines of its 16-topic quarters that hold one."""
    for q in range(4):
        if (bits >> np.uint64(16 * q)) & np.uint64(0xFFFF):
            k = (blk << 6) + 16 * q
            prefetch(row, k)
            prefetch(row, k + 15)


@njit(cache=True, inline="always")
def _dec(n_kw, wbits, y, k):
    """n_kw[y, k] -= 1, keeping word y's topic bitset."""
    n_kw[y, k] -= 1
    if n_kw[y, k] == 0:
        bit_set(wbits[y], k, False)


@njit(cache=True, inline="always")
def _inc(n_kw, wbits, y, k):
    if n_kw[y, k] == 0:
        bit_set(wbits[y], k, True)
    n_kw[y, k] += 1


@njit(cache=True)
def sweep_doc(d, lay, chain, beta, unit, resample_groups, rng, scratch, sp):
    """One Gibbs pass over doc d: every token's group (eq. 2 + refinement) in position order,
    then every group's topic jointly with its tokens (eq. 3) in group order. Changes in place
    the chain's state (:class:`ChainState`), ``sp`` (:class:`SparseState`), ``rng`` and the
    scratch (:class:`DocScratch`; n_grp_k, m_dk and seen are left zero)."""
    doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, n_terms = lay
    g, zg, n_kw, n_k, alpha = chain
    n_grp_k, m_dk, topics, kbuf, gptr, members, words, offs, seen = scratch
    (wbits, dbits, gbits, S, D, inv_r, inv1, n_max, nk_before, dw, dc, tk, tw, gsort, gstart,
     rg_grp, rg_cnt, rg_nd, lc) = sp
    gw = GroupWeights(m_dk, dbits, wbits, n_kw, inv_r, alpha, unit, beta)
    vbeta = n_terms * beta
    lo, hi = doc_ptr[d], doc_ptr[d + 1]
    g0, G = grp_ptr[d], grp_ptr[d + 1] - grp_ptr[d]
    # doc-level counts: groups per topic and the doc factor's counts (groups or tokens)
    for h in range(G):
        k = zg[g0 + h]
        if k >= 0:  # -1: not drawn yet (the online initialisation)
            n_grp_k[k] += 1
            if not unit:
                m_dk[k] += 1
    if unit:
        for i in range(lo, hi):
            k = zg[g0 + g[i]]
            if k >= 0:
                m_dk[k] += 1
    n_present = 0
    if resample_groups:
        s_d = 0.0  # sum over the doc's topics of n_groups(k) / (V beta + n_k), kept per token
        n_fill = 0
        for k in range(len(n_k)):  # ascending topic order
            if n_grp_k[k] > 0:
                topics[n_present] = k
                nk_before[n_present] = n_k[k]
                n_present += 1
                inv1[k] = 1.0 / (vbeta + n_k[k])
                s_d += n_grp_k[k] * inv1[k]
                bit_set(gbits, k, True)
                gstart[k] = n_fill  # the groups of topic k: gsort[gstart[k]:...], index order
                n_fill += n_grp_k[k]
        for h in range(G):
            k = zg[g0 + h]
            gsort[gstart[k]] = h
            gstart[k] += 1
        for h in range(G):
            gstart[zg[g0 + h]] -= 1
        run_groups_build(lo, hi, g, run_ptr, tok_run, rg_grp, rg_cnt, rg_nd)
        for i in range(lo, hi):
            # later tokens' word bits and counts are random accesses into V-row tables: ask for
            # them now (the bits two steps ahead, then the counts their topics will read), so
            # that they are in the cache when those tokens come
            if i + 2 * PREFETCH_AHEAD < hi:
                _prefetch_bits(wbits, term_ids[i + 2 * PREFETCH_AHEAD])
            if i + PREFETCH_AHEAD < hi:
                ya = term_ids[i + PREFETCH_AHEAD]
                row = n_kw[ya]
                prefetch(row, zg[g0 + g[i + PREFETCH_AHEAD]])
                for b in range(len(gbits)):
                    x = gbits[b] & wbits[ya, b]
                    if x != 0:
                        _prefetch_counts(row, x, b)
            y = term_ids[i]
            k_old = zg[g0 + g[i]]
            _dec(n_kw, wbits, y, k_old)
            n_k[k_old] -= 1
            inv = 1.0 / (vbeta + n_k[k_old])
            s_d += n_grp_k[k_old] * (inv - inv1[k_old])
            inv1[k_old] = inv
            k0 = draw_token_topic(uniform(rng), y, n_grp_k, gbits, wbits, n_kw, inv1,
                                  topics[:n_present], beta, s_d, tk, tw)
            # eq. 2 is uniform over the groups of topic k0: the r-th of them in index order
            h_drawn = gsort[gstart[k0] + randint(rng, n_grp_k[k0])]
            r = tok_run[i]
            h_new = h_drawn
            if run_ptr[r + 1] - run_ptr[r] > 1:  # other instances of the term in the doc
                s = run_ptr[r] - lo
                h_new = refine_group(i, h_drawn, k0, g, zg, g0, s, rg_grp, rg_cnt, rg_nd)
                if h_new != g[i]:
                    _run_remove(s, g[i], rg_grp, rg_cnt, rg_nd)
                    _run_add(s, h_new, rg_grp, rg_cnt, rg_nd)
            g[i] = h_new
            _inc(n_kw, wbits, y, k0)
            n_k[k0] += 1
            inv = 1.0 / (vbeta + n_k[k0])
            s_d += n_grp_k[k0] * (inv - inv1[k0])
            inv1[k0] = inv
            if unit:
                m_dk[k_old] -= 1
                m_dk[k0] += 1
        for j in range(n_present):
            bit_set(gbits, topics[j], False)
    # eq. 2 moved tokens only among the doc's group topics: bring S up to date for them
    for j in range(n_present):
        k = topics[j]
        if n_k[k] != nk_before[j]:
            smooth_move(S, inv_r, n_max, k, alpha[k], unit, vbeta + n_k[k])
    # members of every group (counting sort by group, position order within a group)
    for h in range(G + 1):
        gptr[h] = 0
    for i in range(lo, hi):
        gptr[g[i] + 1] += 1
    for h in range(G):
        gptr[h + 1] += gptr[h]
    for i in range(lo, hi):
        h = g[i]
        members[gptr[h]] = i
        gptr[h] += 1
    for h in range(G - 1, -1, -1):
        gptr[h + 1] = gptr[h]
    gptr[0] = 0
    for h in range(G):
        k = zg[g0 + h]
        if k >= 0 and m_dk[k] > 0:
            bit_set(dbits, k, True)
    doc_sums(dbits, m_dk, alpha, unit, inv_r, n_max, D)
    for h in range(G):
        n = gptr[h + 1] - gptr[h]
        k_old = zg[g0 + h]
        n_dw = 0
        for j in range(n):
            y = term_ids[members[gptr[h] + j]]
            words[j] = y
            offs[j] = seen[y]
            if seen[y] == 0:
                dw[n_dw] = y
                n_dw += 1
            seen[y] += 1
            if k_old >= 0:
                _dec(n_kw, wbits, y, k_old)
        for j in range(n_dw):
            dc[j] = seen[dw[j]]
        for j in range(n):
            seen[words[j]] = 0
        if k_old >= 0:
            n_k[k_old] -= n
            n_grp_k[k_old] -= 1
            m_dk[k_old] -= n if unit else 1
            topic_move(S, D, inv_r, n_max, k_old, alpha[k_old], unit, vbeta + n_k[k_old],
                       m_dk[k_old] + (n if unit else 1), m_dk[k_old])
            bit_set(dbits, k_old, m_dk[k_old] > 0)
        if n <= LINEAR_MAX:
            k_new = draw_group_topic(uniform(rng), dw, dc, n_dw, n, gw, S, D, tk, tw)
        else:
            total = group_topic_weights(words, offs, n, gw, n_k, vbeta, kbuf[0], kbuf[1:], lc)
            k_new = _pick(kbuf[0], len(n_k), uniform(rng) * total)
        zg[g0 + h] = k_new
        for j in range(n):
            _inc(n_kw, wbits, words[j], k_new)
        n_k[k_new] += n
        n_grp_k[k_new] += 1
        m_dk[k_new] += n if unit else 1
        topic_move(S, D, inv_r, n_max, k_new, alpha[k_new], unit, vbeta + n_k[k_new],
                   m_dk[k_new] - (n if unit else 1), m_dk[k_new])
        bit_set(dbits, k_new, m_dk[k_new] > 0)
    # leave the scratch zeroed for the next doc
    for h in range(G):
        k = zg[g0 + h]
        n_grp_k[k] = 0
        m_dk[k] = 0
        bit_set(dbits, k, False)
    for i in range(lo, hi):
        m_dk[zg[g0 + g[i]]] = 0


@njit(cache=True, parallel=True)
def word_bits(n_kw):
    """The topic bitsets of every chain's words (:func:`build_word_bits`): (C, V, ceil(K / 64))."""
    C, V, K = n_kw.shape
    wbits = np.zeros((C, V, (K + 63) >> 6), np.uint64)
    for c in prange(C):
        build_word_bits(n_kw[c], wbits[c])
    return wbits


@njit(cache=True)
def init_random(doc_ptr, grp_ptr, tok_run, run_doc_first, resample_groups, g, zg, n_topics, rng, d0, d1):
    """Uniform groups of docs [d0, d1) (gLDA; restricted LDA: the token's (doc, word) run), then
    uniform topics of their groups (``n_topics`` 0: every group's topic -1, left to the online
    initialisation's pass)."""
    for d in range(d0, d1):
        G = grp_ptr[d + 1] - grp_ptr[d]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            g[i] = randint(rng, G) if resample_groups else tok_run[i] - run_doc_first[d]
    for h in range(grp_ptr[d0], grp_ptr[d1]):
        zg[h] = randint(rng, n_topics) if n_topics > 0 else -1


@njit(cache=True)
def token_topics(doc_ptr, grp_ptr, g, zg, z):
    """Token-level topics z_i = z_{d, g_i} in document order."""
    for d in range(len(doc_ptr) - 1):
        g0 = grp_ptr[d]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            z[i] = zg[g0 + g[i]]
