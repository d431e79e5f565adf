"""retrieval/core/evaluate.py gives ir_measures nested dicts: the values must be the library's
own for its namedtuples, ties, graded judgments, unjudged documents and missing topics included."""
import random
import warnings

import ir_measures
import pytest

from retrieval.core.evaluate import aggregate, per_topic
from retrieval.core.trec import Qrel, ScoredDoc

MEASURES = ("AP", "P@10", "nDCG@10", "R@1000", "RR")


def _data(seed):
    rng = random.Random(seed)
    qrels = [Qrel(str(q), f"D{d}", rng.choice([0, 0, 1, 2]))
             for q in range(1, 9) for d in rng.sample(range(60), 15)]
    qrels += [Qrel("9", "D1", 0)]  # judged, but nothing relevant: not averaged
    run = [ScoredDoc(str(q), f"D{d}", float(rng.randint(0, 5)))  # many ties
           for q in range(1, 8) if q != 4 for d in rng.sample(range(60), 40)]
    run += [ScoredDoc("99", "D1", 1.0)]  # a topic without judgments
    return qrels, run


@pytest.mark.parametrize("seed", range(3))
def test_per_topic_equals_ir_measures_on_its_own_rows(seed):
    qrels, run = _data(seed)
    judged = {q.qid for q in qrels if q.rel > 0}
    with pytest.warns(UserWarning, match="no results in the run"):  # topics 4 and 8
        got = per_topic(run, qrels, MEASURES)
    want = {m: {q: 0.0 for q in judged} for m in MEASURES}
    irm_qrels = [ir_measures.Qrel(*q) for q in qrels if q.qid in judged]
    irm_run = [ir_measures.ScoredDoc(*r) for r in run if r.qid in judged]
    for metric in ir_measures.iter_calc([ir_measures.parse_measure(m) for m in MEASURES], irm_qrels, irm_run):
        want[str(metric.measure)][metric.query_id] = metric.value
    assert got == want
    assert set(got["AP"]) == judged and got["AP"]["4"] == 0.0 and "99" not in got["AP"]
    assert 0 < sum(got["AP"].values()) < len(judged)


def test_aggregate_is_the_mean_over_judged_topics():
    qrels, run = _data(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        per = per_topic(run, qrels, ["AP"])["AP"]
        assert aggregate(run, qrels, ["AP"])["AP"] == pytest.approx(sum(per.values()) / len(per), abs=0)
