"""Topics of documents a model never saw: the result of ``model.fold_in(docs)``.

Every kind with fold-in gives the same two things for new documents as the model gives for its
training documents: P_TM(w | d) for any term ids (:meth:`FoldedDocs.p_w_d`, the ranker's table)
and the document-topic mixtures (:attr:`FoldedDocs.doc_topics_`, what ``model.transform(docs)``
returns). New documents are lists of term ids of the model's vocabulary (a
:class:`models.common.corpus.Corpus` over it works too); ``retrieval`` turns text into them with the
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



class SampledTopicFoldIn(FoldedDocs):
    """New documents folded in under kept samples ``css_`` of a Gibbs kind with topic counts
    per document (LDA, TCM, tree-LDA; see :class:`FoldedDocs`). A kind implements ``_p_pairs``
    and :meth:`_theta` (or its own :meth:`_mixture`).

    Attributes besides FoldedDocs'
    ------------------------------
    css_ : ndarray of int64
        The kept samples (cs = chain * n_samples + s) the documents were folded in under.
    f_ptr_, f_topic_, f_count_
        Document d's topic counts (TCM: collocation-topic counts) under sample ``css_[j]``:
        topics ``f_topic_[f_ptr_[j, d]:f_ptr_[j, d + 1]]`` (ascending), counts
        ``f_count_[...]`` summed over ``n_keep`` sweeps.
    """

    def __init__(self, model, doc_len, css, f_ptr, f_topic, f_count, n_keep, chain, params):
        self.model = model
        self.doc_len_ = doc_len
        self.css_ = css
        self.f_ptr_, self.f_topic_, self.f_count_ = f_ptr, f_topic, f_count
        self.n_keep = n_keep
        self.params_ = params
        self.doc_topics_ = self._mixture(chain)

    def _chain_rows(self, chain):
        """Indices j of ``css_`` whose samples belong to chain ``chain``."""
        return [j for j, cs in enumerate(self.css_) if cs // self.model.n_samples_ == chain]

    def _mixture(self, chain):
        """``doc_topics_``: the documents' topic mixtures (:meth:`_theta`) averaged over chain
        ``chain``'s samples."""
        rows = self._chain_rows(chain)
        out = np.zeros((self.n_docs, self.model.n_topics))
        theta = np.empty(self.model.n_topics)
        for j in rows:
            for d in range(self.n_docs):
                self._theta(j, d, theta)
                out[d] += theta
        return out / len(rows)

    def _theta(self, j, d, out):
        """Document d's topic mixture under sample ``css_[j]`` into ``out`` (n_topics,)."""
        raise NotImplementedError


# Entries of the folded-in count buffers per batch of documents (bounds the memory of a batch);
# every kind's fold-in uses this budget.
_BATCH_ENTRIES = 1 << 23


def fold_batches(doc_len, J, cap, run, key_dtype=np.int32, budget=None):
    """Fold documents in by batches whose output buffers hold at most ``budget`` entries
    (default ``_BATCH_ENTRIES``).

    ``cap[d]`` bounds the entries of document d under one sample; ``run(d0, d1, cap_ptr, out_key,
    out_count, out_nnz)`` folds documents d0..d1 in under the J samples, writing the entries of
    (sample j, document d0 + e) from ``cap_ptr[j * (d1 - d0) + e]`` (keys of ``key_dtype``).
    Returns (f_ptr (J, D + 1), f_key, f_count): document d's entries under sample j are
    ``f_*[f_ptr[j, d]:f_ptr[j, d + 1]]``.
    """
    budget = _BATCH_ENTRIES if budget is None else budget
    D = len(doc_len)
    seg_key, seg_count = [[] for _ in range(J)], [[] for _ in range(J)]
    nnz = np.zeros((J, D), dtype=np.int64)
    d0 = 0
    while d0 < D:
        d1 = d0 + 1
        total = cap[d0] * J
        while d1 < D and total + cap[d1] * J <= budget:
            total += cap[d1] * J
            d1 += 1
        b_cap = np.tile(cap[d0:d1], J)
        cap_ptr = np.concatenate([[0], np.cumsum(b_cap)]).astype(np.int64)
        out_key = np.empty(cap_ptr[-1], dtype=key_dtype)
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
    f_key = np.concatenate([a for j in range(J) for a in seg_key[j]] or [np.zeros(0, key_dtype)])
    f_count = np.concatenate([a for j in range(J) for a in seg_count[j]] or [np.zeros(0, np.int32)])
    flat = np.concatenate([[0], np.cumsum(nnz.ravel())]).astype(np.int64)
    f_ptr = np.stack([flat[j * D:(j + 1) * D + 1] for j in range(J)])
    return f_ptr, f_key, f_count


class SampledFoldInMixin:
    """``fold_in`` and ``transform`` for the Gibbs kinds, whose new documents are sampled under
    the kept samples of the training chains. A kind implements :meth:`_fold_in`; its mixin's
    docstring says which counts the kept sweeps average."""

    def _fold_css(self, samples):
        S = self.n_samples_
        if samples is None:
            samples = S
        if not isinstance(samples, (int, np.integer)) or isinstance(samples, bool) or not 1 <= samples <= S:
            raise ValueError(f"samples must be None (all) or an int in [1, {S}], got {samples!r}")
        return np.array([c * S + s for c in range(self.n_chains) for s in range(S - samples, S)],
                        dtype=np.int64)

    def fold_in(self, docs, n_iter=10, n_keep=5, samples=1, seed=0, chain=0, **inputs):
        """Posterior of new documents given the trained model (its kept samples held fixed).

        Parameters
        ----------
        docs : list of int arrays, or Corpus
            The new documents as term ids of the model's vocabulary.
        n_iter : int, default=10
            Gibbs sweeps over every new document after its online initialisation.
        n_keep : int, default=5
            The kind's counts (LDA's document-topic counts, PAM's pair counts, TCM's
            collocation-topic counts, tree-LDA's topic counts) of the last ``n_keep`` sweeps
            are averaged.
        samples : int or None, default=1
            Fold in under the last ``samples`` kept samples of every chain (None: all of them,
            as P_TM of training documents averages all of them; the cost grows with the number
            of samples, the held-out likelihood gains little).
        seed : int, default=0
            Same seed, same result whatever ``n_jobs`` (every document and sample has its own
            random stream).
        chain : int, default=0
            The chain whose topics (PAM's: sub-topics) ``doc_topics_`` is over.
        **inputs
            The kind's own inputs beside the tokens, as its ``fit`` takes them (TCM: ``split``,
            0/1 flags over the new documents' tokens, 1 where no collocation may continue).

        Returns
        -------
        FoldedDocs
            The kind's own: LDAFoldIn, PAMFoldIn, TCMFoldIn or TreeFoldIn.
        """
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        self._cs_of_chain(chain)
        css = self._fold_css(samples)
        doc_ptr, term_ids = token_lists(docs, self.n_terms_)
        extra = self._fold_inputs(doc_ptr, **inputs)
        return self._fold_in(doc_ptr, term_ids, css, n_iter, n_keep, seed, chain,
                             dict(n_iter=n_iter, n_keep=n_keep, samples=samples, seed=seed), **extra)

    def _fold_inputs(self, doc_ptr, **inputs) -> dict:
        """The kind's extra fold-in inputs for the documents ``doc_ptr``, checked: none by default."""
        if inputs:
            raise TypeError(f"{self.kind} fold_in() got unexpected arguments: {', '.join(inputs)}")
        return {}

    @abc.abstractmethod
    def _fold_in(self, doc_ptr, term_ids, css, n_iter, n_keep, seed, chain, params):
        """The kind's fold-in of the checked new documents (``term_ids[doc_ptr[d]:doc_ptr[d + 1]]``)
        under the kept samples ``css``: its FoldedDocs."""

    def transform(self, docs, **fold_params):
        """Topic mixtures (n_docs, n_topics) of new documents under chain ``chain``'s topics;
        ``fold_params`` as for :meth:`fold_in`."""
        return self.fold_in(docs, **fold_params).doc_topics_
