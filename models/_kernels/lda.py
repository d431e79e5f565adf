"""Numba kernels for LDA by collapsed Gibbs sampling (arrays in, arrays out; no I/O).

Sampler ("fplus"): the exact collapsed conditional (Griffiths & Steyvers 2004, eq. 5)

    p(z_i = k | rest) ~ (n_dk + alpha_k) (n_kw + beta) / (n_k + V beta)

is split into the bucket decomposition of SparseLDA (Yao et al. 2009, eq. 2-3), regrouped in
word-by-word order as in F+LDA (Yu et al. 2015):

    doc bucket   r_k = n_dk * c_k          (sparse: only the topics present in doc d)
    word bucket  q_k = alpha_k * c_k       (dense, held in an F+ tree over K leaves)
    c_k = (n_kw + beta) / (n_k + V beta)   for the current word w

Tokens of one document shard are visited grouped by term (one "run" per (shard, term)); the
doc bucket costs O(nnz of doc d) per token. Between runs ``c`` and the tree hold the base state
of a term absent from the shard, c_k = beta / (n_k + V beta); a run patches only the topics in
its term's row (found by a scan of the int row) and restores those still nonzero at its end.
Most runs are of rare terms with 1-3 tokens, so this replaces O(K) divisions and an O(P) tree
build per run by a few O(log K) leaf updates (a run touching many topics rebuilds in full).
Inner tree nodes are recomputed from their children, so the tree is a pure function of its
leaves and does not depend on the order of the updates. c is always rounded as
(n_kw + beta) * (1 / (n_k + V beta)). Both buckets are exact, so the sampler draws from the
exact conditional.

Parallelism (AD-LDA, Newman et al. 2009): documents are split into FIXED shards; each shard
samples against its own copy of ``n_kw``/``n_k`` and the copies are merged (integer sums,
hence exactly) after the sweep. The shard count is independent of the thread count, and every
(chain, shard) has its own rng stream, so results never depend on the number of threads.

Layout shared by the kernels
----------------------------
ord_doc : (n_tokens,) int32      doc of the i-th token in sweep order (shard, then term, then doc)
run_word, run_ptr               tokens run_ptr[r]:run_ptr[r+1] (sweep order) all have term run_word[r]
shard_run_ptr                   runs of shard s are shard_run_ptr[s]:shard_run_ptr[s+1]
z_ord : (n_tokens,) int32        topic of each token in sweep order; -1 = not yet assigned
cap_ptr : (n_docs+1,) int64      doc d's sparse topic list lives in dt[cap_ptr[d]:cap_ptr[d+1]]
dt : int32, dt_nnz               doc d's topics, sorted, packed with their counts as
                                (topic << cshift) | count, dt_nnz[d] of them used: one int per
                                entry halves the traffic of these random accesses, and the
                                packed values sort as the topics do
cshift                          31 - bit_length(K - 1); every count is < 2**cshift
"""
import math

import numpy as np
from numba import njit, prange

from .ftree import tree_build, tree_sample, tree_set
from .rng import randint, uniform
from .sparse import lower_bound


# ---------------------------------------------------------------------------------------------
# One shard of one sweep


@njit(cache=True, inline="always")
def _set_c(tree, P, c, alpha, k, ck):
    c[k] = ck
    tree_set(tree, P, k, alpha[k] * ck)


@njit(cache=True, inline="always")
def _c_of(n, n_k, beta, vbeta):
    """c_k = (n_kw + beta) / (n_k + V beta), always rounded as (n_kw + beta) * (1 / (...))."""
    return (n + beta) * (1.0 / (n_k + vbeta))


@njit(cache=True)
def _set_all_c(tree, P, c, alpha, rw, n_k, beta, vbeta):
    """c and the tree for the term row rw, rebuilt in full (leaves K:P stay 0)."""
    K = len(c)
    for k in range(K):
        ck = _c_of(rw[k], n_k[k], beta, vbeta)
        c[k] = ck
        tree[P + k] = alpha[k] * ck
    tree_build(tree, P)


@njit(cache=True)
def _set_base_c(tree, P, c, alpha, n_k, beta, vbeta):
    """c and the tree for an all-zero term row (the base state between runs), in full."""
    K = len(c)
    for k in range(K):
        ck = _c_of(0, n_k[k], beta, vbeta)
        c[k] = ck
        tree[P + k] = alpha[k] * ck
    for k in range(K, P):
        tree[P + k] = 0.0
    tree_build(tree, P)


@njit(cache=True)
def _sweep_shard(r0, r1, run_word, run_ptr, ord_doc, z_ord, n_kw, n_k, cap_ptr, dt, cshift,
                 dt_nnz, active, alpha, beta, vbeta, tree, c, pbuf, row, nz, log_ptr, log_topic,
                 log_delta, log_len, write_through, rng):
    """Resample every active token of runs r0:r1 once.

    ``n_kw`` is only read (the snapshot every shard samples against); a term occurs in one run
    per shard, so its row is copied into ``row`` at the start of the run and, at the end, the
    changes are written to the run's slot of the delta log (log_topic/log_delta from
    log_ptr[r], log_len[r] entries) for :func:`_apply_log` to merge. With ``write_through`` the
    run works on the row of ``n_kw`` itself (the caller guarantees that no other shard reads or
    writes these terms meanwhile) and the log is untouched.

    Changes in place: z_ord, n_k (this shard's copy), dt, dt_nnz (this shard's docs only), the
    log, tree, c, pbuf, row, nz (scratch) and rng.
    """
    K = n_kw.shape[1]
    P = tree.shape[0] // 2
    cmask = (1 << cshift) - 1
    # Patching a leaf costs about log2(P), rebuilding everything about P + K.
    log_p = 1
    while (1 << log_p) < P:
        log_p += 1
    max_patch = (P + K) // log_p
    _set_base_c(tree, P, c, alpha, n_k, beta, vbeta)
    for r in range(r0, r1):
        w = run_word[r]
        a = run_ptr[r]
        b = run_ptr[r + 1]
        if write_through:
            rw = n_kw[w]  # no other shard touches term w during this block
        else:
            rw = row
            rw[:] = n_kw[w]
        m = 0
        for k in range(K):
            nz[m] = k
            m += rw[k] != 0
        if m > max_patch:
            _set_all_c(tree, P, c, alpha, rw, n_k, beta, vbeta)
        else:
            for j in range(m):
                k = nz[j]
                _set_c(tree, P, c, alpha, k, _c_of(rw[k], n_k[k], beta, vbeta))
        for i in range(a, b):
            d = ord_doc[i]
            if active[d] == 0:
                continue
            k_old = z_ord[i]
            base = cap_ptr[d]
            nnz = dt_nnz[d]
            pos_old = -1
            if k_old >= 0:
                rw[k_old] -= 1
                n_k[k_old] -= 1
                _set_c(tree, P, c, alpha, k_old, _c_of(rw[k_old], n_k[k_old], beta, vbeta))
                pos_old = lower_bound(dt, base, base + nnz, k_old << cshift) - base
                # A count that drops to 0 stays in the list until after sampling; it adds
                # exactly 0.0 to the doc bucket and can never be selected.
                dt[base + pos_old] -= 1
            # doc bucket (eq. 3, second term, restricted to the topics of doc d)
            dsum = 0.0
            for j in range(nnz):
                e = dt[base + j]
                dsum += (e & cmask) * c[e >> cshift]
                pbuf[j] = dsum
            total = dsum + tree[1]
            u = uniform(rng) * total
            if u < dsum:
                j = 0
                while pbuf[j] <= u:
                    j += 1
                k_new = dt[base + j] >> cshift
                pos_new = j
            else:
                k_new = tree_sample(tree, P, u - dsum, K)
                pos_new = -1
            # doc list update
            if k_new == k_old:
                dt[base + pos_old] += 1
            else:
                if pos_old >= 0 and (dt[base + pos_old] & cmask) == 0:
                    for j in range(pos_old, nnz - 1):
                        dt[base + j] = dt[base + j + 1]
                    nnz -= 1
                    if pos_new > pos_old:
                        pos_new -= 1
                if pos_new >= 0:
                    dt[base + pos_new] += 1
                else:
                    key = k_new << cshift
                    j = lower_bound(dt, base, base + nnz, key) - base
                    if j < nnz and (dt[base + j] >> cshift) == k_new:
                        dt[base + j] += 1
                    else:
                        for jj in range(nnz, j, -1):
                            dt[base + jj] = dt[base + jj - 1]
                        dt[base + j] = key + 1
                        nnz += 1
                dt_nnz[d] = nnz
            rw[k_new] += 1
            n_k[k_new] += 1
            _set_c(tree, P, c, alpha, k_new, _c_of(rw[k_new], n_k[k_new], beta, vbeta))
            z_ord[i] = k_new
        # back to the base state; a topic whose row entry is 0 already holds it
        m = 0
        for k in range(K):
            nz[m] = k
            m += rw[k] != 0
        if m > max_patch:
            _set_base_c(tree, P, c, alpha, n_k, beta, vbeta)
        else:
            for j in range(m):
                k = nz[j]
                _set_c(tree, P, c, alpha, k, _c_of(0, n_k[k], beta, vbeta))
        if write_through:
            continue
        m = 0
        o = log_ptr[r]
        for k in range(K):
            dlt = row[k] - n_kw[w, k]
            if dlt != 0:
                log_topic[o + m] = k
                log_delta[o + m] = dlt
                m += 1
        log_len[r] = m


@njit(cache=True, parallel=True)
def _sweep_lda(shard_run_ptr, run_word, run_ptr, ord_doc, z_ord, n_kw, n_k, cap_ptr, dt, cshift,
               dt_nnz, active, alpha, beta, local_n_k, trees, cs, pbufs, rows, nzs, log_ptr,
               log_topic, log_delta, log_len, rng):
    """One Gibbs sweep of one chain over all shards (AD-LDA), then the deterministic merge.

    Parameters
    ----------
    local_n_k : ndarray of shape (n_shards, n_topics), int64
        Each shard's copy of n_k.
    trees : (n_shards, 2 P) float64; cs, pbufs : (n_shards, n_topics) float64;
    rows, nzs : (n_shards, n_topics) int32
        Per-shard scratch.
    log_ptr, log_topic, log_delta, log_len
        Delta log: run r may write up to log_ptr[r+1] - log_ptr[r] (topic, delta) pairs.
    rng : ndarray of shape (n_shards, 4), uint64
        One stream per shard of this chain.

    Changes in place: z_ord, n_kw, n_k, dt, dt_nnz, the scratch arrays, the log and rng.
    """
    n_shards = len(shard_run_ptr) - 1
    vbeta = n_kw.shape[0] * beta
    for s in prange(n_shards):
        local_n_k[s, :] = n_k
        _sweep_shard(shard_run_ptr[s], shard_run_ptr[s + 1], run_word, run_ptr, ord_doc, z_ord,
                     n_kw, local_n_k[s], cap_ptr, dt, cshift, dt_nnz, active, alpha, beta, vbeta,
                     trees[s], cs[s], pbufs[s], rows[s], nzs[s], log_ptr, log_topic, log_delta,
                     log_len, False, rng[s])
    _apply_log(run_word, log_ptr, log_topic, log_delta, log_len, n_kw)
    K = n_k.shape[0]
    for k in range(K):
        g = n_k[k]
        acc = g
        for s in range(n_shards):
            acc += local_n_k[s, k] - g
        n_k[k] = acc


@njit(cache=True, parallel=True)
def _sweep_lda_partition(block_run_ptr, run_word, run_ptr, ord_doc, z_ord, n_kw, n_k, cap_ptr,
                         dt, cshift, dt_nnz, active, alpha, beta, local_n_k, trees, cs, pbufs,
                         rows, nzs, rng):
    """One Gibbs sweep of one chain in S sub-steps over the (doc shard x term group) grid.

    In sub-step j, shard s samples its tokens whose term lies in group (s + j) mod S. The S
    blocks of a sub-step share no document and no term, so they update ``n_kw`` in place
    without races and every token sees exact n_kw and n_dk; only ``n_k`` is a per-shard copy,
    merged (integer sums) after each sub-step. This is the partition scheme of Yan et al.
    (2009) and tomotopy's ParallelScheme.PARTITION, over FIXED shards: results do not depend
    on the thread count.

    block_run_ptr : ndarray of shape (n_shards, n_shards + 1), int64
        Runs of block (s, g) are block_run_ptr[s, g]:block_run_ptr[s, g + 1].

    Changes in place: z_ord, n_kw, n_k, dt, dt_nnz, scratch arrays and rng.
    """
    S = block_run_ptr.shape[0]
    vbeta = n_kw.shape[0] * beta
    K = n_k.shape[0]
    for j in range(S):
        for s in prange(S):
            g = (s + j) % S
            local_n_k[s, :] = n_k
            _sweep_shard(block_run_ptr[s, g], block_run_ptr[s, g + 1], run_word, run_ptr,
                         ord_doc, z_ord, n_kw, local_n_k[s], cap_ptr, dt, cshift, dt_nnz, active,
                         alpha, beta, vbeta, trees[s], cs[s], pbufs[s], rows[s], nzs[s],
                         run_ptr, rows[s], rows[s], run_ptr, True, rng[s])
        for k in range(K):
            g0 = n_k[k]
            acc = g0
            for s in range(S):
                acc += local_n_k[s, k] - g0
            n_k[k] = acc


@njit(cache=True)
def _apply_log(run_word, log_ptr, log_topic, log_delta, log_len, n_kw):
    """n_kw += every logged delta (integer sums: the result does not depend on the order)."""
    for r in range(len(run_word)):
        w = run_word[r]
        o = log_ptr[r]
        for j in range(log_len[r]):
            n_kw[w, log_topic[o + j]] += log_delta[o + j]


# ---------------------------------------------------------------------------------------------
# Initialisation, counts, conversions


@njit(cache=True, parallel=True)
def _init_random(shard_run_ptr, run_ptr, ord_doc, active, z_ord, n_topics, rng):
    """z_ord[i] ~ Uniform{0..K-1} for tokens of active docs, -1 otherwise; rng (n_shards, 4)."""
    n_shards = len(shard_run_ptr) - 1
    for s in prange(n_shards):
        for i in range(run_ptr[shard_run_ptr[s]], run_ptr[shard_run_ptr[s + 1]]):
            if active[ord_doc[i]]:
                z_ord[i] = randint(rng[s], n_topics)
            else:
                z_ord[i] = -1


@njit(cache=True, parallel=True)
def _z_to_doc_order(z_ord, ord_pos, out):
    for i in prange(len(z_ord)):
        out[ord_pos[i]] = z_ord[i]


@njit(cache=True, parallel=True)
def _z_from_doc_order(z_doc, ord_pos, out):
    for i in prange(len(out)):
        out[i] = z_doc[ord_pos[i]]


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


@njit(cache=True, parallel=True)
def _build_n_kw_runs(run_word, run_ptr, z_ord, n_kw, n_k):
    """n_kw, n_k from sweep-order z (z = -1 ignored), row by row. Overwrites n_kw, n_k."""
    V, K = n_kw.shape
    for w in prange(V):
        for k in range(K):
            n_kw[w, k] = 0
    n_k[:] = 0
    for r in range(len(run_word)):
        w = run_word[r]
        for i in range(run_ptr[r], run_ptr[r + 1]):
            k = z_ord[i]
            if k >= 0:
                n_kw[w, k] += 1
                n_k[k] += 1


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
        base = cap_ptr[d]
        nnz = 0
        prev = -1
        for t in zs:
            if t < 0:
                continue
            if t == prev:
                dt[base + nnz - 1] += 1
            else:
                dt[base + nnz] = (t << cshift) + 1
                nnz += 1
                prev = t
        dt_nnz[d] = nnz


# ---------------------------------------------------------------------------------------------
# Log-likelihood (collapsed joint log p(w, z), Griffiths & Steyvers 2004 eq. 2-3)


@njit(cache=True, parallel=True)
def _log_lik_docs(cap_ptr, dt, cshift, dt_nnz, active, alpha):
    """log p(z) = sum_d [lgamma(A) - lgamma(n_d + A) + sum_k (lgamma(n_dk + a_k) - lgamma(a_k))]."""
    n_docs = len(dt_nnz)
    A = 0.0
    for k in range(len(alpha)):
        A += alpha[k]
    lgA = math.lgamma(A)
    part = np.zeros(n_docs)
    for d in prange(n_docs):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        n_d = 0
        acc = 0.0
        for j in range(dt_nnz[d]):
            k = dt[base + j] >> cshift
            v = dt[base + j] & ((1 << cshift) - 1)
            n_d += v
            acc += math.lgamma(v + alpha[k]) - math.lgamma(alpha[k])
        part[d] = acc + lgA - math.lgamma(n_d + A)
    total = 0.0
    for d in range(n_docs):
        total += part[d]
    return total


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


@njit(cache=True, parallel=True)
def _doc_constants(kd_ptr, kd_doc, kd_count, n_k, alpha, beta, n_terms, doc_len, inv_len, smooth):
    """Per (sample, doc): inv_len = 1 / (n_d + A) and smooth = sum_k n_dk beta / (n_k + V beta),
    the term-independent part of sum_k n_dk phi_kw. Overwrites inv_len, smooth (n_cs, n_docs)."""
    n_cs = kd_ptr.shape[0]
    K = kd_ptr.shape[1] - 1
    vbeta = n_terms * beta
    for cs in prange(n_cs):
        A = 0.0
        for k in range(K):
            A += alpha[cs, k]
        for d in range(len(doc_len)):
            inv_len[cs, d] = 1.0 / (doc_len[d] + A)
            smooth[cs, d] = 0.0
        for k in range(K):
            b = beta / (n_k[cs, k] + vbeta)
            for j in range(kd_ptr[cs, k], kd_ptr[cs, k + 1]):
                smooth[cs, kd_doc[j]] += kd_count[j] * b


@njit(cache=True, parallel=True)
def _score_p_w_d_sparse(kd_ptr, kd_doc, kd_count, tw_ptr, tw_topic, tw_count, n_k, alpha, beta,
                        inv_len, smooth, term_ids, n_blocks, out):
    """out[cs, d, t] = P(w_t | d) in sample cs (Wei & Croft 2006, eq. 3):

        sum_k (n_dk + a_k) (n_kw + b) / (n_k + V b) / (n_d + A)
        = [smooth[d] + sum_k a_k phi_kw + sum_{k: n_kw > 0} n_dk n_kw / (n_k + V b)] / (n_d + A)

    The last sum only visits the topics in which w occurs, through the topic-major postings, so a
    query term costs the length of those postings, not of the whole collection. Documents are
    split into ``n_blocks`` ranges processed in parallel (each posting list is binary-searched).
    Overwrites out (n_cs, n_docs, n_terms).
    """
    n_cs, n_docs, T = out.shape
    K = kd_ptr.shape[1] - 1
    V = tw_ptr.shape[1] - 1
    vbeta = V * beta
    for blk in prange(n_blocks):
        d0 = blk * n_docs // n_blocks
        d1 = (blk + 1) * n_docs // n_blocks
        for cs in range(n_cs):
            for t in range(T):
                w = term_ids[t]
                # sum_k a_k phi_kw: dense over K, cheap next to the documents
                ap = 0.0
                for k in range(K):
                    ap += alpha[cs, k] * beta / (n_k[cs, k] + vbeta)
                for j in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                    ap += alpha[cs, tw_topic[j]] * tw_count[j] / (n_k[cs, tw_topic[j]] + vbeta)
                for d in range(d0, d1):
                    out[cs, d, t] = smooth[cs, d] + ap
                for j in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                    k = tw_topic[j]
                    coef = tw_count[j] / (n_k[cs, k] + vbeta)
                    a = kd_ptr[cs, k]
                    b = kd_ptr[cs, k + 1]
                    lo = lower_bound(kd_doc, a, b, d0)
                    hi = lower_bound(kd_doc, lo, b, d1)
                    for i in range(lo, hi):
                        out[cs, kd_doc[i], t] += kd_count[i] * coef
                for d in range(d0, d1):
                    out[cs, d, t] *= inv_len[cs, d]


@njit(cache=True, parallel=True)
def _mean_over_samples(per, out):
    n_cs, n_docs, T = per.shape
    for d in prange(n_docs):
        for t in range(T):
            acc = 0.0
            for cs in range(n_cs):
                acc += per[cs, d, t]
            out[d, t] = acc / n_cs


# ---------------------------------------------------------------------------------------------
# For tests: the conditional as the fast sampler decomposes it


@njit(cache=True)
def _token_conditional(w, d, n_kw, n_k, cap_ptr, dt, cshift, dt_nnz, alpha, beta):
    """Normalised p(z = k | rest) for a token of term w in doc d, computed through the doc
    bucket and the F+ tree exactly as ``_sweep_shard`` does. The token must already be removed
    from the counts. Returns ndarray of shape (K,), float64."""
    V, K = n_kw.shape
    vbeta = V * beta
    P = 1
    while P < K:
        P *= 2
    tree = np.zeros(2 * P)
    c = np.empty(K)
    for k in range(K):
        c[k] = _c_of(n_kw[w, k], n_k[k], beta, vbeta)
        tree[P + k] = alpha[k] * c[k]
    tree_build(tree, P)
    base = cap_ptr[d]
    p = np.empty(K)
    for k in range(K):
        p[k] = tree[P + k]
    dsum = 0.0
    for j in range(dt_nnz[d]):
        k = dt[base + j] >> cshift
        r = (dt[base + j] & ((1 << cshift) - 1)) * c[k]
        dsum += r
        p[k] += r
    total = dsum + tree[1]
    for k in range(K):
        p[k] /= total
    return p
