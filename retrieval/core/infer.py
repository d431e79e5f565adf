"""Topics of new text under a model trained on an index: the text is analysed as the index
analyses documents and queries (its Lucene analyzer), mapped to the index's term ids, and folded
in (``model.fold_in``)."""
from __future__ import annotations

import logging

import numpy as np

from .index import Index

log = logging.getLogger(__name__)


def text_term_ids(index: Index, texts) -> list[np.ndarray]:
    """Term ids (int64 arrays, one per text, in text order) of ``texts`` as ``index`` analyses
    them; terms the index does not have are left out (logged)."""
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (one per document), not one string")
    term_index = index.stats.term_index
    out, unknown, total = [], 0, 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is a {type(text).__name__}, not a string")
        terms = index.analyze(text)
        ids = [term_index[t] for t in terms if t in term_index]
        unknown += len(terms) - len(ids)
        total += len(terms)
        out.append(np.asarray(ids, dtype=np.int64))
    if unknown:
        log.info("%d of %d analysed terms are not in %s's vocabulary and were left out",
                 unknown, total, index.path)
    return out


def _check_model_index(model, index: Index):
    fp = getattr(model, "fingerprint_", None)
    if fp != index.fingerprint:
        raise ValueError(f"the model was trained on the index with fingerprint {fp}, not on "
                         f"{index.path} ({index.fingerprint}): its term ids would mean other terms")
    if not hasattr(model, "fold_in"):
        raise ValueError(f"{model.kind} models cannot infer topics of new text yet (no fold_in)")


def fold_in_texts(model, texts, index: Index, **fold_params):
    """``model.fold_in`` of ``texts`` analysed by ``index`` (the index the model was trained on, or
    one grown from it by ``topicir index --add``, whose added terms the model leaves out): a
    :class:`models.common.foldin.FoldedDocs` with ``doc_topics_`` and ``p_w_d(term_ids)`` (term ids of
    the model's own index)."""
    from .extension import ExtendedModel, document_model

    ids = text_term_ids(index, texts)
    doc_model = document_model(model, index)
    if isinstance(doc_model, ExtendedModel):
        return doc_model.model.fold_in([doc_model.model_term_ids(a) for a in ids], **fold_params)
    _check_model_index(model, index)
    return model.fold_in(ids, **fold_params)


def infer(model, texts, index: Index, **fold_params) -> np.ndarray:
    """Topic mixtures of new ``texts`` (a list of strings) under ``model``, trained on ``index``:
    ndarray (len(texts), n_topics), rows summing to 1. ``fold_params`` go to ``model.fold_in``
    (e.g. ``seed``); for a model with several chains, the mixtures are over chain ``chain``'s
    topics (0 by default), as ``model.topic_words(k, chain=...)`` lists them."""
    return fold_in_texts(model, texts, index, **fold_params).doc_topics_


def heldout_likelihood(model, index: Index, sources=None, **fold_params):
    """Held-out log-likelihood per token by document completion
    (:func:`models.common.heldout.document_completion`, Wallach et al. 2009) of documents the model was
    not trained on: with ``sources`` (TREC files, JSON lines, ``irds:`` ids), their documents
    analysed by ``index``; without, the documents added to ``index`` after the model was trained
    (``topicir index --add``). Returns a :class:`models.common.heldout.Completion`."""
    from models.common.heldout import document_completion

    from .extension import ExtendedModel, document_model
    from .sources import iter_docs

    doc_model = document_model(model, index)
    base = doc_model.model if isinstance(doc_model, ExtendedModel) else model
    if sources is None:
        if not isinstance(doc_model, ExtendedModel):
            raise ValueError(f"{index.path} is the index the model was trained on: no document was added after "
                             f"training; give held-out documents (--docs FILE)")
        docs = doc_model.added_docs()
    else:
        sources = [str(s) for s in sources]
        texts = [doc.contents for doc in iter_docs(sources)]
        if not texts:
            raise ValueError(f"no documents in {', '.join(sources)}")
        if isinstance(doc_model, ExtendedModel):
            docs = [doc_model.model_term_ids(a) for a in text_term_ids(index, texts)]
        else:
            _check_model_index(model, index)
            docs = text_term_ids(index, texts)
    if not hasattr(base, "fold_in"):
        raise ValueError(f"{base.kind} models cannot fold in documents yet, which document completion needs")
    return document_completion(base, docs, **fold_params)
