"""Evaluation: a thin layer over ir_measures.

Averages are over the topics that have at least one relevant document in the qrels; a topic
of those missing from a run counts as 0 (as trec_eval -c does), with a warning.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence

import ir_measures

from .trec import Qrel, ScoredDoc

DEFAULT_MEASURES = ("AP", "P@10", "nDCG@10", "R@1000")
ALIASES = {"MAP": "AP", "ndcg@10": "nDCG@10", "p@10": "P@10", "recall@1000": "R@1000"}


def parse_measure(name: str) -> list:
    """The ir_measures measures ``name`` stands for: an ir_measures name (``AP``, ``nDCG@10``,
    ``MAP``), or trec_eval's (``map``, ``ndcg_cut_10``, ``P_10``; ``ndcg_cut`` is its every cutoff)."""
    try:
        return [ir_measures.parse_measure(ALIASES.get(name, name))]
    except (ValueError, NameError, SyntaxError) as exc:
        try:
            return list(ir_measures.parse_trec_measure(name))
        except (ValueError, NameError, SyntaxError, KeyError):
            raise ValueError(f"unknown measure {name!r}; try AP (MAP), P@10, nDCG@10, R@1000 or trec_eval's "
                             f"names such as map, P_10, ndcg_cut_10 ({exc})") from None


def is_measure(name: str) -> bool:
    try:
        return bool(parse_measure(name))
    except ValueError:
        return False


def parse_measures(names: Iterable[str]) -> list:
    """The measures of ``names`` (see :func:`parse_measure`), each once, in order."""
    return list(dict.fromkeys(m for name in names for m in parse_measure(name)))


def judged_topics(qrels: Sequence[Qrel]) -> set[str]:
    """Topics with at least one relevant (rel > 0) document."""
    return {q.qid for q in qrels if q.rel > 0}


def per_topic(run: Sequence[ScoredDoc], qrels: Sequence[Qrel], measures=DEFAULT_MEASURES) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` over the judged topics; judged topics absent from the run get 0."""
    measures = parse_measures(measures)
    topics = judged_topics(qrels)
    run_topics = {r.qid for r in run}
    missing = sorted(topics - run_topics)
    if missing:
        warnings.warn(f"{len(missing)} judged topics have no results in the run and count as 0: "
                      f"{', '.join(missing[:10])}", stacklevel=2)
    out = {str(m): {qid: 0.0 for qid in topics} for m in measures}
    for metric in ir_measures.iter_calc(measures, _nested(qrels, topics), _nested(run, topics)):
        out[str(metric.measure)][metric.query_id] = float(metric.value)
    return out


def _nested(rows, topics) -> dict[str, dict]:
    """``{qid: {docno: value}}`` of (qid, docno, value) rows of the given topics: the form
    pytrec_eval reads, given straight to ir_measures (a list of its namedtuples is converted to
    this anyway, at several times the cost). A repeated (qid, docno) keeps its last value, as
    that conversion does."""
    out: dict[str, dict] = {}
    for qid, docno, value in rows:
        if qid in topics:
            docs = out.get(qid)
            if docs is None:
                docs = out[qid] = {}
            docs[docno] = value
    return out


def aggregate(run: Sequence[ScoredDoc], qrels: Sequence[Qrel], measures=DEFAULT_MEASURES) -> dict[str, float]:
    """Mean of each measure over the judged topics."""
    return {m: (sum(v.values()) / len(v) if v else float("nan")) for m, v in per_topic(run, qrels, measures).items()}


def check_topics(qrels: Sequence[Qrel], topic_ids: Iterable[str], qrels_name: str) -> None:
    """Warn when qrels judge topics the topic set does not have (often a wrong file)."""
    unknown = sorted(judged_topics(qrels) - set(topic_ids), key=lambda q: (len(q), q))
    if unknown:
        warnings.warn(f"{qrels_name}: {len(unknown)} judged topics are not in the topics: "
                      f"{', '.join(unknown[:10])}{' ...' if len(unknown) > 10 else ''}", stacklevel=2)
