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
import logging
import warnings
from contextlib import contextmanager
from functools import partial
from itertools import repeat
from typing import Callable, NamedTuple

import numpy as np
from tqdm.auto import tqdm

from .extension import document_model
from .plugins import hook
from .pruning import bounded_table
from .index import Index
from .scoring import LAM, MU, Query, Scorer, top_k
from .trec import ScoredDoc, Topic, topic_query

log = logging.getLogger(__name__)

DEPTH = 1000
# Memory of the P_TM tables computed in one call for a group of queries (:func:`batch_tables`);
# a group's tables are freed before the next group's call, so this is also their peak. At AP
# size (250,000 documents) it holds the ~400 term and collocation columns of 100 queries: one
# pass of the model over its documents.
TABLE_BYTES = 3 << 28


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

    Made by :func:`prepare` (one query) or :func:`prepare_topics` (a batch).

    Parameters
    ----------
    index : Index
    text : str, the query
    model : document model of ``index`` (:func:`retrieval.core.extension.document_model` of a
        :class:`models.common.base.TopicModel`) or None for exact QL
    per_sample : bool
        Keep every kept sample's tables (``(n_chains, n_samples, n_docs, n_terms)``) so that
        :meth:`scores` can rank with one sample or one iteration's chains (``topicir iterations``).

    p_w : ndarray (n_docs, n_terms), optional
        P_TM(w|d) of the query's distinct terms when already computed (:func:`sweep_topics`
        computes those of many queries in one call).
    extra : (QueryExtra or None, ndarray or None), optional
        The model's extra parts of the query and their P_TM table when already computed
        (:func:`batch_tables`); ``(None, None)``: the model adds none.
    query : Query, optional
        ``text`` analysed by the index, when already done.
    """

    def __init__(self, index: Index, text: str, model=None, *, per_sample: bool = False,
                 p_w: np.ndarray | None = None, extra: tuple | None = None, query: Query | None = None):
        self.index, self.text, self.model, self.per_sample = index, text, model, per_sample
        self.query: Query = query if query is not None else Scorer(index.stats).query(text, index.analyze(text))
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
    """:class:`PreparedQuery` for ``text``, with ``model`` read as a document model of ``index``
    (fold-in on an index grown since it was trained); warns (with the topic id) when no query
    term is indexed: every document then scores 0 and DOCNO order decides, so a run never
    silently lacks a topic."""
    prepared = PreparedQuery(index, text, document_model(model, index), per_sample=per_sample, p_w=p_w, extra=extra)
    _check_terms(prepared, qid, warn)
    return prepared


def prepare_topics(index: Index, topics: list[Topic], model=None, *, field: str = "title",
                   tables: bool = True, per_sample: bool = False, top: tuple[float, float, int] | None = None):
    """``(topic, PreparedQuery)`` of every topic's ``field`` query, in order, as :func:`prepare`
    makes them: the model is read as a document model of ``index`` once, each query is analysed
    once, and with ``tables`` the model's P_TM tables are computed for many queries at a time
    (:func:`batch_tables`; not ``per_sample``, whose tables are each query's own). ``top =
    (mu, lam, depth)``: the queries are only ranked to their top ``depth`` under (mu, lam), and
    their scores below it need not be exact (see :func:`batch_tables`)."""
    model = document_model(model, index)
    texts = [topic_query(topic, field) for topic in topics]
    tables = tables and not per_sample
    queries = None
    if model is not None and tables:  # the groups of batch_tables need every query's terms first
        scorer = Scorer(index.stats)
        queries = [scorer.query(text, index.analyze(text)) for text in texts]
    batch = batch_tables(index, texts, model if tables else None, queries=queries, top=top)
    for i, (p_w, extra) in enumerate(batch):
        prepared = PreparedQuery(index, texts[i], model, per_sample=per_sample, p_w=p_w, extra=extra,
                                 query=queries[i] if queries is not None else None)
        _check_terms(prepared, topics[i].qid, True)
        yield topics[i], prepared


def _check_terms(prepared: PreparedQuery, qid: str, warn: bool) -> None:
    query, text = prepared.query, prepared.text
    if query.unknown:
        log.debug("topic %s: terms not in the index: %s", qid, " ".join(query.unknown))
    if warn and len(query.term_ids) == 0:
        why = "only stopwords" if not query.terms else f"no indexed term ({' '.join(query.terms)})"
        warnings.warn(f"topic {qid}: query {text!r} has {why}; every document scores 0 and "
                      f"DOCNO order decides the ranking", stacklevel=4)


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
                 table_bytes: int | None = None, queries: list[Query] | None = None,
                 top: tuple[float, float, int] | None = None):
    """What :func:`prepare` takes for every query, yielded in order: ``(p_w, (extra, p_extra))``,
    P_TM(w|d) of the query's distinct terms ((n_docs, n_terms); None for a query without
    indexed terms) and the parts the model's kind adds with their table (``(None, None)`` where
    it adds none; ``extras``: :func:`find_extras` of ``texts``, found here when not given;
    ``queries``: the texts analysed, when the caller has them). Without a model, ``(None, None)``
    for every query.

    The model is called once per group of consecutive queries whose distinct terms and parts
    together fit ``table_bytes`` (default :data:`TABLE_BYTES`) of tables (each query gets copies
    of its columns, and a hook's part tables must be the query's own, not views of a group's
    table, so that a group's tables are freed before the next group's): a document model reads
    its per-document rows once for all the group's terms, and, through its adapter's
    ``batch_tables`` hook, for the group's parts too (TCM: terms and collocations in one pass);
    a kind without the hook computes each part's table apart (``p_tm``).

    ``top = (mu, lam, depth)``: the tables are read only to rank each query's top ``depth``
    documents under (mu, lam); a kind that bounds its document model then computes them exact
    only where those documents can be (:func:`retrieval.core.pruning.bounded_table`), lower
    bounds elsewhere."""
    if model is None:
        yield from repeat((None, None), len(texts))
        return
    scorer, n_docs = Scorer(index.stats), index.stats.n_docs
    max_cols = max(1, (TABLE_BYTES if table_bytes is None else table_bytes) // (8 * max(n_docs, 1)))
    if queries is None:
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
            rows = None
            if top is not None and not group and len(union) and hasattr(model, "p_w_d_bounds"):
                rows = bounded_table(index.stats, model, queries[start:stop], union, *top)
            if rows is None and len(union):
                rows = model.p_w_d(union)
            tables = [e.p_tm(False) for e in group]
        # term-major (the kinds' tables are (n_docs, n_terms) views of (n_terms, n_docs)
        # arrays): a query's columns are then rows, copied whole rather than gathered
        rows, tables = (rows.T if rows is not None else None), iter(tables)
        for q, e in zip(ids[start:stop], extras[start:stop]):
            yield (rows[np.searchsorted(union, q)].T if len(q) else None,
                   (e, next(tables)) if e is not None else (None, None))
        rows = tables = None  # the queries have their own copies: free the group's tables first
        start = stop


def sweep_topics(index: Index, topics: list[Topic], settings: list[tuple[float, float]], *,
                 field: str = "title", model=None, depth: int = DEPTH,
                 progress: bool = True) -> dict[tuple[float, float], list[ScoredDoc]]:
    """One run per (mu, lam) setting; the model's tables are computed once per query, for many
    queries at a time (:func:`batch_tables`)."""
    runs = {setting: [] for setting in settings}
    # one setting: the tables are read for its top ``depth`` alone
    top = (settings[0][0], settings[0][1], depth) if len(settings) == 1 else None
    prepared_topics = prepare_topics(index, topics, model, field=field, tables=any(lam < 1 for _, lam in settings),
                                     top=top)
    with collecting_runs():
        for topic, prepared in tqdm(prepared_topics, total=len(topics), desc="ranking topics", unit=" topics",
                                    disable=not progress, mininterval=1):
            for mu, lam in settings:
                runs[(mu, lam)].extend(ranked(index, topic.qid, prepared.scores(mu, lam), depth))
    return runs


def run_topics(index: Index, topics: list[Topic], *, field: str = "title", mu: float = MU,
               lam: float = LAM, model=None, depth: int = DEPTH, progress: bool = True) -> list[ScoredDoc]:
    """Rank every topic's ``field`` query over the whole collection with (topic-smoothed) QL."""
    return sweep_topics(index, topics, [(mu, lam)], field=field, model=model, depth=depth,
                        progress=progress)[(mu, lam)]
