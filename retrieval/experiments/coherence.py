"""Topic coherence: NPMI of every topic's top words over a reference corpus, for any model kind
(through ``topic_words``), under a stated convention.

Conventions (they change the figures a lot; every printed figure names its own):

``document``  a word pair co-occurs when both words are in the same document (the count of
              AVITM's coherence script and of the aviPAM paper's tables); N = number of documents.
``window W``  a word pair co-occurs when both are in one of the sliding windows of W tokens
              (Lau et al. 2014 use W = 20): a document of n tokens gives max(1, n - W + 1)
              windows, N = number of windows over all documents (gensim's ``c_npmi`` counting).

NPMI(wi, wj) = log((p_ij + eps) / (p_i p_j)) / -log(p_ij + eps), eps = 1e-12, as gensim's
``CoherenceModel(coherence="c_npmi")``; a topic's coherence is the mean over its word pairs, a
model's the mean over topics. A pair with a word that never occurs in the reference counts -1.
gensim's own sliding window (4.4, ``WordOccurrenceAccumulator._slide_window``) marks the token
leaving a window absent even when the word occurs again inside the window, so it undercounts
repeated words; the two agree exactly on the document convention and on texts without repeats
(tests/test_coherence.py). Token positions are those of the reference corpus as given (stopwords and out-of-vocabulary
words already removed), as gensim sees the same token lists.

    topicir coherence --model M.npz --newsgroups [--window 20]
    topicir coherence --model M.npz --index indexes/med
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

EPS = 1e-12
DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


class Coherence(NamedTuple):
    per_topic: np.ndarray   # NPMI of every topic
    mean: float
    convention: str         # "document" or "window 20"
    reference: str
    top_n: int

    def line(self, label="NPMI"):
        return (f"{label} {self.mean:.4f}  [{self.convention} co-occurrence, reference "
                f"{self.reference}, top-{self.top_n} words, {len(self.per_topic)} topics]")


def convention_name(window):
    return "document" if window is None else f"window {window}"


def occurrences(corpus, words, window=None):
    """Counts over the reference ``corpus`` for the term ids ``words`` (R distinct ids):
    (occ (R,), co (R, R), N): units (documents or windows) containing each word, each pair,
    and the number of units."""
    words = np.asarray(words, dtype=np.int64)
    col = np.full(corpus.n_terms, -1, dtype=np.int64)
    col[words] = np.arange(len(words))
    R = len(words)
    lens = np.diff(corpus.doc_ptr)
    if window is None:
        from scipy import sparse

        doc = np.repeat(np.arange(corpus.n_docs), lens)
        c = col[corpus.term_ids]
        keep = c >= 0
        B = sparse.csr_matrix((np.ones(int(keep.sum())), (doc[keep], c[keep])),
                              shape=(corpus.n_docs, R))
        B.data[:] = 1.0  # duplicates summed by the constructor: presence only
        B = (B > 0).astype(np.float64)
        co = (B.T @ B).toarray()
        return np.diag(co).copy(), co, corpus.n_docs
    if window < 1:
        raise ValueError(f"window must be >= 1 or None (documents), got {window!r}")
    occ = np.zeros(R)
    co = np.zeros((R, R))
    n_units = int(np.maximum(1, lens - window + 1).sum())
    for d in range(corpus.n_docs):
        lo, hi = corpus.doc_ptr[d], corpus.doc_ptr[d + 1]
        c = col[corpus.term_ids[lo:hi]]
        pos = np.flatnonzero(c >= 0)
        if pos.size == 0:
            continue
        n = hi - lo
        present = np.unique(c[pos])
        if n <= window:  # the whole document is its one window
            M = np.ones((1, len(present)))
        else:
            # Window s holds a word iff the word occurs in positions [s, s + window).
            ind = np.zeros((n, len(present)))
            ind[pos, np.searchsorted(present, c[pos])] = 1.0
            cs = np.vstack([np.zeros((1, len(present))), np.cumsum(ind, axis=0)])
            M = ((cs[window:] - cs[:-window]) > 0).astype(np.float64)
        occ[present] += M.sum(0)
        co[np.ix_(present, present)] += M.T @ M
    return occ, co, n_units


def npmi_matrix(occ, co, n_units):
    """NPMI of every pair (gensim's formula; -1 where a word never occurs)."""
    p = occ / n_units
    pij = co / n_units
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log((pij + EPS) / np.outer(p, p))
        out = pmi / -np.log(pij + EPS)
    missing = (p == 0)
    out[missing, :] = -1.0
    out[:, missing] = -1.0
    return out


def topic_npmi(topics, corpus, window=None):
    """NPMI of every topic (a sequence of term ids; order irrelevant) over ``corpus``:
    the mean over all pairs of distinct words of the topic. Returns ndarray (n_topics,)."""
    topics = [np.asarray(t, dtype=np.int64) for t in topics]
    for t in topics:
        if len(t) < 2 or len(np.unique(t)) != len(t):
            raise ValueError(f"a topic needs >= 2 distinct words, got {t.tolist()}")
        if t.min() < 0 or t.max() >= corpus.n_terms:
            raise ValueError(f"topic words {t.tolist()} out of range for {corpus.n_terms} terms")
    words = np.unique(np.concatenate(topics))
    occ, co, n_units = occurrences(corpus, words, window)
    S = npmi_matrix(occ, co, n_units)
    out = np.empty(len(topics))
    for i, t in enumerate(topics):
        idx = np.searchsorted(words, t)
        sub = S[np.ix_(idx, idx)]
        out[i] = sub[~np.eye(len(t), dtype=bool)].mean()
    return out


def model_topics(model, top_n=10, topics=None):
    """Top-``top_n`` term ids of every topic of any registered model (through ``topic_words``)."""
    ks = range(model.n_topics) if topics is None else topics
    return [model.topic_words(k, top=top_n)[0] for k in ks]


def model_coherence(model, corpus, reference, window=None, top_n=10, topics=None):
    """:class:`Coherence` of ``model``'s topics (all, or the ids ``topics``) over ``corpus``."""
    if model.n_terms_ != corpus.n_terms:
        raise ValueError(f"model has {model.n_terms_} terms but the reference corpus {corpus.n_terms}: "
                         f"the reference must use the model's vocabulary")
    per = topic_npmi(model_topics(model, top_n, topics), corpus, window)
    return Coherence(per, float(per.mean()), convention_name(window), reference, top_n)


def report(model, corpus, reference, window=None, top_n=10):
    """Lines: the model's coherence, and one per mixture component when it has several."""
    lines = [model_coherence(model, corpus, reference, window, top_n).line(f"{model.kind}")]
    groups = getattr(model, "topic_groups", None) or []
    if len(groups) > 1:
        for lo, hi in groups:
            c = model_coherence(model, corpus, reference, window, top_n, topics=range(lo, hi))
            lines.append("  " + c.line(f"component of {hi - lo} topics"))
    return lines


def reference_corpus(args):
    """(corpus, description) of the reference the command line names."""
    if args.index:
        from retrieval.core.index import Index
        from retrieval.core.modelfiles import index_corpus

        index = Index(args.index)
        return index_corpus(index), f"index {index.name} ({index.stats.n_docs} docs)"
    from retrieval.datasets.newsgroups import newsgroups_top_words_corpus

    split = None if args.split == "all" else args.split
    corpus, _, _ = newsgroups_top_words_corpus(args.newsgroups, args.vocab, split)
    return corpus, f"20 Newsgroups {args.split} ({corpus.n_docs} docs, top {args.vocab} words)"


def coherence_report(models, *, index=None, newsgroups=DEFAULT_20NEWS, vocab: int = 2000, split: str = "train",
                     window="document", top_n: int = 10) -> str:
    """``topicir coherence``: NPMI of every model file of ``models`` (any kind) over the token
    stream of ``index``, or else 20 Newsgroups (``split``, top ``vocab`` words)."""
    from types import SimpleNamespace

    from models import registry

    win = None if str(window) == "document" else int(window)
    corpus, ref = reference_corpus(SimpleNamespace(index=index, newsgroups=newsgroups, vocab=vocab, split=split))
    out = []
    for path in models:
        model = registry.load(path, fingerprint=corpus.fingerprint)
        out.append(str(path))
        out += ["  " + line for line in report(model, corpus, ref, win, top_n)]
    return "\n".join(out)
