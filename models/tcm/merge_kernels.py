"""TCM's restaurants cut along document ranges and put back together: what the Ray workers that
own a chain's shards exchange (:mod:`models.tcm.ray_shards`) in place of tables that point into
the whole corpus.

A :class:`Compact` restaurant lists its collocation types in order of first occurrence, each
with its terms, its first token position and its entries sorted by topic (counts > 0). A worker
compacts the tables it builds from its own boundaries; the merge of the workers' compacts, in
document order, holds the types, entries and totals that ``build_tables`` builds from the whole
chain (same order, same counts); a worker's sweep reads its part of them as Restaurants again
(:func:`tables_from`). The sampler's draws read the counts of the types it looks up and walks a
type's entries in topic order, so they do not depend on how the types and entries are numbered
or which other types a table holds: every span of a worker's documents is in its part.
"""
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from ..common.kernels.pages import huge_empty, huge_full
from .restaurants import (Restaurants, entry_find, entry_rehash, entry_slots, hash_span, type_find,
                          type_new, type_rehash, type_slots)
from .score_kernels import compact_tables


class Compact(NamedTuple):
    """One chain's restaurants (or a document range's) without a pointer into the corpus."""

    text_ptr: np.ndarray  # int64 (n_types + 1,): type t is text[text_ptr[t]:text_ptr[t + 1]]
    text: np.ndarray  # int32, the types' terms
    pos: np.ndarray  # int64 (n_types,): the token where the type first occurs
    en_ptr: np.ndarray  # int64 (n_types + 1,): type t's entries en_ptr[t]:en_ptr[t + 1]
    en_topic: np.ndarray  # int32, in topic order within a type
    en_count: np.ndarray  # int32, > 0
    n_k: np.ndarray  # int64 (n_topics,)


def compact(tables, term_ids, offset):
    """The Restaurants ``tables`` built over ``term_ids`` (tokens ``offset`` on of the corpus)."""
    n = int(tables.n_types)
    ln = tables.ty_len[:n].astype(np.int64)
    text_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(ln, out=text_ptr[1:])
    starts = np.repeat(tables.ty_pos[:n] - text_ptr[:-1], ln)
    text = np.asarray(term_ids)[starts + np.arange(text_ptr[-1])].astype(np.int32)
    en_ptr = np.empty(n + 1, np.int64)
    en_topic = np.empty(int(tables.n_entries), np.int32)
    en_count = np.empty(int(tables.n_entries), np.int32)
    m = compact_tables(tables, en_ptr, en_topic, en_count)
    return Compact(text_ptr, text, tables.ty_pos[:n] + offset, en_ptr, en_topic[:m].copy(),
                   en_count[:m].copy(), tables.n_k.copy())


def merge(parts):
    """The document ranges' compacts ``parts`` (in document order) as one: a type first seen in
    an earlier part comes first, its entries are the sums over the parts, n_k the sum."""
    lens = [np.diff(p.text_ptr) for p in parts]
    text_ptr = np.zeros(sum(len(x) for x in lens) + 1, np.int64)
    np.cumsum(np.concatenate(lens), out=text_ptr[1:])
    text = np.concatenate([p.text for p in parts])
    en_len = np.concatenate([np.diff(p.en_ptr) for p in parts])
    en_ptr = np.zeros(len(en_len) + 1, np.int64)
    np.cumsum(en_len, out=en_ptr[1:])
    K = len(parts[0].n_k)
    first, of = _merge_types(text_ptr, text)
    m_ptr, m_topic, m_count = _merge_entries(of, len(first), en_ptr, np.concatenate([p.en_topic for p in parts]),
                                             np.concatenate([p.en_count for p in parts]), K)
    ln = text_ptr[first + 1] - text_ptr[first]
    out_ptr = np.zeros(len(first) + 1, np.int64)
    np.cumsum(ln, out=out_ptr[1:])
    starts = np.repeat(text_ptr[first] - out_ptr[:-1], ln)
    return Compact(out_ptr, text[starts + np.arange(out_ptr[-1])], np.concatenate([p.pos for p in parts])[first],
                   m_ptr, m_topic, m_count, np.sum([p.n_k for p in parts], axis=0).astype(np.int64))


def part_of(whole, keep):
    """The types ``keep`` (bool by type, or type ids in order) of the compact ``whole``, with
    every n_k."""
    t = np.flatnonzero(keep) if keep.dtype == bool else keep
    ln, en = np.diff(whole.text_ptr)[t], np.diff(whole.en_ptr)[t]
    text_ptr, en_ptr = np.zeros(len(t) + 1, np.int64), np.zeros(len(t) + 1, np.int64)
    np.cumsum(ln, out=text_ptr[1:])
    np.cumsum(en, out=en_ptr[1:])
    text = whole.text[np.repeat(whole.text_ptr[t] - text_ptr[:-1], ln) + np.arange(text_ptr[-1])]
    at = np.repeat(whole.en_ptr[t] - en_ptr[:-1], en) + np.arange(en_ptr[-1])
    return Compact(text_ptr, text, whole.pos[t], en_ptr, whole.en_topic[at], whole.en_count[at], whole.n_k)


def concat(parts):
    """Compacts of distinct types (the owners' parts of a worker's sweep) as one."""
    text_ptr = np.zeros(sum(len(p.pos) for p in parts) + 1, np.int64)
    np.cumsum(np.concatenate([np.diff(p.text_ptr) for p in parts]), out=text_ptr[1:])
    en_ptr = np.zeros(len(text_ptr), np.int64)
    np.cumsum(np.concatenate([np.diff(p.en_ptr) for p in parts]), out=en_ptr[1:])
    return Compact(text_ptr, np.concatenate([p.text for p in parts]), np.concatenate([p.pos for p in parts]),
                   en_ptr, np.concatenate([p.en_topic for p in parts]), np.concatenate([p.en_count for p in parts]),
                   parts[0].n_k)


# Routing: the types are owned by hash partition of their route key (a one-term type's term, a
# longer one's first two terms), and a worker is sent the types whose route key occurs in its
# documents: every span it can look up starts with such a key.

def route_keys(term_ids, split, n_terms):
    """The distinct route keys of a range of the corpus: its terms, and its pairs of adjacent
    terms that a collocation may join (no split between them)."""
    t = np.asarray(term_ids, np.int64)
    joined = np.flatnonzero(np.asarray(split[:-1]) == 0)
    return np.unique(np.concatenate([t, n_terms + t[joined] * n_terms + t[joined + 1]]))


def type_keys(whole, n_terms):
    """The route key of every type of ``whole``."""
    first = whole.text[whole.text_ptr[:-1]].astype(np.int64)
    long = np.diff(whole.text_ptr) > 1
    out = first.copy()
    out[long] = n_terms + first[long] * n_terms + whole.text[whole.text_ptr[:-1][long] + 1]
    return out


def owner_of(keys, n_owners):
    """The owner of every route key (a multiplicative hash, so neighbouring ids spread)."""
    h = (np.asarray(keys, np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(33)
    return (h % np.uint64(n_owners)).astype(np.int64)


def by_owner(whole, n_terms, n_owners):
    """``whole`` cut into its owners' parts (each with the whole's n_k)."""
    owner = owner_of(type_keys(whole, n_terms), n_owners)
    t = np.argsort(owner, kind="stable")  # every owner's types, still in order of first occurrence
    cut = np.searchsorted(owner[t], np.arange(n_owners + 1))
    return [part_of(whole, t[cut[p]:cut[p + 1]]) for p in range(n_owners)]


def with_keys(whole, keys, n_terms):
    """The types of ``whole`` whose route key is among the sorted ``keys``."""
    tk = type_keys(whole, n_terms)
    at = np.minimum(np.searchsorted(keys, tk), max(len(keys) - 1, 0))
    return part_of(whole, keys[at] == tk if len(keys) else np.zeros(len(tk), bool))


def entry_hist(whole, max_len):
    """``score_kernels.entry_hist`` of the compact ``whole``: (length, count, multiplicity) of
    its entries, by length, then count."""
    lens = np.repeat(np.diff(whole.text_ptr), np.diff(whole.en_ptr))
    return histogram(lens, whole.en_count, np.ones(len(lens), np.int64))


def histogram(lengths, counts, mult):
    """(length, count, multiplicity) of entries listed with their multiplicities, one row a
    distinct (length, count), by length, then count."""
    top = int(counts.max(initial=1)) + 1
    key, inv = np.unique(lengths.astype(np.int64) * top + counts, return_inverse=True)
    return key // top, key % top, np.bincount(inv.ravel(), weights=mult, minlength=len(key)).astype(np.int64)


@njit(cache=True)
def _merge_types(text_ptr, text):
    """The distinct types of the listed ones (in order of first listing): the listing of each
    (``first``) and every listed type's distinct type (``of``)."""
    n_in = len(text_ptr) - 1
    ty_slot = type_slots(max(n_in, 1))
    ty_hash = np.empty(n_in, np.uint64)
    ty_len = np.empty(n_in, np.int32)
    ty_pos = np.empty(n_in, np.int64)
    ty_head = np.empty(n_in, np.int32)
    of = np.empty(n_in, np.int64)
    n = 0
    for i in range(n_in):
        a, L = text_ptr[i], text_ptr[i + 1] - text_ptr[i]
        h = hash_span(text, a, L)
        t = type_find(ty_slot, ty_pos, text, h, a, L)
        if t < 0:
            type_new(ty_slot, ty_hash, ty_len, ty_pos, ty_head, t, h, L, a, n)
            ty_head[n] = i
            t = n
            n += 1
        of[i] = t
    return ty_head[:n].astype(np.int64), of


@njit(cache=True)
def _merge_entries(of, n_types, en_ptr, en_topic, en_count, K):
    """Every distinct type's entries summed over its listings, in topic order."""
    n_in = len(of)
    order_ptr = np.zeros(n_types + 1, np.int64)
    for i in range(n_in):
        order_ptr[of[i] + 1] += 1
    for t in range(n_types):
        order_ptr[t + 1] += order_ptr[t]
    fill = order_ptr[:-1].copy()
    order = np.empty(n_in, np.int64)  # the listings of every distinct type, in listed order
    for i in range(n_in):
        order[fill[of[i]]] = i
        fill[of[i]] += 1
    acc = np.zeros(K, np.int64)
    touched = np.empty(K, np.int64)
    out_ptr = np.zeros(n_types + 1, np.int64)
    out_topic = np.empty(len(en_topic), np.int32)
    out_count = np.empty(len(en_topic), np.int32)
    m = 0
    for t in range(n_types):
        n_touched = 0
        for j in range(order_ptr[t], order_ptr[t + 1]):
            i = order[j]
            for e in range(en_ptr[i], en_ptr[i + 1]):
                k = en_topic[e]
                if acc[k] == 0:
                    touched[n_touched] = k
                    n_touched += 1
                acc[k] += en_count[e]
        ks = np.sort(touched[:n_touched])
        for k in ks:
            out_topic[m] = k
            out_count[m] = acc[k]
            acc[k] = 0
            m += 1
        out_ptr[t + 1] = m
    return out_ptr, out_topic[:m].copy(), out_count[:m].copy()


@njit(cache=True)
def tables_from(text, n_own, text_ptr, en_ptr, en_topic, en_count, n_k, b):
    """Restaurants of a worker's sweep: the types of a compact part, whose terms ``text`` holds
    from ``n_own`` on (the worker's own tokens before them, ``b`` their boundaries), and the
    entry of every collocation of its own tokens (``col_entry``)."""
    n_types = len(text_ptr) - 1
    cap = max(n_types, 16)
    ty_hash = huge_empty(cap, np.uint64)
    ty_len = huge_empty(cap, np.int32)
    ty_pos = huge_empty(cap, np.int64)
    ty_head = huge_empty(cap, np.int32)
    for t in range(n_types):
        ty_pos[t] = n_own + text_ptr[t]
        ty_len[t] = text_ptr[t + 1] - text_ptr[t]
        ty_hash[t] = hash_span(text, ty_pos[t], ty_len[t])
        ty_head[t] = en_ptr[t] if en_ptr[t + 1] > en_ptr[t] else -1
    ty_slot = type_slots(n_types)
    type_rehash(ty_slot, ty_hash, ty_len, 0, n_types)
    n_entries = en_ptr[n_types]
    cap = max(n_entries, 16)
    en_slot = entry_slots(cap)
    e_type = huge_empty(cap, np.int32)
    e_topic = huge_empty(cap, np.int32)
    e_count = huge_empty(cap, np.int32)
    e_next = huge_empty(cap, np.int32)
    for t in range(n_types):
        for e in range(en_ptr[t], en_ptr[t + 1]):
            e_type[e] = t
            e_topic[e] = en_topic[e]
            e_count[e] = en_count[e]
            e_next[e] = e + 1 if e + 1 < en_ptr[t + 1] else -1
    entry_rehash(en_slot, e_type, e_topic, 0, n_entries)
    col_entry = huge_full(len(b), -1, np.int32)
    s = 0
    for i in range(len(b)):
        if b[i] >= 0:
            n = i - s + 1
            t = type_find(ty_slot, ty_pos, text, hash_span(text, s, n), s, n)
            col_entry[i] = entry_find(en_slot, t, b[i]) if t >= 0 else -1
            s = i + 1
    return Restaurants(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, e_type, e_topic,
                       e_count, e_next, n_entries, n_k, col_entry)
