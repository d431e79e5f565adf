"""Nonzero-topic lists of tree-LDA's FAST samplers: one per document and one per edge out of the
root, optionally kept sorted by decreasing count (SD, SW).

Lists: ``top[row, :nz]`` holds the topics with a positive count and ``lc[row, :nz]`` their counts
(a copy in list order, so a bucket reads one or two cache lines instead of gathering from the
(nodes, K) count matrix). The document's list, ``dl`` = rows (topics, counts, positions), also
keeps ``pos[row, k]``, k's index (-1 when absent); an edge's list does not: a count change finds
its topic by scanning the row that the draw reads anyway, where a position index cost a cache
miss per lookup. In sorted mode (SW's edge lists) counts are non-increasing along the list; a
+-1 change moves a topic only across its block of equal counts, found by bisection: one swap.
The edges' lists are stored, built and written back by :mod:`models.tree_lda.tables`.
"""
import numpy as np

from ..common.jit import njit


@njit(cache=True)
def topic_list(cnt, cr, sort, top, lc, pos, row, track=True):
    """Fill ``top[row]`` with the k of ``cnt[cr, k] > 0`` (by decreasing count if ``sort``,
    ties by topic), ``lc[row]`` with their counts and, if ``track``, ``pos[row]`` with each
    topic's index (-1 when absent); returns the list's length."""
    K = cnt.shape[1]
    nz = 0
    for k in range(K):
        if track:
            pos[row, k] = -1
        if cnt[cr, k] > 0:
            top[row, nz] = k
            nz += 1
    if sort and nz > 1:
        keys = np.empty(nz, np.int64)
        for a in range(nz):
            keys[a] = -cnt[cr, top[row, a]]
        o = np.argsort(keys, kind="mergesort")
        tmp = top[row, :nz].copy()
        for a in range(nz):
            top[row, a] = tmp[o[a]]
    for a in range(nz):
        lc[row, a] = cnt[cr, top[row, a]]
        if track:
            pos[row, top[row, a]] = a
    return nz


@njit(cache=True, inline="always")
def _swap(top, lc, pos, row, i, j, track):
    t = top[row, i]
    top[row, i] = top[row, j]
    top[row, j] = t
    if track:
        pos[row, t] = j
        pos[row, top[row, i]] = i
    c = lc[row, i]
    lc[row, i] = lc[row, j]
    lc[row, j] = c


@njit(cache=True)
def sort_doc_list(dl, nz):
    """Insertion sort of the document list ``dl`` (rows topics, counts, positions) by decreasing
    count, stable; the positions follow. Called when a draw lands in r (SD): the list is short
    and, between two such draws, only a few counts have moved."""
    for i in range(1, nz):
        k = dl[0, i]
        c = dl[1, i]
        j = i
        while j > 0 and dl[1, j - 1] < c:
            dl[0, j] = dl[0, j - 1]
            dl[1, j] = dl[1, j - 1]
            dl[2, dl[0, j]] = j
            j -= 1
        if j < i:
            dl[0, j] = k
            dl[1, j] = c
            dl[2, k] = j


@njit(cache=True, inline="always")
def find(top, row, nz, k):
    """k's index in list ``row`` (-1 when absent), by a scan."""
    for a in range(nz):
        if top[row, a] == k:
            return a
    return -1


@njit(cache=True, inline="always")
def list_inc(top, lc, pos, row, nz, k, i, sort, track):
    """One more token of topic k, at index i of the list (-1 when absent): count it in place
    (appending k if new) and, sorted, move it ahead of its old equal-count block; ``pos`` is
    kept up to date if ``track``. Returns the new length."""
    if i < 0:
        i = nz
        top[row, i] = k
        lc[row, i] = 0
        if track:
            pos[row, k] = i
        nz += 1
    lc[row, i] += 1
    if sort:
        c = lc[row, i] - 1
        lo, hi = 0, i  # first index in [0, i] whose count is <= c
        while lo < hi:
            m = (lo + hi) >> 1
            if lc[row, m] <= c:
                hi = m
            else:
                lo = m + 1
        if lo < i:
            _swap(top, lc, pos, row, lo, i, track)
    return nz


@njit(cache=True, inline="always")
def list_dec(top, lc, pos, row, nz, k, i, sort, track):
    """One token of topic k less, at index i of the list: sorted, move it behind its old
    equal-count block; drop it at zero (then it is last in sorted mode). Returns the new length."""
    lc[row, i] -= 1
    if sort:
        c = lc[row, i] + 1
        lo, hi = i, nz - 1  # last index in [i, nz) whose count is >= c
        while lo < hi:
            m = (lo + hi + 1) >> 1
            if lc[row, m] >= c:
                lo = m
            else:
                hi = m - 1
        if lo > i:
            _swap(top, lc, pos, row, lo, i, track)
            i = lo
    if lc[row, i] == 0:
        _swap(top, lc, pos, row, i, nz - 1, track)
        if track:
            pos[row, k] = -1
        nz -= 1
    return nz
