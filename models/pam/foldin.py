"""Fold-in for PAM: collapsed Gibbs sampling of new documents' (super-topic, sub-topic) pairs
with each kept sample's sub-topic-word counts and alpha held fixed.

Under every kept sample used, a new document's tokens are first drawn one by one given those
before them, then resampled for ``n_iter`` sweeps; the pair counts n_ij^d of the last ``n_keep``
sweeps are averaged. P_TM(w | d) is then P_PAM(w | d) of :meth:`models.pam.model.PAM.p_w_d` with
those counts, averaged over the samples, as for training documents; ``doc_topics_`` are the
sub-topic mixtures sum_i theta_i theta_ij (the topics of ``doc_topics``). Kernels:
:mod:`models.pam.foldin_kernels`.
"""
import numpy as np

from . import foldin_kernels as F_
from ..common.foldin import FoldedDocs, SampledFoldInMixin, fold_batches

class PAMFoldIn(FoldedDocs):
    """New documents folded in under kept PAM samples ``css_`` (see :class:`FoldedDocs`);
    ``doc_topics_`` are sub-topic mixtures.

    Attributes besides FoldedDocs'
    ------------------------------
    css_ : ndarray of int64
        The kept samples (cs = chain * n_samples + s) the documents were folded in under.
    f_ptr_, f_key_, f_count_
        Document d's pair counts under sample ``css_[j]``: keys ``i * n_sub + j``
        ``f_key_[f_ptr_[j, d]:f_ptr_[j, d + 1]]`` (ascending), counts ``f_count_[...]`` summed
        over ``n_keep`` sweeps.
    """

    def __init__(self, model, doc_len, css, f_ptr, f_key, f_count, n_keep, chain, params):
        self.model = model
        self.doc_len_ = doc_len
        self.css_ = css
        self.f_ptr_, self.f_key_, self.f_count_ = f_ptr, f_key, f_count
        self.n_keep = n_keep
        self.params_ = params
        m = model
        rows = np.array([j for j, cs in enumerate(css) if cs // m.n_samples_ == chain], dtype=np.int64)
        self.doc_topics_ = np.empty((len(doc_len), m.n_sub))
        m._with_threads(F_.mixtures, doc_len, css, rows, f_ptr, f_key, f_count, float(n_keep),
                        m.n_j_samples_, m.alpha_samples_, m._alpha_r(), float(m.beta),
                        m.n_terms_, self.doc_topics_)

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        out = np.empty(len(pair_term))
        m._with_threads(F_.p_pairs, pair_ptr, np.ascontiguousarray(pair_term, dtype=np.int64),
                        self.doc_len_, self.css_, self.f_ptr_, self.f_key_, self.f_count_,
                        float(self.n_keep), m.tw_ptr_, m.tw_sub_, m.tw_count_, m.n_j_samples_,
                        m.alpha_samples_, m._alpha_r(), float(m.beta), out)
        return out


class PAMFoldInMixin(SampledFoldInMixin):
    """``fold_in`` and ``transform`` for the PAM document model (needs its kept-sample arrays):
    the pair counts n_ij^d of the kept sweeps are averaged, ``doc_topics_`` is over the chain's
    sub-topics; ``fold_in`` returns :class:`PAMFoldIn`."""

    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params):
        doc_len = np.diff(doc_ptr)
        cap = np.minimum(doc_len * n_keep, self.n_super * self.n_sub)

        def run(d0, d1, cap_ptr, out_key, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], term_ids[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.tw_ptr_, self.tw_sub_, self.tw_count_, self.n_j_samples_,
                       self.alpha_samples_, self._alpha_r(), float(self.beta), seed, n_iter,
                       n_keep, cap_ptr, out_key, out_count, out_nnz)

        f_ptr, f_key, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return PAMFoldIn(self, doc_len, css, f_ptr, f_key, f_count, n_keep, chain, params)
