"""Batch runs: a topic set against an index (and optionally a topic model), as ScoredDocs."""
from __future__ import annotations

import logging
import re
import warnings
from pathlib import Path

from tqdm.auto import tqdm

from .index import Index
from .scoring import LAM, MU, OMEGA, Scorer, top_k
from ..adapters.tcm_sequences import query_collocations
from .trec import ScoredDoc, Topic, topic_query, write_run

log = logging.getLogger(__name__)

DEPTH = 1000
RUNS_DIR = Path("topics_runs")


def rank(index: Index, scorer: Scorer, qid: str, text: str, depth: int = DEPTH) -> list[ScoredDoc]:
    """The top ``depth`` documents for one query, best first.

    A query with no term in the index still gets a well-formed ranking (every document ties
    at score 0 and DOCNO order decides) and a warning, so a run never silently lacks a topic.
    """
    query = scorer.query(text, index.analyze(text))
    if query.unknown:
        log.debug("topic %s: terms not in the index: %s", qid, " ".join(query.unknown))
    if len(query.term_ids) == 0:
        why = "only stopwords" if not query.terms else f"no indexed term ({' '.join(query.terms)})"
        warnings.warn(f"topic {qid}: query {text!r} has {why}; every document scores 0 and "
                      f"DOCNO order decides the ranking", stacklevel=2)
    model = scorer.model
    if getattr(model, "segments_queries", False) and scorer.lam < 1.0 and len(query.term_ids):
        # collocation model (TCM): its segmentation of the query adds a term per collocation
        col = query_collocations(index, model, text)
        scores = scorer.score_collocations(query, model.p_w_d(query.term_ids), col.postings, col.p_c,
                                           model.p_c_d(col.term_ids, col.seg_ptr))
    else:
        scores = scorer.score(query)
    docnos = index.stats.docnos
    return [ScoredDoc(qid, docnos[d], float(scores[d])) for d in top_k(scores, depth)]


def run_topics(index: Index, topics: list[Topic], *, field: str = "title", mu: float = MU,
               lam: float = LAM, model=None, depth: int = DEPTH, progress: bool = True) -> list[ScoredDoc]:
    """Rank every topic's ``field`` query over the whole collection with (topic-smoothed) QL."""
    scorer = Scorer(index.stats, mu=mu, lam=lam, model=model)
    run = []
    for topic in tqdm(topics, desc="ranking topics", unit=" topics", disable=not progress, mininterval=1):
        run.extend(rank(index, scorer, topic.qid, topic_query(topic, field), depth))
    return run


class _Fixed:
    """A document model whose P_TM(w|d) for the current query is already computed."""

    def __init__(self, p):
        self.p = p

    def p_w_d(self, term_ids):
        return self.p


def sweep_topics(index: Index, topics: list[Topic], settings: list[tuple[float, float]], *, field: str = "title",
                 model=None, depth: int = DEPTH, progress: bool = True,
                 omega: float = OMEGA) -> dict[tuple[float, float], list[ScoredDoc]]:
    """One run per (mu, lam) setting; the topic model's P_TM(w|d) is computed once per query.
    ``omega``: weight of the collocation term of a collocation model (TCM), see
    :meth:`Scorer.score_collocations`."""
    runs = {setting: [] for setting in settings}
    docnos = index.stats.docnos
    for topic in tqdm(topics, desc="ranking topics", unit=" topics", disable=not progress, mininterval=1):
        text = topic_query(topic, field)
        query = Scorer(index.stats).query(text, index.analyze(text))
        if len(query.term_ids) == 0:
            for setting in settings:  # warns once per topic and setting, as a single run would
                runs[setting].extend(rank(index, Scorer(index.stats, *setting), topic.qid, text, depth))
            continue
        fixed = _Fixed(model.p_w_d(query.term_ids)) if model is not None else None
        col = query_collocations(index, model, text) if getattr(model, "segments_queries", False) else None
        p_col = model.p_c_d(col.term_ids, col.seg_ptr) if col is not None else None
        for mu, lam in settings:
            scorer = Scorer(index.stats, mu=mu, lam=lam, model=fixed)
            if col is not None:
                scores = scorer.score_collocations(query, fixed.p, col.postings, col.p_c, p_col, omega)
            else:
                scores = scorer.score(query)
            runs[(mu, lam)].extend(ScoredDoc(topic.qid, docnos[d], float(scores[d])) for d in top_k(scores, depth))
    return runs


def run_name(topics_name: str, model_name: str, **params) -> str:
    """``run.<topics>.<model>.<params>.txt`` as Anserini's regression pages name runs."""
    def clean(s) -> str:
        return re.sub(r"[^\w.+-]+", "-", str(s)).strip("-")
    settings = "_".join(f"{k}{clean(v)}" for k, v in params.items())
    return ".".join(p for p in ("run", clean(topics_name), clean(model_name), settings, "txt") if p)


def save_run(run: list[ScoredDoc], path, tag: str, depth: int = DEPTH) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_run(path, run, tag=tag, depth=depth)
    return path
