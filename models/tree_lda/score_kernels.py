"""The tree-LDA document model P_TREE(w | d) for retrieval (arrays in, arrays out; no I/O).

Per kept sample cs, ``P(w | d) = (sum_k n_dk phi_kw + sum_k a_k phi_kw) / (n_d + A)`` with the
document's topic counts read from their sparse rows, and phi of the query terms only (their
paths' edge probabilities, :meth:`models.tree_lda.model.TreeLDA._phi_terms`): no dense (n_docs, K)
theta and no (n_terms, K) phi per sample.
"""
import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.sparse import add_prior_rows32, doc_chunk, n_doc_chunks, store_chunk


@njit(cache=True, inline="always")
def _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, n_d, alpha_sum, phi, ap, scale, s, out):
    """out[t] += scale * P_cs(term t | d); ``s``: float32 scratch of T entries."""
    add_prior_rows32(out, s, phi[cs], dk_topic, dk_count, dk_ptr[cs, d], dk_ptr[cs, d + 1], ap[cs],
                     scale / (n_d + alpha_sum[cs]))


@njit(cache=True, parallel=True)
def p_w_d_mean(dk_ptr, dk_topic, dk_count, doc_len, alpha_sum, phi, ap, out, first):
    """out[t, first + d] = P_TREE(term t | d) averaged over the samples for the documents d of
    ``dk_ptr`` (a range of the collection's, written in place into the whole table; term-major,
    so that a query's terms are rows).

    dk_ptr : (n_cs, n_docs + 1) offsets into the flat dk_topic/dk_count of every sample;
    phi : (n_cs, K, T) float32 P(w_t | k); ap : (n_cs, T) sum_k a_k phi_kw; alpha_sum : (n_cs,);
    phi and ap may have more columns than ``out`` has rows
    (:func:`models.common.kernels.sparse.pad_columns`): those are computed and left out. A
    (document, sample)'s sum over its topics is taken in float32 (a relative error of about 1e-7,
    far below the spread between samples): its rows are then read at half the bytes, and reading
    them is what the kernel's time goes to.
    """
    n_cs = phi.shape[0]
    T = phi.shape[2]
    n_docs = dk_ptr.shape[1] - 1
    scale = 1.0 / n_cs
    for ch in prange(n_doc_chunks(n_docs)):
        d0, d1 = doc_chunk(ch, n_docs)
        acc = np.zeros((d1 - d0, T))
        s = np.empty(T, dtype=np.float32)
        for cs in range(n_cs):
            for d in range(d0, d1):
                _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, doc_len[d], alpha_sum, phi, ap,
                            scale, s, acc[d - d0])
        store_chunk(acc, out, first + d0, 1.0)


@njit(cache=True, parallel=True)
def p_w_d_per_sample(dk_ptr, dk_topic, dk_count, doc_len, alpha_sum, phi, ap, out):
    """out[cs, d, t] = P_TREE(term t | d) under sample cs (overwrites out)."""
    n_cs, n_docs, T = out.shape
    for d in prange(n_docs):
        s = np.empty(T, dtype=np.float32)
        for cs in range(n_cs):
            for t in range(T):
                out[cs, d, t] = 0.0
            _doc_sample(cs, d, dk_ptr, dk_topic, dk_count, doc_len[d], alpha_sum, phi, ap, 1.0,
                        s, out[cs, d])
