"""The steps of one block of the PAM sweep (see :mod:`models.pam.kernels`, whose
``_sweep_block`` runs them): a block's and a run's starting sums, a token's removal, the draw
inside the prior bucket, the move in the document's pair list, and the sums after the token
joined its new sub-topic.
"""
from typing import NamedTuple

import numpy as np
from ..common.jit import njit

from .buckets import a_factor, block_E
from ..common.kernels.sparse import lower_bound, pick


class Removed(NamedTuple):
    """What removing a token changed: its pair's position in the doc list (-1: it had none),
    its sub-topic j0 (-1: none), the moves of c_j0 and of beta / (n_j0 + V beta), and the
    values of c_j0 and inv_j0 before them."""

    pos_old: int
    j0: int
    dc0: float
    dE0: float
    c_old: float
    inv_old: float


@njit(cache=True)
def block_start(state, pruned, prior, edges, work):
    """(``work``: the shard's BlockWork.) inv, E (E' in a pruned sweep) and c with no term's counts, from this shard's n_j;
    returns A0_i = alpha_r / S_i and W_j = sum_i A0_i a_ij."""
    n_super, n_sub = prior.alpha.shape
    beta, alpha_T = prior.beta, prior.alpha_T
    E, c, inv = work.E, work.c, work.inv
    vbeta = state.n_wj.shape[0] * beta
    block_E(state.n_j, alpha_T, beta, vbeta, inv, E)
    for j in range(n_sub):
        c[j] = beta * inv[j]
    if pruned:
        # E'_i = beta * sum over the kept edges of i of a_ij / (n_j + V beta)
        for i in range(n_super):
            acc = 0.0
            for e in range(edges.edge_ptr[i], edges.edge_ptr[i + 1]):
                acc += edges.edge_alpha[e] * inv[edges.edge_sub[e]]
            E[i] = beta * acc
    A0 = np.empty(n_super)
    for i in range(n_super):
        A0[i] = prior.alpha_r / prior.alpha_sum[i]
    # W_j = sum_i A0_i a_ij: how sum_i A0_i G_i moves when c_j does
    W = np.zeros(n_sub)
    for j in range(n_sub):
        for i in range(n_super):
            W[j] += A0[i] * alpha_T[j, i]
    return A0, W


@njit(cache=True, inline="always")
def run_start(row, pruned, prior, edges, A0, work):
    """G = E plus the part of the run's term (n_wj row ``row``) and c_j of its sub-topics;
    returns q0 = sum_i A0_i G_i."""
    n_super, n_sub = prior.alpha.shape
    beta, alpha_T = prior.beta, prior.alpha_T
    E, G, c, inv = work.E, work.G, work.c, work.inv
    for i in range(n_super):
        G[i] = E[i]
    for j in range(n_sub):
        if row[j] > 0:
            c[j] = (row[j] + beta) * inv[j]
            t = row[j] * inv[j]
            if pruned:
                # G'_i = E'_i + the term's part over the kept edges (inverse lists)
                for e in range(edges.sub_ptr[j], edges.sub_ptr[j + 1]):
                    G[edges.sub_super[e]] += edges.sub_alpha[e] * t
            else:
                for i in range(n_super):
                    G[i] += alpha_T[j, i] * t
    q0 = 0.0
    for i in range(n_super):
        q0 += A0[i] * G[i]
    return q0


@njit(cache=True, inline="always")
def remove_token(d, key_old, row, state, docs, pruned, prior, edges, work, gsave):
    """Take a token of doc d with pair ``key_old`` (-1: none) out of the counts, c and inv (and
    G in a pruned sweep, whose entries it saves in gsave); returns :class:`Removed`."""
    if key_old < 0:
        return Removed(-1, -1, 0.0, 0.0, 0.0, 0.0)
    n_sub = prior.alpha.shape[1]
    beta = prior.beta
    c, inv, G = work.c, work.inv, work.G
    base = docs.cap_ptr[d]
    i0 = key_old // n_sub
    j0 = key_old - i0 * n_sub
    state.n_ds[d, i0] -= 1
    pos_old = lower_bound(docs.key, base, base + docs.nnz[d], key_old) - base
    # A pair whose count drops to 0 stays in the list until after sampling; it adds exactly
    # 0.0 to the doc bucket and can never be selected.
    docs.count[base + pos_old] -= 1
    row[j0] -= 1
    state.n_j[j0] -= 1
    c_old = c[j0]
    inv_old = inv[j0]
    inv[j0] = 1.0 / (state.n_j[j0] + state.n_wj.shape[0] * beta)
    c[j0] = (row[j0] + beta) * inv[j0]
    dc0 = c[j0] - c_old
    dE0 = beta * (inv[j0] - inv_old)
    if pruned:
        for e in range(edges.sub_ptr[j0], edges.sub_ptr[j0 + 1]):
            i = edges.sub_super[e]
            gsave[i] = G[i]
            G[i] += edges.sub_alpha[e] * dc0
    return Removed(pos_old, j0, dc0, dE0, c_old, inv_old)


@njit(cache=True, inline="always")
def prior_masses(d, n_ds, j0, dc0, prior, A_tab, work):
    """Cumulative prior-bucket masses A_i (G_i + a_i,j0 dc0) into qbuf (G with the removal
    folded in); returns the total."""
    n_super = prior.alpha.shape[0]
    G, qbuf, alpha_T = work.G, work.qbuf, prior.alpha_T
    qscan = 0.0
    for i in range(n_super):
        # from the table, not a branch on n == 0: A_tab[0, i] is A0[i]
        A = a_factor(n_ds[d, i], i, A_tab, prior.alpha_r, prior.alpha_sum)
        qscan += A * (G[i] + alpha_T[j0, i] * dc0)
        qbuf[i] = qscan
    work.stats[2] += n_super
    return qscan


@njit(cache=True, inline="always")
def draw_in_prior(v, pruned, prior, edges, work):
    """The pair key at mass v of the prior bucket: super-topic i from qbuf, then j from a_ij c_j
    (over i's kept edges in a pruned sweep) with the rest of the same uniform."""
    n_super, n_sub = prior.alpha.shape
    qbuf, sbuf, c, stats = work.qbuf, work.sbuf, work.c, work.stats
    i1 = pick(qbuf, n_super, v)
    lo = qbuf[i1 - 1] if i1 > 0 else 0.0
    frac = (v - lo) / (qbuf[i1] - lo)
    if frac >= 1.0:
        frac = 1.0 - 1e-16
    stats[4] += 1
    if pruned:
        e0 = edges.edge_ptr[i1]
        m = edges.edge_ptr[i1 + 1] - e0
        acc = 0.0
        for e in range(m):
            acc += edges.edge_alpha[e0 + e] * c[edges.edge_sub[e0 + e]]
            sbuf[e] = acc
        e = pick(sbuf, m, frac * acc)
        j1 = edges.edge_sub[e0 + e]
        stats[3] += m
    else:
        alpha = prior.alpha
        acc = 0.0
        for j in range(n_sub):
            acc += alpha[i1, j] * c[j]
            sbuf[j] = acc
        j1 = pick(sbuf, n_sub, frac * acc)
        stats[3] += n_sub
    return i1 * n_sub + j1


@njit(cache=True, inline="always")
def move_pair(d, key_old, pos_old, key_new, pos_new, docs):
    """Doc d's sorted pair list after its token moved from ``key_old`` (at pos_old, count
    already lowered) to ``key_new`` (at pos_new, -1: not known)."""
    dp_key, dp_count = docs.key, docs.count
    base = docs.cap_ptr[d]
    nnz = docs.nnz[d]
    if key_new == key_old:
        dp_count[base + pos_old] += 1
        return
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
    docs.nnz[d] = nnz


@njit(cache=True, inline="always")
def undo_removal(rm, pruned, edges, work, gsave):
    """The token came back to sub-topic j0: every count of j0 is as before the removal, so c,
    inv (and G in a pruned sweep) get their old bits back."""
    j0 = rm.j0
    work.c[j0] = rm.c_old
    work.inv[j0] = rm.inv_old
    if pruned:
        for e in range(edges.sub_ptr[j0], edges.sub_ptr[j0 + 1]):
            work.G[edges.sub_super[e]] = gsave[edges.sub_super[e]]


@njit(cache=True, inline="always")
def join_sub(j1, rm, row, state, q0, W, pruned, prior, edges, work):
    """c, inv, G and E after the token joined sub-topic j1 != j0 (counts already raised);
    returns q0 moved with G."""
    n_super = prior.alpha.shape[0]
    beta, alpha_T = prior.beta, prior.alpha_T
    E, G, c, inv = work.E, work.G, work.c, work.inv
    j0, dc0, dE0 = rm.j0, rm.dc0, rm.dE0
    c1_old = c[j1]
    inv1_old = inv[j1]
    inv[j1] = 1.0 / (state.n_j[j1] + state.n_wj.shape[0] * beta)
    c[j1] = (row[j1] + beta) * inv[j1]
    dc1 = c[j1] - c1_old
    dE1 = beta * (inv[j1] - inv1_old)
    if pruned:
        sub_ptr, sub_super, sub_alpha = edges.sub_ptr, edges.sub_super, edges.sub_alpha
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
    return q0
