"""gLDA's sweeps (Bart 2011; the per-document pass is :func:`models.glda.kernels.sweep_doc`):
every chain in document order, or one chain's document shards side by side (AD-LDA), and the
merge of the shards' changes."""
import math
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from .kernels import ChainState, DocScratch, GroupLayout, SparseState, sweep_doc
from .sparse_kernels import LINEAR_MAX, long_cache, smooth_sums


class Step(NamedTuple):
    """What every document's pass takes besides the state: the prior, the doc factor's code
    (:mod:`models.glda.kernels`), whether tokens change groups, the longest group of the
    linear-time path."""

    beta: float
    unit: int
    resample_groups: bool
    n_max: int


@njit(cache=True)
def unit_scratch(n, K, V, max_len, max_groups):
    """The scratch of ``n`` sampling units (chains, or one chain's shards), kept from one part of
    a unit's sweep to the next: (K,) int64 and float64 rows, (max_len,) and (max_groups + 1,)
    int64 rows, topic bitsets, the sums S, D and 1 / R_k, and the group's term counts."""
    nb = (K + 63) >> 6
    return (np.zeros((n, 7, K), np.int64), np.zeros((n, 6, K)), np.zeros((n, 8, max_len), np.int64),
            np.zeros((n, 2, max_groups + 1), np.int64), np.zeros((n, 3, nb), np.uint64),
            np.zeros((n, 2, LINEAR_MAX + 1)), np.zeros((n, K, LINEAR_MAX + 1)), np.zeros((n, V), np.int64))


@njit(cache=True)
def sweep_docs(d0, d1, fresh, lay, chain, wbits, step, rng, sc, u):
    """Docs [d0, d1) of one unit in order with unit ``u``'s scratch ``sc`` (:func:`unit_scratch`);
    ``fresh``: the unit's first part of a sweep, whose smoothing sums are built from the
    counts (so they are a function of the state: a resumed chain rebuilds the same ones)."""
    beta, unit, resample_groups, n_max = step
    ik, fk, il, ig, bits, sums, inv_r, seen = sc
    if fresh:
        smooth_sums(chain.alpha, unit, chain.n_k, lay.n_terms * beta, n_max, sums[u, 0], inv_r[u])
    lc = long_cache(fk[u, 5], ik[u, 6], bits[u, 2], fresh)
    sp = SparseState(wbits, bits[u, 0], bits[u, 1], sums[u, 0], sums[u, 1], inv_r[u],
                     fk[u, 3], n_max, ik[u, 3], il[u, 3], il[u, 4], ik[u, 4], fk[u, 4],
                     ig[u, 1], ik[u, 5], il[u, 5], il[u, 6], il[u, 7], lc)
    scratch = DocScratch(ik[u, 0], ik[u, 1], ik[u, 2], fk[u, :3], ig[u, 0], il[u, 0],
                         il[u, 1], il[u, 2], seen[u])
    for d in range(d0, d1):
        sweep_doc(d, lay, chain, beta, unit, resample_groups, rng, scratch, sp)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def sweep_chains(doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, g, zg, n_kw, n_k, alpha,
                 beta, unit, resample_groups, rng, max_groups, max_len, n_threads, wbits, n_terms):
    """One sweep of every chain, each sequential in doc order on its own rng stream, so the
    result never depends on the thread count. With fewer threads T (``n_threads``) than chains
    C, a chain's sweep is cut into P parts of about equal tokens, run in C P / T rounds of T
    parts of distinct chains, a chain's parts in order: every thread stays busy (3 chains on 2
    threads: 1.5 chain sweeps of wall time, not 2). ``wbits``, the words' topic bitsets
    (:func:`word_bits` of the counts), is kept up to date with the counts, exactly, so the
    caller keeps it from one sweep to the next. ``n_terms``: the model's V (n_kw's rows are
    those of the terms ``term_ids`` numbers, which may be fewer)."""
    C, K = n_k.shape
    V = n_kw.shape[1]
    n_max = min(max_len, LINEAR_MAX)
    T = max(1, min(n_threads, C))
    P = T // math.gcd(C, T)
    width = T if P > 1 else C  # parts per round
    bounds = np.searchsorted(doc_ptr, np.arange(P + 1) * doc_ptr[-1] // P)
    bounds[P] = len(doc_ptr) - 1
    sc = unit_scratch(C, K, V, max_len, max_groups)
    lay = GroupLayout(doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, n_terms)
    step = Step(beta, unit, resample_groups, n_max)
    for r in range(C * P // width):
        for s in prange(width):
            u = r * width + s
            p, c = u // C, u % C
            chain = ChainState(g[c], zg[c], n_kw[c], n_k[c], alpha[c])
            sweep_docs(bounds[p], bounds[p + 1], p == 0, lay, chain, wbits[c], step, rng[c], sc, c)


@njit(cache=True, parallel=True)
def sweep_shards(doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, shard_doc, g, zg, n_kw, n_k, alpha,
                 beta, unit, resample_groups, rng, max_groups, max_len, wbits, n_terms):
    """One sweep of one chain cut into document shards (AD-LDA, Newman et al. 2009): shard s
    samples docs [shard_doc[s], shard_doc[s + 1]) in order on its stream ``rng[s]`` against
    ``n_kw[s]``, ``n_k[s]`` and ``wbits[s]``, copies of the chain's counts (and their bitsets)
    at the sweep's start that only its own changes reach; the caller merges them
    (:func:`merge_shards`). Shards run side by side; each one's draws depend on its documents
    and the start alone, never on the threads."""
    S, K = n_k.shape
    V = n_kw.shape[1]
    n_max = min(max_len, LINEAR_MAX)
    sc = unit_scratch(S, K, V, max_len, max_groups)
    lay = GroupLayout(doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, n_terms)
    step = Step(beta, unit, resample_groups, n_max)
    for s in prange(S):
        chain = ChainState(g, zg, n_kw[s], n_k[s], alpha)
        sweep_docs(shard_doc[s], shard_doc[s + 1], True, lay, chain, wbits[s], step, rng[s], sc, s)


@njit(cache=True, parallel=True)
def add_shard_changes(n_kw, n_k, base_kw, base_k, out_kw, out_k):
    """out += every shard copy's change (``n_kw[s] - base_kw``, rows in parallel); ``out`` may be
    the base itself (an element's changes are summed before it is written)."""
    S, V, K = n_kw.shape
    for y in prange(V):
        for k in range(K):
            t = 0
            for s in range(S):
                t += n_kw[s, y, k] - base_kw[y, k]
            out_kw[y, k] += t
    for k in range(K):
        t = 0
        for s in range(S):
            t += n_k[s, k] - base_k[k]
        out_k[k] += t


@njit(cache=True)
def take_back_changes(term_ids, before, after, work, total):
    """A shard's changes of one chain's counts, read off its tokens' topics ``before`` and
    ``after`` its sweep (-1: no topic): added to ``total`` and taken out of ``work`` (the counts
    the sweep changed, back to where it started). O(tokens), no temporaries."""
    for i in range(len(term_ids)):
        a, b = after[i], before[i]
        if a != b:
            w = term_ids[i]
            if a >= 0:
                total[w, a] += 1
                work[w, a] -= 1
            if b >= 0:
                total[w, b] -= 1
                work[w, b] += 1
