"""Model and checkpoint files are untrusted input: the checks every load passes through before a
kernel reads an array.

A file may come from another machine or be edited by hand, and the numba kernels index without
bounds checks, so an array that keeps its shape and dtype but holds other values could crash
the process or corrupt memory. Every kind therefore declares, next to its arrays, a
:class:`Spec`: a short table of the checks below, run in order on the file's arrays with
vectorised numpy. A failure is one ValueError naming the file and the array, e.g.
``M.npz: kd_doc holds 2147483647, beyond the 82 documents``.

Dimensions (``topics``, ``documents``, ...) come from the header's parameters, the corpus a
checkpoint resumes on, or the first array that has them; a shape written ``"topics+1"`` is one
more than the dimension.
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

import numpy as np


class Context(NamedTuple):
    """What a check sees: the file's path, header and arrays, the dimensions known so far, the
    estimator built from the header's parameters, and the corpus of a resumed training."""

    path: str
    header: dict
    arrays: dict
    dims: dict
    model: object
    corpus: object = None


def _fail(ctx, message):
    raise ValueError(f"{ctx.path}: {message}")


def _dim(ctx, spec, name=None, axis_len=None):
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
            _fail(ctx, f"{name}: dimension {unknown[0]!r} unknown")
        ctx.dims[unknown[0]] = int(axis_len) - total
        total = int(axis_len)
    return total


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")"


class When(NamedTuple):
    """A condition on the estimator's parameters under which a check applies, with its text."""

    text: str
    test: Callable

    def __call__(self, model):
        return self.test(model)


class Check(NamedTuple):
    """One declared check: ``text`` says what it verifies (docs/reliability.md lists them),
    ``run(ctx)`` raises for a file that fails it; ``when(model)`` limits it to some settings."""

    array: str
    text: str
    run: Callable
    when: Callable = None
    optional: bool = False


def array(name, shape, dtype, when=None, optional=False):
    """``name`` has ``shape`` (entries: ints or sums of dimensions, see :func:`_dim`) and one of
    the dtypes ``dtype``."""
    dtypes = tuple(np.dtype(d) for d in (dtype if isinstance(dtype, tuple) else (dtype,)))

    def run(ctx):
        a = ctx.arrays[name]
        if a.dtype not in dtypes:
            _fail(ctx, f"{name} has dtype {a.dtype}, expected {' or '.join(map(str, dtypes))}")
        if a.ndim != len(shape):
            _fail(ctx, f"{name} has {a.ndim} dimensions, expected {len(shape)} {_shape_text(shape)}")
        want = tuple(_dim(ctx, s, name, n) for s, n in zip(shape, a.shape))
        if a.shape != want:
            _fail(ctx, f"{name} has shape {a.shape}, but the model's {_shape_text(shape)} is {want}")
    return Check(name, f"shape {_shape_text(shape)}, {' or '.join(d.name for d in dtypes)}", run,
                 when, optional)


def index(name, dim, low=0, when=None, optional=False):
    """Every value of ``name`` is an index in [low, dims[dim])."""
    def run(ctx):
        a = ctx.arrays[name]
        if a.size == 0:
            return
        n = _dim(ctx, dim, name)
        lo, hi = a.min(), a.max()
        if hi >= n:
            _fail(ctx, f"{name} holds {_num(hi)}, beyond the {n} {dim}")
        if lo < low:
            _fail(ctx, f"{name} holds {_num(lo)}, below {low}")
    what = f"indices in [{low}, {dim})"
    return Check(name, what, run, when, optional)


def pointer(name, of):
    """``name`` (1-d, or one row per kept sample) is a CSR pointer into ``of``: non-decreasing
    read row after row, starting at 0, ending at len(of), each row starting where the last ends."""
    def run(ctx):
        p = ctx.arrays[name]
        n = len(ctx.arrays[of])
        if p.size == 0:
            _fail(ctx, f"{name} is empty")
        flat = p.reshape(p.shape[0], -1) if p.ndim > 1 else p[None]
        if flat[0, 0] != 0:
            _fail(ctx, f"{name} starts at {_num(flat[0, 0])}, not 0")
        if flat[-1, -1] != n:
            _fail(ctx, f"{name} ends at {_num(flat[-1, -1])}, not at the {n} entries of {of}")
        if (np.diff(flat, axis=1) < 0).any() or (flat[1:, 0] != flat[:-1, -1]).any():
            _fail(ctx, f"{name} decreases or its rows do not join; not a pointer into {of}")
    return Check(name, f"pointer into {of} (non-decreasing, from 0 to its length)", run)


def sorted_within(name, ptr, strict=True):
    """Within every segment of ``ptr`` the values of ``name`` increase (strictly by default):
    kernels binary-search them."""
    def run(ctx):
        a = ctx.arrays[name].astype(np.int64)
        if a.size < 2:
            return
        starts = np.zeros(a.size, dtype=bool)
        p = ctx.arrays[ptr].ravel()
        starts[p[(p > 0) & (p < a.size)]] = True
        step = np.diff(a)
        bad = (step <= 0) if strict else (step < 0)
        if (bad & ~starts[1:]).any():
            _fail(ctx, f"{name} is not sorted within the segments of {ptr}")
    return Check(name, f"{'increasing' if strict else 'sorted'} within every segment of {ptr}", run)


def nonneg(name, when=None, optional=False):
    def run(ctx):
        a = ctx.arrays[name]
        if a.size and a.min() < 0:
            _fail(ctx, f"{name} holds {_num(a.min())}, a negative count")
    return Check(name, "counts >= 0", run, when, optional)


def finite_pos(name, when=None, optional=False):
    """Every value finite and > 0 (priors)."""
    def run(ctx):
        a = ctx.arrays[name]
        bad = ~(np.isfinite(a) & (a > 0))
        if bad.any():
            _fail(ctx, f"{name} holds {_num(a[bad][0])}, not a finite number > 0")
    return Check(name, "finite and > 0", run, when, optional)


def finite(name, nonneg=False, when=None):
    def run(ctx):
        a = ctx.arrays[name]
        bad = ~np.isfinite(a) | ((a < 0) if nonneg else False)
        if bad.any():
            _fail(ctx, f"{name} holds {_num(a[bad][0])}, not a finite number"
                       f"{' >= 0' if nonneg else ''}")
    return Check(name, "finite" + (" and >= 0" if nonneg else ""), run, when)


def totals(values, ptr, equals, by=None, width=None, when=None):
    """The counts ``values`` summed per row of ``ptr`` and segment (``by=None``) or per row and
    value of the index array ``by`` (``width`` of them) equal ``equals``: an array name (broadcast
    over the rows) or a callable of the context."""
    def run(ctx):
        a = ctx.arrays
        v = a[values].astype(np.int64)
        p = a[ptr].reshape(a[ptr].shape[0], -1) if a[ptr].ndim > 1 else a[ptr][None]
        csum = np.concatenate([[0], np.cumsum(v)])
        if by is None:
            got = csum[p[:, 1:]] - csum[p[:, :-1]]
        else:  # rows of a 2-d pointer, or segments of a 1-d one, by value of ``by``
            n = _dim(ctx, width, values)
            lens = p[:, -1] - p[:, 0] if a[ptr].ndim > 1 else np.diff(a[ptr])
            row = np.repeat(np.arange(len(lens)), lens)
            key = row * n + a[by].astype(np.int64)
            got = np.bincount(key, weights=v, minlength=len(lens) * n).reshape(len(lens), n)
            got = got.astype(np.int64)
        want = equals(ctx) if callable(equals) else a[equals]
        want = np.broadcast_to(want, got.shape)
        if not np.array_equal(got, want):
            r, c = np.argwhere(got != want)[0]
            target = equals if isinstance(equals, str) else "the totals"
            _fail(ctx, f"{values} sums to {_num(got[r, c])} in row {r}, column {c}, but {target} "
                       f"holds {_num(want[r, c])}; counts and totals disagree")
    per = f"per {by}" if by else f"per segment of {ptr}"
    target = equals if isinstance(equals, str) else "the totals"
    return Check(values, f"sums {per} equal {target}", run, when)


def relation(name, text, fn, when=None, optional=False):
    """A kind's own check: ``fn(ctx)`` returns an error message (without the path) or None."""
    def run(ctx):
        msg = fn(ctx)
        if msg:
            _fail(ctx, msg)
    return Check(name, text, run, when, optional)


def _num(x):
    x = x.item() if hasattr(x, "item") else x
    return repr(x) if isinstance(x, float) else str(x)


class Spec(NamedTuple):
    """What a kind's files must satisfy: ``model`` checks of model files, ``checkpoint``
    checks of checkpoints (run with the corpus training resumes on), and ``dims(model, header,
    corpus)``, the dimensions the header and corpus give."""

    model: tuple
    checkpoint: tuple
    dims: Callable


def run_checks(checks, path, header, arrays, model, dims, corpus=None):
    ctx = Context(os.fspath(path), header, arrays, dict(dims), model, corpus)
    for check in checks:
        if check.when is not None and not check.when(model):
            continue
        if check.array and check.array not in arrays and check.array != "header":
            if check.optional:
                continue
            _fail(ctx, f"damaged or incomplete file (missing array {check.array!r})")
        check.run(ctx)
    return ctx.dims


def header_params(cls, path, header, n_terms=None):
    """The estimator built from the header's parameters, which its own parameter checks accept
    (run on the smallest corpus over the model's vocabulary, as they would before training)."""
    from .corpus import make_corpus

    path = os.fspath(path)
    params = header.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{path}: header has no parameters; retrain or restore the file")
    try:
        model = cls._from_params(params)
    except TypeError as e:
        raise ValueError(f"{path}: header parameters do not fit {cls.__name__} ({e})") from None
    if n_terms is None:
        n_terms = header.get("n_terms")
    if isinstance(n_terms, bool) or not isinstance(n_terms, int) or n_terms < 1:
        raise ValueError(f"{path}: header n_terms is {n_terms!r}, not a vocabulary size >= 1")
    probe = make_corpus(np.array([0, 1, 2]), np.zeros(2, dtype=np.int32), n_terms=n_terms,
                        fingerprint="probe")
    try:
        model._check_params(probe)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(f"{path}: header parameter refused: {e}") from None
    return model


def header_int(path, header, key, low=0, high=None):
    v = header.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < low or (high is not None and v > high):
        rng = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{os.fspath(path)}: header {key} is {v!r}, not an int {rng}")
    return v


def describe(spec):
    """(file, array, what is checked) rows of a spec, for the documentation."""
    rows = []
    for where, checks in (("model", spec.model), ("checkpoint", spec.checkpoint)):
        for c in checks:
            cond = f" (when {c.when.text})" if isinstance(c.when, When) else ""
            rows.append((where, c.array, c.text + cond))
    return rows


# -- the files of Gibbs-sampled models (models.gibbs) -------------------------------------------

def _gibbs_header(path, header, model):
    """Dimensions a Gibbs model file's header gives, once its own fields are sound."""
    n_samples = header_int(path, header, "n_samples", 1)
    header_int(path, header, "n_iter", 1)
    _sample_iter(path, header, n_samples)
    _log_lik_header(path, header)
    return dict(chains=model.n_chains, samples=model.n_chains * n_samples,
                terms=header_int(path, header, "n_terms", 1), topics=int(model.n_topics))


def _sample_iter(path, header, n_samples):
    it = header.get("sample_iter")
    if (not isinstance(it, list) or len(it) != n_samples
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in it)):
        raise ValueError(f"{os.fspath(path)}: header sample_iter is not a list of the "
                         f"{n_samples} kept samples' iterations")


def _log_lik_header(path, header):
    ll, it = header.get("log_lik"), header.get("log_lik_iter")
    if not isinstance(ll, list) or not isinstance(it, list) or len(ll) != len(it):
        raise ValueError(f"{os.fspath(path)}: header log_lik and log_lik_iter are not two lists "
                         f"of one length")


def gibbs_model_file(cls, path, f):
    """Validate a Gibbs model file (header parameters, then the kind's declared arrays);
    returns the estimator its parameters build and the dimensions found."""
    model = header_params(cls, path, f.header)
    dims = _gibbs_header(path, f.header, model)
    dims.update(cls._FILE_SPEC.dims(model, f.header, None))
    return model, run_checks(cls._FILE_SPEC.model, path, f.header, f.arrays, model, dims)


def gibbs_checkpoint(model, path, f, corpus):
    """Validate a Gibbs checkpoint for ``model`` (its layout built for ``corpus``) before its
    state reaches a kernel."""
    h, p = f.header, os.fspath(path)
    header_int(path, h, "iteration", 0, model.n_iter)
    chains, iters = h.get("sample_chain"), h.get("sample_iter")
    if not (isinstance(chains, list) and isinstance(iters, list) and len(chains) == len(iters)):
        raise ValueError(f"{p}: header sample_chain and sample_iter are not two lists of one length")
    if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < model.n_chains for c in chains):
        raise ValueError(f"{p}: header sample_chain names a chain outside [0, {model.n_chains})")
    if any(isinstance(i, bool) or not isinstance(i, int) or not 0 < i <= model.n_iter for i in iters):
        raise ValueError(f"{p}: header sample_iter names a sweep outside [1, {model.n_iter}]")
    _log_lik_header(path, h)
    for key in type(model)._TRACES:
        if not isinstance(h.get(key), list):
            raise ValueError(f"{p}: header {key} is not a list")
    dims = dict(chains=model.n_chains, kept=len(chains), tokens=corpus.n_tokens,
                documents=corpus.n_docs, terms=corpus.n_terms, topics=int(model.n_topics),
                shards=int(getattr(model, "n_shards", 1)))
    dims.update(type(model)._FILE_SPEC.dims(model, h, corpus))
    if chains and any("sample_" + n not in f.arrays for n in model._STATE):
        raise ValueError(f"{p}: damaged or incomplete file (the header lists {len(chains)} kept "
                         f"samples, the arrays none); delete it to start afresh")
    return run_checks(type(model)._FILE_SPEC.checkpoint, path, h, f.arrays, model, dims, corpus)


def _rng_streams(ctx):
    rng = ctx.arrays["rng"].reshape(-1, 4)
    return "rng holds an all-zero stream, not a generator state" if (rng == 0).all(1).any() else None


def state_checks(assign, assign_shape, assign_dtype, values, prior, prior_shape, rng_shape):
    """The chain state of a Gibbs checkpoint: the assignments ``assign`` (current, and of every
    kept sample as ``sample_<assign>``) with the value checks ``values(name, optional)``, the
    prior ``prior`` (finite, > 0) and the rng streams."""
    return (array(assign, ("chains",) + assign_shape, assign_dtype), *values(assign, False),
            array(prior, ("chains",) + prior_shape, np.float64), finite_pos(prior),
            array("rng", ("chains",) + rng_shape + (4,), np.uint64),
            relation("rng", "no all-zero stream (xoshiro256** would draw only zeros)", _rng_streams),
            array("sample_" + assign, ("kept",) + assign_shape, assign_dtype, optional=True),
            *values("sample_" + assign, True),
            array("sample_" + prior, ("kept",) + prior_shape, np.float64, optional=True),
            finite_pos("sample_" + prior, optional=True))


# -- the files of torch-trained models (models.variational) -------------------------------------

def _net_state(path, arrays, net, prefix="net."):
    """The file's network state against the network the header's architecture builds: the same
    entries, shapes and dtypes, finite values."""
    want = {prefix + k: v for k, v in net.state_dict().items()}
    have = {k for k in arrays if k.startswith(prefix)}
    extra, missing = sorted(have - set(want)), sorted(set(want) - have)
    if extra or missing:
        what = f"holds {extra[0]!r}" if extra else f"lacks {missing[0]!r}"
        raise ValueError(f"{os.fspath(path)}: the network state {what}, which the architecture in "
                         f"the header does not; the file and its parameters disagree")
    for k, t in want.items():
        a = arrays[k]
        shape = tuple(t.shape)
        if a.shape not in (shape, (1,) if shape == () else shape) or str(a.dtype) != str(t.dtype).replace("torch.", ""):
            raise ValueError(f"{os.fspath(path)}: {k} has shape {a.shape} {a.dtype}, but the "
                             f"architecture in the header needs {shape} {str(t.dtype)[6:]}")
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            raise ValueError(f"{os.fspath(path)}: {k} holds a value that is not finite")
        name = k[len(prefix):]
        if name.startswith("prior_var") and not (a > 0).all():  # the Laplace prior's variances
            raise ValueError(f"{os.fspath(path)}: {k} holds a variance <= 0")
        if name.startswith("mask") and not np.isin(a, (0, 1)).all():
            raise ValueError(f"{os.fspath(path)}: {k} holds a value other than 0 and 1")


def variational_model_file(cls, path, f):
    """Validate a torch model file: header parameters, the declared arrays, then the network
    state against the architecture the header names."""
    params = f.header.get("params")
    if isinstance(params, dict) and str(params.get("device", "")).startswith("cuda"):
        import torch

        if not torch.cuda.is_available():  # loaded on the CPU, as load does
            params = dict(params, device="cpu")
    model = header_params(cls, path, dict(f.header, params=params))
    header_int(path, f.header, "n_iter", 1)
    _sample_iter(path, f.header, 1)
    _log_lik_header(path, f.header)
    dims = dict(terms=header_int(path, f.header, "n_terms", 1), topics=int(model.n_topics))
    if "n_docs" in f.header:  # files written before the header had it: bound by their arrays
        dims["documents"] = header_int(path, f.header, "n_docs", 1)
    dims.update(cls._FILE_SPEC.dims(model, f.header, None))
    dims = run_checks(cls._FILE_SPEC.model, path, f.header, f.arrays, model, dims)
    if any(k.startswith("net.") for k in f.arrays):
        import torch

        try:
            with torch.device("meta"):  # shapes only: a header asking for a huge layer allocates nothing
                net = model._build_net(dims["terms"])
        except RuntimeError as e:  # sizes beyond what torch can even describe
            raise ValueError(f"{os.fspath(path)}: the network the header's parameters describe cannot "
                             f"be built ({str(e).splitlines()[0]})") from None
        _net_state(path, f.arrays, net)
    return model, dims


def variational_checkpoint(model, path, f, net, opt, generators):
    """Validate a torch checkpoint for ``model``'s network ``net``, optimizer ``opt`` (both
    built from the parameters) and random ``generators`` (name -> torch.Generator)."""
    p = os.fspath(path)
    header_int(path, f.header, "iteration", 0, model.epochs)
    _log_lik_header(path, f.header)
    _net_state(path, f.arrays, net)
    params = list(net.parameters())
    for key, a in f.arrays.items():
        if not key.startswith("opt."):
            continue
        _, i, k = (key.split(".", 2) + ["", ""])[:3]
        if not i.isdigit() or int(i) >= len(params) or k not in ("step", "exp_avg", "exp_avg_sq"):
            raise ValueError(f"{p}: {key} is not optimizer state of this network")
        shape = (1,) if k == "step" else tuple(params[int(i)].shape)
        if a.shape not in (shape, ()) or a.dtype != np.float32:
            raise ValueError(f"{p}: {key} has shape {a.shape} {a.dtype}, the network needs {shape} float32")
        if not np.isfinite(a).all() or (k != "exp_avg" and (a < 0).any()):
            raise ValueError(f"{p}: {key} holds a value that is not finite" +
                             ("" if k == "exp_avg" else " and >= 0"))
    import torch

    for name, gen in generators.items():
        a = f.arrays.get(name)
        try:
            if a is None or a.dtype != np.uint8 or a.shape != tuple(gen.get_state().shape):
                raise RuntimeError
            torch.Generator(device=gen.device).set_state(torch.from_numpy(np.array(a)))
        except RuntimeError:
            raise ValueError(f"{p}: {name} is not the state of a random generator of this "
                             f"device") from None
