"""Numba kernels for the Topical Collocation Model (arrays in, arrays out; no I/O).

Model (Zhao et al. 2015, sec. 3): every topic k is a Dirichlet process DP(alpha0, P0) over
collocations (runs of >= 1 adjacent words),

    P0(c = w_1..w_M) = p# (1 - p#)^(M-1) prod_j 1/V  / Z,   Z = 1 - (1 - p#)^max_len

(the geometric length is truncated at ``max_len``, hence Z); theta_d ~ Dir(alpha); every
collocation of a document draws a topic from theta_d and then the collocation from the topic's
restaurant. theta and the DPs are integrated out, so the predictive probability of collocation c
in restaurant k is the Polya urn ``(n_kc + alpha0 P0(c)) / (n_k + alpha0)``.

State: one boundary variable per token, ``b[i]``: -1 means that token i and token i+1 are in
the same collocation (the paper's b = 0); ``k >= 0`` means that a collocation ends at token i and
has topic k (the paper's b = k + 1). ``split[i] = 1`` forces a boundary after token i (stopword,
punctuation or document end): a collocation never spans a split.

Point-wise Gibbs step at a free position j (eq. 1-6 of the paper). Let L = [s, j] and
R = [j + 1, e] be the collocations on either side of j if it were a boundary (s: one past the
previous boundary, e: the next boundary), LR = [s, e] their concatenation and kr = b[e] the
topic of the collocation that ends at e. With L, R (or LR) removed from all counts, N_d the
number of the document's remaining collocations and a0P0(c) = alpha0 P0(c):

    p(b_j = none) ~ (n_d,kr + alpha) (n_kr,LR + a0P0(LR)) / (n_kr + alpha0) * (N_d + 1 + K alpha)
    p(b_j = k)    ~ (n_dk + alpha) (n_k,L + a0P0(L)) / (n_k + alpha0) * R_k
    R_k = (n_d,kr + [k = kr] + alpha) (n_kr,R + [k = kr][L = R] + a0P0(R)) / (n_kr + [k = kr] + alpha0)

Both are multiplied by (N_d + K alpha)(N_d + 1 + K alpha): a split adds one collocation to the
document, so the Dirichlet-multinomial normalisers do not cancel as they do in LDA. At a forced
boundary only the topic of L is drawn: p(k) ~ (n_dk + alpha)(n_k,L + a0P0(L)) / (n_k + alpha0).

Samplers
--------
"exact": the K + 1 weights above in a dense loop, O(K) per position.
"sparse": the bucket decomposition of eq. 8-12 (SparseLDA-style, Yao et al. 2009). For k != kr,
R_k = R is a constant, and

    (n_dk + alpha)(n_k,L + a0P0(L)) / (n_k + alpha0)
        = alpha a0P0(L) / (n_k + alpha0)          smoothing bucket (F+ tree over 1/(n_k + alpha0))
        + a0P0(L) n_dk / (n_k + alpha0)           document bucket (topics of doc d)
        + (n_dk + alpha) n_k,L / (n_k + alpha0)   collocation bucket (topics of L's restaurant entries)

Topic kr is taken out of the three buckets (its tree leaf is set to 0 while sampling) and gets a
bucket of its own with its exact weight, as does "none". So the sparse sampler draws from exactly
the same conditional as the dense one (no approximation), in O(nnz_d + nnz_L + log K).

Restaurants (hash tables in flat arrays) and the documents' topic lists: see
:mod:`models.tcm.restaurants`, rebuilt from b in :mod:`models.tcm.build_kernels`;
log-likelihood, alpha0 and scoring: :mod:`models.tcm.score_kernels`; the steps of the sweep at
one position: :mod:`models.tcm.steps`.

Parallelism (AD-LDA style, Newman et al. 2009; the paper's sec. 4.3): documents are split into
FIXED shards; every shard samples against its own copy of the restaurants and n_k, made from
the global tables at the start of the sweep (the global slot tables, shared, are only read);
after the sweep the global tables are rebuilt from b (deterministically, in document order).
Each (chain, shard) has its own rng stream, so results never depend on the number of threads.
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.borrow import borrow
from ..common.kernels.ftree import tree_build
from .restaurants import (DocTopics, Restaurants, entries_copy, entries_reserve, pow2_at_least,
                          prefetch_entries, prefetch_lr, types_copy, types_reserve)
from .steps import Tally, add, draw_dense, draw_sparse, remove, span, weights


class Text(NamedTuple):
    """The corpus as the sampler reads it."""

    doc_ptr: np.ndarray  # int64 (n_docs + 1,)
    term_ids: np.ndarray  # int32 (n_tokens,)
    split: np.ndarray  # uint8 (n_tokens,): 1 = no collocation continues past this token


class Prior(NamedTuple):
    """Hyperparameters of one chain's sweep."""

    alpha: float
    alpha0: float
    p0_len: np.ndarray  # float64 (max_len + 1,): P0 of a collocation by length
    max_len: int


class Local(NamedTuple):
    """A shard's restaurants (the arrays of ``Restaurants``; the shard carries its numbers of
    types and entries in :class:`~models.tcm.steps.Tally`): private copies, but for the global
    slot tables, read by every shard, whose own slot tables hold only the types and entries it
    adds (see :func:`~models.tcm.restaurants.type_lookup`)."""

    g_ty_slot: np.ndarray
    g_en_slot: np.ndarray
    ty_slot: np.ndarray
    ty_hash: np.ndarray
    ty_len: np.ndarray
    ty_pos: np.ndarray
    ty_head: np.ndarray
    en_slot: np.ndarray
    en_type: np.ndarray
    en_topic: np.ndarray
    en_count: np.ndarray
    en_next: np.ndarray
    n_k: np.ndarray
    col_entry: np.ndarray


class Buffers(NamedTuple):
    """A shard's scratch, K = number of topics."""

    ndk: np.ndarray  # int64 (K,): the current document's topic counts, zero between documents
    crow: np.ndarray  # int64 (K,): n_k,L by topic (dense sampler), zero between positions
    pbuf: np.ndarray  # float64 (K,): cumulative weights (dense) or doc-bucket masses (sparse)
    cbuf: np.ndarray  # float64 (K,): collocation-bucket masses
    ctop: np.ndarray  # int64 (K,): topics of L's entries, in topic order
    cent: np.ndarray  # int64 (K,): their entry ids
    tree: np.ndarray  # float64 (2P,): F+ tree over 1 / (n_k + alpha0), P = 2^ceil(log2 K)


class DocRow(NamedTuple):
    """The current document's topic counts: dense, and as its sorted (topic, count) list
    (views of the document's part of DocTopics; ``Tally.nnz`` entries used)."""

    ndk: np.ndarray
    topic: np.ndarray
    count: np.ndarray


class Written(NamedTuple):
    """What a sweep writes beside the chain's state, each empty when not wanted: ``record``,
    the conditionals drawn from (tests); ``code``, the types of the collocations (the merge)."""

    record: np.ndarray
    code: np.ndarray


# Tokens between the prefetch of LR's type slot and its lookup.
PREFETCH_AHEAD = 3


def sweep(shard_doc, text, b, docs, tables, prior, sparse, rng, record, code=None):
    """One Gibbs sweep of one chain: every shard in parallel against its copy of the restaurants.

    text : Text; docs : DocTopics; tables : Restaurants (read only but for ``code``);
    prior : Prior.
    rng : ndarray of shape (n_shards, 4), uint64; one stream per shard.
    ``record``: if it has rows, the normalised conditional (column 0: "none", 1 + k: topic k)
    the sampler drew from at token i is written to ``record[i]``, for tests.
    ``code``: int32 (n_tokens,) or None. If given, at every boundary i that the sweep leaves,
    the type of the collocation ending at i among the ``tables``' types, or a number from
    ``tables.n_types`` up for a type they lack, for
    :func:`~models.tcm.build_kernels.build_tables_coded`. It may be ``tables.col_entry`` itself:
    the sweep reads an entry there only ahead of the position it writes.
    Changes in place: b, docs, rng, record, code. The caller rebuilds the tables from b afterwards.

    Plain Python: parallel kernels take flat arrays (see models/common/kernels/__init__.py).
    """
    if code is None:
        code = np.empty(0, dtype=np.int32)
    _sweep(shard_doc, *text, b, *docs, *tables, *prior, sparse, rng, record, code)


@njit(cache=True, parallel=True)
def _sweep(shard_doc, doc_ptr, term_ids, split, b, cap_ptr, dt_topic, dt_count, dt_nnz,
           ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot, en_type, en_topic,
           en_count, en_next, n_entries, n_k, col_entry, alpha, alpha0, p0_len, max_len, sparse, rng,
           record, code):
    """The fields of ``sweep``'s NamedTuples, flat: a parallel kernel cannot take tuples
    (models/common/kernels/__init__.py); they are built inside the prange body."""
    S = len(shard_doc) - 1
    for sh in prange(S):
        _sweep_shard(shard_doc[sh], shard_doc[sh + 1], Text(doc_ptr, term_ids, split), b,
                     DocTopics(cap_ptr, dt_topic, dt_count, dt_nnz),
                     Restaurants(ty_slot, ty_hash, ty_len, ty_pos, ty_head, n_types, en_slot,
                                 en_type, en_topic, en_count, en_next, n_entries, n_k, col_entry),
                     Prior(alpha, alpha0, p0_len, max_len), sparse, rng[sh], record, code)


# ---------------------------------------------------------------------------------------------
# One shard of one sweep


@njit(cache=True)
def _sweep_shard(d0, d1, text, b, docs, tables, prior, sparse, rng, record, code):
    """Resample b at every position of docs d0:d1 once, in document order (``code``: see
    :func:`sweep`; empty, none is written).

    The global ``tables`` are only read: the shard works on copies of their arrays, and reads
    their slot tables beside slot tables of its own (grown on demand) for the types and entries
    it adds.
    Changes in place: b[doc_ptr[d0]:doc_ptr[d1]], docs of d0:d1, rng, record, code.
    """
    doc_ptr = text.doc_ptr
    K = len(tables.n_k)
    n_types0 = n_types = tables.n_types
    n_entries0 = n_entries = tables.n_entries
    # The copies have room for all a shard can add, 2 types and 2 entries a token: they never
    # grow (copying them again), and the pages of the room never written take no memory. The
    # shard's own slot tables start small and grow on demand: every key the global tables
    # lack is looked up there too, so they had better stay in the caches when little is added.
    room = 2 * (doc_ptr[d1] - doc_ptr[d0])
    ty_slot, ty_hash, ty_len, ty_pos, ty_head = types_copy(
        tables.ty_hash, tables.ty_len, tables.ty_pos, tables.ty_head, n_types, room, 64)
    en_slot, en_type, en_topic, en_count, en_next = entries_copy(
        tables.en_type, tables.en_topic, tables.en_count, tables.en_next, n_entries, room, 64)
    n_k = tables.n_k.copy()
    P = pow2_at_least(K)
    buf = Buffers(np.zeros(K, dtype=np.int64), np.zeros(K, dtype=np.int64), np.empty(K),
                  np.empty(K), np.empty(K, dtype=np.int64), np.empty(K, dtype=np.int64),
                  np.zeros(2 * P))
    if sparse:
        for k in range(K):
            buf.tree[P + k] = 1.0 / (n_k[k] + prior.alpha0)
        tree_build(buf.tree, P)
    out = Written(record, code)
    for d in range(d0, d1):
        a = doc_ptr[d]
        z = doc_ptr[d + 1]
        if a == z:
            continue
        # slots for up to 2 new types and 2 new entries a token, reserved once for the
        # document: _sweep_doc works on borrowed views, which must not be grown (reallocated)
        need = 2 * (z - a)
        if 4 * (n_types - n_types0 + need) > len(ty_slot):
            ty_slot = types_reserve(ty_slot, ty_hash, ty_len, n_types0, n_types, need)
        if 4 * (n_entries - n_entries0 + need) > len(en_slot):
            en_slot = entries_reserve(en_slot, en_type, en_topic, n_entries0, n_entries, need)
        loc = Local(tables.ty_slot, tables.en_slot, ty_slot, ty_hash, ty_len, ty_pos, ty_head,
                    en_slot, en_type, en_topic, en_count, en_next, n_k, tables.col_entry)
        n_types, n_entries = _sweep_doc(d, text, b, docs, loc, buf, n_types, n_entries, prior,
                                        sparse, rng, out)


@njit(cache=True)
def _sweep_doc(d, text, b, docs, loc, buf, n_types, n_entries, prior, sparse, rng, out):
    """Resample b at every position of doc d once, left to right (``loc`` has room for 2 new
    types and 2 new entries a token); returns the shard's new numbers of types and entries.
    ``out``: Written; ``out.code`` (if not empty) gets the collocation's type at each boundary (a
    type the shard added has a number from the global tables' count up).

    Changes in place: b of doc d, its doc list, loc, buf, rng, out.
    """
    # borrowed here, not by the caller, so the steps' bindings cost no reference counting
    B = borrow
    text, b, docs, loc, buf, prior, rng = (B(text), B(b), B(docs), B(loc), B(buf), B(prior),
                                           B(rng))
    record, code = B(out.record), B(out.code)
    coded = len(code) > 0
    doc_ptr, term_ids, split = text.doc_ptr, text.term_ids, text.split
    a = doc_ptr[d]
    z = doc_ptr[d + 1]
    base = docs.cap_ptr[d]
    end = docs.cap_ptr[d + 1]
    ndk = buf.ndk
    doc = DocRow(ndk, docs.topic[base:end], docs.count[base:end])
    nnz = np.int64(docs.nnz[d])
    N_d = 0
    for jj in range(nnz):
        ndk[doc.topic[jj]] = doc.count[jj]
        N_d += doc.count[jj]
    tally = Tally(n_types, n_entries, nnz, N_d)
    # the arrays the prefetches read, bound once outside the position loop (LR's type is
    # looked up in the global slot table first)
    col_entry, ty_slot, ty_head = loc.col_entry, loc.g_ty_slot, loc.ty_head
    en_type, en_count, en_topic, en_next = loc.en_type, loc.en_count, loc.en_topic, loc.en_next
    s = a
    eC = -1
    for j in range(a, z):
        if sparse:
            prefetch_entries(col_entry, en_type, en_count, en_topic, en_next, ty_head, j, z)
        prefetch_lr(b, split, term_ids, ty_slot, j + PREFETCH_AHEAD, a, z, prior.max_len)
        sp = span(b, split, s, j)
        # The collocation around j (L if j is a boundary, else LR) is known without a lookup:
        # kept from j - 1 (eC), or unchanged since the tables were built (col_entry at its
        # end). So is R when j is a boundary: nothing from j on has been resampled yet.
        if eC < 0:
            eC = col_entry[j if sp.k_old >= 0 else sp.e]
        f, tally = remove(sp, eC, term_ids, loc, buf, doc, tally, sparse, prior)
        wt, f = weights(sp, f, term_ids, loc, ndk, tally.N_d, sparse, prior)
        if sparse:
            k_new, n_c, f = draw_sparse(sp, f, wt, loc, buf, doc, tally.nnz, prior, rng, record)
        else:
            k_new = draw_dense(sp, f, wt, loc, buf, ndk, prior, rng, record)
            n_c = 0
        tally, eC, s, tL = add(sp, k_new, f, n_c, term_ids, b, loc, buf, doc, tally, sparse,
                               prior.alpha0)
        # the collocation ending at j is final: what is left of j is resampled already
        if coded and tL >= 0:
            code[j] = tL
    docs.nnz[d] = tally.nnz
    for jj in range(tally.nnz):
        ndk[doc.topic[jj]] = 0
    return tally.n_types, tally.n_entries
