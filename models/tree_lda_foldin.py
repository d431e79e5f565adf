"""Fold-in for tree-LDA: collapsed Gibbs sampling of new documents' topics with each kept
sample's edge counts held fixed.

With the edge counts fixed, a token's path only chooses among the ways its word is reached in
the topic, so the topic is drawn from its marginal (n_dk + a_k) P(w | k), with P(w | k) the
topic's word distribution over the prior tree's paths (see :mod:`models._kernels.tree_lda_foldin`).
Under every kept sample used, a new document's tokens are drawn online, then resampled for
``n_iter`` sweeps; the topic counts of the last ``n_keep`` are averaged. P_TM(w | d) is then
P_TREE(w | d) = sum_k theta_dk P(w | k) with those counts, averaged over the samples, as for
training documents.
"""
import numpy as np

from ._kernels import tree_lda_foldin as F_
from .foldin import FoldedDocs, check_fold_params, token_lists
from .lda_foldin import LDAFoldInMixin
from .pam_foldin import fold_batches


class TreeFoldIn(FoldedDocs):
    """New documents folded in under kept tree-LDA samples ``css_`` (see :class:`FoldedDocs`).

    Attributes besides FoldedDocs'
    ------------------------------
    css_ : ndarray of int64
        The kept samples (cs = chain * n_samples + s) the documents were folded in under.
    f_ptr_, f_topic_, f_count_
        Document d's topic counts under sample ``css_[j]``: topics ``f_topic_[f_ptr_[j, d]:
        f_ptr_[j, d + 1]]`` (ascending), counts ``f_count_[...]`` summed over ``n_keep`` sweeps.
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
                F_.doc_theta(f_topic, f_count, f_ptr[j, d], f_ptr[j, d + 1], doc_len[d],
                             float(n_keep), model.alpha_samples_[css[j]], theta)
                out[d] += theta
        self.doc_topics_ = out / len(rows)

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        words, rows = np.unique(pair_term, return_inverse=True)
        phi = np.ascontiguousarray(np.stack([m._phi(cs)[words] for cs in self.css_]))
        out = np.empty(len(pair_term))
        m._with_threads(F_.p_pairs, pair_ptr, rows.astype(np.int64).ravel(), self.doc_len_,
                        self.f_ptr_, self.f_topic_, self.f_count_, float(self.n_keep), phi,
                        np.ascontiguousarray(m.alpha_samples_[self.css_]), out)
        return out


class TreeFoldInMixin:
    """``fold_in`` and ``transform`` for the tree-LDA document model."""

    _fold_css = LDAFoldInMixin._fold_css
    transform = LDAFoldInMixin.transform

    def fold_in(self, docs, n_iter=10, n_keep=5, samples=1, seed=0, chain=0):
        """Posterior of new documents given the trained topics (edge counts).

        Parameters
        ----------
        docs : list of int arrays, or Corpus
            The new documents as term ids of the model's vocabulary.
        n_iter : int, default=10
            Gibbs sweeps over every new document after its online initialisation.
        n_keep : int, default=5
            The topic counts of the last ``n_keep`` sweeps are averaged.
        samples : int or None, default=1
            Fold in under the last ``samples`` kept samples of every chain (None: all of them,
            as P_TREE of training documents averages all of them).
        seed : int, default=0
            Same seed, same result whatever ``n_jobs`` (every document and sample has its own
            random stream).
        chain : int, default=0
            The chain whose topics ``doc_topics_`` is over.

        Returns
        -------
        TreeFoldIn
        """
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        self._cs_of_chain(chain)
        css = self._fold_css(samples)
        doc_ptr, term_ids = token_lists(docs, self.n_terms_)
        doc_len = np.diff(doc_ptr)
        words, rows = np.unique(term_ids, return_inverse=True)
        rows = rows.astype(np.int64).ravel()
        # P(w | k) of the new documents' words only, under every sample used
        phi = np.ascontiguousarray(np.stack([self._phi(cs)[words] for cs in css]))
        alpha = np.ascontiguousarray(self.alpha_samples_[css])

        def run(d0, d1, cap_ptr, out_topic, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], rows[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       phi, alpha, seed, n_iter, n_keep, cap_ptr, out_topic, out_count, out_nnz)

        cap = np.minimum(doc_len * n_keep, self.n_topics)
        f_ptr, f_topic, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return TreeFoldIn(self, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain,
                          dict(n_iter=n_iter, n_keep=n_keep, samples=samples, seed=seed))
