"""Kernels of tree-based LDA (Hu & Boyd-Graber 2012): the joint (topic, path) conditional of
eq. 1 by enumeration (NAIVE) and by the s / r / q buckets of eq. 5 over sparse topic lists (FAST),
the refined bucket (FAST-RB) and the sorted lists (-SD, -SW, -SDW), in a sequential sweep over one
chain. The sparse machinery lives in :mod:`models.tree_lda.sparse_kernels`.

Counts of one chain: ``n_e[j, k]`` tokens of topic k through the edge into node j, ``n_i[i, k]``
tokens of topic k leaving internal node i, ``n_dk``. The normaliser N_{k,p} is cached as
reciprocals ``inv[i, k] = 1 / (beta_sum_i + n_i[i, k])`` per internal node: changing a path's
counts changes the reciprocals of its own nodes only, i.e. exactly its cousin set's normalisers.

Refined bucket: Algorithm 1 as printed rescales a draw that lands in s' but past s into the
r + q range, which makes the front of that range too likely; here such a draw is redrawn from
the exact s + r + q instead, which keeps the sampler exact (tested against NAIVE). Beyond
Algorithm 1, the refined samplers bound a synset path's r the same way (r's cached root sum times
the path's prod 1/beta_sum), which spares a pass over the document's topics for every token of a
word in a synset.

The kernels take their arrays grouped: the tree as :class:`models.tree_lda.state.TreeArrays`,
the chain as :class:`models.tree_lda.state.Chain`, the sweep order as
:class:`models.tree_lda.state.Runs`; :func:`sweep_runs` groups them.
"""
from typing import NamedTuple

import numpy as np
from numba import typeof
from numba.core import types

from ..common.corpus import read_only
from ..common.jit import njit
from ..common.kernels.rng import uniform
from .sparse_kernels import root_of, sparse_sweep
from .state import Chain, Runs, TreeArrays
from .tables import fill_path_table, fill_word_table

NAIVE, FAST, FAST_RB, FAST_RB_SD, FAST_RB_SW, FAST_RB_SDW = range(6)
SAMPLERS = ("naive", "fast", "fast-rb", "fast-rb-sd", "fast-rb-sw", "fast-rb-sdw")


@njit(cache=True)
def naive_masses(w, d, tree, chain, out):
    """out[k, p - ptr[w]] = (alpha_k + n_dk) prod_e (beta_e + n_ek) / (beta_sum + n_ik)."""
    ptr, path_edges, path_len, parent = tree.ptr, tree.path_edges, tree.path_len, tree.parent
    beta, beta_sum = tree.beta, tree.beta_sum
    n_e, n_i, n_dk, alpha = chain.n_e, chain.n_i, chain.n_dk, chain.alpha
    K = n_dk.shape[1]
    for k in range(K):
        for p in range(ptr[w], ptr[w + 1]):
            m = alpha[k] + n_dk[d, k]
            for l in range(path_len[p]):
                j = path_edges[p, l]
                i = parent[j]
                m *= (beta[j] + n_e[j, k]) / (beta_sum[i] + n_i[i, k])
            out[k, p - ptr[w]] = m


@njit(cache=True, inline="always")
def move_token(d, k, p, sign, tree, chain):
    """Add (sign 1) or remove (-1) a token of doc d on topic k and path p, refreshing the
    reciprocals of the path's nodes (the cousin set). NAIVE's; the sparse sweep has its own
    (:func:`models.tree_lda.sparse_kernels.move_below`), where the root edge's count lives in
    its list."""
    path_edges, path_len, parent = tree.path_edges, tree.path_len, tree.parent
    beta_sum = tree.beta_sum
    n_e, n_i, n_dk, inv = chain.n_e, chain.n_i, chain.n_dk, chain.inv
    n_dk[d, k] += sign
    for l in range(path_len[p]):
        j = path_edges[p, l]
        i = parent[j]
        n_e[j, k] += sign
        n_i[i, k] += sign
        inv[i, k] = 1.0 / (beta_sum[i] + n_i[i, k])


@njit(cache=True)
def _pick(buf, u):
    """Flat index of the cell of ``buf`` (K, P) where the running sum passes u (topic-major)."""
    K, P = buf.shape
    last = 0
    for k in range(K):
        for c in range(P):
            x = buf[k, c]
            if x > 0.0:
                last = k * P + c
                if u < x:
                    return last
                u -= x
    return last  # rounding at the end


@njit(cache=True, nogil=True)
def naive_sweep(runs, tree, chain, rng):
    """NAIVE: every (topic, path) of the word enumerated, eq. 1 as written, over ``runs``
    (:class:`models.tree_lda.state.Runs`)."""
    run_ptr, run_doc, term_ids = runs.run_ptr, runs.run_doc, runs.term_ids
    z, zp, ptr = chain.z, chain.zp, tree.ptr
    K = chain.n_dk.shape[1]
    maxp = 1
    for w in range(len(ptr) - 1):
        maxp = max(maxp, ptr[w + 1] - ptr[w])
    buf = np.empty(K * maxp)
    for r in range(len(run_doc)):
        d = run_doc[r]
        for t in range(run_ptr[r], run_ptr[r + 1]):
            w = term_ids[t]
            move_token(d, z[t], zp[t], -1, tree, chain)
            np_w = ptr[w + 1] - ptr[w]
            m = buf[:K * np_w].reshape(K, np_w)
            naive_masses(w, d, tree, chain, m)
            x = _pick(m, uniform(rng) * m.sum())
            z[t] = x // np_w
            zp[t] = ptr[w] + x % np_w
            move_token(d, z[t], zp[t], 1, tree, chain)


# The sparse samplers' flags (refined bucket, sorted doc list, sorted word lists) per variant.
_FLAGS = {FAST: (False, False, False), FAST_RB: (True, False, False),
          FAST_RB_SD: (True, True, False), FAST_RB_SW: (True, False, True),
          FAST_RB_SDW: (True, True, True)}


def sweep(variant, doc_ptr, term_ids, z, zp, ptr, path_edges, path_len, parent, beta, beta_sum,
          path_prior, s_bound, n_e, n_i, n_dk, inv, alpha, rng, work=None):
    """One sequential sweep in document order: every token's (topic z, path zp) redrawn by
    sampler ``variant`` (one of NAIVE .. FAST_RB_SDW); counts and ``inv`` kept in place.
    ``s_bound``: s'_w of eq. 6 (:func:`path_bound`), used by the FAST-RB variants; ``work``:
    the chain's :class:`SweepWork` (None: made for this sweep)."""
    sweep_runs(variant, doc_ptr, np.arange(len(doc_ptr) - 1), root_of(parent),
               term_ids, z, zp, ptr, path_edges, path_len, parent, beta, beta_sum, path_prior,
               s_bound, n_e, n_i, n_dk, inv, alpha, rng, work=work)


class SweepWork(NamedTuple):
    """What the sparse sweeps of one chain keep between calls: the word and path tables
    (:func:`models.tree_lda.tables.fill_word_table` with the chain's s_bound,
    ``fill_path_table``, which depends on the tree only) and the root edges' lists (``pairs``,
    see :func:`models.tree_lda.tables.list_views`), which carry a sweep cut into pieces from one
    piece to the next."""

    wint: np.ndarray
    pint: np.ndarray
    pairs: np.ndarray


def _aligned(shape, dtype, align=64):
    """An empty array whose data starts on an ``align``-byte boundary (rows of a table whose
    row is a cache line then sit on one line each)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    buf = np.empty(n + align, np.uint8)
    off = (-buf.ctypes.data) % align
    return buf[off:off + n].view(dtype).reshape(shape)


def sweep_work(ptr, path_edges, path_len, parent, beta, beta_sum, path_prior, s_bound, n_topics,
               pint=None):
    """A :class:`SweepWork` for one chain (``pint``: another chain's path table, which depends
    on the tree only). The lists' rows are allocated, not filled: a sweep touches the rows of
    the edges out of the root only."""
    wint = _aligned((len(ptr) - 1, 4), np.int64)
    fill_word_table(ptr, np.asarray(s_bound, dtype=np.float64), wint)
    if pint is None:
        pint = _aligned((len(path_len), 8), np.int64)
        fill_path_table(path_edges, path_len, parent, beta, beta_sum, path_prior, pint)
    # a row per node (header and K entries), padded to whole cache lines
    width = -(-(n_topics + 1) // 8) * 8
    return SweepWork(wint, pint, _aligned((len(parent), width, 2), np.int32))


def sweep_runs(variant, run_ptr, run_doc, root, term_ids, z, zp, ptr, path_edges, path_len, parent,
               beta, beta_sum, path_prior, s_bound, n_e, n_i, n_dk, inv, alpha, rng, work=None,
               begin=True, end=True):
    """:func:`sweep` over runs: tokens ``run_ptr[r]:run_ptr[r + 1]`` of document ``run_doc[r]``,
    with ``root`` the row of ``n_i`` / ``inv`` that the root's edges (``parent[j] == root``) count
    in (a shard's private root row in a sharded sweep).
    ``work``: the chain's :class:`SweepWork` (None: made for this call). A sweep may be cut at a
    run boundary into calls that share ``work``, the first with ``begin`` and the last with
    ``end`` only: the pieces draw exactly what one call draws.
    A Python dispatcher: the sparse kernel is specialised on its flags (``literally``), which
    numba resolves when called from Python and fails to type when called from jitted code.
    Both kernels release the GIL, so chains and shards can sweep on threads.
    The runs are read-only views whatever the caller's arrays: one compiled sweep per sampler."""
    runs = Runs(*(read_only(a) for a in (run_ptr, run_doc, term_ids)))
    tree = TreeArrays(ptr, path_edges, path_len, parent, root, beta, beta_sum)
    chain = Chain(z, zp, n_e, n_i, n_dk, inv, alpha)
    if variant == NAIVE:
        naive_sweep(runs, tree, chain, rng)
    elif variant in _FLAGS:
        if work is None:
            # the tables from the tree's own parents (a shard's parent array points its root
            # edges elsewhere; the tables read only the nodes below them)
            work = sweep_work(ptr, path_edges, path_len, parent, beta, beta_sum, path_prior,
                              s_bound, n_dk.shape[1])
        _sparse(*_FLAGS[variant], runs, tree, chain, work, bool(begin), bool(end), rng)
    else:
        raise ValueError(f"unknown sampler variant {variant!r}")


def _sparse(rb, sd, sw, *args):
    """:func:`sparse_sweep` specialised on its flags, called through its compiled overload once
    there is one. The dispatcher cannot match a plain call to a literal-typed signature, so each
    plain call would rerun type inference to find it, S * S times a sweep in a sharded sweep."""
    if not hasattr(sparse_sweep, "overloads"):  # NUMBA_DISABLE_JIT: a plain function
        return sparse_sweep(rb, sd, sw, *args)
    key = tuple(types.literal(f) for f in (rb, sd, sw)) + tuple(typeof(a) for a in args)
    cres = sparse_sweep.overloads.get(key)
    if cres is None:  # compiles or loads the specialisation, and sweeps
        sparse_sweep(rb, sd, sw, *args)
    else:
        cres.entry_point(rb, sd, sw, *args)


def path_bound(tree, alpha):
    """s'_w of eq. 6 for every word: sum over w's paths of S_p / prod beta_sum, times sum(alpha).
    S_p is divided by the edges' parents' beta_sum in path order (as the kernels do)."""
    b = tree.path_prior()
    for l in range(tree.path_edges.shape[1]):
        e = tree.path_edges[:, l]
        on = l < tree.path_len
        b[on] /= tree.beta_sum[tree.parent[e[on]]]
    return np.bincount(tree.path_word, weights=b, minlength=tree.n_terms) * float(np.sum(alpha))
