"""Lucene baselines through Anserini's SimpleSearcher: BM25, Lucene's own QLD, BM25+RM3.

Parameters are Anserini's defaults (BM25 k1=0.9 b=0.4; RM3 10 docs, 10 terms, weight 0.5).
Lucene's QLD scores only documents that match a query term and clamps negative term scores
to 0, so it differs from our exact QL; we report both side by side.

Topics are ranked by the searcher pyserini's ``LuceneSearcher`` wraps, in one batch call per
chunk of topics (no run file goes through the disk), with the scores as Anserini's
SearchCollection writes them to a run file, so that a run is the same whichever way it is made.
"""
from __future__ import annotations

import logging
import warnings
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from tqdm import tqdm

from .index import Index
from .jvm import jclass, lucene_errors
from .trec import ScoredDoc, Topic, topic_query

log = logging.getLogger(__name__)

BASELINES = ("bm25", "qld", "bm25+rm3")
MU_FREE = ("bm25", "bm25+rm3")  # baselines that take no Dirichlet prior

_MICRO = Decimal("0.000001")


def as_written(scores) -> np.ndarray:
    """``scores`` (Java floats) as Anserini's run files give them: Java's ``%f``, which rounds the
    shortest decimal of the value half up to six places. Rounding the binary value instead (numpy,
    Python's ``%f``) differs only where that decimal ends at a 5 in the seventh place, so those
    few are rounded as Java does."""
    x = np.asarray(scores, dtype=np.float64)
    scaled = x * 1e6
    out = np.rint(scaled) / 1e6
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) <= np.maximum(1e-6, 8 * np.spacing(np.abs(scaled)))
    for i in np.flatnonzero(near_half):
        out[i] = float(Decimal(repr(float(x[i]))).quantize(_MICRO, ROUND_HALF_UP))
    return out


def _searcher(index: Index, method: str, *, k1: float, b: float, mu: float, fb_docs: int, fb_terms: int,
              orig_weight: float):
    searcher = jclass("io.anserini.search.SimpleSearcher")(str(index.path.resolve()))
    if method == "qld":
        searcher.set_qld(float(mu))
    else:
        searcher.set_bm25(float(k1), float(b))
    if method == "bm25+rm3":
        searcher.set_rm3(int(fb_terms), int(fb_docs), float(orig_weight))
    return searcher


def _java_list(items: list[str]):
    out = jclass("java.util.ArrayList")()
    for item in items:
        out.add(item)
    return out


def _rank(searcher, queries: dict[str, str], depth: int, threads: int) -> list[ScoredDoc]:
    """The top ``depth`` hits of each query: one at a time with one thread, else in one batch."""
    hits = None
    if threads > 1:
        try:
            found = searcher.batch_search(_java_list(list(queries.values())), _java_list(list(queries)), depth,
                                          threads)
            hits = {e.getKey(): e.getValue() for e in found.entrySet().toArray()}
        except Exception:  # a search thread's failure is swallowed there: one at a time raises it
            log.debug("batch search failed; ranking its topics one at a time")
    if hits is None:
        hits = {qid: searcher.search(text, depth) for qid, text in queries.items()}
    run = []
    for qid in queries:
        ranked = hits.get(qid) or []
        docnos = [h.docid for h in ranked]
        scores = as_written([h.score for h in ranked])
        run += [ScoredDoc(qid, d, float(s)) for d, s in zip(docnos, scores)]
    return run


def run_baseline(index: Index, topics: list[Topic], method: str, *, field: str = "title",
                 depth: int = 1000, progress: bool = True, k1: float = 0.9, b: float = 0.4,
                 mu: float = 1000.0, fb_docs: int = 10, fb_terms: int = 10,
                 orig_weight: float = 0.5, threads: int = 2) -> list[ScoredDoc]:
    """Rank ``topics`` with Anserini (``threads`` 1: one topic after another in this thread;
    more: Anserini's batch search, which spreads the topics over the machine's cores)."""
    if method not in BASELINES:
        raise ValueError(f"unknown baseline {method!r}; choose from {', '.join(BASELINES)}")
    queries = {t.qid: " ".join(topic_query(t, field).split()) for t in topics}
    for qid in [q for q, text in queries.items() if not text]:
        warnings.warn(f"topic {qid}: empty {field} query; it has no {method} results", stacklevel=2)
        del queries[qid]
    # with progress, in about ten chunks of topics so that a bar can follow the search (every
    # topic is ranked on its own: chunks change nothing in the run); one call without
    qids = list(queries)
    size = max(1, -(-len(qids) // 10) if progress else len(qids))
    run: list[ScoredDoc] = []
    log.info("%s: %d topics through Anserini's SimpleSearcher", method, len(queries))
    # a damaged index: one line naming it, not a trace or a run with topics missing
    with lucene_errors(index.path), \
            tqdm(total=len(qids), desc=method, unit="topic", disable=not progress or not qids) as bar:
        searcher = _searcher(index, method, k1=k1, b=b, mu=mu, fb_docs=fb_docs, fb_terms=fb_terms,
                             orig_weight=orig_weight)
        try:
            for start in range(0, len(qids), size):
                chunk = qids[start:start + size]
                run += _rank(searcher, {q: queries[q] for q in chunk}, depth, threads)
                bar.update(len(chunk))
        finally:
            searcher.close()
    return run
