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
        """S_p = prod of the edge priors along every path (eq. 4 of the paper)."""
        out = np.ones(self.n_paths)
        for p in range(self.n_paths):
            for e in self.path_edges[p, :self.path_len[p]]:
                out[p] *= self.beta[e]
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
    n_leaves = sum(len(g) for g in groups)
    n_nodes = 1 + n_terms + G + n_leaves
    parent = np.full(n_nodes, -1, dtype=np.int64)
    beta = np.zeros(n_nodes)
    # nodes: 0 root, 1..V own leaves of words 0..V-1, then synset nodes, then synset leaves
    parent[1:1 + n_terms] = 0
    beta[1:1 + n_terms] = beta_root
    paths = [[[1 + w]] for w in range(n_terms)]
    nxt = 1 + n_terms + G
    for g, terms in enumerate(groups):
        node = 1 + n_terms + g
        parent[node] = 0
        beta[node] = beta_root * len(terms)
        for t in terms:
            parent[nxt] = node
            beta[nxt] = beta_synset
            paths[t].append([node, nxt])
            nxt += 1
    beta_sum = np.zeros(n_nodes)
    np.add.at(beta_sum, parent[1:], beta[1:])
    flat = [p for w in range(n_terms) for p in paths[w]]
    depth = max(len(p) for p in flat)
    path_edges = np.full((len(flat), depth), -1, dtype=np.int64)
    for i, p in enumerate(flat):
        path_edges[i, :len(p)] = p
    ptr = np.concatenate([[0], np.cumsum([len(paths[w]) for w in range(n_terms)])]).astype(np.int64)
    return Tree(parent=parent, beta=beta, beta_sum=beta_sum, word_path_ptr=ptr,
                path_edges=path_edges, path_len=np.array([len(p) for p in flat], dtype=np.int64),
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
