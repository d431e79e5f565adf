"""Benchmark: topicir's Lucene baselines against pyserini's own batch search, in one process.

Both rank the same topics over the same index with Anserini's defaults (BM25 k1 0.9 b 0.4;
QLD mu 1000; RM3 10 documents, 10 terms, weight 0.5), depth 1000: topicir through
:func:`retrieval.core.baselines.run_baseline` (hits read into a run), pyserini through
``LuceneSearcher.batch_search`` (hits left as Java objects). After a warm-up of the JVM's
compiler the two take turns, best of ``repeats`` each; they must return the same hits.
"""
from __future__ import annotations

import os
import time
from functools import partial

from ..core.baselines import BASELINES, as_written, run_baseline
from ..core.index import Index
from ..core.jvm import jclass
from ..core.trec import Topic, topic_query


def _lucene_searcher_class():
    """pyserini's ``LuceneSearcher``. Importing it builds an OpenAI client, which refuses an empty
    key; the searcher never calls it, so a placeholder stands in for the import."""
    jclass("io.anserini.search.SimpleSearcher")  # our JVM first: pyserini then skips its own set-up
    unset = "OPENAI_API_KEY" not in os.environ
    if unset:
        os.environ["OPENAI_API_KEY"] = "unused"
    try:
        from pyserini.search.lucene import LuceneSearcher
    finally:
        if unset:
            del os.environ["OPENAI_API_KEY"]
    return LuceneSearcher


def _pyserini(searcher_class, index: Index, method: str):
    searcher = searcher_class(str(index.path.resolve()))
    if method == "qld":
        searcher.set_qld(1000.0)
    else:
        searcher.set_bm25(0.9, 0.4)
    if method == "bm25+rm3":
        searcher.set_rm3(10, 10, 0.5)
    return searcher


def _best_of_alternating(fns, repeats: int) -> list[tuple[float, object]]:
    """Each of ``fns`` once to warm up, then ``repeats`` rounds of one call each in turn (so that
    all see the same load on the machine): the best seconds of each and its last result."""
    out = [fn() for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            out[i] = fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return list(zip(best, out))


def compare(index: Index, topics: list[Topic], methods=BASELINES, depth: int = 1000, threads: int = 2,
            repeats: int = 3) -> list[dict]:
    """One row per method: seconds of topicir's and pyserini's batch and their ratio. Raises when
    the two rank differently."""
    searcher_class = _lucene_searcher_class()
    queries = {t.qid: " ".join(topic_query(t, "title").split()) for t in topics}
    queries = {q: text for q, text in queries.items() if text}
    rows = []
    for method in methods:
        searcher = _pyserini(searcher_class, index, method)
        (ours_s, ours), (theirs_s, theirs) = _best_of_alternating([
            partial(run_baseline, index, topics, method, depth=depth, threads=threads, progress=False),
            partial(searcher.batch_search, list(queries.values()), list(queries), k=depth, threads=threads)], repeats)
        expected = [(q, h.docid, float(s)) for q in queries
                    for h, s in zip(theirs.get(q, []), as_written([h.score for h in theirs.get(q, [])]))]
        if [tuple(r) for r in ours] != expected:
            raise RuntimeError(f"{method}: topicir's run differs from pyserini's batch search on {index.path}")
        searcher.close()
        rows.append({"method": method, "topicir s": ours_s, "pyserini s": theirs_s,
                     "ratio": ours_s / theirs_s, "hits": len(ours)})
    return rows
