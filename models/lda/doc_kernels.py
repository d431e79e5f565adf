"""LDA sweep in document order (arrays in, arrays out; no I/O).

The exact collapsed conditional (Griffiths & Steyvers 2004, eq. 5)

    p(z_i = k | rest) ~ (n_dk + alpha_k) (n_kw + beta) / (n_k + V beta)

is split as in SparseLDA (Yao et al. 2009) for tokens visited document by document, with
y_k = (n_dk + alpha_k) / (n_k + V beta):

    word bucket   n_kw * y_k     (sparse: only the topics of term w's row, read from its list)
    dense bucket  beta * y_k     (all K topics, held in an F+ tree over the y_k, Yu et al. 2015)

The tree's leaves are the y_k themselves, so the word bucket reads its weights from the leaves.
A token changes n_dk and n_k of its old and new topic: two O(log K) leaf updates, or only a
leaf lowered and put back when it keeps its topic. A visit to a document raises the leaves of
its topics from alpha_k / (n_k + V beta) (the state between documents); they are lowered
again when the next document of the block opens, in the same pass that raises its own. Inner
tree nodes are recomputed from their children, so the tree is a pure function of its leaves
and none of these shortcuts changes a draw. Both buckets are exact, so the sampler draws from
the exact conditional.

Why this order: a term's row holds far fewer topics than a document (its tokens concentrate on
the few topics of its senses, while a document mixes many), so the sparse bucket of this order
is shorter than the document bucket of the word-by-word order of F+LDA. Only the term lists are
updated per token; the dense n_kw is rebuilt from them when it is read (``LDA.n_kw_``), since
updating it too would cost two random memory accesses per token.

Parallelism: the partition scheme of Yan et al. (2009) (tomotopy's PARTITION) over FIXED shards.
Documents are split into S shards and terms into S groups; a sweep takes S sub-steps, and in
sub-step j shard s samples its tokens whose term is in group (s + j) mod S. Blocks of a sub-step
share no document and no term, so they update the term lists in place and every token sees
exact n_kw and n_dk; only ``n_k`` is a per-shard copy, merged (integer sums) after each
sub-step. Every (chain, shard) has its own rng stream, so results never depend on the number of
threads.

Layout (besides that of :mod:`.lda`)
------------------------------------
ord_word : (n_tokens,) int32     term of the i-th token in sweep order (shard, group, doc, position)
visit_ptr, visit_doc             tokens visit_ptr[v]:visit_ptr[v+1] all belong to doc visit_doc[v]
block_visit_ptr : (S, S+1)       visits of block (shard s, group g) are [s, g]:[s, g + 1]
wcap_ptr : (V+1,) int64          term w's list lives in wl[wcap_ptr[w]:wcap_ptr[w+1]]
wl, wl_nnz, wshift               term w's nonzero topics, ascending, packed like dt (int32, or
                                int64 when a term's frequency does not fit the int32 count bits)
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.ftree import tree_build, tree_root_with, tree_sample, tree_set
from ..common.kernels.prefetch import prefetch
from ..common.kernels.rng import uniform
from ..common.kernels.shards import merge_shard_counts
from ..common.kernels.sparse import lower_bound


# Tokens between the prefetch of a term list and its use.
PREFETCH_AHEAD = 4


class Visits(NamedTuple):
    """The sweep order (module docstring): visit v's tokens visit_ptr[v]:visit_ptr[v + 1] all
    belong to doc visit_doc[v]; ord_word is the term of every token."""

    visit_ptr: np.ndarray
    visit_doc: np.ndarray
    ord_word: np.ndarray


class WordLists(NamedTuple):
    """Every term's packed topic list: wl[wcap_ptr[w]:wcap_ptr[w] + wl_nnz[w]]."""

    wcap_ptr: np.ndarray
    wl: np.ndarray
    wshift: int
    wl_nnz: np.ndarray


class DocLists(NamedTuple):
    """Every doc's packed topic list, dt[cap_ptr[d]:cap_ptr[d] + dt_nnz[d]] (:mod:`.kernels`),
    and which docs are sampled (active[d] != 0)."""

    cap_ptr: np.ndarray
    dt: np.ndarray
    cshift: int
    dt_nnz: np.ndarray
    active: np.ndarray


class Scratch(NamedTuple):
    """One shard's buffers: the F+ tree (2 P,) and inv, pbuf (K,) float64; ndk, topics (K,)
    int32 and listed (K,) uint8, ndk and listed all zero between documents."""

    tree: np.ndarray
    inv: np.ndarray
    ndk: np.ndarray
    listed: np.ndarray
    topics: np.ndarray
    pbuf: np.ndarray

# ---------------------------------------------------------------------------------------------
# One block of one sweep


@njit(cache=True)
def _set_base_leaves(tree, P, inv, alpha, n_k, vbeta):
    """inv_k = 1 / (n_k + V beta) and the tree with leaves alpha_k inv_k (no document open)."""
    K = len(n_k)
    for k in range(K):
        inv[k] = 1.0 / (n_k[k] + vbeta)
        tree[P + k] = alpha[k] * inv[k]
    for k in range(K, P):
        tree[P + k] = 0.0
    tree_build(tree, P)


@njit(cache=True, inline="always")
def _set_leaves(tree, P, topics, n, ndk, alpha, inv, max_patch):
    """Leaves of topics[:n] := (ndk + alpha) inv; one at a time, or all then a rebuild."""
    if n > max_patch:
        for j in range(n):
            k = topics[j]
            tree[P + k] = (ndk[k] + alpha[k]) * inv[k]
        tree_build(tree, P)
    else:
        for j in range(n):
            k = topics[j]
            tree_set(tree, P, k, (ndk[k] + alpha[k]) * inv[k])


# error_model="numpy": no zero test before each division (n_k + V beta is never 0)
@njit(cache=True, error_model="numpy")
def sweep_block(v0, v1, visits, z_ord, n_k, words, docs, alpha, beta, vbeta, scratch, rng):
    """Resample every token of visits v0:v1 once, against n_k (this shard's copy).

    Changes in place: z_ord, n_k, words.wl, words.wl_nnz (terms of this block only), docs.dt,
    docs.dt_nnz (docs of this block only), the scratch and rng.
    """
    visit_ptr, visit_doc, ord_word = visits
    wcap_ptr, wl, wshift, wl_nnz = words
    cap_ptr, dt, cshift, dt_nnz, active = docs
    tree, inv, ndk, listed, topics, pbuf = scratch
    K = n_k.shape[0]
    P = tree.shape[0] // 2
    cmask = (1 << cshift) - 1
    wmask = (1 << wshift) - 1
    inv_beta = 1.0 / beta
    # Patching a leaf costs about log2(P), rebuilding the tree about P.
    log_p = 1
    while (1 << log_p) < P:
        log_p += 1
    max_patch = P // log_p
    _set_base_leaves(tree, P, inv, alpha, n_k, vbeta)
    n_ord = len(ord_word)
    # A closed document's leaves keep its counts until the next document opens, and are then
    # reset together with the new document's: a topic of both is updated once, not twice.
    # stale[:n_stale] are the closed document's topics; the tree is a pure function of its
    # leaves, so this gives the same tree as resetting them at once.
    stale = np.empty(K, dtype=topics.dtype)
    n_stale = 0
    for v in range(v0, v1):
        d = visit_doc[v]
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        nnz = dt_nnz[d]
        for j in range(nnz):
            e = dt[base + j]
            k = e >> cshift
            ndk[k] = e & cmask
            topics[j] = k
            listed[k] = 1
        n_set = nnz
        for j in range(n_stale):
            k = stale[j]
            if listed[k] == 0:  # ndk[k] is 0: the leaf goes back to alpha_k inv_k
                topics[n_set] = k
                n_set += 1
        _set_leaves(tree, P, topics, n_set, ndk, alpha, inv, max_patch)
        n_top = nnz  # topics[:n_top]: every topic with n_dk > 0 at some point of this visit
        for i in range(visit_ptr[v], visit_ptr[v + 1]):
            # A term list is a random access into megabytes of lists: ask for a later token's
            # list now, so that it is in the cache when that token comes.
            if i + PREFETCH_AHEAD < n_ord:
                prefetch(wl, wcap_ptr[ord_word[i + PREFETCH_AHEAD]])
            w = ord_word[i]
            k_old = z_ord[i]
            wb = wcap_ptr[w]
            wn = wl_nnz[w]
            inv_old = 0.0
            leaf_old = 0.0
            leaf_dec = 0.0
            total = tree[1]
            stale_path = False
            if k_old >= 0:
                # Most tokens keep their topic once the chain has mixed. Only the leaf of k_old
                # is lowered, and the root it implies is summed in registers; the path above it
                # keeps the old sums (stale_path) until a draw from the tree or a change of
                # topic needs it. A token that keeps its topic then just puts the leaf back.
                inv_old = inv[k_old]
                leaf_old = tree[P + k_old]
                ndk[k_old] -= 1
                n_k[k_old] -= 1
                inv[k_old] = 1.0 / (n_k[k_old] + vbeta)
                leaf_dec = (ndk[k_old] + alpha[k_old]) * inv[k_old]
                tree[P + k_old] = leaf_dec
                total = tree_root_with(tree, P, k_old, leaf_dec)
                stale_path = True
            # word bucket; the old topic's entry counts one less (found on the way) and, if that
            # makes it 0, stays in the list until after sampling: it adds exactly 0.0 and can
            # never be selected.
            wsum = 0.0
            pos_old = -1
            # (unsigned indices spare numba's test for negative ones in this innermost loop)
            for j in range(wn):
                e = wl[np.uint64(wb + j)]
                t = e >> wshift
                hit = t == k_old
                if hit:
                    pos_old = j
                wsum += ((e & wmask) - hit) * tree[np.uint64(P + t)]
                pbuf[np.uint64(j)] = wsum
            if pos_old >= 0:
                wl[wb + pos_old] -= 1
            u = uniform(rng) * (wsum + beta * total)
            if u < wsum:
                j = 0
                while pbuf[np.uint64(j)] <= u:
                    j += 1
                k_new = wl[wb + j] >> wshift
                pos_new = j
            else:
                if stale_path:
                    tree_set(tree, P, k_old, leaf_dec)
                    stale_path = False
                k_new = tree_sample(tree, P, (u - wsum) * inv_beta, K)
                pos_new = -1
            # term list update
            if k_new == k_old:
                wl[wb + pos_old] += 1
            else:
                if pos_old >= 0 and (wl[wb + pos_old] & wmask) == 0:
                    for j in range(pos_old, wn - 1):
                        wl[wb + j] = wl[wb + j + 1]
                    wn -= 1
                    if pos_new > pos_old:
                        pos_new -= 1
                if pos_new >= 0:
                    wl[wb + pos_new] += 1
                else:
                    key = k_new << wshift
                    j = lower_bound(wl, wb, wb + wn, key) - wb
                    if j < wn and (wl[wb + j] >> wshift) == k_new:
                        wl[wb + j] += 1
                    else:
                        for jj in range(wn, j, -1):
                            wl[wb + jj] = wl[wb + jj - 1]
                        wl[wb + j] = key + 1
                        wn += 1
                wl_nnz[w] = wn
            if listed[k_new] == 0:
                listed[k_new] = 1
                topics[n_top] = k_new
                n_top += 1
            ndk[k_new] += 1
            n_k[k_new] += 1
            if k_new == k_old:
                # the same counts as before the token, so the same leaf, inv and sums
                inv[k_new] = inv_old
                if stale_path:
                    tree[P + k_new] = leaf_old
                else:
                    tree_set(tree, P, k_new, leaf_old)
            else:
                if stale_path:
                    tree_set(tree, P, k_old, leaf_dec)
                inv[k_new] = 1.0 / (n_k[k_new] + vbeta)
                tree_set(tree, P, k_new, (ndk[k_new] + alpha[k_new]) * inv[k_new])
            z_ord[i] = k_new
        # close the document: its list from ndk, ndk back to 0; its leaves are reset when the
        # next document opens (the block's last document's never: the tree is rebuilt per block)
        m = 0
        for j in range(n_top):
            k = topics[j]
            if ndk[k] > 0:
                dt[base + m] = (k << cshift) | ndk[k]
                m += 1
            ndk[k] = 0
            listed[k] = 0
        dt_nnz[d] = m
        topics, stale = stale, topics
        n_stale = n_top


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def sweep(block_visit_ptr, visit_ptr, visit_doc, ord_word, z_ord, n_k, wcap_ptr, wl, wshift,
          wl_nnz, cap_ptr, dt, cshift, dt_nnz, active, alpha, beta, local_n_k, trees, invs, ndks,
          listeds, topics, pbufs, rng):
    """One Gibbs sweep of one chain: S sub-steps over the (doc shard x term group) grid.

    Parameters
    ----------
    local_n_k : ndarray of shape (S, n_topics), int64
        Each shard's copy of n_k.
    trees : (S, 2 P) float64; invs, pbufs : (S, n_topics) float64; ndks, topics : (S, n_topics)
        int32; listeds : (S, n_topics) uint8
        Per-shard scratch (ndks and listeds all zero).
    rng : ndarray of shape (S, 4), uint64
        One stream per shard of this chain.

    Changes in place: z_ord, n_k, wl, wl_nnz, dt, dt_nnz, the scratch arrays and rng. The dense
    n_kw is not touched: ``word_lists_to_dense`` rebuilds it when it is read.
    """
    S = block_visit_ptr.shape[0]
    vbeta = wl_nnz.shape[0] * beta
    for j in range(S):
        for s in prange(S):
            g = (s + j) % S
            local_n_k[s, :] = n_k
            sweep_block(block_visit_ptr[s, g], block_visit_ptr[s, g + 1],
                        Visits(visit_ptr, visit_doc, ord_word), z_ord, local_n_k[s],
                        WordLists(wcap_ptr, wl, wshift, wl_nnz),
                        DocLists(cap_ptr, dt, cshift, dt_nnz, active), alpha, beta, vbeta,
                        Scratch(trees[s], invs[s], ndks[s], listeds[s], topics[s], pbufs[s]),
                        rng[s])
        merge_shard_counts(n_k, local_n_k)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def online_pass(doc_ptr, docs, term_ids, z, n_k, wcap_ptr, wl, wshift, wl_nnz, cap_ptr, dt, cshift,
                dt_nnz, active, alpha, beta, vbeta, trees, invs, ndks, listeds, topics, pbufs, rng):
    """The online initialisation of every chain c, chains in parallel: one sequential pass over
    the documents in order (``docs`` = 0..D-1, doc_ptr as visits) that draws every unassigned
    token (z[c] = -1) given those drawn before it. Arrays carry a leading chain axis; the
    scratch arrays are per chain; rng (C, n_shards, 4): chain c uses stream rng[c, 0]. Counts
    and lists must start empty. Changes in place: z, n_k, wl, wl_nnz, dt, dt_nnz, the scratch
    arrays and rng."""
    for c in prange(z.shape[0]):
        sweep_block(0, len(docs), Visits(doc_ptr, docs, term_ids), z[c], n_k[c],
                    WordLists(wcap_ptr, wl[c], wshift, wl_nnz[c]),
                    DocLists(cap_ptr, dt[c], cshift, dt_nnz[c], active[c]), alpha[c], beta, vbeta,
                    Scratch(trees[c], invs[c], ndks[c], listeds[c], topics[c], pbufs[c]), rng[c, 0])


# ---------------------------------------------------------------------------------------------
# Term lists, and the conditional as the sampler decomposes it (for tests)


@njit(cache=True, parallel=True)
def build_word_lists(n_kw, wcap_ptr, wshift, wl, wl_nnz):
    """Every term's nonzero topics, ascending, packed (topic << wshift) | n_kw. Overwrites wl, wl_nnz."""
    V, K = n_kw.shape
    for w in prange(V):
        o = wcap_ptr[w]
        m = 0
        for k in range(K):
            n = n_kw[w, k]
            if n != 0:
                wl[o + m] = (k << wshift) | n
                m += 1
        wl_nnz[w] = m


@njit(cache=True, parallel=True)
def word_lists_to_dense(wcap_ptr, wl, wshift, wl_nnz, n_kw):
    """n_kw from the term lists. The sweep keeps only the lists: updating the dense rows too
    would cost two random memory accesses per token, and rewriting all V x K of them after
    every sweep is wasted unless n_kw is read."""
    V, K = n_kw.shape
    wmask = (1 << wshift) - 1
    for w in prange(V):
        n_kw[w, :] = 0
        for j in range(wl_nnz[w]):
            e = wl[wcap_ptr[w] + j]
            n_kw[w, e >> wshift] = e & wmask


@njit(cache=True)
def token_conditional(w, d, n_kw, n_k, cap_ptr, dt, cshift, dt_nnz, alpha, beta):
    """Normalised p(z = k | rest) for a token of term w in doc d, computed through the word
    bucket and the F+ tree exactly as ``sweep_block`` does. The token must already be removed
    from the counts. Returns ndarray of shape (K,), float64."""
    V, K = n_kw.shape
    vbeta = V * beta
    P = 1
    while P < K:
        P *= 2
    ndk = np.zeros(K, dtype=np.int64)
    base = cap_ptr[d]
    for j in range(dt_nnz[d]):
        ndk[dt[base + j] >> cshift] = dt[base + j] & ((1 << cshift) - 1)
    tree = np.zeros(2 * P)
    for k in range(K):
        tree[P + k] = (ndk[k] + alpha[k]) * (1.0 / (n_k[k] + vbeta))
    tree_build(tree, P)
    p = np.empty(K)
    wsum = 0.0
    for k in range(K):
        p[k] = beta * tree[P + k]
        if n_kw[w, k] != 0:
            r = n_kw[w, k] * tree[P + k]
            wsum += r
            p[k] += r
    total = wsum + beta * tree[1]
    for k in range(K):
        p[k] /= total
    return p
