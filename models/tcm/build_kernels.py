"""The Topical Collocation Model's state rebuilt from its boundaries b: the restaurants (between
sweeps, the merge), the documents' topic lists, and the random start (see
:mod:`models.tcm.kernels` for the model, :mod:`models.tcm.restaurants` for the tables).
"""
import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.pages import huge_empty
from ..common.kernels.prefetch import prefetch
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import label_counts
from .restaurants import (Restaurants, entry_rehash, entry_slots, hash_span, home_slot,
                          n_slots_for, type_find, type_new, type_rehash, type_slots, types_resized)

# Collocations between the prefetch of a type slot and its lookup.
PREFETCH_AHEAD = 8


# ---------------------------------------------------------------------------------------------
# Global tables from b


@njit(cache=True, nogil=True)
def _type_arrays(cap):
    """Empty arrays of ``cap`` types: hash, length, first position, head of the entry list."""
    return (np.empty(cap, dtype=np.uint64), np.empty(cap, dtype=np.int32),
            np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int32))


@njit(cache=True, nogil=True)
def build_tables(term_ids, b, n_topics):
    """Restaurants of one chain rebuilt from its boundaries b (document order).

    Returns Restaurants (n_k: int64, n_topics). Types are numbered in order of first
    occurrence; every collocation points to its first occurrence. The entries are numbered type
    by type, each type's in topic order, so that walking a type's list (the collocation bucket)
    reads consecutive memory. col_entry gives the sweep the entry of every collocation it has
    not changed yet without a lookup.
    """
    N = len(b)
    n_col = 0
    for i in range(N):
        if b[i] >= 0:
            n_col += 1
    # grown as types appear: sized to n_col, the slots would spread the probes over mostly
    # empty lines, and the arrays would hold a type per collocation (most repeat a type)
    ty_slot = type_slots(1024)
    ty_hash, ty_len, ty_pos, ty_head = _type_arrays(1024)
    n_k = np.zeros(n_topics, dtype=np.int64)
    # the hash of every collocation first, so that the lookups below can prefetch their slots
    col_hash = huge_empty(n_col, np.uint64)
    c = 0
    s = 0
    for i in range(N):
        if b[i] >= 0:
            col_hash[c] = hash_span(term_ids, s, i - s + 1)
            c += 1
            s = i + 1
    # the type of every collocation, in document order
    col_type = huge_empty(n_col, np.int32)
    n_types = 0
    c = 0
    s = 0
    for i in range(N):
        k = b[i]
        if k < 0:
            continue
        if c + PREFETCH_AHEAD < n_col:
            prefetch(ty_slot, 2 * home_slot(col_hash[c + PREFETCH_AHEAD], len(ty_slot) >> 1))
        n = i - s + 1
        h = col_hash[c]
        t = type_find(ty_slot, ty_pos, term_ids, h, s, n)
        if t < 0:
            if n_types == len(ty_hash):
                ty_hash, ty_len, ty_pos, ty_head = types_resized(ty_hash, ty_len, ty_pos, ty_head,
                                                                 n_types, 2 * n_types)
            type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, t, h, n, s, n_types)
            t = n_types
            n_types += 1
            if 4 * n_types > len(ty_slot):
                ty_slot = type_slots(2 * n_types)
                type_rehash(ty_slot, ty_hash, ty_len, 0, n_types)
        col_type[c] = t
        c += 1
        n_k[k] += 1
        s = i + 1
    # the slot table the sweeps read (and every chain keeps) at load factor 1/3, not the
    # build's 1/6..1/2: less memory than after a doubling, fewer probes than at 1/2
    if 2 * n_slots_for(n_types) != len(ty_slot):
        ty_slot = type_slots(n_types)
        type_rehash(ty_slot, ty_hash, ty_len, 0, n_types)
    return _entries(b, n_topics, n_k, col_type, huge_empty(N, np.int32), ty_slot, ty_hash, ty_len,
                    ty_pos, ty_head, n_types)


@njit(cache=True, nogil=True)
def build_tables_coded(term_ids, b, n_topics, code, old_hash):
    """``build_tables(term_ids, b, n_topics)``, array for array, after a sweep that wrote ``code``
    (see :func:`models.tcm.kernels.sweep`): the type of most collocations is known, as one of
    the types before the sweep (``old_hash``: their hashes), so only those of the types the
    sweep added (numbered from ``len(old_hash)`` up) are hashed and looked up. ``code`` becomes
    the result's ``col_entry``.
    """
    N = len(b)
    n_old = len(old_hash)
    n_col = 0
    n_added = 0
    for i in range(N):
        if b[i] >= 0:
            n_col += 1
            if code[i] >= n_old:
                n_added += 1
    # the types numbered in order of first occurrence, as build_tables numbers them: an old
    # type by its number before the sweep, an added one by a lookup among the added ones
    renumber = np.full(n_old, -1, dtype=np.int32)
    added_slot = type_slots(max(n_added, 1))
    ty_hash, ty_len, ty_pos, ty_head = _type_arrays(1024)
    n_k = np.zeros(n_topics, dtype=np.int64)
    col_type = huge_empty(n_col, np.int32)
    n_types = 0
    c = 0
    s = 0
    for i in range(N):
        k = b[i]
        if k < 0:
            continue
        n = i - s + 1
        old = code[i] if code[i] < n_old else -1
        h = np.uint64(0)
        miss = -1
        if old >= 0:
            t = renumber[old]
            if t < 0:
                h = old_hash[old]
        else:
            h = hash_span(term_ids, s, n)
            t = type_find(added_slot, ty_pos, term_ids, h, s, n)
            miss = t
        if t < 0:
            if n_types == len(ty_hash):
                ty_hash, ty_len, ty_pos, ty_head = types_resized(ty_hash, ty_len, ty_pos, ty_head,
                                                                 n_types, 2 * n_types)
            t = n_types
            n_types += 1
            if old >= 0:
                renumber[old] = t
                ty_hash[t] = h
                ty_len[t] = n
                ty_pos[t] = s
                ty_head[t] = -1
            else:
                type_new(added_slot, ty_hash, ty_len, ty_pos, ty_head, miss, h, n, s, t)
        col_type[c] = t
        c += 1
        n_k[k] += 1
        s = i + 1
    # the slots hold the types in the order of their numbers, as build_tables' do
    ty_slot = type_slots(n_types)
    type_rehash(ty_slot, ty_hash, ty_len, 0, n_types)
    return _entries(b, n_topics, n_k, col_type, code, ty_slot, ty_hash, ty_len, ty_pos, ty_head,
                    n_types)


@njit(cache=True, nogil=True)
def _entries(b, n_topics, n_k, col_type, tok_entry, ty_slot, ty_hash, ty_len, ty_pos, ty_head,
             n_types):
    """The entries of the restaurants from the type (``col_type``) and topic of every
    collocation (document order), and the Restaurants; ``tok_entry`` (n_tokens,) is overwritten
    with the entry of the collocation ending at each boundary, -1 elsewhere."""
    N = len(b)
    n_col = len(col_type)
    # (type, topic) of every collocation in order, by two stable counting sorts (topic, then
    # type): the entries are the runs of that order, in the order of their ids. Linked-list
    # inserts of scattered entries would cost a cache miss per list node instead.
    ptr = np.zeros(max(n_topics, n_types) + 1, dtype=np.int64)
    for k in range(n_topics):
        ptr[k + 1] = ptr[k] + n_k[k]
    by_topic = huge_empty(n_col, np.int32)  # collocations grouped by topic
    c = 0
    for i in range(N):
        k = b[i]
        if k >= 0:
            by_topic[ptr[k]] = c
            ptr[k] += 1
            c += 1
    ptr[:n_types + 1] = 0
    for c in range(n_col):
        ptr[col_type[c] + 1] += 1
    for t in range(n_types):
        ptr[t + 1] += ptr[t]
    order = huge_empty(n_col, np.int32)  # collocations by type, in topic order within a type
    topics = huge_empty(n_col, np.int32)  # and their topics
    c = 0
    for k in range(n_topics):
        for _ in range(n_k[k]):
            if c + 2 * PREFETCH_AHEAD < n_col:  # two stages: the type, then its place
                prefetch(col_type, by_topic[c + 2 * PREFETCH_AHEAD])
            if c + PREFETCH_AHEAD < n_col:
                prefetch(ptr, col_type[by_topic[c + PREFETCH_AHEAD]])
            t = col_type[by_topic[c]]
            order[ptr[t]] = by_topic[c]
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
    en_slot = entry_slots(cap)
    en_type = huge_empty(cap, np.int32)
    en_topic = huge_empty(cap, np.int32)
    en_count = huge_empty(cap, np.int32)
    en_next = huge_empty(cap, np.int32)
    col_entry = by_topic  # reused: the entry of every collocation
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
            col_entry[order[c]] = n_entries - 1
            c += 1
        en_next[n_entries - 1] = -1
    entry_rehash(en_slot, en_type, en_topic, 0, n_entries)
    c = 0
    for i in range(N):
        if b[i] >= 0:
            tok_entry[i] = col_entry[c]
            c += 1
        else:
            tok_entry[i] = -1
    return Restaurants(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type,
                       en_topic, en_count, en_next, n_entries, n_k, tok_entry)


@njit(cache=True, parallel=True)
def build_doc_lists(doc_ptr, b, cap_ptr, dt_topic, dt_count, dt_nnz):
    """Sorted (topic, count) list of every doc's collocations from b. Overwrites dt_* (the
    fields of a DocTopics: parallel kernels take no tuples, see ``tcm.sweep``)."""
    n_docs = len(doc_ptr) - 1
    for d in prange(n_docs):
        dt_nnz[d] = label_counts(np.sort(b[doc_ptr[d]:doc_ptr[d + 1]]), dt_topic, dt_count, cap_ptr[d])


# ---------------------------------------------------------------------------------------------
# Initialisation


@njit(cache=True, parallel=True)
def init_random(shard_doc, doc_ptr, split, b, n_topics, p_stop, max_len, rng):
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
