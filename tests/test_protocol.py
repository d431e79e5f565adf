"""The protocol that chooses defaults: nested leave-one-collection-out with a safety constraint."""
import numpy as np
import pytest

from retrieval.experiments.protocol import (Candidate, Collection, QueryInfo, choose, loco, mean, paired_p,
                                            significantly_below)


def fixed(label):
    return Candidate(label, lambda q, label=label: label, {"setting": label})


def collection(name, grid, base=None, n=30, part=""):
    """``grid``: {setting: per-topic APs (a list, one per topic)}; base: the first setting's."""
    queries = [QueryInfo(f"{name}-{i}", 3) for i in range(n)]
    ap = {s: {q.qid: float(v[i]) for i, q in enumerate(queries)} for s, v in grid.items()}
    return Collection(name, queries, ap, ap[next(iter(grid))] if base is None else
                      {q.qid: float(base[i]) for i, q in enumerate(queries)}, part)


rng = np.random.default_rng(0)


def noisy(level, n=30, spread=0.05):
    return np.clip(level + rng.normal(0, spread, n), 0, 1)


def test_a_candidate_significantly_below_its_base_anywhere_is_not_chosen():
    base = noisy(0.4)
    # "b" is much better on two collections but significantly worse on the third
    cols = [collection("x", {"a": base + 0.01, "b": base + 0.2}, base),
            collection("y", {"a": base + 0.01, "b": base + 0.2}, base),
            collection("z", {"a": base + 0.01, "b": base - 0.1}, base)]
    assert significantly_below(cols[2].grid["b"], cols[2].base)
    assert choose([fixed("b"), fixed("a")], cols).label == "a"


def test_the_first_candidate_stays_unless_the_best_beats_it_across_collections():
    levels = [0.2, 0.3, 0.4, 0.5, 0.6]
    tiny = [collection(f"c{i}", {"a": noisy(v), "b": noisy(v) + 0.002}) for i, v in enumerate(levels)]
    assert choose([fixed("a"), fixed("b")], tiny).label == "a"  # within chance: the shipped one stays
    clear = [collection(f"c{i}", {"a": np.full(30, v), "b": np.full(30, v) + 0.05 + 0.001 * i})
             for i, v in enumerate(levels)]
    assert choose([fixed("a"), fixed("b")], clear).label == "b"


def test_each_collection_is_scored_with_the_choice_of_the_others():
    base = noisy(0.3)
    # "b" is clearly better on p..s and significantly worse on t: on all five it is unsafe, so
    # the default is "a"; t itself is scored with what p..s choose, "b"
    cols = [collection(name, {"a": base, "b": base + 0.05 + 0.001 * k}, base) for k, name in enumerate("pqrs")]
    cols.append(collection("t", {"a": base, "b": base - 0.1}, base))
    res = loco([fixed("a"), fixed("b")], cols)
    assert res.default.label == "a" and not res.stable
    assert res.held_out["t", ""].label == "b" and res.ap["t", ""] == cols[-1].grid["b"]
    assert {res.held_out[n, ""].label for n in "pqrs"} == {"a"}
    assert res.base["t", ""] == cols[-1].base


def test_parts_of_a_collection_are_left_out_together():
    same = np.full(30, 0.3)
    cols = [collection(name, {"a": same + 0.02, "b": same}, part=part)
            for name in ("p", "q") for part in ("QL", "LDA")]
    cols += [collection("r", {"a": same, "b": same + 0.3}, part=part) for part in ("QL", "LDA")]
    res = loco([fixed("b"), fixed("a")], cols)
    assert set(res.held_out) == {(n, p) for n in "pqr" for p in ("QL", "LDA")}
    assert res.held_out["r", "QL"].label == res.held_out["r", "LDA"].label == "a"


def test_a_rule_reads_the_query_length():
    short = Candidate("by length", lambda q: "a" if q.length <= 5 else "b")
    queries = [QueryInfo("1", 3), QueryInfo("2", 40)]
    col = Collection("x", queries, {"a": {"1": 0.5, "2": 0.1}, "b": {"1": 0.2, "2": 0.9}}, {"1": 0.5, "2": 0.1})
    res = loco([short], [col])
    assert res.ap["x", ""] == {"1": 0.5, "2": 0.9}


def test_paired_p_and_mean():
    x = {str(i): v for i, v in enumerate([0.1, 0.2, 0.3, 0.4])}
    assert mean(x) == pytest.approx(0.25)
    assert np.isnan(paired_p(x, x))
    assert paired_p(x, {k: v + 0.1 + 0.01 * int(k) for k, v in x.items()}) < 0.01
