"""Numba kernels for the four-level Pachinko Allocation Model (arrays in, arrays out; no I/O).

Model (Li & McCallum, "Pachinko Allocation: Scalable Mixture Models of Topic Correlations",
eq. 1-2): root -> s super-topics -> s' sub-topics -> words. A token's state is the pair
(i, j), stored as one key ``i * s' + j``. The collapsed conditional of a token of term w in
document d (the token removed from every count) is

    p(i, j | rest) ~ A_i * (n_ij^d + a_ij) * c_j
    A_i = (n_i^d + alpha_r) / (n_i^d + S_i),   S_i = sum_j a_ij
    c_j = (n_jw + beta) / (n_j + V beta)

(the root factor's denominator n_r^d + s alpha_r is the same for every pair and dropped).

Exact sampler, without enumerating the s * s' pairs: the mass is split as in SparseLDA
(Yao et al. 2009) into

    doc bucket    A_i n_ij^d c_j            over the pairs present in d (sorted by key)
    prior bucket  A_i G_i,  G_i = sum_j a_ij c_j   over the s super-topics

and, when the prior bucket is hit at super-topic i, j is drawn from a_ij c_j by a scan over
the s' sub-topics with the rest of the same uniform. Tokens of a shard are visited grouped by
term (as F+LDA does), so G depends only on the current term: it is built once per (shard, term)
run as ``G_i = E_i + sum_{j: n_jw > 0} a_ij n_jw / (n_j + V beta)`` with the term-free
``E_i = beta sum_j a_ij / (n_j + V beta)``, and both are moved in O(s) when a token changes
c_j and n_j for one j. E is recomputed from scratch at the start of every block, so rounding
drift never outlives one block.

Pruned sampler (sparse PAM, section 3.2.2): the prior bucket only uses the edges (i, j) kept
for super-topic i (``edge_*``), G'_i = sum_{j in E_i} a_ij c_j, split like G into E'_i and the
term's part and moved through the inverse edge lists (``sub_*``) in O(edges of j); pairs
already present in the document stay reachable through the doc bucket. The caller alternates
exact and pruned sweeps.

Parallelism: the partition scheme (Yan et al. 2009) over FIXED shards. Documents are split into
S shards and terms into S groups; in sub-step t, shard s samples its tokens of group
(s + t) mod S, so blocks of a sub-step share no document and no term: n_wj rows are exact and
written through, n_j is a per-shard copy merged (integer sums) after every sub-step. Every
(chain, shard) owns an rng stream, so results never depend on the thread count.

Layout shared by the kernels
----------------------------
ord_doc : (n_tokens,) int32      doc of the i-th token in sweep order (shard, group, term, doc)
run_word, run_ptr               tokens run_ptr[r]:run_ptr[r+1] (sweep order) have term run_word[r]
block_run_ptr : (S, S + 1)       runs of block (shard s, group g): block_run_ptr[s, g]:[s, g + 1]
z_ord : (n_tokens,) int32        pair key i * s' + j of each token in sweep order; -1 = unassigned
n_wj : (V, s') int32             term-sub-topic counts (term-major); n_j : (s',) int64
n_ds : (D, s) int32              document-super-topic counts
cap_ptr, dp_key, dp_count, dp_nnz
                                doc d's sorted (pair key, count) list lives in
                                dp_*[cap_ptr[d]:cap_ptr[d+1]], dp_nnz[d] entries used
stats : (S, N_STATS) int64       per shard: tokens, doc-bucket pairs, super-topic terms,
                                sub-topic terms scanned, prior-bucket draws
"""
import math

import numpy as np
from numba import njit, prange

from .rng import randint, uniform
from .sparse import lower_bound

N_STATS = 5


# ---------------------------------------------------------------------------------------------
# Small helpers


@njit(cache=True, inline="always")
def _pick(cum, n, u):
    """First q < n with cum[q] > u; the last q with a positive increment if round-off puts u
    at or past cum[n - 1]."""
    q = 0
    while q < n and cum[q] <= u:
        q += 1
    if q == n:
        q = n - 1
        while q > 0 and cum[q] == cum[q - 1]:
            q -= 1
    return q


@njit(cache=True)
def _block_E(n_j, alpha_T, beta, vbeta, inv, E):
    """inv[j] = 1 / (n_j + V beta) and E_i = beta * sum_j a_ij inv[j] (overwrites inv, E)."""
    n_sub, n_super = alpha_T.shape
    for i in range(n_super):
        E[i] = 0.0
    for j in range(n_sub):
        inv[j] = 1.0 / (n_j[j] + vbeta)
        t = beta * inv[j]
        for i in range(n_super):
            E[i] += alpha_T[j, i] * t


@njit(cache=True, inline="always")
def _doc_bucket(d, base, nnz, n_sub, dp_key, dp_count, n_ds, alpha_r, alpha_sum, c, pbuf):
    """Cumulative doc-bucket masses A_i n_ij c_j of doc d's pairs into pbuf; returns the total."""
    dsum = 0.0
    lo = 0  # keys of the current super-topic i are in [lo, lo + n_sub)
    hi = 0
    A = 0.0
    for q in range(nnz):
        key = dp_key[base + q]
        if key >= hi:
            # keys are sorted, so the (slow) integer division runs once per super-topic
            i = key // n_sub
            lo = i * n_sub
            hi = lo + n_sub
            n = n_ds[d, i]
            A = (n + alpha_r) / (n + alpha_sum[i])
        dsum += A * dp_count[base + q] * c[key - lo]
        pbuf[q] = dsum
    return dsum


@njit(cache=True, inline="always")
def _prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf):
    """Cumulative prior-bucket masses A_i G_i over all super-topics into qbuf; returns the total.

    A0[i] = alpha_r / S_i is A_i of a super-topic absent from d (bitwise equal to the formula,
    since 0 + x == x), which saves the division for most super-topics."""
    qsum = 0.0
    for i in range(len(G)):
        n = n_ds[d, i]
        if n == 0:
            qsum += A0[i] * G[i]
        else:
            qsum += (n + alpha_r) / (n + alpha_sum[i]) * G[i]
        qbuf[i] = qsum
    return qsum


# ---------------------------------------------------------------------------------------------
# One block (shard s, term group g) of one sweep


@njit(cache=True)
def _sweep_block(r0, r1, run_word, run_ptr, ord_doc, z_ord, n_wj, n_j, n_ds, cap_ptr, dp_key,
                 dp_count, dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
                 edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, E, G, c, inv,
                 row, pbuf, qbuf, sbuf, stats, rng):
    """Resample every active token of runs r0:r1 once (exact, or pruned if ``pruned``).

    ``n_j`` is this shard's copy; n_wj rows of the block's terms are read at the start of each
    run and written back at its end (no other shard touches them in this sub-step). Removing a
    token changes c_j0 only; G and E are moved only when the token's sub-topic changes (when it
    comes back to j0, c_j0 is restored bitwise, and so are the G entries a pruned sweep moved).

    Changes in place: z_ord, n_wj (rows of this block's terms), n_j, n_ds, dp_key, dp_count,
    dp_nnz (this shard's docs only), E, G, c, inv, row, pbuf, qbuf, sbuf (scratch), stats, rng.
    """
    n_super, n_sub = alpha.shape
    vbeta = n_wj.shape[0] * beta
    _block_E(n_j, alpha_T, beta, vbeta, inv, E)
    if pruned:
        # E'_i = beta * sum over the kept edges of i of a_ij / (n_j + V beta)
        for i in range(n_super):
            acc = 0.0
            for e in range(edge_ptr[i], edge_ptr[i + 1]):
                acc += edge_alpha[e] * inv[edge_sub[e]]
            E[i] = beta * acc
    A0 = np.empty(n_super)
    for i in range(n_super):
        A0[i] = alpha_r / alpha_sum[i]
    gsave = np.empty(n_super)
    for r in range(r0, r1):
        w = run_word[r]
        for j in range(n_sub):
            row[j] = n_wj[w, j]
            c[j] = (row[j] + beta) * inv[j]
        for i in range(n_super):
            G[i] = E[i]
        for j in range(n_sub):
            if row[j] > 0:
                t = row[j] * inv[j]
                if pruned:
                    # G'_i = E'_i + the term's part over the kept edges (inverse lists)
                    for e in range(sub_ptr[j], sub_ptr[j + 1]):
                        G[sub_super[e]] += sub_alpha[e] * t
                else:
                    for i in range(n_super):
                        G[i] += alpha_T[j, i] * t
        for tok in range(run_ptr[r], run_ptr[r + 1]):
            d = ord_doc[tok]
            if active[d] == 0:
                continue
            key_old = z_ord[tok]
            base = cap_ptr[d]
            nnz = dp_nnz[d]
            pos_old = -1
            j0 = -1
            dc0 = 0.0
            dE0 = 0.0
            c_old = 0.0
            inv_old = 0.0
            if key_old >= 0:
                i0 = key_old // n_sub
                j0 = key_old - i0 * n_sub
                n_ds[d, i0] -= 1
                pos_old = lower_bound(dp_key, base, base + nnz, key_old) - base
                # A pair whose count drops to 0 stays in the list until after sampling; it adds
                # exactly 0.0 to the doc bucket and can never be selected.
                dp_count[base + pos_old] -= 1
                row[j0] -= 1
                n_j[j0] -= 1
                c_old = c[j0]
                inv_old = inv[j0]
                inv[j0] = 1.0 / (n_j[j0] + vbeta)
                c[j0] = (row[j0] + beta) * inv[j0]
                dc0 = c[j0] - c_old
                dE0 = beta * (inv[j0] - inv_old)
                if pruned:
                    for e in range(sub_ptr[j0], sub_ptr[j0 + 1]):
                        i = sub_super[e]
                        gsave[i] = G[i]
                        G[i] += sub_alpha[e] * dc0
            dsum = _doc_bucket(d, base, nnz, n_sub, dp_key, dp_count, n_ds, alpha_r, alpha_sum, c,
                               pbuf)
            if pruned or j0 < 0:
                qsum = _prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf)
            else:
                # the removal's change of G (a_i,j0 * dc0) is folded in here, not stored
                qsum = 0.0
                for i in range(n_super):
                    n = n_ds[d, i]
                    g = G[i] + alpha_T[j0, i] * dc0
                    if n == 0:
                        qsum += A0[i] * g
                    else:
                        qsum += (n + alpha_r) / (n + alpha_sum[i]) * g
                    qbuf[i] = qsum
            u = uniform(rng) * (dsum + qsum)
            stats[0] += 1
            stats[1] += nnz
            stats[2] += n_super
            if u < dsum:
                pos_new = _pick(pbuf, nnz, u)
                key_new = dp_key[base + pos_new]
            else:
                v = u - dsum
                i1 = _pick(qbuf, n_super, v)
                lo = qbuf[i1 - 1] if i1 > 0 else 0.0
                frac = (v - lo) / (qbuf[i1] - lo)
                if frac >= 1.0:
                    frac = 1.0 - 1e-16
                stats[4] += 1
                if pruned:
                    e0 = edge_ptr[i1]
                    m = edge_ptr[i1 + 1] - e0
                    acc = 0.0
                    for e in range(m):
                        acc += edge_alpha[e0 + e] * c[edge_sub[e0 + e]]
                        sbuf[e] = acc
                    e = _pick(sbuf, m, frac * acc)
                    j1 = edge_sub[e0 + e]
                    stats[3] += m
                else:
                    acc = 0.0
                    for j in range(n_sub):
                        acc += alpha[i1, j] * c[j]
                        sbuf[j] = acc
                    j1 = _pick(sbuf, n_sub, frac * acc)
                    stats[3] += n_sub
                key_new = i1 * n_sub + j1
                pos_new = -1
            # doc list update
            if key_new == key_old:
                dp_count[base + pos_old] += 1
            else:
                if pos_old >= 0 and dp_count[base + pos_old] == 0:
                    for q in range(pos_old, nnz - 1):
                        dp_key[base + q] = dp_key[base + q + 1]
                        dp_count[base + q] = dp_count[base + q + 1]
                    nnz -= 1
                    if pos_new > pos_old:
                        pos_new -= 1
                if pos_new >= 0:
                    dp_count[base + pos_new] += 1
                else:
                    q = lower_bound(dp_key, base, base + nnz, key_new) - base
                    if q < nnz and dp_key[base + q] == key_new:
                        dp_count[base + q] += 1
                    else:
                        for qq in range(nnz, q, -1):
                            dp_key[base + qq] = dp_key[base + qq - 1]
                            dp_count[base + qq] = dp_count[base + qq - 1]
                        dp_key[base + q] = key_new
                        dp_count[base + q] = 1
                        nnz += 1
                dp_nnz[d] = nnz
            i1 = key_new // n_sub
            j1 = key_new - i1 * n_sub
            n_ds[d, i1] += 1
            row[j1] += 1
            n_j[j1] += 1
            z_ord[tok] = key_new
            if j1 == j0:
                # back to the same sub-topic: every count of j0 is as before the removal
                c[j0] = c_old
                inv[j0] = inv_old
                if pruned:
                    for e in range(sub_ptr[j0], sub_ptr[j0 + 1]):
                        G[sub_super[e]] = gsave[sub_super[e]]
                continue
            c1_old = c[j1]
            inv1_old = inv[j1]
            inv[j1] = 1.0 / (n_j[j1] + vbeta)
            c[j1] = (row[j1] + beta) * inv[j1]
            dc1 = c[j1] - c1_old
            dE1 = beta * (inv[j1] - inv1_old)
            if pruned:
                for e in range(sub_ptr[j1], sub_ptr[j1 + 1]):
                    G[sub_super[e]] += sub_alpha[e] * dc1
                    E[sub_super[e]] += sub_alpha[e] * dE1
                if j0 >= 0:
                    for e in range(sub_ptr[j0], sub_ptr[j0 + 1]):
                        E[sub_super[e]] += sub_alpha[e] * dE0
            elif j0 >= 0:
                for i in range(n_super):
                    a0 = alpha_T[j0, i]
                    a1 = alpha_T[j1, i]
                    G[i] += a0 * dc0 + a1 * dc1
                    E[i] += a0 * dE0 + a1 * dE1
            else:
                for i in range(n_super):
                    a1 = alpha_T[j1, i]
                    G[i] += a1 * dc1
                    E[i] += a1 * dE1
        for j in range(n_sub):
            n_wj[w, j] = row[j]


@njit(cache=True, parallel=True)
def _sweep_pam(block_run_ptr, run_word, run_ptr, ord_doc, z_ord, n_wj, n_j, n_ds, cap_ptr, dp_key,
               dp_count, dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
               edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, local_n_j, Es, Gs,
               cs, invs, rows, pbufs, qbufs, sbufs, stats, rng):
    """One Gibbs sweep of one chain in S sub-steps over the (doc shard x term group) grid.

    Parameters
    ----------
    local_n_j : ndarray of shape (S, n_sub), int64
        Each shard's copy of n_j.
    Es, Gs, qbufs : (S, n_super) float64; cs, invs, sbufs : (S, n_sub) float64;
    rows : (S, n_sub) int32; pbufs : (S, max doc length) float64
        Per-shard scratch.
    stats : ndarray of shape (S, N_STATS), int64
        Counters added to (see module docstring).
    rng : ndarray of shape (S, 4), uint64
        One stream per shard of this chain.

    Changes in place: z_ord, n_wj, n_j, n_ds, dp_*, the scratch arrays, stats and rng.
    """
    S = block_run_ptr.shape[0]
    n_sub = n_j.shape[0]
    for t in range(S):
        for s in prange(S):
            g = (s + t) % S
            local_n_j[s, :] = n_j
            _sweep_block(block_run_ptr[s, g], block_run_ptr[s, g + 1], run_word, run_ptr,
                         ord_doc, z_ord, n_wj, local_n_j[s], n_ds, cap_ptr, dp_key, dp_count,
                         dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
                         edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, Es[s],
                         Gs[s], cs[s], invs[s], rows[s], pbufs[s], qbufs[s], sbufs[s], stats[s],
                         rng[s])
        for j in range(n_sub):
            g0 = n_j[j]
            acc = g0
            for s in range(S):
                acc += local_n_j[s, j] - g0
            n_j[j] = acc


# ---------------------------------------------------------------------------------------------
# Initialisation, counts, conversions


@njit(cache=True, parallel=True)
def _init_random(shard_tok_ptr, ord_doc, active, z_ord, n_super, n_sub, rng):
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
def _z_to_doc_order(z_ord, ord_pos, out):
    for i in prange(len(z_ord)):
        out[ord_pos[i]] = z_ord[i]


@njit(cache=True, parallel=True)
def _z_from_doc_order(z_doc, ord_pos, out):
    for i in prange(len(out)):
        out[i] = z_doc[ord_pos[i]]


@njit(cache=True)
def _build_n_wj(term_ids, z_doc, n_sub, n_wj, n_j):
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
def _build_doc_lists(doc_ptr, z_doc, n_sub, cap_ptr, dp_key, dp_count, dp_nnz, n_ds):
    """Sorted (pair key, count) list and super-topic counts of every doc. Overwrites dp_*, n_ds."""
    n_docs = len(doc_ptr) - 1
    for d in prange(n_docs):
        n_ds[d, :] = 0
        zs = np.sort(z_doc[doc_ptr[d]:doc_ptr[d + 1]])
        base = cap_ptr[d]
        nnz = 0
        prev = -1
        for t in zs:
            if t < 0:
                continue
            n_ds[d, t // n_sub] += 1
            if t == prev:
                dp_count[base + nnz - 1] += 1
            else:
                dp_key[base + nnz] = t
                dp_count[base + nnz] = 1
                nnz += 1
                prev = t
        dp_nnz[d] = nnz


@njit(cache=True, parallel=True)
def _compact_doc_lists(cap_ptr, dp_key, dp_count, dp_nnz, out_ptr, out_key, out_count):
    """Copy the used part of the doc lists into CSR arrays (out_ptr = cumsum of dp_nnz)."""
    for d in prange(len(dp_nnz)):
        a = cap_ptr[d]
        o = out_ptr[d]
        for q in range(dp_nnz[d]):
            out_key[o + q] = dp_key[a + q]
            out_count[o + q] = dp_count[a + q]


@njit(cache=True)
def _super_sub_counts(cap_ptr, dp_key, dp_count, dp_nnz, out):
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
def _moment_match(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha):
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
    kept). A super-topic used by no document keeps its row.

    alpha : ndarray of shape (n_super, n_sub), float64, changed in place.
    """
    n_super, n_sub = alpha.shape
    n_docs = len(dp_nnz)
    n_used = np.zeros(n_super, dtype=np.int64)
    nz = np.zeros((n_super, n_sub), dtype=np.int64)
    mean = np.zeros((n_super, n_sub))
    p = 1.0 / n_sub
    for d in range(n_docs):
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
    for i in range(n_super):
        N = n_used[i] + 1
        for j in range(n_sub):
            mean[i, j] = (mean[i, j] + p) / N
    ss = np.zeros((n_super, n_sub))
    for d in range(n_docs):
        if active[d] == 0:
            continue
        base = cap_ptr[d]
        for q in range(dp_nnz[d]):
            key = dp_key[base + q]
            i = key // n_sub
            j = key - i * n_sub
            dv = dp_count[base + q] / n_ds[d, i] - mean[i, j]
            ss[i, j] += dv * dv
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


# ---------------------------------------------------------------------------------------------
# Log-likelihood: collapsed log p(w, z, z' | alpha_r, alpha, beta)


@njit(cache=True, parallel=True)
def _log_lik_docs(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, alpha_r, alpha, alpha_sum):
    """Root and super-topic Dirichlet-multinomial terms of every active document:

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
    total = 0.0
    for d in range(n_docs):
        total += part[d]
    return total


# ---------------------------------------------------------------------------------------------
# Document model P_PAM(w | d) for retrieval


@njit(cache=True)
def _phi_table(tw_ptr, tw_sub, tw_count, n_j, beta, term_ids, phi):
    """phi[cs, j, t] = (n_jw + b) / (n_j + V b) for w = term_ids[t] (overwrites phi).

    tw_ptr : (n_cs, V + 1) int64 offsets into the flat tw_sub/tw_count of every sample.
    """
    n_cs, n_sub, T = phi.shape
    V = tw_ptr.shape[1] - 1
    vbeta = V * beta
    for cs in range(n_cs):
        for t in range(T):
            w = term_ids[t]
            for j in range(n_sub):
                phi[cs, j, t] = beta / (n_j[cs, j] + vbeta)
            for q in range(tw_ptr[cs, w], tw_ptr[cs, w + 1]):
                j = tw_sub[q]
                phi[cs, j, t] = (tw_count[q] + beta) / (n_j[cs, j] + vbeta)


@njit(cache=True, inline="always")
def _doc_sample(cs, d, dp_ptr, dp_key, dp_count, n_d, n_sub, alpha_r, alpha_sum, phi, G, base,
                out):
    """out[t] = P_PAM(term t | d) under sample cs (overwrites out[:T]).

    sum_i theta_i (G_it + sum_{j in d} n_ij phi_jt) / (n_i + S_i), theta_i = (n_i + a_r) / (n_d + s a_r);
    the super-topics absent from d share the term ``a_r / (n_d + s a_r) * base[cs, t]`` with
    base = sum_i G_i / S_i, and the present ones correct it.
    """
    n_super = G.shape[1]
    T = phi.shape[2]
    den = 1.0 / (n_d + n_super * alpha_r)
    r0 = alpha_r * den
    for t in range(T):
        out[t] = r0 * base[cs, t]
    lo = dp_ptr[cs, d]
    hi = dp_ptr[cs, d + 1]
    q = lo
    while q < hi:
        i = dp_key[q] // n_sub
        # the pairs of super-topic i are contiguous (keys sorted)
        e = q
        n_i = 0
        while e < hi and dp_key[e] // n_sub == i:
            n_i += dp_count[e]
            e += 1
        th = (n_i + alpha_r) * den
        f = th / (n_i + alpha_sum[cs, i])
        g0 = r0 / alpha_sum[cs, i]
        for t in range(T):
            acc = G[cs, i, t] * (f - g0)
            for p in range(q, e):
                acc += f * dp_count[p] * phi[cs, dp_key[p] - i * n_sub, t]
            out[t] += acc
        q = e


@njit(cache=True, parallel=True)
def _score_p_w_d(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi, G, base, out):
    """out[d, t] = mean over samples cs of P_PAM(term t | d) (overwrites out).

    dp_ptr : (n_cs, n_docs + 1) int64 offsets into the flat dp_key/dp_count;
    phi : (n_cs, n_sub, T); G : (n_cs, n_super, T) = alpha @ phi; base : (n_cs, T) = sum_i G_i / S_i.
    """
    n_cs, _, T = phi.shape
    n_docs = out.shape[0]
    inv = 1.0 / n_cs
    for d in prange(n_docs):
        acc = np.zeros(T)
        buf = np.empty(T)
        for cs in range(n_cs):
            _doc_sample(cs, d, dp_ptr, dp_key, dp_count, doc_len[d], n_sub, alpha_r, alpha_sum,
                        phi, G, base, buf)
            for t in range(T):
                acc[t] += buf[t]
        for t in range(T):
            out[d, t] = acc[t] * inv


@njit(cache=True, parallel=True)
def _score_p_w_d_per_sample(dp_ptr, dp_key, dp_count, doc_len, n_sub, alpha_r, alpha_sum, phi, G,
                            base, out):
    """out[cs, d, t] = P_PAM(term t | d) under sample cs (overwrites out)."""
    n_cs = phi.shape[0]
    n_docs = out.shape[1]
    for d in prange(n_docs):
        for cs in range(n_cs):
            _doc_sample(cs, d, dp_ptr, dp_key, dp_count, doc_len[d], n_sub, alpha_r, alpha_sum,
                        phi, G, base, out[cs, d])


# ---------------------------------------------------------------------------------------------
# For tests: the conditional as the fast sampler decomposes it


@njit(cache=True)
def _token_conditional(w, d, n_wj, n_j, n_ds, cap_ptr, dp_key, dp_count, dp_nnz, alpha_r, alpha,
                       alpha_sum, beta):
    """Normalised p(i, j | rest), shape (n_super, n_sub), for a token of term w in doc d,
    through the doc bucket and the prior bucket (G from E plus the term's sparse part, then a_ij
    c_j / G_i within super-topic i) exactly as ``_sweep_block`` draws it. The token must already
    be removed from the counts."""
    n_super, n_sub = alpha.shape
    V = n_wj.shape[0]
    vbeta = V * beta
    alpha_T = np.ascontiguousarray(alpha.T)
    inv = np.empty(n_sub)
    E = np.empty(n_super)
    _block_E(n_j, alpha_T, beta, vbeta, inv, E)
    c = np.empty(n_sub)
    G = E.copy()
    for j in range(n_sub):
        c[j] = (n_wj[w, j] + beta) * inv[j]
        if n_wj[w, j] > 0:
            t = n_wj[w, j] * inv[j]
            for i in range(n_super):
                G[i] += alpha_T[j, i] * t
    p = np.zeros((n_super, n_sub))
    base = cap_ptr[d]
    pbuf = np.empty(max(dp_nnz[d], 1))
    dsum = _doc_bucket(d, base, dp_nnz[d], n_sub, dp_key, dp_count, n_ds, alpha_r, alpha_sum, c,
                       pbuf)
    prev = 0.0
    for q in range(dp_nnz[d]):
        key = dp_key[base + q]
        p[key // n_sub, key % n_sub] += pbuf[q] - prev
        prev = pbuf[q]
    qbuf = np.empty(n_super)
    A0 = np.empty(n_super)
    for i in range(n_super):
        A0[i] = alpha_r / alpha_sum[i]
    qsum = _prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf)
    prev = 0.0
    for i in range(n_super):
        mass = qbuf[i] - prev
        prev = qbuf[i]
        tot = 0.0
        for j in range(n_sub):
            tot += alpha[i, j] * c[j]
        for j in range(n_sub):
            p[i, j] += mass * (alpha[i, j] * c[j] / tot)
    total = dsum + qsum
    for i in range(n_super):
        for j in range(n_sub):
            p[i, j] /= total
    return p
