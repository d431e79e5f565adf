"""Count tables of model files: a pointer (one row per kept sample), column indices that
increase within its segments, and counts; the checks of :mod:`models.common.validate` that read them,
from one pass per table (:func:`models.common.kernels.validate.scan_table`), and their totals across
arrays. Every check says how to break it (see :mod:`models.common.validate`)."""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from .checkpoint import pieces, release, row_chunks
from .kernels.validate import BAD_COUNT, BAD_INDEX, BAD_ORDER, add_by_key, scan_table
from .validate import Check, check_range, dim_size, fail, num_text, set_value


def _rows(p):
    """A pointer as (rows, segments + 1): a 2-d one as it is, a 1-d one as one segment per row."""
    return p if p.ndim > 1 else np.stack([p[:-1], p[1:]], axis=1)


def _segments(p, n):
    """The segment of each of the ``n`` entries a (sound) pointer ``p`` points into."""
    return np.searchsorted(_rows(p)[:, :-1].ravel(), np.arange(n), side="right") - 1


def _unsort(idx, ptr):
    """Damage: two neighbours of one segment with different values, swapped."""
    def damage(ctx):
        a = ctx.arrays[idx]
        seg = _segments(ctx.arrays[ptr], len(a))
        j = np.flatnonzero((seg[1:] == seg[:-1]) & (a[1:] != a[:-1]))[0] + 1
        b = a.copy()
        b[j - 1], b[j] = a[j], a[j - 1]
        return {idx: b}
    return damage


def sorted_within(name, ptr):
    """Within every segment of ``ptr`` the values of ``name`` increase strictly (a small array
    without counts; count tables have :func:`table`)."""
    def run(ctx):
        a = ctx.arrays[name].astype(np.int64)
        seg = _segments(ctx.arrays[ptr], len(a))
        if ((np.diff(a) <= 0) & (seg[1:] == seg[:-1])).any():
            fail(ctx, f"{name} is not sorted within the segments of {ptr}")
    return Check(name, f"increasing within every segment of {ptr}", run, damage=_unsort(name, ptr))


# -- count tables: a pointer, column indices increasing within its segments, counts ---------------

class Scan(NamedTuple):
    """One pass over a table: per-segment count totals (rows, segments), counts per row and
    column (rows, columns) or None, and the first entry with a bad index, order or count (-1)."""

    idx: str
    seg: np.ndarray
    col: np.ndarray
    bad: tuple


def _scan(ctx, ptr, idx, cnt, cols, strict, sums):
    key = (ptr, cnt)
    if key not in ctx.memo:
        a = ctx.arrays
        p = np.ascontiguousarray(_rows(a[ptr]))
        n_cols = dim_size(ctx, cols, idx)
        seg = np.empty((p.shape[0], p.shape[1] - 1), dtype=np.int64)
        col = np.zeros((p.shape[0], n_cols if sums else 0), dtype=np.int64)
        first = np.full((p.shape[0], 3), -1, dtype=np.int64)
        ix, ct = a[idx], a[cnt]
        # chunk by chunk, each one's pages released after it: a mapped table's pass holds a
        # chunk of it at a time, not the table
        for r0, r1 in row_chunks(p[:, 0], p[:, -1], ix.itemsize + ct.itemsize, numba.get_num_threads()):
            scan_table(p[r0:r1], ix, ct, n_cols, strict, seg[r0:r1], col[r0:r1], first[r0:r1])
            for x in (ix, ct):
                release(x, p[r0, 0], p[r1 - 1, -1])
        bad = tuple(int(f[f >= 0].min()) if (f >= 0).any() else -1 for f in first.T)
        ctx.memo[key] = Scan(idx, seg, col if sums else None, bad)
    return ctx.memo[key]


def table_scan(ctx, ptr, cnt):
    """The pass over the table of ``ptr`` and ``cnt`` (run by the table's checks before)."""
    return ctx.memo[(ptr, cnt)]


def pointer(name, of):
    """``name`` (1-d, or one row per kept sample) is a CSR pointer into ``of``: non-decreasing
    read row after row, starting at 0, ending at len(of), each row starting where the last ends."""
    def run(ctx):
        p = ctx.arrays[name]
        n = len(ctx.arrays[of])
        if p.size == 0:
            fail(ctx, f"{name} is empty")
        flat = p.reshape(p.shape[0], -1) if p.ndim > 1 else p[None]
        if flat[0, 0] != 0:
            fail(ctx, f"{name} starts at {num_text(flat[0, 0])}, not 0")
        if flat[-1, -1] != n:
            fail(ctx, f"{name} ends at {num_text(flat[-1, -1])}, not at the {n} entries of {of}")
        if (np.diff(flat, axis=1) < 0).any() or (flat[1:, 0] != flat[:-1, -1]).any():
            fail(ctx, f"{name} decreases or its rows do not join; not a pointer into {of}")

    def damage(ctx):
        p = ctx.arrays[name]
        return {name: set_value(p, p.size - 1, p.flat[-1] + 1)}
    return Check(name, f"pointer into {of} (non-decreasing, from 0 to its length)", run, damage=damage)


def table(ptr, idx, cnt, cols, strict=True, sums=False):
    """The checks of a count table (after its arrays' shapes): ``ptr`` points into ``idx``,
    indices into ``cols`` that increase (strictly by default: kernels binary-search them) within
    every segment, counts >= 0. One pass does them all; with ``sums`` it also counts per
    column, for :func:`totals` by ``idx``."""
    def scan(ctx):
        return _scan(ctx, ptr, idx, cnt, cols, strict, sums)

    def in_range(ctx):
        j = scan(ctx).bad[BAD_INDEX]
        if j >= 0:
            v = ctx.arrays[idx][j]
            check_range(ctx, idx, cols, v, v)

    def ordered(ctx):
        if scan(ctx).bad[BAD_ORDER] >= 0:
            fail(ctx, f"{idx} is not sorted within the segments of {ptr}")

    def nonneg(ctx):
        j = scan(ctx).bad[BAD_COUNT]
        if j >= 0:
            fail(ctx, f"{cnt} holds {num_text(ctx.arrays[cnt][j])}, a negative count")

    order = "increasing" if strict else "sorted"
    return (pointer(ptr, idx),
            Check(idx, f"indices in [0, {cols})", in_range,
                  damage=lambda ctx: {idx: set_value(ctx.arrays[idx], len(ctx.arrays[idx]) // 2,
                                                dim_size(ctx, cols, idx))}),
            Check(idx, f"{order} within every segment of {ptr}", ordered, damage=_unsort(idx, ptr)),
            Check(cnt, "counts >= 0", nonneg,
                  damage=lambda ctx: {cnt: set_value(ctx.arrays[cnt], len(ctx.arrays[cnt]) // 2, -1)}))


def totals(values, ptr, equals, by=None, width=None, fold=None, when=None):
    """The counts ``values`` of a :func:`table` summed per row of ``ptr`` and segment
    (``by=None``) or per row and value of the index array ``by`` (``width`` of them) equal
    ``equals``, an array name (broadcast over the rows). With ``fold``, a dimension, the values
    of ``by`` count modulo it (PAM's pair keys, by sub-topic)."""
    def got(ctx):
        a = ctx.arrays
        s = table_scan(ctx, ptr, values)
        if by is None:
            return s.seg
        if s.idx == by and s.col is not None:  # counted per column in the table's pass
            n = dim_size(ctx, fold or width, values)
            return s.col.reshape(s.col.shape[0], -1, n).sum(axis=1) if fold else s.col
        p = _rows(a[ptr])
        n = dim_size(ctx, width, values)
        mod = dim_size(ctx, fold) if fold else 1 << 62
        out = np.zeros((len(p), n), dtype=np.int64)
        for r, (lo, hi) in enumerate(zip(p[:, 0], p[:, -1])):  # a piece at a time (pieces)
            for col, v in pieces(a[by][lo:hi], a[values][lo:hi]):
                add_by_key(col, v, mod, out[r])
        return out

    def run(ctx):
        have = got(ctx)
        want = np.broadcast_to(ctx.arrays[equals], have.shape)
        if not np.array_equal(have, want):
            r, c = np.argwhere(have != want)[0]
            fail(ctx, f"{values} sums to {num_text(have[r, c].astype(np.int64))} in row {r}, column {c}, but "
                       f"{equals} holds {num_text(want[r, c])}; counts and totals disagree")

    def damage(ctx):
        """One count moved to another entry: of another segment (``by=None``), or of the same
        segment with another value of ``by`` (the segments' totals unchanged)."""
        a = ctx.arrays
        v = a[values]
        seg = _segments(a[ptr], len(v))
        key = None if by is None else a[by].astype(np.int64) % (dim_size(ctx, fold) if fold else 1 << 62)
        room = v < np.iinfo(v.dtype).max
        for i in np.flatnonzero(v > 0):
            ok = room & ((seg != seg[i]) if by is None else (seg == seg[i]) & (key != key[i]))
            j = np.flatnonzero(ok)
            if j.size:
                w = v.copy()
                w[i] -= 1
                w[j[0]] += 1
                return {values: w}
        raise AssertionError(f"no two entries of {values} to move a count between")
    per = f"per {by}" + (f" modulo {fold}" if fold else "") if by else f"per segment of {ptr}"
    return Check(values, f"sums {per} equal {equals}", run, when, damage=damage)
