"""Chain state of tree-based LDA around the samplers of :mod:`models.tree_lda.kernels`:
random initialisation, counts from assignments, and the joint
log-likelihood log p(w, z, paths) with theta and every node's child distribution integrated out.
The sweeps take the tree, a chain and their order as :class:`TreeArrays`, :class:`Chain` and
:class:`Runs`.
"""
import math
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from ..common.kernels.rng import randint


class TreeArrays(NamedTuple):
    """The prior tree as a sweep reads it (see :class:`models.tree_lda.tree.Tree`). In a sharded
    sweep ``parent`` and ``beta_sum`` are the shard's (:mod:`models.tree_lda.shards`): its root
    edges count in the private row ``root``."""

    ptr: np.ndarray  # (n_terms + 1,) int64: word w's paths are ptr[w]:ptr[w + 1]
    path_edges: np.ndarray  # (n_paths, depth) int64: a path's edges (child nodes) from the root
    path_len: np.ndarray  # (n_paths,) int64
    parent: np.ndarray  # (n_nodes,) int64
    root: int  # the row of n_i and inv that the edges with parent[j] == root count in
    beta: np.ndarray  # (n_nodes,) float64: the prior of the edge into each node
    beta_sum: np.ndarray  # (rows of n_i,) float64: the sum of a node's child edges' priors


class Chain(NamedTuple):
    """One chain as a sweep changes it: assignments (in sweep order), counts, reciprocals and
    its document-topic prior."""

    z: np.ndarray  # (n_tokens,) int32: topics
    zp: np.ndarray  # (n_tokens,) int32: paths
    n_e: np.ndarray  # (n_nodes, K) int32: tokens of topic k through the edge into node j
    n_i: np.ndarray  # (rows, K) int32: tokens of topic k leaving internal node i
    n_dk: np.ndarray  # (n_docs, K) int32
    inv: np.ndarray  # (rows, K) float64: 1 / (beta_sum_i + n_i[i, k]) of internal nodes
    alpha: np.ndarray  # (K,) float64


class Runs(NamedTuple):
    """Tokens in sweep order: run r is tokens ``run_ptr[r]:run_ptr[r + 1]`` of document
    ``run_doc[r]``; ``term_ids`` their words."""

    run_ptr: np.ndarray  # (n_runs + 1,) int64
    run_doc: np.ndarray  # (n_runs,) int64
    term_ids: np.ndarray  # (n_tokens,) int32


@njit(cache=True)
def init_random(term_ids, ptr, n_topics, z, zp, rng):
    """Every token gets a uniform topic and a uniform path among its word's paths."""
    for t in range(len(term_ids)):
        w = term_ids[t]
        z[t] = randint(rng, n_topics)
        zp[t] = ptr[w] + randint(rng, ptr[w + 1] - ptr[w])


@njit(cache=True)
def build_counts(doc_ptr, z, zp, path_edges, path_len, parent, beta_sum, n_e, n_i, n_dk, inv,
                 zeroed=False):
    """n_e, n_i, n_dk and the reciprocals inv = 1 / (beta_sum + n_i) of internal nodes from the
    assignments (z, zp) of one chain. Rows of leaves in n_i and inv stay 0: no path leaves a
    leaf, so nothing ever writes them, and a fresh (zero) array never has their pages touched.
    ``zeroed``: n_e and n_dk are all 0 already (a fresh allocation)."""
    if not zeroed:
        n_e[:] = 0
        n_dk[:] = 0
    for i in range(n_i.shape[0]):
        if beta_sum[i] > 0:
            n_i[i, :] = 0
    for d in range(len(doc_ptr) - 1):
        for t in range(doc_ptr[d], doc_ptr[d + 1]):
            k = z[t]
            p = zp[t]
            n_dk[d, k] += 1
            for l in range(path_len[p]):
                j = path_edges[p, l]
                n_e[j, k] += 1
                n_i[parent[j], k] += 1
    for i in range(n_i.shape[0]):
        if beta_sum[i] > 0:
            for k in range(n_i.shape[1]):
                inv[i, k] = 1.0 / (beta_sum[i] + n_i[i, k])


def log_lik(parent, beta, beta_sum, n_e, n_i, n_dk, doc_ptr, alpha):
    """log p(w, z, paths): per topic and internal node i, the Dirichlet-multinomial
    lnG(B_i) - lnG(B_i + n_i) + sum_children (lnG(beta_j + n_j) - lnG(beta_j)); per document,
    LDA's lnG(A) - lnG(n_d + A) + sum_k (lnG(alpha_k + n_dk) - lnG(alpha_k))."""
    return log_lik_docs(log_lik_nodes(parent, beta, beta_sum, n_e, n_i), n_dk, doc_ptr, alpha)


@njit(cache=True)
def log_lik_nodes(parent, beta, beta_sum, n_e, n_i):
    """The tree's terms of :func:`log_lik`, summed from 0."""
    n_nodes, K = n_e.shape
    total = 0.0
    for i in range(n_nodes):
        if beta_sum[i] > 0:
            lb = math.lgamma(beta_sum[i])
            for k in range(K):
                if n_i[i, k] > 0:
                    total += lb - math.lgamma(beta_sum[i] + n_i[i, k])
    for j in range(1, n_nodes):
        lb = math.lgamma(beta[j])
        for k in range(K):
            if n_e[j, k] > 0:
                total += math.lgamma(beta[j] + n_e[j, k]) - lb
    return total


@njit(cache=True)
def log_lik_docs(total, n_dk, doc_ptr, alpha):
    """``total`` plus the documents' terms of :func:`log_lik`, term after term (a Ray worker
    continues the float of the workers before it)."""
    K = n_dk.shape[1]
    a_sum = 0.0
    for k in range(K):
        a_sum += alpha[k]
    la = math.lgamma(a_sum)
    for d in range(len(doc_ptr) - 1):
        total += la - math.lgamma(doc_ptr[d + 1] - doc_ptr[d] + a_sum)
        for k in range(K):
            if n_dk[d, k] > 0:
                total += math.lgamma(alpha[k] + n_dk[d, k]) - math.lgamma(alpha[k])
    return total


def edge_word_probs(tree, n_e):
    """P(w | k) of every topic from its edge counts ``n_e`` (n_nodes, K): over the paths ending
    at w, the product of the posterior edge probabilities (what :func:`models.tree_lda.tree.leaf_probs`
    gives for one topic, for all topics at once). Returns (n_terms, K) float64."""
    n = np.asarray(n_e, dtype=np.float64)
    out_n = np.zeros_like(n)
    np.add.at(out_n, tree.parent[1:], n[1:])
    edge_p = np.ones_like(n)
    par = tree.parent[1:]
    edge_p[1:] = (tree.beta[1:, None] + n[1:]) / (tree.beta_sum[par, None] + out_n[par])
    path_p = np.ones((tree.n_paths, n.shape[1]))
    for j in range(tree.path_edges.shape[1]):
        e = tree.path_edges[:, j]
        path_p *= np.where((e >= 0)[:, None], edge_p[np.maximum(e, 0)], 1.0)
    out = np.zeros((tree.n_terms, n.shape[1]))
    np.add.at(out, tree.path_word, path_p)
    return out
