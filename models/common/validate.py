"""Model and checkpoint files are untrusted input: the checks every load passes through before a
kernel reads an array.

A file may come from another machine or be edited by hand, and the numba kernels index without
bounds checks, so an array that keeps its shape and dtype but holds other values could crash
the process or corrupt memory, and counts that disagree give scores that are not
probabilities. Every kind therefore declares, next to its arrays, a :class:`Spec`: a table of
the checks below and those of count tables (:mod:`models.common.validate_tables`), run in order on
the file's arrays. A failure is one :class:`FileRefused` (a ValueError) naming the file and the
array, e.g. ``M.npz: kd_doc holds 2147483647, beyond the 82 documents``.

Every check that relates values also says how to break it (``damage``): the change to a sound
file that breaks this check and none declared before it; tests/test_model_fuzz.py applies
every one. Checks ``indexed`` compare the file with the documents of the index it is loaded
for (their token counts), and run only when the loader knows them.

Dimensions (``topics``, ``documents``, ...) come from the header's parameters, the corpus a
checkpoint resumes on, or the first array that has them; a shape written ``"topics+1"`` is one
more than the dimension.
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

import numpy as np

from .checkpoint import is_mapped, pieces


# Every Dirichlet or DP prior, in files and parameters. Training never leaves it: the
# optimisers floor alpha at 1e-10 and sensible priors are far below 1e10. Within it every kernel
# stays finite: K * alpha <= 65535 * 1e10 and lgamma of that fit a float64 with room to spare,
# and a sampler's weight, a product of at most three priors over counts, stays above 1e-100,
# far from underflow.
PRIOR_MIN, PRIOR_MAX = 1e-10, 1e10
# The absurd but finite value the tests' damaged files carry: a sum of two overflows.
ABSURD = 1e307
PRIOR_TEXT = f"not a prior (a finite number in [{PRIOR_MIN:g}, {PRIOR_MAX:g}])"


class FileRefused(ValueError):
    """A file that fails a declared check; ``check`` is the :class:`Check` it failed."""

    check = None


class Context(NamedTuple):
    """What a check sees: the file's path, header and arrays, the dimensions known so far, the
    estimator built from the header's parameters, the corpus of a resumed training, the token
    counts of the index's documents the model describes (``collection``, None when unknown),
    and ``memo``, the table passes the checks share."""

    path: str
    header: dict
    arrays: dict
    dims: dict
    model: object
    corpus: object = None
    collection: np.ndarray = None
    memo: dict = None


def fail(ctx, message):
    raise FileRefused(f"{ctx.path}: {message}")


def dim_size(ctx, spec, name=None, axis_len=None):
    """The size a shape entry asks for: an int, or a sum of terms "dim", "2*dim" or ints
    ("topics+1", "tokens+groups"). An unknown dimension standing alone or with an int
    ("documents+1") is bound by ``axis_len``, the first array that has it."""
    if isinstance(spec, (int, np.integer)):
        return int(spec)
    total, unknown = 0, []
    for term in spec.split("+"):
        factor, _, dim = term.rpartition("*")
        if dim.isdigit():
            total += int(dim)
        elif dim in ctx.dims:
            total += int(factor or 1) * ctx.dims[dim]
        else:
            unknown.append(dim)
    if unknown:
        if axis_len is None or len(unknown) > 1 or "*" in spec:
            fail(ctx, f"{name}: dimension {unknown[0]!r} unknown")
        ctx.dims[unknown[0]] = int(axis_len) - total
        total = int(axis_len)
    return total


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")"


def num_text(x):
    x = x.item() if hasattr(x, "item") else x
    return repr(x) if isinstance(x, float) else str(x)


class When(NamedTuple):
    """A condition on the estimator's parameters under which a check applies, with its text."""

    text: str
    test: Callable

    def __call__(self, model):
        return self.test(model)


class Check(NamedTuple):
    """One declared check: ``text`` says what it verifies (docs/model-files.md lists them),
    ``run(ctx)`` raises for a file that fails it; ``when(model)`` limits it to some settings;
    ``damage(ctx)`` gives the replacements ({array name, "header" or "collection": new value})
    that break it; ``indexed`` checks need the index's documents."""

    array: str
    text: str
    run: Callable
    when: Callable = None
    optional: bool = False
    damage: Callable = None
    indexed: bool = False


def set_value(a, pos, value):
    """A copy of ``a`` holding ``value`` at ``pos``; an unsigned one as int32 for a negative value
    (the counts tables allow int32 where uint16 is written)."""
    b = a.astype(np.int32) if a.dtype.kind == "u" and np.any(np.asarray(value) < 0) else a.copy()
    b.flat[pos] = value
    return b


def array(name, shape, dtype, when=None, optional=False):
    """``name`` has ``shape`` (entries: ints or sums of dimensions, see :func:`dim_size`) and one of
    the dtypes ``dtype``."""
    dtypes = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, tuple) else (dtype,)))

    def run(ctx):
        a = ctx.arrays[name]
        if a.dtype not in dtypes:
            fail(ctx, f"{name} has dtype {a.dtype}, expected {' or '.join(map(str, dtypes))}")
        if a.ndim != len(shape):
            fail(ctx, f"{name} has {a.ndim} dimensions, expected {len(shape)} {_shape_text(shape)}")
        want = tuple(dim_size(ctx, s, name, n) for s, n in zip(shape, a.shape))
        if a.shape != want:
            fail(ctx, f"{name} has shape {a.shape}, but the model's {_shape_text(shape)} is {want}")
    return Check(name, f"shape {_shape_text(shape)}, {' or '.join(d.name for d in dtypes)}", run,
                 when, optional)


def index(name, dim, low=0, when=None, optional=False):
    """Every value of ``name`` is an index in [low, dims[dim])."""
    def run(ctx):
        a = ctx.arrays[name]
        if a.size:
            check_range(ctx, name, dim, *extrema(a), low)

    def damage(ctx):
        a = ctx.arrays[name]
        return {name: set_value(a, a.size // 2, dim_size(ctx, dim, name))}
    return Check(name, f"indices in [{low}, {dim})", run, when, optional, damage)


def parts(a):
    """``a`` as consecutive pieces along its first axis: a memory-mapped one a piece at a time,
    each piece's pages released after it (:func:`~models.common.checkpoint.pieces`), so that a
    check of every value holds a piece of it; any other one whole."""
    if is_mapped(a) and a.flags.c_contiguous and a.ndim:
        return (p for p, in pieces(a))
    return iter((a,))


def extrema(a):
    """(min, max) of a non-empty ``a`` (by :func:`parts`)."""
    ext = [(p.min(), p.max()) for p in parts(a) if p.size]
    return min(lo for lo, _ in ext), max(hi for _, hi in ext)


def first_bad(a, bad_of):
    """The first value of ``a`` (C order) where ``bad_of(piece)``, a boolean array, holds, or
    None (by :func:`parts`)."""
    for p in parts(a):
        bad = bad_of(p)
        if bad.any():
            return p[bad][0]
    return None


def check_range(ctx, name, dim, lo, hi, low=0):
    n = dim_size(ctx, dim, name)
    if hi >= n:
        fail(ctx, f"{name} holds {num_text(hi)}, beyond the {n} {dim}")
    if lo < low:
        fail(ctx, f"{name} holds {num_text(lo)}, below {low}")


# -- values -----------------------------------------------------------------------------------

def nonneg(name, when=None, optional=False):
    def run(ctx):
        a = ctx.arrays[name]
        lo = extrema(a)[0] if a.size else 0
        if lo < 0:
            fail(ctx, f"{name} holds {num_text(lo)}, a negative count")
    return Check(name, "counts >= 0", run, when, optional,
                 lambda ctx: {name: set_value(ctx.arrays[name], ctx.arrays[name].size // 2, -1)})


def prior(name, when=None, optional=False):
    """Every value a prior: finite, in [PRIOR_MIN, PRIOR_MAX]."""
    def run(ctx):
        v = first_bad(ctx.arrays[name], lambda a: ~(np.isfinite(a) & (a >= PRIOR_MIN) & (a <= PRIOR_MAX)))
        if v is not None:
            fail(ctx, f"{name} holds {num_text(v)}, {PRIOR_TEXT}")
    return Check(name, f"priors in [{PRIOR_MIN:g}, {PRIOR_MAX:g}]", run, when, optional,
                 lambda ctx: {name: set_value(ctx.arrays[name], ctx.arrays[name].size // 2, ABSURD)})



def check_prior(name, value, allow_none=False):
    """A prior parameter's value: a number in [PRIOR_MIN, PRIOR_MAX] (or None)."""
    if value is None and allow_none:
        return
    try:
        ok = not isinstance(value, bool) and PRIOR_MIN <= float(value) <= PRIOR_MAX
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a number in [{PRIOR_MIN:g}, {PRIOR_MAX:g}]"
                         f"{' or None' if allow_none else ''}, got {value!r}")


def finite(name, nonneg=False, when=None):
    def run(ctx):
        v = first_bad(ctx.arrays[name], lambda a: ~np.isfinite(a) | ((a < 0) if nonneg else False))
        if v is not None:
            fail(ctx, f"{name} holds {num_text(v)}, not a finite number{' >= 0' if nonneg else ''}")
    return Check(name, "finite" + (" and >= 0" if nonneg else ""), run, when,
                 damage=lambda ctx: {name: set_value(ctx.arrays[name], ctx.arrays[name].size // 2, np.nan)})


def finite_pos(name, when=None, optional=False):
    """Every value finite and > 0."""
    def run(ctx):
        v = first_bad(ctx.arrays[name], lambda a: ~(np.isfinite(a) & (a > 0)))
        if v is not None:
            fail(ctx, f"{name} holds {num_text(v)}, not a finite number > 0")
    return Check(name, "finite and > 0", run, when, optional,
                 lambda ctx: {name: set_value(ctx.arrays[name], ctx.arrays[name].size // 2, 0.0)})


def row_sums(name, total, total_text="1", blocks="1", tol=1e-3, when=None):
    """Every row of ``name``, cut into ``blocks`` (a dimension) equal parts, sums to ``total(ctx)``
    (``total_text``) in every part, within ``tol`` (float32 rounding of large rows)."""
    def run(ctx):
        a = ctx.arrays[name]
        if not a.size:
            return
        n = dim_size(ctx, blocks, name)
        sums = np.concatenate([p.reshape(p.shape[0], n, -1).sum(axis=2) for p in parts(a)])
        want = total(ctx)
        bad = np.abs(sums - want) > tol
        if bad.any():
            r, b = np.argwhere(bad)[0]
            part = f", block {b}," if sums.shape[1] > 1 else ""
            fail(ctx, f"{name}: row {r}{part} sums to {num_text(sums[r, b])}, not {want:g}")

    def damage(ctx):
        a = ctx.arrays[name].copy()
        a[len(a) // 2] *= 2
        return {name: a}
    per = "every row" if blocks == "1" else f"every block of {blocks} of a row"
    return Check(name, f"{per} sums to {total_text}", run, when, damage=damage)


def relation(name, text, fn, damage=None, when=None, optional=False, indexed=False):
    """A kind's own check: ``fn(ctx)`` returns an error message (without the path) or None;
    ``damage(ctx)`` breaks it."""
    def run(ctx):
        msg = fn(ctx)
        if msg:
            fail(ctx, msg)
    return Check(name, text, run, when, optional, damage, indexed)


# -- the index the model is loaded for --------------------------------------------------------

def documents(name):
    """The file describes as many documents as the index (``name`` is the array that gave the
    dimension)."""
    def fn(ctx):
        have, want = ctx.dims["documents"], len(ctx.collection)
        if have != want:
            return f"{name} describes {have} documents, but the index has {want}; not a model of this index"
        return None
    return relation(name, "as many documents as the index", fn, indexed=True,
                    damage=lambda ctx: {"collection": np.append(ctx.collection, 0)})


def doc_lengths(name):
    """``name`` holds the token counts of the index's documents."""
    def fn(ctx):
        bad = np.flatnonzero(ctx.arrays[name] != ctx.collection)
        if bad.size:
            d = bad[0]
            return (f"{name} gives document {d} {num_text(ctx.arrays[name][d])} tokens, but the index "
                    f"gives it {num_text(ctx.collection[d])}; not a model of this index")
        return None
    return relation(name, "the index's document lengths", fn, indexed=True, damage=_move_token)


def _move_token(ctx):
    """The collection with one token moved from its first non-empty document to the next one."""
    c = ctx.collection.copy()
    d = int(np.flatnonzero(c > 0)[0])
    c[d] -= 1
    c[(d + 1) % len(c)] += 1
    return {"collection": c}


# -- running ----------------------------------------------------------------------------------

class Spec(NamedTuple):
    """What a kind's files must satisfy: ``model`` checks of model files, ``checkpoint``
    checks of checkpoints (run with the corpus training resumes on), ``dims(model, header,
    corpus)``, the dimensions the header and corpus give, and ``priors``, the (parameter,
    None allowed) pairs among the estimator's parameters that are priors."""

    model: tuple
    checkpoint: tuple
    dims: Callable
    priors: tuple = ()


def context(path, header, arrays, model, dims, corpus=None, collection=None):
    return Context(os.fspath(path), header, arrays, dict(dims), model, corpus, collection, {})


def run_checks(checks, ctx):
    """Run ``checks`` in order on ``ctx``; returns the dimensions found."""
    for check in checks:
        if not applies(check, ctx):
            continue
        if check.array not in ctx.arrays and check.array != "header":
            fail(ctx, f"damaged or incomplete file (missing array {check.array!r})")
        try:
            check.run(ctx)
        except FileRefused as e:
            e.check = check
            raise
    return ctx.dims


def applies(check, ctx):
    """Whether ``check`` runs on ``ctx`` (its condition holds, its array is there if optional,
    the index is known if it needs it)."""
    if check.when is not None and not check.when(ctx.model):
        return False
    if check.indexed and ctx.collection is None:
        return False
    return not (check.optional and check.array not in ctx.arrays)


def describe(spec):
    """(file, array, what is checked) rows of a spec, for the documentation."""
    rows = [("header", f"params.{name}", f"a prior in [{PRIOR_MIN:g}, {PRIOR_MAX:g}]"
             + (" or None" if none else "")) for name, none in spec.priors]
    for where, checks in (("model", spec.model), ("checkpoint", spec.checkpoint)):
        for c in checks:
            cond = f" (when {c.when.text})" if isinstance(c.when, When) else ""
            cond += " (against the index)" if c.indexed else ""
            rows.append((where, c.array, c.text + cond))
    return rows
