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
"""
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numba
import numpy as np

from ._kernels.tree_lda import sweep_runs
from ._kernels.tree_lda_sparse import root_of
from .gibbs import block_run_ptrs, key_runs, token_shards
from .tree import merge_synsets


class TreeShards(NamedTuple):
    """The sweep order of S shards. ``order``: tokens in sweep order (corpus positions; None when
    S = 1, the corpus order); ``term_ids`` in that order; runs of one document and block
    (``run_ptr``, ``run_doc``), block (s, g) from run ``block_ptr[s, g]``; ``parents[s, g]``: the
    tree's parent array for shard s in group g's sub-step, where the root edges of group g point
    to the private root row ``n_nodes + s`` and other groups' root edges to -1 (never used)."""

    n_shards: int
    root: int
    order: np.ndarray
    term_ids: np.ndarray
    run_ptr: np.ndarray
    run_doc: np.ndarray
    block_ptr: np.ndarray
    parents: np.ndarray
    word_group: np.ndarray


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


def tree_shards(corpus, tree, n_shards):
    """The sweep order and per-sub-step parent arrays of ``n_shards`` shards."""
    S = int(n_shards)
    M = tree.n_nodes
    parent = tree.parent.astype(np.int64)
    root = int(root_of(parent))
    counts = np.bincount(corpus.term_ids, minlength=tree.n_terms)
    group = word_groups(tree, counts, S) if S > 1 else np.zeros(tree.n_terms, dtype=np.int64)
    _, _, tok_doc, tok_shard = token_shards(corpus, S)
    block = tok_shard.astype(np.int64) * S + group[corpus.term_ids]
    if S > 1:
        order = np.lexsort((np.arange(corpus.n_tokens), tok_doc, block))
        term_ids = np.ascontiguousarray(corpus.term_ids[order])
        block, tok_doc = block[order], tok_doc[order]
    else:
        order, term_ids = None, corpus.term_ids
    run_ptr, run_key = key_runs(block * corpus.n_docs + tok_doc)
    run_block, run_doc = run_key // corpus.n_docs, (run_key % corpus.n_docs).astype(np.int64)
    # every edge of every path belongs to its word's group
    edge_group = np.full(M, -1, dtype=np.int64)
    for l in range(tree.path_edges.shape[1]):
        e = tree.path_edges[:, l]
        m = e >= 0
        edge_group[e[m]] = group[tree.path_word[m]]
    parents = np.empty((S, S, M), dtype=np.int64)
    out_of_root = parent == root
    for s in range(S):
        for g in range(S):
            p = parent.copy()
            p[out_of_root] = np.where(edge_group[out_of_root] == g, M + s, -1)
            parents[s, g] = p
    return TreeShards(S, root, order, term_ids, run_ptr, run_doc, block_run_ptrs(run_block, S), parents,
                      group)


def sweep_chains(variant, shards, z, zp, ptr, path_edges, path_len, beta, beta_sum, path_prior,
                 s_bound, n_e, n_i, n_dk, inv, alpha, rng):
    """One sweep of every chain (arrays with a leading chain axis, ``rng`` (C, S, 4)), counts
    and ``inv`` kept in place. The (chain, shard) tasks of a sub-step run on threads (numba's
    thread count) over kernels that release the GIL; each owns its counts and rng stream, so
    the result does not depend on the thread count."""
    S, C, root = shards.n_shards, z.shape[0], shards.root
    M = n_i.shape[1]
    bsum = np.concatenate([beta_sum, np.full(S, beta_sum[root])])
    # per chain: the tokens in sweep order, and n_i / inv with S private root rows below
    zs = [z[c] if shards.order is None else z[c][shards.order] for c in range(C)]
    zps = [zp[c] if shards.order is None else zp[c][shards.order] for c in range(C)]
    ni = [np.concatenate([n_i[c], np.repeat(n_i[c][root:root + 1], S, 0)]) for c in range(C)]
    iv = [np.concatenate([inv[c], np.repeat(inv[c][root:root + 1], S, 0)]) for c in range(C)]

    def task(j, c, s):
        g = (s + j) % S
        lo, hi = shards.block_ptr[s, g], shards.block_ptr[s, g + 1]
        sweep_runs(variant, shards.run_ptr[lo:hi + 1], shards.run_doc[lo:hi], M + s,
                   shards.term_ids, zs[c], zps[c], ptr, path_edges, path_len,
                   shards.parents[s, g], beta, bsum, path_prior, s_bound[c], n_e[c], ni[c],
                   n_dk[c], iv[c], alpha[c], rng[c, s])

    tasks = [(c, s) for c in range(C) for s in range(S)]
    n = min(len(tasks), numba.get_num_threads())
    pool = ThreadPoolExecutor(n) if n > 1 else None
    try:
        for j in range(S):
            if pool is None:
                for c, s in tasks:
                    task(j, c, s)
            else:
                list(pool.map(lambda cs: task(j, *cs), tasks))
            for c in range(C):  # merge the shards' root counts
                ni[c][root] += (ni[c][M:] - ni[c][root]).sum(0)
                ni[c][M:] = ni[c][root]
                iv[c][root] = 1.0 / (bsum[root] + ni[c][root])
                iv[c][M:] = iv[c][root]
    finally:
        if pool is not None:
            pool.shutdown()
    for c in range(C):
        if shards.order is not None:
            z[c][shards.order] = zs[c]
            zp[c][shards.order] = zps[c]
        n_i[c] = ni[c][:M]
        inv[c] = iv[c][:M]
