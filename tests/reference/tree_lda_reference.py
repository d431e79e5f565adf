"""Slow twin of tree-LDA's samplers: eq. 1 of Hu & Boyd-Graber (2012) by enumeration, in
Python, with counts recomputed from the assignments (no caches)."""
import math

import numpy as np


def counts(tree, doc_ptr, term_ids, z, zp, n_topics):
    """Dense edge counts n_e (n_nodes, K), node out-counts n_i (n_nodes, K) and n_dk."""
    K = n_topics
    n_e = np.zeros((tree.n_nodes, K), dtype=np.int64)
    n_dk = np.zeros((len(doc_ptr) - 1, K), dtype=np.int64)
    for d in range(len(doc_ptr) - 1):
        for t in range(doc_ptr[d], doc_ptr[d + 1]):
            n_dk[d, z[t]] += 1
            for j in tree.path_edges[zp[t], :tree.path_len[zp[t]]]:
                n_e[j, z[t]] += 1
    n_i = np.zeros_like(n_e)
    for j in range(1, tree.n_nodes):
        n_i[tree.parent[j]] += n_e[j]
    return n_e, n_i, n_dk


def conditional(tree, w, d, n_e, n_i, n_dk, alpha):
    """p(z = k, path = p | rest) of word w in doc d, shape (K, n_paths(w)), normalised."""
    K = n_dk.shape[1]
    paths = range(tree.word_path_ptr[w], tree.word_path_ptr[w + 1])
    m = [[(alpha[k] + n_dk[d, k]) * math.prod(
        (tree.beta[j] + n_e[j, k]) / (tree.beta_sum[tree.parent[j]] + n_i[tree.parent[j], k])
        for j in tree.path_edges[p, :tree.path_len[p]]) for p in paths] for k in range(K)]
    total = math.fsum(x for row in m for x in row)
    return np.array([[x / total for x in row] for row in m])


def buckets(tree, w, d, n_e, n_i, n_dk, alpha):
    """The s, r, q buckets of eq. 5 per (topic, path) of word w in doc d, each (K, n_paths(w)),
    unnormalised: alpha_k S / N, n_dk S / N and (alpha_k + n_dk) O / N with O = prod (beta + n)
    - S; they sum to eq. 1's masses."""
    K = n_dk.shape[1]
    paths = list(range(tree.word_path_ptr[w], tree.word_path_ptr[w + 1]))
    s, r, q = (np.zeros((K, len(paths))) for _ in range(3))
    for k in range(K):
        for c, p in enumerate(paths):
            edges = tree.path_edges[p, :tree.path_len[p]]
            N = math.prod(tree.beta_sum[tree.parent[j]] + n_i[tree.parent[j], k] for j in edges)
            S = math.prod(tree.beta[j] for j in edges)
            O = math.prod(tree.beta[j] + n_e[j, k] for j in edges) - S
            s[k, c] = alpha[k] * S / N
            r[k, c] = n_dk[d, k] * S / N
            q[k, c] = (alpha[k] + n_dk[d, k]) * O / N
    return s, r, q
