"""Dirichlet-multinomial log-likelihoods of the collapsed samplers (Griffiths & Steyvers 2004,
eq. 2-3): the topic-word part log p(w | z) shared by LDA (topics) and PAM (sub-topics), and the
document-topic part log p(z) over sparse per-document topic lists shared by LDA, gLDA and TCM."""
import math

import numpy as np
from numba import prange

from ..jit import njit


@njit(cache=True, parallel=True)
def word_log_lik_parts(n_kw, beta):
    """Every row w's sum_k (lgamma(n_kw + b) - lgamma(b)) of :func:`topic_word_log_lik` (rows
    split by term range, as Ray owners hold them, continue each other's sum with ``sum_from``)."""
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
    return part


@njit(cache=True)
def topic_totals_log_lik(total, n_k, n_terms, beta):
    """``total`` (the rows' sum) plus the topics' terms of :func:`topic_word_log_lik`."""
    vb = n_terms * beta
    for k in range(len(n_k)):
        total += math.lgamma(vb) - math.lgamma(n_k[k] + vb)
    return total


@njit(cache=True)
def topic_word_log_lik(n_kw, n_k, beta):
    """log p(w | z) = sum_k [lgamma(V b) - lgamma(n_k + V b) + sum_w (lgamma(n_kw + b) - lgamma(b))]."""
    return topic_totals_log_lik(sum_from(0.0, word_log_lik_parts(n_kw, beta)), n_k, n_kw.shape[0], beta)


@njit(cache=True)
def doc_log_lik(cap_ptr, key, count, nnz, kshift, cmask, active, alpha, A):
    """The sum, in document order from 0.0, of :func:`doc_log_lik_parts`."""
    return sum_from(0.0, doc_log_lik_parts(cap_ptr, key, count, nnz, kshift, cmask, active, alpha, A))


@njit(cache=True)
def sum_from(total, part):
    """``total`` plus every ``part[d]`` in turn: a sum over documents split by range (Ray
    workers') continues where the previous range's ended, giving the float of one pass."""
    for d in range(len(part)):
        total += part[d]
    return total


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def doc_log_lik_parts(cap_ptr, key, count, nnz, kshift, cmask, active, alpha, A):
    """Every doc's term of log p(z): for the docs d with active[d] != 0
    lgamma(A) - lgamma(n_d + A) + sum_k (lgamma(n_dk + a_k) - lgamma(a_k)), A = sum_k a_k (given:
    each kind sums its prior its own way).

    Doc d's entries are e in [cap_ptr[d], cap_ptr[d] + nnz[d]): topic key[e] >> kshift, count
    count[e] & cmask (packed lists pass one array twice; plain ones kshift 0, cmask -1). They
    are summed in ascending key order, so the total does not depend on the order of a list."""
    K = len(alpha)
    lga = np.empty(K)
    for k in range(K):
        lga[k] = math.lgamma(alpha[k])
    lgA = math.lgamma(A)
    n_docs = len(nnz)
    part = np.zeros(n_docs)
    for d in prange(n_docs):
        if active[d] == 0:
            continue
        lo = cap_ptr[d]
        order = np.argsort(key[lo:lo + nnz[d]])
        n_d = 0
        acc = 0.0
        for q in order:
            k = key[lo + q] >> kshift
            v = count[lo + q] & cmask
            n_d += v
            acc += math.lgamma(v + alpha[k]) - lga[k]
        part[d] = acc + lgA - math.lgamma(n_d + A)
    return part


@njit(cache=True)
def log_lik_docs_parts(cap_ptr, dt_topic, dt_count, dt_nnz, alpha, n_topics):
    """:func:`doc_log_lik_parts` of every doc under a symmetric alpha, A = K alpha; doc d's
    topics ``dt_topic[cap_ptr[d]:cap_ptr[d] + dt_nnz[d]]`` with their counts ``dt_count``."""
    return doc_log_lik_parts(cap_ptr, dt_topic, dt_count, dt_nnz, 0, -1,
                             np.ones(len(dt_nnz), dtype=np.uint8), np.full(n_topics, alpha),
                             n_topics * alpha)


@njit(cache=True)
def log_lik_docs(cap_ptr, dt_topic, dt_count, dt_nnz, alpha, n_topics):
    """The sum, in document order from 0.0, of :func:`log_lik_docs_parts`."""
    return sum_from(0.0, log_lik_docs_parts(cap_ptr, dt_topic, dt_count, dt_nnz, alpha, n_topics))
