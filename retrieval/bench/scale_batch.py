"""How ``topicir bench scale`` times a batch of queries in its child processes (see
:mod:`retrieval.bench.scale`): the whole batch, with a model the parts of it that grow with the
documents, and the mixture's scoring at the collection's own size; and the process's peak
memory."""
from __future__ import annotations

import math
import resource
import time

from ..core.scoring import LAM, MU, Scorer


def maxrss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _topics(queries: list[str]):
    from ..core.trec import Topic

    return [Topic(str(i + 1), q, "", "") for i, q in enumerate(queries)]


# Times the batch is ranked; the fastest is reported. The fraction's parts take tens of
# milliseconds, and the cost per document is fitted through two of them: a few repeats leave
# that fit to the machine's noise.
BATCH_REPEATS = 15


def time_batch(index, queries, model) -> dict:
    """Seconds of ranking the queries (depth 1000) as ``topicir run`` does, the model's
    per-document constants included (the fastest of :data:`BATCH_REPEATS`). With a model, the
    same batch without it is timed in turn with it (``ql_batch_s``), and the parts of the
    model's batch that grow with the documents are timed apart (:func:`_document_parts`)."""
    from ..core.ranking import run_topics

    def batch(m, texts=queries) -> float:
        start = time.perf_counter()
        run_topics(index, _topics(texts), model=m, lam=1.0 if m is None else LAM, progress=False)
        return time.perf_counter() - start

    # Two queries first, timed apart: the JVM, numba's kernels (loaded once per process) and
    # the model's per-document constants (computed once per model) are ready before the batch.
    first_s = batch(model, queries[:2])
    # the fastest: one slow repeat is the machine, not the ranker; with a model, QL alternates
    # with it so that both see the same machine
    times = [(batch(model), batch(None) if model is not None else 0.0) for _ in range(BATCH_REPEATS)]
    result = dict(batch_s=min(t for t, _ in times), first_s=first_s)
    if model is not None:
        result.update(ql_batch_s=min(t for _, t in times), **_document_parts(index, queries, model))
    peak = maxrss_gib()  # the batch's, before the one-valued tables of the scoring's timing
    if model is None:
        result["scoring_s"] = _mixture_scoring(index, queries)
    return dict(result, peak_gib=peak)


class _OneValued:
    """Stands in for a topic model in :func:`mixture_scorings` (the scorer mixes P_TM in only
    when it has a model): P_TM(w|d) = 1e-4 for every term and document."""

    kind = "one-valued"

    def __init__(self, n_docs: int):
        self.n_docs = n_docs

    def p_w_d(self, term_ids):
        import numpy as np

        # a view of a term-major table, as every kind's is (the scorer reads its rows)
        return np.full((len(term_ids), self.n_docs), 1e-4).T


def mixture_scorings(index, queries) -> list:
    """(scorer, query, table) of every query with indexed terms: the scorer at lam
    :data:`~retrieval.core.scoring.LAM` with the :class:`_OneValued` model's tables, computed
    beforehand so that timing the scoring times the scoring alone."""
    model = _OneValued(index.stats.n_docs)
    scorer = Scorer(index.stats, lam=LAM, model=model)
    out = []
    for text in queries:
        query = scorer.query(text, index.analyze(text))
        if len(query.term_ids):
            out.append((scorer, query, model.p_w_d(query.term_ids)))
    return out


def _mixture_scoring(index, queries) -> float:
    """Seconds of scoring every document of the index under the mixture for every query
    (:func:`mixture_scorings`; the fastest of :data:`BATCH_REPEATS`): what a model's batch
    spends on the mixture whatever the model, timed at the collection's own size."""
    scorings = mixture_scorings(index, queries)
    best = math.inf
    for _ in range(BATCH_REPEATS):
        start = time.perf_counter()
        for scorer, query, table in scorings:
            scorer.score(query, table)
        best = min(best, time.perf_counter() - start)
    return best


def _document_parts(index, queries, model) -> dict:
    """Seconds of the parts of a model's batch that grow with the documents, each timed apart
    as the batch computes them (the fastest of :data:`BATCH_REPEATS`): the P_TM tables of the
    query terms and of the parts a kind adds to queries (TCM's collocations), one model call
    per group of queries whose tables fit their memory (:func:`retrieval.core.ranking.batch_tables`,
    for the batch's top 1000 at lam LAM, as it asks: exact only where those can be, for a kind
    that bounds its document model);
    finding and scoring those parts (TCM: segmenting the query, the collocations' exact
    occurrences, their term of every document's score), for the queries the kind adds a part
    to (``extra_queries`` counts them); and every document's score of the query terms under
    the mixture. What else the model adds to the batch is per query."""
    from ..core.extension import document_model
    from ..core.ranking import DEPTH, batch_tables, find_extras, prepare

    model = document_model(model, index)
    extras = find_extras(index, queries, model)
    with_parts = [text for text, extra in zip(queries, extras) if extra is not None]
    best = dict(tables_s=math.inf, extras_s=math.inf, scoring_s=math.inf)
    for _ in range(BATCH_REPEATS):
        start = time.perf_counter()
        tables = list(batch_tables(index, queries, model, extras, top=(MU, LAM, DEPTH)))  # as run_topics asks
        times = dict(tables_s=time.perf_counter() - start, extras_s=0.0)
        if with_parts:  # a query the kind adds nothing to costs only its analysis, per query (the rest)
            start = time.perf_counter()
            find_extras(index, with_parts, model)
            times["extras_s"] = time.perf_counter() - start
        prepared = [prepare(index, text, model, p_w=p_w, extra=extra, warn=False)
                    for text, (p_w, extra) in zip(queries, tables)]
        scorer = Scorer(index.stats, lam=LAM, model=model)
        start = time.perf_counter()
        for p in prepared:  # the query terms' part: the same work whatever the model
            scorer.score(p.query, p.p_w)
        times["scoring_s"] = time.perf_counter() - start
        if with_parts:  # scoring the parts a kind adds (TCM's collocations)
            start = time.perf_counter()
            for p in prepared:
                if p.p_extra is not None:
                    scorer.collocation_part(p.extra.postings, p.extra.p_c, p.p_extra)
            times["extras_s"] += time.perf_counter() - start
        best = {k: min(v, times[k]) for k, v in best.items()}
    return dict(best, extra_queries=len(with_parts))
