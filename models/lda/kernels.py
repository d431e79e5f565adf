"""Numba kernels of LDA besides the sweep (arrays in, arrays out; no I/O): initialisation,
counts, doc lists, log-likelihood, alpha's optimisation, and a document's topic counts
from the kept samples' postings (the document model's kernels: :mod:`.lda_score`).

The sweep lives in :mod:`.lda_doc`.

Layout shared by the kernels
----------------------------
ord_doc : (n_tokens,) int32      doc of the i-th token in sweep order (shard first)
z_ord : (n_tokens,) int32        topic of each token in sweep order; -1 = not yet assigned
shard_tok_ptr : (S+1,) int64     tokens of shard s are shard_tok_ptr[s]:shard_tok_ptr[s+1]
cap_ptr : (n_docs+1,) int64      doc d's topic list lives in dt[cap_ptr[d]:cap_ptr[d+1]]
dt : int32, dt_nnz               doc d's topics packed with their counts as (topic << cshift) |
                                count, dt_nnz[d] of them used, in no particular order: one int
                                per entry halves the traffic of these random accesses
cshift                          31 - bit_length(K - 1); every doc count is < 2**cshift
"""
import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.dirichlet import doc_log_lik_parts, sum_from
from ..common.kernels.rng import randint
from ..common.kernels.sparse import label_counts, lower_bound


# ---------------------------------------------------------------------------------------------
# Initialisation, counts, conversions


@njit(cache=True, parallel=True)
def _init_random(shard_tok_ptr, ord_doc, active, z_ord, n_topics, rng):
    """z_ord[i] ~ Uniform{0..K-1} for tokens of active docs, -1 otherwise; rng (S, 4), one
    stream per shard."""
    S = len(shard_tok_ptr) - 1
    for s in prange(S):
        for i in range(shard_tok_ptr[s], shard_tok_ptr[s + 1]):
            z_ord[i] = randint(rng[s], n_topics) if active[ord_doc[i]] else -1


@njit(cache=True)
def _greedy_groups(order, cf, n_groups, group):
    """Assign terms (most frequent first, as listed in ``order``) to the group with the fewest
    tokens so far (ties: lowest group). Writes group (V,) int64."""
    load = np.zeros(n_groups, dtype=np.int64)
    for w in order:
        g = 0
        for h in range(1, n_groups):
            if load[h] < load[g]:
                g = h
        group[w] = g
        load[g] += cf[w]


@njit(cache=True)
def _counting_sort(key, n_keys, out):
    """Stable argsort of small non-negative int keys (< n_keys) into out (n,) int64."""
    cnt = np.zeros(n_keys + 1, dtype=np.int64)
    for i in range(len(key)):
        cnt[key[i] + 1] += 1
    for j in range(n_keys):
        cnt[j + 1] += cnt[j]
    for i in range(len(key)):
        k = key[i]
        out[cnt[k]] = i
        cnt[k] += 1


@njit(cache=True)
def _build_n_kw(term_ids, z_doc, n_kw, n_k):
    """n_kw, n_k from doc-order assignments (z = -1 ignored). Overwrites n_kw, n_k."""
    n_kw[:, :] = 0
    n_k[:] = 0
    for i in range(len(term_ids)):
        k = z_doc[i]
        if k >= 0:
            n_kw[term_ids[i], k] += 1
            n_k[k] += 1


@njit(cache=True, parallel=True)
def _build_doc_lists(doc_ptr, z_doc, cap_ptr, cshift, dt, dt_nnz):
    """Sorted packed (topic, count) list of every doc from doc-order z. Overwrites dt, dt_nnz."""
    n_docs = len(doc_ptr) - 1
    for d in prange(n_docs):
        zs = np.sort(z_doc[doc_ptr[d]:doc_ptr[d + 1]])
        topics = np.empty(len(zs), dtype=np.int64)
        counts = np.empty(len(zs), dtype=np.int64)
        nnz = label_counts(zs, topics, counts, 0)
        for j in range(nnz):
            dt[cap_ptr[d] + j] = (topics[j] << cshift) + counts[j]
        dt_nnz[d] = nnz


# ---------------------------------------------------------------------------------------------
# Log-likelihood (collapsed joint log p(w, z), Griffiths & Steyvers 2004 eq. 2-3)


@njit(cache=True)
def _log_lik_docs(cap_ptr, dt, cshift, dt_nnz, active, alpha):
    """log p(z) = sum_d [lgamma(A) - lgamma(n_d + A) + sum_k (lgamma(n_dk + a_k) - lgamma(a_k))]
    over the active docs' packed lists (:func:`models.common.kernels.dirichlet.doc_log_lik`)."""
    return sum_from(0.0, _log_lik_doc_parts(cap_ptr, dt, cshift, dt_nnz, active, alpha))


@njit(cache=True)
def _log_lik_doc_parts(cap_ptr, dt, cshift, dt_nnz, active, alpha):
    """Every doc's term of :func:`_log_lik_docs` (Ray workers sum their range's in turn)."""
    A = 0.0
    for k in range(len(alpha)):
        A += alpha[k]
    return doc_log_lik_parts(cap_ptr, dt, dt, dt_nnz, cshift, (1 << cshift) - 1, active, alpha, A)


# ---------------------------------------------------------------------------------------------
# Minka's fixed point for an asymmetric alpha with the digamma recurrence over count histograms
# (Wallach 2008, sec. 2.4; Mallet Dirichlet.learnParameters), with a Gamma(shape, scale) prior.


@njit(cache=True)
def _optimize_alpha(alpha, cap_ptr, dt, cshift, dt_nnz, active, max_len, n_iter,
                    shape, scale):
    """Update alpha (K,) float64 in place from the doc-topic counts of active docs."""
    K = len(alpha)
    hist = np.zeros((K, max_len + 1), dtype=np.int64)
    len_hist = np.zeros(max_len + 1, dtype=np.int64)
    limit = np.zeros(K, dtype=np.int64)
    _alpha_hists(cap_ptr, dt, cshift, dt_nnz, active, hist, len_hist, limit)
    _alpha_fixed_point(alpha, hist, len_hist, limit, n_iter, shape, scale)


@njit(cache=True)
def _alpha_hists(cap_ptr, dt, cshift, dt_nnz, active, hist, len_hist, limit):
    """Add the active docs' count histograms to hist (K, max_len + 1) and len_hist, and raise
    limit (K,) to every topic's largest count: integer sums, so ranges of documents may be
    counted apart and added."""
    for d in range(len(dt_nnz)):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        n_d = 0
        for j in range(dt_nnz[d]):
            k = dt[base + j] >> cshift
            v = dt[base + j] & ((1 << cshift) - 1)
            hist[k, v] += 1
            if v > limit[k]:
                limit[k] = v
            n_d += v
        len_hist[n_d] += 1


@njit(cache=True)
def _alpha_fixed_point(alpha, hist, len_hist, limit, n_iter, shape, scale):
    """Minka's iterations on the histograms of :func:`_alpha_hists`; alpha changes in place."""
    K = len(alpha)
    max_len = len(len_hist) - 1
    max_n = 0
    for n in range(max_len + 1):
        if len_hist[n] > 0:
            max_n = n
    for _ in range(n_iter):
        A = 0.0
        for k in range(K):
            A += alpha[k]
        denom = 0.0
        dig = 0.0
        for n in range(1, max_n + 1):
            dig += 1.0 / (A + n - 1)
            denom += len_hist[n] * dig
        for k in range(K):
            old = alpha[k]
            num = 0.0
            dig = 0.0
            for n in range(1, limit[k] + 1):
                dig += 1.0 / (old + n - 1)
                num += hist[k, n] * dig
            alpha[k] = (old * num + shape) / (denom + 1.0 / scale)
            if alpha[k] < 1e-10:
                alpha[k] = 1e-10


# ---------------------------------------------------------------------------------------------
# Document model P_LDA(w | d) for retrieval


@njit(cache=True)
def _doc_lists_to_postings(cap_ptr, dt, cshift, dt_nnz, n_topics, post_ptr, post_doc,
                           post_count):
    """Topic-major copy of the doc lists: docs with n_dk > 0 of topic k, ascending, are
    post_doc[post_ptr[k]:post_ptr[k+1]] with counts post_count. Overwrites post_*."""
    post_ptr[:] = 0
    for d in range(len(dt_nnz)):
        base = cap_ptr[d]
        for j in range(dt_nnz[d]):
            post_ptr[(dt[base + j] >> cshift) + 1] += 1
    for k in range(n_topics):
        post_ptr[k + 1] += post_ptr[k]
    fill = post_ptr[:-1].copy()
    for d in range(len(dt_nnz)):
        base = cap_ptr[d]
        for j in range(dt_nnz[d]):
            k = dt[base + j] >> cshift
            post_doc[fill[k]] = d
            post_count[fill[k]] = dt[base + j] & ((1 << cshift) - 1)
            fill[k] += 1


@njit(cache=True)
def _add_doc_counts(kd_ptr, kd_doc, kd_count, doc, out):
    """out[k] += n_dk of one sample's topic-major postings (``kd_ptr``: its (K + 1,) row): a
    binary search of ``doc`` in every topic's postings."""
    for k in range(len(kd_ptr) - 1):
        j = lower_bound(kd_doc, kd_ptr[k], kd_ptr[k + 1], doc)
        if j < kd_ptr[k + 1] and kd_doc[j] == doc:
            out[k] += kd_count[j]
