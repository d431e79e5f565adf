"""F+ tree (Yu et al. 2015): a complete binary tree over P = 2**ceil(log2 K) leaves stored in
tree[P:2P], for O(log K) updates and draws from a discrete distribution that changes one weight
at a time. Every inner node is the sum of its two children, RECOMPUTED (never updated by deltas),
so the tree is a pure function of its leaves: no floating-point drift, and the result does not
depend on the order of the updates.
"""
import numpy as np

from ..jit import njit


@njit(cache=True, inline="always")
def tree_set(tree, P, k, value):
    """Leaf k := value, and its ancestors recomputed."""
    # The running sum stays in a register: re-reading the node just stored would put a
    # store-to-load forwarding delay on every level of this dependent chain. a + b == b + a in
    # IEEE arithmetic, so adding the sibling on either side gives the same bits. Unsigned
    # indices spare numba's test for negative ones on every level.
    i = np.uint64(P + k)
    v = value
    tree[i] = v
    while i > 1:
        v = v + tree[i ^ np.uint64(1)]
        i >>= np.uint64(1)
        tree[i] = v


@njit(cache=True, inline="always")
def tree_root_with(tree, P, k, value):
    """The root the tree would have with leaf k := value, summed as ``tree_set`` sums it (the
    same bits), without storing anything."""
    i = np.uint64(P + k)
    v = value
    while i > 1:
        v = v + tree[i ^ np.uint64(1)]
        i >>= np.uint64(1)
    return v


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
