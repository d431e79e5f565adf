"""What a tree-LDA model file and checkpoint must hold: the tables of
:mod:`models.common.validate` checks every load runs before a kernel reads the file."""
import numpy as np

from ..common import file_specs as F
from ..common.checkpoint import PASS_BYTES, id_dtype, release
from ..common import validate as V
from ..common import validate_tables as T


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


def _edge_topics(ctx, cs, first, last, row_group):
    """The counts of kept sample ``cs`` of the edges into nodes [first, last) by topic and by
    ``row_group`` of their node (an int array over those nodes): (groups, topics)."""
    a, K = ctx.arrays, ctx.dims["topics"]
    p = a["ne_ptr"]
    n_groups = int(row_group.max(initial=-1)) + 1
    lo, hi = p[cs, first], p[cs, last]
    node = np.repeat(np.arange(first, last), np.diff(p[cs, first:last + 1]))
    key = row_group[node - first] * K + a["ne_topic"][lo:hi]
    out = np.bincount(key, weights=a["ne_count"][lo:hi], minlength=n_groups * K).reshape(n_groups, K)
    for name in ("ne_topic", "ne_count"):  # a mapped file's pages of them, read once
        release(a[name], lo, hi)
    return out


def _tree_parts(ctx):
    """Nodes: 0 root, 1..V the words' own leaves, then G synset nodes, then their leaves."""
    V_, G = ctx.dims["terms"], len(ctx.arrays["syn_ptr"]) - 1
    return 1 + V_, 1 + V_ + G, ctx.dims["nodes"]


def _flow(ctx):
    """Every token through a synset node goes on to one of its leaves: per sample and topic a
    synset node's count is the sum of its leaves'. A sample at a time: two (synsets, topics)
    tables, not two per sample."""
    syn, leaf, end = _tree_parts(ctx)
    if leaf == syn:
        return None
    leaves = np.repeat(np.arange(leaf - syn), np.diff(ctx.arrays["syn_ptr"]))
    for cs in range(ctx.arrays["ne_ptr"].shape[0]):
        into = _edge_topics(ctx, cs, syn, leaf, np.arange(leaf - syn))
        out = _edge_topics(ctx, cs, leaf, end, leaves)
        if not np.array_equal(into, out):
            g, k = np.argwhere(into != out)[0]
            return (f"ne_count gives synset {g} {int(into[g, k])} tokens of topic {k} in sample {cs}, "
                    f"its leaves {int(out[g, k])}; counts and totals disagree")
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
    ne = np.stack([_edge_topics(ctx, cs, 1, leaf, np.zeros(leaf - 1, dtype=np.int64))[0]
                   for cs in range(ctx.arrays["ne_ptr"].shape[0])])
    dk = T.table_scan(ctx, "dk_ptr", "dk_count").col
    if not np.array_equal(ne, dk):
        cs = np.flatnonzero((ne != dk).any(axis=1))[0]
        return f"ne_count and dk_count disagree on the topics' token counts in sample {cs}"
    return None


def _root_damage(ctx):  # one token more on a word's own leaf
    c = ctx.arrays["ne_count"].copy()
    c[_entry_of_rows(ctx, 1, _tree_parts(ctx)[0])] += 1
    return {"ne_count": c}


# Tokens a pass over the paths of a chain converts at a time (int64 temporaries of PASS_BYTES).
STEP = PASS_BYTES // 8


def path_dtype(ptr, n_topics=0):
    """The dtype a file holds paths (and topics in [0, ``n_topics``)) in: uint16 where every
    word's path count fits, the paths then ranks among their words' (:func:`stored_paths`),
    else int32 path ids; ``ptr`` is the tree's ``word_path_ptr``."""
    return id_dtype(max(n_topics, int(np.diff(ptr).max(initial=0))))


def stored_paths(zp, term_ids, ptr, dtype):
    """The paths ``zp`` (path ids) of the tokens of ``term_ids`` as a file holds them in ``dtype``:
    uint16, each one's rank among its word's paths (``zp - ptr[w]``, below the word's path count
    ``ptr[w + 1] - ptr[w]``; ``ptr`` is the tree's ``word_path_ptr``), int32 the path ids."""
    if np.dtype(dtype) != np.uint16:
        return zp.astype(dtype, copy=False)
    return (zp - ptr[term_ids]).astype(np.uint16)


def path_ids(stored, term_ids, ptr, out):
    """A file's paths ``stored`` (:func:`stored_paths`: uint16 ranks, or int32 or int64 path ids
    of older files; checked by :data:`SPEC`) as path ids into ``out``, STEP tokens at a time;
    returns ``out``."""
    for lo in range(0, len(out), STEP):
        s = stored[lo:lo + STEP]
        out[lo:lo + STEP] = s + ptr[term_ids[lo:lo + STEP]] if s.dtype == np.uint16 else s
    return out


def _paths(name, optional):
    def check(ctx):
        zzp, m, c = ctx.arrays[name], ctx.model, ctx.corpus
        N = c.n_tokens
        z, zp = zzp[:, :N], zzp[:, N:]
        if z.size and (z.min() < 0 or z.max() >= m.n_topics):
            return f"{name} holds topic {z.max() if z.max() >= m.n_topics else z.min()}, outside [0, {m.n_topics})"
        ptr = m.tree_.word_path_ptr
        if zp.dtype == np.uint16:  # ranks among their words' paths
            n = np.diff(ptr)[c.term_ids]
            off = zp >= n
            if off.any():
                bad = np.argwhere(off)[0]
                return (f"{name} holds path {zp[tuple(bad)]} of a word of {n[bad[1]]} paths (ranks "
                        f"from 0), not a path of its token's word")
            return None
        lo, hi = ptr[c.term_ids], ptr[c.term_ids + 1]
        if zp.size and ((zp < lo) | (zp >= hi)).any():
            return f"{name} holds path {zp[(zp < lo) | (zp >= hi)][0]}, not a path of its token's word"
        return None
    def damage(ctx):  # the first token of chain 0 off its word's paths: path -1, or rank its path count
        zzp, N = ctx.arrays[name].copy(), ctx.corpus.n_tokens
        ptr = ctx.model.tree_.word_path_ptr
        zzp[0, N] = np.diff(ptr)[ctx.corpus.term_ids[0]] if zzp.dtype == np.uint16 else -1
        return {name: zzp}
    return (V.relation(name, "topics in [0, topics), every token on a path of its word (uint16: "
                       "paths as ranks among its word's)", check, damage, optional=optional),)


SPEC = V.Spec(
    model=(
        *F.doc_len(),
        V.array("syn_ptr", ("synsets+1",), np.int64),
        V.array("syn_terms", ("synset_leaves",), np.int64),
        T.pointer("syn_ptr", "syn_terms"), V.index("syn_terms", "terms"),
        T.sorted_within("syn_terms", "syn_ptr"),
        V.relation("syn_terms", "synsets of >= 2 terms, none twice", _synsets, _synset_twice),
        *F.csr("ne", "nodes", "topic", "topics"),
        *F.csr("dk", "documents", "topic", "topics", sums=True),
        T.totals("dk_count", "dk_ptr", "doc_len"),
        V.relation("ne_count", "a synset node counts the tokens of its leaves", _flow, _flow_damage),
        V.relation("ne_count", "edges out of the root count the documents' tokens", _root_totals,
                   _root_damage),
        V.array("alpha_samples", ("samples", "topics"), np.float64), V.prior("alpha_samples"),
    ),
    checkpoint=F.state_checks("zzp", ("2*tokens",), (np.int32, np.int64, np.uint16), _paths, "alpha",
                              ("topics",), ("shards",)),
    dims=F.no_dims, priors=(("alpha", True), ("beta_root", False), ("beta_synset", False)))
