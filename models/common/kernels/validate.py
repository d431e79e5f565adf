"""One pass over a count table of a model file: what its checks need (models.common.validate_tables).

A table is ``ptr`` (rows, n + 1) int64, a pointer into the column indices ``idx`` and counts
``cnt`` (already checked: non-decreasing, from 0 to their length, each row starting where the
last ends). The pass sums the counts of every segment, finds per row the first entry whose index
is outside [0, n_idx), out of order or whose count is negative, and, when asked and the row has
none, sums its counts per column.
"""
import numpy as np
from numba import prange

from ..jit import njit

# columns of ``first_bad``
BAD_INDEX, BAD_ORDER, BAD_COUNT = 0, 1, 2


@njit(cache=True)
def _first_bad(idx, cnt, lo, hi, n_idx, step, first_bad, r):
    for j in range(lo, hi):
        v = np.int64(idx[j])
        if (v < 0 or v >= n_idx) and first_bad[r, BAD_INDEX] < 0:
            first_bad[r, BAD_INDEX] = j
        if j > lo and v - np.int64(idx[j - 1]) < step and first_bad[r, BAD_ORDER] < 0:
            first_bad[r, BAD_ORDER] = j
        if cnt[j] < 0 and first_bad[r, BAD_COUNT] < 0:
            first_bad[r, BAD_COUNT] = j


@njit(cache=True, parallel=True)
def scan_table(ptr, idx, cnt, n_idx, strict, seg_sum, col_sum, first_bad):
    """Fill ``seg_sum`` (rows, n) with every segment's count total, ``first_bad`` (rows, 3) with
    the first bad entry of each row per BAD_* (-1: none) and, unless it has shape (rows, 0),
    ``col_sum`` (rows, n_idx, zeros) with the counts per row and column of the rows without one.

    A segment's entries are read once for all its checks (reductions without branches, which
    the compiler vectorises), then once more, from cache, for the column sums."""
    R, n = ptr.shape[0], ptr.shape[1] - 1
    step = 1 if strict else 0
    for r in prange(R):
        sound = True
        for s in range(n):
            lo, hi = ptr[r, s], ptr[r, s + 1]
            tot, low, high, neg, down = 0, 0, -1, 0, 0
            if hi > lo:
                v = np.int64(idx[lo])
                low, high, neg, tot = min(v, 0), v, np.int64(cnt[lo]), np.int64(cnt[lo])
            for j in range(lo + 1, hi):
                v = np.int64(idx[j])
                low = min(low, v)
                high = max(high, v)
                down += v - np.int64(idx[j - 1]) < step
                c = np.int64(cnt[j])
                neg |= c
                tot += c
            seg_sum[r, s] = tot
            if low < 0 or high >= n_idx or down > 0 or neg < 0:
                sound = False
                _first_bad(idx, cnt, lo, hi, n_idx, step, first_bad, r)
        if sound and col_sum.shape[1] > 0:
            row = col_sum[r]
            for j in range(ptr[r, 0], ptr[r, n]):
                row[idx[j]] += cnt[j]


@njit(cache=True)
def add_by_key(keys, values, mod, out):
    """out[keys[j] % mod] += values[j] for every entry whose key modulo ``mod`` is below
    len(out) (int64 ``out``): a table's counts totalled by one of its columns, what np.bincount
    of the keys gives, without its int64 and float64 copies of the entries."""
    n = len(out)
    for j in range(len(keys)):
        k = np.int64(keys[j])
        if k < 0 or k >= mod:  # no division for the keys a modulo leaves as they are
            k %= mod
        if k < n:
            out[k] += values[j]


@njit(cache=True)
def weighted_total(idx, cnt, weight):
    """sum over j of weight[idx[j]] * cnt[j], int64 (an index outside ``weight`` raises)."""
    tot = np.int64(0)
    for j in range(len(idx)):
        i = np.int64(idx[j])
        if i < 0 or i >= len(weight):
            raise IndexError("index out of bounds")
        tot += weight[i] * np.int64(cnt[j])
    return tot
