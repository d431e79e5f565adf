"""The partition scheme's topic totals (Yan et al. 2009; LDA, PAM): during a sub-step every
shard samples against its own copy of the totals, and the copies are merged after it."""
from ..jit import njit


@njit(cache=True, inline="always")
def merge_shard_counts(n_k, local_n_k):
    """n_k += sum over the shards s of (local_n_k[s] - n_k), every shard's change: integer sums,
    so the merge does not depend on the order of the shards."""
    for k in range(n_k.shape[0]):
        g0 = n_k[k]
        acc = g0
        for s in range(local_n_k.shape[0]):
            acc += local_n_k[s, k] - g0
        n_k[k] = acc
