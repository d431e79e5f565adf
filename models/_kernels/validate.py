"""One pass over a CSR table of a model file: what its checks need (models.validate).

A table is ``ptr`` (rows, n + 1) int64, a pointer into the column indices ``idx`` and counts
``cnt`` (already checked: non-decreasing, from 0 to their length, each row starting where the
last ends). The pass finds, per row, the first entry whose index is outside [0, n_idx), out of
order, or whose count is negative, and sums the counts per segment and, when asked, per row and
column (a column outside the range adds nothing).
"""
import numpy as np
from numba import njit, prange

# columns of ``first_bad``
BAD_INDEX, BAD_ORDER, BAD_COUNT = 0, 1, 2


@njit(cache=True, inline="always")
def _segment_ok(idx, cnt, lo, hi, n_idx, strict):
    """Whether idx[lo:hi] lies in [0, n_idx), ascends (strictly with ``strict``) and every count
    is >= 0, with the segment's count total. Branch-free over the entries."""
    tot = 0
    low = 0
    high = -1
    neg = 0
    for j in range(lo, hi):
        v = np.int64(idx[j])
        low = min(low, v)
        high = max(high, v)
        c = np.int64(cnt[j])
        neg |= c
        tot += c
    down = 0
    step = 1 if strict else 0
    for j in range(lo + 1, hi):
        down += np.int64(idx[j]) - np.int64(idx[j - 1]) < step
    return low >= 0 and high < n_idx and down == 0 and neg >= 0, tot


@njit(cache=True)
def _first_bad(idx, cnt, lo, hi, n_idx, strict, first_bad, r):
    step = 1 if strict else 0
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
    """Fill ``seg_sum`` (rows, n) with every segment's count total, ``col_sum`` (rows, n_idx)
    with the counts per row and column of the segments that pass (pass shape (rows, 0) to
    skip them), and ``first_bad``
    (rows, 3) with the first bad entry of each row per BAD_* (-1: none)."""
    R, n = ptr.shape[0], ptr.shape[1] - 1
    sums = col_sum.shape[1] > 0
    for r in prange(R):
        for s in range(n):
            lo, hi = ptr[r, s], ptr[r, s + 1]
            ok, tot = _segment_ok(idx, cnt, lo, hi, n_idx, strict)
            seg_sum[r, s] = tot
            if not ok:
                _first_bad(idx, cnt, lo, hi, n_idx, strict, first_bad, r)
            if sums and ok:
                row = col_sum[r]
                for j in range(lo, hi):
                    row[idx[j]] += cnt[j]
