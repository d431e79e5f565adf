"""Fold-in for PAM: collapsed Gibbs sampling of new documents' (super-topic, sub-topic) pairs
with each kept sample's sub-topic-word counts and alpha held fixed.

Under every kept sample used, a new document's tokens are first drawn one by one given those
before them, then resampled for ``n_iter`` sweeps; the pair counts n_ij^d of the last ``n_keep``
sweeps are averaged. P_TM(w | d) is then P_PAM(w | d) of :meth:`models.pam.PAM.p_w_d` with
those counts, averaged over the samples, as for training documents; ``doc_topics_`` are the
sub-topic mixtures sum_i theta_i theta_ij (the topics of ``doc_topics``). Kernels:
:mod:`models._kernels.pam_foldin`.
"""
import numpy as np

from ._kernels import pam_foldin as F_
from .foldin import FoldedDocs, check_fold_params, token_lists
from .lda_foldin import LDAFoldInMixin

# Entries of the folded-in count buffers per batch of documents (bounds the memory of a batch).
_BATCH_ENTRIES = 1 << 23


def fold_batches(doc_len, J, cap, run):
    """Fold documents in by batches whose output buffers hold at most ``_BATCH_ENTRIES``.

    ``cap[d]`` bounds the entries of document d under one sample; ``run(d0, d1, cap_ptr, out_key,
    out_count, out_nnz)`` folds documents d0..d1 in under the J samples, writing the entries of
    (sample j, document d0 + e) from ``cap_ptr[j * (d1 - d0) + e]``. Returns (f_ptr (J, D + 1),
    f_key, f_count): document d's entries under sample j are ``f_*[f_ptr[j, d]:f_ptr[j, d + 1]]``.
    """
    D = len(doc_len)
    seg_key, seg_count = [[] for _ in range(J)], [[] for _ in range(J)]
    nnz = np.zeros((J, D), dtype=np.int64)
    d0 = 0
    while d0 < D:
        d1 = d0 + 1
        total = cap[d0] * J
        while d1 < D and total + cap[d1] * J <= _BATCH_ENTRIES:
            total += cap[d1] * J
            d1 += 1
        b_cap = np.tile(cap[d0:d1], J)
        cap_ptr = np.concatenate([[0], np.cumsum(b_cap)]).astype(np.int64)
        out_key = np.empty(cap_ptr[-1], dtype=np.int32)
        out_count = np.empty(cap_ptr[-1], dtype=np.int32)
        b_nnz = np.zeros((J, d1 - d0), dtype=np.int64)
        run(d0, d1, cap_ptr, out_key, out_count, b_nnz)
        used = np.arange(cap_ptr[-1]) - np.repeat(cap_ptr[:-1], b_cap) < np.repeat(b_nnz.ravel(), b_cap)
        per_j = d1 - d0
        for j in range(J):  # the entries of sample j are contiguous in the batch
            sl = slice(cap_ptr[j * per_j], cap_ptr[(j + 1) * per_j])
            seg_key[j].append(out_key[sl][used[sl]])
            seg_count[j].append(out_count[sl][used[sl]])
        nnz[:, d0:d1] = b_nnz
        d0 = d1
    f_key = np.concatenate([a for j in range(J) for a in seg_key[j]] or [np.zeros(0, np.int32)])
    f_count = np.concatenate([a for j in range(J) for a in seg_count[j]] or [np.zeros(0, np.int32)])
    flat = np.concatenate([[0], np.cumsum(nnz.ravel())]).astype(np.int64)
    f_ptr = np.stack([flat[j * D:(j + 1) * D + 1] for j in range(J)])
    return f_ptr, f_key, f_count


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
                        m.n_j_samples_, m.alpha_samples_, float(m.alpha_root), float(m.beta),
                        m.n_terms_, self.doc_topics_)

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        out = np.empty(len(pair_term))
        m._with_threads(F_.p_pairs, pair_ptr, np.ascontiguousarray(pair_term, dtype=np.int64),
                        self.doc_len_, self.css_, self.f_ptr_, self.f_key_, self.f_count_,
                        float(self.n_keep), m.tw_ptr_, m.tw_sub_, m.tw_count_, m.n_j_samples_,
                        m.alpha_samples_, float(m.alpha_root), float(m.beta), out)
        return out


class PAMFoldInMixin:
    """``fold_in`` and ``transform`` for the PAM document model (needs its kept-sample arrays)."""

    _fold_css = LDAFoldInMixin._fold_css
    transform = LDAFoldInMixin.transform

    def fold_in(self, docs, n_iter=10, n_keep=5, samples=1, seed=0, chain=0):
        """Posterior of new documents given the trained sub-topics and alpha.

        Parameters
        ----------
        docs : list of int arrays, or Corpus
            The new documents as term ids of the model's vocabulary.
        n_iter : int, default=10
            Gibbs sweeps over every new document after its online initialisation.
        n_keep : int, default=5
            The pair counts of the last ``n_keep`` sweeps are averaged.
        samples : int or None, default=1
            Fold in under the last ``samples`` kept samples of every chain (None: all of them,
            as P_PAM of training documents averages all of them).
        seed : int, default=0
            Same seed, same result whatever ``n_jobs`` (every document and sample has its own
            random stream).
        chain : int, default=0
            The chain whose sub-topics ``doc_topics_`` is over.

        Returns
        -------
        PAMFoldIn
        """
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        self._cs_of_chain(chain)
        css = self._fold_css(samples)
        doc_ptr, term_ids = token_lists(docs, self.n_terms_)
        doc_len = np.diff(doc_ptr)
        cap = np.minimum(doc_len * n_keep, self.n_super * self.n_sub)

        def run(d0, d1, cap_ptr, out_key, out_count, out_nnz):
            F_.fold_in(doc_ptr[d0:d1 + 1] - doc_ptr[d0], term_ids[doc_ptr[d0]:doc_ptr[d1]], d0, css,
                       self.tw_ptr_, self.tw_sub_, self.tw_count_, self.n_j_samples_,
                       self.alpha_samples_, float(self.alpha_root), float(self.beta), seed, n_iter,
                       n_keep, cap_ptr, out_key, out_count, out_nnz)

        f_ptr, f_key, f_count = self._with_threads(fold_batches, doc_len, len(css), cap, run)
        return PAMFoldIn(self, doc_len, css, f_ptr, f_key, f_count, n_keep, chain,
                         dict(n_iter=n_iter, n_keep=n_keep, samples=samples, seed=seed))
