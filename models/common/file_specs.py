"""What the model files and checkpoints of every kind must hold, as tables of
:mod:`models.common.validate` checks; each kind names its table next to its arrays (``_FILE_SPEC``),
and every load runs it before a kernel reads the file (docs/reliability.md lists them).

Dimensions: ``samples`` are the kept (chain, sample) pairs of a model file, ``kept`` those of a
checkpoint, ``chains``, ``shards``, ``topics``, ``terms`` come from the header's parameters,
``tokens`` and ``documents`` from the corpus a checkpoint resumes on (in a model file, from
``doc_len`` or the document pointers). Checks marked indexed compare the file with the index it
is loaded for (``collection``: its documents' token counts).
"""
import numpy as np

from . import validate as V
from . import validate_tables as T

_TOPIC = (np.uint16, np.int32)  # topic columns of the sparse count tables (uint16 when K fits)


def _no_dims(model, header, corpus):
    return {}


def _csr(prefix, rows, index, cols, dtype=_TOPIC, count="count", count_dtype=np.int32, sums=False,
         ptr_shape=None, strict=True):
    """A stacked CSR table ``<prefix>_ptr`` (samples, rows + 1; None: its shape checked before)
    with column ``<prefix>_<index>`` (indices into ``cols``, increasing within a row) and counts
    ``<prefix>_<count>``."""
    ptr, idx, cnt = f"{prefix}_ptr", f"{prefix}_{index}", f"{prefix}_{count}"
    shape = () if rows is None else (V.array(ptr, ptr_shape or ("samples", rows + "+1"), np.int64),)
    return (*shape, V.array(idx, (prefix + "_entries",), dtype),
            V.array(cnt, (prefix + "_entries",), count_dtype),
            *T.table(ptr, idx, cnt, cols, strict=strict, sums=sums))


def _doc_len():
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


def _assignments(dim):
    """Assignment values: topics (or pair keys) in [0, dim); -1 (not yet drawn) as well under the
    sparse initialisation."""
    def checks(name, optional):
        return (V.index(name, dim, when=_NOT_SPARSE, optional=optional),
                V.index(name, dim, low=-1, when=_SPARSE, optional=optional))
    return checks


# -- LDA (and gLDA's model files) --------------------------------------------------------------

LDA_MODEL = (
    *_doc_len(),
    *_csr("kd", "topics", "doc", "documents", dtype=np.int32, sums=True),
    *_csr("tw", "terms", "topic", "topics", sums=True),
    V.array("n_k_samples", ("samples", "topics"), np.int64),
    T.totals("kd_count", "kd_ptr", "n_k_samples"),
    T.totals("tw_count", "tw_ptr", "n_k_samples", by="tw_topic", width="topics"),
    T.totals("kd_count", "kd_ptr", "doc_len", by="kd_doc", width="documents"),
    V.array("alpha_samples", ("samples", "topics"), np.float64), V.prior("alpha_samples"),
)

LDA = V.Spec(
    model=LDA_MODEL,
    checkpoint=state_checks("z", ("tokens",), (np.int32, np.uint16),
                            _assignments("topics"), "alpha", ("topics",), ("shards",)),
    dims=_no_dims, priors=(("alpha", True), ("beta", False)))


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
    def damage(ctx):  # the first group of chain 0 in a group beyond its document's
        gz = ctx.arrays[name].copy()
        d = np.searchsorted(ctx.corpus.doc_ptr, 0, side="right") - 1  # the first token's document
        gz[0, 0] = np.diff(ctx.model._lay["grp_ptr"])[d]
        return {name: gz}
    return (V.relation(name, "groups within their document, group topics in [0, topics)",
                       _glda_groups(name), damage, optional=optional),)


GLDA = V.Spec(
    model=LDA_MODEL,
    checkpoint=state_checks("gz", ("tokens+groups",), np.int32,
                            _glda_values, "alpha", ("topics",), ()),
    dims=lambda m, h, c: {} if c is None else {"groups": int(m._lay["grp_ptr"][-1])},
    priors=LDA.priors)


# -- PAM ---------------------------------------------------------------------------------------

# the kept samples' counts: uint16 where every count fits (files of int32 counts load as well)
_PAM_COUNT = (np.uint16, np.int32)

PAM = V.Spec(
    model=(
        *_doc_len(),
        V.array("dp_ptr", ("samples", "documents+1"), np.int64),
        V.array("dp_key_samples", ("pair_entries",), np.int32),
        V.array("dp_count_samples", ("pair_entries",), _PAM_COUNT),
        *T.table("dp_ptr", "dp_key_samples", "dp_count_samples", "pairs", sums=True),
        T.totals("dp_count_samples", "dp_ptr", "doc_len"),
        *_csr("tw", "terms", "sub", "sub-topics", count_dtype=_PAM_COUNT, sums=True),
        V.array("n_j_samples", ("samples", "sub-topics"), np.int64),
        T.totals("tw_count", "tw_ptr", "n_j_samples", by="tw_sub", width="sub-topics"),
        # a pair key is super * n_sub + sub: the documents' counts per sub-topic are n_j too
        T.totals("dp_count_samples", "dp_ptr", "n_j_samples", by="dp_key_samples",
                 width="sub-topics", fold="sub-topics"),
        V.array("alpha_samples", ("samples", "super-topics", "sub-topics"), np.float64),
        V.prior("alpha_samples"),
    ),
    checkpoint=state_checks("z", ("tokens",), np.int32, _assignments("pairs"), "alpha",
                            ("super-topics", "sub-topics"), ("shards",)),
    dims=lambda m, h, c: {"super-topics": m.n_super, "sub-topics": m.n_sub, "pairs": m.n_super * m.n_sub},
    priors=(("alpha_root", True), ("alpha_sub", False), ("beta", False)))


# -- TCM ---------------------------------------------------------------------------------------

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
    p = a["ct_ptr"]
    covered = np.concatenate([[0], np.cumsum(np.diff(a["type_ptr"])[a["ct_type"]] * a["ct_count"])])
    per = covered[p[1:]] - covered[p[:-1]]
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

    def damage(ctx):  # the corpus's last token, a document's end, continued
        b = ctx.arrays[name].copy()
        b[0, -1] = -1
        return {name: b}
    return (V.index(name, "topics", low=-1, optional=optional),
            V.relation(name, "collocations end at splits and document ends, at most max_len long",
                       check, damage, optional=optional))


TCM = V.Spec(
    model=(
        V.relation("header", f"alpha_used a prior in [{V.PRIOR_MIN:g}, {V.PRIOR_MAX:g}]", _alpha_used,
                   lambda ctx: {"header": dict(ctx.header, alpha_used=V.ABSURD)}),
        V.array("dk_ptr", ("samples", "documents+1"), np.int64), V.documents("dk_ptr"),
        V.array("type_ptr", ("types+1",), np.int64),
        V.array("type_terms", ("type_tokens",), np.int32),
        T.pointer("type_ptr", "type_terms"), V.index("type_terms", "terms"),
        V.relation("type_ptr", "type lengths in [1, max_len], shortest first", _type_lengths,
                   lambda ctx: {"type_ptr": V.set_value(ctx.arrays["type_ptr"], 1, 0)}),  # one of length 0
        *_csr("ct", "samples", "type", "types", dtype=np.int32, ptr_shape=("samples+1",), strict=False),
        V.array("ct_topic", ("ct_entries",), _TOPIC), V.index("ct_topic", "topics"),
        V.relation("ct_count", "collocations cover the index's tokens", _tokens, _tokens_damage,
                   indexed=True),
        *_csr("dk", None, "topic", "topics", sums=True),
        V.relation("dk_count", "collocations per document within what its tokens allow",
                   _colloc_per_doc, _colloc_damage, indexed=True),
        V.array("n_k_samples", ("samples", "topics"), np.int64),
        T.totals("ct_count", "ct_ptr", "n_k_samples", by="ct_topic", width="topics"),
        T.totals("dk_count", "dk_ptr", "n_k_samples", by="dk_topic", width="topics"),
        V.array("alpha0_samples", ("samples",), np.float64), V.prior("alpha0_samples"),
    ),
    checkpoint=state_checks("b", ("tokens",), np.int32, _boundaries, "alpha0", (),
                            ("shards+1",)),
    dims=_no_dims, priors=(("alpha", True), ("alpha0", True)))


# -- tree-LDA ----------------------------------------------------------------------------------

def _synsets(ctx):
    """The stored synsets rebuild the tree the counts were taken on: every one of >= 2 distinct
    terms, none twice (disjoint when merged); binds the tree's node count."""
    ptr, terms = ctx.arrays["syn_ptr"], ctx.arrays["syn_terms"]
    lens = np.diff(ptr)
    if lens.size and lens.min() < 2:
        return "syn_terms holds a synset of fewer than 2 terms (by syn_ptr)"
    if ctx.model.merge and np.unique(terms).size != terms.size:
        return "syn_terms: merged synsets share a term"
    if len({tuple(terms[a:b].tolist()) for a, b in zip(ptr[:-1], ptr[1:])}) != lens.size:
        return "syn_terms holds a synset twice"
    ctx.dims["nodes"] = 1 + ctx.dims["terms"] + lens.size + terms.size
    return None


def _synset_twice(ctx):
    """Damage: a synset's terms those of the first synset as long."""
    ptr, terms = ctx.arrays["syn_ptr"], ctx.arrays["syn_terms"].copy()
    lens = np.diff(ptr)
    g = np.flatnonzero(lens[1:] == lens[0])[0] + 1
    terms[ptr[g]:ptr[g + 1]] = terms[:lens[0]]
    return {"syn_terms": terms}


def _edge_topics(ctx, first, last, row_group):
    """Per kept sample, the counts of the edges into nodes [first, last) by topic and by
    ``row_group`` of their node (an int array over those nodes): (samples, groups, topics)."""
    a, K = ctx.arrays, ctx.dims["topics"]
    p = a["ne_ptr"]
    n_groups = int(row_group.max(initial=-1)) + 1
    out = np.zeros((p.shape[0], n_groups, K))
    for cs in range(p.shape[0]):
        lo, hi = p[cs, first], p[cs, last]
        node = np.repeat(np.arange(first, last), np.diff(p[cs, first:last + 1]))
        key = row_group[node - first] * K + a["ne_topic"][lo:hi]
        out[cs] = np.bincount(key, weights=a["ne_count"][lo:hi], minlength=n_groups * K).reshape(n_groups, K)
    return out


def _tree_parts(ctx):
    """Nodes: 0 root, 1..V the words' own leaves, then G synset nodes, then their leaves."""
    V_, G = ctx.dims["terms"], len(ctx.arrays["syn_ptr"]) - 1
    return 1 + V_, 1 + V_ + G, ctx.dims["nodes"]


def _flow(ctx):
    """Every token through a synset node goes on to one of its leaves: per sample and topic a
    synset node's count is the sum of its leaves'."""
    syn, leaf, end = _tree_parts(ctx)
    if leaf == syn:
        return None
    into = _edge_topics(ctx, syn, leaf, np.arange(leaf - syn))
    out = _edge_topics(ctx, leaf, end, np.repeat(np.arange(leaf - syn), np.diff(ctx.arrays["syn_ptr"])))
    if not np.array_equal(into, out):
        cs, g, k = np.argwhere(into != out)[0]
        return (f"ne_count gives synset {g} {int(into[cs, g, k])} tokens of topic {k} in sample {cs}, "
                f"its leaves {int(out[cs, g, k])}; counts and totals disagree")
    return None


def _entry_of_rows(ctx, first, last):
    """The first entry of ne_count in the rows [first, last) of sample 0."""
    p = ctx.arrays["ne_ptr"]
    if p[0, last] == p[0, first]:
        raise AssertionError(f"no count in the rows [{first}, {last}) of ne_ptr")
    return int(p[0, first])


def _flow_damage(ctx):  # the probe's: seven tokens more on a synset's edge
    syn, leaf, _ = _tree_parts(ctx)
    c = ctx.arrays["ne_count"].copy()
    c[_entry_of_rows(ctx, syn, leaf)] += 7
    return {"ne_count": c}


def _root_totals(ctx):
    """Every token passes through one edge out of the root: per sample and topic those edges'
    counts equal the documents' topic counts."""
    syn, leaf, _ = _tree_parts(ctx)
    ne = _edge_topics(ctx, 1, leaf, np.zeros(leaf - 1, dtype=np.int64))[:, 0]
    dk = T.table_scan(ctx, "dk_ptr", "dk_count").col
    if not np.array_equal(ne, dk):
        cs = np.flatnonzero((ne != dk).any(axis=1))[0]
        return f"ne_count and dk_count disagree on the topics' token counts in sample {cs}"
    return None


def _root_damage(ctx):  # one token more on a word's own leaf
    c = ctx.arrays["ne_count"].copy()
    c[_entry_of_rows(ctx, 1, _tree_parts(ctx)[0])] += 1
    return {"ne_count": c}


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
    def damage(ctx):  # the first token of chain 0 on path -1
        zzp = ctx.arrays[name].copy()
        zzp[0, ctx.corpus.n_tokens] = -1
        return {name: zzp}
    return (V.relation(name, "topics in [0, topics), every token on a path of its word", check,
                       damage, optional=optional),)


TREE_LDA = V.Spec(
    model=(
        *_doc_len(),
        V.array("syn_ptr", ("synsets+1",), np.int64),
        V.array("syn_terms", ("synset_leaves",), np.int64),
        T.pointer("syn_ptr", "syn_terms"), V.index("syn_terms", "terms"),
        T.sorted_within("syn_terms", "syn_ptr"),
        V.relation("syn_terms", "synsets of >= 2 terms, none twice", _synsets, _synset_twice),
        *_csr("ne", "nodes", "topic", "topics"),
        *_csr("dk", "documents", "topic", "topics", sums=True),
        T.totals("dk_count", "dk_ptr", "doc_len"),
        V.relation("ne_count", "a synset node counts the tokens of its leaves", _flow, _flow_damage),
        V.relation("ne_count", "edges out of the root count the documents' tokens", _root_totals,
                   _root_damage),
        V.array("alpha_samples", ("samples", "topics"), np.float64), V.prior("alpha_samples"),
    ),
    checkpoint=state_checks("zzp", ("2*tokens",), np.int64, _paths, "alpha",
                            ("topics",), ("shards",)),
    dims=_no_dims, priors=(("alpha", True), ("beta_root", False), ("beta_synset", False)))


# -- aviPAM (the network state is checked against the header's architecture as well) ----------

_product = V.When("decoder='product'", lambda m: m.decoder == "product")
_mixture = V.When("decoder='mixture'", lambda m: m.decoder != "product")


def _empty(name):
    return V.array(name, (0,), (np.float32, np.float64), when=_mixture)


def _chain_topics(model, header, corpus):
    """aviPAM keeps every chain's sub-topics side by side."""
    return {"topics": int(model.n_chains) * int(model.n_topics), "chains": int(model.n_chains)}


AVIPAM = V.Spec(
    model=(
        V.array("topic_word", ("topics", "terms"), np.float64), V.finite("topic_word", nonneg=True),
        V.row_sums("topic_word", lambda ctx: 1.0),
        V.array("doc_mix", ("documents", "topics"), np.float64), V.documents("doc_mix"),
        V.finite("doc_mix", nonneg=True),
        # the chains' mixtures side by side, each weighted 1 / chains
        V.row_sums("doc_mix", lambda ctx: 1.0 / ctx.dims["chains"], "1 / chains", blocks="chains"),
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
    dims=_chain_topics, priors=(("alpha", False), ("alpha_root", True), ("eta", False)))
