"""Benchmark: time to rank 100 three-term queries over a whole collection, and peak memory.

    topicir bench ql                      # synthetic 250,000 docs + the largest shared collection
    topicir bench ql --docs 50000         # smaller synthetic collection
    topicir bench ql --baselines indexes/cran --baselines-topics ../shared/data/cran/topics.trec

Synthetic: a seeded Zipfian corpus (models.common.corpus.synthetic_corpus) of AP's size (250,000 docs,
~240 tokens each after stopping, 200,000 terms). Queries: three distinct terms drawn, seeded, from
terms with document frequency between 10 and 5% of the collection (title-query-like). Side by
side on the shared collection: Lucene's QLD via Anserini, which scores only matching documents.
On the index ``baselines`` with its topics: each Lucene baseline of ``topicir run --baseline``
against pyserini's own batch search (:mod:`retrieval.bench.lucene`).
"""
from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np

from models.common.corpus import synthetic_corpus

from ..core.scoring import MU, Query, Scorer, top_k
from ..core.stats import CollectionStats
from ..core.tables import Table, fixed


def _peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def sample_queries(stats: CollectionStats, n: int = 100, length: int = 3, seed: int = 0) -> list[Query]:
    rng = np.random.default_rng(seed)
    df = stats.df
    pool = np.flatnonzero((df >= 10) & (df <= max(10, 0.05 * stats.n_docs)))
    queries = []
    for _ in range(n):
        ids = np.sort(rng.choice(pool, size=length, replace=False)).astype(np.int64)
        terms = [stats.terms[i] for i in ids]
        queries.append(Query(" ".join(terms), terms, ids, np.ones(length), []))
    return queries


def _stats_gib(stats: CollectionStats) -> float:
    return sum(getattr(stats, a).nbytes for a in ("doc_ptr", "term_ids", "positions", "post_ptr", "post_doc", "post_tf")) / 2**30


def time_ranking(stats: CollectionStats, queries: list[Query], depth: int = 1000) -> float:
    scorer = Scorer(stats, mu=MU, lam=1.0)
    scorer.score(queries[0])  # touch the memory-mapped arrays once
    start = time.perf_counter()
    for q in queries:
        top_k(scorer.score(q), depth)
    return time.perf_counter() - start


def synthetic_stats(n_docs: int, n_terms: int, mean_len: float, seed: int) -> CollectionStats:
    corpus = synthetic_corpus(n_docs, n_terms, mean_len, seed=seed)
    vocab = {f"t{i}": i for i in range(corpus.n_terms)}
    lens = np.concatenate([[0], np.diff(corpus.doc_ptr)])
    positions = np.arange(len(corpus.term_ids), dtype=np.int32) - np.repeat(
        corpus.doc_ptr[:-1], np.diff(corpus.doc_ptr)).astype(np.int32)
    docnos = [f"SYN-{d}" for d in range(n_docs)]
    return CollectionStats.from_arrays(docnos, vocab, lens, corpus.term_ids, positions)


def run(*, docs: int = 250_000, terms: int = 200_000, mean_len: float = 240.0, queries: int = 100,
        seed: int = 0, shared: str = "indexes/npl", baselines: str = "indexes/cranfield",
        baselines_topics: str = "irds:cranfield") -> list[Table]:
    """Rank ``queries`` seeded three-term queries over a synthetic collection of ``docs`` documents
    and, when the index ``shared`` exists, over it with exact QL and with Lucene's QLD; when the
    index ``baselines`` exists, time its Lucene baselines against pyserini's on ``baselines_topics``."""
    n_queries = queries
    rows = []

    def row(coll, system, secs, note):
        rows.append({"collection": coll, "system": system, "seconds": fixed(secs, 2),
                     "ms/query": fixed(1000 * secs / n_queries, 1), "peak GiB": fixed(_peak_rss_gib(), 2),
                     "note": note})

    start = time.perf_counter()
    stats = synthetic_stats(docs, terms, mean_len, seed)
    built = time.perf_counter() - start
    secs = time_ranking(stats, sample_queries(stats, n_queries, seed=seed))
    row(f"synthetic {stats.n_docs:,} docs, {stats.n_tokens / 1e6:.1f} M tokens", "topicir exact QL", secs,
        f"stats: {_stats_gib(stats):.2f} GiB of arrays, built in {built:.1f} s")
    del stats

    if shared and Path(shared).exists():
        from ..core.baselines import run_baseline
        from ..core.index import Index
        from ..core.trec import Topic

        index = Index(shared)
        stats = index.stats
        qs = sample_queries(stats, n_queries, seed=seed)
        secs = time_ranking(stats, qs)
        label = f"{index.name} {stats.n_docs:,} docs, {stats.n_tokens / 1e6:.2f} M tokens"
        row(label, "topicir exact QL", secs, f"stats: {_stats_gib(stats):.3f} GiB of arrays")
        topics = [Topic(str(i), q.text, "", "") for i, q in enumerate(qs)]
        run_baseline(index, topics[:5], "qld", mu=MU, threads=1, progress=False)  # warm up the JVM's JIT
        t0 = time.perf_counter()
        run_baseline(index, topics, "qld", mu=MU, threads=1, progress=False)
        lucene = time.perf_counter() - t0
        row(label, "Lucene QLD, 1 thread", lucene,
            f"topicir/Lucene time ratio {secs / lucene:.2f} (Anserini's SimpleSearcher, hits read into a run)")

    tables = [Table(f"Ranking {n_queries} three-term queries over every document, depth 1000, 1 thread", rows,
                    notes=["peak GiB: the whole process so far, building the statistics included"], digits=2)]
    if baselines and Path(baselines).exists():
        tables.append(baseline_table(baselines, baselines_topics))
    return tables


def baseline_table(index_dir: str, topics_source: str, repeats: int = 3) -> Table:
    """The Lucene baselines of ``topicir run --baseline`` against pyserini's batch search."""
    from ..core.index import Index
    from ..core.sources import load_topics
    from .lucene import compare

    index, topics = Index(index_dir), load_topics(topics_source)
    rows = [{"collection": f"{index.name} {index.stats.n_docs:,} docs, {len(topics)} topics", "method": r["method"],
             "topicir s": fixed(r["topicir s"], 2), "pyserini s": fixed(r["pyserini s"], 2),
             "topicir/pyserini": fixed(r["ratio"], 2), "hits": r["hits"]}
            for r in compare(index, topics, repeats=repeats)]
    return Table("Lucene baselines, depth 1000: topicir run --baseline against pyserini's batch search", rows,
                 notes=[f"topics {topics_source}, title field; best of {repeats} taking turns after a warm-up; both return the same "
                        f"hits (checked). topicir's time includes reading the hits into a run, pyserini's "
                        f"leaves them as Java objects"], digits=2)
