"""How topicir chooses a default: nested leave-one-collection-out (LOCO) over the shared
collections, with a safety constraint.

A *candidate* is a setting, or a rule that gives a setting per query from what a user has
without judgments (the query's length); its per-topic AP on a collection is read from the
per-topic AP of the settings it picks (a *grid*: ``{setting: {qid: AP}}``). The choice among
candidates, on a set of collections:

1. a candidate is *safe* on a collection when it is not significantly below its base there
   (its mean AP is not lower with a paired t-test p < 0.05 over the collection's judged topics);
   the base is exact QL for a topic model and the same model without feedback for a feedback
   mode;
2. among the candidates safe on every collection of the set (if there are none: those unsafe
   on the fewest), the first in the given order (the papers' setting, then simpler rules before
   more elaborate ones) is kept, unless the one with the best mean MAP over the collections
   (each collection counts once, whatever its number of topics) beats it on the collections'
   MAPs with a paired t-test p < 0.05. A grid of settings always holds one that fits the
   visible collections a little better by chance; a change of default needs evidence across
   collections.

The figure a collection reports is that of the candidate chosen on the *other* collections
(the inner choice never sees the collection it is scored on); the default topicir ships is the
choice on all of them, and the report says whether every held-out choice agreed with it.
"""
from __future__ import annotations

import warnings
from typing import Callable, Hashable, NamedTuple

import numpy as np

ALPHA = 0.05


class QueryInfo(NamedTuple):
    """What a rule may read of a query: its id and its length in analysed tokens."""
    qid: str
    length: int


class Candidate(NamedTuple):
    """A default to choose: ``pick(query)`` is the grid setting it ranks ``query`` with."""
    label: str
    pick: Callable[[QueryInfo], Hashable]
    params: dict = {}


class Collection(NamedTuple):
    """One collection's material: its queries, the grid of per-topic AP of every setting the
    candidates pick, and the base's per-topic AP. A method chosen for several models at once
    (a feedback mode over every kind) has one entry per model, ``part`` naming it; the
    entries of one collection are left out together."""
    name: str
    queries: list[QueryInfo]
    grid: dict
    base: dict
    part: str = ""


def per_topic(c: Candidate, col: Collection) -> dict[str, float]:
    return {q.qid: col.grid[c.pick(q)][q.qid] for q in col.queries}


def mean(ap: dict) -> float:
    return float(np.mean(list(ap.values()))) if ap else float("nan")


def paired_p(x: dict, y: dict) -> float:
    """Two-sided paired t-test p over the topics of ``x`` (nan where the two never differ)."""
    from scipy.stats import ttest_rel

    qids = sorted(x)
    a, b = np.array([x[q] for q in qids]), np.array([y[q] for q in qids])
    if len(qids) < 2 or not np.any(a != b):
        return float("nan")
    with warnings.catch_warnings():  # differences all alike: scipy warns, and p is 0 as it should be
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(ttest_rel(a, b).pvalue)


def significantly_below(x: dict, base: dict, alpha: float = ALPHA) -> bool:
    return mean(x) < mean(base) and paired_p(x, base) < alpha


def choose(candidates: list[Candidate], collections: list[Collection]) -> Candidate:
    """The choice on ``collections`` (see the module's docstring)."""
    def unsafe(c):
        return sum(significantly_below(per_topic(c, col), col.base) for col in collections)

    def maps(c):
        return {(col.name, col.part): mean(per_topic(c, col)) for col in collections}

    counts = [unsafe(c) for c in candidates]
    pool = [c for c, n in zip(candidates, counts) if n == min(counts)]
    first = pool[0]
    best = max(pool, key=lambda c: (round(mean(maps(c)), 10), -candidates.index(c)))
    if best is not first and mean(maps(best)) > mean(maps(first)) and paired_p(maps(best), maps(first)) < ALPHA:
        return best
    return first


class Loco(NamedTuple):
    """The outcome of the protocol for one method: per entry ``(collection, part)``."""
    default: Candidate                 # chosen on every collection
    held_out: dict[tuple, Candidate]   # chosen on the other collections
    ap: dict[tuple, dict[str, float]]  # per-topic AP of the held-out choice
    base: dict[tuple, dict[str, float]]
    shipped: dict[tuple, dict[str, float]]  # per-topic AP of the default (chosen on all of them)

    @property
    def stable(self) -> bool:
        """Whether every held-out choice is the default."""
        return all(c.label == self.default.label for c in self.held_out.values())


def loco(candidates: list[Candidate], collections: list[Collection]) -> Loco:
    """Nested leave-one-collection-out: each collection scored with the candidate chosen on the
    others, and the default chosen on all."""
    held_out, ap, base = {}, {}, {}
    for name in dict.fromkeys(col.name for col in collections):
        others = [o for o in collections if o.name != name] or list(collections)
        c = choose(candidates, others)
        for col in (o for o in collections if o.name == name):
            held_out[col.name, col.part] = c
            ap[col.name, col.part] = per_topic(c, col)
            base[col.name, col.part] = col.base
    default = choose(candidates, collections)
    return Loco(default, held_out, ap, base, {(col.name, col.part): per_topic(default, col) for col in collections})
