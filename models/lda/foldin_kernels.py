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

Layout: a kept sample cs's term-major counts are ``tw_topic[tw_ptr[cs, w]:tw_ptr[cs, w + 1]]``
(ascending topics) with ``tw_count`` (see :func:`models.common.gibbs.rows_csr`); the folded-in counts
of document d under sample cs are written sorted by topic into ``out_topic/out_count`` from
``cap_ptr[cs * D + d]``, ``out_nnz[cs, d]`` of them: n_dk summed over the kept fold-in sweeps.
"""
import numpy as np
from numba import njit, prange

from ..common.kernels.rng import uniform
from ..common.kernels.sparse import lower_bound


@njit(cache=True)
def _splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x, z ^ (z >> np.uint64(31))


@njit(cache=True)
def seed_stream(seed, stream, state):
    """xoshiro256** state (uint64[4]) of stream ``stream`` under ``seed``, as
    :func:`models.common.kernels.rng.make_rng_states` derives stream ``stream`` (flat index)."""
    x = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + (np.uint64(stream) + np.uint64(1)) * np.uint64(0xD1B54A32D192ED03)
    for j in range(4):
        x, v = _splitmix64(x)
        state[j] = v


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
def draw(w, row, tw_topic, tw_count, inv, alpha, ndk, dlist, dnnz, R, rb, s_cum, qbuf, u01):
    """The topic of a token of word w given the document's counts ``ndk`` (its topics in
    ``dlist[:dnnz]``, r bucket ``R``) for the uniform ``u01``; ``row`` is the sample's tw_ptr row."""
    lo = row[w]
    hi = row[w + 1]
    Q = 0.0
    for j in range(lo, hi):
        k = tw_topic[j]
        Q += (ndk[k] + alpha[k]) * tw_count[j] * inv[k]
        qbuf[j - lo] = Q
    K = len(s_cum)
    u = u01 * (Q + R + s_cum[K - 1])
    if u < Q:
        a = 0
        b = hi - lo - 1
        while a < b:
            m = (a + b) >> 1
            if qbuf[m] > u:
                b = m
            else:
                a = m + 1
        return np.int64(tw_topic[lo + a])
    u -= Q
    if u < R and dnnz > 0:
        for i in range(dnnz):
            k = dlist[i]
            u -= ndk[k] * rb[k]
            if u < 0.0:
                return np.int64(k)
        return np.int64(dlist[dnnz - 1])
    u -= R
    a = 0
    b = K - 1
    while a < b:
        m = (a + b) >> 1
        if s_cum[m] > u:
            b = m
        else:
            a = m + 1
    return np.int64(a)


@njit(cache=True)
def fold_doc(terms, row, tw_topic, tw_count, inv, alpha, rb, s_cum, n_iter, n_keep, state,
             z, ndk, dlist, dpos, acc, alist, qbuf):
    """Fold in one document (tokens ``terms``): an online pass (every token drawn given those
    before it), then ``n_iter`` sweeps; n_dk of the last ``n_keep`` is summed into ``acc``
    (its topics in ``alist``). Leaves ``ndk`` zero; returns the number of topics in ``alist``."""
    n = len(terms)
    dnnz = 0
    R = 0.0
    for i in range(n):  # online initialisation
        k = draw(terms[i], row, tw_topic, tw_count, inv, alpha, ndk, dlist, dnnz, R, rb, s_cum,
                 qbuf, uniform(state))
        z[i] = k
        if ndk[k] == 0:
            dlist[dnnz] = k
            dpos[k] = dnnz
            dnnz += 1
        ndk[k] += 1
        R += rb[k]
    anz = 0
    for it in range(n_iter):
        for i in range(n):
            k = z[i]
            ndk[k] -= 1
            R -= rb[k]
            if ndk[k] == 0:
                last = dlist[dnnz - 1]
                dlist[dpos[k]] = last
                dpos[last] = dpos[k]
                dnnz -= 1
            k = draw(terms[i], row, tw_topic, tw_count, inv, alpha, ndk, dlist, dnnz, R, rb,
                     s_cum, qbuf, uniform(state))
            z[i] = k
            if ndk[k] == 0:
                dlist[dnnz] = k
                dpos[k] = dnnz
                dnnz += 1
            ndk[k] += 1
            R += rb[k]
        if it >= n_iter - n_keep:
            for i in range(dnnz):
                k = dlist[i]
                if acc[k] == 0:
                    alist[anz] = k
                    anz += 1
                acc[k] += ndk[k]
    for i in range(dnnz):
        ndk[dlist[i]] = 0
    return anz


@njit(cache=True, parallel=True)
def fold_in(doc_ptr, term_ids, doc0, css, tw_ptr, tw_topic, tw_count, n_k, alpha, beta, seed,
            n_iter, n_keep, cap_ptr, out_topic, out_count, out_nnz):
    """Fold documents ``doc_ptr`` / ``term_ids`` in under every kept sample listed in ``css``;
    ``doc0`` is the global index of the first document (random streams follow it, so splitting
    a batch changes nothing). Writes out_* (see the module docstring) for sample j = css[j]."""
    D = len(doc_ptr) - 1
    J = len(css)
    K = n_k.shape[1]
    V = tw_ptr.shape[1] - 1
    inv = np.empty((J, K))
    rb = np.empty((J, K))
    s_cum = np.empty((J, K))
    for j in range(J):
        sample_tables(n_k[css[j]], alpha[css[j]], beta, V, inv[j], rb[j], s_cum[j])
    max_len = 0
    for d in range(D):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    for item in prange(J * D):
        j = item // D
        d = item % D
        cs = css[j]
        state = np.empty(4, dtype=np.uint64)
        seed_stream(seed, np.int64(cs) * np.int64(1 << 40) + doc0 + d, state)
        n = doc_ptr[d + 1] - doc_ptr[d]
        z = np.empty(n, dtype=np.int64)
        ndk = np.zeros(K, dtype=np.int64)
        dlist = np.empty(K, dtype=np.int64)
        dpos = np.empty(K, dtype=np.int64)
        acc = np.zeros(K, dtype=np.int64)
        alist = np.empty(K, dtype=np.int64)
        qbuf = np.empty(K, dtype=np.float64)
        anz = fold_doc(term_ids[doc_ptr[d]:doc_ptr[d + 1]], tw_ptr[cs], tw_topic, tw_count,
                       inv[j], alpha[cs], rb[j], s_cum[j], n_iter, n_keep, state, z, ndk, dlist,
                       dpos, acc, alist, qbuf)
        topics = np.sort(alist[:anz])
        o = cap_ptr[item]
        for i in range(anz):
            out_topic[o + i] = topics[i]
            out_count[o + i] = acc[topics[i]]
        out_nnz[j, d] = anz


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
    V = tw_ptr.shape[1] - 1
    inv = np.empty((J, K))
    rb = np.empty((J, K))
    s_cum = np.empty((J, K))
    A = np.empty(J)
    for j in range(J):
        sample_tables(n_k[css[j]], alpha[css[j]], beta, V, inv[j], rb[j], s_cum[j])
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
def token_conditional(w, row, tw_topic, tw_count, inv, alpha, ndk, dlist, dnnz, R, rb, s_cum):
    """The normalised conditional over all K topics that :func:`draw` samples from, assembled
    from its three buckets (for the tests against the reference)."""
    K = len(s_cum)
    p = np.zeros(K)
    prev = 0.0
    for k in range(K):
        p[k] = s_cum[k] - prev
        prev = s_cum[k]
    for i in range(dnnz):
        k = dlist[i]
        p[k] += ndk[k] * rb[k]
    for j in range(row[w], row[w + 1]):
        k = tw_topic[j]
        p[k] += (ndk[k] + alpha[k]) * tw_count[j] * inv[k]
    return p / p.sum()
