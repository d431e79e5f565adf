"""A model of an index, used on the index it grew into (``topicir index --add``).

An index that grew keeps its old documents in its first rows and lists its earlier states in its
manifest (``parents``: fingerprint and document count of each). A model trained on one of those
states describes the first ``n_docs`` rows, in that state's term ids. :class:`ExtendedModel` is
one document model over every row of the grown index, in its term ids: the model's own P_TM(w|d)
for the rows it was trained on, and for the rows added since, the posteriors of ``model.fold_in``
of their tokens (folded in once, on first use). The ranker reads it as it reads any model, so
there is one ranking path. Kinds are not named: any model with ``fold_in`` works.
"""
from __future__ import annotations

import hashlib
import logging
import time
from functools import cached_property

import numpy as np

from .index import Index
from .plugins import hook
from .stats import _pack_strings

log = logging.getLogger(__name__)

# Fold-in settings of added documents: seeded, so that a run on a grown index is reproducible,
# and under every kept sample, as the model's P_TM of its own documents averages them all.
FOLD_PARAMS = {"seed": 0, "samples": None}


def parent_state(index: Index, fingerprint: str | None) -> dict | None:
    """The earlier state of ``index`` with ``fingerprint`` (``{"fingerprint", "n_docs", ...}``), or None."""
    return next((p for p in index.parents if p["fingerprint"] == fingerprint), None)


def prefix_terms(index: Index, n_docs: int) -> tuple[np.ndarray, str]:
    """The terms of the first ``n_docs`` documents of ``index`` (its term ids, ascending: the
    earlier state's vocabulary, in the same sorted order) and the fingerprint that state had."""
    s = index.stats
    cf = np.bincount(np.asarray(s.term_ids[:s.doc_ptr[n_docs]]), minlength=s.n_terms).astype(np.int64)
    ids = np.flatnonzero(cf)
    h = hashlib.sha256()  # as CollectionStats.fingerprint hashes a whole index
    h.update(f"{n_docs}\n".encode())
    h.update(_pack_strings(s.terms[i] for i in ids).tobytes())
    h.update(np.ascontiguousarray(cf[ids], dtype="<i8").tobytes())
    return ids, h.hexdigest()[:16]


class ExtendedModel:
    """``model`` (trained on an earlier state of ``index`` with ``n_docs`` documents) as a document
    model of every document of ``index``, in ``index``'s term ids.

    Everything but the document model (``kind``, ``n_topics``, ``get_params``, ...) is the
    model's. Terms that the model never saw have P_TM = 0 in every document (their probability
    then comes from the query-likelihood part of the mixture only).

    Attributes
    ----------
    model : the trained model
    index : Index, the grown index
    n_model_docs : int, documents the model was trained on (the first rows of ``index``)
    to_model : ndarray of shape (index.stats.n_terms,), int64
        The model's term id of each of the index's terms, -1 for terms added since.
    from_model : ndarray of shape (model.n_terms_,), int64
        The index's term id of each of the model's terms.
    """

    def __init__(self, model, index: Index, n_docs: int, **fold_params):
        if not hasattr(model, "fold_in"):
            raise ValueError(f"{index.path} has {index.stats.n_docs - n_docs} documents more than the index this "
                             f"{model.kind} model was trained on, and {model.kind} models cannot fold in new "
                             f"documents yet; train a model on {index.path}")
        ids, fingerprint = prefix_terms(index, n_docs)
        if fingerprint != model.fingerprint_ or len(ids) != model.n_terms_:
            raise ValueError(f"{index.path}: its first {n_docs} documents no longer make the index the model was "
                             f"trained on (fingerprint {fingerprint}, the model's {model.fingerprint_}); was it "
                             f"rebuilt? Train a model on {index.path}")
        self.model, self.index, self.n_model_docs = model, index, n_docs
        self.fold_params = FOLD_PARAMS | fold_params
        self.from_model = ids.astype(np.int64)
        self.to_model = np.full(index.stats.n_terms, -1, dtype=np.int64)
        self.to_model[ids] = np.arange(len(ids))
        self.fingerprint_ = index.fingerprint

    def __getattr__(self, name):
        if name in ("model", "index"):  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return (f"ExtendedModel({self.model.kind}, trained on {self.n_model_docs} of the "
                f"{self.index.stats.n_docs} documents of {self.index.path})")

    @property
    def n_added(self) -> int:
        return self.index.stats.n_docs - self.n_model_docs

    def model_term_ids(self, term_ids) -> np.ndarray:
        """``term_ids`` of the index as the model's term ids, leaving out the terms it never saw."""
        mapped = self.to_model[np.asarray(term_ids, dtype=np.int64)]
        return mapped[mapped >= 0]

    def added_docs(self) -> list[np.ndarray]:
        """The tokens of every added document as the model's term ids (terms it never saw left out)."""
        s, n = self.index.stats, self.n_model_docs
        lo = int(s.doc_ptr[n])
        mapped = self.to_model[np.asarray(s.term_ids[lo:], dtype=np.int64)]
        kept = np.concatenate([[0], np.cumsum(mapped >= 0)])
        ends = kept[np.asarray(s.doc_ptr[n:], dtype=np.int64) - lo]
        tokens = mapped[mapped >= 0]
        return [tokens[ends[d]:ends[d + 1]] for d in range(self.n_added)]

    @cached_property
    def folded(self):
        """``model.fold_in`` of every added document's tokens (:class:`models.common.foldin.FoldedDocs`)."""
        docs = self.added_docs()
        log.info("folding in the %d documents added to %s since the %s model was trained (%s)",
                 self.n_added, self.index.path, self.model.kind,
                 ", ".join(f"{k}={v}" for k, v in self.fold_params.items()))
        start = time.perf_counter()
        inputs = hook(self.model.kind, "fold_in_inputs")  # e.g. TCM: where collocations stop
        extra = inputs(self.index, self.model, self.n_model_docs, self.to_model) if inputs else {}
        folded = self.model.fold_in(docs, **self.fold_params, **extra)
        log.info("folded in %d documents in %.1f s", self.n_added, time.perf_counter() - start)
        return folded

    def p_w_d(self, term_ids) -> np.ndarray:
        """P_TM(w|d) of every document of the index for its ``term_ids``: (n_docs, len(term_ids)),
        float64; the model's own values for its documents, the folded-in ones' for the added."""
        ids = np.asarray(term_ids, dtype=np.int64).ravel()
        mapped = self.to_model[ids]
        known = mapped >= 0
        n = self.n_model_docs
        out = np.zeros((self.index.stats.n_docs, len(ids)))
        out[:n, known] = self.model.p_w_d(mapped[known])
        out[n:, known] = self.folded.p_w_d(mapped[known])
        return out

    def p_w_d_rows(self, term_ids, docs) -> np.ndarray:
        """:meth:`p_w_d` of the rows ``docs`` only, (len(docs), len(term_ids))."""
        ids = np.asarray(term_ids, dtype=np.int64).ravel()
        docs = np.asarray(docs, dtype=np.int64).ravel()
        mapped = self.to_model[ids]
        known = mapped >= 0
        n = self.n_model_docs
        out = np.zeros((len(docs), len(ids)))
        old = docs < n
        if old.any():
            out[np.ix_(old, known)] = self.model.p_w_d_rows(mapped[known], docs[old])
        if (~old).any():
            out[np.ix_(~old, known)] = self.folded.p_w_d(mapped[known])[docs[~old] - n]
        return out

    def p_w_d_per_sample(self, term_ids):
        raise ValueError(f"documents added to {self.index.path} after training have no per-sample tables; "
                         f"rank with the averaged model, or use the index the model was trained on")

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable topics of row ``doc`` of the index (the folded-in mixture for an added
        document, over chain ``fold_params['chain']``'s topics, 0 by default)."""
        if doc < self.n_model_docs:
            return self.model.doc_topics(doc, top=top, chain=chain)
        return self.folded.doc_topics(doc - self.n_model_docs, top=top)

    def topic_words(self, topic, top=10, chain=0, terms=None):
        """The model's ``topic_words`` with the index's term ids (or, with ``terms``, the index's
        vocabulary)."""
        ids, probs = self.model.topic_words(topic, top=top, chain=chain)
        ids = self.from_model[ids]
        return list(zip((terms[i] for i in ids), probs)) if terms is not None else (ids, probs)


# One ExtendedModel per model and grown index, kept on the model object (a cycle the garbage
# collector frees with the model; a weak-keyed table would keep every model alive through its
# value), so the fold-in runs once however often the model ranks that index.
_CACHE_ATTR = "_topicir_extended"


def document_model(model, index: Index):
    """``model`` as the ranker reads it on ``index``: itself on the index it was trained on (and
    on any index that is not a grown state of it: callers that load model files refuse those),
    an :class:`ExtendedModel` on an index grown from its own."""
    if isinstance(model, ExtendedModel):
        if model.index.fingerprint == index.fingerprint:
            return model
        model = model.model
    fingerprint = getattr(model, "fingerprint_", None)
    if model is None or fingerprint == index.fingerprint:
        return model
    parent = parent_state(index, fingerprint)
    if parent is None:
        return model
    try:
        cache = vars(model).setdefault(_CACHE_ATTR, {})
    except TypeError:  # no instance dictionary (slots): no cache
        cache = {}
    if index.fingerprint not in cache:
        cache[index.fingerprint] = ExtendedModel(model, index, parent["n_docs"])
    return cache[index.fingerprint]
