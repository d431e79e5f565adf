"""Small sparse-array kernels the topic models share: binary search in sorted lists and
cumulative tables, labels to (label, count) lists, weighted sums of a few rows of a dense table
and dense count rows to CSR."""
import numpy as np
from numba import prange

from ..jit import njit


# Documents a thread scores sample by sample in the document models' kernels: one sample's
# per-query tables stay in cache for the chunk instead of every sample's for every document.
DOC_CHUNK = 16

# Columns of the dense-row document models' query tables (tree-LDA's, TCM's) come in multiples
# of this, a cache line of float32: the rows' loops over the columns then run whole vectors,
# without a scalar remainder per row.
COLUMN_PAD = 16


def pad_columns(a):
    """``a`` with its last axis padded with zeros to a multiple of COLUMN_PAD (every column is
    summed on its own, so padding changes no other)."""
    T = a.shape[-1]
    out = np.zeros(a.shape[:-1] + (-(-T // COLUMN_PAD) * COLUMN_PAD,), dtype=a.dtype)
    out[..., :T] = a
    return out


@njit(cache=True, inline="always")
def n_doc_chunks(n_docs):
    return (n_docs + DOC_CHUNK - 1) // DOC_CHUNK


@njit(cache=True, inline="always")
def doc_chunk(ch, n_docs):
    """The documents [d0, d1) of chunk ``ch``."""
    d0 = ch * DOC_CHUNK
    return d0, min(n_docs, d0 + DOC_CHUNK)


@njit(cache=True, inline="always")
def store_chunk(acc, out, d0, scale):
    """out[t, d0 + r] = acc[r, t] * scale: a chunk's rows, document-major, into the term-major
    table ``out``, for the rows t of ``out`` (``acc`` may have more columns: padding)."""
    for t in range(out.shape[0]):
        for r in range(acc.shape[0]):
            out[t, d0 + r] = acc[r, t] * scale


@njit(cache=True, inline="always")
def lower_bound(a, lo, hi, x):
    """First i in [lo, hi] with a[i] >= x (a[lo:hi] ascending)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def upper_bound(a, lo, hi, x):
    """First i in [lo, hi] with a[i] > x (a[lo:hi] ascending); hi if none: with a cumulative
    table, the entry a uniform x falls in."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, inline="always")
def pick(cum, n, u):
    """First q < n with cum[q] > u, by bisection (cum is non-decreasing: the same q as a scan);
    the last q with a positive increment if round-off puts u at or past cum[n - 1]."""
    q = upper_bound(cum, 0, n, u)
    if q == n:
        q = n - 1
        while q > 0 and cum[q] == cum[q - 1]:
            q -= 1
    return q


@njit(cache=True, inline="always")
def label_counts(zs, keys, counts, base):
    """The sorted labels ``zs`` as (label, count) pairs at keys[base:], counts[base:], negative
    labels (unassigned) skipped; returns the number of pairs."""
    nnz = 0
    prev = -1
    for t in zs:
        if t < 0:
            continue
        if t == prev:
            counts[base + nnz - 1] += 1
        else:
            keys[base + nnz] = t
            counts[base + nnz] = 1
            nnz += 1
            prev = t
    return nnz


@njit(cache=True, inline="always")
def add_weighted_rows(out, table, rows, weights, lo, hi, scale):
    """out[t] += sum over i in [lo, hi) of (weights[i] * scale) * table[rows[i], t], four rows
    at a time, so that ``out`` is read and written once for four rows of ``table``."""
    T = len(out)
    i = lo
    while i + 4 <= hi:
        p0, c0 = table[rows[i]], weights[i] * scale
        p1, c1 = table[rows[i + 1]], weights[i + 1] * scale
        p2, c2 = table[rows[i + 2]], weights[i + 2] * scale
        p3, c3 = table[rows[i + 3]], weights[i + 3] * scale
        for t in range(T):
            out[t] += c0 * p0[t] + c1 * p1[t] + c2 * p2[t] + c3 * p3[t]
        i += 4
    for j in range(i, hi):
        p0, c0 = table[rows[j]], weights[j] * scale
        for t in range(T):
            out[t] += c0 * p0[t]


@njit(cache=True, inline="always")
def add_weighted_rows_at(out, table_t, rows, weights, lo, hi, scale, cols):
    """:func:`add_weighted_rows` at the entries ``cols`` of ``out`` only, from the transposed
    table (``table_t[t, r]`` = ``table[r, t]``, so that an entry's rows are one line of it),
    each entry summed in the same order, so that it comes out bit for bit as
    :func:`add_weighted_rows` makes it."""
    for t in cols:
        line = table_t[t]
        acc = out[t]
        i = lo
        while i + 4 <= hi:
            acc += (weights[i] * scale * line[rows[i]] + weights[i + 1] * scale * line[rows[i + 1]]
                    + weights[i + 2] * scale * line[rows[i + 2]] + weights[i + 3] * scale * line[rows[i + 3]])
            i += 4
        for j in range(i, hi):
            acc += weights[j] * scale * line[rows[j]]
        out[t] = acc


@njit(cache=True, inline="always")
def add_count_rows32(out, table, rows, counts, lo, hi):
    """out[t] += sum over i in [lo, hi) of counts[i] * table[rows[i], t] in float32 (``out`` and
    ``table`` float32; counts, or weights, taken as float32): :func:`add_weighted_rows` at half the bytes a row, for the document
    models whose per-sample sums are dense rows of a (topics, query terms) table."""
    T = len(out)
    i = lo
    while i + 4 <= hi:
        p0, c0 = table[rows[i]], np.float32(counts[i])
        p1, c1 = table[rows[i + 1]], np.float32(counts[i + 1])
        p2, c2 = table[rows[i + 2]], np.float32(counts[i + 2])
        p3, c3 = table[rows[i + 3]], np.float32(counts[i + 3])
        for t in range(T):
            out[t] += c0 * p0[t] + c1 * p1[t] + c2 * p2[t] + c3 * p3[t]
        i += 4
    for j in range(i, hi):
        p0, c0 = table[rows[j]], np.float32(counts[j])
        for t in range(T):
            out[t] += c0 * p0[t]


@njit(cache=True, inline="always")
def sum_rows32(s, table, rows, counts, lo, hi):
    """s[t] = sum over i in [lo, hi) of counts[i] * table[rows[i], t] in float32 (overwrites
    the float32 ``s``): :func:`add_count_rows32` into zeros, its first row or four rows written
    rather than added (0 + x == x, so the same values without a pass that zeroes ``s``)."""
    T = len(s)
    if hi - lo >= 4:
        p0, c0 = table[rows[lo]], np.float32(counts[lo])
        p1, c1 = table[rows[lo + 1]], np.float32(counts[lo + 1])
        p2, c2 = table[rows[lo + 2]], np.float32(counts[lo + 2])
        p3, c3 = table[rows[lo + 3]], np.float32(counts[lo + 3])
        for t in range(T):
            s[t] = c0 * p0[t] + c1 * p1[t] + c2 * p2[t] + c3 * p3[t]
        lo += 4
    elif hi > lo:
        p0, c0 = table[rows[lo]], np.float32(counts[lo])
        for t in range(T):
            s[t] = c0 * p0[t]
        lo += 1
    else:
        for t in range(T):
            s[t] = np.float32(0.0)
    add_count_rows32(s, table, rows, counts, lo, hi)


@njit(cache=True, inline="always")
def add_prior_rows32(out, s, table, rows, counts, lo, hi, prior, f):
    """out[t] += (prior[t] + sum over i in [lo, hi) of counts[i] * table[rows[i], t]) * f, the sum
    taken in float32 in the scratch ``s`` (:func:`sum_rows32`): a (document, sample)'s
    term of the tree-LDA and TCM document models."""
    sum_rows32(s, table, rows, counts, lo, hi)
    for t in range(len(s)):
        out[t] += (prior[t] + s[t]) * f


@njit(cache=True, parallel=True)
def row_nnz(dense, out):
    """out[r] = number of nonzero entries of dense[r]."""
    for r in prange(dense.shape[0]):
        m = 0
        for j in range(dense.shape[1]):
            if dense[r, j] != 0:
                m += 1
        out[r] = m


@njit(cache=True, parallel=True)
def rows_to_csr(dense, out_ptr, out_col, out_count):
    """The nonzeros of every row of ``dense`` at out_*[out_ptr[r]:out_ptr[r + 1]], columns ascending."""
    for r in prange(dense.shape[0]):
        o = out_ptr[r]
        for j in range(dense.shape[1]):
            v = dense[r, j]
            if v != 0:
                out_col[o] = j
                out_count[o] = v
                o += 1
