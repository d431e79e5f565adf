"""Fold-in for LDA (and every kind whose kept samples are LDA's, such as gLDA): collapsed Gibbs
sampling of new documents' topics with each kept sample's topic-word counts held fixed.

Under every kept sample used, a new document's tokens are first drawn one by one given those
before them, then resampled for ``n_iter`` sweeps; the document-topic counts of the last
``n_keep`` sweeps are averaged. P_TM(w | d) is then Wei & Croft's eq. 3 with those counts, averaged
over the samples, as for training documents. Kernels: :mod:`models._kernels.lda_foldin`.
"""
import numba
import numpy as np

from ._kernels import lda_foldin as F_
from .foldin import FoldedDocs, check_fold_params, token_lists

# Entries of the folded-in count buffers per batch of documents (bounds the memory of a batch).
_BATCH_ENTRIES = 1 << 23


class LDAFoldIn(FoldedDocs):
    """New documents folded in under kept LDA samples ``css`` (see :class:`FoldedDocs`).

    Attributes besides FoldedDocs'
    ------------------------------
    css_ : ndarray of int64
        The kept samples (cs = chain * n_samples + s) the documents were folded in under.
    f_ptr_, f_topic_, f_count_
        Document d's summed counts under sample ``css_[j]``: topics ``f_topic_[f_ptr_[j, d]:
        f_ptr_[j, d + 1]]`` (ascending), counts ``f_count_[...]`` summed over ``n_keep`` sweeps.
    """

    def __init__(self, model, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params):
        self.model = model
        self.doc_len_ = doc_len
        self.css_ = css
        self.f_ptr_, self.f_topic_, self.f_count_ = f_ptr, f_topic, f_count
        self.n_keep = n_keep
        self.params_ = params
        self.doc_topics_ = self._mixture(chain)

    def _mixture(self, chain):
        m = self.model
        S = m.n_samples_
        rows = [j for j, cs in enumerate(self.css_) if cs // S == chain]
        D = self.n_docs
        out = np.zeros((D, m.n_topics))
        for j in rows:
            a = m.alpha_samples_[self.css_[j]]
            norm = 1.0 / (self.doc_len_ + a.sum())
            out += norm[:, None] * a[None, :]
            cnt = np.diff(self.f_ptr_[j])
            docs = np.repeat(np.arange(D), cnt)
            sl = slice(self.f_ptr_[j, 0], self.f_ptr_[j, D])
            np.add.at(out, (docs, self.f_topic_[sl].astype(np.int64)),
                      self.f_count_[sl] / self.n_keep * norm[docs])
        return out / len(rows)

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        out = np.empty(len(pair_term))
        m._with_threads(F_.p_pairs, pair_ptr, np.ascontiguousarray(pair_term, dtype=np.int64),
                        self.doc_len_, self.css_, self.f_ptr_, self.f_topic_, self.f_count_,
                        float(self.n_keep), m.tw_ptr_, m.tw_topic_, m.tw_count_, m.n_k_samples_,
                        m.alpha_samples_, float(m.beta), out)
        return out


class LDAFoldInMixin:
    """``fold_in`` and ``transform`` for the LDA document model (needs its kept-sample arrays)."""

    def _fold_css(self, samples):
        S = self.n_samples_
        if samples is None:
            samples = S
        if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or not 1 <= samples <= S:
            raise ValueError(f"samples must be None (all) or an int in [1, {S}], got {samples!r}")
        return np.array([c * S + s for c in range(self.n_chains) for s in range(S - samples, S)],
                        dtype=np.int64)

    def fold_in(self, docs, n_iter=10, n_keep=5, samples=1, seed=0, chain=0):
        """Posterior of new documents given the trained topics.

        Parameters
        ----------
        docs : list of int arrays, or Corpus
            The new documents as term ids of the model's vocabulary.
        n_iter : int, default=10
            Gibbs sweeps over every new document after its online initialisation.
        n_keep : int, default=5
            The last ``n_keep`` sweeps are averaged.
        samples : int or None, default=1
            Fold in under the last ``samples`` kept samples of every chain (None: all of them,
            as P_TM of training documents averages all of them; the cost grows with the number
            of samples, the held-out likelihood gains little).
        seed : int, default=0
            Same seed, same result whatever ``n_jobs`` (every document and sample has its own
            random stream).
        chain : int, default=0
            The chain whose topics ``doc_topics_`` is over.

        Returns
        -------
        LDAFoldIn
        """
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        self._cs_of_chain(chain)
        css = self._fold_css(samples)
        doc_ptr, term_ids = token_lists(docs, self.n_terms_)
        return self._with_threads(self._fold_in, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain,
                                  dict(n_iter=n_iter, n_keep=n_keep, samples=samples, seed=seed))

    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params):
        K, J = self.n_topics, len(css)
        D = len(doc_ptr) - 1
        doc_len = np.diff(doc_ptr)
        cap = np.minimum(doc_len * n_keep, K)
        seg_topic, seg_count = [[] for _ in range(J)], [[] for _ in range(J)]
        nnz = np.zeros((J, D), dtype=np.int64)
        d0 = 0
        while d0 < D:  # batches of documents whose buffers fit _BATCH_ENTRIES
            d1 = d0 + 1
            total = cap[d0] * J
            while d1 < D and total + cap[d1] * J <= _BATCH_ENTRIES:
                total += cap[d1] * J
                d1 += 1
            b_cap = np.tile(cap[d0:d1], J)
            cap_ptr = np.concatenate([[0], np.cumsum(b_cap)]).astype(np.int64)
            out_topic = np.empty(cap_ptr[-1], dtype=np.uint16 if K <= 65535 else np.int32)
            out_count = np.empty(cap_ptr[-1], dtype=np.int32)
            b_nnz = np.zeros((J, d1 - d0), dtype=np.int64)
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], term_ids[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.tw_ptr_, self.tw_topic_, self.tw_count_, self.n_k_samples_,
                       self.alpha_samples_, float(self.beta), seed, n_iter, n_keep, cap_ptr,
                       out_topic, out_count, b_nnz)
            used = np.arange(cap_ptr[-1]) - np.repeat(cap_ptr[:-1], b_cap) < np.repeat(b_nnz.ravel(), b_cap)
            per_j = (d1 - d0)
            for j in range(J):  # the entries of sample j are contiguous in the batch
                sl = slice(cap_ptr[j * per_j], cap_ptr[(j + 1) * per_j])
                seg_topic[j].append(out_topic[sl][used[sl]])
                seg_count[j].append(out_count[sl][used[sl]])
            nnz[:, d0:d1] = b_nnz
            d0 = d1
        f_topic = np.concatenate([a for j in range(J) for a in seg_topic[j]] or [np.zeros(0, np.uint16)])
        f_count = np.concatenate([a for j in range(J) for a in seg_count[j]] or [np.zeros(0, np.int32)])
        flat = np.concatenate([[0], np.cumsum(nnz.ravel())]).astype(np.int64)
        f_ptr = np.stack([flat[j * D:(j + 1) * D + 1] for j in range(J)])
        return LDAFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params)

    def transform(self, docs, **fold_params):
        """Topic mixtures (n_docs, n_topics) of new documents under chain ``chain``'s topics;
        ``fold_params`` as for :meth:`fold_in`."""
        return self.fold_in(docs, **fold_params).doc_topics_
