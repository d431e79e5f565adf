"""P_LDA(w | d) averaged over the kept samples, for every document, in one pass (arrays in,
arrays out; no I/O).

Per sample cs (Wei & Croft 2006, eq. 3), with inv[cs, d] = 1 / (n_d + A_cs):

    P_cs(w | d) = inv[cs, d] * (smooth[cs, d] + ap[cs, w] + sum_{k: n_kw > 0} n_dk n_kw / (n_k + V b))

The mean over samples splits into a per-document constant (the mean of inv * smooth, computed
once per model), a part that depends on the document only through its length (the mean of
inv * ap: one value per distinct length and term) and the sparse part, added straight into the
mean through the topic-major postings, so nothing of size n_samples x n_docs is written per
query; :func:`p_w_d_per_sample` writes the table of every sample for the per-sample views.
"""
import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.prefetch import prefetch
from ..common.kernels.sparse import lower_bound


@njit(cache=True)
def inv_lengths(alpha, doc_len, inv_len):
    """inv_len[cs, d] = 1 / (n_d + A) of every sample, A = sum(alpha[cs]) summed in topic order."""
    for cs in range(alpha.shape[0]):
        A = 0.0
        for k in range(alpha.shape[1]):
            A += alpha[cs, k]
        for d in range(len(doc_len)):
            inv_len[cs, d] = 1.0 / (doc_len[d] + A)


@njit(cache=True, parallel=True)
def doc_constants(kd_ptr, kd_doc, kd_count, n_k, beta, n_terms, smooth):
    """Per (sample, doc): smooth = sum_k n_dk beta / (n_k + V beta), the term-independent part
    of sum_k n_dk phi_kw (:func:`range_postings` computes it too, in the same order).
    Overwrites smooth (n_cs, n_docs)."""
    n_cs = kd_ptr.shape[0]
    K = kd_ptr.shape[1] - 1
    vbeta = n_terms * beta
    for cs in prange(n_cs):
        smooth[cs] = 0.0
        for k in range(K):
            b = beta / (n_k[cs, k] + vbeta)
            for j in range(kd_ptr[cs, k], kd_ptr[cs, k + 1]):
                smooth[cs, kd_doc[j]] += kd_count[j] * b


@njit(cache=True, parallel=True)
def mean_constants(inv_len, smooth, out):
    """out[d] = mean over samples of inv_len[cs, d] * smooth[cs, d]."""
    n_cs, n_docs = inv_len.shape
    for d in prange(n_docs):
        acc = 0.0
        for cs in range(n_cs):
            acc += inv_len[cs, d] * smooth[cs, d]
        out[d] = acc / n_cs


@njit(cache=True)
def alpha_phi(tw_ptr, tw_topic, tw_count, n_k, alpha, beta, n_terms, term_ids):
    """ap[cs, t] = sum_k alpha_k phi_kw of each sample and query term (dense over K, sparse
    over the term's topics); ``tw_ptr`` may hold only some terms' rows (``term_ids`` index
    its columns), ``n_terms`` is the vocabulary's size V."""
    n_cs, K = alpha.shape
    vbeta = n_terms * beta
    ap = np.zeros((n_cs, len(term_ids)))
    for cs in range(n_cs):
        dense = 0.0
        for k in range(K):
            dense += alpha[cs, k] * beta / (n_k[cs, k] + vbeta)
        for t in range(len(term_ids)):
            w = term_ids[t]
            acc = dense
            for j in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                k = tw_topic[j]
                acc += alpha[cs, k] * tw_count[j] / (n_k[cs, k] + vbeta)
            ap[cs, t] = acc
    return ap


@njit(cache=True, parallel=True)
def len_means(ap, alpha_sum, lengths, out):
    """out[t, l] = mean over samples cs of ap[cs, t] / (lengths[l] + alpha_sum[cs]), the samples
    summed in order: :func:`p_w_d_mean`'s by_len, the part of P_LDA(w_t | d) that depends on the
    document only through its length. Not a BLAS product: its threads would spin beside the
    kernels' after it returns, and its sums change with their number. Overwrites out
    (n_terms, n_lengths)."""
    n_cs, T = ap.shape
    n_len = len(lengths)
    inv = np.empty((n_cs, n_len))
    for cs in range(n_cs):
        for l in range(n_len):
            inv[cs, l] = 1.0 / (alpha_sum[cs] + lengths[l])
    for t in prange(T):
        row = out[t]
        row[:] = 0.0
        for cs in range(n_cs):
            c = ap[cs, t]
            for l in range(n_len):
                row[l] += c * inv[cs, l]
        for l in range(n_len):
            row[l] /= n_cs


@njit(cache=True, parallel=True)
def posting_bounds(kd_ptr, kd_doc, n_docs, n_blocks):
    """Where each topic's postings cross the document ranges of :func:`p_w_d_mean`:
    out[cs, k, b] = the first posting of (cs, k) with doc >= b * n_docs // n_blocks
    (out[cs, k, n_blocks] = its end), (n_cs, K, n_blocks + 1) int64."""
    n_cs, K1 = kd_ptr.shape
    out = np.empty((n_cs, K1 - 1, n_blocks + 1), dtype=np.int64)
    for cs in prange(n_cs):
        for k in range(K1 - 1):
            end = kd_ptr[cs, k + 1]
            out[cs, k, 0] = kd_ptr[cs, k]
            for blk in range(1, n_blocks):
                out[cs, k, blk] = lower_bound(kd_doc, out[cs, k, blk - 1], end, blk * n_docs // n_blocks)
            out[cs, k, n_blocks] = end
    return out


@njit(cache=True, parallel=True)
def range_postings(bounds, kd_doc, kd_count, n_docs, n_k, beta, n_terms, off, cnt, smooth):
    """The postings of :func:`posting_bounds`'s document ranges relative to their range:
    off[i] = kd_doc[i] - the range's first document (a range spans at most 65,536 documents,
    so uint16 holds it) and cnt[i] = kd_count[i] (uint16 where every count fits: the largest
    count is returned, and a caller with uint16 ``cnt`` redoes the pass with int32 counts past
    it), so that :func:`p_w_d_mean` reads half the bytes a posting. Unless it has no rows,
    ``smooth`` (n_cs, n_docs) gets :func:`doc_constants` from the same read of the postings,
    a range's rows staying in cache. Overwrites off, cnt (len(kd_doc),) and smooth."""
    n_cs, K, n_bounds = bounds.shape
    n_blocks = n_bounds - 1
    vbeta = n_terms * beta
    with_smooth = smooth.shape[0] > 0
    top = np.zeros(n_blocks, dtype=np.int64)
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        high = 0
        for cs in range(n_cs):
            if with_smooth:
                smooth[cs, d0:d1] = 0.0
            for k in range(K):
                b = beta / (n_k[cs, k] + vbeta)
                for i in range(bounds[cs, k, blk], bounds[cs, k, blk + 1]):
                    d, c = kd_doc[i], kd_count[i]
                    off[i] = d - d0
                    cnt[i] = c
                    high = max(high, np.int64(c))
                    if with_smooth:
                        smooth[cs, d] += c * b
        top[blk] = high
    return top.max() if n_blocks > 0 else 0


# p_w_d_mean: the postings of the next topic prefetched (a few cache lines: the hardware
# prefetcher follows a run once it has started)
AHEAD = 128


@njit(cache=True, inline="always")
def _prefetch_run(off, cnt, lo, hi):
    """Prefetches a line per 64 bytes of off[lo:hi] and cnt[lo:hi] (at most AHEAD postings), so
    that their first lines come from memory while the current topic's postings are added."""
    for i in range(lo, min(hi, lo + AHEAD), 64 // cnt.itemsize):
        prefetch(off, i)
        prefetch(cnt, i)


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def p_w_d_mean(bounds, off, cnt, tw_ptr, tw_topic, tw_count, n_k, beta, n_terms, inv_len,
               base, len_slot, by_len, term_ids, shared_len, out):
    """out[t, d] = P_LDA(w_t | d) averaged over the samples (module docstring), term-major so
    that the postings of a topic, docs ascending, add to ascending addresses.

    tw_ptr, tw_topic, tw_count : topic-word rows, of the query terms only where ``term_ids``
    index the columns of such a ``tw_ptr``; n_terms : the vocabulary's size V.
    bounds : :func:`posting_bounds`, whose document ranges are processed in parallel, each term
    after term, so that a term's row of the range stays in cache while every sample's postings
    add to it; off, cnt : the postings relative to their range (:func:`range_postings`).
    base : (n_docs,) the per-document constant; by_len : (n_terms, n_lengths) the
    mean of inv * ap for each distinct document length (a term's row stays in cache while its
    documents read it), len_slot[d] the column of document d.
    ``shared_len``: every sample has the same sum(alpha) (alpha not optimised), so inv_len's
    rows are equal and the sparse part's sum over samples is multiplied by inv_len[0, d] once
    per (term, document) rather than once per posting. Overwrites out (n_terms, n_docs).
    """
    n_cs = bounds.shape[0]
    n_blocks = bounds.shape[2] - 1
    T, n_docs = out.shape
    vbeta = n_terms * beta
    scale = 1.0 / n_cs
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        for t in range(T):
            row = out[t, d0:d1]
            for r in range(d1 - d0):
                row[r] = 0.0 if shared_len else base[d0 + r] + by_len[t, len_slot[d0 + r]]
            w = term_ids[t]
            for cs in range(n_cs):
                end = tw_ptr[cs, w + 1]
                for j in range(tw_ptr[cs, w], end):
                    k = tw_topic[j]
                    if j + 1 < end:
                        nxt = tw_topic[j + 1]
                        _prefetch_run(off, cnt, bounds[cs, nxt, blk], bounds[cs, nxt, blk + 1])
                    coef = scale * tw_count[j] / (n_k[cs, k] + vbeta)
                    lo = bounds[cs, k, blk]
                    hi = bounds[cs, k, blk + 1]
                    if shared_len:
                        for i in range(lo, hi):
                            row[off[i]] += cnt[i] * coef
                    else:
                        for i in range(lo, hi):
                            r = off[i]
                            row[r] += cnt[i] * coef * inv_len[cs, d0 + r]
            if shared_len:
                for r in range(d1 - d0):
                    d = d0 + r
                    row[r] = base[d] + by_len[t, len_slot[d]] + row[r] * inv_len[0, d]


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def p_w_d_per_sample(kd_ptr, kd_doc, kd_count, tw_ptr, tw_topic, tw_count, n_k, beta, inv_len,
                     smooth, ap, term_ids, n_blocks, out):
    """out[cs, d, t] = P_cs(w_t | d) of every sample (module docstring; ap from
    :func:`alpha_phi`), documents split into ``n_blocks`` ranges as in :func:`p_w_d_mean`.
    Overwrites out (n_cs, n_docs, n_terms)."""
    n_cs, n_docs, T = out.shape
    V = tw_ptr.shape[1] - 1
    vbeta = V * beta
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        for cs in range(n_cs):
            for t in range(T):
                w = term_ids[t]
                for d in range(d0, d1):
                    out[cs, d, t] = smooth[cs, d] + ap[cs, t]
                for j in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                    k = tw_topic[j]
                    coef = tw_count[j] / (n_k[cs, k] + vbeta)
                    lo = lower_bound(kd_doc, kd_ptr[cs, k], kd_ptr[cs, k + 1], d0)
                    hi = lower_bound(kd_doc, lo, kd_ptr[cs, k + 1], d1)
                    for i in range(lo, hi):
                        out[cs, kd_doc[i], t] += kd_count[i] * coef
                for d in range(d0, d1):
                    out[cs, d, t] *= inv_len[cs, d]
