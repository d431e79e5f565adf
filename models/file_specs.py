"""What the model files and checkpoints of every kind must hold, as tables of
:mod:`models.validate` checks; each kind names its table next to its arrays (``_FILE_SPEC``),
and every load runs it before a kernel reads the file (docs/reliability.md lists them).

Dimensions: ``samples`` are the kept (chain, sample) pairs of a model file, ``kept`` those of a
checkpoint, ``chains``, ``shards``, ``topics``, ``terms`` come from the header's parameters,
``tokens`` and ``documents`` from the corpus a checkpoint resumes on (in a model file, from
``doc_len`` or the document pointers).
"""
import numpy as np

from . import validate as V

_TOPIC = (np.uint16, np.int32)  # topic columns of the sparse count tables (uint16 when K fits)


def _no_dims(model, header, corpus):
    return {}


def _csr(prefix, rows, index, cols, dtype=_TOPIC, count="count"):
    """A stacked CSR table ``<prefix>_ptr`` (samples, rows + 1) with column ``<prefix>_<index>``
    (indices into ``cols``, increasing within a row) and counts ``<prefix>_<count>``."""
    ptr, idx, cnt = f"{prefix}_ptr", f"{prefix}_{index}", f"{prefix}_{count}"
    return (V.array(ptr, ("samples", rows + "+1"), np.int64),
            V.array(idx, (prefix + "_entries",), dtype),
            V.array(cnt, (prefix + "_entries",), np.int32),
            V.pointer(ptr, idx), V.index(idx, cols), V.sorted_within(idx, ptr), V.nonneg(cnt))


_SPARSE = V.When("init='sparse'", lambda m: m.init == "sparse")
_NOT_SPARSE = V.When("init is not 'sparse'", lambda m: m.init != "sparse")


def _assignments(dim):
    """Assignment values: topics (or pair keys) in [0, dim); -1 (not yet drawn) as well under the
    sparse initialisation."""
    def checks(name, optional):
        return (V.index(name, dim, when=_NOT_SPARSE, optional=optional),
                V.index(name, dim, low=-1, when=_SPARSE, optional=optional))
    return checks


# -- LDA (and gLDA's model files) --------------------------------------------------------------

LDA_MODEL = (
    V.array("doc_len", ("documents",), np.int64), V.nonneg("doc_len"),
    *_csr("kd", "topics", "doc", "documents", dtype=np.int32),
    *_csr("tw", "terms", "topic", "topics"),
    V.array("n_k_samples", ("samples", "topics"), np.int64),
    V.totals("kd_count", "kd_ptr", "n_k_samples"),
    V.totals("tw_count", "tw_ptr", "n_k_samples", by="tw_topic", width="topics"),
    V.totals("kd_count", "kd_ptr", "doc_len", by="kd_doc", width="documents"),
    V.array("alpha_samples", ("samples", "topics"), np.float64), V.finite_pos("alpha_samples"),
)

LDA = V.Spec(
    model=LDA_MODEL,
    checkpoint=V.state_checks("z", ("tokens",), (np.int32, np.uint16),
                              _assignments("topics"), "alpha", ("topics",), ("shards",)),
    dims=_no_dims)


# -- gLDA: LDA's model files; the chain state is every token's group, then every group's topic --

def _glda_groups(name):
    def check(ctx):
        m, c = ctx.model, ctx.corpus
        gz = ctx.arrays[name]
        N = c.n_tokens
        g, zg = gz[:, :N].astype(np.int64), gz[:, N:]
        n_groups = np.diff(m._lay["grp_ptr"])[np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr))]
        if g.size and ((g < 0) | (g >= n_groups)).any():
            bad = g[(g < 0) | (g >= n_groups)][0]
            return f"{name} puts a token in group {bad}, outside its document's groups"
        if m.restricted:
            lay = m._lay
            tok_doc = np.repeat(np.arange(c.n_docs), np.diff(c.doc_ptr))
            want = lay["tok_run"] - lay["run_doc_first"][tok_doc]
            if not (g == want).all():
                return f"{name}: restricted LDA's groups are the (document, term) runs; these are not"
        if zg.size and (zg.min() < 0 or zg.max() >= m.n_topics):
            bad = zg.max() if zg.max() >= m.n_topics else zg.min()
            return f"{name} gives a group topic {bad}, outside [0, {m.n_topics}) topics"
        return None
    return check


def _glda_values(name, optional):
    return (V.relation(name, "groups within their document, group topics in [0, topics)",
                       _glda_groups(name), optional=optional),)


GLDA = V.Spec(
    model=LDA_MODEL,
    checkpoint=V.state_checks("gz", ("tokens+groups",), np.int32,
                              _glda_values, "alpha", ("topics",), ()),
    dims=lambda m, h, c: {} if c is None else {"groups": int(m._lay["grp_ptr"][-1])})


# -- PAM ---------------------------------------------------------------------------------------

# the kept samples' counts: uint16 where every count fits (files of int32 counts load as well)
_PAM_COUNT = (np.uint16, np.int32)

PAM = V.Spec(
    model=(
        V.array("doc_len", ("documents",), np.int64), V.nonneg("doc_len"),
        V.array("dp_ptr", ("samples", "documents+1"), np.int64),
        V.array("dp_key_samples", ("pair_entries",), np.int32),
        V.array("dp_count_samples", ("pair_entries",), _PAM_COUNT),
        V.pointer("dp_ptr", "dp_key_samples"), V.index("dp_key_samples", "pairs"),
        V.sorted_within("dp_key_samples", "dp_ptr"), V.nonneg("dp_count_samples"),
        V.totals("dp_count_samples", "dp_ptr", "doc_len"),
        V.array("tw_ptr", ("samples", "terms+1"), np.int64),
        V.array("tw_sub", ("tw_entries",), _TOPIC),
        V.array("tw_count", ("tw_entries",), _PAM_COUNT),
        V.pointer("tw_ptr", "tw_sub"), V.index("tw_sub", "sub-topics"),
        V.sorted_within("tw_sub", "tw_ptr"), V.nonneg("tw_count"),
        V.array("n_j_samples", ("samples", "sub-topics"), np.int64),
        V.totals("tw_count", "tw_ptr", "n_j_samples", by="tw_sub", width="sub-topics"),
        V.array("alpha_samples", ("samples", "super-topics", "sub-topics"), np.float64),
        V.finite_pos("alpha_samples"),
    ),
    checkpoint=V.state_checks("z", ("tokens",), np.int32, _assignments("pairs"), "alpha",
                              ("super-topics", "sub-topics"), ("shards",)),
    dims=lambda m, h, c: {"super-topics": m.n_super, "sub-topics": m.n_sub, "pairs": m.n_super * m.n_sub})


# -- TCM ---------------------------------------------------------------------------------------

def _type_lengths(ctx):
    lens = np.diff(ctx.arrays["type_ptr"])
    L = ctx.model.max_len
    if lens.size and (lens.min() < 1 or lens.max() > L or (np.diff(lens) < 0).any()):
        return f"type_ptr gives collocation lengths outside [1, max_len = {L}] or out of order"
    return None


def _alpha_used(ctx):
    v = ctx.header.get("alpha_used", 1.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (np.isfinite(v) and v > 0):
        return f"header alpha_used is {v!r}, not a finite number > 0"
    return None


def _boundaries(name, optional):
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
    return (V.index(name, "topics", low=-1, optional=optional),
            V.relation(name, "collocations end at splits and document ends, at most max_len long",
                       check, optional=optional))


TCM = V.Spec(
    model=(
        V.relation("header", "alpha_used finite and > 0", _alpha_used),
        V.array("type_ptr", ("types+1",), np.int64),
        V.array("type_terms", ("type_tokens",), np.int32),
        V.pointer("type_ptr", "type_terms"), V.index("type_terms", "terms"),
        V.relation("type_ptr", "type lengths in [1, max_len], shortest first", _type_lengths),
        V.array("ct_ptr", ("samples+1",), np.int64),
        V.array("ct_type", ("ct_entries",), np.int32),
        V.array("ct_topic", ("ct_entries",), _TOPIC),
        V.array("ct_count", ("ct_entries",), np.int32),
        V.pointer("ct_ptr", "ct_type"), V.index("ct_type", "types"),
        V.sorted_within("ct_type", "ct_ptr", strict=False), V.index("ct_topic", "topics"),
        V.nonneg("ct_count"),
        V.array("dk_ptr", ("samples", "documents+1"), np.int64),
        V.array("dk_topic", ("dk_entries",), _TOPIC),
        V.array("dk_count", ("dk_entries",), np.int32),
        V.pointer("dk_ptr", "dk_topic"), V.index("dk_topic", "topics"),
        V.sorted_within("dk_topic", "dk_ptr"), V.nonneg("dk_count"),
        V.array("n_k_samples", ("samples", "topics"), np.int64),
        V.totals("ct_count", "ct_ptr", "n_k_samples", by="ct_topic", width="topics"),
        V.array("alpha0_samples", ("samples",), np.float64), V.finite_pos("alpha0_samples"),
    ),
    checkpoint=V.state_checks("b", ("tokens",), np.int32, _boundaries, "alpha0", (),
                              ("shards+1",)),
    dims=_no_dims)


# -- tree-LDA ----------------------------------------------------------------------------------

def _synsets(ctx):
    """The stored synsets rebuild the tree the counts were taken on: every one of >= 2 distinct
    terms, none twice (disjoint when merged); binds the tree's node count."""
    ptr, terms = ctx.arrays["syn_ptr"], ctx.arrays["syn_terms"]
    lens = np.diff(ptr)
    if lens.size and lens.min() < 2:
        return "syn_ptr holds a synset of fewer than 2 terms"
    if ctx.model.merge and np.unique(terms).size != terms.size:
        return "syn_terms: merged synsets share a term"
    if len({tuple(terms[a:b].tolist()) for a, b in zip(ptr[:-1], ptr[1:])}) != lens.size:
        return "syn_terms holds a synset twice"
    ctx.dims["nodes"] = 1 + ctx.dims["terms"] + lens.size + terms.size
    return None


def _root_totals(ctx):
    """Every token passes through one edge out of the root: per sample and topic those edges'
    counts equal the documents' topic counts."""
    a, V_, G = ctx.arrays, ctx.dims["terms"], len(ctx.arrays["syn_ptr"]) - 1
    for cs in range(a["ne_ptr"].shape[0]):
        lo, hi = a["ne_ptr"][cs, 1], a["ne_ptr"][cs, 1 + V_ + G]
        ne = np.bincount(a["ne_topic"][lo:hi], weights=a["ne_count"][lo:hi], minlength=ctx.dims["topics"])
        lo, hi = a["dk_ptr"][cs, 0], a["dk_ptr"][cs, -1]
        dk = np.bincount(a["dk_topic"][lo:hi], weights=a["dk_count"][lo:hi], minlength=ctx.dims["topics"])
        if not np.array_equal(ne, dk):
            return f"ne_count and dk_count disagree on the topics' token counts in sample {cs}"
    return None


def _paths(name, optional):
    def check(ctx):
        zzp, m, c = ctx.arrays[name], ctx.model, ctx.corpus
        N = c.n_tokens
        z, zp = zzp[:, :N], zzp[:, N:]
        if z.size and (z.min() < 0 or z.max() >= m.n_topics):
            return f"{name} holds topic {z.max() if z.max() >= m.n_topics else z.min()}, outside [0, {m.n_topics})"
        ptr = m.tree_.word_path_ptr
        lo, hi = ptr[c.term_ids], ptr[c.term_ids + 1]
        if zp.size and ((zp < lo) | (zp >= hi)).any():
            return f"{name} holds path {zp[(zp < lo) | (zp >= hi)][0]}, not a path of its token's word"
        return None
    return (V.relation(name, "topics in [0, topics), every token on a path of its word", check,
                       optional=optional),)


TREE_LDA = V.Spec(
    model=(
        V.array("doc_len", ("documents",), np.int64), V.nonneg("doc_len"),
        V.array("syn_ptr", ("synsets+1",), np.int64),
        V.array("syn_terms", ("synset_leaves",), np.int64),
        V.pointer("syn_ptr", "syn_terms"), V.index("syn_terms", "terms"),
        V.sorted_within("syn_terms", "syn_ptr"),
        V.relation("syn_ptr", "synsets of >= 2 terms, none twice", _synsets),
        *_csr("ne", "nodes", "topic", "topics"),
        *_csr("dk", "documents", "topic", "topics"),
        V.totals("dk_count", "dk_ptr", "doc_len"),
        V.relation("ne_count", "edges out of the root count the documents' tokens", _root_totals),
        V.array("alpha_samples", ("samples", "topics"), np.float64), V.finite_pos("alpha_samples"),
    ),
    checkpoint=V.state_checks("zzp", ("2*tokens",), np.int64, _paths, "alpha",
                              ("topics",), ("shards",)),
    dims=_no_dims)


# -- aviPAM (the network state is checked against the header's architecture as well) ----------

_product = V.When("decoder='product'", lambda m: m.decoder == "product")
_mixture = V.When("decoder='mixture'", lambda m: m.decoder != "product")


def _empty(name):
    return V.array(name, (0,), (np.float32, np.float64), when=_mixture)


def _chain_topics(model, header, corpus):
    """aviPAM keeps every chain's sub-topics side by side."""
    return {"topics": int(model.n_chains) * int(model.n_topics)}


AVIPAM = V.Spec(
    model=(
        V.array("topic_word", ("topics", "terms"), np.float64), V.finite("topic_word", nonneg=True),
        V.array("doc_mix", ("documents", "topics"), np.float64), V.finite("doc_mix", nonneg=True),
        *(_empty(n) for n in ("beta", "dec_shift", "dec_scale", "doc_div", "doc_lse")),
        V.array("beta", ("topics", "terms"), np.float32, when=_product),
        V.array("dec_shift", ("terms",), np.float64, when=_product),
        V.array("dec_scale", ("terms",), np.float64, when=_product),
        V.array("doc_div", ("documents",), np.float64, when=_product),
        V.array("doc_lse", ("documents",), np.float64, when=_product),
        *(V.finite(n, when=_product) for n in ("beta", "dec_shift", "dec_scale", "doc_lse")),
        V.finite_pos("doc_div", when=_product),
    ),
    checkpoint=(),
    dims=_chain_topics)
