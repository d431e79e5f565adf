"""The sparse group-topic step (eq. 3) of grouped LDA for groups of at most LINEAR_MAX tokens,
after SparseLDA (Yao et al. 2009).

With a_k = alpha_k (doc factor units 0, 2) or rising(alpha_k, n) (unit 1), b_k the document part
of the doc factor (zero for a topic the document's other groups do not hold), P_k = prod over the
group's tokens of (beta + n_kw + off), A the same product at n_kw = 0 and R_k = rising(V beta +
n_k, n), eq. 3's weight (a_k + b_k) P_k / R_k splits exactly into

* a smoothing part a_k A / R_k, whose total is A S_n with S_n = sum_k a_k / R_k kept for every
  group size n <= LINEAR_MAX, as the table 1 / R_k (both recomputed at the start of a sweep,
  updated whenever an n_k moves);
* a doc part b_k A / R_k, zero unless the document's other groups hold k, whose total is A D_n
  with D_n = sum_k b_k / R_k kept while the document is sampled;
* a word part (a_k + b_k)(P_k - A) / R_k, zero unless a word of the group has a count in k:
  those topics are the set bits of the OR of the words' bitsets (bit k of word y set iff
  n_kw[y, k] > 0).

A draw walks the word part in increasing topic order and falls into the doc part (the doc's
topics in increasing order) or the smoothing part (all topics) only with their small
probabilities (A is of the order of beta^n).

Longer groups are weighed over all topics (:func:`group_topic_weights`), LINEAR_MAX tokens at
a time, the products that are equal for many topics (a word without a count, the first
LINEAR_MAX factors of a denominator) computed once.
"""
from typing import NamedTuple

import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros  # LLVM cttz: index of the lowest set bit

from ..common.jit import njit

# Products of at most this many factors stay in floating range for any int32 count (2^31)^16.
LINEAR_MAX = 16
ONE = np.uint64(1)


class GroupWeights(NamedTuple):
    """What eq. 3's weights read besides the group: the doc's counts m_dk and its topic bitset,
    the words' topic bitsets and counts, the rows 1 / R_k, alpha, the doc factor's unit, beta."""

    m_dk: np.ndarray
    dbits: np.ndarray
    wbits: np.ndarray
    n_kw: np.ndarray
    inv_r: np.ndarray
    alpha: np.ndarray
    unit: int
    beta: float


@njit(cache=True, inline="always")
def _rising(x, n):
    """x (x + 1) ... (x + n - 1) as a product (n <= LINEAR_MAX)."""
    p = 1.0
    for j in range(n):
        p *= x + j
    return p


@njit(cache=True, inline="always")
def bit_set(bits, k, on):
    """Bit k of the bitset ``bits`` (uint64 words) set to ``on``."""
    b, t = k >> 6, np.uint64(k & 63)
    if on:
        bits[b] |= ONE << t
    else:
        bits[b] &= ~(ONE << t)


@njit(cache=True)
def build_word_bits(n_kw, wbits):
    """wbits[y] = the bitset of the topics k with n_kw[y, k] > 0."""
    V, K = n_kw.shape
    wbits[:] = 0
    for y in range(V):
        for k in range(K):
            if n_kw[y, k] > 0:
                wbits[y, k >> 6] |= ONE << np.uint64(k & 63)


@njit(cache=True, inline="always")
def _doc_coef(alpha_k, m, unit, n):
    """(a_k, b_k) of the doc factor for a group of n tokens, m the doc's count of topic k."""
    if unit == 1:
        a = _rising(alpha_k, n)
        return a, (_rising(alpha_k + m, n) - a if m > 0 else 0.0)
    return alpha_k, float(m)


@njit(cache=True, inline="always")
def _move_row(S, D, inv_r, n_max, k, alpha_k, unit, x_new, m_old, m_new, doc):
    """inv_r[k, 1:] = 1 / rising(x_new, n), S moved with it, and D too where ``doc``. Units 0
    and 2 fill the row downwards from one division, 1 / rising(x, n - 1) =
    (x + n - 1) / rising(x, n); unit 1's a_k and b_k are rising factorials, built upwards."""
    if unit != 1:
        inv = 1.0 / _rising(x_new, n_max)
        for n in range(n_max, 0, -1):
            old = inv_r[k, n]
            S[n] += alpha_k * (inv - old)
            if doc:
                D[n] += m_new * inv - m_old * old
            inv_r[k, n] = inv
            inv *= x_new + n - 1
        if doc:
            D[0] += float(m_new - m_old)
        return
    r = 1.0
    a = 1.0
    ao = 1.0
    an = 1.0
    for n in range(1, n_max + 1):
        r *= x_new + n - 1
        a *= alpha_k + n - 1
        inv = 1.0 / r
        S[n] += a * (inv - inv_r[k, n])
        if doc:
            ao *= alpha_k + m_old + n - 1
            an *= alpha_k + m_new + n - 1
            b_old = ao - a if m_old > 0 else 0.0
            b_new = an - a if m_new > 0 else 0.0
            D[n] += b_new * inv - b_old * inv_r[k, n]
        inv_r[k, n] = inv


@njit(cache=True)
def smooth_sums(alpha, unit, n_k, vbeta, n_max, S, inv_r):
    """inv_r[k, n] = 1 / rising(V beta + n_k, n) and S[n] = sum_k a_k(n) inv_r[k, n] for
    n = 0..n_max (the rows as :func:`topic_move` computes them)."""
    for n in range(n_max + 1):
        S[n] = 0.0
    for k in range(len(n_k)):
        inv_r[k, 0] = 1.0
        inv_r[k, 1:] = 0.0
        S[0] += 1.0 if unit == 1 else alpha[k]
        _move_row(S, S, inv_r, n_max, k, alpha[k], unit, vbeta + n_k[k], 0, 0, False)


@njit(cache=True)
def topic_move(S, D, inv_r, n_max, k, alpha_k, unit, x_new, m_old, m_new):
    """Topic k's V beta + n_k is now x_new and its doc count went from m_old to m_new: update
    inv_r[k], the smoothing sums S and the doc sums D (D[n] = sum_k b_k(n) inv_r[k, n])."""
    _move_row(S, D, inv_r, n_max, k, alpha_k, unit, x_new, m_old, m_new, True)


@njit(cache=True)
def smooth_move(S, inv_r, n_max, k, alpha_k, unit, x_new):
    """Update inv_r[k] and S for topic k whose V beta + n_k is now x_new (no doc sums)."""
    _move_row(S, S, inv_r, n_max, k, alpha_k, unit, x_new, 0, 0, False)


@njit(cache=True)
def doc_sums(dbits, m_dk, alpha, unit, inv_r, n_max, D):
    """D[n] = sum over the doc's topics (``dbits``) of b_k(n) inv_r[k, n], n = 0..n_max."""
    for n in range(n_max + 1):
        D[n] = 0.0
    for blk in range(len(dbits)):
        x = dbits[blk]
        while x != 0:
            k = (blk << 6) + trailing_zeros(x)
            x &= x - ONE
            for n in range(n_max + 1):
                D[n] += _doc_coef(alpha[k], m_dk[k], unit, n)[1] * inv_r[k, n]


@njit(cache=True, inline="always")
def _put_word_weight(k, p, A, n, alpha, m_dk, unit, inv_r, tk, tw, cnt):
    """Topic k's word part (a_k + b_k)(P_k - A) / R_k, P_k = ``p``, as entry ``cnt`` of ``tk``
    and ``tw``; returns it."""
    a, bk = _doc_coef(alpha[k], m_dk[k], unit, n)
    tk[cnt] = k
    tw[cnt] = (a + bk) * (p - A) * inv_r[k, n]
    return tw[cnt]


@njit(cache=True, inline="always")
def _word_weights_few(dw, n_dw, n, gw, tk, tw, A):
    """:func:`word_group_weights` for 1 to 4 distinct words, each once: their rows and bitsets
    held in locals (unused ones repeat the first word's, whose bits are already in the OR), the
    same products in the same order."""
    m_dk, dbits, wbits, n_kw, inv_r, alpha, unit, beta = gw
    y0 = dw[0]
    y1 = dw[1] if n_dw > 1 else y0
    y2 = dw[2] if n_dw > 2 else y0
    y3 = dw[3] if n_dw > 3 else y0
    r0, r1, r2, r3 = n_kw[y0], n_kw[y1], n_kw[y2], n_kw[y3]
    b0, b1, b2, b3 = wbits[y0], wbits[y1], wbits[y2], wbits[y3]
    cnt = 0
    total = 0.0
    for blk in range(len(dbits)):
        wx = b0[blk] | b1[blk] | b2[blk] | b3[blk]
        while wx != 0:
            t = trailing_zeros(wx)
            wx &= wx - ONE
            k = (blk << 6) + t
            p = beta + r0[k]
            if n_dw > 1:
                p *= beta + r1[k]
                if n_dw > 2:
                    p *= beta + r2[k]
                    if n_dw > 3:
                        p *= beta + r3[k]
            total += _put_word_weight(k, p, A, n, alpha, m_dk, unit, inv_r, tk, tw, cnt)
            cnt += 1
    return cnt, total, A


@njit(cache=True)
def word_group_weights(dw, dc, n_dw, n, gw, tk, tw):
    """The word part of eq. 3 for a group of n <= LINEAR_MAX tokens (distinct words
    ``dw[:n_dw]`` with counts ``dc``): (a_k + b_k)(P_k - A) / R_k over the topics where a word of
    the group has a count, in ``tk`` (increasing), the parts in ``tw``. Returns (number of
    topics, their total, A)."""
    m_dk, dbits, wbits, n_kw, inv_r, alpha, unit, beta = gw
    A = 1.0
    small = n_dw <= 4
    for j in range(n_dw):
        A *= _rising(beta, dc[j])
        small &= dc[j] == 1
    if small and n_dw > 0:
        return _word_weights_few(dw, n_dw, n, gw, tk, tw, A)
    cnt = 0
    total = 0.0
    for blk in range(len(dbits)):
        wx = np.uint64(0)
        for j in range(n_dw):
            wx |= wbits[dw[j], blk]
        while wx != 0:
            t = trailing_zeros(wx)
            wx &= wx - ONE
            k = (blk << 6) + t
            # no bit test: where a word's bit is clear its count is 0 and beta + 0 is beta, the
            # same factor (an unpredictable branch costs more than the load); rising(x, 1) is x
            p = 1.0
            for j in range(n_dw):
                x = beta + n_kw[dw[j], k]
                p *= x if dc[j] == 1 else _rising(x, dc[j])
            total += _put_word_weight(k, p, A, n, alpha, m_dk, unit, inv_r, tk, tw, cnt)
            cnt += 1
    return cnt, total, A


@njit(cache=True)
def smooth_weight(k, n, A, alpha, unit, inv_r):
    """The smoothing part of eq. 3 for topic k: A a_k(n) / rising(V beta + n_k, n)."""
    a = _rising(alpha[k], n) if unit == 1 else alpha[k]
    return A * a * inv_r[k, n]


@njit(cache=True)
def pick_listed(u, tk, tw, cnt):
    """The topic tk[j] where the running sum of tw[:cnt] passes u (u < that sum; the last one
    on rounding)."""
    acc = 0.0
    for j in range(cnt):
        acc += tw[j]
        if u < acc:
            return tk[j]
    return tk[cnt - 1]


@njit(cache=True)
def draw_group_topic(u01, dw, dc, n_dw, n, gw, S, D, tk, tw):
    """Eq. 3 drawn with u01 uniform in [0, 1): from the word part (increasing topic order), else
    the doc part b_k A / R_k (total A D[n]; the doc's topics in increasing order), else the
    smoothing part (total A S[n]; all topics in increasing order)."""
    m_dk, dbits, _, _, inv_r, alpha, unit, _ = gw
    cnt, wsum, A = word_group_weights(dw, dc, n_dw, n, gw, tk, tw)
    u = u01 * (wsum + A * D[n] + A * S[n])
    if u < wsum:
        return pick_listed(u, tk, tw, cnt)
    u -= wsum
    if u < A * D[n]:
        acc = 0.0
        last = -1
        for blk in range(len(dbits)):
            x = dbits[blk]
            while x != 0:
                k = (blk << 6) + trailing_zeros(x)
                x &= x - ONE
                acc += A * _doc_coef(alpha[k], m_dk[k], unit, n)[1] * inv_r[k, n]
                last = k
                if u < acc:
                    return k
        if last >= 0:
            return last
    u -= A * D[n]
    acc = 0.0
    K = len(alpha)
    for k in range(K):
        acc += smooth_weight(k, n, A, alpha, unit, inv_r)
        if u < acc:
            return k
    return K - 1


@njit(cache=True)
def long_cache(inv_r1, r1_nk, ubits, fresh):
    """The long groups' caches of one chain (:func:`group_topic_weights`) as a tuple, set up
    where ``fresh``: 1 / rising(V beta + n_k, LINEAR_MAX) with the n_k it was computed at (-1:
    none), and a topic bitset. A function of the state: a resumed chain rebuilds the same."""
    if fresh:
        r1_nk[:] = -1
    return inv_r1, r1_nk, ubits


@njit(cache=True)
def group_topic_weights(words, offs, n, gw, n_k, vbeta, out, scratch, lc):
    """Eq. 3 for one group of ``n`` tokens (term ``words[j]``, ``offs[j]`` earlier tokens of the
    same term in the group), removed from the counts: unnormalised p(z_g = k) in ``out``, scaled
    by a constant for groups of more than LINEAR_MAX tokens. Returns the total. ``scratch``:
    (2, K) float64; ``lc``: :func:`long_cache`; of ``gw``, the doc's bitset and 1 / R_k are not
    read.

    gLDA (unit 0, 2): (alpha_k + m_dk) * prod_j (beta + n_kw[w_j, k] + off_j) / rising(V beta + n_k, n);
    restricted LDA (unit 1): the doc factor is rising(alpha_k + m_dk, n) over token counts."""
    m_dk, _, wbits, n_kw, _, alpha, unit, beta = gw
    K = len(n_k)
    if n <= LINEAR_MAX:
        for k in range(K):
            a = alpha[k] + m_dk[k]
            num = _rising(a, n) if unit == 1 else a
            for j in range(n):
                num *= beta + n_kw[words[j], k] + offs[j]
            out[k] = num / _rising(vbeta + n_k[k], n)
        total = 0.0
        for k in range(K):
            total += out[k]
        return total
    # long groups: the factors LINEAR_MAX tokens at a time (a chunk's ratio of numerator to
    # denominator stays in floating range), the running product rescaled to a maximum of 1
    # after every chunk; the products equal for many topics (a word without a count, the first
    # chunk's denominator) computed once
    inv_r1, r1_nk, ubits = lc
    part, den = scratch[0], scratch[1]
    for k in range(K):
        out[k] = 1.0 if unit == 1 else alpha[k] + m_dk[k]
    j = 0
    while j < n:
        stop = min(n, j + LINEAR_MAX)
        # a topic where no word of these tokens has a count gets the product at count 0
        c = 1.0
        ubits[:] = 0
        for q in range(j, stop):
            c *= beta + 0 + offs[q]
            for b in range(len(ubits)):
                ubits[b] |= wbits[words[q], b]
        part[:K] = c
        for b in range(len(ubits)):
            u = ubits[b]
            while u != 0:
                k = (b << 6) + trailing_zeros(u)
                u &= u - ONE
                p = 1.0
                for q in range(j, stop):
                    p *= beta + n_kw[words[q], k] + offs[q]
                part[k] = p
        if unit == 1:  # the doc factor rising(alpha_k + m_dk, n), the same chunks
            for k in range(K):
                a = alpha[k] + m_dk[k]
                p = 1.0
                for i in range(j, stop):
                    p *= a + i
                part[k] *= p
        if j == 0:
            for k in range(K):
                if r1_nk[k] != n_k[k]:  # the first chunk's denominator depends on n_k alone
                    inv_r1[k] = 1.0 / _rising(vbeta + n_k[k], LINEAR_MAX)
                    r1_nk[k] = n_k[k]
                den[k] = inv_r1[k]
        else:
            for k in range(K):
                den[k] = 1.0
            for i in range(j, stop):
                for k in range(K):
                    den[k] *= vbeta + n_k[k] + i
            for k in range(K):
                den[k] = 1.0 / den[k]
        top = 0.0
        for k in range(K):
            out[k] *= part[k] * den[k]
            top = max(top, out[k])
        scale = 1.0 / top
        for k in range(K):
            out[k] *= scale
        j = stop
    total = 0.0
    for k in range(K):
        total += out[k]
    return total
