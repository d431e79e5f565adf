"""What a TCM model file and checkpoint must hold: the tables of :mod:`models.common.validate`
checks every load runs before a kernel reads the file."""
from types import SimpleNamespace

import numpy as np

from ..common import file_specs as F
from ..common.checkpoint import pieces
from ..common.kernels.validate import weighted_total
from ..common import validate as V
from ..common import validate_tables as T


def _type_lengths(ctx):
    lens = np.diff(ctx.arrays["type_ptr"])
    L = ctx.model.max_len
    if lens.size and (lens.min() < 1 or lens.max() > L or (np.diff(lens) < 0).any()):
        return f"type_ptr gives collocation lengths outside [1, max_len = {L}] or out of order"
    return None


def _alpha_used(ctx):
    v = ctx.header.get("alpha_used", 1.0)
    try:
        V.check_prior("alpha_used", v)
    except ValueError as e:
        return f"header {e}"
    return None


def _tokens(ctx):
    """Every kept sample's collocations cover the index's tokens: sum of count * length."""
    a = ctx.arrays
    p, lens = a["ct_ptr"], np.diff(a["type_ptr"])
    # a piece of the (mapped) table at a time
    per = np.array([sum(weighted_total(t, c, lens) for t, c in pieces(a["ct_type"][lo:hi], a["ct_count"][lo:hi]))
                    for lo, hi in zip(p[:-1], p[1:])], dtype=np.int64)
    n = int(ctx.collection.sum())
    bad = np.flatnonzero(per != n)
    if bad.size:
        return (f"ct_count covers {per[bad[0]]} tokens in sample {bad[0]}, but the index's "
                f"documents hold {n}; not a model of this index")
    return None


def _colloc_per_doc(ctx):
    """Every document's collocations, per kept sample, number between ceil(tokens / max_len)
    and its tokens."""
    n = T.table_scan(ctx, "dk_ptr", "dk_count").seg  # (samples, documents)
    L = ctx.collection
    bad = (n > L) | (n * ctx.model.max_len < L)
    if bad.any():
        s, d = np.argwhere(bad)[0]
        return (f"dk_count gives document {d} {n[s, d]} collocations in sample {s}, which cannot "
                f"cover its {L[d]} tokens in the index; not a model of this index")
    return None


def _tokens_damage(ctx):
    c = ctx.collection.copy()
    c[0] += 1
    return {"collection": c}


def _colloc_damage(ctx):
    """Document d's tokens, fewer than its collocations; their number moved to another one."""
    n = T.table_scan(ctx, "dk_ptr", "dk_count").seg.max(axis=0)
    c = ctx.collection.copy()
    d = int(np.argmax(n))
    e = (d + 1) % len(c)
    c[e] += c[d] - (n[d] - 1)
    c[d] = n[d] - 1
    return {"collection": c}


def _boundary_check(name):
    def check(ctx):
        b = ctx.arrays[name]
        split = ctx.model._split.astype(bool)
        ends = b >= 0
        if (split[None, :] & ~ends).any():
            return f"{name} continues a collocation across a split or a document's end"
        L = ctx.model.max_len
        for row in ends:
            pos = np.flatnonzero(row)
            if np.diff(np.concatenate([[-1], pos])).max(initial=0) > L:
                return f"{name} holds a collocation longer than max_len = {L}"
        return None
    return check


def boundary_fault(model, b):
    """What is wrong with the boundaries ``b`` (chains, tokens), int32, of ``model`` (its split
    flags, topics and max_len; a checkpoint's checks above), or None."""
    K = model.n_topics
    if b.size and (b.min() < -1 or b.max() >= K):
        bad = b.max() if b.max() >= K else b.min()
        return f"b gives a topic {bad}, outside [-1, {K})"
    return _boundary_check("b")(SimpleNamespace(model=model, arrays={"b": b}))


def _boundaries(name, optional):
    check = _boundary_check(name)

    def damage(ctx):  # the corpus's last token, a document's end, continued
        b = ctx.arrays[name].copy()
        b[0, -1] = -1
        return {name: b}
    return (V.index(name, "topics", low=-1, optional=optional),
            V.relation(name, "collocations end at splits and document ends, at most max_len long",
                       check, damage, optional=optional))


SPEC = V.Spec(
    model=(
        V.relation("header", f"alpha_used a prior in [{V.PRIOR_MIN:g}, {V.PRIOR_MAX:g}]", _alpha_used,
                   lambda ctx: {"header": dict(ctx.header, alpha_used=V.ABSURD)}),
        V.array("dk_ptr", ("samples", "documents+1"), np.int64), V.documents("dk_ptr"),
        V.array("type_ptr", ("types+1",), np.int64),
        V.array("type_terms", ("type_tokens",), np.int32),
        T.pointer("type_ptr", "type_terms"), V.index("type_terms", "terms"),
        V.relation("type_ptr", "type lengths in [1, max_len], shortest first", _type_lengths,
                   lambda ctx: {"type_ptr": V.set_value(ctx.arrays["type_ptr"], 1, 0)}),  # one of length 0
        *F.csr("ct", "samples", "type", "types", dtype=np.int32, ptr_shape=("samples+1",), strict=False),
        V.array("ct_topic", ("ct_entries",), F.TOPIC), V.index("ct_topic", "topics"),
        V.relation("ct_count", "collocations cover the index's tokens", _tokens, _tokens_damage,
                   indexed=True),
        *F.csr("dk", None, "topic", "topics", sums=True),
        V.relation("dk_count", "collocations per document within what its tokens allow",
                   _colloc_per_doc, _colloc_damage, indexed=True),
        V.array("n_k_samples", ("samples", "topics"), np.int64),
        T.totals("ct_count", "ct_ptr", "n_k_samples", by="ct_topic", width="topics"),
        T.totals("dk_count", "dk_ptr", "n_k_samples", by="dk_topic", width="topics"),
        V.array("alpha0_samples", ("samples",), np.float64), V.prior("alpha0_samples"),
    ),
    checkpoint=F.state_checks("b", ("tokens",), (np.int32, np.int16), _boundaries, "alpha0", (),
                              ("shards+1",)),
    dims=F.no_dims, priors=(("alpha", True), ("alpha0", True)))
