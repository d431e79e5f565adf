"""Fold-in for aviPAM: a new document's posterior is the encoder's, refined on the document's
ELBO and averaged over draws as the model's ``refine_steps`` and ``doc_samples`` say, and
P_TM(w | d) the decoder's for that mixture, exactly as for training documents."""
import numpy as np

from .foldin import FoldedDocs, as_corpus, check_fold_params

# Pairs (or documents x terms) scored per block, bounding the memory of a block.
_BLOCK = 1 << 16


class AVIFoldIn(FoldedDocs):
    """New documents encoded by an aviPAM model (see :class:`FoldedDocs`); ``doc_topics_`` are
    the sub-topic mixtures."""

    def __init__(self, model, doc_len, mix, params):
        self.model = model
        self.doc_len_ = doc_len
        self.doc_topics_ = mix
        self.params_ = params

    def _product_rows(self, mix):
        """log p(w | d) over the whole vocabulary for the mixtures ``mix`` (product decoder),
        normalised as :meth:`models.avipam.AVIPAM._product_tables` normalises training docs."""
        m = self.model
        logits = mix @ m.beta_.astype(np.float64)
        div = np.linalg.norm(logits, axis=1) + 1e-8 if m.norm == "l2" else np.ones(len(mix))
        z = (logits - m.dec_shift_) * m.dec_scale_ / div[:, None]
        top = z.max(1, keepdims=True)
        return z - (top + np.log(np.exp(z - top).sum(1, keepdims=True)))

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        doc = np.repeat(np.arange(self.n_docs), np.diff(pair_ptr))
        out = np.empty(len(pair_term))
        if m.decoder == "product":
            V = m.n_terms_
            step = max(1, _BLOCK // max(V, 1))
            for lo in range(0, self.n_docs, step):
                hi = min(self.n_docs, lo + step)
                rows = self._product_rows(self.doc_topics_[lo:hi])
                sel = slice(pair_ptr[lo], pair_ptr[hi])
                out[sel] = np.exp(rows[doc[sel] - lo, pair_term[sel]])
            return out
        tw = m.topic_word_.astype(np.float64)
        for lo in range(0, len(pair_term), _BLOCK):
            sel = slice(lo, lo + _BLOCK)
            out[sel] = np.einsum("ik,ki->i", self.doc_topics_[doc[sel]], tw[:, pair_term[sel]])
        return out


class AVIFoldInMixin:
    """``fold_in`` for aviPAM; its ``transform`` gives the mixtures alone."""

    def fold_in(self, docs, n_iter=1, n_keep=1, samples=None, seed=0, chain=0):
        """Posterior of new documents (term-id arrays of the model's vocabulary, or a Corpus)
        inferred as :meth:`transform` infers them (its draws seeded by the model's ``seed``).
        The result does not depend on the Gibbs settings ``n_iter``, ``n_keep``, ``samples``
        and ``seed`` nor ``chain`` (one model); they are checked and accepted as every kind's
        ``fold_in`` accepts them. Returns :class:`AVIFoldIn`."""
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        if samples not in (None, 1):
            raise ValueError(f"samples must be None (all) or 1 for a model with one kept sample, got {samples!r}")
        if chain != 0:
            raise ValueError(f"chain must be 0 for a model without chains, got {chain!r}")
        corpus = as_corpus(docs, self.n_terms_)
        return AVIFoldIn(self, np.diff(corpus.doc_ptr), self.transform(corpus), dict(seed=seed))
