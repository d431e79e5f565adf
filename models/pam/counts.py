"""PAM: the random start, the conversion from document to sweep order, counts from z, the doc
lists, alpha by Minka's fixed point or by moment matching, and the collapsed log-likelihood
(see :mod:`models.pam.kernels`).
"""
import math

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.dirichlet import sum_from
from ..common.kernels.rng import randint
from ..common.kernels.sparse import label_counts


@njit(cache=True, parallel=True)
def init_random(shard_tok_ptr, ord_doc, active, z_ord, n_super, n_sub, rng):
    """z_ord[i] = i1 * n_sub + j1 with i1, j1 uniform for tokens of active docs, -1 otherwise.

    shard_tok_ptr : (S + 1,) int64, tokens of shard s are shard_tok_ptr[s]:[s + 1] (sweep order).
    rng : (S, 4) uint64. Changes z_ord and rng in place.
    """
    S = len(shard_tok_ptr) - 1
    for s in prange(S):
        for i in range(shard_tok_ptr[s], shard_tok_ptr[s + 1]):
            if active[ord_doc[i]]:
                a = randint(rng[s], n_super)
                b = randint(rng[s], n_sub)
                z_ord[i] = a * n_sub + b
            else:
                z_ord[i] = -1


@njit(cache=True, parallel=True)
def z_from_doc_order(z_doc, ord_pos, out):
    for i in prange(len(out)):
        out[i] = z_doc[ord_pos[i]]


@njit(cache=True)
def build_n_wj(term_ids, z_doc, n_sub, n_wj, n_j):
    """n_wj, n_j from doc-order pair keys (-1 ignored). Overwrites n_wj, n_j."""
    n_wj[:, :] = 0
    n_j[:] = 0
    for i in range(len(term_ids)):
        k = z_doc[i]
        if k >= 0:
            j = k % n_sub
            n_wj[term_ids[i], j] += 1
            n_j[j] += 1


@njit(cache=True, parallel=True)
def build_n_wj_runs(block_run_ptr, run_word, run_ptr, z_ord, n_sub, n_wj, n_j_parts):
    """n_wj from the sweep-order pair keys z_ord (-1 ignored), term group g's rows by thread g
    (no two groups share a term), each term's tokens one run after another; n_j_parts[g] gets
    group g's part of n_j. Overwrites n_wj and n_j_parts, shape (S, n_sub). The counts of
    :func:`build_n_wj`, with a row's tokens together rather than spread over the corpus."""
    S = block_run_ptr.shape[0]
    for w in prange(n_wj.shape[0]):
        n_wj[w, :] = 0
    for g in prange(S):
        n_j_parts[g, :] = 0
        for s in range(S):
            for r in range(block_run_ptr[s, g], block_run_ptr[s, g + 1]):
                row = n_wj[run_word[r]]
                for t in range(run_ptr[r], run_ptr[r + 1]):
                    k = z_ord[t]
                    if k >= 0:
                        j = k % n_sub
                        row[j] += 1
                        n_j_parts[g, j] += 1


@njit(cache=True, parallel=True)
def build_doc_lists(doc_ptr, z_doc, n_sub, cap_ptr, dp_key, dp_count, dp_nnz, n_ds):
    """Sorted (pair key, count) list and super-topic counts of every doc. Overwrites dp_*, n_ds."""
    n_docs = len(doc_ptr) - 1
    for d in prange(n_docs):
        base = cap_ptr[d]
        nnz = label_counts(np.sort(z_doc[doc_ptr[d]:doc_ptr[d + 1]]), dp_key, dp_count, base)
        n_ds[d, :] = 0
        for q in range(base, base + nnz):
            n_ds[d, dp_key[q] // n_sub] += dp_count[q]
        dp_nnz[d] = nnz


@njit(cache=True, parallel=True)
def compact_doc_lists(cap_ptr, dp_key, dp_count, dp_nnz, out_ptr, out_key, out_count):
    """Copy the used part of the doc lists into CSR arrays (out_ptr = cumsum of dp_nnz)."""
    for d in prange(len(dp_nnz)):
        a = cap_ptr[d]
        o = out_ptr[d]
        for q in range(dp_nnz[d]):
            out_key[o + q] = dp_key[a + q]
            out_count[o + q] = dp_count[a + q]


@njit(cache=True)
def super_sub_counts(cap_ptr, dp_key, dp_count, dp_nnz, out):
    """Corpus-level n_ij (n_super, n_sub) int64 from the doc lists (adds into out)."""
    n_sub = out.shape[1]
    for d in range(len(dp_nnz)):
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            out[key // n_sub, key % n_sub] += dp_count[base + q]


# ---------------------------------------------------------------------------------------------
# Hyperparameters: alpha_ij by moment matching (section 2.4)


@njit(cache=True)
def moment_match(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha):
    """Re-estimate every row alpha[i, :] from the ratios r_dij = n_ij^d / n_i^d.

    Over the active documents with n_i^d > 0 plus one pseudo-document in which every pair
    occurs once (ratio 1/s' for every j), with N_i documents in all:

        mean_ij = sum_d r_dij / N_i,      var_ij = sum_d (r_dij - mean_ij)^2 / N_i
        m_ij    = mean_ij (1 - mean_ij) / var_ij - 1
        alpha_ij = S_i * mean_ij,  log S_i = mean over j of log m_ij

    (moment matching for a Dirichlet, Minka 2000, with the precision taken as the geometric
    mean of the per-component estimates). The pseudo-document keeps every mean positive and
    every m_ij > 0; a sub-topic whose ratios are all equal (var_ij = 0, up to 1e-12 relative)
    carries no information on the precision and is left out of the mean (if all are, S_i is
    kept). A super-topic used by no document keeps its row. The two passes over the documents
    are :func:`moment_sums` and :func:`moment_squares` (Ray workers run them on their ranges in
    turn, each continuing the previous one's sums).

    alpha : ndarray of shape (n_super, n_sub), float64, changed in place.
    """
    n_super, n_sub = alpha.shape
    n_used = np.zeros(n_super, dtype=np.int64)
    nz = np.zeros((n_super, n_sub), dtype=np.int64)
    mean = np.zeros((n_super, n_sub))
    moment_sums(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, n_used, nz, mean)
    moment_means(n_used, mean)
    ss = np.zeros((n_super, n_sub))
    moment_squares(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, mean, ss)
    moment_finish(alpha, n_used, nz, mean, ss)


@njit(cache=True)
def moment_sums(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, n_used, nz, mean):
    """The first pass of :func:`moment_match`, added into n_used (documents using each
    super-topic), nz (documents holding each pair) and mean (the sums of r_dij)."""
    n_super, n_sub = mean.shape
    for d in range(len(dp_nnz)):
        if active[d] == 0:
            continue
        for i in range(n_super):
            if n_ds[d, i] > 0:
                n_used[i] += 1
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            i = key // n_sub
            j = key - i * n_sub
            mean[i, j] += dp_count[base + q] / n_ds[d, i]
            nz[i, j] += 1


@njit(cache=True)
def moment_means(n_used, mean):
    """The sums of :func:`moment_sums` as means, with the pseudo-document (in place)."""
    n_super, n_sub = mean.shape
    p = 1.0 / n_sub
    for i in range(n_super):
        N = n_used[i] + 1
        for j in range(n_sub):
            mean[i, j] = (mean[i, j] + p) / N


@njit(cache=True)
def moment_squares(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, mean, ss):
    """The second pass of :func:`moment_match`: the squared deviations of the documents'
    ratios from the means, added into ss."""
    n_sub = mean.shape[1]
    for d in range(len(dp_nnz)):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            i = key // n_sub
            j = key - i * n_sub
            dv = dp_count[base + q] / n_ds[d, i] - mean[i, j]
            ss[i, j] += dv * dv


@njit(cache=True)
def moment_finish(alpha, n_used, nz, mean, ss):
    """alpha from the means and squared deviations of both passes (:func:`moment_match`)."""
    n_super, n_sub = alpha.shape
    p = 1.0 / n_sub
    for i in range(n_super):
        if n_used[i] == 0:
            continue
        N = n_used[i] + 1
        log_sum = 0.0
        n_valid = 0
        S = 0.0
        for j in range(n_sub):
            S += alpha[i, j]
            m = mean[i, j]
            dv = p - m
            var = (ss[i, j] + (n_used[i] - nz[i, j]) * m * m + dv * dv) / N
            # every ratio equal to the mean says nothing about the precision: skip it
            if var > 1e-12 * m * (1.0 - m):
                log_sum += math.log(m * (1.0 - m) / var - 1.0)
                n_valid += 1
        if n_valid > 0:
            S = math.exp(log_sum / n_valid)
        for j in range(n_sub):
            alpha[i, j] = S * mean[i, j]


@njit(cache=True, parallel=True)
def _count_runs(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, n_super, n_sub):
    """The counts of every pair key (n_ij^d) and of every super-topic (n_i^d > 0) over the
    active documents, each key's counts one ascending run: (pair_ptr, pair_n, tot_ptr, tot_n),
    the same order as sorting (key, count) pairs, built in linear time by bucketing on the key
    and sorting each (short) run apart."""
    n_docs = len(dp_nnz)
    n_keys = n_super * n_sub
    pair_ptr = np.zeros(n_keys + 1, dtype=np.int64)
    tot_ptr = np.zeros(n_super + 1, dtype=np.int64)
    for d in range(n_docs):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            pair_ptr[dp_key[base + q] + 1] += 1
        for i in range(n_super):
            if n_ds[d, i] > 0:
                tot_ptr[i + 1] += 1
    for k in range(n_keys):
        pair_ptr[k + 1] += pair_ptr[k]
    for i in range(n_super):
        tot_ptr[i + 1] += tot_ptr[i]
    pair_n = np.empty(pair_ptr[n_keys], dtype=np.int32)
    tot_n = np.empty(tot_ptr[n_super], dtype=np.int32)
    fill = pair_ptr[:n_keys].copy()
    tfill = tot_ptr[:n_super].copy()
    for d in range(n_docs):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            pair_n[fill[key]] = dp_count[base + q]
            fill[key] += 1
        for i in range(n_super):
            if n_ds[d, i] > 0:
                tot_n[tfill[i]] = n_ds[d, i]
                tfill[i] += 1
    for i in prange(n_super):
        tot_n[tot_ptr[i]:tot_ptr[i + 1]].sort()
        for key in range(i * n_sub, (i + 1) * n_sub):
            pair_n[pair_ptr[key]:pair_ptr[key + 1]].sort()
    return pair_ptr, pair_n, tot_ptr, tot_n


@njit(cache=True)
def _run_lengths(ptr, values):
    """Every row's ascending run ``values[ptr[r]:ptr[r + 1]]`` as (distinct value, how many):
    (out_ptr int64, out_value int32, out_mult int64)."""
    n_rows = len(ptr) - 1
    out_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    for r in range(n_rows):
        n = 0
        for b in range(ptr[r], ptr[r + 1]):
            if b == ptr[r] or values[b] != values[b - 1]:
                n += 1
        out_ptr[r + 1] = out_ptr[r] + n
    out_value = np.empty(out_ptr[n_rows], dtype=np.int32)
    out_mult = np.zeros(out_ptr[n_rows], dtype=np.int64)
    for r in range(n_rows):
        o = out_ptr[r] - 1
        for b in range(ptr[r], ptr[r + 1]):
            if b == ptr[r] or values[b] != values[b - 1]:
                o += 1
                out_value[o] = values[b]
            out_mult[o] += 1
    return out_ptr, out_value, out_mult


def count_hists(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, n_super, n_sub):
    """What Minka's fixed point reads of the active documents (:func:`ml_alpha`): every pair
    key's counts n_ij^d and every super-topic's n_i^d > 0 as ascending (value, how many) runs,
    (pair_ptr, pair_value, pair_mult, tot_ptr, tot_value, tot_mult). Order-free, so document
    ranges' histograms add up (:func:`merge_count_hists`)."""
    pair_ptr, pair_n, tot_ptr, tot_n = _count_runs(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active,
                                                   n_super, n_sub)
    return _run_lengths(pair_ptr, pair_n) + _run_lengths(tot_ptr, tot_n)


def _merge_runs(parts):
    """The (ptr, value, mult) runs of several document ranges as one (multiplicities added)."""
    n_rows = len(parts[0][0]) - 1
    row = np.concatenate([np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(p[0])) for p in parts])
    value = np.concatenate([p[1] for p in parts]).astype(np.int64)
    mult = np.concatenate([p[2] for p in parts])
    keys, inv = np.unique(row * (int(value.max(initial=0)) + 1) + value, return_inverse=True)
    out_mult = np.zeros(len(keys), dtype=np.int64)
    np.add.at(out_mult, inv.ravel(), mult)
    width = int(value.max(initial=0)) + 1
    ptr = np.searchsorted(keys // width, np.arange(n_rows + 1)).astype(np.int64)
    return ptr, (keys % width).astype(np.int32), out_mult


def merge_count_hists(parts):
    """The :func:`count_hists` of a corpus from those of its document ranges."""
    return (_merge_runs([p[:3] for p in parts]) + _merge_runs([p[3:] for p in parts]))


@njit(cache=True, inline="always")
def _digamma_sum(a, value, mult, lo, hi):
    """sum over the ascending counts (value[b], mult[b] times each) of psi(n + a) - psi(a) =
    sum_{k<n} 1 / (a + k), each term added once and carried from one count to the next, and
    each count's sum added as often as it occurs."""
    acc = 0.0
    dig = 0.0
    k = 0
    for b in range(lo, hi):
        n = value[b]
        while k < n:
            dig += 1.0 / (a + k)
            k += 1
        for _ in range(mult[b]):
            acc += dig
    return acc


def ml_alpha(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha, n_iter, shape, scale):
    """Re-estimate every row alpha[i, :] by Minka's fixed point for the Dirichlet-multinomial
    (Wallach et al. 2009, with a Gamma(shape, scale) prior on every alpha_ij as Mallet does):

        alpha_ij <- (alpha_ij sum_d [psi(n_ij^d + alpha_ij) - psi(alpha_ij)] + shape - 1)
                    / (sum_d [psi(n_i^d + S_i) - psi(S_i)] + 1 / scale)

    over the active documents with n_i^d > 0, ``n_iter`` times from the current alpha. This is
    the (MAP) estimate of the alpha that the collapsed joint p(z, z' | alpha) depends on; it
    needs no pseudo-document. For integer n, psi(n + a) - psi(a) = sum_{k<n} 1 / (a + k), so
    the sums run over each count's histogram once per iteration (:func:`count_hists`).

    alpha : ndarray of shape (n_super, n_sub), float64, changed in place.
    """
    hists = count_hists(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, *alpha.shape)
    ml_alpha_hists(alpha, *hists, n_iter, shape, scale)


@njit(cache=True, parallel=True)
def ml_alpha_hists(alpha, pair_ptr, pair_value, pair_mult, tot_ptr, tot_value, tot_mult, n_iter,
                   shape, scale):
    """:func:`ml_alpha` from the documents' :func:`count_hists`. Rows are independent: they
    run in parallel, every sum in the same order whatever the threads. A super-topic used by
    no document keeps its row; alpha_ij >= 1e-10 keeps every pair reachable."""
    n_super, n_sub = alpha.shape
    for i in prange(n_super):
        if tot_ptr[i + 1] == tot_ptr[i]:
            continue
        num = np.empty(n_sub)
        for _ in range(n_iter):
            S = 0.0
            for j in range(n_sub):
                S += alpha[i, j]
            den = _digamma_sum(S, tot_value, tot_mult, tot_ptr[i], tot_ptr[i + 1])
            for j in range(n_sub):
                key = i * n_sub + j
                num[j] = _digamma_sum(alpha[i, j], pair_value, pair_mult, pair_ptr[key], pair_ptr[key + 1])
            for j in range(n_sub):
                new = (alpha[i, j] * num[j] + shape - 1.0) / (den + 1.0 / scale)
                alpha[i, j] = max(new, 1e-10)


# ---------------------------------------------------------------------------------------------
# Log-likelihood: collapsed log p(w, z, z' | alpha_r, alpha, beta)


def log_lik_docs(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha_r, alpha, alpha_sum):
    """The sum over the documents of :func:`log_lik_doc_parts`, in document order."""
    return sum_from(0.0, log_lik_doc_parts(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha_r,
                                           alpha, alpha_sum))


@njit(cache=True, parallel=True)
def log_lik_doc_parts(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha_r, alpha, alpha_sum):
    """Root and super-topic Dirichlet-multinomial terms of every active document (0 for the
    others); Ray workers sum their range's in turn:

    lgamma(s a_r) - lgamma(n_d + s a_r) + sum_i [lgamma(n_i + a_r) - lgamma(a_r)]
    + sum_{i: n_i > 0} [lgamma(S_i) - lgamma(n_i + S_i) + sum_j (lgamma(n_ij + a_ij) - lgamma(a_ij))]
    """
    n_docs = len(dp_nnz)
    n_super, n_sub = alpha.shape
    lg_root = math.lgamma(n_super * alpha_r)
    lg_ar = math.lgamma(alpha_r)
    part = np.zeros(n_docs)
    for d in prange(n_docs):
        if active[d] == 0:
            continue
        n_d = 0
        acc = 0.0
        for i in range(n_super):
            n = n_ds[d, i]
            if n > 0:
                n_d += n
                acc += math.lgamma(n + alpha_r) - lg_ar
                acc += math.lgamma(alpha_sum[i]) - math.lgamma(n + alpha_sum[i])
        acc += lg_root - math.lgamma(n_d + n_super * alpha_r)
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            i = key // n_sub
            a = alpha[i, key - i * n_sub]
            acc += math.lgamma(dp_count[base + q] + a) - math.lgamma(a)
        part[d] = acc
    return part
