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

Restaurants: hash tables in flat arrays
---------------------------------------
Collocation types: open addressing on a 64-bit hash of the term ids; ``ty_pos[t], ty_len[t]``
point to one occurrence of the type in ``term_ids``, against which candidates are compared, so
lookups are exact (no hash-collision error). Entries (type, topic) -> count: a second hash table;
the entries of a type form a linked list (``ty_head``, ``en_next``) sorted by topic. Entries
whose count drops to 0 during a sweep stay in the list (weight 0).

Parallelism (AD-LDA style, Newman et al. 2009; the paper's sec. 4.3): documents are split into
FIXED shards; every shard samples against its own copy of the restaurants and n_k, made from
the global tables at the start of the sweep; after the sweep the global tables are rebuilt from
b (deterministically, in document order). Each (chain, shard) has its own rng stream, so results
never depend on the number of threads.
"""
import math

import numpy as np
from numba import njit, prange

from .ftree import tree_build, tree_sample, tree_set
from .rng import uniform
from .sparse import lower_bound

HASH_SEED = np.uint64(0x2545F4914F6CDD1D)
HASH_STEP = np.uint64(0x9E3779B97F4A7C15)


# ---------------------------------------------------------------------------------------------
# Hashing


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64 finaliser (uint64 -> uint64)."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@njit(cache=True, inline="always")
def _hash_extend(h, w):
    return _mix(h ^ (np.uint64(w) + HASH_STEP))


@njit(cache=True)
def _hash_span(term_ids, a, n):
    """Hash of the collocation term_ids[a:a+n]."""
    h = HASH_SEED
    for i in range(a, a + n):
        h = _hash_extend(h, term_ids[i])
    return h


@njit(cache=True, inline="always")
def _entry_key(t, k):
    return _mix((np.uint64(t) << np.uint64(20)) ^ np.uint64(k) ^ HASH_STEP)


@njit(cache=True)
def _pow2_at_least(n):
    p = 1
    while p < n:
        p *= 2
    return p


# ---------------------------------------------------------------------------------------------
# Type table


@njit(cache=True)
def _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, h, a, n):
    """Type id of term_ids[a:a+n] with hash h, or -1 - slot (the free slot where it would go)."""
    mask = np.uint64(len(ty_slot) - 1)
    i = np.int64(h & mask)
    while True:
        t = ty_slot[i]
        if t < 0:
            return -1 - i
        if ty_hash[t] == h and ty_len[t] == n:
            p = ty_pos[t]
            same = True
            for j in range(n):
                if term_ids[p + j] != term_ids[a + j]:
                    same = False
                    break
            if same:
                return t
        i = (i + 1) & np.int64(mask)


@njit(cache=True)
def _type_rehash(ty_slot, ty_hash, n_types):
    ty_slot[:] = -1
    mask = np.uint64(len(ty_slot) - 1)
    for t in range(n_types):
        i = np.int64(ty_hash[t] & mask)
        while ty_slot[i] >= 0:
            i = (i + 1) & np.int64(mask)
        ty_slot[i] = t


@njit(cache=True)
def _types_reserve(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, extra):
    """Arrays with room for ``extra`` more types (load factor <= 1/2); the same ones if they fit."""
    need = n_types + extra
    if need <= len(ty_hash) and 2 * need <= len(ty_slot):
        return ty_slot, ty_hash, ty_len, ty_pos, ty_head
    cap = max(2 * len(ty_hash), need, 16)
    nh = np.empty(cap, dtype=np.uint64)
    nl = np.empty(cap, dtype=np.int32)
    npos = np.empty(cap, dtype=np.int64)
    nhead = np.empty(cap, dtype=np.int32)
    nh[:n_types] = ty_hash[:n_types]
    nl[:n_types] = ty_len[:n_types]
    npos[:n_types] = ty_pos[:n_types]
    nhead[:n_types] = ty_head[:n_types]
    ns = np.empty(_pow2_at_least(2 * cap), dtype=np.int32)
    _type_rehash(ns, nh, n_types)
    return ns, nh, nl, npos, nhead


# ---------------------------------------------------------------------------------------------
# Entry table: (type, topic) -> count, with a per-type linked list sorted by topic


@njit(cache=True)
def _entry_find(en_slot, en_type, en_topic, t, k):
    """Entry id of (t, k), or -1 - slot."""
    mask = np.uint64(len(en_slot) - 1)
    i = np.int64(_entry_key(t, k) & mask)
    while True:
        e = en_slot[i]
        if e < 0:
            return -1 - i
        if en_type[e] == t and en_topic[e] == k:
            return e
        i = (i + 1) & np.int64(mask)


@njit(cache=True)
def _entry_rehash(en_slot, en_type, en_topic, n_entries):
    en_slot[:] = -1
    mask = np.uint64(len(en_slot) - 1)
    for e in range(n_entries):
        i = np.int64(_entry_key(en_type[e], en_topic[e]) & mask)
        while en_slot[i] >= 0:
            i = (i + 1) & np.int64(mask)
        en_slot[i] = e


@njit(cache=True)
def _entries_reserve(en_slot, en_type, en_topic, en_count, en_next, n_entries, extra):
    need = n_entries + extra
    if need <= len(en_type) and 2 * need <= len(en_slot):
        return en_slot, en_type, en_topic, en_count, en_next
    cap = max(2 * len(en_type), need, 16)
    nt = np.empty(cap, dtype=np.int32)
    nk = np.empty(cap, dtype=np.int32)
    nc = np.empty(cap, dtype=np.int32)
    nn = np.empty(cap, dtype=np.int32)
    nt[:n_entries] = en_type[:n_entries]
    nk[:n_entries] = en_topic[:n_entries]
    nc[:n_entries] = en_count[:n_entries]
    nn[:n_entries] = en_next[:n_entries]
    ns = np.empty(_pow2_at_least(2 * cap), dtype=np.int32)
    _entry_rehash(ns, nt, nk, n_entries)
    return ns, nt, nk, nc, nn


@njit(cache=True)
def _types_copy(g_slot, g_hash, g_len, g_pos, g_head, n_types, extra):
    """A private copy of the first n_types types with room for ``extra`` more."""
    cap = n_types + extra
    ty_hash = np.empty(cap, dtype=np.uint64)
    ty_len = np.empty(cap, dtype=np.int32)
    ty_pos = np.empty(cap, dtype=np.int64)
    ty_head = np.empty(cap, dtype=np.int32)
    ty_hash[:n_types] = g_hash[:n_types]
    ty_len[:n_types] = g_len[:n_types]
    ty_pos[:n_types] = g_pos[:n_types]
    ty_head[:n_types] = g_head[:n_types]
    if 2 * cap <= len(g_slot):
        ty_slot = g_slot.copy()
    else:
        ty_slot = np.empty(_pow2_at_least(2 * cap), dtype=np.int32)
        _type_rehash(ty_slot, ty_hash, n_types)
    return ty_slot, ty_hash, ty_len, ty_pos, ty_head


@njit(cache=True)
def _entries_copy(g_slot, g_type, g_topic, g_count, g_next, n_entries, extra):
    """A private copy of the first n_entries entries with room for ``extra`` more."""
    cap = n_entries + extra
    en_type = np.empty(cap, dtype=np.int32)
    en_topic = np.empty(cap, dtype=np.int32)
    en_count = np.empty(cap, dtype=np.int32)
    en_next = np.empty(cap, dtype=np.int32)
    en_type[:n_entries] = g_type[:n_entries]
    en_topic[:n_entries] = g_topic[:n_entries]
    en_count[:n_entries] = g_count[:n_entries]
    en_next[:n_entries] = g_next[:n_entries]
    if 2 * cap <= len(g_slot):
        en_slot = g_slot.copy()
    else:
        en_slot = np.empty(_pow2_at_least(2 * cap), dtype=np.int32)
        _entry_rehash(en_slot, en_type, en_topic, n_entries)
    return en_slot, en_type, en_topic, en_count, en_next


@njit(cache=True)
def _entry_count(en_slot, en_type, en_topic, en_count, t, k):
    """n_{k,t} (0 for an unknown type t < 0 or a missing entry)."""
    if t < 0:
        return 0
    e = _entry_find(en_slot, en_type, en_topic, t, k)
    if e < 0:
        return 0
    return en_count[e]


@njit(cache=True)
def _entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries, ty_head, t, k, delta):
    """en_count[(t, k)] += delta, inserting the entry (sorted into t's list) if missing.
    Returns the new number of entries; capacity must have been reserved."""
    e = _entry_find(en_slot, en_type, en_topic, t, k)
    if e >= 0:
        en_count[e] += delta
        return n_entries
    e = n_entries
    en_slot[-1 - _entry_find(en_slot, en_type, en_topic, t, k)] = e
    en_type[e] = t
    en_topic[e] = k
    en_count[e] = delta
    head = ty_head[t]
    if head < 0 or en_topic[head] > k:
        en_next[e] = head
        ty_head[t] = e
    else:
        p = head
        while en_next[p] >= 0 and en_topic[en_next[p]] < k:
            p = en_next[p]
        en_next[e] = en_next[p]
        en_next[p] = e
    return n_entries + 1


# ---------------------------------------------------------------------------------------------
# Global tables from b


@njit(cache=True)
def _build_tables(term_ids, b, n_topics):
    """Restaurants of one chain rebuilt from its boundaries b (document order).

    Returns ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type, en_topic,
    en_count, en_next, n_entries, n_k (int64, n_topics). Types are numbered in order of first
    occurrence; every collocation points to its first occurrence.
    """
    N = len(b)
    n_col = 0
    for i in range(N):
        if b[i] >= 0:
            n_col += 1
    cap = max(n_col, 16)
    ty_slot = np.full(_pow2_at_least(2 * cap), -1, dtype=np.int32)
    ty_hash = np.empty(cap, dtype=np.uint64)
    ty_len = np.empty(cap, dtype=np.int32)
    ty_pos = np.empty(cap, dtype=np.int64)
    ty_head = np.empty(cap, dtype=np.int32)
    en_slot = np.full(_pow2_at_least(2 * cap), -1, dtype=np.int32)
    en_type = np.empty(cap, dtype=np.int32)
    en_topic = np.empty(cap, dtype=np.int32)
    en_count = np.empty(cap, dtype=np.int32)
    en_next = np.empty(cap, dtype=np.int32)
    n_k = np.zeros(n_topics, dtype=np.int64)
    n_types = 0
    n_entries = 0
    s = 0
    for i in range(N):
        k = b[i]
        if k < 0:
            continue
        n = i - s + 1
        h = _hash_span(term_ids, s, n)
        t = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, h, s, n)
        if t < 0:
            ty_slot[-1 - t] = n_types
            t = n_types
            ty_hash[t] = h
            ty_len[t] = n
            ty_pos[t] = s
            ty_head[t] = -1
            n_types += 1
        n_entries = _entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries, ty_head,
                               t, k, 1)
        n_k[k] += 1
        s = i + 1
    _group_entries(ty_head, n_types, en_slot, en_type, en_topic, en_count, en_next, n_entries)
    return (ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type, en_topic,
            en_count, en_next, n_entries, n_k)


@njit(cache=True)
def _group_entries(ty_head, n_types, en_slot, en_type, en_topic, en_count, en_next, n_entries):
    """Renumber the entries type by type, in list order, so that walking a type's list (the
    collocation bucket) reads consecutive memory instead of chasing entries scattered in order
    of creation. Lists, counts and lookups are unchanged; only entry ids move."""
    new_id = np.empty(n_entries, dtype=np.int32)
    old_of = np.empty(n_entries, dtype=np.int32)
    e_new = 0
    for t in range(n_types):
        e = ty_head[t]
        while e >= 0:
            new_id[e] = e_new
            old_of[e_new] = e
            e_new += 1
            e = en_next[e]
    typ = en_type[:n_entries].copy()
    top = en_topic[:n_entries].copy()
    cnt = en_count[:n_entries].copy()
    nxt = en_next[:n_entries].copy()
    for j in range(n_entries):
        e = old_of[j]
        en_type[j] = typ[e]
        en_topic[j] = top[e]
        en_count[j] = cnt[e]
        en_next[j] = new_id[nxt[e]] if nxt[e] >= 0 else -1
    for t in range(n_types):
        if ty_head[t] >= 0:
            ty_head[t] = new_id[ty_head[t]]
    _entry_rehash(en_slot, en_type, en_topic, n_entries)


@njit(cache=True, parallel=True)
def _build_doc_lists(doc_ptr, b, cap_ptr, dt_topic, dt_count, dt_nnz):
    """Sorted (topic, count) list of every doc's collocations from b. Overwrites dt_*."""
    n_docs = len(doc_ptr) - 1
    for d in prange(n_docs):
        a = doc_ptr[d]
        z = b[a:doc_ptr[d + 1]]
        zs = np.sort(z[z >= 0])
        base = cap_ptr[d]
        nnz = 0
        prev = -1
        for t in zs:
            if t == prev:
                dt_count[base + nnz - 1] += 1
            else:
                dt_topic[base + nnz] = t
                dt_count[base + nnz] = 1
                nnz += 1
                prev = t
        dt_nnz[d] = nnz


# ---------------------------------------------------------------------------------------------
# Doc lists and the F+ tree


@njit(cache=True, inline="always")
def _doc_change(ndk, dt_topic, dt_count, base, nnz, k, delta):
    """n_dk += delta (delta = +1 or -1) in the dense row and the sorted list; returns new nnz."""
    old = ndk[k]
    ndk[k] = old + delta
    lo = lower_bound(dt_topic, base, base + nnz, k) - base
    if delta > 0:
        if old == 0:
            for jj in range(nnz, lo, -1):
                dt_topic[base + jj] = dt_topic[base + jj - 1]
                dt_count[base + jj] = dt_count[base + jj - 1]
            dt_topic[base + lo] = k
            dt_count[base + lo] = 1
            return nnz + 1
        dt_count[base + lo] += 1
        return nnz
    if old == 1:
        for jj in range(lo, nnz - 1):
            dt_topic[base + jj] = dt_topic[base + jj + 1]
            dt_count[base + jj] = dt_count[base + jj + 1]
        return nnz - 1
    dt_count[base + lo] -= 1
    return nnz


# ---------------------------------------------------------------------------------------------
# One shard of one sweep


@njit(cache=True)
def _sweep_shard(d0, d1, doc_ptr, term_ids, split, b, cap_ptr, dt_topic, dt_count, dt_nnz,
                 g_ty_slot, g_ty_hash, g_ty_len, g_ty_pos, g_ty_head, g_n_types, g_en_slot,
                 g_en_type, g_en_topic, g_en_count, g_en_next, g_n_entries, g_n_k, alpha, alpha0,
                 p0_len, max_len, sparse, rng, record):
    """Resample b at every position of docs d0:d1 once, in document order.

    The global tables (g_*) are only read: the shard works on its own copies, grown on demand.
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
    ty_slot, ty_hash, ty_len, ty_pos, ty_head = _types_copy(
        g_ty_slot, g_ty_hash, g_ty_len, g_ty_pos, g_ty_head, n_types, extra)
    en_slot, en_type, en_topic, en_count, en_next = _entries_copy(
        g_en_slot, g_en_type, g_en_topic, g_en_count, g_en_next, n_entries, extra)
    n_k = g_n_k.copy()
    ndk = np.zeros(K, dtype=np.int64)
    crow = np.zeros(K, dtype=np.int64)
    pbuf = np.empty(K)
    cbuf = np.empty(K)
    ctop = np.empty(K, dtype=np.int64)
    dtop = np.empty(K, dtype=np.int64)
    P = _pow2_at_least(K)
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
        for j in range(a, z):
            # room for up to 2 new types and 2 new entries at this position (checked inline: the
            # calls return tuples of arrays, whose reference counting costs in this loop)
            if n_types + 2 > len(ty_hash) or 2 * (n_types + 2) > len(ty_slot):
                ty_slot, ty_hash, ty_len, ty_pos, ty_head = _types_reserve(
                    ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, 2)
            if n_entries + 2 > len(en_type) or 2 * (n_entries + 2) > len(en_slot):
                en_slot, en_type, en_topic, en_count, en_next = _entries_reserve(
                    en_slot, en_type, en_topic, en_count, en_next, n_entries, 2)
            nL = j - s + 1
            hL = _hash_span(term_ids, s, nL)
            tL = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, hL, s, nL)
            forced = split[j] != 0
            # -- remove the collocation(s) around j
            if forced:
                kr = -1
                k_old = b[j]
                en_count[_entry_find(en_slot, en_type, en_topic, tL, k_old)] -= 1
                n_k[k_old] -= 1
                nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, k_old, -1)
                N_d -= 1
                if sparse:
                    tree_set(tree, P, k_old, 1.0 / (n_k[k_old] + alpha0))
                nR = 0
                nLR = 0
                tR = -1
                tLR = -1
                hR = HASH_SEED
                hLR = HASH_SEED
            else:
                e = j + 1
                while b[e] < 0:
                    e += 1
                kr = b[e]
                nR = e - j
                nLR = e - s + 1
                hR = _hash_span(term_ids, j + 1, nR)
                hLR = hL
                for i in range(j + 1, e + 1):
                    hLR = _hash_extend(hLR, term_ids[i])
                tR = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, hR, j + 1, nR)
                tLR = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, hLR, s, nLR)
                if b[j] >= 0:
                    k_old = b[j]
                    en_count[_entry_find(en_slot, en_type, en_topic, tL, k_old)] -= 1
                    en_count[_entry_find(en_slot, en_type, en_topic, tR, kr)] -= 1
                    n_k[k_old] -= 1
                    n_k[kr] -= 1
                    nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, k_old, -1)
                    nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, kr, -1)
                    N_d -= 2
                    if sparse:
                        tree_set(tree, P, k_old, 1.0 / (n_k[k_old] + alpha0))
                        tree_set(tree, P, kr, 1.0 / (n_k[kr] + alpha0))
                else:
                    en_count[_entry_find(en_slot, en_type, en_topic, tLR, kr)] -= 1
                    n_k[kr] -= 1
                    nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, kr, -1)
                    N_d -= 1
                    if sparse:
                        tree_set(tree, P, kr, 1.0 / (n_k[kr] + alpha0))
            # -- weights (module docstring)
            p0L = alpha0 * p0_len[nL]
            w_none = 0.0
            R = 1.0
            w_kr = 0.0
            if not forced:
                p0R = alpha0 * p0_len[nR]
                same = 0
                if nL == nR and hL == hR:
                    same = 1
                    for i in range(nL):
                        if term_ids[s + i] != term_ids[j + 1 + i]:
                            same = 0
                            break
                cR = _entry_count(en_slot, en_type, en_topic, en_count, tR, kr)
                ndr = ndk[kr]
                R = (ndr + alpha) * (cR + p0R) / (n_k[kr] + alpha0)
                Rp = (ndr + 1 + alpha) * (cR + same + p0R) / (n_k[kr] + 1 + alpha0)
                if nLR <= max_len:
                    cLR = _entry_count(en_slot, en_type, en_topic, en_count, tLR, kr)
                    p0LR = alpha0 * p0_len[nLR]
                    w_none = (ndr + alpha) * (cLR + p0LR) / (n_k[kr] + alpha0) * (N_d + 1 + kalpha)
                cLkr = _entry_count(en_slot, en_type, en_topic, en_count, tL, kr)
                w_kr = (ndr + alpha) * (cLkr + p0L) / (n_k[kr] + alpha0) * Rp
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
                leaf_kr = 0.0
                if kr >= 0:
                    leaf_kr = tree[P + kr]
                    tree_set(tree, P, kr, 0.0)
                # collocation bucket: topics of L's restaurant entries (sorted), kr excluded
                n_c = 0
                csum = 0.0
                if tL >= 0:
                    ee = ty_head[tL]
                    while ee >= 0:
                        k = en_topic[ee]
                        cnt = en_count[ee]
                        if cnt > 0 and k != kr:
                            csum += (ndk[k] + alpha) * cnt * tree[P + k]
                            cbuf[n_c] = csum
                            ctop[n_c] = k
                            n_c += 1
                        ee = en_next[ee]
                # document bucket: topics of doc d (sorted), kr excluded
                dsum = 0.0
                n_dd = 0
                for jj in range(nnz):
                    k = dt_topic[base + jj]
                    if k == kr:
                        continue
                    dsum += dt_count[base + jj] * tree[P + k]
                    pbuf[n_dd] = dsum
                    dtop[n_dd] = k
                    n_dd += 1
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
                            while cbuf[i] <= v and i < n_c - 1:
                                i += 1
                            k_new = ctop[i]
                        else:
                            u -= m_col
                            if u < m_doc:
                                v = u / (p0L * R)
                                i = 0
                                while pbuf[i] <= v and i < n_dd - 1:
                                    i += 1
                                k_new = dtop[i]
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
                if kr >= 0:
                    tree_set(tree, P, kr, leaf_kr)
            # -- add the sampled collocation(s)
            if k_new < 0:
                # merge: LR with topic kr
                if tLR < 0:
                    ty_slot[-1 - tLR] = n_types
                    tLR = n_types
                    ty_hash[tLR] = hLR
                    ty_len[tLR] = nLR
                    ty_pos[tLR] = s
                    ty_head[tLR] = -1
                    n_types += 1
                n_entries = _entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries,
                                       ty_head, tLR, kr, 1)
                n_k[kr] += 1
                nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, kr, 1)
                N_d += 1
                if sparse:
                    tree_set(tree, P, kr, 1.0 / (n_k[kr] + alpha0))
                b[j] = -1
            else:
                if tL < 0:
                    tL = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, hL, s, nL)
                    ty_slot[-1 - tL] = n_types
                    tL = n_types
                    ty_hash[tL] = hL
                    ty_len[tL] = nL
                    ty_pos[tL] = s
                    ty_head[tL] = -1
                    n_types += 1
                n_entries = _entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries,
                                       ty_head, tL, k_new, 1)
                n_k[k_new] += 1
                nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, k_new, 1)
                N_d += 1
                if sparse:
                    tree_set(tree, P, k_new, 1.0 / (n_k[k_new] + alpha0))
                if not forced:
                    # R may be the type just inserted for L
                    tR = _type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, hR, j + 1, nR)
                    if tR < 0:
                        ty_slot[-1 - tR] = n_types
                        tR = n_types
                        ty_hash[tR] = hR
                        ty_len[tR] = nR
                        ty_pos[tR] = j + 1
                        ty_head[tR] = -1
                        n_types += 1
                    n_entries = _entry_add(en_slot, en_type, en_topic, en_count, en_next,
                                           n_entries, ty_head, tR, kr, 1)
                    n_k[kr] += 1
                    nnz = _doc_change(ndk, dt_topic, dt_count, base, nnz, kr, 1)
                    N_d += 1
                    if sparse:
                        tree_set(tree, P, kr, 1.0 / (n_k[kr] + alpha0))
                b[j] = k_new
                s = j + 1
        dt_nnz[d] = nnz
        for jj in range(nnz):
            ndk[dt_topic[base + jj]] = 0


@njit(cache=True, parallel=True)
def _sweep(shard_doc, doc_ptr, term_ids, split, b, cap_ptr, dt_topic, dt_count, dt_nnz,
           ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type, en_topic,
           en_count, en_next, n_entries, n_k, alpha, alpha0, p0_len, max_len, sparse, rng, record):
    """One Gibbs sweep of one chain: every shard in parallel against its copy of the restaurants.

    rng : ndarray of shape (n_shards, 4), uint64; one stream per shard.
    Changes in place: b, dt_*, rng, record. The caller rebuilds the tables from b afterwards.
    """
    S = len(shard_doc) - 1
    for sh in prange(S):
        _sweep_shard(shard_doc[sh], shard_doc[sh + 1], doc_ptr, term_ids, split, b, cap_ptr,
                     dt_topic, dt_count, dt_nnz, ty_slot, ty_hash, ty_len, ty_pos, ty_head,
                     n_types, en_slot, en_type, en_topic, en_count, en_next, n_entries, n_k,
                     alpha, alpha0, p0_len, max_len, sparse, rng[sh], record)


# ---------------------------------------------------------------------------------------------
# Initialisation


@njit(cache=True, parallel=True)
def _init_random(shard_doc, doc_ptr, split, b, n_topics, p_stop, max_len, rng):
    """Boundaries drawn as P0 draws lengths: after every token a collocation ends with
    probability p_stop (always at a split or at max_len); every collocation gets a uniform
    topic. p_stop = 1 puts every token in its own collocation. rng: one stream per shard."""
    S = len(shard_doc) - 1
    for sh in prange(S):
        run = 0
        for i in range(doc_ptr[shard_doc[sh]], doc_ptr[shard_doc[sh + 1]]):
            run += 1
            if split[i] != 0 or run >= max_len or uniform(rng[sh]) < p_stop:
                k = np.int64(uniform(rng[sh]) * n_topics)
                if k >= n_topics:
                    k = n_topics - 1
                b[i] = k
                run = 0
            else:
                b[i] = -1


# ---------------------------------------------------------------------------------------------
# Log-likelihood and alpha0


@njit(cache=True)
def _entry_hist(ty_len, ty_head, en_count, en_next, n_types, max_len):
    """Histogram of the restaurants' entries by (collocation length, count): three arrays
    (length, count, multiplicity) over the non-empty cells, for alpha0's likelihood."""
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
def _log_lik_restaurants(h_len, h_n, h_mult, n_k, p0_len, alpha0):
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


@njit(cache=True, parallel=True)
def _log_lik_docs(cap_ptr, dt_topic, dt_count, dt_nnz, alpha, n_topics):
    """log p(topics of the collocations) = sum_d [lgamma(K a) - lgamma(N_d + K a)
    + sum_k (lgamma(n_dk + a) - lgamma(a))]."""
    n_docs = len(dt_nnz)
    A = n_topics * alpha
    lgA = math.lgamma(A)
    lga = math.lgamma(alpha)
    part = np.zeros(n_docs)
    for d in prange(n_docs):
        base = cap_ptr[d]
        n_d = 0
        acc = 0.0
        for j in range(dt_nnz[d]):
            v = dt_count[base + j]
            n_d += v
            acc += math.lgamma(v + alpha) - lga
        if n_d > 0:
            part[d] = acc + lgA - math.lgamma(n_d + A)
    total = 0.0
    for d in range(n_docs):
        total += part[d]
    return total


@njit(cache=True)
def _alpha0_log_post(x, h_len, h_n, h_mult, n_k, p0_len, prior_rate):
    """log posterior of x = log(alpha0) under an Exponential(prior_rate) prior on alpha0
    (the + x is the Jacobian)."""
    a0 = math.exp(x)
    return _log_lik_restaurants(h_len, h_n, h_mult, n_k, p0_len, a0) - prior_rate * a0 + x


@njit(cache=True)
def _resample_alpha0(alpha0, h_len, h_n, h_mult, n_k, p0_len, prior_rate, n_steps, rng):
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
def _compact_tables(ty_head, en_topic, en_count, en_next, n_types, out_ptr, out_topic, out_count):
    """Non-zero entries of every type, sorted by topic, as CSR (out_ptr of length n_types + 1
    must be allocated; returns the number of entries written)."""
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
def _compact_doc_lists(cap_ptr, dt_topic, dt_count, dt_nnz, out_ptr, out_topic, out_count):
    n_docs = len(dt_nnz)
    for d in prange(n_docs):
        a = cap_ptr[d]
        o = out_ptr[d]
        for j in range(dt_nnz[d]):
            out_topic[o + j] = dt_topic[a + j]
            out_count[o + j] = dt_count[a + j]


# ---------------------------------------------------------------------------------------------
# Document model P_TCM(c | d) for retrieval


@njit(cache=True, parallel=True)
def _score_p_c_d(dk_ptr, dk_topic, dk_count, alpha, phi, apart, out):
    """out[d, s] = mean over samples cs of (sum_k (n_dk + alpha) phi[cs, k, s]) / (N_d + K alpha),
    N_d = number of collocations of doc d in sample cs.

    dk_ptr : (n_cs, n_docs + 1) int64 offsets into the flat dk_topic/dk_count.
    phi : (n_cs, K, n_colloc) with phi[cs, k, s] = P(c_s | k); apart[cs, s] = alpha sum_k phi.
    """
    n_cs, K, T = phi.shape
    n_docs = out.shape[0]
    inv = 1.0 / n_cs
    kalpha = K * alpha
    for d in prange(n_docs):
        acc = np.zeros(T)
        s = np.empty(T)
        for cs in range(n_cs):
            for t in range(T):
                s[t] = apart[cs, t]
            n_d = 0
            for j in range(dk_ptr[cs, d], dk_ptr[cs, d + 1]):
                k = dk_topic[j]
                v = dk_count[j]
                n_d += v
                for t in range(T):
                    s[t] += v * phi[cs, k, t]
            den = 1.0 / (n_d + kalpha)
            for t in range(T):
                acc[t] += s[t] * den
        for t in range(T):
            out[d, t] = acc[t] * inv


@njit(cache=True)
def _phi_table(ct_ptr, ct_type, ct_topic, ct_count, n_k, alpha0, p0, types, alpha, phi, apart):
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
def _score_p_c_d_per_sample(dk_ptr, dk_topic, dk_count, alpha, phi, apart, out):
    """out[cs, d, s] = (sum_k (n_dk + alpha) phi[cs, k, s]) / (N_d + K alpha) for every sample."""
    n_cs, K, T = phi.shape
    n_docs = out.shape[1]
    kalpha = K * alpha
    for d in prange(n_docs):
        for cs in range(n_cs):
            for t in range(T):
                out[cs, d, t] = apart[cs, t]
            n_d = 0
            for j in range(dk_ptr[cs, d], dk_ptr[cs, d + 1]):
                k = dk_topic[j]
                v = dk_count[j]
                n_d += v
                for t in range(T):
                    out[cs, d, t] += v * phi[cs, k, t]
            den = 1.0 / (n_d + kalpha)
            for t in range(T):
                out[cs, d, t] *= den
