"""Restaurants of the Topical Collocation Model in flat arrays, and the documents' topic lists
(see :mod:`models.tcm.kernels` for the model and the sampler).

Collocation types: open addressing on a 64-bit hash of the term ids; ``ty_pos[t], ty_len[t]``
point to one occurrence of the type in ``term_ids``, against which candidates are compared, so
lookups are exact (no hash-collision error). Entries (type, topic) -> count: a second hash table;
the entries of a type form a linked list (``ty_head``, ``en_next``) sorted by topic. Entries
whose count drops to 0 during a sweep stay in the list (weight 0). A sweep's shards share the
global slot tables and keep their own only for what they add (see ``type_lookup``).
"""
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from ..common.kernels.pages import huge_empty, huge_full
from ..common.kernels.prefetch import prefetch
from ..common.kernels.sparse import lower_bound

HASH_SEED = np.uint64(0x2545F4914F6CDD1D)
HASH_STEP = np.uint64(0x9E3779B97F4A7C15)


class Restaurants(NamedTuple):
    """The restaurants of one chain (what ``build_tables`` returns and the sweep reads)."""

    ty_slot: np.ndarray  # uint64, open-addressing slots (hash, length and type id): see type_find
    ty_hash: np.ndarray  # uint64
    ty_len: np.ndarray  # int32, collocation length
    ty_pos: np.ndarray  # int64, one occurrence in term_ids
    ty_head: np.ndarray  # int32, first entry of the type's topic-sorted list, or -1
    n_types: int
    en_slot: np.ndarray  # int64, open-addressing slots (key and entry id): see entry_find
    en_type: np.ndarray  # int32
    en_topic: np.ndarray  # int32
    en_count: np.ndarray  # int32, n_kc
    en_next: np.ndarray  # int32, next entry of the same type, or -1
    n_entries: int
    n_k: np.ndarray  # int64 (n_topics,), customers of every restaurant
    col_entry: np.ndarray  # int32 (n_tokens,): at every boundary i, the entry of the collocation ending at i


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


@njit(cache=True, inline="always")
def home_slot(h, n_slots):
    """The first slot probed for hash h in a table of n_slots (< 2^32) slots: the top 32 bits
    of h scaled to n_slots, so that a table need not have a power-of-two size."""
    return np.int64(((h >> np.uint64(32)) * np.uint64(n_slots)) >> np.uint64(32))


@njit(cache=True, inline="always")
def n_slots_for(cap):
    """Slots for up to ``cap`` keys at load factor <= 1/3 (any size: see ``home_slot``)."""
    return max(3 * cap, 8)


# ---------------------------------------------------------------------------------------------
# Type table: slot i is ty_slot[2i] = hash, ty_slot[2i + 1] = (len << 32) | type id, or EMPTY.
# Hash and length sit in the slot, so a probe reads one cache line, not a line of every array.

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True)
def type_find(ty_slot, ty_pos, term_ids, h, a, n):
    """Type id of term_ids[a:a+n] with hash h, or -1 - slot (the free slot where it would go)."""
    n_slots = len(ty_slot) >> 1
    i = home_slot(h, n_slots)
    want = np.uint64(n) << np.uint64(32)
    while True:
        info = ty_slot[2 * i + 1]
        if info == EMPTY:
            return -1 - i
        if ty_slot[2 * i] == h and (info & np.uint64(0xFFFFFFFF00000000)) == want:
            t = np.int64(info & np.uint64(0xFFFFFFFF))
            p = ty_pos[t]
            same = True
            for j in range(n):
                if term_ids[p + j] != term_ids[a + j]:
                    same = False
                    break
            if same:
                return t
        i += 1
        if i == n_slots:
            i = 0


@njit(cache=True, inline="always")
def type_insert(ty_slot, i, h, n, t):
    """Type t (hash h, length n) into the free slot i that ``type_find`` returned as -1 - i."""
    ty_slot[2 * i] = h
    ty_slot[2 * i + 1] = (np.uint64(n) << np.uint64(32)) | np.uint64(t)


@njit(cache=True, inline="always")
def type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, miss, h, n, pos, t):
    """A new type t (hash h, length n, first seen at token ``pos``, no entries yet) in the free
    slot that ``type_find`` returned as ``miss`` = -1 - slot."""
    type_insert(ty_slot, -1 - miss, h, n, t)
    ty_hash[t] = h
    ty_len[t] = n
    ty_pos[t] = pos
    ty_head[t] = -1


@njit(cache=True)
def type_rehash(ty_slot, ty_hash, ty_len, first, n_types):
    """Types first..n_types - 1 into the emptied slot table."""
    ty_slot[:] = EMPTY
    n_slots = len(ty_slot) >> 1
    for t in range(first, n_types):
        i = home_slot(ty_hash[t], n_slots)
        while ty_slot[2 * i + 1] != EMPTY:
            i = i + 1 if i + 1 < n_slots else 0
        type_insert(ty_slot, i, ty_hash[t], ty_len[t], t)


@njit(cache=True)
def type_slots(cap):
    """An empty slot table for up to ``cap`` types (load factor <= 1/3)."""
    return huge_full(2 * n_slots_for(cap), EMPTY, np.uint64)


@njit(cache=True)
def types_resized(ty_hash, ty_len, ty_pos, ty_head, n_types, cap):
    """New type arrays of capacity ``cap`` holding the first n_types types."""
    nh = huge_empty(cap, np.uint64)
    nl = huge_empty(cap, np.int32)
    npos = huge_empty(cap, np.int64)
    nhead = huge_empty(cap, np.int32)
    nh[:n_types] = ty_hash[:n_types]
    nl[:n_types] = ty_len[:n_types]
    npos[:n_types] = ty_pos[:n_types]
    nhead[:n_types] = ty_head[:n_types]
    return nh, nl, npos, nhead


# ---------------------------------------------------------------------------------------------
# Entry table: (type, topic) -> count, with a per-type linked list sorted by topic. Slot i is
# en_slot[2i] = t << 16 | k (topics fit 16 bits), en_slot[2i + 1] = entry id; key -1: empty.


@njit(cache=True)
def entry_find(en_slot, t, k):
    """Entry id of (t, k), or -1 - slot."""
    n_slots = len(en_slot) >> 1
    i = home_slot(_entry_key(t, k), n_slots)
    key = (np.int64(t) << 16) | np.int64(k)
    while True:
        got = en_slot[2 * i]
        if got == key:
            return en_slot[2 * i + 1]
        if got < 0:
            return -1 - i
        i += 1
        if i == n_slots:
            i = 0


@njit(cache=True)
def entry_rehash(en_slot, en_type, en_topic, first, n_entries):
    """Entries first..n_entries - 1 into the emptied slot table."""
    en_slot[:] = -1
    n_slots = len(en_slot) >> 1
    for e in range(first, n_entries):
        i = home_slot(_entry_key(en_type[e], en_topic[e]), n_slots)
        while en_slot[2 * i] >= 0:
            i = i + 1 if i + 1 < n_slots else 0
        en_slot[2 * i] = (np.int64(en_type[e]) << 16) | np.int64(en_topic[e])
        en_slot[2 * i + 1] = e


@njit(cache=True)
def entry_slots(cap):
    """An empty slot table for up to ``cap`` entries (load factor <= 1/3)."""
    return huge_full(2 * n_slots_for(cap), -1, np.int64)


@njit(cache=True)
def entries_resized(en_type, en_topic, en_count, en_next, n_entries, cap):
    """New entry arrays of capacity ``cap`` holding the first n_entries entries."""
    nt = huge_empty(cap, np.int32)
    nk = huge_empty(cap, np.int32)
    nc = huge_empty(cap, np.int32)
    nn = huge_empty(cap, np.int32)
    nt[:n_entries] = en_type[:n_entries]
    nk[:n_entries] = en_topic[:n_entries]
    nc[:n_entries] = en_count[:n_entries]
    nn[:n_entries] = en_next[:n_entries]
    return nt, nk, nc, nn


# ---------------------------------------------------------------------------------------------
# A shard's restaurants. Its arrays are copies of the global ones (counts and lists change), but
# the global slot tables, the largest part, are shared and only read: a shard's own slot tables
# hold just the types and entries it adds (ids from the global numbers on). A key is in exactly
# one of the two, so a lookup tries the global table, then the shard's; the ids, hence the
# draws, do not depend on where a key's slot is.


@njit(cache=True, inline="always")
def type_lookup(g_slot, ty_slot, ty_pos, term_ids, h, a, n):
    """Type id of term_ids[a:a+n] (hash h) in a shard, or -1 - the free slot of the shard's
    own table ty_slot where it would go."""
    t = type_find(g_slot, ty_pos, term_ids, h, a, n)
    if t >= 0:
        return t
    return type_find(ty_slot, ty_pos, term_ids, h, a, n)


@njit(cache=True, inline="always")
def entry_lookup(g_slot, en_slot, t, k):
    """Entry id of (t, k) in a shard, or -1 - the free slot of its own table en_slot."""
    e = entry_find(g_slot, t, k)
    if e >= 0:
        return e
    return entry_find(en_slot, t, k)


@njit(cache=True)
def types_copy(g_hash, g_len, g_pos, g_head, n_types, room, extra):
    """A shard's copy of the arrays of the first n_types types with room for ``room`` more, and
    its own slot table, empty, for ``extra`` types."""
    ty_hash, ty_len, ty_pos, ty_head = types_resized(g_hash, g_len, g_pos, g_head, n_types,
                                                     n_types + room)
    return type_slots(extra), ty_hash, ty_len, ty_pos, ty_head


@njit(cache=True)
def types_reserve(ty_slot, ty_hash, ty_len, first, n_types, extra):
    """A shard's own slot table for its types first..n_types - 1 with room for ``extra`` more
    (load factor <= 1/2): ty_slot itself if they fit, else a table twice as large."""
    if 4 * (n_types - first + extra) <= len(ty_slot):
        return ty_slot
    ty_slot = type_slots(2 * (n_types - first + extra))
    type_rehash(ty_slot, ty_hash, ty_len, first, n_types)
    return ty_slot


@njit(cache=True)
def entries_copy(g_type, g_topic, g_count, g_next, n_entries, room, extra):
    """A shard's copy of the arrays of the first n_entries entries with room for ``room``
    more, and its own slot table, empty, for ``extra`` entries."""
    en_type, en_topic, en_count, en_next = entries_resized(g_type, g_topic, g_count, g_next,
                                                           n_entries, n_entries + room)
    return entry_slots(extra), en_type, en_topic, en_count, en_next


@njit(cache=True)
def entries_reserve(en_slot, en_type, en_topic, first, n_entries, extra):
    """A shard's own slot table for its entries first..n_entries - 1 with room for ``extra``
    more (load factor <= 1/2): en_slot itself if they fit, else a table twice as large."""
    if 4 * (n_entries - first + extra) <= len(en_slot):
        return en_slot
    en_slot = entry_slots(2 * (n_entries - first + extra))
    entry_rehash(en_slot, en_type, en_topic, first, n_entries)
    return en_slot


@njit(cache=True)
def entry_insert(en_slot, en_type, en_topic, en_count, en_next, n_entries, ty_head, t, k, prev):
    """In a shard: the missing entry (t, k) with count 1 as entry n_entries (in the shard's own
    slot table), linked in after entry ``prev`` of t's list (-1: at its head); capacity must
    have been reserved."""
    i = -1 - entry_find(en_slot, t, k)
    e = n_entries
    en_slot[2 * i] = (np.int64(t) << 16) | np.int64(k)
    en_slot[2 * i + 1] = e
    en_type[e] = t
    en_topic[e] = k
    en_count[e] = 1
    if prev < 0:
        en_next[e] = ty_head[t]
        ty_head[t] = e
    else:
        en_next[e] = en_next[prev]
        en_next[prev] = e


@njit(cache=True)
def entry_add(g_slot, en_slot, en_type, en_topic, en_count, en_next, n_entries, ty_head, t, k,
              delta):
    """In a shard: en_count[(t, k)] += delta, inserting the entry (sorted into t's list) if
    missing. Returns the entry's id (n_entries if inserted); capacity must have been reserved."""
    e = entry_lookup(g_slot, en_slot, t, k)
    if e >= 0:
        en_count[e] += delta
        return e
    i = -1 - e
    e = n_entries
    en_slot[2 * i] = (np.int64(t) << 16) | np.int64(k)
    en_slot[2 * i + 1] = e
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
    return e


@njit(cache=True, inline="always")
def prefetch_lr(b, split, term_ids, ty_slot, q, a, z, max_len):
    """For the sweep: prefetch the type slot of LR at token q of the doc a:z, as b stands before
    q is resampled, if q is a boundary (LR = the collocation ending at q and the next one)."""
    if q >= z or split[q] != 0 or b[q] < 0:
        return
    s = q
    while s > a and b[s - 1] < 0:
        s -= 1
    e = q + 1
    while b[e] < 0:
        e += 1
    if e - s + 1 <= max_len:
        h = hash_span(term_ids, s, e - s + 1)
        prefetch(ty_slot, 2 * home_slot(h, len(ty_slot) >> 1))


@njit(cache=True, inline="always")
def prefetch_entries(col_entry, en_type, en_count, en_topic, en_next, ty_head, j, z):
    """For the sweep at token j of a doc ending at z: prefetch, in three stages a token apart,
    what it reads first about the collocations ending at tokens j + 1..j + 3 as the tables were
    built (each stage loads only what the one before brought in): the entry's type and count,
    the type's list head, the list (the collocation bucket walks it)."""
    if j + 3 < z and col_entry[j + 3] >= 0:
        prefetch(en_type, col_entry[j + 3])
        prefetch(en_count, col_entry[j + 3])
    if j + 2 < z and col_entry[j + 2] >= 0:
        prefetch(ty_head, en_type[col_entry[j + 2]])
    if j + 1 < z and col_entry[j + 1] >= 0:
        h = ty_head[en_type[col_entry[j + 1]]]
        prefetch(en_topic, h)
        prefetch(en_count, h)
        prefetch(en_next, h)


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
