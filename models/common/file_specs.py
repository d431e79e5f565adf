"""The parts the kinds' file specs are built from: every kind's table of :mod:`models.common.validate`
checks, what its model files and checkpoints must hold, is ``SPEC`` in ``models/<kind>/files.py``;
its estimator names it (``_FILE_SPEC``), and every load runs it before a kernel reads the file
(docs/model-files.md lists them).

Dimensions: ``samples`` are the kept (chain, sample) pairs of a model file, ``kept`` those of a
checkpoint, ``chains``, ``shards``, ``topics``, ``terms`` come from the header's parameters,
``tokens`` and ``documents`` from the corpus a checkpoint resumes on (in a model file, from
``doc_len`` or the document pointers). Checks marked indexed compare the file with the index it
is loaded for (``collection``: its documents' token counts).
"""
import numpy as np

from . import validate as V
from . import validate_tables as T

TOPIC = (np.uint16, np.int32)  # topic columns of the sparse count tables (uint16 when K fits)


def no_dims(model, header, corpus):
    """No dimension beyond the header's and the corpus's."""
    return {}


def csr(prefix, rows, index, cols, dtype=TOPIC, count="count", count_dtype=np.int32, sums=False,
        ptr_shape=None, strict=True):
    """A stacked CSR table ``<prefix>_ptr`` (samples, rows + 1; None: its shape checked before)
    with column ``<prefix>_<index>`` (indices into ``cols``, increasing within a row) and counts
    ``<prefix>_<count>``."""
    ptr, idx, cnt = f"{prefix}_ptr", f"{prefix}_{index}", f"{prefix}_{count}"
    shape = () if rows is None else (V.array(ptr, ptr_shape or ("samples", rows + "+1"), np.int64),)
    return (*shape, V.array(idx, (prefix + "_entries",), dtype),
            V.array(cnt, (prefix + "_entries",), count_dtype),
            *T.table(ptr, idx, cnt, cols, strict=strict, sums=sums))


def doc_len():
    """A model's token count per document: those of the index it is loaded for."""
    return (V.array("doc_len", ("documents",), np.int64), V.nonneg("doc_len"),
            V.documents("doc_len"), V.doc_lengths("doc_len"))


def state_checks(assign, assign_shape, assign_dtype, values, prior, prior_shape, rng_shape):
    """The chain state of a Gibbs checkpoint: the assignments ``assign`` (current, and of every
    kept sample as ``sample_<assign>``) with the value checks ``values(name, optional)``, the
    prior ``prior`` and the rng streams."""
    return (V.array(assign, ("chains",) + assign_shape, assign_dtype), *values(assign, False),
            V.array(prior, ("chains",) + prior_shape, np.float64), V.prior(prior),
            V.array("rng", ("chains",) + rng_shape + (4,), np.uint64),
            V.relation("rng", "no all-zero stream (xoshiro256** would draw only zeros)", _rng_streams,
                       _zero_stream),
            V.array("sample_" + assign, ("kept",) + assign_shape, assign_dtype, optional=True),
            *values("sample_" + assign, True),
            V.array("sample_" + prior, ("kept",) + prior_shape, np.float64, optional=True),
            V.prior("sample_" + prior, optional=True))


def _rng_streams(ctx):
    rng = ctx.arrays["rng"].reshape(-1, 4)
    return "rng holds an all-zero stream, not a generator state" if (rng == 0).all(1).any() else None


def _zero_stream(ctx):
    rng = ctx.arrays["rng"].copy()
    rng.reshape(-1, 4)[0] = 0
    return {"rng": rng}


_SPARSE = V.When("init='sparse'", lambda m: m.init == "sparse")
_NOT_SPARSE = V.When("init is not 'sparse'", lambda m: m.init != "sparse")


def assignments(dim):
    """Assignment values: topics (or pair keys) in [0, dim); -1 (not yet drawn) as well under the
    sparse initialisation."""
    def checks(name, optional):
        return (V.index(name, dim, when=_NOT_SPARSE, optional=optional),
                V.index(name, dim, low=-1, when=_SPARSE, optional=optional))
    return checks
