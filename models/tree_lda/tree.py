"""The prior tree of tree-based LDA (Hu & Boyd-Graber 2012), built from synsets of term ids.

Shape (the paper's WordNet tree): the root has one leaf per vocabulary word (every word can
always be drawn on its own) and, per kept synset, one internal node whose children are leaves
of the synset's words. A word in several synsets sits on several leaves (polysemy), so it has
several root-to-leaf paths. ``merge=True`` first joins synsets that share a word (tree-TM's
default), so a word has at most two paths.

Prior convention (chosen on purpose, see README): a *per-edge* Dirichlet parameter.
The root's edge to a word's own leaf gets ``beta_root``; its edge to a synset node gets
``beta_root`` times the synset's leaf count, so the root spreads mass over words as a flat
LDA prior would; every edge inside a synset subtree gets ``beta_synset`` (strong: the words of
a synset share their topic's mass, a positive correlation). With no synsets the model is LDA
with beta = ``beta_root``.
"""
from typing import NamedTuple

import numpy as np


class Tree(NamedTuple):
    """A rooted tree in flat arrays. Node 0 is the root; an edge is named by its child node.

    parent : (n_nodes,) int64, -1 for the root
    beta : (n_nodes,) float64, prior of the edge into the node (0 for the root)
    beta_sum : (n_nodes,) float64, sum of the child edges' priors (0 for a leaf)
    word_path_ptr : (n_terms + 1,) int64; word w's paths are ``word_path_ptr[w]:[w + 1]``
    path_edges : (n_paths, depth) int64, the edges (child nodes) of a path from the root, -1 padded
    path_len : (n_paths,) int64
    path_word : (n_paths,) int64
    synsets : list of tuple of int, the kept (possibly merged) synsets, one per internal node 1..
    n_synsets_in : int, synsets given; n_synsets_kept : int, with >= 2 distinct terms (deduplicated)
    """

    parent: np.ndarray
    beta: np.ndarray
    beta_sum: np.ndarray
    word_path_ptr: np.ndarray
    path_edges: np.ndarray
    path_len: np.ndarray
    path_word: np.ndarray
    synsets: list
    n_synsets_in: int
    n_synsets_kept: int

    @property
    def n_nodes(self):
        return len(self.parent)

    @property
    def n_paths(self):
        return len(self.path_len)

    @property
    def n_terms(self):
        return len(self.word_path_ptr) - 1

    def path_prior(self):
        """S_p = prod of the edge priors along every path (eq. 4 of the paper), multiplied in
        path order from 1.0."""
        out = np.ones(self.n_paths)
        for l in range(self.path_edges.shape[1]):
            e = self.path_edges[:, l]
            on = l < self.path_len
            out[on] *= self.beta[e[on]]
        return out


def merge_synsets(synsets):
    """Union of synsets that share a term (union-find over terms)."""
    root = {}

    def find(x):
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for s in synsets:
        for t in s:
            root.setdefault(t, t)
        for t in s[1:]:
            a, b = find(s[0]), find(t)
            if a != b:
                root[max(a, b)] = min(a, b)
    groups = {}
    for t in root:
        groups.setdefault(find(t), []).append(t)
    return sorted(tuple(sorted(g)) for g in groups.values())


def build_tree(synsets, n_terms, beta_root=0.01, beta_synset=100.0, merge=False):
    """The prior tree over ``n_terms`` words from ``synsets`` (iterables of term ids).

    Synsets are reduced to their distinct in-vocabulary terms; those with fewer than two are
    dropped, and identical term sets are kept once. Raises ValueError for ids out of range or
    non-positive priors.
    """
    n_terms = int(n_terms)
    if n_terms < 1:
        raise ValueError(f"n_terms must be >= 1, got {n_terms!r}")
    for name, v in (("beta_root", beta_root), ("beta_synset", beta_synset)):
        if not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
    synsets = [list(s) for s in synsets]
    kept, seen = [], set()
    for s in synsets:
        terms = tuple(sorted({int(t) for t in s}))
        if terms and (terms[0] < 0 or terms[-1] >= n_terms):
            raise ValueError(f"synset {s!r} has a term id outside [0, {n_terms})")
        if len(terms) >= 2 and terms not in seen:
            seen.add(terms)
            kept.append(terms)
    groups = merge_synsets(kept) if merge else kept
    G = len(groups)
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    n_leaves = int(sizes.sum())
    n_nodes = 1 + n_terms + G + n_leaves
    parent = np.full(n_nodes, -1, dtype=np.int64)
    beta = np.zeros(n_nodes)
    # nodes: 0 root, 1..V own leaves of words 0..V-1, then synset nodes, then synset leaves
    # (synset by synset, each in its term order)
    parent[1:1 + n_terms] = 0
    beta[1:1 + n_terms] = beta_root
    syn_node = 1 + n_terms + np.arange(G, dtype=np.int64)
    parent[syn_node] = 0
    beta[syn_node] = beta_root * sizes
    leaf_syn = np.repeat(np.arange(G, dtype=np.int64), sizes)
    leaf_term = np.fromiter((t for g in groups for t in g), dtype=np.int64, count=n_leaves)
    leaf = 1 + n_terms + G + np.arange(n_leaves, dtype=np.int64)
    parent[leaf] = syn_node[leaf_syn]
    beta[leaf] = beta_synset
    beta_sum = np.zeros(n_nodes)
    np.add.at(beta_sum, parent[1:], beta[1:])
    # a word's paths: its own leaf, then one per synset holding it, in synset order
    n_paths_w = 1 + np.bincount(leaf_term, minlength=n_terms)
    ptr = np.concatenate([[0], np.cumsum(n_paths_w)]).astype(np.int64)
    depth = 2 if n_leaves else 1
    path_edges = np.full((int(ptr[-1]), depth), -1, dtype=np.int64)
    path_edges[ptr[:-1], 0] = 1 + np.arange(n_terms, dtype=np.int64)
    path_len = np.ones(int(ptr[-1]), dtype=np.int64)
    if n_leaves:
        order = np.argsort(leaf_term, kind="stable")  # by word, then synset
        rank = np.arange(n_leaves) - np.repeat(np.cumsum(n_paths_w - 1) - (n_paths_w - 1),
                                               n_paths_w - 1)
        at = ptr[leaf_term[order]] + 1 + rank
        path_edges[at, 0] = syn_node[leaf_syn[order]]
        path_edges[at, 1] = leaf[order]
        path_len[at] = 2
    return Tree(parent=parent, beta=beta, beta_sum=beta_sum, word_path_ptr=ptr,
                path_edges=path_edges, path_len=path_len,
                path_word=np.repeat(np.arange(n_terms, dtype=np.int64), np.diff(ptr)),
                synsets=[list(g) for g in groups], n_synsets_in=len(synsets),
                n_synsets_kept=len(kept))


def leaf_probs(tree, edge_counts):
    """P(w | k) of one topic: over the paths ending at w, the product of the posterior edge
    probabilities (beta_e + n_e) / (beta_sum_parent + n_parent). ``edge_counts``: (n_nodes,)
    token counts through every edge. Returns (n_terms,) float64 summing to 1."""
    n = np.asarray(edge_counts, dtype=np.float64)
    out_n = np.zeros(tree.n_nodes)
    np.add.at(out_n, tree.parent[1:], n[1:])
    edge_p = np.zeros(tree.n_nodes)
    edge_p[1:] = (tree.beta[1:] + n[1:]) / (tree.beta_sum[tree.parent[1:]] + out_n[tree.parent[1:]])
    path_p = np.ones(tree.n_paths)
    for j in range(tree.path_edges.shape[1]):
        e = tree.path_edges[:, j]
        path_p *= np.where(e >= 0, edge_p[np.maximum(e, 0)], 1.0)
    return np.bincount(tree.path_word, weights=path_p, minlength=tree.n_terms)


def synset_arrays(synsets):
    """Synsets as CSR (ptr int64, terms int64)."""
    lens = [len(s) for s in synsets]
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    terms = np.array([t for s in synsets for t in s], dtype=np.int64)
    return ptr, terms
