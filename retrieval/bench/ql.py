"""Benchmark: time to rank 100 three-term queries over a whole collection, and peak memory.

    topicir bench ql                      # synthetic 250,000 docs + the largest shared collection
    topicir bench ql -- --docs 50000      # smaller synthetic collection

Synthetic: a seeded Zipfian corpus (models.corpus.synthetic_corpus) of AP's size (250,000 docs,
~240 tokens each after stopping, 200,000 terms). Queries: three distinct terms drawn, seeded, from
terms with document frequency between 10 and 5% of the collection (title-query-like). Side by
side on the shared collection: Lucene's QLD via Anserini, which scores only matching documents.
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np

from models.corpus import synthetic_corpus

from ..core.scoring import MU, Query, Scorer, top_k
from ..core.stats import CollectionStats


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="topicir bench ql", description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=250_000)
    p.add_argument("--terms", type=int, default=200_000)
    p.add_argument("--mean-len", type=float, default=240.0)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared", default="indexes/npl", help="index of the largest shared collection ('' to skip)")
    args = p.parse_args(argv)

    rows = []
    start = time.perf_counter()
    stats = synthetic_stats(args.docs, args.terms, args.mean_len, args.seed)
    built = time.perf_counter() - start
    queries = sample_queries(stats, args.queries, seed=args.seed)
    secs = time_ranking(stats, queries)
    rows.append((f"synthetic {stats.n_docs:,} docs, {stats.n_tokens / 1e6:.1f} M tokens", "topicir exact QL",
                 secs, _peak_rss_gib(), f"(stats: {_stats_gib(stats):.2f} GiB of arrays, built in {built:.1f} s)"))
    del stats

    if args.shared and Path(args.shared).exists():
        from ..core.baselines import run_baseline
        from ..core.index import Index
        from ..core.trec import Topic

        index = Index(args.shared)
        stats = index.stats
        queries = sample_queries(stats, args.queries, seed=args.seed)
        secs = time_ranking(stats, queries)
        label = f"{index.name} {stats.n_docs:,} docs, {stats.n_tokens / 1e6:.2f} M tokens"
        rows.append((label, "topicir exact QL", secs, _peak_rss_gib(), f"(stats: {_stats_gib(stats):.3f} GiB of arrays)"))
        topics = [Topic(str(i), q.text, "", "") for i, q in enumerate(queries)]
        run_baseline(index, topics[:5], "qld", mu=MU, threads=1)  # warm up the JVM's JIT
        t0 = time.perf_counter()
        run_baseline(index, topics, "qld", mu=MU, threads=1)
        lucene = time.perf_counter() - t0
        rows.append((label, "Lucene QLD, 1 thread", lucene, _peak_rss_gib(),
                     f"topicir/Lucene time ratio {secs / lucene:.2f} (Anserini SearchCollection, run file included)"))

    print(f"Ranking {args.queries} three-term queries over every document, depth 1000, 1 thread "
          f"(peak RSS: whole process so far, building the statistics included)")
    print(f"{'collection':<40} {'system':<22} {'seconds':>8} {'ms/query':>9} {'peak GiB':>9}")
    for coll, system, secs, rss, note in rows:
        print(f"{coll:<40} {system:<22} {secs:8.2f} {1000 * secs / args.queries:9.1f} {rss:9.2f}  {note}")
    return 0
