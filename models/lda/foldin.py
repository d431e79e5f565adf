"""Fold-in for LDA (and every kind whose kept samples are LDA's, such as gLDA): collapsed Gibbs
sampling of new documents' topics with each kept sample's topic-word counts held fixed.

Under every kept sample used, a new document's tokens are first drawn one by one given those
before them, then resampled for ``n_iter`` sweeps; the document-topic counts of the last
``n_keep`` sweeps are averaged. P_TM(w | d) is then Wei & Croft's eq. 3 with those counts, averaged
over the samples, as for training documents. Kernels: :mod:`models.lda.foldin_kernels`.
"""
import numpy as np

from . import foldin_kernels as F_
from ..common.foldin import SampledFoldInMixin, SampledTopicFoldIn, fold_batches

class LDAFoldIn(SampledTopicFoldIn):
    """New documents folded in under kept LDA samples (see :class:`SampledTopicFoldIn`)."""

    def _mixture(self, chain):
        m = self.model
        rows = self._chain_rows(chain)
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


class LDAFoldInMixin(SampledFoldInMixin):
    """``fold_in`` and ``transform`` for the LDA document model (needs its kept-sample arrays):
    the document-topic counts of the kept sweeps are averaged; ``fold_in`` returns
    :class:`LDAFoldIn`."""

    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params):
        K = self.n_topics
        doc_len = np.diff(doc_ptr)

        def run(d0, d1, cap_ptr, out_topic, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], term_ids[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.tw_ptr_, self.tw_topic_, self.tw_count_, self.n_k_samples_,
                       self.alpha_samples_, float(self.beta), seed, n_iter, n_keep, cap_ptr,
                       out_topic, out_count, out_nnz)

        cap = np.minimum(doc_len * n_keep, K)
        f_ptr, f_topic, f_count = self._with_threads(
            fold_batches, doc_len, len(css), cap, run, np.uint16 if K <= 65535 else np.int32)
        return LDAFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params)
