"""Ranking over a sharded index (:mod:`retrieval.core.shards`): the run a single index gives.

Each shard is scored by a :class:`ShardScorer`, in this process or on a Ray worker, which owns a
contiguous range of the shards (a :class:`ShardGroup`). The driver

1. analyses the queries (the shards share one analyzer) and gathers every shard's vocabulary
   and term counts, which it combines exactly (:func:`~retrieval.core.shards.combine`: integer
   sums, checked against the manifest's fingerprint) and sends back: the whole collection's
   P(w|C) and each shard's term ids in it;
2. sends the queries, as term ids of the whole collection with their weights; with a model, the
   model file's path, which each worker opens memory-mapped (checked against the whole
   collection's fingerprint and document lengths) and reads as the single index would: one
   ``p_w_d`` per group of queries (:func:`~retrieval.core.ranking.batch_tables`, the same groups)
   for all its shards, each of which keeps its documents' rows;
3. merges the shards' top ``depth`` documents by score, ties to the lower row of the whole
   collection, as :func:`~retrieval.core.scoring.top_k` breaks them on one index.

A shard scores its documents with the kernels of the one ranking path, given P(w|C) of the whole
collection and its own postings and document lengths (:meth:`Scorer.score_docs`), so every score
is the single index's to the last bit and the run file is the same byte for byte. Shards need no
JVM: they read their ``topicir-stats/`` arrays only.

Not supported on a sharded index: Lucene baselines, pseudo-relevance feedback, and kinds that add
query parts beside the terms (TCM's collocations, whose postings are read from one index).
"""
from __future__ import annotations

import logging
import os
import warnings
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import numpy as np
from tqdm.auto import tqdm

from models import registry
from models.common.atomic import check_writable
from models.common.checkpoint import read_header
from models.common.executors import parse_executor

from .plugins import hook
from .ranking import DEPTH, batch_tables, collecting_runs
from .runs import Batch, Method
from .scoring import LAM, MU, Query, Scorer, top_k
from .shards import CollectionModel, Shard, ShardedIndex, check_combined, combine, open_shard, shard_terms
from .trec import ScoredDoc, Topic, topic_query

log = logging.getLogger(__name__)


class ShardScorer:
    """One shard's side of a sharded batch: its statistics and its term ids among the whole
    collection's."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.stats = open_shard(shard).stats
        self.local = None

    def terms(self):
        return shard_terms(self.stats)

    def doc_len(self) -> np.ndarray:
        return np.asarray(self.stats.doc_len, dtype=np.int64)

    def connect(self, ids: np.ndarray, n_terms: int) -> None:
        """This shard's terms' ids ``ids`` among the ``n_terms`` of the whole collection."""
        self.local = np.full(n_terms, -1, dtype=np.int64)
        self.local[ids] = np.arange(len(ids))

    def _postings(self, query: Query) -> tuple[np.ndarray, np.ndarray]:
        """This shard's postings range of each query term (empty for a term it lacks)."""
        local = self.local[query.term_ids]
        ptr = np.asarray(self.stats.post_ptr)
        present = local >= 0
        lo = np.where(present, ptr[np.maximum(local, 0)], 0)
        hi = np.where(present, ptr[np.maximum(local, 0) + 1], 0)
        return lo.astype(np.int64), hi.astype(np.int64)

    def rank(self, query: Query, p_w: np.ndarray | None, scorers: list[Scorer], depth: int) -> list:
        """Per scorer (a (mu, lam) setting): (rows in the whole collection int64, scores float64,
        docnos) of this shard's top ``depth`` for ``query``, best first. ``p_w``: P_TM(w|d) of
        the query's terms in every document of the collection, or None."""
        s, first = self.stats, self.shard.first_doc
        p_tm = p_w[first:first + s.n_docs] if p_w is not None else None
        post_lo, post_hi = self._postings(query)
        out = []
        for scorer in scorers:
            scores = scorer.score_docs(query, self.doc_len(), s.post_doc, s.post_tf, post_lo, post_hi,
                                       p_tm if scorer.lam != 1.0 else None)
            top = top_k(scores, depth)
            out.append((top + first, scores[top], [s.docnos[i] for i in top.tolist()]))
        return out


class ShardGroup:
    """The shards one worker owns (a Ray actor, or the driver itself), in row order, with the
    whole collection's P(w|C) and the model they share: the model's tables of a group of
    queries are computed once for all of them."""

    def __init__(self, shards: list[Shard]):
        self.shards, self.scorers = shards, []
        self.collection = self.model = None

    def open(self) -> None:
        """Open the shards (not in ``__init__``: a Ray actor's own error there is not handed
        back, only that it died)."""
        self.scorers = [ShardScorer(shard) for shard in self.shards]

    def pid(self) -> int:
        return os.getpid()

    def terms(self) -> list:
        return [s.terms() for s in self.scorers]

    def doc_len(self) -> list:
        return [s.doc_len() for s in self.scorers]

    def connect(self, cf: np.ndarray, n_docs: int, n_tokens: int, ids: list[np.ndarray], model: tuple | None) -> None:
        """The whole collection's counts ``cf`` and size, each shard's term ids ``ids`` among
        them, and ``model``: None or (model file, its fingerprint, every document's length)."""
        self.collection = CollectionModel(None, np.array(cf), n_docs, n_tokens)
        for scorer, shard_ids in zip(self.scorers, ids):
            scorer.connect(shard_ids, len(cf))
        if model is not None:
            path, fingerprint, doc_len = model
            self.model = registry.load(path, fingerprint=fingerprint, doc_len=np.array(doc_len))

    def rank(self, queries: list[Query], settings: list[tuple[float, float]], depth: int,
             progress: bool = False) -> list[dict]:
        """Per shard, per (mu, lam) setting, per query: :meth:`ShardScorer.rank`'s top ``depth``."""
        queries = [q._replace(term_ids=np.array(q.term_ids), weights=np.array(q.weights)) for q in queries]
        model = self.model if any(lam < 1 for _, lam in settings) else None
        whole = SimpleNamespace(stats=self.collection)  # what batch_tables reads of an index
        tables = batch_tables(whole, [q.text for q in queries], model, queries=queries)
        scorers = [Scorer(self.collection, mu=mu, lam=lam, model=self.model) for mu, lam in settings]
        out = [{setting: [] for setting in settings} for _ in self.scorers]
        for query, (p_w, _) in tqdm(zip(queries, tables), total=len(queries), desc="ranking topics",
                                    unit=" topics", disable=not progress, mininterval=1):
            for shard, runs in zip(self.scorers, out):
                for setting, top in zip(settings, shard.rank(query, p_w, scorers, depth)):
                    runs[setting].append(top)
        return out


class _LocalPool:
    """Every shard in this process, in one group."""

    def __init__(self, shards: list[Shard]):
        self.groups = [ShardGroup(shards)]
        self.groups[0].open()

    def call(self, method: str, *args) -> list:
        return getattr(self.groups[0], method)(*args)

    def connect(self, cf, n_docs, n_tokens, ids, model) -> None:
        self.groups[0].connect(cf, n_docs, n_tokens, ids, model)

    def rank(self, progress: bool, *args) -> list:
        return self.groups[0].rank(*args, progress=progress)

    def close(self) -> None:
        pass


class _RayPool:
    """The shards on Ray actors (one CPU each), each owning a contiguous range of them."""

    def __init__(self, shards: list[Shard], address: str | None, n_workers: int | None):
        import ray

        from models.common.executors.ray import worker_env
        from models.common.executors.signals import init_ray

        self.ray, self.owns = ray, not ray.is_initialized()
        if self.owns:
            init_ray(address=address, log_to_driver=False, configure_logging=False)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        n = n_workers or max(1, min(len(shards), cpus))
        if n > len(shards):
            self.close()
            raise ValueError(f"{n} Ray workers for {len(shards)} shards: every worker needs a shard; give "
                             f"--workers {len(shards)} or fewer")
        self.ranges = [r.tolist() for r in np.array_split(np.arange(len(shards)), n)]
        actor = ray.remote(num_cpus=1, max_restarts=0)(ShardGroup)
        self.workers = [actor.options(runtime_env=worker_env()).remote([shards[i] for i in r]) for r in self.ranges]
        try:
            self._get([w.open.remote() for w in self.workers])
        except BaseException:
            self.close()
            raise
        log.info("ranking %d shards on %d Ray workers", len(shards), n)

    def _get(self, refs, progress: bool = False) -> list:
        ray = self.ray
        try:
            if not progress:
                return ray.get(refs)
            done = {}
            with tqdm(total=sum(map(len, self.ranges)), desc="ranking shards", unit=" shards") as bar:
                pending = list(refs)
                while pending:
                    ready, pending = ray.wait(pending, num_returns=1)
                    done[ready[0]] = ray.get(ready[0])
                    bar.update(len(self.ranges[refs.index(ready[0])]))
            return [done[r] for r in refs]
        except ray.exceptions.RayTaskError as e:  # the worker's own error (a damaged shard): as it is
            raise e.cause.with_traceback(None) from None
        except ray.exceptions.RayActorError as e:
            who = ", ".join(f"Ray worker {a} (shards {self.ranges[a][0]}-{self.ranges[a][-1]})"
                            for a, w in enumerate(self.workers) if not _alive(ray, w)) or "a Ray worker"
            raise ConnectionError(f"{who} was lost ({type(e).__name__}); run the command again") from None

    def call(self, method: str, *args) -> list:
        return [r for rs in self._get([getattr(w, method).remote(*args) for w in self.workers]) for r in rs]

    def connect(self, cf, n_docs, n_tokens, ids, model) -> None:
        cf, model = self.ray.put(cf), self.ray.put(model)  # once in the object store, not once per worker
        self._get([w.connect.remote(cf, n_docs, n_tokens, [ids[i] for i in r], model)
                   for w, r in zip(self.workers, self.ranges)])

    def rank(self, progress: bool, *args) -> list:
        refs = [w.rank.remote(*args) for w in self.workers]
        return [r for rs in self._get(refs, progress) for r in rs]

    def close(self) -> None:
        for w in getattr(self, "workers", []):
            self.ray.kill(w)
        self.workers = []
        if self.owns:
            from models.common.executors.signals import shutdown_ray

            shutdown_ray()
            self.owns = False


def _alive(ray, worker) -> bool:
    try:
        ray.get(worker.pid.remote(), timeout=5)
        return True
    except Exception:  # noqa: BLE001 (any failure: not alive)
        return False


@contextmanager
def _pool(sharded: ShardedIndex, executor: str, n_workers: int | None):
    kind, address = parse_executor(executor)
    if n_workers is not None and (isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1):
        raise ValueError(f"n_workers must be an int >= 1 or None, got {n_workers!r}")
    if kind == "local" and n_workers is not None:
        raise ValueError("n_workers sets the Ray workers: give executor='ray' (--ray) too")
    pool = _LocalPool(sharded.shards) if kind == "local" else _RayPool(sharded.shards, address, n_workers)
    try:
        yield pool
    finally:
        pool.close()


def _check_model(sharded: ShardedIndex, path) -> tuple:
    """(path, fingerprint) of a model file that can rank ``sharded``; the file is only opened
    for its header here: the workers read it."""
    header = read_header(path)
    if header.get("fingerprint") != sharded.fingerprint:
        raise ValueError(f"{path}: trained on the index with fingerprint {header.get('fingerprint')}, but "
                         f"{sharded.path} holds the collection with fingerprint {sharded.fingerprint}; train "
                         f"the model on an index of the same documents (`topicir index` without --shards)")
    kind = registry.kind_of_header(header)
    if kind is not None and hook(kind, "query_extra") is not None:
        raise ValueError(f"{path}: a {kind} model adds query parts that are read from one index; rank it "
                         f"on an index built without --shards")
    return str(Path(path).resolve()), header["fingerprint"]


def sweep_sharded(sharded, topics: list[Topic], settings: list[tuple[float, float]], *,
                  field: str = "title", model=None, depth: int = DEPTH, executor: str = "local",
                  n_workers: int | None = None, progress: bool = True) -> dict[tuple[float, float], list[ScoredDoc]]:
    """:func:`~retrieval.core.ranking.sweep_topics` over a sharded index (a :class:`ShardedIndex`
    or its path): one run per (mu, lam) setting, the same as on a single index of the same
    documents. ``model``: a model file (trained on such an index); ``executor``: "local" (every
    shard in this process) or Ray: "ray" (the cluster of ``RAY_ADDRESS``, the one this process
    joined, or a new local one), "ray:ADDRESS"; ``n_workers``: Ray actors (default: one per CPU
    of the cluster, at most one per shard)."""
    sharded = sharded if isinstance(sharded, ShardedIndex) else ShardedIndex(sharded)
    model_file = _check_model(sharded, model) if model else None
    texts = [topic_query(topic, field) for topic in topics]
    analysed = [sharded.analyze(text) for text in texts]
    with _pool(sharded, executor, n_workers) as pool:
        collection, ids = combine(pool.call("terms"))
        check_combined(sharded, collection)
        with_model = None
        if model_file is not None:
            with_model = (*model_file, np.concatenate(pool.call("doc_len")))
        pool.connect(collection.cf, collection.n_docs, collection.n_tokens, ids, with_model)
        scorer = Scorer(collection)
        queries = [scorer.query(text, terms) for text, terms in zip(texts, analysed)]
        for topic, query in zip(topics, queries):
            _check_terms(topic.qid, query)
        per_shard = pool.rank(progress, queries, settings, depth)
    with collecting_runs():
        return {setting: _merge(topics, [r[setting] for r in per_shard], depth) for setting in settings}


def run_sharded(sharded, topics: list[Topic], *, field: str = "title", mu: float = MU, lam: float = LAM,
                model=None, depth: int = DEPTH, executor: str = "local", n_workers: int | None = None,
                progress: bool = True) -> list[ScoredDoc]:
    """:func:`~retrieval.core.ranking.run_topics` over a sharded index (see :func:`sweep_sharded`)."""
    lam = lam if model else 1.0
    return sweep_sharded(sharded, topics, [(mu, lam)], field=field, model=model, depth=depth, executor=executor,
                         n_workers=n_workers, progress=progress)[(mu, lam)]


def _check_terms(qid: str, query: Query) -> None:
    """The warning :func:`~retrieval.core.ranking.prepare` gives for a query without indexed terms."""
    if len(query.term_ids) == 0:
        why = "only stopwords" if not query.terms else f"no indexed term ({' '.join(query.terms)})"
        warnings.warn(f"topic {qid}: query {query.text!r} has {why}; every document scores 0 and "
                      f"DOCNO order decides the ranking", stacklevel=3)


def _merge(topics: list[Topic], shards: list[list], depth: int) -> list[ScoredDoc]:
    """Every topic's ranking from its shards' top ``depth``: by score, ties to the lower row."""
    run = []
    for i, topic in enumerate(topics):
        rows = np.concatenate([s[i][0] for s in shards])
        scores = np.concatenate([s[i][1] for s in shards])
        docnos = [d for s in shards for d in s[i][2]]
        order = np.lexsort((rows, -scores))[:depth]
        run.extend(ScoredDoc(topic.qid, docnos[j], score) for j, score in zip(order.tolist(), scores[order].tolist()))
    return run


def run_sharded_batch(batch: Batch, topics: list[Topic], *, mu=(MU,), lam=None, model=None, executor: str = "local",
                      n_workers: int | None = None) -> Iterator[Path]:
    """``topicir run`` on a sharded index (``batch.index`` a :class:`ShardedIndex`): the runs
    :func:`~retrieval.core.runs.run_batch` writes for a single index, every setting of the
    sweep from one pass over the shards."""
    check_writable(Path(batch.out).parent if batch.out else Path(batch.out_dir))
    name, lams = (Path(model).stem, lam or [LAM]) if model else ("ql", [1.0])
    settings = [(m, x) for m in mu for x in lams]
    if batch.out and len(settings) > 1:
        raise ValueError("--out names one file; a sweep writes one run per setting into --out-dir")
    runs = sweep_sharded(batch.index, topics, settings, field=batch.field, model=model, depth=batch.depth,
                         executor=executor, n_workers=n_workers)
    for (m, x), run in runs.items():
        yield batch.write(Method(name, mu=m, lam=x if model else None, model=model), run)
