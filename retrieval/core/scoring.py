"""Query likelihood with Dirichlet smoothing, optionally mixed with a topic model's P(w|d).

    P(w|d) = lam * (tf(w,d) + mu * P(w|C)) / (|d| + mu) + (1 - lam) * P_TM(w|d)
    score(d) = sum over query tokens w of log P(w|d)

computed exactly for every document from the collection statistics (Lucene's
LMDirichletSimilarity clamps negative term scores to 0 and scores only matching documents).
Kernels first, then the :class:`Scorer` that validates and orchestrates them.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from models.common.base import launch_numba_threads
from models.common.corpus import read_only
from models.common.jit import njit

from .stats import CollectionStats

MU = 1000.0
LAM = 0.7
# Weight of the collocation term of TCM runs: SDM's default ordered-window : term weight, 0.1 / 0.85.
OMEGA = 0.1 / 0.85
_NONE = np.zeros(0)  # the gap arrays of a score without bounds


# _score_mixture's product pass: the documents a thread takes at a time (their products, flags
# and length factors stay in cache while each query term's row streams through), and the most
# factors a product may take (each >= _TINY, so that six cannot underflow below _FLUSH).
_BLOCK = 2048
_MAX_FACTORS = 6
_TINY = 1e-30
_FLUSH = 1e-200


@njit(parallel=True, cache=True)
def _score_mixture(doc_len, post_doc, post_tf, post_lo, post_hi, p_c, q_weight, mu, lam, table, rows,
                   doc_gap, term_gap, by_rows, scratch, out, out_gap):
    """Add sum_w q_weight[w] * log(lam * P_QL(w|d) + (1 - lam) * P_TM(w|d)) to ``out`` (changed
    in place), with P_TM(w|d) = ``table[rows[w], d]``; where ``out_gap`` has n_docs entries, add
    the same sum with P_TM(w|d) + doc_gap[d] * term_gap[w] to it in the same pass (bounds: the
    documents' postings scattered and the table read once for both).

    post_lo/post_hi : postings range of each query term; table : (n_rows, n_docs) float64,
    either layout (``by_rows``: its rows are contiguous); scratch : int32 zeros, at least
    n_docs * n_query_terms of them, zeros again on return (:meth:`CollectionStats.zeros_scratch`).
    The postings are scattered into a (n_query_terms, n_docs) table first, so that the documents
    are scored in one parallel loop (one thread start per query, not two per query term). The
    logarithm is most of the cost: terms of a small integer weight (a query's term counts)
    multiply into one product per document, whose log is taken once (and before it could
    underflow); other weights (feedback's) and tiny probabilities take a log each. Where every
    weight is such and the product has at most _MAX_FACTORS factors (most queries), a
    contiguous table is read a row at a time into the documents' products, a loop the compiler
    vectorizes, and a document with a factor below _TINY is summed again as the general loop
    sums it: the scores are the general loop's, bit for bit.
    """
    n_docs, n_q = doc_len.shape[0], q_weight.shape[0]
    tf = scratch[:n_docs * n_q].reshape((n_q, n_docs))
    for j in range(n_q):
        for i in range(post_lo[j], post_hi[j]):
            tf[j, post_doc[i]] = post_tf[i]
    reps = np.zeros(n_q, dtype=np.int64)
    n_factors = 0
    for j in range(n_q):
        if q_weight[j] == np.floor(q_weight[j]) and 1.0 <= q_weight[j] <= 8.0:
            reps[j] = np.int64(q_weight[j])
        n_factors += reps[j] if reps[j] > 0 else _MAX_FACTORS + 1
    mu_pc = mu * p_c
    gapped = out_gap.shape[0] == n_docs
    if by_rows and n_factors <= _MAX_FACTORS:
        for blk in numba.prange((n_docs + _BLOCK - 1) // _BLOCK):
            d0 = blk * _BLOCK
            _block_products(d0, min(n_docs, d0 + _BLOCK), doc_len, mu, tf, mu_pc, lam, reps, q_weight, table,
                            rows, doc_gap, term_gap, gapped, out, out_gap)
    else:
        for d in numba.prange(n_docs):
            inv = lam / (doc_len[d] + mu)
            out[d] += _log_mixture(d, tf, mu_pc, inv, lam, reps, q_weight, table, rows, 0.0, term_gap)
            if gapped:
                out_gap[d] += _log_mixture(d, tf, mu_pc, inv, lam, reps, q_weight, table, rows, doc_gap[d],
                                           term_gap)
    for j in range(n_q):
        for i in range(post_lo[j], post_hi[j]):
            tf[j, post_doc[i]] = 0


@njit(cache=True, inline="always")
def _block_products(d0, d1, doc_len, mu, tf, mu_pc, lam, reps, q_weight, table, rows, doc_gap, term_gap,
                    gapped, out, out_gap):
    """:func:`_score_mixture`'s sums of the documents [d0, d1) when every weight is a small
    integer: their factors multiplied a query term's row at a time, in the order
    :func:`_log_mixture` multiplies them, and a document with a factor below _TINY summed by it."""
    n = d1 - d0
    inv = np.empty(n)
    for r in range(n):
        inv[r] = lam / (doc_len[d0 + r] + mu)
    prod = np.ones(n)
    prod_gap = np.ones(n if gapped else 0)
    tiny = np.zeros(n, dtype=np.bool_)
    for j in range(q_weight.shape[0]):
        row, t, m = table[rows[j], d0:d1], tf[j, d0:d1], mu_pc[j]
        g = term_gap[j] if gapped else 0.0
        for _ in range(reps[j]):
            for r in range(n):
                ql = (m + t[r]) * inv[r]
                p = ql + (1.0 - lam) * row[r]
                tiny[r] |= p < _TINY
                prod[r] *= p
                if gapped:  # P_TM raised by the gap, the QL part shared
                    p = ql + (1.0 - lam) * (row[r] + doc_gap[d0 + r] * g)
                    tiny[r] |= p < _TINY
                    prod_gap[r] *= p
    for r in range(n):
        d = d0 + r
        if tiny[r]:
            out[d] += _log_mixture(d, tf, mu_pc, inv[r], lam, reps, q_weight, table, rows, 0.0, term_gap)
            if gapped:
                out_gap[d] += _log_mixture(d, tf, mu_pc, inv[r], lam, reps, q_weight, table, rows, doc_gap[d],
                                           term_gap)
        else:
            out[d] += np.log(prod[r])
            if gapped:
                out_gap[d] += np.log(prod_gap[r])


@njit(cache=True, inline="always")
def _log_mixture(d, tf, mu_pc, inv, lam, reps, q_weight, table, rows, gap, term_gap):
    """Document d's sum of :func:`_score_mixture`, P_TM raised by ``gap * term_gap[w]`` (with
    ``gap`` 0, the table's values as they are)."""
    acc = 0.0
    prod = 1.0
    for j in range(q_weight.shape[0]):
        p_tm = table[rows[j], d]
        if gap != 0.0:
            p_tm += gap * term_gap[j]
        p = (mu_pc[j] + tf[j, d]) * inv + (1.0 - lam) * p_tm
        if reps[j] == 0 or p < _TINY:
            acc += q_weight[j] * np.log(p)
            continue
        for _ in range(reps[j]):
            prod *= p
        if prod < _FLUSH:
            acc += np.log(prod)
            prod = 1.0
    return acc + np.log(prod)


@njit(parallel=True, cache=True)
def _score_ql(log_norm, post_doc, post_tf, post_lo, post_hi, p_c, q_weight, mu, out):
    """Exact Dirichlet QL of every document into ``out`` (changed in place): the part every
    document has, sum_w q_weight[w] * (log(mu P(w|C)) - log(|d| + mu)) with ``log_norm`` =
    log(|d| + mu), then a correction per posting of a query term."""
    mu_pc = mu * p_c
    log_bg = np.log(mu_pc)
    base = np.sum(q_weight * log_bg)
    total = np.sum(q_weight)
    for d in numba.prange(log_norm.shape[0]):
        out[d] += base - total * log_norm[d]
    for j in range(q_weight.shape[0]):
        for i in range(post_lo[j], post_hi[j]):
            out[post_doc[i]] += q_weight[j] * (np.log(post_tf[i] + mu_pc[j]) - log_bg[j])


class Query(NamedTuple):
    """An analysed query: distinct in-vocabulary term ids with their counts, and what was dropped."""
    text: str
    terms: list[str]            # analysed terms, in order, with repeats
    term_ids: np.ndarray        # distinct known term ids, int64
    weights: np.ndarray         # query-term frequency of each, float64
    unknown: list[str]          # analysed terms absent from the index


class Scorer:
    """Scores every document of an index for a query.

    Parameters
    ----------
    stats : CollectionStats
    mu : float, Dirichlet prior (papers: 1000).
    lam : float in [0, 1], weight of the QL part; 1 means plain QL. (Wei & Croft call it lambda.)
    model : optional topic model with ``p_w_d(term_ids) -> ndarray (n_docs, n_terms)``.
    """

    def __init__(self, stats: CollectionStats, mu: float = MU, lam: float = LAM, model=None):
        if not (mu > 0 and math.isfinite(mu)):
            raise ValueError(f"mu must be a finite number > 0, got {mu!r}")
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {lam!r}")
        if model is None and lam != 1.0:
            lam = 1.0  # without a topic model the mixture is plain QL
        self.stats, self.mu, self.lam, self.model = stats, float(mu), float(lam), model
        launch_numba_threads()  # before the first parallel kernel: idle threads sleep

    def query(self, text: str, terms: list[str]) -> Query:
        index = self.stats.term_index
        known = [index[t] for t in terms if t in index]
        ids, counts = np.unique(np.asarray(known, dtype=np.int64), return_counts=True)
        return Query(text, terms, ids, counts.astype(np.float64), [t for t in terms if t not in index])

    def score(self, query: Query, p_tm: np.ndarray | None = None) -> np.ndarray:
        """Log-likelihood of the query under every document, shape (n_docs,), float64.

        ``p_tm``: P_TM(w|d) of the query's distinct terms, (n_docs, len(query.term_ids)), when
        already computed (one per kept sample, or shared by several settings); by default the
        model's ``p_w_d``."""
        s = self.stats
        if len(query.term_ids) == 0:
            return np.zeros(s.n_docs)
        return self._score(query, s.doc_len, s.post_doc, s.post_tf, s.post_ptr[query.term_ids],
                           s.post_ptr[query.term_ids + 1], p_tm, s.log_doc_norm)

    def score_docs(self, query: Query, doc_len, post_doc, post_tf, post_lo, post_hi,
                   p_tm: np.ndarray | None = None) -> np.ndarray:
        """:meth:`score` of documents that are not rows of the index (texts a re-ranker is given),
        under the index's collection model P(w|C).

        Parameters
        ----------
        doc_len : ndarray of shape (n_docs,), int64, their lengths in tokens
        post_doc, post_tf : ndarray, int32: the query terms' postings among these documents,
            term after term, docs ascending; those of query term j are ``[post_lo[j], post_hi[j])``
        p_tm : ndarray of shape (n_docs, len(query.term_ids)), float64; needed when lam < 1
        """
        if len(query.term_ids) == 0:
            return np.zeros(len(doc_len))
        if p_tm is None and self.lam != 1.0:
            raise ValueError(f"lam = {self.lam!r} mixes in a topic model: give P_TM(w|d) of these documents")
        return self._score(query, np.asarray(doc_len, dtype=np.int64), np.asarray(post_doc, dtype=np.int32),
                           np.asarray(post_tf, dtype=np.int32), np.asarray(post_lo, dtype=np.int64),
                           np.asarray(post_hi, dtype=np.int64), p_tm)

    def _score(self, query, doc_len, post_doc, post_tf, post_lo, post_hi, p_tm, log_norm=None):
        """``log_norm(mu)``: log(|d| + mu) of these documents, where the caller keeps it."""
        out = np.zeros(len(doc_len))
        p_c = self.stats.p_c[query.term_ids]
        if self.lam == 1.0:
            log_norm = log_norm(self.mu) if log_norm is not None else np.log(doc_len + self.mu)
            # read-only, as an index's postings are: one compiled kernel whoever gathered them
            _score_ql(log_norm, read_only(np.asarray(post_doc)), read_only(np.asarray(post_tf)),
                      np.asarray(post_lo, dtype=np.int64), np.asarray(post_hi, dtype=np.int64), p_c,
                      query.weights, self.mu, out)
        else:
            p_tm = self.model.p_w_d(query.term_ids) if p_tm is None else p_tm
            # either layout: a term-major view is not copied
            self._mixture(query.weights, p_c, doc_len, post_doc, post_tf, post_lo, post_hi,
                          np.asarray(p_tm, dtype=np.float64).T, out)
        return out

    def _mixture(self, weights, p_c, doc_len, post_doc, post_tf, post_lo, post_hi, table, out, rows=None,
                 doc_gap=_NONE, term_gap=_NONE, out_gap=_NONE):
        """:func:`_score_mixture` of the terms whose P_TM are the ``rows`` of ``table`` (n_rows,
        n_docs; by default all, in order) into ``out`` (and, with the gaps, ``out_gap``)."""
        rows = np.arange(len(weights)) if rows is None else np.asarray(rows, dtype=np.int64)
        # read-only, as an index's postings are: one compiled kernel whoever gathered them
        _score_mixture(np.asarray(doc_len), read_only(np.asarray(post_doc)), read_only(np.asarray(post_tf)),
                       np.asarray(post_lo, dtype=np.int64), np.asarray(post_hi, dtype=np.int64),
                       np.asarray(p_c, dtype=np.float64), weights, self.mu, self.lam, table, rows, doc_gap,
                       term_gap, table.strides[1] == table.itemsize,
                       self.stats.zeros_scratch(len(doc_len) * len(weights)), out, out_gap)

    def score_bounds(self, query: Query, table: np.ndarray, rows: np.ndarray, doc_gap: np.ndarray,
                     term_gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`score` on lower and upper bounds of P_TM in one pass: ``(low, high)``, each of
        shape (n_docs,), scored on ``table[rows].T`` and on it plus
        ``np.multiply.outer(doc_gap, term_gap)``; ``high`` is :meth:`score` on that sum.

        table : (n_terms, n_docs) float64 of which ``rows`` (len(query.term_ids),) are the
        query's terms; doc_gap : (n_docs,); term_gap : (len(query.term_ids),)."""
        s = self.stats
        if self.lam == 1.0:
            raise ValueError("bounds on P_TM need lam < 1")
        low, high = np.zeros(s.n_docs), np.zeros(s.n_docs)
        if len(query.term_ids) == 0:
            return low, high
        ids = query.term_ids
        self._mixture(query.weights, s.p_c[ids], s.doc_len, s.post_doc, s.post_tf, s.post_ptr[ids],
                      s.post_ptr[ids + 1], np.asarray(table, dtype=np.float64), low, rows,
                      np.asarray(doc_gap, dtype=np.float64), np.asarray(term_gap, dtype=np.float64), high)
        return low, high

    def score_collocations(self, query: Query, p_w: np.ndarray, postings: list, p_c: np.ndarray,
                           p_tm: np.ndarray, omega: float = OMEGA) -> np.ndarray:
        """:meth:`score` with ``p_w`` as P_TM(w|d), plus a term per query collocation (TCM):

            omega * sum over collocations c of log(lam * P_QL(c|d) + (1 - lam) * P_TM(c|d))

        where P_QL(c|d) = (tf(c,d) + mu P(c|C)) / (|d| + mu) counts the collocation's exact
        occurrences, as the ordered-window feature of the sequential dependence model (Metzler &
        Croft 2005) does; omega = 0 is :meth:`score` with ``p_w``.

        Parameters
        ----------
        p_w : (n_docs, len(query.term_ids)) P_TM(w|d) of the query's distinct terms.
        postings : list of (docs int32, tf int32) per collocation; p_c : (n_collocations,) P(c|C).
        p_tm : (n_docs, n_collocations) P_TM(c|d).
        """
        out = self.score(query, p_w)
        if self.lam == 1.0 or omega == 0.0 or len(postings) == 0:
            return out
        return out + omega * self.collocation_part(postings, p_c, p_tm)

    def collocation_part(self, postings: list, p_c: np.ndarray, p_tm: np.ndarray) -> np.ndarray:
        """sum over collocations c of log(lam * P_QL(c|d) + (1 - lam) * P_TM(c|d)) of every
        document, shape (n_docs,): what :meth:`score_collocations` adds, times omega."""
        s = self.stats
        lens = np.array([len(docs) for docs, _ in postings], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        extra = np.zeros(s.n_docs)
        docs, tf = (np.concatenate([p[i] for p in postings]).astype(np.int32) for i in (0, 1))
        self._mixture(np.ones(len(postings)), p_c, s.doc_len, docs, tf, ptr[:-1], ptr[1:],
                      np.asarray(p_tm, dtype=np.float64).T, extra)
        return extra


@njit(cache=True)
def _kth_largest(scores, k):
    """(the k-th largest of ``scores``, True), 1 <= k <= len: a min-heap of the k best seen,
    which most scores pass with one comparison once it holds good ones. Scores that keep
    entering it (ascending order) make it give up early: (nan, False)."""
    heap = np.empty(k, dtype=np.float64)
    heap[:] = scores[:k]
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(heap, i, k)
    budget = scores.shape[0] // 8
    for i in range(k, scores.shape[0]):
        v = scores[i]
        if v > heap[0]:
            heap[0] = v
            _sift_down(heap, 0, k)
            budget -= 1
            if budget < 0:
                return np.nan, False
    return heap[0], True


@njit(cache=True, inline="always")
def _sift_down(heap, i, n):
    v = heap[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and heap[c + 1] < heap[c]:
            c += 1
        if heap[c] >= v:
            break
        heap[i] = heap[c]
        i = c
    heap[i] = v


# top_k's estimate: one score in SAMPLE_STRIDE, whose (2 k / SAMPLE_STRIDE)-th largest is most
# likely below the k-th largest of all (about 2 k scores reach it)
SAMPLE_STRIDE = 16


def _candidates(scores: np.ndarray, k: int) -> np.ndarray | None:
    """The documents scoring at least the k-th best (and those tied with it), found from an
    estimate of the k-th best score taken on a sample; None when the sample is too small or
    the estimate turns out above the k-th best (fewer than k scores reach it). At least k
    scores reaching the estimate prove it is at most the k-th best, since fewer than k
    scores exceed the k-th best: then the exact k-th best is found among them."""
    sample = scores[::SAMPLE_STRIDE]
    rank = 2 * k // SAMPLE_STRIDE
    if rank < 8 or rank > len(sample) // 4:
        return None
    estimate = np.partition(sample, len(sample) - rank)[len(sample) - rank]
    cand = np.flatnonzero(scores >= estimate)
    if len(cand) < k:
        return None
    top = scores[cand]
    kth = np.partition(top, len(top) - k)[len(top) - k]
    return cand[top >= kth]


def reaching_kth(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices, ascending, of every score at least the k-th largest (1 <= k <= len(scores)):
    those above it and all tied with it."""
    if k == len(scores):
        return np.arange(len(scores))
    cand = _candidates(scores, k)
    if cand is None:
        kth, found = _kth_largest(scores, k)
        if not found:
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        cand = np.flatnonzero(scores >= kth)
    return cand


def kth_largest(scores: np.ndarray, k: int) -> float:
    """The k-th largest score (1 <= k <= len(scores)), found as :func:`top_k` finds it: from a
    sample's estimate where it can, not a partition of every score."""
    return scores[reaching_kth(scores, k)].min()


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, best first; ties go to the lower doc index (deterministic)."""
    k = min(k, len(scores))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    cand = reaching_kth(scores, k)
    order = np.lexsort((cand, -scores[cand]))
    return cand[order[:k]]


# -- the slow, obvious twin: one document at a time, term by term ---------------------------


class TermScore(NamedTuple):
    """One query term's part of a document's score."""
    term: str
    weight: float   # query-term frequency
    tf: int         # frequency in the document
    p_ql: float     # Dirichlet-smoothed (tf + mu P(w|C)) / (|d| + mu)
    p_tm: float     # topic model's P_TM(w|d); nan without a model
    p: float        # lam * p_ql + (1 - lam) * p_tm
    score: float    # weight * log(p): these sum to the document's score


def explain(stats: CollectionStats, query: Query, doc: int, mu: float, lam: float,
            p_tm: np.ndarray | None = None) -> list[TermScore]:
    """Break document ``doc``'s score for ``query`` down per distinct query term.

    Parameters
    ----------
    stats : CollectionStats
    query : Query, as from :meth:`Scorer.query`
    doc : int, row of the document
    mu, lam : float, as in :class:`Scorer` (lam must be 1 when ``p_tm`` is None)
    p_tm : ndarray of shape (len(query.term_ids),), float64, or None
        The topic model's P_TM(w|doc) of each query term.

    Returns
    -------
    list of TermScore, in ``query.term_ids`` order; their ``score`` sums to ``Scorer.score(query)[doc]``.
    """
    if p_tm is None and lam != 1.0:
        raise ValueError(f"lam = {lam!r} mixes in a topic model, but no P_TM(w|d) was given")
    length = int(stats.doc_len[doc])
    rows = []
    for j, (w, weight) in enumerate(zip(query.term_ids, query.weights)):
        docs, tfs = stats.postings(w)
        i = int(np.searchsorted(docs, doc))
        tf = int(tfs[i]) if i < len(docs) and docs[i] == doc else 0
        p_ql = (tf + mu * float(stats.p_c[w])) / (length + mu)
        tm = float(p_tm[j]) if p_tm is not None else math.nan
        p = p_ql if p_tm is None else lam * p_ql + (1.0 - lam) * tm
        rows.append(TermScore(stats.terms[w], float(weight), tf, p_ql, tm, p, float(weight) * math.log(p)))
    return rows
