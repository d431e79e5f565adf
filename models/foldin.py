"""Topics of documents a model never saw: the result of ``model.fold_in(docs)``.

Every kind with fold-in gives the same two things for new documents as the model gives for its
training documents: P_TM(w | d) for any term ids (:meth:`FoldedDocs.p_w_d`, the ranker's table)
and the document-topic mixtures (:attr:`FoldedDocs.doc_topics_`, what ``model.transform(docs)``
returns). New documents are lists of term ids of the model's vocabulary (a
:class:`models.corpus.Corpus` over it works too); ``retrieval`` turns text into them with the
index's analyzer.
"""
import abc

import numpy as np

from .corpus import Corpus, make_corpus


def token_lists(docs, n_terms):
    """(doc_ptr int64, term_ids int64) of ``docs``: a Corpus over ``n_terms`` terms or a sequence
    of int arrays (one per document, term ids in ``[0, n_terms)``)."""
    if isinstance(docs, Corpus):
        if docs.n_terms != n_terms:
            raise ValueError(f"corpus has {docs.n_terms} terms, the model {n_terms}")
        return (np.ascontiguousarray(docs.doc_ptr, dtype=np.int64),
                np.ascontiguousarray(docs.term_ids, dtype=np.int64))
    if isinstance(docs, (str, bytes)) or not hasattr(docs, "__len__"):
        raise TypeError("docs must be a Corpus or a list of term-id arrays (one per document), "
                        f"got {type(docs).__name__}")
    parts = []
    for i, d in enumerate(docs):
        if isinstance(d, (str, bytes)):
            raise TypeError(f"document {i} is text; give term ids (retrieval.infer analyses text "
                            f"with an index)")
        a = np.asarray(d)
        if a.size and not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"document {i}: term ids must be integers, got {a.dtype}")
        a = a.astype(np.int64).ravel()
        if a.size and (a.min() < 0 or a.max() >= n_terms):
            bad = a[(a < 0) | (a >= n_terms)][0]
            raise ValueError(f"document {i}: term id {int(bad)} is out of range for a model "
                             f"with n_terms = {n_terms}")
        parts.append(a)
    doc_ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    doc_ptr[1:] = np.cumsum([len(p) for p in parts])
    term_ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return doc_ptr, term_ids


def as_corpus(docs, n_terms):
    """``docs`` (see :func:`token_lists`) as a Corpus over ``n_terms`` terms."""
    if isinstance(docs, Corpus):
        token_lists(docs, n_terms)
        return docs
    doc_ptr, term_ids = token_lists(docs, n_terms)
    return make_corpus(doc_ptr, term_ids, n_terms=n_terms, fingerprint="new documents")


def check_fold_params(n_iter, n_keep, seed):
    for name, v, low in (("n_iter", n_iter, 1), ("n_keep", n_keep, 1), ("seed", seed, 0)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < low:
            raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    if n_keep > n_iter:
        raise ValueError(f"n_keep ({n_keep}) must be <= n_iter ({n_iter})")


class FoldedDocs(abc.ABC):
    """Posterior of new documents under a trained model.

    Attributes
    ----------
    doc_len_ : ndarray of shape (n_docs,), int64
        Tokens of every new document.
    doc_topics_ : ndarray of shape (n_docs, n_topics), float64
        Topic mixture of every document (rows sum to 1); for a model with several chains, under
        the topics of chain ``chain`` (topics are not aligned across chains).
    params_ : dict
        The fold-in settings (sweeps, kept sweeps, samples, seed).
    """

    @property
    def n_docs(self):
        return len(self.doc_len_)

    @abc.abstractmethod
    def _p_pairs(self, pair_ptr, pair_term):
        """P_TM(w | d) of the terms ``pair_term[pair_ptr[d]:pair_ptr[d + 1]]`` of every document d."""

    def p_w_d(self, term_ids):
        """P_TM(w | d) of every new document for ``term_ids``, averaged as the model averages its
        training documents': ndarray (n_docs, len(term_ids)), float64."""
        term_ids = self.model._check_term_ids(term_ids)
        D, T = self.n_docs, len(term_ids)
        pair_ptr = np.arange(D + 1, dtype=np.int64) * T
        return self._p_pairs(pair_ptr, np.tile(term_ids, D)).reshape(D, T)

    def token_probs(self, doc_ptr, term_ids):
        """P_TM(w | d) of tokens: ``term_ids[doc_ptr[d]:doc_ptr[d + 1]]`` are scored under new
        document d (e.g. its held-out half). Returns ndarray (len(term_ids),), float64."""
        doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
        if len(doc_ptr) != self.n_docs + 1:
            raise ValueError(f"doc_ptr must have n_docs + 1 = {self.n_docs + 1} entries, got {len(doc_ptr)}")
        term_ids = self.model._check_term_ids(term_ids)
        return self._p_pairs(doc_ptr, term_ids)

    def doc_topics(self, doc, top=10):
        """Most probable topics of new document ``doc``: (topic ids int64, probabilities float64)."""
        if not 0 <= doc < self.n_docs:
            raise ValueError(f"doc must be in [0, {self.n_docs}), got {doc!r}")
        mix = self.doc_topics_[doc]
        ids = np.argsort(-mix, kind="stable")[:top]
        return ids.astype(np.int64), mix[ids]
