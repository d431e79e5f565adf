"""Counter-free random streams for the samplers: xoshiro256** seeded by splitmix64.

Every stream is a ``uint64`` array of shape (4,) that the kernels change in place. Each chain and
each document shard owns its own stream (STYLE rule 3), so no stream is ever shared across
``prange`` iterations and results do not depend on the number of threads.
"""
import numpy as np

from ..jit import njit

MASK64 = (1 << 64) - 1


def _splitmix64_py(x):
    """One splitmix64 step in Python ints; returns (new_x, output)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return x, z ^ (z >> 31)


def make_rng_states(seed, *shape):
    """Independent xoshiro256** states derived from ``seed`` and the position in ``shape``.

    Parameters
    ----------
    seed : int
        Non-negative seed.
    *shape : int
        Leading shape, e.g. ``(n_chains, n_shards)``.

    Returns
    -------
    ndarray of shape (*shape, 4), uint64
        Stream ``[c, s]`` depends only on ``seed`` and ``(c, s)``, never on the thread count.
    """
    n = int(np.prod(shape)) if shape else 1
    out = np.empty((n, 4), dtype=np.uint64)
    for i in range(n):
        # Mix the seed and the flat stream index through splitmix64 so neighbouring streams are
        # unrelated; xoshiro must not start from an all-zero state (splitmix64 never yields 4 zeros).
        x = (int(seed) * 0x9E3779B97F4A7C15 + (i + 1) * 0xD1B54A32D192ED03) & MASK64
        for j in range(4):
            x, v = _splitmix64_py(x)
            out[i, j] = v
    return out.reshape(*shape, 4) if shape else out[0]


@njit(cache=True)
def _splitmix64(x):
    """:func:`_splitmix64_py` in uint64 arithmetic."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x, z ^ (z >> np.uint64(31))


@njit(cache=True)
def seed_stream(seed, stream, state):
    """The xoshiro256** state (uint64[4], overwritten) of stream ``stream`` (a flat index) under
    ``seed``, as :func:`make_rng_states` derives it, inside a kernel."""
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + (np.uint64(stream) + np.uint64(1)) * np.uint64(0xD1B54A32D192ED03)
    for j in range(4):
        x, v = _splitmix64(x)
        state[j] = v


@njit(cache=True, inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(cache=True)
def next_uint64(state):
    """Next 64-bit output of xoshiro256**; advances ``state`` (uint64[4]) in place."""
    s0 = state[0]
    s1 = state[1]
    s2 = state[2]
    s3 = state[3]
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    state[0] = s0
    state[1] = s1
    state[2] = s2
    state[3] = s3
    return result


@njit(cache=True)
def uniform(state):
    """Uniform float64 in [0, 1) from the top 53 bits; advances ``state`` in place."""
    return np.float64(next_uint64(state) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True)
def randint(state, n):
    """Uniform int in [0, n) (n >= 1) by multiply-shift of a uniform; advances ``state``."""
    k = np.int64(uniform(state) * n)
    if k >= n:  # cannot happen for n < 2**53, kept as a guard
        k = n - 1
    return k
