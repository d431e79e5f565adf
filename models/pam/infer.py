"""The PAM document model P_PAM(w | d) for retrieval and the views of a fitted PAM (topics,
correlations): the part of :class:`models.pam.model.PAM` that reads only the kept samples, and how
the kept samples are stored.
"""
import mmap

import numba
import numpy as np

from . import files
from ..common.bounds import DocumentBounds
from ..common.checkpoint import AnonymousMap, doc_ranges, release
from ..common.kernels.sparse import DOC_CHUNK, row_nnz, rows_to_csr
from ..common.generate import log_dirichlet, over_kept_samples
from .score_kernels import (add_rows_at, prior_tables, score_p_w_d,
                            score_p_w_d_per_sample, sparse_phi)


class PAMDocumentModel:
    """Mixin of :class:`models.pam.model.PAM`: everything computed from the fitted arrays (``dp_*``,
    ``tw_*``, ``n_j_samples_``, ``alpha_samples_``, ``doc_len_``)."""

    # -- document model -----------------------------------------------------------------------

    _INFERENCE_ARRAYS = ("dp_ptr", "dp_key_samples", "dp_count_samples", "tw_ptr", "tw_sub",
                         "tw_count", "n_j_samples", "alpha_samples", "doc_len")
    _FILE_SPEC = files.SPEC  # what a model file and a checkpoint must hold

    @property
    def n_topics(self):
        """The sub-topics: what ``topic_words`` and the document models mix (the protocol's K)."""
        return self.n_sub

    def _tables(self, term_ids):
        """The arguments of the scoring kernels after the document arrays: n_sub, alpha_r,
        S (n_cs, n_super), phi's shared part b / (n_j + V b) (n_cs, n_sub), its count part
        sparse over (sub-topic, term) (:func:`~models.pam.score_kernels.sparse_phi`),
        G = alpha @ phi (n_cs, n_super, T) and base = sum_i G_i / S_i (n_cs, T)."""
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        b = float(self.beta)
        S = np.ascontiguousarray(self.alpha_samples_.sum(2))
        phi_b = b / (self.n_j_samples_ + self.n_terms_ * b)
        sparse = self._sparse_phi(term_ids)
        G, base = prior_tables(self.alpha_samples_, S, phi_b, *sparse, len(term_ids))
        return (self.n_sub, self._alpha_r(), S, phi_b, *sparse, G, base)

    def _sparse_phi(self, term_ids):
        """:func:`~models.pam.score_kernels.sparse_phi` a kept sample at a time, the pages of each
        sample's rows of a memory-mapped file released after it (touching a row maps the pages
        around it too): a batch holds its terms' rows of a sample, not of every sample."""
        b, parts = float(self.beta), []
        for cs in range(self.tw_ptr_.shape[0]):
            parts.append(sparse_phi(self.tw_ptr_[cs:cs + 1], self.tw_sub_, self.tw_count_,
                                    self.n_j_samples_[cs:cs + 1], b, term_ids))
            for a in (self.tw_sub_, self.tw_count_):
                release(a, self.tw_ptr_[cs, 0], self.tw_ptr_[cs, -1])
        nnz = np.cumsum([0] + [len(p[1]) for p in parts])
        sp_ptr = np.concatenate([p[0] - p[0][0, 0] + n for p, n in zip(parts, nnz)])
        return (sp_ptr, np.concatenate([p[1] for p in parts]).astype(np.int32),
                np.concatenate([p[2] for p in parts]).astype(np.float64))

    def p_w_d(self, term_ids):
        """P_PAM(w | d) for every document, averaged over all kept samples of all chains.

        ``P_PAM(w | d) = sum_i sum_j (n_i^d + a_r) / (n_d + s a_r) * (n_ij^d + a_ij) / (n_i^d + S_i)
        * (n_jw + beta) / (n_j + V beta)`` per sample.

        Parameters
        ----------
        term_ids : array-like of int, shape (n_query_terms,)

        Returns
        -------
        ndarray of shape (n_docs, n_query_terms), float64
        """
        return self._score(self._tables(term_ids), True).T

    def _score(self, tables, with_rows):
        """:func:`score_p_w_d` over every document, term-major (n_terms, n_docs)."""
        T = tables[-1].shape[1]
        out = np.empty((T, len(self.doc_len_)))
        # a document range at a time, every sample's pairs of it (doc_ranges): a pass holds a
        # range of the mapped pair table, not the table; a document's sum is the same either way
        pairs = (self.dp_key_samples_, self.dp_count_samples_)
        for d0, d1 in doc_ranges(self.dp_ptr_, pairs, DOC_CHUNK * numba.get_num_threads()):
            score_p_w_d(np.ascontiguousarray(self.dp_ptr_[:, d0:d1 + 1]), *pairs, self.doc_len_[d0:d1],
                        *tables, with_rows, out[:, d0:d1])
        return out

    def p_w_d_bounds(self, term_ids):
        """Bounds on :meth:`p_w_d` and its exact entries on demand
        (:class:`~models.common.bounds.DocumentBounds`), or None where they do not hold.

        The lower bound is the shared and count parts alone; the super-topics' G rows, half or
        more of :meth:`p_w_d`'s work, are added where asked. The gap is ``r0 = a_r / (n_d + s a_r)``
        times the samples' mean ``base``. It holds when every learnt alpha sum S_i is at most alpha_root,
        so that each present super-topic's G-row weight is <= 0 (as the default prior learns
        them: S_i well below a_r = 50 / n_super); otherwise None."""
        tables = self._tables(term_ids)
        alpha_r, S, base = tables[1], tables[2], tables[-1]
        if np.any(S > alpha_r):
            return None
        lower = self._score(tables, False)
        n_cs = self.dp_ptr_.shape[0]
        doc_gap = alpha_r / (self.doc_len_ + self.n_super * alpha_r) / n_cs
        term_gap = base.sum(0)

        def exact(docs, ptr, cols):
            G_t = np.ascontiguousarray(tables[-2].transpose(0, 2, 1))
            add_rows_at(self.dp_ptr_, self.dp_key_samples_, self.dp_count_samples_, self.doc_len_,
                        *tables, G_t, docs, ptr, cols, lower)

        return DocumentBounds(lower.T, doc_gap, term_gap, exact)

    def p_w_d_per_sample(self, term_ids):
        """P_PAM(w | d) of every kept sample: ndarray of shape (n_chains, n_samples, n_docs, n_terms)."""
        tables = self._tables(term_ids)
        n_cs = self.dp_ptr_.shape[0]
        out = np.empty((n_cs, len(self.doc_len_), len(term_ids)))
        score_p_w_d_per_sample(self.dp_ptr_, self.dp_key_samples_, self.dp_count_samples_,
                               self.doc_len_, *tables, out)
        return out.reshape(self.n_chains, n_cs // self.n_chains, *out.shape[1:])

    def _doc_pairs(self, cs, doc):
        lo, hi = self.dp_ptr_[cs, doc], self.dp_ptr_[cs, doc + 1]
        key = self.dp_key_samples_[lo:hi].astype(np.int64)
        return key // self.n_sub, key % self.n_sub, self.dp_count_samples_[lo:hi]

    def doc_super_topics(self, doc, top=10, chain=0):
        """Most probable super-topics of ``doc``: theta_r averaged over the kept samples of
        ``chain``. Returns (super-topic ids int64, probabilities float64)."""
        self._check_fitted()
        D = len(self.doc_len_)
        if not 0 <= doc < D:
            raise ValueError(f"doc must be in [0, {D}), got {doc!r}")
        a = self._alpha_r()
        theta = np.zeros(self.n_super)
        css = self._cs_of_chain(chain)
        for cs in css:
            t = np.full(self.n_super, a)
            sup, _, cnt = self._doc_pairs(cs, doc)
            np.add.at(t, sup, cnt)
            theta += t / (self.doc_len_[doc] + self.n_super * a)
        theta /= len(css)
        ids = np.argsort(-theta, kind="stable")[:top]
        return ids.astype(np.int64), theta[ids]

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable sub-topics of ``doc`` (the protocol's topics, those of ``topic_words``):
        sum_i theta_i theta_ij averaged over the kept samples of ``chain``. Returns (sub-topic ids
        int64, probabilities float64)."""
        self._check_fitted()
        a = self._alpha_r()
        mix = np.zeros(self.n_sub)
        css = self._cs_of_chain(chain)
        for cs in css:
            al = self.alpha_samples_[cs]
            n_is = np.zeros(self.n_super)
            n_ij = np.zeros((self.n_super, self.n_sub))
            sup, sub, cnt = self._doc_pairs(cs, doc)
            np.add.at(n_is, sup, cnt)
            np.add.at(n_ij, (sup, sub), cnt)
            th = (n_is + a) / (self.doc_len_[doc] + self.n_super * a)
            mix += th @ ((n_ij + al) / (n_is + al.sum(1))[:, None])
        mix /= len(css)
        ids = np.argsort(-mix, kind="stable")[:top]
        return ids.astype(np.int64), mix[ids]

    def topic_words(self, sub, top=10, chain=0, terms=None):
        """Most probable terms of sub-topic ``sub``: phi averaged over the kept samples of
        ``chain``. Returns (term ids int64, probabilities float64), or (term, probability) pairs
        with a vocabulary ``terms``."""
        self._check_fitted()
        if not 0 <= sub < self.n_sub:
            raise ValueError(f"sub-topic must be in [0, {self.n_sub}), got {sub!r}")
        phi = np.zeros(self.n_terms_)
        css = self._cs_of_chain(chain)
        for cs in css:
            phi += self.phi_matrix(cs, subs=[sub])[0]
        phi /= len(css)
        ids = np.argsort(-phi, kind="stable")[:top]
        return self._with_terms(ids.astype(np.int64), phi[ids], terms)

    def sample_word_probs(self, n_docs, seed=0):
        """theta_root ~ Dir(alpha_root), each super-topic's Dir(alpha of the kept sample) over
        sub-topics, p = mixture phi (see :class:`models.common.base.TopicModel`)."""
        self._check_fitted()
        rng = np.random.default_rng(seed)

        def draw(cs, m):
            theta_r = np.exp(log_dirichlet(rng, np.full(self.n_super, self._alpha_r()), m))
            mix = np.zeros((m, self.n_sub))
            for i in range(self.n_super):
                mix += theta_r[:, i:i + 1] * np.exp(log_dirichlet(rng, self.alpha_samples_[cs, i], m))
            return mix @ self.phi_matrix(cs)

        return over_kept_samples(self.alpha_samples_.shape[0], n_docs, draw)

    def phi_matrix(self, cs, subs=None):
        """Dense phi of kept sample ``cs`` (= chain * n_samples + sample) for the sub-topics
        ``subs`` (default all): ndarray of shape (len(subs), n_terms), float64."""
        self._check_fitted()
        subs = np.arange(self.n_sub) if subs is None else np.asarray(subs, dtype=np.int64)
        V = self.n_terms_
        b = float(self.beta)
        row_of = np.full(self.n_sub, -1, dtype=np.int64)
        row_of[subs] = np.arange(len(subs))
        lo, hi = self.tw_ptr_[cs, 0], self.tw_ptr_[cs, V]
        words = np.repeat(np.arange(V), np.diff(self.tw_ptr_[cs]))
        rows = row_of[self.tw_sub_[lo:hi].astype(np.int64)]
        keep = rows >= 0
        cnt = np.zeros((len(subs), V))
        cnt[rows[keep], words[keep]] = self.tw_count_[lo:hi][keep]
        return (cnt + b) / (self.n_j_samples_[cs, subs][:, None] + V * b)

    def super_sub_counts(self, cs):
        """Corpus-level n_ij of kept sample ``cs``: ndarray of shape (n_super, n_sub), int64."""
        self._check_fitted()
        lo, hi = self.dp_ptr_[cs, 0], self.dp_ptr_[cs, -1]
        key = self.dp_key_samples_[lo:hi].astype(np.int64)
        out = np.zeros(self.n_super * self.n_sub, dtype=np.int64)
        np.add.at(out, key, self.dp_count_samples_[lo:hi])
        return out.reshape(self.n_super, self.n_sub)

    def correlations(self, chain=0, top_subs=5):
        """Super-topics with their sub-topics ranked by alpha_ij (Figure 4 / Table 13).

        Returns a list, ordered by corpus share, of dicts ``{"super", "share", "alpha_sum",
        "subs": [(sub, alpha_ij averaged over the chain's samples), ...]}``.
        """
        self._check_fitted()
        css = list(self._cs_of_chain(chain))
        alpha = self.alpha_samples_[css].mean(0)
        n_i = np.mean([self.super_sub_counts(cs).sum(1) for cs in css], axis=0)
        share = n_i / max(n_i.sum(), 1)
        out = []
        for i in np.argsort(-share, kind="stable"):
            order = np.argsort(-alpha[i], kind="stable")[:top_subs]
            out.append(dict(super=int(i), share=float(share[i]), alpha_sum=float(alpha[i].sum()),
                            subs=[(int(j), float(alpha[i, j])) for j in order]))
        return out


# -- storage of the kept samples ----------------------------------------------------------------

_ANON_MIN = 1 << 16  # bytes from which an array gets its own mapping


def anon_empty(n, dtype):
    """An uninitialised 1-d array in its own private anonymous mapping from 64 KiB on: its pages
    go back to the system as soon as it is dropped, whatever the allocator's thresholds, so
    the kept samples' arrays, freed one by one while they are gathered, never stay resident."""
    dtype = np.dtype(dtype)
    n = int(n)
    if n * dtype.itemsize < _ANON_MIN or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty(n, dtype=dtype)
    return np.frombuffer(AnonymousMap(-1, n * dtype.itemsize, flags=mmap.MAP_PRIVATE), dtype=dtype)


def count_dtype(max_count):
    """The narrowest dtype of the kept samples' counts (and sub-topic ids) that holds ``max_count``."""
    return np.uint16 if max_count <= np.iinfo(np.uint16).max else np.int32


def count_csr(dense):
    """The nonzeros of a (terms, sub-topics) count table as CSR: (ptr int64, sub-topics and
    counts each in the :func:`count_dtype` of its largest value)."""
    nnz = np.empty(dense.shape[0], dtype=np.int64)
    row_nnz(dense, nnz)
    ptr = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    cols = anon_empty(ptr[-1], count_dtype(dense.shape[1] - 1))
    counts = anon_empty(ptr[-1], count_dtype(dense.max(initial=0)))
    rows_to_csr(dense, ptr, cols, counts)
    return ptr, cols, counts


def gather(samples, ptr, *names):
    """Every sample's pointer row shifted to where its part starts (rows stacked), and its
    arrays ``names`` concatenated in sample order (in the widest dtype among the samples).
    Each sample's arrays leave its dict once copied, so the peak holds one sample beyond the
    result, not a second copy of all of them."""
    sizes = np.array([len(s[names[0]]) for s in samples], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    ptrs = np.stack([s.pop(ptr) + o for s, o in zip(samples, off[:-1])]).astype(np.int64)
    outs = [anon_empty(off[-1], np.result_type(*[s[n].dtype for s in samples])) for n in names]
    for k, s in enumerate(samples):
        for name, out in zip(names, outs):
            out[off[k]:off[k + 1]] = s.pop(name)
    return (ptrs, *outs)
