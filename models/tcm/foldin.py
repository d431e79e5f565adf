"""Fold-in for TCM: point-wise Gibbs sampling of new documents' boundary variables (where
collocations end and their topics) with each kept sample's restaurants held fixed.

Under every kept sample used, a new document is segmented online (lengths as P0 draws them,
topics given the collocations before), then resampled for ``n_iter`` sweeps over its positions;
the collocation-topic counts of the last ``n_keep`` sweeps are averaged. P_TM is then the TCM
document model with those counts, averaged over the samples, as for training documents:
:meth:`TCMFoldIn.p_c_d` for collocations (what the ranker scores a query's multi-word
collocations with) and ``p_w_d`` for one-word collocations. As in training, ``split`` flags say where
a stopword or punctuation separated two tokens of a new document: no collocation crosses them
(without flags, collocations may join any adjacent tokens). Kernels:
:mod:`models.tcm.foldin_kernels`.
"""
import numpy as np

from . import foldin_kernels as F_
from .split import split_flags
from ..common.corpus import make_corpus
from ..common.foldin import SampledFoldInMixin, SampledTopicFoldIn, fold_batches


class TCMFoldIn(SampledTopicFoldIn):
    """New documents folded in under kept TCM samples (see :class:`SampledTopicFoldIn`);
    ``doc_topics_`` is theta over the documents' collocations."""

    def _theta(self, j, d, out):
        F_.doc_theta(self.f_topic_, self.f_count_, self.f_ptr_[j, d], self.f_ptr_[j, d + 1],
                     float(self.n_keep), float(self.model.alpha_), out)

    def _score(self, pair_ptr, pair_col, phi):
        out = np.empty(len(pair_col))
        self.model._with_threads(F_.p_pairs, pair_ptr, pair_col, self.f_ptr_, self.f_topic_,
                                 self.f_count_, float(self.n_keep), float(self.model.alpha_),
                                 np.ascontiguousarray(phi[self.css_]), out)
        return out

    def _p_pairs(self, pair_ptr, pair_term):
        words, cols = np.unique(pair_term, return_inverse=True)
        phi, _ = self.model._phi(words, np.arange(len(words) + 1))
        return self._score(pair_ptr, cols.astype(np.int64).ravel(), phi)

    def p_c_d(self, term_ids, seg_ptr):
        """P_TCM(c | d) of the collocations ``term_ids[seg_ptr[s]:seg_ptr[s + 1]]`` for every new
        document, as :meth:`models.tcm.model.TCM.p_c_d` gives it for training documents:
        ndarray (n_docs, n_collocations), float64."""
        phi, _ = self.model._phi(term_ids, seg_ptr)
        D, T = self.n_docs, phi.shape[2]
        pair_ptr = np.arange(D + 1, dtype=np.int64) * T
        return self._score(pair_ptr, np.tile(np.arange(T, dtype=np.int64), D), phi).reshape(D, T)


class TCMFoldInMixin(SampledFoldInMixin):
    """``fold_in`` and ``transform`` for the TCM document model: Gibbs sweeps go over every new
    document's positions, the collocation-topic counts of the kept sweeps are averaged;
    ``fold_in`` returns :class:`TCMFoldIn`."""

    def _fold_inputs(self, doc_ptr, split=None) -> dict:
        """``split`` checked as :func:`models.tcm.split.split_flags` checks training splits, over the
        new documents' tokens concatenated."""
        n = int(doc_ptr[-1])
        shape = make_corpus(doc_ptr, np.zeros(n, dtype=np.int64), n_terms=1, fingerprint="new documents")
        return {"split": split_flags(shape, split)}

    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params, split):
        doc_len = np.diff(doc_ptr)
        span = np.empty((len(term_ids), self.max_len), dtype=np.int64)
        self._with_threads(F_.span_types, doc_ptr, term_ids, split, self.type_ptr_, self.type_terms_,
                           np.asarray(self._len_blocks(), dtype=np.int64), span)

        def run(d0, d1, cap_ptr, out_topic, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], span[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.ct_ptr_, self.ct_type_, self.ct_topic_, self.ct_count_,
                       self.n_k_samples_, self.alpha0_samples_, self.p0_len_, float(self.alpha_),
                       float(self.p_stop), seed, n_iter, n_keep, cap_ptr, out_topic, out_count,
                       out_nnz)

        cap = np.minimum(doc_len * n_keep, self.n_topics)
        f_ptr, f_topic, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return TCMFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params)
