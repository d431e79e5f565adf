"""Slow, obvious tree-LDA fold-in written from the model: the joint (topic, path) conditional
from the tree's edges, Python loops.

With a kept sample's edge counts n_ke fixed, a token of word w draws (k, p), p a path of w, from

    p(k, p | rest) ~ (n_dk + alpha_k) prod_{e in p} (beta_e + n_ke) / (beta_sum_parent(e) + n_k,parent(e))

where n_k,parent counts the tokens through the parent node (the sum over its child edges).
:func:`conditional` gives the topic's marginal of it; :func:`fold_doc` draws topics from that
marginal as the fast kernel does (a cumulative sum over the topics), from the same uniforms.
"""
import math

import numpy as np

from models.common.kernels.rng import uniform


def edge_prob(tree, n_e, e, k):
    """Posterior probability of edge e (named by its child node) in topic k."""
    parent = tree.parent[e]
    through = sum(n_e[c, k] for c in range(1, tree.n_nodes) if tree.parent[c] == parent)
    return (tree.beta[e] + n_e[e, k]) / (tree.beta_sum[parent] + through)


def joint(w, ndk, tree, n_e, alpha):
    """Unnormalised p(k, p) for every topic k and every path p of w: (K, paths of w)."""
    K = len(alpha)
    paths = range(tree.word_path_ptr[w], tree.word_path_ptr[w + 1])
    out = np.zeros((K, len(paths)))
    for k in range(K):
        for i, p in enumerate(paths):
            prod = 1.0
            for e in tree.path_edges[p, :tree.path_len[p]]:
                prod *= edge_prob(tree, n_e, e, k)
            out[k, i] = (ndk[k] + alpha[k]) * prod
    return out


def conditional(w, ndk, tree, n_e, alpha):
    """The topic's conditional (the joint summed over the paths), normalised: (K,)."""
    p = [math.fsum(row) for row in joint(w, ndk, tree, n_e, alpha)]
    s = math.fsum(p)
    return np.array([x / s for x in p])


def word_probs(tree, n_e, words):
    """P(w | k) (len(words), K): the products along every path of w summed in path order."""
    K = n_e.shape[1]
    out = np.zeros((len(words), K))
    for u, w in enumerate(words):
        for k in range(K):
            tot = 0.0
            for p in range(tree.word_path_ptr[w], tree.word_path_ptr[w + 1]):
                prod = 1.0
                for e in tree.path_edges[p, :tree.path_len[p]]:
                    prod *= edge_prob(tree, n_e, e, k)
                tot += prod
            out[u, k] = tot
    return out


def fold_doc(rows, phi, alpha, n_iter, n_keep, state):
    """Fold in one document (its tokens as rows of ``phi`` = P(w | k)): online pass, ``n_iter``
    sweeps, n_dk summed over the last ``n_keep``. Returns (z, summed counts (K,))."""
    K = len(alpha)
    ndk = [0] * K

    def draw(u, u01):
        cum, acc = [], 0.0
        for k in range(K):
            acc += (ndk[k] + alpha[k]) * phi[u, k]
            cum.append(acc)
        x = u01 * acc
        return next((k for k in range(K) if cum[k] > x), K - 1)

    z = []
    for u in rows:
        z.append(draw(u, uniform(state)))
        ndk[z[-1]] += 1
    acc = np.zeros(K, dtype=np.int64)
    for it in range(n_iter):
        for i, u in enumerate(rows):
            ndk[z[i]] -= 1
            z[i] = draw(u, uniform(state))
            ndk[z[i]] += 1
        if it >= n_iter - n_keep:
            acc += np.array(ndk)
    return np.array(z), acc


def p_w_d(summed, n_keep, n_d, phi, alpha):
    """P_TREE(w | d) over the rows of ``phi`` under one sample: theta @ P(w | k)."""
    theta = (summed / n_keep + alpha) / (n_d + alpha.sum())
    return phi @ theta
