"""Fold-in of new documents under kept tree-LDA samples (arrays in, arrays out): collapsed Gibbs
sampling of the new documents' topics with the sample's edge counts held fixed.

In training a token draws its (topic k, path p) jointly from

    p(k, p) ~ (n_dk + a_k) prod_{e in p} (beta_e + n_ke) / (beta_sum_parent(e) + n_k,parent(e)).

With the edge counts fixed, the product no longer depends on the document, and summing it over
the paths of the token's word gives P(w | k), the topic's word distribution
(:func:`models.tree_lda.state.edge_word_probs`). The topic's marginal is then

    p(k) ~ (n_dk + a_k) P(w | k),

and nothing of a new document depends on its tokens' paths: drawing k from it is exact, and the
paths are not drawn. ``phi[j, u, k]`` is P(w_u | k) under sample j for the words u of the batch
(the union of their tokens' words, ``terms`` being indices into it). Documents and samples run in
parallel on their own random streams (seed, sample, document).
"""
import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.foldin import doc_stream, fold_loop, keep_dense, write_dense
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import upper_bound


@njit(cache=True)
def draw(u, phi, alpha, ndk, cum, u01):
    """The topic of a token of word row ``u`` of ``phi`` (U, K) given the document's counts."""
    K = len(alpha)
    acc = 0.0
    for k in range(K):
        acc += (ndk[k] + alpha[k]) * phi[u, k]
        cum[k] = acc
    return upper_bound(cum, 0, K - 1, u01 * acc)


@njit(cache=True)
def _pass(doc, aux, state, resample):
    """The online pass (every token drawn given those before it) or, with ``resample``, a
    sweep (every token taken out of the counts, then drawn)."""
    ndk, _, terms, phi, alpha, z, cum = doc
    for i in range(len(terms)):
        if resample:
            ndk[z[i]] -= 1
        k = draw(terms[i], phi, alpha, ndk, cum, uniform(state))
        z[i] = k
        ndk[k] += 1
    return aux


_fold = fold_loop(_pass, keep_dense)


@njit(cache=True)
def fold_doc(terms, phi, alpha, n_iter, n_keep, state, z, ndk, acc, cum):
    """Fold in one document (word rows ``terms``) by
    :func:`models.common.kernels.foldin.fold_loop`; n_dk of the last ``n_keep`` sweeps is summed
    into ``acc``. Leaves ``ndk`` zero."""
    _fold((ndk, acc, terms, phi, alpha, z, cum), np.int64(0), n_iter, n_keep, state)
    for i in range(len(terms)):
        ndk[z[i]] = 0


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def fold_in(doc_ptr, terms, doc0, css, phi, alpha, seed, n_iter, n_keep, cap_ptr, out_key,
            out_count, out_nnz):
    """Fold documents ``doc_ptr`` / ``terms`` (rows of ``phi``) in under the samples css[j]
    (``phi[j]``, ``alpha[j]``); ``doc0`` is the global index of the first document. Document
    d's summed counts under sample j go, by ascending topic, into ``out_key/out_count`` from
    ``cap_ptr[j * D + d]``, ``out_nnz[j, d]`` of them."""
    D = len(doc_ptr) - 1
    J = len(css)
    K = phi.shape[2]
    for item in prange(J * D):
        j = item // D
        d = item % D
        state = doc_stream(seed, css[j], doc0 + d)
        n = doc_ptr[d + 1] - doc_ptr[d]
        acc = np.zeros(K, dtype=np.int64)
        fold_doc(terms[doc_ptr[d]:doc_ptr[d + 1]], phi[j], alpha[j], n_iter, n_keep, state,
                 np.empty(n, dtype=np.int64), np.zeros(K, dtype=np.int64), acc, np.empty(K))
        out_nnz[j, d] = write_dense(acc, out_key, out_count, cap_ptr[item])


@njit(cache=True)
def doc_theta(f_key, f_count, f0, f1, n_d, n_keep, alpha, out):
    """theta of a folded document under one sample, (m_dk + a_k) / (n_d + sum a) with m = summed
    counts / n_keep: the training document model's with the averaged counts (overwrites out)."""
    A = 0.0
    for k in range(len(alpha)):
        A += alpha[k]
    den = 1.0 / (n_d + A)
    for k in range(len(alpha)):
        out[k] = alpha[k] * den
    for f in range(f0, f1):
        out[f_key[f]] += f_count[f] / n_keep * den


@njit(cache=True, parallel=True)
def p_pairs(pair_ptr, pair_term, doc_len, f_ptr, f_key, f_count, n_keep, phi, alpha, out):
    """out[i] = P_TREE(w_i | d) = sum_k theta_dk P(w_i | k) for the pairs i of document d
    (``pair_term[pair_ptr[d]:pair_ptr[d + 1]]``, rows of ``phi[j]``), averaged over the samples j."""
    D = len(pair_ptr) - 1
    J, _, K = phi.shape
    for d in prange(D):
        theta = np.empty(K)
        for i in range(pair_ptr[d], pair_ptr[d + 1]):
            out[i] = 0.0
        for j in range(J):
            doc_theta(f_key, f_count, f_ptr[j, d], f_ptr[j, d + 1], doc_len[d], n_keep, alpha[j],
                      theta)
            for i in range(pair_ptr[d], pair_ptr[d + 1]):
                u = pair_term[i]
                p = 0.0
                for k in range(K):
                    p += theta[k] * phi[j, u, k]
                out[i] += p / J


@njit(cache=True)
def token_conditional(u, phi, alpha, ndk):
    """The normalised conditional over the K topics that :func:`draw` samples from."""
    p = np.empty(len(alpha))
    for k in range(len(alpha)):
        p[k] = (ndk[k] + alpha[k]) * phi[u, k]
    return p / p.sum()
