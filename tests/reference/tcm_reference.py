"""Slow, obvious Topical Collocation Model sampler written straight from the paper (STYLE rule 5).

Zhao et al. (ACL 2015), eq. 1-6: point-wise Gibbs sampling of the boundary variables with theta
and the topics' Dirichlet processes integrated out. Counts are plain Python dicts keyed by the
collocation's tuple of term ids; nothing is cached. Positions are visited in document order, as
the fast sampler visits one shard, and the rng is the same ``models.common.kernels.rng.uniform``, so
with equal state the two must produce the same b.

b[i] = -1: token i and token i + 1 are in one collocation (the paper's b = 0);
b[i] = k >= 0: a collocation with topic k ends at token i (the paper's b = k + 1).

With ``sparse=True`` the draw goes through the buckets of eq. 8-12 in the fast sampler's order
(none, kr, collocation bucket, document bucket, smoothing tree) so that b can be compared too;
the conditional itself is always computed from the dense formula.
"""
import math
from collections import defaultdict

import numpy as np

from models.common.kernels.rng import uniform
from tests.reference.lda_reference import _tree_select


def p0_table(p_stop, n_terms, max_len):
    """P0(c) = p# (1 - p#)^(M-1) V^-M, renormalised over lengths 1..max_len."""
    z = 1.0 - (1.0 - p_stop) ** max_len
    return [0.0] + [p_stop * (1.0 - p_stop) ** (m - 1) * float(n_terms) ** (-m) / z
                    for m in range(1, max_len + 1)]


def collocations(doc_ptr, term_ids, b):
    """[(doc, start, end_inclusive, topic)] of every collocation, in document order."""
    out = []
    for d in range(len(doc_ptr) - 1):
        s = doc_ptr[d]
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            if b[i] >= 0:
                out.append((d, s, i, int(b[i])))
                s = i + 1
    return out


def counts_from_b(doc_ptr, term_ids, b, n_topics):
    """Dense n_dk (D, K), restaurant counts {(collocation tuple, k): n}, n_k (K,)."""
    D = len(doc_ptr) - 1
    n_dk = np.zeros((D, n_topics), dtype=np.int64)
    n_kc = defaultdict(int)
    n_k = np.zeros(n_topics, dtype=np.int64)
    for d, s, e, k in collocations(doc_ptr, term_ids, b):
        n_dk[d, k] += 1
        n_kc[(tuple(int(w) for w in term_ids[s:e + 1]), k)] += 1
        n_k[k] += 1
    return n_dk, n_kc, n_k


def sweep(doc_ptr, term_ids, split, b, n_topics, alpha, alpha0, p0_len, max_len, rng_state,
          sparse=False, record=None):
    """One sequential sweep over all positions. Returns the new b; advances rng_state.
    ``record`` (n_tokens, K + 1), if given, receives the normalised conditional at every token
    (column 0: no boundary)."""
    K = n_topics
    b = np.array(b, dtype=np.int64)
    n_dk, n_kc, n_k = counts_from_b(doc_ptr, term_ids, b, K)
    kalpha = K * alpha

    def col(a, e):
        return tuple(int(w) for w in term_ids[a:e + 1])

    for d in range(len(doc_ptr) - 1):
        a, z = doc_ptr[d], doc_ptr[d + 1]
        N_d = int(n_dk[d].sum())
        s = a
        for j in range(a, z):
            L = col(s, j)
            if split[j]:
                kr = -1
                k_old = b[j]
                n_dk[d, k_old] -= 1
                n_kc[(L, k_old)] -= 1
                n_k[k_old] -= 1
                N_d -= 1
                w_none, R, w_kr = 0.0, 1.0, 0.0
            else:
                e = j + 1
                while b[e] < 0:
                    e += 1
                kr = int(b[e])
                Rc, LR = col(j + 1, e), col(s, e)
                if b[j] >= 0:
                    k_old = b[j]
                    n_dk[d, k_old] -= 1
                    n_kc[(L, k_old)] -= 1
                    n_k[k_old] -= 1
                    n_dk[d, kr] -= 1
                    n_kc[(Rc, kr)] -= 1
                    n_k[kr] -= 1
                    N_d -= 2
                else:
                    n_dk[d, kr] -= 1
                    n_kc[(LR, kr)] -= 1
                    n_k[kr] -= 1
                    N_d -= 1
                # eq. 1-6, multiplied through by (N_d + K alpha)(N_d + 1 + K alpha)
                ndr = int(n_dk[d, kr])
                same = 1 if L == Rc else 0
                p0R = alpha0 * p0_len[len(Rc)]
                cR = n_kc.get((Rc, kr), 0)
                R = (ndr + alpha) * (cR + p0R) / (n_k[kr] + alpha0)
                Rp = (ndr + 1 + alpha) * (cR + same + p0R) / (n_k[kr] + 1 + alpha0)
                w_none = 0.0
                if len(LR) <= max_len:
                    w_none = ((ndr + alpha) * (n_kc.get((LR, kr), 0) + alpha0 * p0_len[len(LR)])
                              / (n_k[kr] + alpha0) * (N_d + 1 + kalpha))
                w_kr = (ndr + alpha) * (n_kc.get((L, kr), 0) + alpha0 * p0_len[len(L)]) / (n_k[kr] + alpha0) * Rp
            p0L = alpha0 * p0_len[len(L)]
            weights = [w_none]
            for k in range(K):
                if k == kr:
                    weights.append(w_kr)
                else:
                    weights.append((n_dk[d, k] + alpha) * (n_kc.get((L, k), 0) + p0L) / (n_k[k] + alpha0) * R)
            if record is not None:
                total = math.fsum(weights)
                record[j] = [w / total for w in weights]
            if not sparse:
                acc = weights[0]
                cum = []
                for k in range(K):
                    acc += weights[1 + k]
                    cum.append(acc)
                u = uniform(rng_state) * acc
                if u < weights[0]:
                    k_new = -1
                else:
                    k_new = 0
                    while cum[k_new] <= u and k_new < K - 1:
                        k_new += 1
            else:
                leaves = [1.0 / (n_k[k] + alpha0) for k in range(K)]
                if kr >= 0:
                    leaves[kr] = 0.0
                col_topics = [k for k in range(K) if n_kc.get((L, k), 0) > 0 and k != kr]
                csum, ccum = 0.0, []
                for k in col_topics:
                    csum += (n_dk[d, k] + alpha) * n_kc[(L, k)] * leaves[k]
                    ccum.append(csum)
                doc_topics = [k for k in range(K) if n_dk[d, k] > 0 and k != kr]
                dsum, dcum = 0.0, []
                for k in doc_topics:
                    dsum += int(n_dk[d, k]) * leaves[k]
                    dcum.append(dsum)
                _, tree_total = _tree_select(leaves, 0.0)
                m_col = csum * R
                m_doc = p0L * dsum * R
                m_smooth = alpha * p0L * tree_total * R
                total = w_none + w_kr + m_col + m_doc + m_smooth
                u = uniform(rng_state) * total
                if u < w_none:
                    k_new = -1
                else:
                    u -= w_none
                    if u < w_kr:
                        k_new = kr
                    else:
                        u -= w_kr
                        if u < m_col:
                            v = u / R
                            i = 0
                            while ccum[i] <= v and i < len(ccum) - 1:
                                i += 1
                            k_new = col_topics[i]
                        else:
                            u -= m_col
                            if u < m_doc:
                                v = u / (p0L * R)
                                i = 0
                                while dcum[i] <= v and i < len(dcum) - 1:
                                    i += 1
                                k_new = doc_topics[i]
                            else:
                                u -= m_doc
                                k_new, _ = _tree_select(leaves, u / (alpha * p0L * R))
            if k_new < 0:
                n_dk[d, kr] += 1
                n_kc[(LR, kr)] += 1
                n_k[kr] += 1
                N_d += 1
                b[j] = -1
            else:
                n_dk[d, k_new] += 1
                n_kc[(L, k_new)] += 1
                n_k[k_new] += 1
                N_d += 1
                if not split[j]:
                    n_dk[d, kr] += 1
                    n_kc[(Rc, kr)] += 1
                    n_k[kr] += 1
                    N_d += 1
                b[j] = k_new
                s = j + 1
    return b


def log_lik(doc_ptr, term_ids, b, n_topics, alpha, alpha0, p0_len):
    """Collapsed log p(w, b) per word token: Dirichlet-multinomial over every doc's collocation
    topics, and every restaurant's DP marginal over its collocations."""
    lg = math.lgamma
    n_dk, n_kc, n_k = counts_from_b(doc_ptr, term_ids, b, n_topics)
    ll = 0.0
    A = n_topics * alpha
    for d in range(len(n_dk)):
        if n_dk[d].sum() == 0:
            continue
        ll += lg(A) - lg(n_dk[d].sum() + A)
        ll += sum(lg(n_dk[d, k] + alpha) - lg(alpha) for k in range(n_topics))
    for k in range(n_topics):
        ll += lg(alpha0) - lg(n_k[k] + alpha0)
    for (c, k), n in n_kc.items():
        a = alpha0 * p0_len[len(c)]
        ll += lg(n + a) - lg(a)
    return ll / len(term_ids)
