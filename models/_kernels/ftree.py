"""F+ tree (Yu et al. 2015): a complete binary tree over P = 2**ceil(log2 K) leaves stored in
tree[P:2P], for O(log K) updates and draws from a discrete distribution that changes one weight
at a time. Every inner node is the sum of its two children, RECOMPUTED (never updated by deltas),
so the tree is a pure function of its leaves: no floating-point drift, and the result does not
depend on the order of the updates.
"""
from numba import njit


@njit(cache=True, inline="always")
def tree_set(tree, P, k, value):
    """Leaf k := value, and its ancestors recomputed."""
    i = P + k
    tree[i] = value
    i >>= 1
    while i >= 1:
        tree[i] = tree[2 * i] + tree[2 * i + 1]
        i >>= 1


@njit(cache=True, inline="always")
def tree_sample(tree, P, u, K):
    """Leaf k with prefix(k) <= u < prefix(k+1); u in [0, tree[1])."""
    i = 1
    while i < P:
        left = tree[2 * i]
        if u < left:
            i = 2 * i
        else:
            u -= left
            i = 2 * i + 1
    k = i - P
    if k >= K:  # only reachable through round-off at the right edge
        k = K - 1
    return k


@njit(cache=True)
def tree_build(tree, P):
    """Every inner node from the leaves."""
    for i in range(P - 1, 0, -1):
        tree[i] = tree[2 * i] + tree[2 * i + 1]
