"""The one ranking path: a query against an index, with exact QL or any topic model.

``topicir run``, the console, ``topicir iterations``, reports and the PyTerrier transformer all
rank through :func:`prepare` and :meth:`PreparedQuery.scores`, so a model scores the same
everywhere. A model's document tables for a query are computed once (:func:`prepare`) and then
scored under any number of (mu, lam) settings or kept samples. Model kinds that add query parts
(TCM's collocations) do so through their adapter's ``query_extra`` hook
(:mod:`retrieval.adapters`); nothing here names a kind. On an index grown after the model was
trained, the model is read through :func:`retrieval.core.extension.document_model` (fold-in of
the added documents), still by this one path.
"""
from __future__ import annotations

import gc
import json
import logging
import re
import time
import warnings
from contextlib import contextmanager
from functools import partial
from itertools import repeat
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
from tqdm.auto import tqdm

from .extension import document_model
from .plugins import hook
from .index import Index
from .scoring import LAM, MU, Query, Scorer, top_k
from .trec import ScoredDoc, Topic, topic_query, write_run

log = logging.getLogger(__name__)

DEPTH = 1000
RUNS_DIR = Path("topics_runs")
# Memory of the P_TM tables computed in one call for a group of queries (:func:`batch_tables`).
TABLE_BYTES = 1 << 29


class QueryExtra(NamedTuple):
    """Query parts a model adds beside the query's terms, each scored as
    ``weight * log(lam * P_QL(c|d) + (1 - lam) * P_TM(c|d))`` (see
    :meth:`retrieval.core.scoring.Scorer.score_collocations`)."""
    labels: list                 # what each part is, for explanations (e.g. "boundari layer")
    postings: list               # per part: (docs int32, tf int32) of its exact occurrences
    p_c: np.ndarray              # per part: P(c|C)
    weight: float                # omega
    p_tm: Callable               # p_tm(per_sample: bool) -> (n_docs, n_parts) or (C, S, n_docs, n_parts)
    parts: object = None         # what the kind's ``batch_tables`` hook reads to compute many queries' tables at once


class PreparedQuery:
    """A query analysed against an index, with the model's P_TM tables computed once.

    Parameters
    ----------
    index : Index
    text : str, the query
    model : topic model (:class:`models.common.base.TopicModel`) or None for exact QL
    per_sample : bool
        Keep every kept sample's tables (``(n_chains, n_samples, n_docs, n_terms)``) so that
        :meth:`scores` can rank with one sample or one iteration's chains (``topicir iterations``).

    p_w : ndarray (n_docs, n_terms), optional
        P_TM(w|d) of the query's distinct terms when already computed (:func:`sweep_topics`
        computes those of many queries in one call).
    extra : (QueryExtra or None, ndarray or None), optional
        The model's extra parts of the query and their P_TM table when already computed
        (:func:`batch_tables`); ``(None, None)``: the model adds none.
    """

    def __init__(self, index: Index, text: str, model=None, *, per_sample: bool = False,
                 p_w: np.ndarray | None = None, extra: tuple | None = None):
        model = document_model(model, index)  # a model of an index this one grew from: fold-in
        self.index, self.text, self.model, self.per_sample = index, text, model, per_sample
        self.query: Query = Scorer(index.stats).query(text, index.analyze(text))
        self.p_w = self.extra = self.p_extra = None
        if model is None or len(self.query.term_ids) == 0:
            return
        ids = self.query.term_ids
        if p_w is not None and not per_sample:
            self.p_w = p_w
        else:
            self.p_w = model.p_w_d_per_sample(ids) if per_sample else model.p_w_d(ids)
        if extra is not None and not per_sample:
            self.extra, self.p_extra = extra
            return
        self.extra = find_extras(index, [text], model, [self.query])[0]
        if self.extra is not None:
            self.p_extra = self.extra.p_tm(per_sample)

    def scores(self, mu: float = MU, lam: float = LAM, select: Callable | None = None) -> np.ndarray:
        """Score of every document, shape (n_docs,). ``select`` maps the per-sample tables
        (n_chains, n_samples, ...) to one table (only with ``per_sample=True``; by default the
        mean over all samples)."""
        scorer = Scorer(self.index.stats, mu=mu, lam=lam, model=self.model)
        if self.p_w is None or scorer.lam == 1.0:
            return scorer.score(self.query)
        pick = select if select is not None else (lambda a: a.mean(axis=(0, 1)))
        p_w = pick(self.p_w) if self.per_sample else self.p_w
        if self.p_extra is None:
            return scorer.score(self.query, p_w)
        p_extra = pick(self.p_extra) if self.per_sample else self.p_extra
        return scorer.score_collocations(self.query, p_w, self.extra.postings, self.extra.p_c, p_extra,
                                         self.extra.weight)


def prepare(index: Index, text: str, model=None, *, per_sample: bool = False, qid: str = "",
            warn: bool = True, p_w: np.ndarray | None = None, extra: tuple | None = None) -> PreparedQuery:
    """:class:`PreparedQuery` for ``text``; warns (with the topic id) when no query term is
    indexed: every document then scores 0 and DOCNO order decides, so a run never silently
    lacks a topic."""
    prepared = PreparedQuery(index, text, model, per_sample=per_sample, p_w=p_w, extra=extra)
    query = prepared.query
    if query.unknown:
        log.debug("topic %s: terms not in the index: %s", qid, " ".join(query.unknown))
    if warn and len(query.term_ids) == 0:
        why = "only stopwords" if not query.terms else f"no indexed term ({' '.join(query.terms)})"
        warnings.warn(f"topic {qid}: query {text!r} has {why}; every document scores 0 and "
                      f"DOCNO order decides the ranking", stacklevel=3)
    return prepared


_scored_doc = partial(tuple.__new__, ScoredDoc)


@contextmanager
def collecting_runs():
    """Pauses Python's cyclic garbage collector while a batch builds its run lines: a batch of
    100 topics makes 100,000 of them, whose allocations would set off collections that walk every
    line made so far, to find no cycle (run lines hold strings and floats)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def ranked(index: Index, qid: str, scores: np.ndarray, depth: int = DEPTH) -> list[ScoredDoc]:
    """The top ``depth`` documents of ``scores`` as a ranking, best first."""
    top = top_k(scores, depth)
    # made by C loops over plain lists (no namedtuple __new__ per line): building the run lines
    # is the batch's largest Python cost
    return list(map(_scored_doc, zip(repeat(qid), map(index.stats.docnos.__getitem__, top.tolist()),
                                     scores[top].tolist())))


def rank(index: Index, qid: str, text: str, *, mu: float = MU, lam: float = LAM, model=None,
         depth: int = DEPTH) -> list[ScoredDoc]:
    """The top ``depth`` documents for one query, best first."""
    return ranked(index, qid, prepare(index, text, model, qid=qid).scores(mu, lam), depth)


def find_extras(index: Index, texts: list[str], model, queries: list[Query] | None = None) -> list:
    """The parts the model's kind adds to each query (its adapter's ``query_extra`` hook, e.g.
    TCM's collocations), without their tables: a :class:`QueryExtra` per query, None where it
    adds none (``queries``: the texts analysed, when the caller has them)."""
    extra_hook = hook(model.kind, "query_extra")
    if extra_hook is None:
        return [None] * len(texts)
    if queries is None:
        scorer = Scorer(index.stats)
        queries = [scorer.query(text, index.analyze(text)) for text in texts]
    out = []
    for text, query in zip(texts, queries):
        extra = extra_hook(index, model, text, query) if len(query.term_ids) else None
        out.append(extra if extra is not None and len(extra.postings) else None)
    return out


def batch_tables(index: Index, texts: list[str], model, extras: list | None = None,
                 table_bytes: int | None = None):
    """What :func:`prepare` takes for every query, yielded in order: ``(p_w, (extra, p_extra))``,
    P_TM(w|d) of the query's distinct terms ((n_docs, n_terms); None for a query without
    indexed terms) and the parts the model's kind adds with their table (``(None, None)`` where
    it adds none; ``extras``: :func:`find_extras` of ``texts``, found here when not given).
    Without a model, ``(None, None)`` for every query.

    The model is called once per group of consecutive queries whose distinct terms and parts
    together fit ``table_bytes`` (default :data:`TABLE_BYTES`) of tables: a document model reads
    its per-document rows once for all the group's terms, and, through its adapter's
    ``batch_tables`` hook, for the group's parts too (TCM: terms and collocations in one pass);
    a kind without the hook computes each part's table apart (``p_tm``)."""
    if model is None:
        yield from repeat((None, None), len(texts))
        return
    scorer, n_docs = Scorer(index.stats), index.stats.n_docs
    max_cols = max(1, (TABLE_BYTES if table_bytes is None else table_bytes) // (8 * max(n_docs, 1)))
    queries = [scorer.query(text, index.analyze(text)) for text in texts]
    ids = [q.term_ids for q in queries]
    extras = find_extras(index, texts, model, queries) if extras is None else extras
    parts = [len(e.postings) if e is not None else 0 for e in extras]
    joint = hook(model.kind, "batch_tables")
    start = 0
    while start < len(ids):
        stop, terms, n_parts = start + 1, set(ids[start].tolist()), parts[start]
        while stop < len(ids) and len(terms | set(ids[stop].tolist())) + n_parts + parts[stop] <= max_cols:
            terms |= set(ids[stop].tolist())
            n_parts += parts[stop]
            stop += 1
        union = np.array(sorted(terms), dtype=np.int64)
        group = [e for e in extras[start:stop] if e is not None]
        if joint is not None and group:
            rows, tables = joint(model, union, group)
        else:
            rows, tables = model.p_w_d(union) if len(union) else None, [e.p_tm(False) for e in group]
        # term-major (the kinds' tables are (n_docs, n_terms) views of (n_terms, n_docs)
        # arrays): a query's columns are then rows, copied whole rather than gathered
        rows, tables = (rows.T if rows is not None else None), iter(tables)
        for q, e in zip(ids[start:stop], extras[start:stop]):
            yield (rows[np.searchsorted(union, q)].T if len(q) else None,
                   (e, next(tables)) if e is not None else (None, None))
        start = stop


def sweep_topics(index: Index, topics: list[Topic], settings: list[tuple[float, float]], *,
                 field: str = "title", model=None, depth: int = DEPTH,
                 progress: bool = True) -> dict[tuple[float, float], list[ScoredDoc]]:
    """One run per (mu, lam) setting; the model's tables are computed once per query, for many
    queries at a time (:func:`batch_tables`)."""
    runs = {setting: [] for setting in settings}
    model = document_model(model, index)
    texts = [topic_query(topic, field) for topic in topics]
    tables = batch_tables(index, texts, model if any(lam < 1 for _, lam in settings) else None)
    with collecting_runs():
        for topic, text, (p_w, extra) in tqdm(zip(topics, texts, tables), total=len(topics), desc="ranking topics",
                                              unit=" topics", disable=not progress, mininterval=1):
            prepared = prepare(index, text, model, qid=topic.qid, p_w=p_w, extra=extra)
            for mu, lam in settings:
                runs[(mu, lam)].extend(ranked(index, topic.qid, prepared.scores(mu, lam), depth))
    return runs


def run_topics(index: Index, topics: list[Topic], *, field: str = "title", mu: float = MU,
               lam: float = LAM, model=None, depth: int = DEPTH, progress: bool = True) -> list[ScoredDoc]:
    """Rank every topic's ``field`` query over the whole collection with (topic-smoothed) QL."""
    return sweep_topics(index, topics, [(mu, lam)], field=field, model=model, depth=depth,
                        progress=progress)[(mu, lam)]


def run_name(topics_name: str, model_name: str, **params) -> str:
    """``run.<topics>.<model>.<params>.txt`` as Anserini's regression pages name runs."""
    def clean(s) -> str:
        return re.sub(r"[^\w.+-]+", "-", str(s)).strip("-")
    settings = "_".join(f"{k}{clean(v)}" for k, v in params.items())
    return ".".join(p for p in ("run", clean(topics_name), clean(model_name), settings, "txt") if p)


def run_tag(model_name: str, **params) -> str:
    """The tag column of a run :func:`run_name` names: ``topicir-<model>.<params>``, so that the
    runs of a sweep (one model, several lam) keep apart once merged into one file."""
    return "topicir-" + run_name("", model_name, **params)[len("run."):-len(".txt")]


def settings_path(run_path) -> Path:
    """The settings file beside a run: ``<run>.json``."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".json")


def read_settings(run_path) -> dict | None:
    """The settings :func:`save_run` recorded beside a run, or None (none, or unreadable)."""
    try:
        return json.loads(settings_path(run_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def topics_key(source) -> str:
    """The name a topic source goes by in run names, whatever its spelling: ``irds:cranfield``,
    ``cranfield`` and ``topics/cranfield.trec`` are all ``cranfield``."""
    text = str(source)
    if text.startswith("irds:"):
        return text.removeprefix("irds:").replace("/", "-")
    return Path(text).name.split(".")[0]


def changed_settings(old: dict, new: dict) -> list[str]:
    """The settings that differ between two runs' records and change the ranking: not the
    version, the date or the tag (it names the settings), not the spelling of the topic source,
    not the index's path when its fingerprint is the same, not mu for a method that has none (BM25)."""
    from .baselines import MU_FREE

    ignore = {"written", "topicir", "tag"}
    if old.get("fingerprint") and old.get("fingerprint") == new.get("fingerprint"):
        ignore.add("index")
    if new.get("method") in MU_FREE and old.get("method") == new.get("method"):
        ignore.add("mu")
    norm = lambda k, v: topics_key(v) if k == "topics" and v is not None else v
    return sorted(k for k in (set(old) | set(new)) - ignore if norm(k, old.get(k)) != norm(k, new.get(k)))


def save_run(run: list[ScoredDoc], path, tag: str, depth: int = DEPTH, params: dict | None = None,
             expansions=None) -> Path:
    """Write a TREC run and, with ``params``, the settings that made it to ``<run>.json`` (TREC
    run files have no room for them). Replacing a run made with other settings is logged.
    ``expansions`` (pseudo-relevance feedback's :class:`retrieval.core.feedback.Expansion` of
    every query) go to ``<run>.expansions.jsonl``; without them an earlier run's file there is
    removed, so that it never describes another run."""
    from models.common.atomic import atomic_open
    from models._version import __version__

    from .feedback import expansions_path, write_expansions

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if params is not None:
        settings = {"topicir": __version__, "tag": tag, "depth": depth, **params}
        old = read_settings(path) if path.exists() else None
        changed = [] if old is None else changed_settings(old, settings)
        if changed:
            log.warning("%s: replacing a run made with other settings (%s)", path,
                        ", ".join(f"{k}: {old.get(k)!r} -> {settings.get(k)!r}" for k in changed))
    write_run(path, run, tag=tag, depth=depth)
    if expansions is not None:
        write_expansions(expansions_path(path), expansions)
    else:
        expansions_path(path).unlink(missing_ok=True)
    if params is not None:
        with atomic_open(settings_path(path), "w", encoding="utf-8") as out:
            json.dump(settings | {"written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, out, indent=1)
    return path
