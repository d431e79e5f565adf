"""The steps of the TCM sweep at one position j (see :mod:`models.tcm.kernels` for the model,
the weights and the buckets; its ``_sweep_doc`` runs them): the collocations around j, their
removal from the counts, the weights of "none" and of kr, the draw (dense, or by buckets), and
the addition of what was drawn.
"""
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from ..common.kernels.ftree import tree_sample, tree_set
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound
from .restaurants import (HASH_SEED, doc_change, entry_add, entry_insert, entry_lookup, hash_span,
                          type_lookup, type_new)


class Tally(NamedTuple):
    """Running numbers: the shard's types and entries, the document's topic-list length and its
    collocations (N_d)."""

    n_types: int
    n_entries: int
    nnz: int
    N_d: int


class Span(NamedTuple):
    """Position j and the collocations around it as b stands (names of the module docstring of
    :mod:`models.tcm.kernels`): L = [s, j], R = [j + 1, e], LR = [s, e]; kr = b[e], the topic
    of R (-1, and e = j, nR = nLR = 0, at a forced boundary); k_old = b[j]."""

    s: int
    j: int
    e: int
    nL: int
    nR: int
    nLR: int
    kr: int
    k_old: int
    forced: bool


class Found(NamedTuple):
    """Entries (L, k_old), (R, kr), (LR, kr), (L, kr) and the types of L, R, LR: ids, or -1 when
    not looked up or missing (a missing type may hold ``-1 - free slot`` of the shard's own
    slot table, from ``type_lookup``);
    hashes of the spans hashed, else HASH_SEED."""

    eL: int
    eR: int
    eLR: int
    eLkr: int
    tL: int
    tR: int
    tLR: int
    hL: np.uint64
    hR: np.uint64
    hLR: np.uint64


class Weights(NamedTuple):
    """alpha0 P0(L); the weights of "none" and of kr; R_k for k != kr, and R' its factor at
    k = kr; n_d,kr (module docstring of :mod:`models.tcm.kernels`)."""

    p0L: float
    w_none: float
    w_kr: float
    R: float
    Rp: float
    ndr: int


@njit(cache=True, inline="always")
def span(b, split, s, j):
    """The :class:`Span` of position j, whose collocation L starts at s."""
    forced = split[j] != 0
    if not forced:
        e = j + 1
        while b[e] < 0:
            e += 1
        kr = b[e]
        nR = e - j
        nLR = e - s + 1
    else:
        e = j
        kr = -1
        nR = 0
        nLR = 0
    return Span(s, j, e, j - s + 1, nR, nLR, kr, b[j], forced)


@njit(cache=True, inline="always")
def remove(sp, eC, term_ids, loc, buf, doc, tally, sparse, prior):
    """Take the collocation(s) around j out of the counts: L and R (j a boundary), or LR; and
    R's customer of kr out of the dense counts, though not out of the doc list or the tree:
    kr comes back whatever is drawn. ``eC``: the entry of L (or LR). Returns (Found, Tally)."""
    s, j, kr, k_old = sp.s, sp.j, sp.kr, sp.k_old
    nnz = tally.nnz
    N_d = tally.N_d
    eL = -1
    eR = -1
    eLR = -1
    hL = HASH_SEED
    hR = HASH_SEED
    hLR = HASH_SEED
    if k_old >= 0:
        eL = eC
        tL = loc.en_type[eL]
        loc.en_count[eL] -= 1
        loc.n_k[k_old] -= 1
        nnz = doc_change(doc.ndk, doc.topic, doc.count, 0, nnz, k_old, -1)
        N_d -= 1
        if sparse and k_old != kr:
            tree_set(buf.tree, len(buf.tree) // 2, k_old, 1.0 / (loc.n_k[k_old] + prior.alpha0))
        tR = -1
        tLR = -1
        if not sp.forced:
            eR = loc.col_entry[sp.e]
            tR = loc.en_type[eR]
            loc.en_count[eR] -= 1
            if sp.nLR <= prior.max_len:
                hLR = hash_span(term_ids, s, sp.nLR)
                tLR = type_lookup(loc.g_ty_slot, loc.ty_slot, loc.ty_pos, term_ids, hLR, s, sp.nLR)
    else:
        eLR = eC
        tLR = loc.en_type[eLR]
        loc.en_count[eLR] -= 1
        hL = hash_span(term_ids, s, sp.nL)
        tL = type_lookup(loc.g_ty_slot, loc.ty_slot, loc.ty_pos, term_ids, hL, s, sp.nL)
        hR = hash_span(term_ids, j + 1, sp.nR)
        tR = type_lookup(loc.g_ty_slot, loc.ty_slot, loc.ty_pos, term_ids, hR, j + 1, sp.nR)
        if tR >= 0:
            eR = max(entry_lookup(loc.g_en_slot, loc.en_slot, tR, kr), -1)
    if not sp.forced:
        loc.n_k[kr] -= 1
        doc.ndk[kr] -= 1
        N_d -= 1
    return (Found(eL, eR, eLR, -1, tL, tR, tLR, hL, hR, hLR),
            Tally(tally.n_types, tally.n_entries, nnz, N_d))


@njit(cache=True, inline="always")
def _w_right(ndr, alpha, c_lkr, p0L, n_kr, alpha0, Rp):
    """p(b_j = kr) (module docstring), given n_kr,L = c_lkr."""
    return (ndr + alpha) * (c_lkr + p0L) / (n_kr + alpha0) * Rp


@njit(cache=True, inline="always")
def weights(sp, f, term_ids, loc, ndk, N_d, sparse, prior):
    """The :class:`Weights` at j, the counts taken out. The weight of kr is left 0 for the
    sparse sampler unless L had topic kr: it meets (L, kr) among L's entries, so looks it up
    only then. Returns (Weights, Found with the entries of LR and (L, kr) looked up)."""
    alpha, alpha0 = prior.alpha, prior.alpha0
    s, j, nL, nR, nLR, kr = sp.s, sp.j, sp.nL, sp.nR, sp.nLR, sp.kr
    eLR = f.eLR
    eLkr = f.eLkr
    p0L = alpha0 * prior.p0_len[nL]
    w_none = 0.0
    R = 1.0
    Rp = 0.0
    ndr = 0
    w_kr = 0.0
    if not sp.forced:
        p0R = alpha0 * prior.p0_len[nR]
        same = 0
        if nL == nR:
            same = 1
            for i in range(nL):
                if term_ids[s + i] != term_ids[j + 1 + i]:
                    same = 0
                    break
        cR = 0 if f.eR < 0 else loc.en_count[f.eR]
        ndr = ndk[kr]
        R = (ndr + alpha) * (cR + p0R) / (loc.n_k[kr] + alpha0)
        Rp = (ndr + 1 + alpha) * (cR + same + p0R) / (loc.n_k[kr] + 1 + alpha0)
        if nLR <= prior.max_len:
            if eLR < 0 and f.tLR >= 0:
                eLR = max(entry_lookup(loc.g_en_slot, loc.en_slot, f.tLR, kr), -1)
            cLR = 0 if eLR < 0 else loc.en_count[eLR]
            p0LR = alpha0 * prior.p0_len[nLR]
            kalpha = len(ndk) * alpha
            w_none = (ndr + alpha) * (cLR + p0LR) / (loc.n_k[kr] + alpha0) * (N_d + 1 + kalpha)
        if sp.k_old == kr:
            eLkr = f.eL
        elif f.tL >= 0 and not sparse:
            eLkr = max(entry_lookup(loc.g_en_slot, loc.en_slot, f.tL, kr), -1)
        if sp.k_old == kr or not sparse:
            w_kr = _w_right(ndr, alpha, 0 if eLkr < 0 else loc.en_count[eLkr], p0L, loc.n_k[kr],
                            alpha0, Rp)
    return (Weights(p0L, w_none, w_kr, R, Rp, ndr),
            Found(f.eL, f.eR, eLR, eLkr, f.tL, f.tR, f.tLR, f.hL, f.hR, f.hLR))


@njit(cache=True, inline="always")
def draw_dense(sp, f, wt, loc, buf, ndk, prior, rng, record):
    """The new b_j from the K + 1 weights in one dense loop: a topic, or -1 ("none")."""
    alpha, alpha0 = prior.alpha, prior.alpha0
    K = len(ndk)
    kr, tL = sp.kr, f.tL
    p0L, w_none, w_kr, R = wt.p0L, wt.w_none, wt.w_kr, wt.R
    if tL >= 0:
        ee = loc.ty_head[tL]
        while ee >= 0:
            buf.crow[loc.en_topic[ee]] = loc.en_count[ee]
            ee = loc.en_next[ee]
    acc = w_none
    for k in range(K):
        if k == kr:
            acc += w_kr
        else:
            acc += (ndk[k] + alpha) * (buf.crow[k] + p0L) / (loc.n_k[k] + alpha0) * R
        buf.pbuf[k] = acc
    u = uniform(rng) * acc
    k_new = -1
    if not u < w_none:
        k_new = 0
        while buf.pbuf[k_new] <= u and k_new < K - 1:
            k_new += 1
    if record.shape[0] > 0:
        j = sp.j
        record[j, 0] = w_none / acc
        for k in range(K):
            if k == kr:
                record[j, 1 + k] = w_kr / acc
            else:
                record[j, 1 + k] = ((ndk[k] + alpha) * (buf.crow[k] + p0L)
                                    / (loc.n_k[k] + alpha0) * R) / acc
    if tL >= 0:
        ee = loc.ty_head[tL]
        while ee >= 0:
            buf.crow[loc.en_topic[ee]] = 0
            ee = loc.en_next[ee]
    return k_new


@njit(cache=True, inline="always")
def _record_sparse(sp, f, wt, w_kr, total, loc, buf, doc, nnz, alpha, record):
    """record[j]: the normalised conditional the bucket sampler drew from (for tests)."""
    j, kr = sp.j, sp.kr
    p0L, R = wt.p0L, wt.R
    P = len(buf.tree) // 2
    K = len(doc.ndk)
    for k in range(K):
        record[j, 1 + k] = alpha * p0L * buf.tree[P + k] * R
    for jj in range(nnz):
        k = doc.topic[jj]
        if k != kr:
            record[j, 1 + k] += p0L * (doc.count[jj] * buf.tree[P + k]) * R
    if f.tL >= 0:
        ee = loc.ty_head[f.tL]
        while ee >= 0:
            k = loc.en_topic[ee]
            if loc.en_count[ee] > 0 and k != kr:
                record[j, 1 + k] += (doc.ndk[k] + alpha) * loc.en_count[ee] * buf.tree[P + k] * R
            ee = loc.en_next[ee]
    if kr >= 0:
        record[j, 1 + kr] = w_kr
    record[j, 0] = wt.w_none
    for k in range(K + 1):
        record[j, k] /= total


@njit(cache=True, inline="always")
def draw_sparse(sp, f, wt, loc, buf, doc, nnz, prior, rng, record):
    """The new b_j by the buckets of the module docstring of :mod:`models.tcm.kernels`:
    "none", kr, collocation, document, smoothing. Returns (the topic or -1, how many of L's
    entries the collocation bucket walked into ctop and cent, Found with (L, kr)'s entry)."""
    alpha, alpha0 = prior.alpha, prior.alpha0
    P = len(buf.tree) // 2
    K = len(doc.ndk)
    kr, tL = sp.kr, f.tL
    p0L, w_none, R = wt.p0L, wt.w_none, wt.R
    eLkr = f.eLkr
    if kr >= 0:
        tree_set(buf.tree, P, kr, 0.0)
    # collocation bucket: topics of L's restaurant entries (sorted), kr excluded, and
    # document bucket: topics of doc d (sorted), kr excluded. kr (leaf 0 now) and
    # emptied entries add +0.0, the same bits as skipping them, without a branch;
    # a draw stops at the first prefix above it, never on them (c_last, d_last: the
    # last topic of weight > 0, where round-off at the right edge stops)
    n_c = 0
    c_last = 0
    csum = 0.0
    if tL >= 0:
        ee = loc.ty_head[tL]
        while ee >= 0:
            k = loc.en_topic[ee]
            cnt = loc.en_count[ee]
            csum += (doc.ndk[k] + alpha) * cnt * buf.tree[P + k]
            buf.cbuf[n_c] = csum
            buf.ctop[n_c] = k
            buf.cent[n_c] = ee
            c_last = n_c if cnt > 0 and k != kr else c_last
            eLkr = ee if k == kr else eLkr
            n_c += 1
            ee = loc.en_next[ee]
    w_kr = wt.w_kr
    if not sp.forced and sp.k_old != kr:
        w_kr = _w_right(wt.ndr, alpha, 0 if eLkr < 0 else loc.en_count[eLkr], p0L, loc.n_k[kr], alpha0,
                        wt.Rp)
    dsum = 0.0
    d_last = 0
    for jj in range(nnz):
        k = doc.topic[jj]
        dsum += doc.count[jj] * buf.tree[P + k]
        buf.pbuf[jj] = dsum
        d_last = jj if k != kr else d_last
    m_col = csum * R
    m_doc = p0L * dsum * R
    m_smooth = alpha * p0L * buf.tree[1] * R
    total = w_none + w_kr + m_col + m_doc + m_smooth
    u = uniform(rng) * total
    if u < w_none:
        k_new = -1
    else:
        u -= w_none
        if u < w_kr:
            k_new = kr
        else:
            u -= w_kr
            if u < m_col:
                v = u / R
                i = 0
                while buf.cbuf[i] <= v and i < c_last:
                    i += 1
                k_new = buf.ctop[i]
            else:
                u -= m_col
                if u < m_doc:
                    v = u / (p0L * R)
                    i = 0
                    while buf.pbuf[i] <= v and i < d_last:
                        i += 1
                    k_new = doc.topic[i]
                else:
                    u -= m_doc
                    v = u / (alpha * p0L * R)
                    k_new = tree_sample(buf.tree, P, v, K)
    if record.shape[0] > 0:
        _record_sparse(sp, f, wt, w_kr, total, loc, buf, doc, nnz, alpha, record)
    return k_new, n_c, Found(f.eL, f.eR, f.eLR, eLkr, f.tL, f.tR, f.tLR, f.hL, f.hR, f.hLR)


@njit(cache=True, inline="always")
def _add_LR(sp, f, term_ids, loc, n_types, n_entries):
    """LR with topic kr into the restaurants; returns (its entry, n_types, n_entries)."""
    eLR, tLR = f.eLR, f.tLR
    if eLR >= 0:
        loc.en_count[eLR] += 1
        return eLR, n_types, n_entries
    if tLR < 0:
        type_new(loc.ty_slot, loc.ty_hash, loc.ty_len, loc.ty_pos, loc.ty_head, tLR, f.hLR, sp.nLR,
                 sp.s, n_types)
        tLR = n_types
        n_types += 1
    eLR = entry_add(loc.g_en_slot, loc.en_slot, loc.en_type, loc.en_topic, loc.en_count,
                    loc.en_next, n_entries, loc.ty_head, tLR, sp.kr, 1)
    return eLR, n_types, max(n_entries, eLR + 1)


@njit(cache=True, inline="always")
def _add_L(sp, k_new, f, n_c, term_ids, loc, buf, n_types, n_entries, sparse):
    """L with topic k_new into the restaurants; returns (n_types, n_entries, L's type)."""
    tL = f.tL
    if k_new == sp.k_old:
        loc.en_count[f.eL] += 1
    elif k_new == sp.kr and f.eLkr >= 0:
        loc.en_count[f.eLkr] += 1
    elif sparse and f.tL >= 0:
        # (L, k_new) among L's entries the draw walked, or a new entry linked in after its
        # predecessor
        i = lower_bound(buf.ctop, 0, n_c, k_new)
        if i < n_c and buf.ctop[i] == k_new:
            loc.en_count[buf.cent[i]] += 1
        else:
            entry_insert(loc.en_slot, loc.en_type, loc.en_topic, loc.en_count, loc.en_next,
                         n_entries, loc.ty_head, f.tL, k_new, buf.cent[i - 1] if i > 0 else -1)
            n_entries += 1
    else:
        if tL < 0:
            tL = type_lookup(loc.g_ty_slot, loc.ty_slot, loc.ty_pos, term_ids, f.hL, sp.s, sp.nL)
            type_new(loc.ty_slot, loc.ty_hash, loc.ty_len, loc.ty_pos, loc.ty_head, tL, f.hL,
                     sp.nL, sp.s, n_types)
            tL = n_types
            n_types += 1
        eN = entry_add(loc.g_en_slot, loc.en_slot, loc.en_type, loc.en_topic, loc.en_count,
                       loc.en_next, n_entries, loc.ty_head, tL, k_new, 1)
        n_entries = max(n_entries, eN + 1)
    return n_types, n_entries, tL


@njit(cache=True, inline="always")
def _add_R(sp, f, term_ids, loc, n_types, n_entries):
    """R with topic kr into the restaurants; returns (its entry, n_types, n_entries)."""
    eR, tR = f.eR, f.tR
    if eR >= 0:
        loc.en_count[eR] += 1
        return eR, n_types, n_entries
    # R may be the type just inserted for L
    if tR < 0:
        tR = type_lookup(loc.g_ty_slot, loc.ty_slot, loc.ty_pos, term_ids, f.hR, sp.j + 1, sp.nR)
    if tR < 0:
        type_new(loc.ty_slot, loc.ty_hash, loc.ty_len, loc.ty_pos, loc.ty_head, tR, f.hR, sp.nR,
                 sp.j + 1, n_types)
        tR = n_types
        n_types += 1
    eR = entry_add(loc.g_en_slot, loc.en_slot, loc.en_type, loc.en_topic, loc.en_count,
                   loc.en_next, n_entries, loc.ty_head, tR, sp.kr, 1)
    return eR, n_types, max(n_entries, eR + 1)


@njit(cache=True, inline="always")
def add(sp, k_new, f, n_c, term_ids, b, loc, buf, doc, tally, sparse, alpha0):
    """What was drawn into the counts and b[j]: LR with topic kr (k_new = -1), or L with topic
    k_new and R with kr. Returns (Tally, the entry of the collocation around j + 1 where known,
    else -1, where that collocation starts, and the type of the collocation ending at j, -1 if
    none does)."""
    n_types, n_entries, nnz, N_d = tally.n_types, tally.n_entries, tally.nnz, tally.N_d
    j, kr = sp.j, sp.kr
    P = len(buf.tree) // 2
    if kr >= 0:
        loc.n_k[kr] += 1
        doc.ndk[kr] += 1
        N_d += 1
    tL = -1
    if k_new < 0:
        eC, n_types, n_entries = _add_LR(sp, f, term_ids, loc, n_types, n_entries)
        b[j] = -1
        s = sp.s
    else:
        n_types, n_entries, tL = _add_L(sp, k_new, f, n_c, term_ids, loc, buf, n_types,
                                        n_entries, sparse)
        loc.n_k[k_new] += 1
        nnz = doc_change(doc.ndk, doc.topic, doc.count, 0, nnz, k_new, 1)
        N_d += 1
        if sparse:
            tree_set(buf.tree, P, k_new, 1.0 / (loc.n_k[k_new] + alpha0))
        # R is the collocation around j + 1; after a split, the next one is unchanged
        eC = -1
        if not sp.forced:
            eC, n_types, n_entries = _add_R(sp, f, term_ids, loc, n_types, n_entries)
        b[j] = k_new
        s = j + 1
    if sparse and kr >= 0 and k_new != kr:
        tree_set(buf.tree, P, kr, 1.0 / (loc.n_k[kr] + alpha0))
    return Tally(n_types, n_entries, nnz, N_d), eC, s, tL
