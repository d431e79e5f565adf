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
(chain, shard) owns an rng stream, so results never depend on the thread count. The steps of a
block: :mod:`models.pam.block`; the bucket sums: :mod:`models.pam.buckets`.

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
from numba import prange
from ..common.jit import njit

from ..common.kernels.borrow import borrow
from .block import (block_start, draw_in_prior, join_sub, move_pair, prior_masses, remove_token,
                    run_start, undo_removal)
from .buckets import a_table, doc_bucket, doc_bucket_prior_total, prior_bucket
from ..common.kernels.prefetch import prefetch, prefetch2
from ..common.kernels.rng import uniform
from ..common.kernels.shards import merge_shard_counts
from ..common.kernels.sparse import pick

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


class BlockWork(NamedTuple):
    """One shard's row of the Scratch buffers and of the counters."""

    E: np.ndarray
    G: np.ndarray
    c: np.ndarray
    inv: np.ndarray
    pbuf: np.ndarray
    qbuf: np.ndarray
    sbuf: np.ndarray
    stats: np.ndarray


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
def _sweep_block(r0, r1, order, state, docs, active, pruned, prior, edges, A_tab, work, rng):
    """Resample every active token of runs r0:r1 once (exact, or pruned if ``pruned``).

    ``state.n_j`` is this shard's copy; n_wj rows of the block's terms are changed in place (no
    other shard touches them in this sub-step). c_j = beta inv_j for every sub-topic the current
    term has no token of, so a run only sets and resets the term's own entries. Removing a
    token changes c_j0 only; G and E are moved only when the token's sub-topic changes (when it
    comes back to j0, c_j0 is restored bitwise, and so are the G entries a pruned sweep moved).

    Changes in place: state, docs (this shard's docs only), work (scratch and stats), rng.
    """
    # borrowed here, not by the caller, so the helpers' bindings cost no reference counting
    B = borrow
    order, state, docs, active, prior, edges, A_tab, work, rng = (
        B(order), B(state), B(docs), B(active), B(prior), B(edges), B(A_tab), B(work), B(rng))
    run_word, run_ptr, ord_doc = order.run_word, order.run_ptr, order.ord_doc
    z_ord, n_wj, n_j, n_ds = state
    cap_ptr, dp_key, dp_count, dp_nnz = docs
    pbuf, stats = work.pbuf, work.stats
    n_super, n_sub = prior.alpha.shape
    A0, W = block_start(state, pruned, prior, edges, work)
    gsave = np.empty(n_super)
    tok_end = run_ptr[r1]
    for r in range(r0, r1):
        row = n_wj[run_word[r]]
        q0 = run_start(row, pruned, prior, edges, A0, work)  # moved with G (exact sweeps)
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
            rm = remove_token(d, key_old, row, state, docs, pruned, prior, edges, work, gsave)
            j0, dc0 = rm.j0, rm.dc0
            scanned = pruned or j0 < 0
            if scanned:
                dsum = doc_bucket(d, docs, n_ds, prior, work.c, pbuf)
                qsum = prior_bucket(d, n_ds, prior.alpha_r, prior.alpha_sum, A0, work.G,
                                    work.qbuf)
                q_ok = False
                stats[1] += nnz
                stats[2] += n_super
            elif d != prev_d or key_old != kept_key:
                # the removal's change of G (a_i,j0 * dc0) is folded in here, not stored;
                # the prior bucket's cumulative masses are only needed when it is drawn
                dsum, qsum, n_pres = doc_bucket_prior_total(d, docs, n_ds, prior, A_tab, work.c,
                                                            pbuf, A0, work.G, j0, dc0,
                                                            q0 + W[j0] * dc0)
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
                    qscan = prior_masses(d, n_ds, j0, dc0, prior, A_tab, work)
                    q_ok = True
                if not scanned:
                    # the total above and this sum differ by rounding only
                    v *= qscan / qsum
                key_new = draw_in_prior(v, pruned, prior, edges, work)
                pos_new = -1
            move_pair(d, key_old, rm.pos_old, key_new, pos_new, docs)
            i1 = key_new // n_sub
            j1 = key_new - i1 * n_sub
            n_ds[d, i1] += 1
            row[j1] += 1
            n_j[j1] += 1
            z_ord[tok] = key_new
            prev_d = d
            kept_key = key_new if key_new == key_old else -1
            if j1 == j0:
                undo_removal(rm, pruned, edges, work, gsave)
            else:
                q0 = join_sub(j1, rm, row, state, q0, W, pruned, prior, edges, work)
        for j in range(n_sub):
            work.c[j] = prior.beta * work.inv[j]


@njit(cache=True, parallel=True)
def _sweep_pam(block_run_ptr, run_word, run_ptr, ord_doc, z_ord, n_wj, n_j, n_ds, cap_ptr, dp_key,
               dp_count, dp_nnz, active, pruned, alpha_r, alpha, alpha_T, alpha_sum, beta,
               edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha, local_n_j, Es, Gs,
               cs, invs, pbufs, qbufs, sbufs, stats, A_tab, rng):
    """One Gibbs sweep of one chain in S sub-steps over the (doc shard x term group) grid.

    Flat arguments: a parallel kernel cannot take tuples (models/common/kernels/__init__.py);
    the tuples are built inside the prange body.

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
    for t in range(S):
        for s in prange(S):
            g = (s + t) % S
            local_n_j[s, :] = n_j
            _sweep_block(block_run_ptr[s, g], block_run_ptr[s, g + 1],
                         SweepOrder(block_run_ptr, run_word, run_ptr, ord_doc),
                         PamState(z_ord, n_wj, local_n_j[s], n_ds),
                         DocPairs(cap_ptr, dp_key, dp_count, dp_nnz), active, pruned,
                         PamPrior(alpha_r, alpha, alpha_T, alpha_sum, beta),
                         Edges(edge_ptr, edge_sub, edge_alpha, sub_ptr, sub_super, sub_alpha),
                         A_tab, BlockWork(Es[s], Gs[s], cs[s], invs[s], pbufs[s], qbufs[s],
                                          sbufs[s], stats[s]), rng[s])
        merge_shard_counts(n_j, local_n_j)
