"""Fold-in of new documents under kept LDA samples (arrays in, arrays out): collapsed Gibbs
sampling of the new documents' topics with the sample's topic-word counts held fixed.

With n_kw and n_k fixed, the conditional of a token of word w in document d,

    p(z = k) ~ (n_dk + a_k) (n_kw + b) / (n_k + V b),

splits into three buckets (SparseLDA, Yao et al. 2009), visited in this order:

    q = sum_{k: n_kw > 0} (n_dk + a_k) n_kw inv_k      the word's topics (sample's CSR row)
    r = sum_{k: n_dk > 0} n_dk b inv_k                the document's topics, kept as a running sum
    s = sum_k a_k b inv_k                             the same for every token: a cumulative table

with inv_k = 1 / (n_k + V b). A document is independent of every other one given the topics, so
documents (and kept samples) run in parallel, each on its own random stream derived from
(seed, sample, document): results never depend on the number of threads.

The online pass and the sweeps are :func:`models.common.kernels.foldin.fold_loop`'s; this module
gives it LDA's steps over a document (:class:`DocState`) under a sample (:class:`LdaSample`).

Layout: a kept sample cs's term-major counts are ``tw_topic[tw_ptr[cs, w]:tw_ptr[cs, w + 1]]``
(ascending topics) with ``tw_count`` (see :func:`models.common.gibbs.rows_csr`); the folded-in counts
of document d under sample cs are written sorted by topic into ``out_topic/out_count`` from
``cap_ptr[cs * D + d]``, ``out_nnz[cs, d]`` of them: n_dk summed over the kept fold-in sweeps.
"""
from typing import NamedTuple

import numpy as np
from numba import prange
from ..common.jit import njit

from ..common.kernels.foldin import doc_stream, fold_loop, keep_listed, listed_add, listed_remove, write_listed
from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound, upper_bound


class LdaSample(NamedTuple):
    """One kept sample, fixed during fold-in."""

    row: np.ndarray       # (V + 1,) the sample's tw_ptr row
    tw_topic: np.ndarray
    tw_count: np.ndarray
    alpha: np.ndarray     # (K,)
    tab: np.ndarray       # (3, K) rows inv_k = 1 / (n_k + V b), rb_k = b inv_k and the s bucket,
                          # cumulative (:func:`sample_tables`)


class DocState(NamedTuple):
    """One document while it is folded in: its tokens and counts, and scratch."""

    terms: np.ndarray   # (n,) term of every token
    z: np.ndarray       # (n,) topic of every token
    ndk: np.ndarray     # (K,) n_dk, zero between documents
    dlist: np.ndarray   # (K,) topics with n_dk > 0, in listing order
    dpos: np.ndarray    # (K,) position of a listed topic in dlist
    acc: np.ndarray     # (K,) n_dk summed over the kept sweeps
    alist: np.ndarray   # (K,) topics with acc > 0
    qbuf: np.ndarray    # (K,) q-bucket cumulative masses


@njit(cache=True)
def sample_tables(n_k, alpha, beta, V, inv, rb, s_cum):
    """inv_k = 1 / (n_k + V b), rb_k = b inv_k and the cumulative s bucket of one kept sample."""
    acc = 0.0
    for k in range(len(n_k)):
        inv[k] = 1.0 / (n_k[k] + V * beta)
        rb[k] = beta * inv[k]
        acc += alpha[k] * rb[k]
        s_cum[k] = acc


@njit(cache=True)
def _tables(css, n_k, alpha, beta, V):
    """The tables (len(css), 3, K) of the samples css[j] (:class:`LdaSample`)."""
    tab = np.empty((len(css), 3, n_k.shape[1]))
    for j in range(len(css)):
        sample_tables(n_k[css[j]], alpha[css[j]], beta, V, tab[j, 0], tab[j, 1], tab[j, 2])
    return tab


@njit(cache=True, inline="always")
def draw(w, row, tw_topic, tw_count, alpha, tab, ndk, dlist, dnnz, R, qbuf, u01):
    """The topic of a token of word w given the document's counts ``ndk`` (its topics in
    ``dlist[:dnnz]``, r bucket ``R``) for the uniform ``u01``; the sample's arrays as in
    :class:`LdaSample`."""
    lo = row[w]
    hi = row[w + 1]
    Q = 0.0
    for j in range(lo, hi):
        k = tw_topic[j]
        Q += (ndk[k] + alpha[k]) * tw_count[j] * tab[0, k]
        qbuf[j - lo] = Q
    K = tab.shape[1]
    u = u01 * (Q + R + tab[2, K - 1])
    if u < Q:
        return np.int64(tw_topic[lo + upper_bound(qbuf, 0, hi - lo - 1, u)])
    u -= Q
    if u < R and dnnz > 0:
        for i in range(dnnz):
            k = dlist[i]
            u -= ndk[k] * tab[1, k]
            if u < 0.0:
                return np.int64(k)
        return np.int64(dlist[dnnz - 1])
    u -= R
    return np.int64(upper_bound(tab[2], 0, K - 1, u))


@njit(cache=True)
def _pass(doc, aux, state, resample):
    """The online pass (every token drawn given those before it) or, with ``resample``, a
    sweep (every token taken out of the counts, then drawn)."""
    (row, tw_topic, tw_count, alpha, tab), (terms, z, ndk, dlist, dpos, _, _, qbuf) = doc
    dnnz, R = aux
    for i in range(len(terms)):
        if resample:
            k = z[i]
            R -= tab[1, k]
            dnnz = listed_remove(ndk, dlist, dpos, dnnz, k)
        k = draw(terms[i], row, tw_topic, tw_count, alpha, tab, ndk, dlist, dnnz, R, qbuf,
                 uniform(state))
        z[i] = k
        dnnz = listed_add(ndk, dlist, dpos, dnnz, k)
        R += tab[1, k]
    return dnnz, R


@njit(cache=True)
def _keep(doc, aux, anz):
    st = doc[1]
    return keep_listed(st.ndk, st.dlist, aux[0], st.acc, st.alist, anz)


_fold = fold_loop(_pass, _keep)


@njit(cache=True)
def fold_doc(smp, st, n_iter, n_keep, state):
    """Fold in one document (:func:`models.common.kernels.foldin.fold_loop`): n_dk of the last
    ``n_keep`` sweeps is summed into ``st.acc`` (its topics in ``st.alist``). Leaves ``st.ndk``
    zero; returns the number of topics in ``st.alist``."""
    (dnnz, _), anz = _fold((smp, st), (np.int64(0), 0.0), n_iter, n_keep, state)
    ndk, dlist = st.ndk, st.dlist
    for i in range(dnnz):
        ndk[dlist[i]] = 0
    return anz


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def fold_in(doc_ptr, term_ids, doc0, css, tw_ptr, tw_topic, tw_count, n_k, alpha, beta, seed,
            n_iter, n_keep, cap_ptr, out_topic, out_count, out_nnz):
    """Fold documents ``doc_ptr`` / ``term_ids`` in under every kept sample listed in ``css``;
    ``doc0`` is the global index of the first document (random streams follow it, so splitting
    a batch changes nothing). Writes out_* (see the module docstring) for sample j = css[j]."""
    D = len(doc_ptr) - 1
    J = len(css)
    K = n_k.shape[1]
    tab = _tables(css, n_k, alpha, beta, tw_ptr.shape[1] - 1)
    for item in prange(J * D):
        j = item // D
        d = item % D
        cs = css[j]
        state = doc_stream(seed, cs, doc0 + d)
        n = doc_ptr[d + 1] - doc_ptr[d]
        smp = LdaSample(tw_ptr[cs], tw_topic, tw_count, alpha[cs], tab[j])
        st = DocState(term_ids[doc_ptr[d]:doc_ptr[d + 1]], np.empty(n, dtype=np.int64),
                      np.zeros(K, dtype=np.int64), np.empty(K, dtype=np.int64),
                      np.empty(K, dtype=np.int64), np.zeros(K, dtype=np.int64),
                      np.empty(K, dtype=np.int64), np.empty(K, dtype=np.float64))
        anz = fold_doc(smp, st, n_iter, n_keep, state)
        write_listed(st.alist, anz, st.acc, out_topic, out_count, cap_ptr[item])
        out_nnz[j, d] = anz


# prange entry point: flat arrays (see models/common/kernels/__init__.py)
@njit(cache=True, parallel=True)
def p_pairs(pair_ptr, pair_term, doc_len, css, f_ptr, f_topic, f_count, n_keep, tw_ptr, tw_topic,
            tw_count, n_k, alpha, beta, out):
    """out[i] = P(w_i | d) for the pairs i of document d (``pair_term[pair_ptr[d]:pair_ptr[d + 1]]``),
    averaged over the samples ``css``:

        [sum_k (m_dk + a_k) (n_kw + b) inv_k] / (n_d + A),   m_dk = folded-in n_dk / n_keep

    where document d's folded-in counts under sample j are f_topic/f_count[f_ptr[j, d]:f_ptr[j, d + 1]]
    (ascending topics); the doc's topics meet the word's by binary search."""
    D = len(pair_ptr) - 1
    J = len(css)
    K = n_k.shape[1]
    tab = _tables(css, n_k, alpha, beta, tw_ptr.shape[1] - 1)
    inv, rb, s_cum = tab[:, 0], tab[:, 1], tab[:, 2]
    A = np.empty(J)
    for j in range(J):
        A[j] = alpha[css[j]].sum()
    for d in prange(D):
        for i in range(pair_ptr[d], pair_ptr[d + 1]):
            out[i] = 0.0
        for j in range(J):
            cs = css[j]
            f0 = f_ptr[j, d]
            f1 = f_ptr[j, d + 1]
            smooth = s_cum[j, K - 1]
            for f in range(f0, f1):
                smooth += f_count[f] / n_keep * rb[j, f_topic[f]]
            norm = 1.0 / ((doc_len[d] + A[j]) * J)
            for i in range(pair_ptr[d], pair_ptr[d + 1]):
                w = pair_term[i]
                p = smooth
                lo = tw_ptr[cs, w]
                hi = tw_ptr[cs, w + 1]
                for t in range(lo, hi):
                    k = tw_topic[t]
                    p += alpha[cs, k] * tw_count[t] * inv[j, k]
                # the doc's topics (ascending) met in the word's row (ascending) by binary search
                pos = lo
                for f in range(f0, f1):
                    k = f_topic[f]
                    pos = lower_bound(tw_topic, pos, hi, k)
                    if pos >= hi:
                        break
                    if tw_topic[pos] == k:
                        p += f_count[f] / n_keep * tw_count[pos] * inv[j, k]
                out[i] += p * norm


@njit(cache=True)
def token_conditional(w, smp, ndk, dlist, dnnz):
    """The normalised conditional over all K topics that :func:`draw` samples from, assembled
    from its three buckets (for the tests against the reference)."""
    inv, rb, s_cum = smp.tab[0], smp.tab[1], smp.tab[2]
    K = len(s_cum)
    p = np.zeros(K)
    prev = 0.0
    for k in range(K):
        p[k] = s_cum[k] - prev
        prev = s_cum[k]
    for i in range(dnnz):
        k = dlist[i]
        p[k] += ndk[k] * rb[k]
    for j in range(smp.row[w], smp.row[w + 1]):
        k = smp.tw_topic[j]
        p[k] += (ndk[k] + smp.alpha[k]) * smp.tw_count[j] * inv[k]
    return p / p.sum()
