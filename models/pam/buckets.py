"""The bucket sums of the PAM sweep (see :mod:`models.pam.kernels`): the doc bucket over a
document's pairs, the prior bucket over the super-topics, their cumulative masses, the
term-free part E of the prior bucket, and the table of the super-topic factors A_i.
"""
from ..common.jit import njit


@njit(cache=True)
def a_table(alpha_r, alpha_sum, A_tab):
    """A_tab[n, i] = (n + alpha_r) / (n + S_i), the factor A_i of a super-topic with n tokens
    in the document, for n < len(A_tab) (overwrites A_tab). A table read gives the same bits
    as the division, and row 0 is A0_i = alpha_r / S_i (0 + x == x)."""
    for n in range(A_tab.shape[0]):
        for i in range(len(alpha_sum)):
            A_tab[n, i] = (n + alpha_r) / (n + alpha_sum[i])


@njit(cache=True, inline="always")
def a_factor(n, i, A_tab, alpha_r, alpha_sum):
    """A_i for n tokens of super-topic i in the document: from the table, or by the same
    division past its end (documents longer than the table)."""
    if n < A_tab.shape[0]:
        return A_tab[n, i]
    return (n + alpha_r) / (n + alpha_sum[i])


@njit(cache=True)
def block_E(n_j, alpha_T, beta, vbeta, inv, E):
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
def doc_bucket(d, docs, n_ds, prior, c, pbuf):
    """Cumulative doc-bucket masses A_i n_ij c_j of doc d's pairs (``docs``: DocPairs) into
    pbuf; returns the total."""
    n_sub = prior.alpha.shape[1]
    alpha_r, alpha_sum = prior.alpha_r, prior.alpha_sum
    dp_key, dp_count = docs.key, docs.count
    base = docs.cap_ptr[d]
    dsum = 0.0
    lo = 0  # keys of the current super-topic i are in [lo, lo + n_sub)
    hi = 0
    A = 0.0
    for q in range(docs.nnz[d]):
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
def doc_bucket_prior_total(d, docs, n_ds, prior, A_tab, c, pbuf, A0, G, j0, dc0, q0):
    """:func:`doc_bucket` with A_i from :func:`a_factor`, the prior bucket's total from ``q0`` =
    sum_i A0_i G_i (G with the removal's a_i,j0 * dc0 folded in) plus (A_i - A0_i) G_i over
    d's super-topics (A_i = A0_i for the others), and how many super-topics that took
    (statistics)."""
    n_sub = prior.alpha.shape[1]
    alpha_r, alpha_sum, alpha_T = prior.alpha_r, prior.alpha_sum, prior.alpha_T
    dp_key, dp_count = docs.key, docs.count
    base = docs.cap_ptr[d]
    dsum = 0.0
    qsum = q0
    lo = 0
    hi = 0
    A = 0.0
    n_pres = 0
    for q in range(docs.nnz[d]):
        key = dp_key[base + q]
        if key >= hi:
            i = key // n_sub
            lo = i * n_sub
            hi = lo + n_sub
            A = a_factor(n_ds[d, i], i, A_tab, alpha_r, alpha_sum)
            qsum += (A - A0[i]) * (G[i] + alpha_T[j0, i] * dc0)
            n_pres += 1
        dsum += A * dp_count[base + q] * c[key - lo]
        pbuf[q] = dsum
    return dsum, qsum, n_pres


@njit(cache=True, inline="always")
def prior_bucket(d, n_ds, alpha_r, alpha_sum, A0, G, qbuf):
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
