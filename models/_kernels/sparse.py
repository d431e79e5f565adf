"""Small sparse-array kernels the topic models share: binary search in sorted lists, labels to
(label, count) lists and dense count rows to CSR."""
from numba import njit, prange


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
