"""Every kind and every feedback mode on every shared collection, with defaults chosen by
nested leave-one-collection-out (:mod:`.protocol`), one command:

    topicir reproduce effectiveness --data ../shared/data --write docs/results/effectiveness.md

Per collection: exact QL; Anserini's BM25 and BM25+RM3 at their defaults (for reference); each
kind's smoothing; RM3 over QL and over the feedback kinds; topic feedback over those kinds, at
the settings it ships (RM3's, with FB_TOPICS topics: it is never on unless asked for). Each
method's settings are chosen among its candidates by the protocol: the figure of a collection
is that of the candidate chosen on the other collections, the default topicir ships is the
candidate chosen on all of them. The base of a kind is exact QL, the base of a feedback mode the
same ranking without feedback.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from models.registry import model_class

from ..core.feedback import FB_TOPICS, Settings
from ..core.tables import Table
from . import grids
from .protocol import ALPHA, Candidate, Collection, Loco, loco, mean, paired_p, significantly_below

COLLECTIONS = ("adi", "med", "cran", "cisi", "cacm", "npl", "scifact", "nfcorpus", "aila2019", "checkthat2020")
KINDS = ("lda", "pam", "tcm", "glda", "tree-lda", "avipam")
REFERENCES = ("BM25", "BM25+RM3")  # Anserini's, at its defaults: measured, not chosen
FEEDBACK_KINDS = ("lda",)  # the kinds feedback defaults are chosen over, with exact QL

# Candidates, each list in order of preference: the papers' setting first (mu 1000 and lam 0.7:
# Wei & Croft; RM3: Anserini's defaults), whatever topicir ships, so that the choice does not
# depend on an earlier choice.
MUS = (1000.0, 500.0, 2000.0, 300.0)
LAMS = (0.7, 0.6, 0.8, 0.5, 0.9)
FB_DOCS_GRID, FB_TERMS_GRID, FB_WEIGHTS, FB_MAX_DFS = (10, 20), (10, 30), (0.5, 0.7, 0.9), (0.1, 0.5)
FB_LENGTHS = (None, 32, 16, 8)


class Method(NamedTuple):
    """A row of the tables: its name, its base's name, and the protocol's outcome."""
    name: str
    base: str
    result: Loco


# Each kind's defaults come first; these other parameters that shape its model are candidates too.
VARIANTS = {"lda": [{"n_topics": 100}]}


def _params_label(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the defaults"


# -- candidates ----------------------------------------------------------------------------------

def mu_candidates(mus=MUS) -> list[Candidate]:
    return [Candidate(f"mu {mu:g}", (lambda q, mu=float(mu): (mu, 1.0)), {"mu": float(mu)}) for mu in mus]


def lam_candidates(mu: float, lams=LAMS) -> list[Candidate]:
    return [Candidate(f"lam {lam:g}", (lambda q, lam=float(lam): (mu, lam)), {"lam": float(lam)}) for lam in lams]


def feedback_candidates() -> list[Candidate]:
    """Every RM3 setting of the grid, Anserini's first; settings that weigh the expansion
    less against long queries (``fb_length``) after those that do not."""
    out = []
    for length in FB_LENGTHS:
        for df in FB_MAX_DFS:
            for d in FB_DOCS_GRID:
                for n in FB_TERMS_GRID:
                    for w in FB_WEIGHTS:
                        s = Settings("rm3", d, n, w, fb_max_df=df, fb_length=length)
                        out.append(Candidate(s.label(), (lambda q, s=s: s), s.as_dict()))
    first = Settings("rm3", 10, 10, 0.5, fb_max_df=0.1, fb_length=None)  # Anserini's RM3
    out.sort(key=lambda c: c.pick(None) != first)  # the papers' setting first, the rest in grid order
    return out


# -- the protocol on every method ----------------------------------------------------------------

def run(data, collections=COLLECTIONS, indexes="indexes", kinds=KINDS, feedback_kinds=FEEDBACK_KINDS,
        progress: bool = True) -> list[Method]:
    """Every method's :class:`Loco` outcome: QL's mu, Anserini's references, the lam of
    ``kinds``' smoothing (one for all kinds), RM3 over QL and each of ``feedback_kinds`` (one
    default for all of them) and topic feedback over those kinds at its shipped settings."""
    from tqdm.auto import tqdm

    mats = [grids.material(Path(data), name, Path(indexes))
            for name in tqdm(collections, desc="indexes", disable=not progress)]
    methods = []
    ql_grids = {m.name: grids.ql_grid(m, MUS) for m in mats}
    ql = loco(mu_candidates(), [Collection(m.name, m.queries, ql_grids[m.name], ql_grids[m.name][(MUS[0], 1.0)])
                                for m in mats])
    methods.append(Method("QL", "QL", ql))
    mu = ql.default.params["mu"]
    ql_ap = {m.name: ql_grids[m.name][(mu, 1.0)] for m in mats}
    for ref in REFERENCES:
        aps = {m.name: grids.baseline_ap(m, ref.lower()) for m in mats}
        fixed = Candidate("Anserini defaults", lambda q: ref)
        methods.append(Method(ref, "QL", loco([fixed], [Collection(m.name, m.queries, {ref: aps[m.name]},
                                                                             ql_ap[m.name]) for m in mats])))
    rm3_cands = feedback_candidates()
    rm3_settings = [c.pick(None) for c in rm3_cands]
    rm3_parts = [Collection(m.name, m.queries, grids.feedback_grid(m, None, {}, rm3_settings, mu=mu, lam=1.0),
                            ql_ap[m.name], "QL") for m in tqdm(mats, desc="QL+RM3", disable=not progress)]
    # one lam for every kind, as topicir ships one: chosen on every (collection, kind)
    sm = {kind: {m.name: grids.smoothing_grid(m, kind, {}, [mu], LAMS) for m in tqdm(mats, desc=kind,
                                                                                   disable=not progress)}
          for kind in kinds}
    smoothing = loco(lam_candidates(mu), [Collection(m.name, m.queries, sm[kind][m.name], ql_ap[m.name], kind.upper())
                                          for kind in kinds for m in mats])
    methods += [Method(kind.upper(), "QL", _only(smoothing, kind.upper())) for kind in kinds]
    lam = smoothing.default.params["lam"]
    bases = {kind: (lam, {m.name: sm[kind][m.name][(mu, lam)] for m in mats}) for kind in kinds}
    for kind in (k for k in kinds if k in VARIANTS):
        cands = [Candidate(_params_label(p), (lambda q, i=i: i), p) for i, p in enumerate([{}, *VARIANTS[kind]])]
        cols = [Collection(m.name, m.queries, {i: grids.smoothing_grid(m, kind, c.params, [mu], [lam])[(mu, lam)]
                                               for i, c in enumerate(cands)}, ql_ap[m.name])
                for m in tqdm(mats, desc=f"{kind} parameters", disable=not progress)]
        methods.append(Method(f"{kind.upper()} parameters", "QL", loco(cands, cols)))
    for kind in (k for k in kinds if k in feedback_kinds):
        lam, base = bases[kind]
        rm3_parts += [Collection(m.name, m.queries, grids.feedback_grid(m, kind, {}, rm3_settings, mu=mu, lam=lam),
                                 base[m.name], kind.upper())
                      for m in tqdm(mats, desc=f"{kind}+RM3", disable=not progress)]
    rm3 = loco(rm3_cands, rm3_parts)
    methods += [Method(f"{part}+RM3", part, _only(rm3, part)) for part in dict.fromkeys(p.part for p in rm3_parts)]
    # topic feedback is never on unless asked for: measured at what it ships, RM3's settings
    shipped = replace(rm3.default.pick(None), method="topics", fb_topics=FB_TOPICS)
    topics = [Candidate(shipped.label(), lambda q: shipped, shipped.as_dict())]
    for kind in (k for k in kinds if k in feedback_kinds):
        lam, base = bases[kind]
        parts = [Collection(m.name, m.queries, grids.feedback_grid(m, kind, {}, [shipped], mu=mu, lam=lam),
                            base[m.name], kind.upper()) for m in tqdm(mats, desc=f"{kind} topics", disable=not progress)]
        methods.append(Method(f"{kind.upper()} topic feedback", kind.upper(), loco(topics, parts)))
    return methods


def _only(res: Loco, part: str) -> Loco:
    """The entries of one part (one model) of a method chosen for several."""
    keep = lambda d: {k: v for k, v in d.items() if k[1] == part}
    return Loco(res.default, keep(res.held_out), keep(res.ap), keep(res.base), keep(res.shipped))


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
        row, deltas = {"method": m.name}, {}
        for key, ap in r.ap.items():
            deltas[key[0]] = mean(ap) - mean(r.base[key])
            mark = ""
            if m.name != "QL" and paired_p(ap, r.base[key]) < ALPHA:
                mark = " ▲" if deltas[key[0]] > 0 else " ▼"
            row[key[0]] = f"{mean(ap):.4f}{mark}"
        per_collection.append(row)
        worst = min(deltas, key=deltas.get)
        pooled, pooled_base = _pooled(r.ap), _pooled(r.base)
        diff = np.array([pooled[k] - pooled_base[k] for k in pooled])
        summary.append({
            "method": m.name, "base": m.base, "mean MAP": float(np.mean([mean(ap) for ap in r.ap.values()])),
            "base mean": float(np.mean([mean(b) for b in r.base.values()])),
            "worst collection (vs base)": f"{worst} {deltas[worst]:+.4f}".replace("-0.0000", "+0.0000"),
            "below base (p<0.05)": sum(significantly_below(r.ap[k], r.base[k]) for k in r.ap),
            "mean MAP, default": float(np.mean([mean(r.shipped[k]) for k in r.ap])),
            "below base, default": sum(significantly_below(r.shipped[k], r.base[k]) for k in r.ap),
            "p vs QL": paired_p(pooled, {k: ql[k] for k in pooled}) if m.name != "QL" else float("nan"),
            "p vs base": paired_p(pooled, pooled_base) if m.base != m.name else float("nan"),
            "topics +/-/=": f"{int((diff > 1e-9).sum())}/{int((diff < -1e-9).sum())}/{int((abs(diff) <= 1e-9).sum())}",
        })
        if m.name not in REFERENCES:
            others = sorted({c.label for c in r.held_out.values()} - {r.default.label})
            chosen.append({"method": m.name, "default": r.default.label,
                           "settings": " ".join(f"{k}={v}" for k, v in r.default.params.items()),
                           "every held-out choice": "the same" if not others else "also " + "; ".join(others)})
    notes = [f"Collections: {', '.join(names)}. Each figure is the MAP of the setting chosen on the other "
             "collections (nested leave-one-collection-out); ▲/▼: above/below the method's base with a paired "
             "t-test p < 0.05 over the collection's judged topics."]
    return [Table("MAP per collection (title queries, depth 1000, judged topics)", per_collection, notes),
            Table("Summary: mean over collections, worst collection, tests over all judged topics", summary,
                  ["mean MAP and below base: the held-out figures of the table above (what the protocol predicts "
                   "for a collection it has not seen); ', default': the same with the default topicir ships, chosen "
                   "on every collection. p: paired t-test over all judged topics of every collection (held out); "
                   "topics +/-/=: topics above, below, equal to the base."]),
            Table("Defaults chosen by the protocol", chosen)]


def reproduce(*, data, indexes="indexes", collections=COLLECTIONS, kinds=KINDS,
              feedback_kinds=FEEDBACK_KINDS) -> list[Table]:
    """``topicir reproduce effectiveness``: :func:`run`'s tables, and the training parameters
    of every kind (its defaults: what ``topicir train KIND`` trains)."""
    from ..core.modelfiles import shaping
    from ..core.quick import quick_train_params

    models = [{"kind": kind, "parameters": " ".join(f"{k}={v}" for k, v in shaping(
        kind, model_class(kind)(**quick_train_params(kind, {})).get_params()).items())} for kind in kinds]
    return tables(run(data, collections, indexes, kinds, feedback_kinds)) + [
        Table("The models: each kind at its defaults", models,
              ["the parameters `topicir train KIND` trains with; the models are kept in each index's models/"])]
