"""Fixed shards of tree-LDA's sweep (the partition scheme of LDA and PAM, on a tree).

Documents are cut into S shards and words into S groups; a sweep takes S sub-steps, and in
sub-step j shard s resamples its tokens of group (s + j) mod S, the S shards in parallel. Two
shards never touch the same count in one sub-step because a group owns whole synset components:
words that share a synset node (directly or through a chain of synsets) fall in one group, so
every edge below the root, every synset node's total and every edge out of the root belongs to
one group. The one shared count is the root's (every token passes through it, like LDA's n_k):
each shard counts in a private copy of the root's row, and the copies are merged after every
sub-step. ``n_shards=1`` is the exact sequential sampler; more shards are the usual approximate
parallel Gibbs sampler, with results that depend on the seed and S, never on the thread count.

Threads: a sub-step's (chain, shard) tasks are laid end to end, in tokens, over the threads
(McNaughton's wrap-around rule), so that 3 chains on 2 threads take 1.5 chain sweeps of wall
time, not 2. A task that spans two threads is cut at a document boundary: the next thread
sweeps its first part at the start of the sub-step and this thread its second part at the end,
after the first (it waits for it). The two parts share the chain's lists and random stream, so
they draw exactly what the task draws in one piece: the thread count changes nothing.
"""
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from .kernels import NAIVE, sweep_runs, sweep_work
from .sparse_kernels import root_of
from ..common.gibbs import block_run_ptrs, key_runs, shard_docs
from .tree import merge_synsets


class TreeShards(NamedTuple):
    """The sweep order of S shards. ``order``: tokens in sweep order (corpus positions; None when
    S = 1, the corpus order); ``term_ids`` in that order; runs of one document and block
    (``run_ptr``, ``run_doc``), block (s, g) from run ``block_ptr[s, g]``; ``parents[s, g]``: the
    tree's parent array for shard s in group g's sub-step, where the root edges of group g point
    to the private root row ``n_nodes + s`` and other groups' root edges to -1 (never used);
    ``parent``: the tree's own parent array (what one shard sweeps with, in place)."""

    n_shards: int
    root: int
    order: np.ndarray
    term_ids: np.ndarray
    run_ptr: np.ndarray
    run_doc: np.ndarray
    block_ptr: np.ndarray
    parents: np.ndarray
    word_group: np.ndarray
    parent: np.ndarray


def word_groups(tree, counts, n_groups):
    """Group of every word: synset components (the tree's synsets merged where they share a
    word, as ``merge=True`` builds them), largest token count first (ties by smallest word),
    each to the least loaded group (ties to the lowest index)."""
    V = tree.n_terms
    comp = np.arange(V)  # a component is named by its smallest word
    for words in merge_synsets(tree.synsets):
        comp[list(words)] = words[0]
    size = np.bincount(comp, weights=counts, minlength=V)
    heads = np.flatnonzero(comp == np.arange(V))
    load = np.zeros(n_groups)
    group_of = np.empty(V, dtype=np.int64)
    for h in heads[np.lexsort((heads, -size[heads]))]:
        g = int(np.argmin(load))
        group_of[h] = g
        load[g] += size[h]
    return group_of[comp]


def node_groups(tree, word_group):
    """The term group of every node's edge and rows: its paths' word's (-1: the root, and nodes
    on no path)."""
    group = np.full(tree.n_nodes, -1, dtype=np.int64)
    for level in range(tree.path_edges.shape[1]):
        e = tree.path_edges[:, level]
        m = e >= 0
        group[e[m]] = word_group[tree.path_word[m]]
    return group


def shard_parents(parent, root, node_group, shards, n_shards):
    """The parent array of shard s in group g's sub-step, for every s in ``shards`` and every g:
    the root edges of group g point to the private root row ``n_nodes + s``, other groups'
    root edges to -1 (never used). Shape (len(shards), S, n_nodes)."""
    M, S = len(parent), n_shards
    out = np.empty((len(shards), S, M), dtype=np.int64)
    out_of_root = parent == root
    for i, s in enumerate(shards):
        for g in range(S):
            p = parent.copy()
            p[out_of_root] = np.where(node_group[out_of_root] == g, M + s, -1)
            out[i, g] = p
    return out


def sweep_order(doc_ptr, term_ids, word_group, shard_doc, n_shards):
    """The sweep order of the tokens of the documents ``doc_ptr`` cut into the shards
    ``shard_doc`` (all S of them, or a Ray worker's, its documents counted from 0): shard, word
    group, document, position. Returns (order: corpus positions in sweep order, None for one
    shard, which sweeps in corpus order; term_ids in that order; the runs of one document and
    block ``run_ptr``, ``run_doc``; the blocks' first runs ``block_ptr``, (shards, S + 1))."""
    S, D, N = int(n_shards), len(doc_ptr) - 1, len(term_ids)
    tok_doc = np.repeat(np.arange(D, dtype=np.int32), np.diff(doc_ptr))
    tok_shard = np.searchsorted(shard_doc, tok_doc, side="right") - 1
    block = tok_shard.astype(np.int64) * S + word_group[term_ids]
    if S > 1:
        order = np.lexsort((np.arange(N), tok_doc, block))
        term_ids = np.ascontiguousarray(term_ids[order])
        term_ids.flags.writeable = False  # the corpus's array type: the same compiled sweeps
        block, tok_doc = block[order], tok_doc[order]
    else:
        order = None
    run_ptr, run_key = key_runs(block * D + tok_doc)
    run_block, run_doc = run_key // D, (run_key % D).astype(np.int64)
    return order, term_ids, run_ptr, run_doc, block_run_ptrs(run_block, S, len(shard_doc) - 1)


def tree_shards(corpus, tree, n_shards):
    """The sweep order and per-sub-step parent arrays of ``n_shards`` shards."""
    S = int(n_shards)
    parent = tree.parent.astype(np.int64)
    root = int(root_of(parent))
    counts = np.bincount(corpus.term_ids, minlength=tree.n_terms)
    group = word_groups(tree, counts, S) if S > 1 else np.zeros(tree.n_terms, dtype=np.int64)
    order, term_ids, run_ptr, run_doc, block_ptr = sweep_order(
        corpus.doc_ptr, corpus.term_ids, group, shard_docs(corpus, S), S)
    # every edge of every path belongs to its word's group
    parents = shard_parents(parent, root, node_groups(tree, group), range(S), S)
    return TreeShards(S, root, order, term_ids, run_ptr, run_doc, block_ptr, parents, group, parent)


def chain_work(ptr, path_edges, path_len, parent, beta, beta_sum, path_prior, s_bound, n_topics):
    """One :class:`models.tree_lda.kernels.SweepWork` per chain (``s_bound`` (C, V)), sharing
    the path table: what the sparse sweeps keep from one call to the next."""
    out = []
    for c in range(len(s_bound)):
        out.append(sweep_work(ptr, path_edges, path_len, parent, beta, beta_sum, path_prior,
                              s_bound[c], n_topics, pint=out[0].pint if out else None))
    return out


def wrap_plan(costs, n_threads):
    """McNaughton's wrap-around schedule of tasks with ``costs`` on ``n_threads`` threads: the
    tasks laid end to end over threads of length L = max(total / n, largest task), thread t
    taking [t L, (t + 1) L). Returns per thread its pieces in the order it runs them, each
    (task, share, part): ``part`` 0 a whole task, 1 the first ``share`` of a task that spans
    two threads (run at the start of the next thread), 2 the rest of it (run at the end of this
    thread, after part 1, which ends by then: L >= the task's cost)."""
    n = max(1, min(int(n_threads), len(costs)))
    total = float(sum(costs))
    if n == 1 or total <= 0:
        return [[(i, 1.0, 0) for i in range(len(costs))]]
    L = max(total / n, float(max(costs)))
    plan = [[] for _ in range(n)]
    start = 0.0
    for i, c in enumerate(costs):
        t = min(int(start // L), n - 1)
        end = start + c
        edge = (t + 1) * L
        if t + 1 < n and end > edge and c > 0:
            plan[t + 1].insert(0, (i, (end - edge) / c, 1))
            plan[t].append((i, (end - edge) / c, 2))
        else:
            plan[t].append((i, 1.0, 0))
        start = end
    return [p for p in plan if p]


def sweep_chains(variant, shards, z, zp, ptr, path_edges, path_len, beta, beta_sum, path_prior,
                 s_bound, n_e, n_i, n_dk, inv, alpha, rng, work=None):
    """One sweep of every chain (arrays with a leading chain axis, ``rng`` (C, S, 4)), counts
    and ``inv`` kept in place. The (chain, shard) tasks of a sub-step run on threads (numba's
    thread count) over kernels that release the GIL, spread by :func:`wrap_plan`; each task
    owns its counts and rng stream, and a task cut in two runs its parts in order, so the result
    does not depend on the thread count. ``work``: the chains' :func:`chain_work` (None: made
    for this sweep)."""
    S, C, root = shards.n_shards, z.shape[0], shards.root
    M = n_i.shape[1]
    if work is None and variant != NAIVE:
        work = chain_work(ptr, path_edges, path_len, shards.parent, beta, beta_sum, path_prior,
                          s_bound, n_dk.shape[2])
    if S == 1:  # one shard counts in the tree's own root row: no copies
        bsum, zs, zps, ni, iv = beta_sum, z, zp, n_i, inv
    else:
        bsum = np.concatenate([beta_sum, np.full(S, beta_sum[root])])
        # per chain: the tokens in sweep order, and n_i / inv with S private root rows below
        zs = [z[c][shards.order] for c in range(C)]
        zps = [zp[c][shards.order] for c in range(C)]
        ni = [np.concatenate([n_i[c], np.repeat(n_i[c][root:root + 1], S, 0)]) for c in range(C)]
        iv = [np.concatenate([inv[c], np.repeat(inv[c][root:root + 1], S, 0)]) for c in range(C)]
    tasks = [(c, s) for c in range(C) for s in range(S)]

    def block(j, s):
        g = (s + j) % S
        return shards.block_ptr[s, g], shards.block_ptr[s, g + 1], g

    def piece(j, task, share, part):
        c, s = tasks[task]
        lo, hi, g = block(j, s)
        mid = hi
        if part:  # cut at the run boundary nearest to the share of the block's tokens
            toks = shards.run_ptr[lo:hi + 1]
            mid = lo + int(np.searchsorted(toks - toks[0], share * (toks[-1] - toks[0])))
            mid = min(max(mid, lo), hi)
        r0, r1 = (lo, mid) if part < 2 else (mid, hi)
        if S == 1:
            parent, row = shards.parent, root
        else:
            parent, row = shards.parents[s, g], M + s
        sweep_runs(variant, shards.run_ptr[r0:r1 + 1], shards.run_doc[r0:r1], row,
                   shards.term_ids, zs[c], zps[c], ptr, path_edges, path_len, parent, beta, bsum,
                   path_prior, s_bound[c], n_e[c], ni[c], n_dk[c], iv[c], alpha[c], rng[c, s],
                   work=None if work is None else work[c], begin=part < 2, end=part != 1)

    n = min(len(tasks), numba.get_num_threads())
    pool = ThreadPoolExecutor(n) if n > 1 else None
    try:
        for j in range(S):
            costs = [int(shards.run_ptr[hi] - shards.run_ptr[lo])
                     for lo, hi, _ in (block(j, s) for _, s in tasks)]
            plan = wrap_plan(costs, n)
            if pool is None or len(plan) == 1:
                for thread in plan:
                    for task, share, part in thread:
                        piece(j, task, share, part)
            else:
                _run_plan(plan, lambda *a, j=j: piece(j, *a), pool)
            if S > 1:
                for c in range(C):  # merge the shards' root counts
                    ni[c][root] += (ni[c][M:] - ni[c][root]).sum(0)
                    ni[c][M:] = ni[c][root]
                    iv[c][root] = 1.0 / (bsum[root] + ni[c][root])
                    iv[c][M:] = iv[c][root]
    finally:
        if pool is not None:
            pool.shutdown()
    if S > 1:
        for c in range(C):
            z[c][shards.order] = zs[c]
            zp[c][shards.order] = zps[c]
            n_i[c] = ni[c][:M]
            inv[c] = iv[c][:M]


def _run_plan(plan, piece, pool):
    """Every thread's pieces on ``pool``; a task's second part waits for its first. A failed
    piece still releases its waiter (which then stops), and the first error is raised."""
    first_done = {}
    failed = threading.Event()
    for thread in plan:
        for task, _, part in thread:
            if part == 1:
                first_done[task] = threading.Event()

    def run(thread):
        for task, share, part in thread:
            if part == 2:
                first_done[task].wait()
                if failed.is_set():
                    return
            try:
                piece(task, share, part)
            except BaseException:
                failed.set()  # before any waiter wakes
                for e in first_done.values():
                    e.set()
                raise
            if part == 1:
                first_done[task].set()

    for f in [pool.submit(run, thread) for thread in plan]:
        f.result()
