"""Slow, obvious four-level PAM Gibbs sampler written straight from the paper (STYLE rule 5).

Dense counts, Python loops, every quantity recomputed from the counts for every token. It
visits tokens in the fast sampler's order for one shard (grouped by term, then position) and
draws from the same rng function (``models.common.kernels.rng.uniform``), so with equal state it
must reproduce the fast sampler's z exactly. The decomposition it samples from is the one the
fast kernel uses: a doc bucket over the (super, sub) pairs present in the document in key
order, then a prior bucket over super-topics with mass A_i sum_j a_ij c_j, and within the
chosen super-topic a scan over sub-topics with the rest of the same uniform.

Li & McCallum, "Pachinko Allocation: Scalable Mixture Models of Topic Correlations":
p(z = i, z' = j | rest) ~ (n_i^d + a_r) / (n^d + s a_r) * (n_ij^d + a_ij) / (n_i^d + sum_j a_ij)
                          * (n_jw + beta) / (n_j + V beta).
"""
import math

import numpy as np

from models.common.kernels.rng import uniform


def counts_from_z(doc_ptr, term_ids, z, n_super, n_sub, n_terms):
    """Dense n_dij (D, s, s'), n_wj (V, s'), n_j (s',) from doc-order pair keys (z < 0 ignored)."""
    D = len(doc_ptr) - 1
    n_dij = np.zeros((D, n_super, n_sub), dtype=np.int64)
    n_wj = np.zeros((n_terms, n_sub), dtype=np.int64)
    n_j = np.zeros(n_sub, dtype=np.int64)
    for d in range(D):
        for t in range(doc_ptr[d], doc_ptr[d + 1]):
            k = z[t]
            if k >= 0:
                i, j = divmod(int(k), n_sub)
                n_dij[d, i, j] += 1
                n_wj[term_ids[t], j] += 1
                n_j[j] += 1
    return n_dij, n_wj, n_j


def conditional(w, d, n_dij, n_wj, n_j, alpha_root, alpha, beta):
    """The paper's conditional over all s * s' pairs, normalised: ndarray (s, s')."""
    n_super, n_sub = alpha.shape
    V = n_wj.shape[0]
    n_i = n_dij[d].sum(1)
    n_d = n_i.sum()
    p = np.empty((n_super, n_sub))
    for i in range(n_super):
        S = math.fsum(alpha[i])
        for j in range(n_sub):
            p[i, j] = ((n_i[i] + alpha_root) / (n_d + n_super * alpha_root)
                       * (n_dij[d, i, j] + alpha[i, j]) / (n_i[i] + S)
                       * (n_wj[w, j] + beta) / (n_j[j] + V * beta))
    return p / math.fsum(p.ravel())


def _pick(cum, u):
    q = 0
    while q < len(cum) and cum[q] <= u:
        q += 1
    if q == len(cum):
        q = len(cum) - 1
        while q > 0 and cum[q] == cum[q - 1]:
            q -= 1
    return q


def sweep(doc_ptr, term_ids, z, n_super, n_sub, n_terms, alpha_root, alpha, beta, rng_state,
          edges=None):
    """One sequential Gibbs sweep (one shard). Returns the new doc-order z; advances rng.

    ``edges`` (bool (s, s'), optional) makes it a pruned sweep of sparse PAM: the prior part
    a_ij only counts for kept edges, p(i, j) ~ A_i (n_ij^d + a_ij [edge ij]) c_j."""
    keep = np.ones(alpha.shape, dtype=bool) if edges is None else np.asarray(edges, dtype=bool)
    z = np.array(z, dtype=np.int64)
    D = len(doc_ptr) - 1
    n_dij, n_wj, n_j = counts_from_z(doc_ptr, term_ids, z, n_super, n_sub, n_terms)
    doc_of = np.repeat(np.arange(D), np.diff(doc_ptr))
    order = sorted(range(len(term_ids)), key=lambda t: (term_ids[t], t))
    vbeta = n_terms * beta
    S = alpha.sum(1)
    for t in order:
        w, d, k_old = term_ids[t], doc_of[t], z[t]
        if k_old >= 0:
            i0, j0 = divmod(int(k_old), n_sub)
            n_dij[d, i0, j0] -= 1
            n_wj[w, j0] -= 1
            n_j[j0] -= 1
        c = [(n_wj[w, j] + beta) * (1.0 / (n_j[j] + vbeta)) for j in range(n_sub)]
        n_i = n_dij[d].sum(1)
        A = [(n_i[i] + alpha_root) / (n_i[i] + S[i]) for i in range(n_super)]
        pairs = [(i, j) for i in range(n_super) for j in range(n_sub) if n_dij[d, i, j] > 0]
        cum, dsum = [], 0.0
        for i, j in pairs:
            dsum += A[i] * n_dij[d, i, j] * c[j]
            cum.append(dsum)
        qcum, qsum = [], 0.0
        for i in range(n_super):
            G = sum(alpha[i, j] * c[j] for j in range(n_sub) if keep[i, j])
            qsum += A[i] * G
            qcum.append(qsum)
        u = uniform(rng_state) * (dsum + qsum)
        if u < dsum:
            i1, j1 = pairs[_pick(cum, u)]
        else:
            v = u - dsum
            i1 = _pick(qcum, v)
            lo = qcum[i1 - 1] if i1 > 0 else 0.0
            frac = min((v - lo) / (qcum[i1] - lo), 1.0 - 1e-16)
            subs = [j for j in range(n_sub) if keep[i1, j]]
            scum, acc = [], 0.0
            for j in subs:
                acc += alpha[i1, j] * c[j]
                scum.append(acc)
            j1 = subs[_pick(scum, frac * acc)]
        n_dij[d, i1, j1] += 1
        n_wj[w, j1] += 1
        n_j[j1] += 1
        z[t] = i1 * n_sub + j1
    return z


def moment_match(n_dij, alpha):
    """alpha_ij by moment matching over docs with n_i^d > 0 plus one pseudo-document in which
    every pair occurs once; precision S_i = geometric mean over j of mean(1 - mean)/var - 1
    (sub-topics with zero variance left out)."""
    n_super, n_sub = alpha.shape
    out = np.array(alpha, dtype=np.float64)
    for i in range(n_super):
        rows = [n_dij[d, i] / n_dij[d, i].sum() for d in range(len(n_dij)) if n_dij[d, i].sum() > 0]
        if not rows:
            continue
        r = np.array(rows + [np.full(n_sub, 1.0 / n_sub)])
        mean = r.mean(0)
        var = ((r - mean) ** 2).mean(0)
        ok = var > 1e-12 * mean * (1 - mean)
        S = np.exp(np.log(mean[ok] * (1 - mean[ok]) / var[ok] - 1).mean()) if ok.any() else out[i].sum()
        out[i] = S * mean
    return out


def ml_alpha(n_dij, alpha, n_iter, shape, scale):
    """alpha_ij by Minka's fixed point, straight from the formula with digamma: over the docs
    with n_i^d > 0, ``n_iter`` times, every alpha_ij <- (alpha_ij sum_d [psi(n_ij^d + a_ij) -
    psi(a_ij)] + shape - 1) / (sum_d [psi(n_i^d + S_i) - psi(S_i)] + 1 / scale), at least 1e-10."""
    from scipy.special import digamma

    out = np.array(alpha, dtype=np.float64)
    for i in range(out.shape[0]):
        rows = np.array([n_dij[d, i] for d in range(len(n_dij)) if n_dij[d, i].sum() > 0])
        if not len(rows):
            continue
        for _ in range(n_iter):
            a = out[i].copy()
            S = a.sum()
            den = (digamma(rows.sum(1) + S) - digamma(S)).sum()
            num = (digamma(rows + a) - digamma(a)).sum(0)
            out[i] = np.maximum((a * num + shape - 1) / (den + 1 / scale), 1e-10)
    return out


def dm_log_posterior(n_dij, alpha, shape, scale):
    """log p(z' | z, alpha) of the Dirichlet-multinomials plus the Gamma(shape, scale) log
    prior of every alpha_ij of the used super-topics (constants dropped): what
    :func:`ml_alpha` climbs."""
    lg = math.lgamma
    ll = 0.0
    for i in range(alpha.shape[0]):
        rows = [n_dij[d, i] for d in range(len(n_dij)) if n_dij[d, i].sum() > 0]
        if not rows:
            continue
        S = alpha[i].sum()
        for r in rows:
            ll += lg(S) - lg(r.sum() + S) + sum(lg(n + a) - lg(a) for n, a in zip(r, alpha[i]))
        ll += sum((shape - 1) * math.log(a) - a / scale for a in alpha[i])
    return ll


def log_lik(doc_ptr, term_ids, z, n_super, n_sub, n_terms, alpha_root, alpha, beta):
    """Collapsed log p(w, z, z') per assigned token."""
    n_dij, n_wj, n_j = counts_from_z(doc_ptr, term_ids, z, n_super, n_sub, n_terms)
    lg = math.lgamma
    V = n_terms
    ll = 0.0
    for j in range(n_sub):
        ll += lg(V * beta) - lg(n_j[j] + V * beta)
        ll += sum(lg(n_wj[w, j] + beta) - lg(beta) for w in range(V))
    for d in range(len(n_dij)):
        n_i = n_dij[d].sum(1)
        if n_i.sum() == 0:
            continue
        ll += lg(n_super * alpha_root) - lg(n_i.sum() + n_super * alpha_root)
        for i in range(n_super):
            ll += lg(n_i[i] + alpha_root) - lg(alpha_root)
            if n_i[i] == 0:
                continue
            S = alpha[i].sum()
            ll += lg(S) - lg(n_i[i] + S)
            ll += sum(lg(n_dij[d, i, j] + alpha[i, j]) - lg(alpha[i, j]) for j in range(n_sub))
    return ll / n_j.sum()


def p_w_d(n_dij, n_wj, n_j, alpha_root, alpha, beta):
    """P_PAM(w | d) for every doc and term from dense counts: ndarray (D, V)."""
    n_super, n_sub = alpha.shape
    V = n_wj.shape[0]
    n_i = n_dij.sum(2)
    theta_r = (n_i + alpha_root) / (n_i.sum(1, keepdims=True) + n_super * alpha_root)
    theta = (n_dij + alpha[None]) / (n_i + alpha.sum(1)[None])[:, :, None]
    phi = (n_wj.T + beta) / (n_j[:, None] + V * beta)
    return np.einsum("di,dij,jw->dw", theta_r, theta, phi)
