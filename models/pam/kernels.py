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
the s' sub-topics with the rest of the same uniform. The prior bucket's total needs no pass
over the s super-topics: it is q0 = sum_i A0_i G_i (A0_i = alpha_r / S_i, the A_i of a
super-topic absent from d), moved with G in O(1) through W_j = sum_i A0_i a_ij, plus
(A_i - A0_i) G_i over the super-topics of d's pairs; its cumulative masses are built only when
it is drawn (a share of the tokens that falls as the chains settle). A token thus costs
O(pairs of its document). Tokens of a shard are visited grouped by term (as F+LDA does), so G
depends only on the current term: it is built once per (shard, term) run as
``G_i = E_i + sum_{j: n_jw > 0} a_ij n_jw / (n_j + V beta)`` with the term-free
``E_i = beta sum_j a_ij / (n_j + V beta)``, and both are moved in O(s) when a token changes
c_j and n_j for one j. E is recomputed from scratch at the start of every block, so rounding
drift never outlives one block. Within a run, a document's tokens come one after the other: a
token of the same document and pair as the previous one, which kept its pair, finds the counts
exactly as that one did and reuses its buckets. A_i is read from a table built once a sweep.

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
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .buckets import a_factor, a_table, block_E, doc_bucket, doc_bucket_prior_total, pick, prior_bucket
from ..common.kernels.prefetch import prefetch, prefetch2
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound

N_STATS = 5
# Tokens between the prefetch of a token's document state and its draw (twice as far for the
# offsets that locate it).
PREFETCH_AHEAD = 8
A_TABLE_ROWS = 4096  # rows of the A_i table (super-topic counts 0..4095)


class SweepOrder(NamedTuple):
    """The sweep order of the layout (module docstring)."""

    block_run_ptr: np.ndarray
    run_word: np.ndarray
    run_ptr: np.ndarray
    ord_doc: np.ndarray


class PamState(NamedTuple):
    """Counts of one chain that the sweep changes (besides the doc lists)."""

    z_ord: np.ndarray
    n_wj: np.ndarray
    n_j: np.ndarray
    n_ds: np.ndarray


class DocPairs(NamedTuple):
    """Doc d's sorted (pair key, count) list: ``key/count[cap_ptr[d]:cap_ptr[d] + nnz[d]]``."""

    cap_ptr: np.ndarray
    key: np.ndarray
    count: np.ndarray
    nnz: np.ndarray


class PamPrior(NamedTuple):
    alpha_r: float
    alpha: np.ndarray  # (n_super, n_sub)
    alpha_T: np.ndarray  # alpha.T, contiguous
    alpha_sum: np.ndarray  # (n_super,)
    beta: float


class Edges(NamedTuple):
    """Kept edges of every super-topic (sparse PAM) and their inverse lists."""

    edge_ptr: np.ndarray
    edge_sub: np.ndarray
    edge_alpha: np.ndarray
    sub_ptr: np.ndarray
    sub_super: np.ndarray
    sub_alpha: np.ndarray


class Scratch(NamedTuple):
    """Per-shard buffers, one row per shard (see ``_sweep_pam``)."""

    local_n_j: np.ndarray
    Es: np.ndarray
    Gs: np.ndarray
    cs: np.ndarray
    invs: np.ndarray
    pbufs: np.ndarray
    qbufs: np.ndarray
    sbufs: np.ndarray
    stats: np.ndarray
    A_tab: np.ndarray


def sweep(order, state, docs, active, pruned, prior, edges, scratch, rng):
    """One Gibbs sweep of one chain (see ``_sweep_pam``), its arrays grouped in NamedTuples.

    Plain Python: parallel kernels take flat arrays (see models/common/kernels/__init__.py).
    """
    a_table(prior.alpha_r, prior.alpha_sum, scratch.A_tab)
    _sweep_pam(*order, *state, *docs, active, pruned, *prior, *edges, *scratch, rng)


# ---------------------------------------------------------------------------------------------
# One block (shard s, term group g) of one sweep


@njit(cache=True, inline="always")
def _prefetch_doc(d, cap_ptr, dp_key, dp_count, dp_nnz, n_ds):
    """Ask for the state a token of doc d reads: its pair list and its super-topic counts."""
    base = cap_ptr[d]
    nnz = dp_nnz[d]
    for q in range(0, nnz, 16):
        prefetch(dp_key, base + q)
        prefetch(dp_count, base + q)
    if nnz > 0:
        prefetch(dp_key, base + nnz - 1)
        prefetch(dp_count, base + nnz - 1)
    for i in range(0, n_ds.shape[1], 16):
        prefetch2(n_ds, d, i)


@njit(cache=True)
def _sweep_block(r0, r1, run_word, run_ptr, ord_doc, z_ord, n_wj, n_j, n_ds, cap_ptr, dp_key,
                 dp_count, dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
                 edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, E, G, c, inv,
                 pbuf, qbuf, sbuf, stats, A_tab, rng):
    """Resample every active token of runs r0:r1 once (exact, or pruned if ``pruned``).

    ``n_j`` is this shard's copy; n_wj rows of the block's terms are changed in place (no other
    shard touches them in this sub-step). c_j = beta inv_j for every sub-topic the current term
    has no token of, so a run only sets and resets the term's own entries. Removing a
    token changes c_j0 only; G and E are moved only when the token's sub-topic changes (when it
    comes back to j0, c_j0 is restored bitwise, and so are the G entries a pruned sweep moved).

    Changes in place: z_ord, n_wj (rows of this block's terms), n_j, n_ds, dp_key, dp_count,
    dp_nnz (this shard's docs only), E, G, c, inv, pbuf, qbuf, sbuf (scratch), stats, rng.
    """
    n_super, n_sub = alpha.shape
    vbeta = n_wj.shape[0] * beta
    block_E(n_j, alpha_T, beta, vbeta, inv, E)
    for j in range(n_sub):
        c[j] = beta * inv[j]
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
    # W_j = sum_i A0_i a_ij: how sum_i A0_i G_i moves when c_j does
    W = np.zeros(n_sub)
    for j in range(n_sub):
        for i in range(n_super):
            W[j] += A0[i] * alpha_T[j, i]
    gsave = np.empty(n_super)
    tok_end = run_ptr[r1]
    for r in range(r0, r1):
        w = run_word[r]
        row = n_wj[w]
        for i in range(n_super):
            G[i] = E[i]
        for j in range(n_sub):
            if row[j] > 0:
                c[j] = (row[j] + beta) * inv[j]
                t = row[j] * inv[j]
                if pruned:
                    # G'_i = E'_i + the term's part over the kept edges (inverse lists)
                    for e in range(sub_ptr[j], sub_ptr[j + 1]):
                        G[sub_super[e]] += sub_alpha[e] * t
                else:
                    for i in range(n_super):
                        G[i] += alpha_T[j, i] * t
        q0 = 0.0  # sum_i A0_i G_i, moved with G (exact sweeps)
        for i in range(n_super):
            q0 += A0[i] * G[i]
        # A token of the same doc as the previous one, whose pair that one kept, finds the
        # state bit for bit as that one did once removed: its buckets are reused.
        prev_d = -1
        kept_key = -1
        q_ok = False  # qbuf holds the prior bucket's masses of the reused state
        dsum = qsum = qscan = 0.0
        for tok in range(run_ptr[r], run_ptr[r + 1]):
            # the documents of the next tokens are random rows of D-sized tables (tokens come
            # grouped by term): ask for their offsets, then for the rows, ahead of their draws
            if tok + 2 * PREFETCH_AHEAD < tok_end:
                d2 = ord_doc[tok + 2 * PREFETCH_AHEAD]
                prefetch(cap_ptr, d2)
                prefetch(dp_nnz, d2)
            if tok + PREFETCH_AHEAD < tok_end:
                _prefetch_doc(ord_doc[tok + PREFETCH_AHEAD], cap_ptr, dp_key, dp_count, dp_nnz, n_ds)
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
            scanned = pruned or j0 < 0
            if scanned:
                dsum = doc_bucket(d, base, nnz, n_sub, dp_key, dp_count, n_ds, alpha_r,
                                  alpha_sum, c, pbuf)
                qsum = prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf)
                q_ok = False
                stats[1] += nnz
                stats[2] += n_super
            elif d != prev_d or key_old != kept_key:
                # the removal's change of G (a_i,j0 * dc0) is folded in here, not stored;
                # the prior bucket's cumulative masses are only needed when it is drawn
                dsum, qsum, n_pres = doc_bucket_prior_total(
                    d, base, nnz, n_sub, dp_key, dp_count, n_ds, A_tab, alpha_r, alpha_sum, c,
                    pbuf, A0, G, alpha_T, j0, dc0, q0 + W[j0] * dc0)
                q_ok = False
                stats[1] += nnz
                stats[2] += n_pres
            u = uniform(rng) * (dsum + qsum)
            stats[0] += 1
            if u < dsum:
                pos_new = pick(pbuf, nnz, u)
                key_new = dp_key[base + pos_new]
            else:
                v = u - dsum
                if not scanned and not q_ok:
                    qscan = 0.0
                    for i in range(n_super):
                        # from the table, not a branch on n == 0: A_tab[0, i] is A0[i]
                        A = a_factor(n_ds[d, i], i, A_tab, alpha_r, alpha_sum)
                        qscan += A * (G[i] + alpha_T[j0, i] * dc0)
                        qbuf[i] = qscan
                    q_ok = True
                    stats[2] += n_super
                if not scanned:
                    # the total above and this sum differ by rounding only
                    v *= qscan / qsum
                i1 = pick(qbuf, n_super, v)
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
                    e = pick(sbuf, m, frac * acc)
                    j1 = edge_sub[e0 + e]
                    stats[3] += m
                else:
                    acc = 0.0
                    for j in range(n_sub):
                        acc += alpha[i1, j] * c[j]
                        sbuf[j] = acc
                    j1 = pick(sbuf, n_sub, frac * acc)
                    stats[3] += n_sub
                key_new = i1 * n_sub + j1
                pos_new = -1
            # doc list update
            if key_new == key_old:
                dp_count[base + pos_old] += 1
            else:
                dead = pos_old >= 0 and dp_count[base + pos_old] == 0
                q = pos_new
                if pos_new < 0:
                    q = lower_bound(dp_key, base, base + nnz, key_new) - base
                    if q < nnz and dp_key[base + q] == key_new:
                        pos_new = q
                if pos_new >= 0:
                    dp_count[base + pos_new] += 1
                if dead and pos_new < 0:
                    # the new pair takes the freed slot's place: one shift between the two
                    if q <= pos_old:
                        for qq in range(pos_old, q, -1):
                            dp_key[base + qq] = dp_key[base + qq - 1]
                            dp_count[base + qq] = dp_count[base + qq - 1]
                    else:
                        q -= 1
                        for qq in range(pos_old, q):
                            dp_key[base + qq] = dp_key[base + qq + 1]
                            dp_count[base + qq] = dp_count[base + qq + 1]
                    dp_key[base + q] = key_new
                    dp_count[base + q] = 1
                elif dead:
                    for qq in range(pos_old, nnz - 1):
                        dp_key[base + qq] = dp_key[base + qq + 1]
                        dp_count[base + qq] = dp_count[base + qq + 1]
                    nnz -= 1
                elif pos_new < 0:
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
            prev_d = d
            kept_key = key_new if key_new == key_old else -1
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
                q0 += W[j0] * dc0 + W[j1] * dc1
            else:
                for i in range(n_super):
                    a1 = alpha_T[j1, i]
                    G[i] += a1 * dc1
                    E[i] += a1 * dE1
                q0 += W[j1] * dc1
        for j in range(n_sub):
            c[j] = beta * inv[j]


@njit(cache=True, parallel=True)
def _sweep_pam(block_run_ptr, run_word, run_ptr, ord_doc, z_ord, n_wj, n_j, n_ds, cap_ptr, dp_key,
               dp_count, dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
               edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, local_n_j, Es, Gs,
               cs, invs, pbufs, qbufs, sbufs, stats, A_tab, rng):
    """One Gibbs sweep of one chain in S sub-steps over the (doc shard x term group) grid.

    Parameters
    ----------
    local_n_j : ndarray of shape (S, n_sub), int64
        Each shard's copy of n_j.
    Es, Gs, qbufs : (S, n_super) float64; cs, invs, sbufs : (S, n_sub) float64;
    pbufs : (S, max doc length) float64
        Per-shard scratch.
    stats : ndarray of shape (S, N_STATS), int64
        Counters added to (see module docstring).
    A_tab : ndarray of shape (n_rows, n_super), float64
        The factors A_i of :func:`a_table` for the current alpha (read only).
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
                         Gs[s], cs[s], invs[s], pbufs[s], qbufs[s], sbufs[s], stats[s], A_tab,
                         rng[s])
        for j in range(n_sub):
            g0 = n_j[j]
            acc = g0
            for s in range(S):
                acc += local_n_j[s, j] - g0
            n_j[j] = acc
