"""Lucene baselines through Anserini's SimpleSearcher: BM25, Lucene's own QLD, BM25+RM3.

Parameters are Anserini's defaults (BM25 k1=0.9 b=0.4; RM3 10 docs, 10 terms, weight 0.5).
Lucene's QLD scores only documents that match a query term and clamps negative term scores
to 0, so it differs from our exact QL; we report both side by side.
"""
from __future__ import annotations

import logging
import tempfile
import warnings
from pathlib import Path

from tqdm import tqdm

from .index import Index
from .jvm import jclass, lucene_errors
from .trec import ScoredDoc, Topic, read_run, topic_query

log = logging.getLogger(__name__)

BASELINES = ("bm25", "qld", "bm25+rm3")
MU_FREE = ("bm25", "bm25+rm3")  # baselines that take no Dirichlet prior


def run_baseline(index: Index, topics: list[Topic], method: str, *, field: str = "title",
                 depth: int = 1000, progress: bool = True, k1: float = 0.9, b: float = 0.4,
                 mu: float = 1000.0, fb_docs: int = 10, fb_terms: int = 10,
                 orig_weight: float = 0.5, threads: int = 2) -> list[ScoredDoc]:
    """Rank ``topics`` with Anserini's SearchCollection, entirely in Java (wrapping every hit
    in a Python object through jnius would take longer than the search itself)."""
    if method not in BASELINES:
        raise ValueError(f"unknown baseline {method!r}; choose from {', '.join(BASELINES)}")
    queries = {t.qid: " ".join(topic_query(t, field).split()) for t in topics}
    for qid in [q for q, text in queries.items() if not text]:
        warnings.warn(f"topic {qid}: empty {field} query; it has no {method} results", stacklevel=2)
        del queries[qid]
    args = ["-bm25", "-bm25.k1", str(k1), "-bm25.b", str(b)] if method != "qld" else ["-qld", "-qld.mu", str(mu)]
    if method == "bm25+rm3":
        args += ["-rm3", "-rm3.fbDocs", str(fb_docs), "-rm3.fbTerms", str(fb_terms),
                 "-rm3.originalQueryWeight", str(orig_weight)]
    # with progress, in about ten chunks of topics so that a bar can follow the search (every
    # topic is ranked on its own: chunks change nothing in the run); one call without
    qids = list(queries)
    size = max(1, -(-len(qids) // 10) if progress else len(qids))
    run: list[ScoredDoc] = []
    log.info("%s: %d topics through Anserini SearchCollection", method, len(queries))
    with tempfile.TemporaryDirectory(prefix="topicir-") as tmp, \
            tqdm(total=len(qids), desc=method, unit="topic", disable=not progress or not qids) as bar:
        for start in range(0, len(qids), size):
            chunk = qids[start:start + size]
            topics_file, run_file = Path(tmp) / f"topics{start}.tsv", Path(tmp) / f"run{start}.txt"
            topics_file.write_text("".join(f"{q}\t{queries[q]}\n" for q in chunk), encoding="utf-8")
            with lucene_errors(index.path):  # a damaged index: one line, not a run missing topics
                jclass("io.anserini.search.SearchCollection").main(
                    ["-index", str(index.path.resolve()), "-topics", str(topics_file), "-topicReader", "TsvString",
                     "-output", str(run_file), "-hits", str(depth), "-threads", str(threads), *args])
            run += read_run(run_file)
            bar.update(len(chunk))
    return run
