"""Lucene baselines through Anserini's SimpleSearcher: BM25, Lucene's own QLD, BM25+RM3.

Parameters are Anserini's defaults (BM25 k1=0.9 b=0.4; RM3 10 docs, 10 terms, weight 0.5).
Lucene's QLD scores only documents that match a query term and clamps negative term scores
to 0, so it differs from our exact QL; we report both side by side.
"""
from __future__ import annotations

from tqdm.auto import tqdm

from .index import Index
from .jvm import jclass
from .trec import ScoredDoc, Topic, topic_query

BASELINES = ("bm25", "qld", "bm25+rm3")


class LuceneSearcher:
    def __init__(self, index: Index, method: str = "bm25", *, k1: float = 0.9, b: float = 0.4,
                 mu: float = 1000.0, fb_docs: int = 10, fb_terms: int = 10, orig_weight: float = 0.5):
        if method not in BASELINES:
            raise ValueError(f"unknown baseline {method!r}; choose from {', '.join(BASELINES)}")
        self.method = method
        self._searcher = jclass("io.anserini.search.SimpleSearcher")(str(index.path))
        if method == "qld":
            self._searcher.set_qld(float(mu))
        else:
            self._searcher.set_bm25(float(k1), float(b))
        if method == "bm25+rm3":
            self._searcher.set_rm3(int(fb_docs), int(fb_terms), float(orig_weight))

    def search(self, qid: str, text: str, depth: int = 1000) -> list[ScoredDoc]:
        if not text.strip():
            return []
        return [ScoredDoc(qid, hit.docid, float(hit.score)) for hit in self._searcher.search(text, depth)]

    def close(self) -> None:
        self._searcher.close()


def run_baseline(index: Index, topics: list[Topic], method: str, *, field: str = "title",
                 depth: int = 1000, progress: bool = True, **params) -> list[ScoredDoc]:
    searcher = LuceneSearcher(index, method, **params)
    try:
        return [hit for t in tqdm(topics, desc=method, unit=" topics", disable=not progress, mininterval=1)
                for hit in searcher.search(t.qid, topic_query(t, field), depth)]
    finally:
        searcher.close()
