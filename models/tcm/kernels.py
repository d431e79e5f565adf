"""Numba kernels for the Topical Collocation Model (arrays in, arrays out; no I/O).

Model (Zhao et al. 2015, sec. 3): every topic k is a Dirichlet process DP(alpha0, P0) over
collocations (runs of >= 1 adjacent words),

    P0(c = w_1..w_M) = p# (1 - p#)^(M-1) prod_j 1/V  / Z,   Z = 1 - (1 - p#)^max_len

(the geometric length is truncated at ``max_len``, hence Z); theta_d ~ Dir(alpha); every
collocation of a document draws a topic from theta_d and then the collocation from the topic's
restaurant. theta and the DPs are integrated out, so the predictive probability of collocation c
in restaurant k is the Polya urn ``(n_kc + alpha0 P0(c)) / (n_k + alpha0)``.

State: one boundary variable per token, ``b[i]``: -1 means that token i and token i+1 are in
the same collocation (the paper's b = 0); ``k >= 0`` means that a collocation ends at token i and
has topic k (the paper's b = k + 1). ``split[i] = 1`` forces a boundary after token i (stopword,
punctuation or document end): a collocation never spans a split.

Point-wise Gibbs step at a free position j (eq. 1-6 of the paper). Let L = [s, j] and
R = [j + 1, e] be the collocations on either side of j if it were a boundary (s: one past the
previous boundary, e: the next boundary), LR = [s, e] their concatenation and kr = b[e] the
topic of the collocation that ends at e. With L, R (or LR) removed from all counts, N_d the
number of the document's remaining collocations and a0P0(c) = alpha0 P0(c):

    p(b_j = none) ~ (n_d,kr + alpha) (n_kr,LR + a0P0(LR)) / (n_kr + alpha0) * (N_d + 1 + K alpha)
    p(b_j = k)    ~ (n_dk + alpha) (n_k,L + a0P0(L)) / (n_k + alpha0) * R_k
    R_k = (n_d,kr + [k = kr] + alpha) (n_kr,R + [k = kr][L = R] + a0P0(R)) / (n_kr + [k = kr] + alpha0)

Both are multiplied by (N_d + K alpha)(N_d + 1 + K alpha): a split adds one collocation to the
document, so the Dirichlet-multinomial normalisers do not cancel as they do in LDA. At a forced
boundary only the topic of L is drawn: p(k) ~ (n_dk + alpha)(n_k,L + a0P0(L)) / (n_k + alpha0).

Samplers
--------
"exact": the K + 1 weights above in a dense loop, O(K) per position.
"sparse": the bucket decomposition of eq. 8-12 (SparseLDA-style, Yao et al. 2009). For k != kr,
R_k = R is a constant, and

    (n_dk + alpha)(n_k,L + a0P0(L)) / (n_k + alpha0)
        = alpha a0P0(L) / (n_k + alpha0)          smoothing bucket (F+ tree over 1/(n_k + alpha0))
        + a0P0(L) n_dk / (n_k + alpha0)           document bucket (topics of doc d)
        + (n_dk + alpha) n_k,L / (n_k + alpha0)   collocation bucket (topics of L's restaurant entries)

Topic kr is taken out of the three buckets (its tree leaf is set to 0 while sampling) and gets a
bucket of its own with its exact weight, as does "none". So the sparse sampler draws from exactly
the same conditional as the dense one (no approximation), in O(nnz_d + nnz_L + log K).

Restaurants (hash tables in flat arrays) and the documents' topic lists: see
:mod:`models.tcm.restaurants`, rebuilt from b in :mod:`models.tcm.build_kernels`;
log-likelihood, alpha0 and scoring: :mod:`models.tcm.score_kernels`.

Parallelism (AD-LDA style, Newman et al. 2009; the paper's sec. 4.3): documents are split into
FIXED shards; every shard samples against its own copy of the restaurants and n_k, made from
the global tables at the start of the sweep; after the sweep the global tables are rebuilt from
b (deterministically, in document order). Each (chain, shard) has its own rng stream, so results
never depend on the number of threads.
"""
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..common.kernels.ftree import tree_build, tree_sample, tree_set
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound
from .restaurants import HASH_SEED, doc_change, entries_copy, entries_reserve, entry_add, entry_find, entry_insert, hash_span, pow2_at_least, prefetch_entries, prefetch_lr, type_find, type_new, types_copy, types_reserve


class Text(NamedTuple):
    """The corpus as the sampler reads it."""

    doc_ptr: np.ndarray  # int64 (n_docs + 1,)
    term_ids: np.ndarray  # int32 (n_tokens,)
    split: np.ndarray  # uint8 (n_tokens,): 1 = no collocation continues past this token


class Prior(NamedTuple):
    """Hyperparameters of one chain's sweep."""

    alpha: float
    alpha0: float
    p0_len: np.ndarray  # float64 (max_len + 1,): P0 of a collocation by length
    max_len: int


# ---------------------------------------------------------------------------------------------
# One shard of one sweep


# Tokens between the prefetch of LR's type slot and its lookup.
PREFETCH_AHEAD = 3


@njit(cache=True, inline="always")
def _w_right(ndr, alpha, c_lkr, p0L, n_kr, alpha0, Rp):
    """p(b_j = kr) (module docstring), given n_kr,L = c_lkr."""
    return (ndr + alpha) * (c_lkr + p0L) / (n_kr + alpha0) * Rp


@njit(cache=True)
def _sweep_shard(d0, d1, doc_ptr, term_ids, split, b, cap_ptr, dt_topic, dt_count, dt_nnz,
                 g_ty_slot, g_ty_hash, g_ty_len, g_ty_pos, g_ty_head, g_n_types, g_en_slot,
                 g_en_type, g_en_topic, g_en_count, g_en_next, g_n_entries, g_n_k, col_entry, alpha,
                 alpha0, p0_len, max_len, sparse, rng, record):
    """Resample b at every position of docs d0:d1 once, in document order.

    The fields of ``sweep``'s NamedTuples, flat (see ``sweep``). The global tables (g_*) are only read: the shard works on its own copies, grown on demand.
    ``record``: if it has rows, the normalised conditional (column 0: "none", 1 + k: topic k)
    the sampler drew from at token i is written to ``record[i]``, for tests.

    Changes in place: b[doc_ptr[d0]:doc_ptr[d1]], dt_* of docs d0:d1, rng.
    """
    K = len(g_n_k)
    kalpha = K * alpha
    n_types = g_n_types
    n_entries = g_n_entries
    extra = 64 + (doc_ptr[d1] - doc_ptr[d0]) // 8
    # local copies of the restaurants with some headroom (the reserve calls below grow them)
    ty_slot, ty_hash, ty_len, ty_pos, ty_head = types_copy(
        g_ty_slot, g_ty_hash, g_ty_len, g_ty_pos, g_ty_head, n_types, extra)
    en_slot, en_type, en_topic, en_count, en_next = entries_copy(
        g_en_slot, g_en_type, g_en_topic, g_en_count, g_en_next, n_entries, extra)
    n_k = g_n_k.copy()
    ndk = np.zeros(K, dtype=np.int64)
    crow = np.zeros(K, dtype=np.int64)
    pbuf = np.empty(K)
    cbuf = np.empty(K)
    ctop = np.empty(K, dtype=np.int64)
    cent = np.empty(K, dtype=np.int64)
    P = pow2_at_least(K)
    tree = np.zeros(2 * P)
    if sparse:
        for k in range(K):
            tree[P + k] = 1.0 / (n_k[k] + alpha0)
        tree_build(tree, P)
    do_record = record.shape[0] > 0

    for d in range(d0, d1):
        a = doc_ptr[d]
        z = doc_ptr[d + 1]
        if a == z:
            continue
        base = cap_ptr[d]
        nnz = dt_nnz[d]
        N_d = 0
        for jj in range(nnz):
            ndk[dt_topic[base + jj]] = dt_count[base + jj]
            N_d += dt_count[base + jj]
        s = a
        eC = -1
        # room for up to 2 new types and 2 new entries a token, reserved once for the document:
        # arrays the token loop could rebind cost reference-count calls at every token
        need = 2 * (z - a)
        if n_types + need > len(ty_hash) or 4 * (n_types + need) > len(ty_slot):
            ty_slot, ty_hash, ty_len, ty_pos, ty_head = types_reserve(
                ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, need)
        if n_entries + need > len(en_type) or 4 * (n_entries + need) > len(en_slot):
            en_slot, en_type, en_topic, en_count, en_next = entries_reserve(
                en_slot, en_type, en_topic, en_count, en_next, n_entries, need)
        for j in range(a, z):
            if sparse:
                prefetch_entries(col_entry, en_type, en_count, en_topic, en_next, ty_head, j, z)
            prefetch_lr(b, split, term_ids, ty_slot, j + PREFETCH_AHEAD, a, z, max_len)
            nL = j - s + 1
            forced = split[j] != 0
            k_old = b[j]
            if not forced:
                e = j + 1
                while b[e] < 0:
                    e += 1
                kr = b[e]
                nR = e - j
                nLR = e - s + 1
            else:
                kr = -1
                nR = 0
                nLR = 0
            # The collocation around j (L if j is a boundary, else LR) is known without a lookup:
            # kept from j - 1 (eC), or unchanged since the tables were built (col_entry at its
            # end). So is R when j is a boundary: nothing from j on has been resampled yet.
            if eC < 0:
                eC = col_entry[j if k_old >= 0 else e]
            # the entries (tL, k_old), (tR, kr), (tLR, kr), (tL, kr), each found once: entry ids
            # never move during a sweep; -1: not looked up, or missing
            eL = -1
            eR = -1
            eLR = -1
            eLkr = -1
            hL = HASH_SEED
            hR = HASH_SEED
            hLR = HASH_SEED
            # -- remove the collocation(s) around j
            if k_old >= 0:
                eL = eC
                tL = en_type[eL]
                en_count[eL] -= 1
                n_k[k_old] -= 1
                nnz = doc_change(ndk, dt_topic, dt_count, base, nnz, k_old, -1)
                N_d -= 1
                if sparse and k_old != kr:
                    tree_set(tree, P, k_old, 1.0 / (n_k[k_old] + alpha0))
                tR = -1
                tLR = -1
                if not forced:
                    eR = col_entry[e]
                    tR = en_type[eR]
                    en_count[eR] -= 1
                    if nLR <= max_len:
                        hLR = hash_span(term_ids, s, nLR)
                        tLR = type_find(ty_slot, ty_pos, term_ids, hLR, s, nLR)
            else:
                eLR = eC
                tLR = en_type[eLR]
                en_count[eLR] -= 1
                hL = hash_span(term_ids, s, nL)
                tL = type_find(ty_slot, ty_pos, term_ids, hL, s, nL)
                hR = hash_span(term_ids, j + 1, nR)
                tR = type_find(ty_slot, ty_pos, term_ids, hR, j + 1, nR)
                if tR >= 0:
                    eR = max(entry_find(en_slot, tR, kr), -1)
            if not forced:
                # kr comes back whatever is drawn (with R or with LR), so its entry in the doc
                # list and its tree leaf stay: only the dense counts drop while sampling (the
                # doc bucket skips kr and its leaf is 0 then)
                n_k[kr] -= 1
                ndk[kr] -= 1
                N_d -= 1
            # -- weights (module docstring)
            p0L = alpha0 * p0_len[nL]
            w_none = 0.0
            R = 1.0
            Rp = 0.0
            ndr = 0
            w_kr = 0.0
            walked = False  # the sparse sampler walked L's entries (ctop, cent)
            if not forced:
                p0R = alpha0 * p0_len[nR]
                same = 0
                if nL == nR:
                    same = 1
                    for i in range(nL):
                        if term_ids[s + i] != term_ids[j + 1 + i]:
                            same = 0
                            break
                cR = 0 if eR < 0 else en_count[eR]
                ndr = ndk[kr]
                R = (ndr + alpha) * (cR + p0R) / (n_k[kr] + alpha0)
                Rp = (ndr + 1 + alpha) * (cR + same + p0R) / (n_k[kr] + 1 + alpha0)
                if nLR <= max_len:
                    if eLR < 0 and tLR >= 0:
                        eLR = max(entry_find(en_slot, tLR, kr), -1)
                    cLR = 0 if eLR < 0 else en_count[eLR]
                    p0LR = alpha0 * p0_len[nLR]
                    w_none = (ndr + alpha) * (cLR + p0LR) / (n_k[kr] + alpha0) * (N_d + 1 + kalpha)
                # the sparse sampler meets (tL, kr) among L's entries, so looks it up only here
                if k_old == kr:
                    eLkr = eL
                elif tL >= 0 and not sparse:
                    eLkr = max(entry_find(en_slot, tL, kr), -1)
                if k_old == kr or not sparse:
                    w_kr = _w_right(ndr, alpha, 0 if eLkr < 0 else en_count[eLkr], p0L, n_k[kr],
                                    alpha0, Rp)
            k_new = -1
            if not sparse:
                if tL >= 0:
                    ee = ty_head[tL]
                    while ee >= 0:
                        crow[en_topic[ee]] = en_count[ee]
                        ee = en_next[ee]
                acc = w_none
                for k in range(K):
                    if k == kr:
                        acc += w_kr
                    else:
                        acc += (ndk[k] + alpha) * (crow[k] + p0L) / (n_k[k] + alpha0) * R
                    pbuf[k] = acc
                u = uniform(rng) * acc
                if not u < w_none:
                    k_new = 0
                    while pbuf[k_new] <= u and k_new < K - 1:
                        k_new += 1
                if do_record:
                    record[j, 0] = w_none / acc
                    for k in range(K):
                        if k == kr:
                            record[j, 1 + k] = w_kr / acc
                        else:
                            record[j, 1 + k] = ((ndk[k] + alpha) * (crow[k] + p0L)
                                                / (n_k[k] + alpha0) * R) / acc
                if tL >= 0:
                    ee = ty_head[tL]
                    while ee >= 0:
                        crow[en_topic[ee]] = 0
                        ee = en_next[ee]
            else:
                if kr >= 0:
                    tree_set(tree, P, kr, 0.0)
                # collocation bucket: topics of L's restaurant entries (sorted), kr excluded, and
                # document bucket: topics of doc d (sorted), kr excluded. kr (leaf 0 now) and
                # emptied entries add +0.0, the same bits as skipping them, without a branch;
                # a draw stops at the first prefix above it, never on them (c_last, d_last: the
                # last topic of weight > 0, where round-off at the right edge stops)
                # (ctop, cent: L's entries in topic order, where the new (L, k) is found later)
                n_c = 0
                c_last = 0
                csum = 0.0
                walked = tL >= 0
                if walked:
                    ee = ty_head[tL]
                    while ee >= 0:
                        k = en_topic[ee]
                        cnt = en_count[ee]
                        csum += (ndk[k] + alpha) * cnt * tree[P + k]
                        cbuf[n_c] = csum
                        ctop[n_c] = k
                        cent[n_c] = ee
                        c_last = n_c if cnt > 0 and k != kr else c_last
                        eLkr = ee if k == kr else eLkr
                        n_c += 1
                        ee = en_next[ee]
                if not forced and k_old != kr:
                    w_kr = _w_right(ndr, alpha, 0 if eLkr < 0 else en_count[eLkr], p0L, n_k[kr],
                                    alpha0, Rp)
                dsum = 0.0
                d_last = 0
                for jj in range(nnz):
                    k = dt_topic[base + jj]
                    dsum += dt_count[base + jj] * tree[P + k]
                    pbuf[jj] = dsum
                    d_last = jj if k != kr else d_last
                m_col = csum * R
                m_doc = p0L * dsum * R
                m_smooth = alpha * p0L * tree[1] * R
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
                            while cbuf[i] <= v and i < c_last:
                                i += 1
                            k_new = ctop[i]
                        else:
                            u -= m_col
                            if u < m_doc:
                                v = u / (p0L * R)
                                i = 0
                                while pbuf[i] <= v and i < d_last:
                                    i += 1
                                k_new = dt_topic[base + i]
                            else:
                                u -= m_doc
                                v = u / (alpha * p0L * R)
                                k_new = tree_sample(tree, P, v, K)
                if do_record:
                    for k in range(K):
                        record[j, 1 + k] = alpha * p0L * tree[P + k] * R
                    for jj in range(nnz):
                        k = dt_topic[base + jj]
                        if k != kr:
                            record[j, 1 + k] += p0L * (dt_count[base + jj] * tree[P + k]) * R
                    if tL >= 0:
                        ee = ty_head[tL]
                        while ee >= 0:
                            k = en_topic[ee]
                            if en_count[ee] > 0 and k != kr:
                                record[j, 1 + k] += (ndk[k] + alpha) * en_count[ee] * tree[P + k] * R
                            ee = en_next[ee]
                    if kr >= 0:
                        record[j, 1 + kr] = w_kr
                    record[j, 0] = w_none
                    for k in range(K + 1):
                        record[j, k] /= total
            # -- add the sampled collocation(s)
            if kr >= 0:
                n_k[kr] += 1
                ndk[kr] += 1
                N_d += 1
            if k_new < 0:
                # merge: LR with topic kr
                if eLR >= 0:
                    en_count[eLR] += 1
                else:
                    if tLR < 0:
                        type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, tLR, hLR, nLR, s,
                                 n_types)
                        tLR = n_types
                        n_types += 1
                    eLR = entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries,
                                    ty_head, tLR, kr, 1)
                    n_entries = max(n_entries, eLR + 1)
                eC = eLR
                b[j] = -1
            else:
                if k_new == k_old:
                    en_count[eL] += 1
                elif k_new == kr and eLkr >= 0:
                    en_count[eLkr] += 1
                elif sparse and walked:
                    # (L, k_new) among L's entries, or a new entry linked in after its predecessor
                    i = lower_bound(ctop, 0, n_c, k_new)
                    if i < n_c and ctop[i] == k_new:
                        en_count[cent[i]] += 1
                    else:
                        entry_insert(en_slot, en_type, en_topic, en_count, en_next, n_entries,
                                     ty_head, tL, k_new, cent[i - 1] if i > 0 else -1)
                        n_entries += 1
                else:
                    if tL < 0:
                        tL = type_find(ty_slot, ty_pos, term_ids, hL, s, nL)
                        type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, tL, hL, nL, s,
                                 n_types)
                        tL = n_types
                        n_types += 1
                    eN = entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries,
                                   ty_head, tL, k_new, 1)
                    n_entries = max(n_entries, eN + 1)
                n_k[k_new] += 1
                nnz = doc_change(ndk, dt_topic, dt_count, base, nnz, k_new, 1)
                N_d += 1
                if sparse:
                    tree_set(tree, P, k_new, 1.0 / (n_k[k_new] + alpha0))
                if not forced:
                    if eR >= 0:
                        en_count[eR] += 1
                    else:
                        # R may be the type just inserted for L
                        if tR < 0:
                            tR = type_find(ty_slot, ty_pos, term_ids, hR, j + 1, nR)
                        if tR < 0:
                            type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, tR, hR, nR, j + 1,
                                     n_types)
                            tR = n_types
                            n_types += 1
                        eR = entry_add(en_slot, en_type, en_topic, en_count, en_next,
                                       n_entries, ty_head, tR, kr, 1)
                        n_entries = max(n_entries, eR + 1)
                # R is the collocation around j + 1; after a split, the next one is unchanged
                eC = -1 if forced else eR
                b[j] = k_new
                s = j + 1
            if sparse and kr >= 0 and k_new != kr:
                tree_set(tree, P, kr, 1.0 / (n_k[kr] + alpha0))
        dt_nnz[d] = nnz
        for jj in range(nnz):
            ndk[dt_topic[base + jj]] = 0


def sweep(shard_doc, text, b, docs, tables, prior, sparse, rng, record):
    """One Gibbs sweep of one chain: every shard in parallel against its copy of the restaurants.

    text : Text; docs : DocTopics; tables : Restaurants (read only); prior : Prior.
    rng : ndarray of shape (n_shards, 4), uint64; one stream per shard.
    Changes in place: b, docs, rng, record. The caller rebuilds the tables from b afterwards.

    Plain Python: the NamedTuples are unpacked here because a ``parallel=True`` kernel that
    takes tuples makes numba 0.68 crash or corrupt memory at random while compiling (the prange
    body is a gufunc, whose arguments cannot be tuples: numba issues #2651, #10139).
    """
    _sweep(shard_doc, *text, b, *docs, *tables, *prior, sparse, rng, record)


@njit(cache=True, parallel=True)
def _sweep(shard_doc, doc_ptr, term_ids, split, b, cap_ptr, dt_topic, dt_count, dt_nnz,
           ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type, en_topic,
           en_count, en_next, n_entries, n_k, col_entry, alpha, alpha0, p0_len, max_len, sparse, rng,
           record):
    S = len(shard_doc) - 1
    for sh in prange(S):
        _sweep_shard(shard_doc[sh], shard_doc[sh + 1], doc_ptr, term_ids, split, b, cap_ptr,
                     dt_topic, dt_count, dt_nnz, ty_slot, ty_hash, ty_len, ty_pos, ty_head,
                     n_types, en_slot, en_type, en_topic, en_count, en_next, n_entries, n_k,
                     col_entry, alpha, alpha0, p0_len, max_len, sparse, rng[sh], record)
