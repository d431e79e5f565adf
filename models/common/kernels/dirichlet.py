"""The topic-word part of the collapsed log-likelihood, shared by LDA (topics) and PAM
(sub-topics): log p(w | z) with symmetric Dirichlet(beta) topics integrated out
(Griffiths & Steyvers 2004, eq. 2)."""
import math

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def topic_word_log_lik(n_kw, n_k, beta):
    """log p(w | z) = sum_k [lgamma(V b) - lgamma(n_k + V b) + sum_w (lgamma(n_kw + b) - lgamma(b))]."""
    V, K = n_kw.shape
    lgb = math.lgamma(beta)
    part = np.zeros(V)
    for w in prange(V):
        acc = 0.0
        for k in range(K):
            v = n_kw[w, k]
            if v > 0:
                acc += math.lgamma(v + beta) - lgb
        part[w] = acc
    total = 0.0
    for w in range(V):
        total += part[w]
    vb = V * beta
    for k in range(K):
        total += math.lgamma(vb) - math.lgamma(n_k[k] + vb)
    return total
