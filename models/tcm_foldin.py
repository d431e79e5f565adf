"""Fold-in for TCM: point-wise Gibbs sampling of new documents' boundary variables (where
collocations end and their topics) with each kept sample's restaurants held fixed.

Under every kept sample used, a new document is segmented online (lengths as P0 draws them,
topics given the collocations before), then resampled for ``n_iter`` sweeps over its positions;
the collocation-topic counts of the last ``n_keep`` sweeps are averaged. P_TM is then the TCM
document model with those counts, averaged over the samples, as for training documents:
:meth:`TCMFoldIn.p_c_d` for collocations (what the ranker scores a query's multi-word
collocations with) and ``p_w_d`` for one-word collocations. No split is forced inside a new
document (collocations may join any adjacent tokens of it). Kernels:
:mod:`models._kernels.tcm_foldin`.
"""
import numpy as np

from ._kernels import tcm_foldin as F_
from .foldin import FoldedDocs, check_fold_params, token_lists
from .lda_foldin import LDAFoldInMixin
from .pam_foldin import fold_batches


class TCMFoldIn(FoldedDocs):
    """New documents folded in under kept TCM samples ``css_`` (see :class:`FoldedDocs`);
    ``doc_topics_`` is theta over the documents' collocations.

    Attributes besides FoldedDocs'
    ------------------------------
    css_ : ndarray of int64
        The kept samples (cs = chain * n_samples + s) the documents were folded in under.
    f_ptr_, f_topic_, f_count_
        Document d's collocation-topic counts under sample ``css_[j]``: topics
        ``f_topic_[f_ptr_[j, d]:f_ptr_[j, d + 1]]`` (ascending), counts ``f_count_[...]``
        summed over ``n_keep`` sweeps.
    """

    def __init__(self, model, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params):
        self.model = model
        self.doc_len_ = doc_len
        self.css_ = css
        self.f_ptr_, self.f_topic_, self.f_count_ = f_ptr, f_topic, f_count
        self.n_keep = n_keep
        self.params_ = params
        rows = [j for j, cs in enumerate(css) if cs // model.n_samples_ == chain]
        out = np.zeros((len(doc_len), model.n_topics))
        theta = np.empty(model.n_topics)
        for j in rows:
            for d in range(len(doc_len)):
                F_.doc_theta(f_topic, f_count, f_ptr[j, d], f_ptr[j, d + 1], float(n_keep),
                             float(model.alpha_), theta)
                out[d] += theta
        self.doc_topics_ = out / len(rows)

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
        document, as :meth:`models.tcm.TCM.p_c_d` gives it for training documents:
        ndarray (n_docs, n_collocations), float64."""
        phi, _ = self.model._phi(term_ids, seg_ptr)
        D, T = self.n_docs, phi.shape[2]
        pair_ptr = np.arange(D + 1, dtype=np.int64) * T
        return self._score(pair_ptr, np.tile(np.arange(T, dtype=np.int64), D), phi).reshape(D, T)


class TCMFoldInMixin:
    """``fold_in`` and ``transform`` for the TCM document model."""

    _fold_css = LDAFoldInMixin._fold_css
    transform = LDAFoldInMixin.transform

    def fold_in(self, docs, n_iter=10, n_keep=5, samples=1, seed=0, chain=0):
        """Posterior of new documents' segmentation and collocation topics given the trained
        restaurants.

        Parameters
        ----------
        docs : list of int arrays, or Corpus
            The new documents as term ids of the model's vocabulary.
        n_iter : int, default=10
            Gibbs sweeps over every new document's positions after its online initialisation.
        n_keep : int, default=5
            The collocation-topic counts of the last ``n_keep`` sweeps are averaged.
        samples : int or None, default=1
            Fold in under the last ``samples`` kept samples of every chain (None: all of them,
            as P_TCM of training documents averages all of them).
        seed : int, default=0
            Same seed, same result whatever ``n_jobs`` (every document and sample has its own
            random stream).
        chain : int, default=0
            The chain whose topics ``doc_topics_`` is over.

        Returns
        -------
        TCMFoldIn
        """
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        self._cs_of_chain(chain)
        css = self._fold_css(samples)
        doc_ptr, term_ids = token_lists(docs, self.n_terms_)
        doc_len = np.diff(doc_ptr)
        span = np.empty((len(term_ids), self.max_len), dtype=np.int64)
        self._with_threads(F_.span_types, doc_ptr, term_ids, self.type_ptr_, self.type_terms_,
                           np.asarray(self._len_blocks(), dtype=np.int64), span)

        def run(d0, d1, cap_ptr, out_topic, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], span[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.ct_ptr_, self.ct_type_, self.ct_topic_, self.ct_count_,
                       self.n_k_samples_, self.alpha0_samples_, self.p0_len_, float(self.alpha_),
                       float(self.p_stop), seed, n_iter, n_keep, cap_ptr, out_topic, out_count,
                       out_nnz)

        cap = np.minimum(doc_len * n_keep, self.n_topics)
        f_ptr, f_topic, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return TCMFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain,
                         dict(n_iter=n_iter, n_keep=n_keep, samples=samples, seed=seed))
