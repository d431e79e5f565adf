"""Every kind and every feedback mode on every shared collection, with defaults chosen by
nested leave-one-collection-out (:mod:`.protocol`), one command:

    topicir reproduce effectiveness --data ../shared/data --write docs/results/effectiveness.md

Per collection: exact QL; Anserini's BM25 and BM25+RM3 at their defaults (for reference); each
kind's smoothing; RM3 over QL and over each kind; topic feedback over each kind. Each method's
settings are chosen among its candidates by the protocol: the figure of a collection is that of
the candidate chosen on the other collections, the default topicir ships is the candidate
chosen on all of them. The base of a kind is exact QL, the base of a feedback mode the same
ranking without feedback.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import numpy as np

from models.registry import model_class

from ..core.feedback import FB_DOCS, FB_MAX_DF, FB_TERMS, FB_TOPICS, ORIGINAL_WEIGHT, Settings
from ..core.scoring import LAM, MU
from ..core.tables import Table
from . import grids
from .protocol import Candidate, Collection, Loco, loco, mean, paired_p, significantly_below

log = logging.getLogger(__name__)

COLLECTIONS = ("adi", "med", "cran", "cisi", "cacm", "npl", "scifact", "nfcorpus", "aila2019", "checkthat2020")
KINDS = ("lda", "pam", "tcm", "glda", "tree-lda", "avipam")

# Candidates, each list in order of preference: the shipped (papers') setting first.
MUS = (MU, 500.0, 2000.0, 300.0)
LAMS = (LAM, 0.6, 0.8, 0.5, 0.9)
FB_DOCS_GRID, FB_TERMS_GRID, FB_WEIGHTS, FB_MAX_DFS = (10, 20), (10, 30), (0.5, 0.7, 0.9), (FB_MAX_DF, 0.5)
FB_TOPICS_GRID = (FB_TOPICS, 1)
FB_LENGTHS = (None, 32, 16, 8)


class Method(NamedTuple):
    """A column of the table: its name, its base's name, and the protocol's outcome."""
    name: str
    base: str
    result: Loco


# -- candidates ----------------------------------------------------------------------------------

def mu_candidates(mus=MUS) -> list[Candidate]:
    return [Candidate(f"mu {mu:g}", (lambda q, mu=float(mu): (mu, 1.0)), {"mu": float(mu)}) for mu in mus]


def lam_candidates(mu: float, lams=LAMS) -> list[Candidate]:
    return [Candidate(f"lam {lam:g}", (lambda q, lam=float(lam): (mu, lam)), {"lam": float(lam)}) for lam in lams]


def feedback_candidates(method: str) -> list[Candidate]:
    """Every feedback setting of the grids, the shipped one first; settings that weigh the
    expansion less against long queries (``fb_length``) after those that do not."""
    out = []
    docs = FB_DOCS_GRID[:1] if method == "topics" else FB_DOCS_GRID
    topics = FB_TOPICS_GRID if method == "topics" else (FB_TOPICS,)
    for length in FB_LENGTHS:
        for df in FB_MAX_DFS:
            for d in docs:
                for n in FB_TERMS_GRID:
                    for w in FB_WEIGHTS:
                        for t in topics:
                            s = Settings(method, d, n, w, fb_topics=t, fb_max_df=df, fb_length=length)
                            out.append(Candidate(s.label(), (lambda q, s=s: s), s.as_dict()))
    first = Settings(method, FB_DOCS, FB_TERMS, ORIGINAL_WEIGHT, fb_topics=FB_TOPICS, fb_max_df=FB_MAX_DF)
    out.sort(key=lambda c: c.pick(None) != first)  # the shipped setting first, the rest in grid order
    return out


# -- the protocol on every method ----------------------------------------------------------------

def run(data, collections=COLLECTIONS, indexes="indexes", kinds=KINDS, progress: bool = True) -> list[Method]:
    from tqdm.auto import tqdm

    mats = [grids.material(Path(data), name, Path(indexes))
            for name in tqdm(collections, desc="indexes", disable=not progress)]
    methods = []
    ql_grids = {m.name: grids.ql_grid(m, MUS) for m in mats}
    ql = loco(mu_candidates(), [Collection(m.name, m.queries, ql_grids[m.name], ql_grids[m.name][(MU, 1.0)])
                                for m in mats])
    methods.append(Method("QL", "QL", ql))
    mu = ql.default.params["mu"]
    ql_ap = {m.name: ql_grids[m.name][(mu, 1.0)] for m in mats}
    for ref in ("bm25", "bm25+rm3"):
        aps = {m.name: grids.baseline_ap(m, ref) for m in mats}
        fixed = Candidate("Anserini defaults", lambda q: ref)
        methods.append(Method(ref.upper(), "QL", loco([fixed], [Collection(m.name, m.queries, {ref: aps[m.name]},
                                                                             ql_ap[m.name]) for m in mats])))
    rm3_parts, topic_parts = [], []
    rm3_cands, topic_cands = feedback_candidates("rm3"), feedback_candidates("topics")
    rm3_settings = [c.pick(None) for c in rm3_cands]
    topic_settings = [c.pick(None) for c in topic_cands]
    for m in tqdm(mats, desc="QL+RM3", disable=not progress):
        g = grids.feedback_grid(m, None, {}, rm3_settings, mu=mu, lam=1.0)
        rm3_parts.append(Collection(m.name, m.queries, g, ql_ap[m.name], "QL"))
    for kind in kinds:
        params = {}
        sm = {m.name: grids.smoothing_grid(m, kind, params, [mu], LAMS)
              for m in tqdm(mats, desc=kind, disable=not progress)}
        res = loco(lam_candidates(mu), [Collection(m.name, m.queries, sm[m.name], ql_ap[m.name]) for m in mats])
        methods.append(Method(kind.upper(), "QL", res))
        lam = res.default.params["lam"]
        base = {m.name: sm[m.name][(mu, lam)] for m in mats}
        for m in tqdm(mats, desc=f"{kind} feedback", disable=not progress):
            g = grids.feedback_grid(m, kind, params, rm3_settings, mu=mu, lam=lam)
            rm3_parts.append(Collection(m.name, m.queries, g, base[m.name], kind.upper()))
            g = grids.feedback_grid(m, kind, params, topic_settings, mu=mu, lam=lam)
            topic_parts.append(Collection(m.name, m.queries, g, base[m.name], kind.upper()))
    for name, cands, parts in (("RM3", rm3_cands, rm3_parts), ("topic feedback", topic_cands, topic_parts)):
        res = loco(cands, parts)
        for part in dict.fromkeys(p.part for p in parts):
            methods.append(Method(f"{part}+{name}" if name == "RM3" else f"{part} {name}", part,
                                  _only(res, part)))
    return methods


def _only(res: Loco, part: str) -> Loco:
    """The entries of one part (one model) of a method chosen for several."""
    keep = lambda d: {k: v for k, v in d.items() if k[1] == part}
    return Loco(res.default, keep(res.held_out), keep(res.ap), keep(res.base))


# -- tables --------------------------------------------------------------------------------------

def _pooled(d: dict) -> dict:
    return {(name, qid): v for (name, _), ap in d.items() for qid, v in ap.items()}


def tables(methods: list[Method]) -> list[Table]:
    by_name = {m.name: m for m in methods}
    names = list(dict.fromkeys(name for m in methods for name, _ in m.result.ap))
    ql = _pooled(by_name["QL"].result.ap)
    per_collection, summary, chosen = [], [], []
    for m in methods:
        r = m.result
        row = {"method": m.name}
        for (name, _), ap in r.ap.items():
            base = r.base[name, _]
            mark = ""
            if m.name != "QL" and paired_p(ap, base) < 0.05:
                mark = " ▲" if mean(ap) > mean(base) else " ▼"
            row[name] = f"{mean(ap):.4f}{mark}"
        per_collection.append(row)
        maps = {name: mean(ap) for (name, _), ap in r.ap.items()}
        deltas = {name: maps[name] - mean(r.base[key]) for key in r.ap for name in [key[0]]}
        worst = min(deltas, key=deltas.get)
        pooled, pooled_base = _pooled(r.ap), _pooled(r.base)
        diff = np.array([pooled[k] - pooled_base[k] for k in pooled])
        summary.append({
            "method": m.name, "base": m.base, "mean MAP": float(np.mean(list(maps.values()))),
            "base mean": float(np.mean([mean(b) for b in r.base.values()])),
            "worst collection (vs base)": f"{worst} {deltas[worst]:+.4f}",
            "below base (p<0.05)": sum(significantly_below(r.ap[k], r.base[k]) for k in r.ap),
            "p vs QL": paired_p(pooled, {k: ql[k] for k in pooled}) if m.name != "QL" else float("nan"),
            "p vs base": paired_p(pooled, pooled_base) if m.base != m.name else float("nan"),
            "topics +/-/=": f"{int((diff > 1e-9).sum())}/{int((diff < -1e-9).sum())}/{int((abs(diff) <= 1e-9).sum())}",
        })
        if len({c.label for c in r.held_out.values()}) > 1 or m.name in ("QL",) or r.default.params:
            others = sorted({c.label for c in r.held_out.values()} - {r.default.label})
            chosen.append({"method": m.name, "default": r.default.label,
                           "every held-out choice": "the same" if not others else "also " + "; ".join(others)})
    notes = [f"Collections: {', '.join(names)}. Each figure is the MAP of the setting chosen on the other "
             "collections (nested leave-one-collection-out); ▲/▼: above/below the method's base with a paired "
             "t-test p < 0.05 over the collection's judged topics."]
    return [Table("MAP per collection (title queries, depth 1000, judged topics)", per_collection, notes),
            Table("Summary: mean over collections, worst collection, tests over all judged topics", summary,
                  ["p: paired t-test over all judged topics of every collection; topics +/-/=: topics above, below, "
                   "equal to the base."]),
            Table("Defaults chosen by the protocol", chosen)]


def reproduce(*, data, indexes="indexes", collections=COLLECTIONS, kinds=KINDS) -> list[Table]:
    """``topicir reproduce effectiveness``: :func:`run`'s tables."""
    return tables(run(data, collections, indexes, kinds))
