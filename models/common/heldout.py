"""Held-out log-likelihood by document completion (Wallach et al. 2009, section 4.2).

Every held-out document is split in two by position: the tokens at even positions (0, 2, 4, ...)
are folded in (:meth:`fold_in` of the model), and the tokens at odd positions are scored under the
resulting document model, log P_TM(w | d) averaged over the scored tokens. Alternating positions
keep both halves spread over the whole document. The score of a token is the model's predictive
probability given the observed half (the averaged posterior mixture times the kept topics), as
the ranker uses P_TM; Wallach et al.'s left-to-right estimator also conditions on the scored half's
earlier tokens, which this estimate does not.

:func:`training_completion` scores a sample of the training documents the same way: every kind's
training ends on that figure, and aviPAM's trace records it as it trains. The model has seen those
documents whole, so it is no held-out figure, but it is one measure of fit for every kind: log P_TM
per token of words the document model has to predict from the rest of their document.
"""
from typing import NamedTuple

import numpy as np

from .foldin import token_lists


# Training documents scored by :func:`training_completion`: a few hundred, so that folding them
# in costs little next to training.
SAMPLE_DOCS = 300
# The sample's random stream, keyed (seed, _SAMPLE_STREAM): it draws from no generator of training.
_SAMPLE_STREAM = 2009


class Completion(NamedTuple):
    """Result of :func:`document_completion`."""

    log_lik: float     # sum over scored tokens of log P_TM(w | d) / n_scored
    n_scored: int      # tokens scored (odd positions)
    n_observed: int    # tokens folded in (even positions)
    n_docs: int
    params: dict       # the fold-in settings


def split_alternate(doc_ptr, term_ids):
    """(observed doc_ptr, observed term ids, scored doc_ptr, scored term ids): even and odd
    positions of every document."""
    doc_len = np.diff(doc_ptr)
    pos = np.arange(len(term_ids)) - np.repeat(doc_ptr[:-1], doc_len)
    even = pos % 2 == 0
    n_even = (doc_len + 1) // 2
    obs_ptr = np.concatenate([[0], np.cumsum(n_even)]).astype(np.int64)
    held_ptr = np.concatenate([[0], np.cumsum(doc_len - n_even)]).astype(np.int64)
    return obs_ptr, term_ids[even], held_ptr, term_ids[~even]


def document_completion(model, docs, **fold_params):
    """Held-out log-likelihood per token of ``docs`` under ``model`` by document completion.

    Parameters
    ----------
    model : TopicModel
        A fitted model of a kind with ``fold_in``.
    docs : list of int arrays, or Corpus
        Held-out documents (term ids of the model's vocabulary), not used in training.
    **fold_params
        Passed to ``model.fold_in`` (e.g. ``seed``, ``n_iter``); the same seed gives the same
        number.

    Returns
    -------
    Completion
    """
    if not hasattr(model, "fold_in"):
        raise TypeError(f"{type(model).__name__} models have no fold_in, which document completion needs")
    model._check_fitted()
    doc_ptr, term_ids = token_lists(docs, model.n_terms_)
    obs_ptr, obs_terms, held_ptr, held_terms = split_alternate(doc_ptr, term_ids)
    if len(held_terms) == 0:
        raise ValueError("no token to score: every held-out document has fewer than 2 tokens")
    observed = [obs_terms[obs_ptr[d]:obs_ptr[d + 1]] for d in range(len(obs_ptr) - 1)]
    folded = model.fold_in(observed, **fold_params)
    p = folded.token_probs(held_ptr, held_terms)
    return Completion(float(np.log(p).sum() / len(p)), int(len(p)), int(len(obs_terms)),
                      int(len(doc_ptr) - 1), dict(folded.params_))


def training_sample(corpus, seed, n_docs=SAMPLE_DOCS):
    """Up to ``n_docs`` documents of ``corpus`` with at least 2 tokens (one to fold in, one to
    score), drawn by ``seed`` from a stream of their own, in corpus order: a list of term-id arrays."""
    ids = np.flatnonzero(np.diff(corpus.doc_ptr) >= 2)
    if len(ids) > n_docs:
        ids = np.sort(np.random.default_rng([seed, _SAMPLE_STREAM]).choice(ids, n_docs, replace=False))
    return [corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] for d in ids]


def training_completion(model, corpus):
    """Document completion of a fitted ``model`` on :func:`training_sample` of its training
    ``corpus`` drawn by the model's ``seed``, folded in with ``fold_in``'s defaults and that seed:
    the figure that compares kinds trained on one collection. Returns a :class:`Completion`, or
    None for a kind without ``fold_in`` or when no document has 2 tokens."""
    docs = training_sample(corpus, model.seed)
    return document_completion(model, docs, seed=model.seed) if docs and hasattr(model, "fold_in") else None
