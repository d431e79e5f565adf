"""Restaurants of the Topical Collocation Model in flat arrays, and the documents' topic lists
(see :mod:`models._kernels.tcm` for the model and the sampler).

Collocation types: open addressing on a 64-bit hash of the term ids; ``ty_pos[t], ty_len[t]``
point to one occurrence of the type in ``term_ids``, against which candidates are compared, so
lookups are exact (no hash-collision error). Entries (type, topic) -> count: a second hash table;
the entries of a type form a linked list (``ty_head``, ``en_next``) sorted by topic. Entries
whose count drops to 0 during a sweep stay in the list (weight 0).
"""
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .sparse import lower_bound

HASH_SEED = np.uint64(0x2545F4914F6CDD1D)
HASH_STEP = np.uint64(0x9E3779B97F4A7C15)


class Restaurants(NamedTuple):
    """The restaurants of one chain (what ``build_tables`` returns and the sweep reads)."""

    ty_slot: np.ndarray  # int32, open-addressing slots: type id or -1
    ty_hash: np.ndarray  # uint64
    ty_len: np.ndarray  # int32, collocation length
    ty_pos: np.ndarray  # int64, one occurrence in term_ids
    ty_head: np.ndarray  # int32, first entry of the type's topic-sorted list, or -1
    n_types: int
    en_slot: np.ndarray  # int32, open-addressing slots: entry id or -1
    en_type: np.ndarray  # int32
    en_topic: np.ndarray  # int32
    en_count: np.ndarray  # int32, n_kc
    en_next: np.ndarray  # int32, next entry of the same type, or -1
    n_entries: int
    n_k: np.ndarray  # int64 (n_topics,), customers of every restaurant


class DocTopics(NamedTuple):
    """Sorted (topic, count) list of every document's collocations: doc d's list is
    ``topic/count[cap_ptr[d]:cap_ptr[d] + nnz[d]]``."""

    cap_ptr: np.ndarray  # int64 (n_docs + 1,)
    topic: np.ndarray  # int32
    count: np.ndarray  # int32
    nnz: np.ndarray  # int32 (n_docs,)


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
def hash_extend(h, w):
    return _mix(h ^ (np.uint64(w) + HASH_STEP))


@njit(cache=True)
def hash_span(term_ids, a, n):
    """Hash of the collocation term_ids[a:a+n]."""
    h = HASH_SEED
    for i in range(a, a + n):
        h = hash_extend(h, term_ids[i])
    return h


@njit(cache=True, inline="always")
def _entry_key(t, k):
    return _mix((np.uint64(t) << np.uint64(20)) ^ np.uint64(k) ^ HASH_STEP)


@njit(cache=True)
def pow2_at_least(n):
    p = 1
    while p < n:
        p *= 2
    return p


# ---------------------------------------------------------------------------------------------
# Type table


@njit(cache=True)
def type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, h, a, n):
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
def types_reserve(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, extra):
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
    ns = np.empty(pow2_at_least(2 * cap), dtype=np.int32)
    _type_rehash(ns, nh, n_types)
    return ns, nh, nl, npos, nhead


# ---------------------------------------------------------------------------------------------
# Entry table: (type, topic) -> count, with a per-type linked list sorted by topic


@njit(cache=True)
def entry_find(en_slot, en_type, en_topic, t, k):
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
def entries_reserve(en_slot, en_type, en_topic, en_count, en_next, n_entries, extra):
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
    ns = np.empty(pow2_at_least(2 * cap), dtype=np.int32)
    _entry_rehash(ns, nt, nk, n_entries)
    return ns, nt, nk, nc, nn


@njit(cache=True)
def types_copy(g_slot, g_hash, g_len, g_pos, g_head, n_types, extra):
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
        ty_slot = np.empty(pow2_at_least(2 * cap), dtype=np.int32)
        _type_rehash(ty_slot, ty_hash, n_types)
    return ty_slot, ty_hash, ty_len, ty_pos, ty_head


@njit(cache=True)
def entries_copy(g_slot, g_type, g_topic, g_count, g_next, n_entries, extra):
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
        en_slot = np.empty(pow2_at_least(2 * cap), dtype=np.int32)
        _entry_rehash(en_slot, en_type, en_topic, n_entries)
    return en_slot, en_type, en_topic, en_count, en_next


@njit(cache=True)
def entry_add(en_slot, en_type, en_topic, en_count, en_next, n_entries, ty_head, t, k, delta):
    """en_count[(t, k)] += delta, inserting the entry (sorted into t's list) if missing.
    Returns the new number of entries; capacity must have been reserved."""
    e = entry_find(en_slot, en_type, en_topic, t, k)
    if e >= 0:
        en_count[e] += delta
        return n_entries
    e = n_entries
    en_slot[-1 - entry_find(en_slot, en_type, en_topic, t, k)] = e
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
def build_tables(term_ids, b, n_topics):
    """Restaurants of one chain rebuilt from its boundaries b (document order).

    Returns Restaurants (n_k: int64, n_topics). Types are numbered in order of first
    occurrence; every collocation points to its first occurrence. The entries are numbered type
    by type, each type's in topic order, so that walking a type's list (the collocation bucket)
    reads consecutive memory.
    """
    N = len(b)
    n_col = 0
    for i in range(N):
        if b[i] >= 0:
            n_col += 1
    cap = max(n_col, 16)
    ty_slot = np.full(pow2_at_least(2 * cap), -1, dtype=np.int32)
    ty_hash = np.empty(cap, dtype=np.uint64)
    ty_len = np.empty(cap, dtype=np.int32)
    ty_pos = np.empty(cap, dtype=np.int64)
    ty_head = np.empty(cap, dtype=np.int32)
    n_k = np.zeros(n_topics, dtype=np.int64)
    # the type of every collocation, in document order
    col_type = np.empty(n_col, dtype=np.int32)
    n_types = 0
    c = 0
    s = 0
    for i in range(N):
        k = b[i]
        if k < 0:
            continue
        n = i - s + 1
        h = hash_span(term_ids, s, n)
        t = type_find(ty_slot, ty_hash, ty_len, ty_pos, term_ids, h, s, n)
        if t < 0:
            ty_slot[-1 - t] = n_types
            t = n_types
            ty_hash[t] = h
            ty_len[t] = n
            ty_pos[t] = s
            n_types += 1
        col_type[c] = t
        c += 1
        n_k[k] += 1
        s = i + 1
    # slot tables sized to what they hold: the sweep's hash probes miss the cache less
    if len(ty_slot) > pow2_at_least(2 * max(n_types, 16)):
        ty_slot = np.empty(pow2_at_least(2 * max(n_types, 16)), dtype=np.int32)
        _type_rehash(ty_slot, ty_hash, n_types)
    # (type, topic) of every collocation in order, by two stable counting sorts (topic, then
    # type): the entries are the runs of that order, in the order of their ids. Linked-list
    # inserts of scattered entries would cost a cache miss per list node instead.
    ptr = np.zeros(max(n_topics, n_types) + 1, dtype=np.int64)
    for k in range(n_topics):
        ptr[k + 1] = ptr[k] + n_k[k]
    types_by_topic = np.empty(n_col, dtype=np.int32)
    c = 0
    for i in range(N):
        k = b[i]
        if k >= 0:
            types_by_topic[ptr[k]] = col_type[c]
            ptr[k] += 1
            c += 1
    ptr[:n_types + 1] = 0
    for c in range(n_col):
        ptr[col_type[c] + 1] += 1
    for t in range(n_types):
        ptr[t + 1] += ptr[t]
    topics = col_type  # reused: the topics grouped by type, in topic order within a type
    c = 0
    for k in range(n_topics):
        for _ in range(n_k[k]):
            t = types_by_topic[c]
            topics[ptr[t]] = k
            ptr[t] += 1
            c += 1
    # ptr[t] is now where type t's topics end; the entries are their runs
    n_entries = 0
    c = 0
    for t in range(n_types):
        prev = -1
        while c < ptr[t]:
            if topics[c] != prev:
                prev = topics[c]
                n_entries += 1
            c += 1
    cap = max(n_entries, 16)
    en_slot = np.full(pow2_at_least(2 * cap), -1, dtype=np.int32)
    en_type = np.empty(cap, dtype=np.int32)
    en_topic = np.empty(cap, dtype=np.int32)
    en_count = np.empty(cap, dtype=np.int32)
    en_next = np.empty(cap, dtype=np.int32)
    n_entries = 0
    c = 0
    for t in range(n_types):
        ty_head[t] = n_entries
        prev = -1
        while c < ptr[t]:
            k = topics[c]
            if k != prev:
                en_type[n_entries] = t
                en_topic[n_entries] = k
                en_count[n_entries] = 1
                en_next[n_entries] = n_entries + 1
                n_entries += 1
                prev = k
            else:
                en_count[n_entries - 1] += 1
            c += 1
        en_next[n_entries - 1] = -1
    _entry_rehash(en_slot, en_type, en_topic, n_entries)
    return Restaurants(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type,
                       en_topic, en_count, en_next, n_entries, n_k)


@njit(cache=True, parallel=True)
def build_doc_lists(doc_ptr, b, cap_ptr, dt_topic, dt_count, dt_nnz):
    """Sorted (topic, count) list of every doc's collocations from b. Overwrites dt_* (the
    fields of a DocTopics: parallel kernels take no tuples, see ``tcm.sweep``)."""
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
# Doc lists


@njit(cache=True, inline="always")
def doc_change(ndk, dt_topic, dt_count, base, nnz, k, delta):
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
