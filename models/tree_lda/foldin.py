"""Fold-in for tree-LDA: collapsed Gibbs sampling of new documents' topics with each kept
sample's edge counts held fixed.

With the edge counts fixed, a token's path only chooses among the ways its word is reached in
the topic, so the topic is drawn from its marginal (n_dk + a_k) P(w | k), with P(w | k) the
topic's word distribution over the prior tree's paths (see :mod:`models.tree_lda.foldin_kernels`).
Under every kept sample used, a new document's tokens are drawn online, then resampled for
``n_iter`` sweeps; the topic counts of the last ``n_keep`` are averaged. P_TM(w | d) is then
P_TREE(w | d) = sum_k theta_dk P(w | k) with those counts, averaged over the samples, as for
training documents.
"""
import numpy as np

from . import foldin_kernels as F_
from ..common.foldin import SampledFoldInMixin, SampledTopicFoldIn, fold_batches


class TreeFoldIn(SampledTopicFoldIn):
    """New documents folded in under kept tree-LDA samples (see :class:`SampledTopicFoldIn`)."""

    def _theta(self, j, d, out):
        F_.doc_theta(self.f_topic_, self.f_count_, self.f_ptr_[j, d], self.f_ptr_[j, d + 1],
                     self.doc_len_[d], float(self.n_keep),
                     self.model.alpha_samples_[self.css_[j]], out)

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        words, rows = np.unique(pair_term, return_inverse=True)
        phi = np.ascontiguousarray(np.stack([m._phi_terms(cs, words) for cs in self.css_]))
        out = np.empty(len(pair_term))
        m._with_threads(F_.p_pairs, pair_ptr, rows.astype(np.int64).ravel(), self.doc_len_,
                        self.f_ptr_, self.f_topic_, self.f_count_, float(self.n_keep), phi,
                        np.ascontiguousarray(m.alpha_samples_[self.css_]), out)
        return out


class TreeFoldInMixin(SampledFoldInMixin):
    """``fold_in`` and ``transform`` for the tree-LDA document model (topics are its edge
    counts): the topic counts of the kept sweeps are averaged; ``fold_in`` returns
    :class:`TreeFoldIn`."""

    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params):
        doc_len = np.diff(doc_ptr)
        words, rows = np.unique(term_ids, return_inverse=True)
        rows = rows.astype(np.int64).ravel()
        # P(w | k) of the new documents' words only, under every sample used
        phi = np.ascontiguousarray(np.stack([self._phi_terms(cs, words) for cs in css]))
        alpha = np.ascontiguousarray(self.alpha_samples_[css])

        def run(d0, d1, cap_ptr, out_topic, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], rows[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       phi, alpha, seed, n_iter, n_keep, cap_ptr, out_topic, out_count, out_nnz)

        cap = np.minimum(doc_len * n_keep, self.n_topics)
        f_ptr, f_topic, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return TreeFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params)
