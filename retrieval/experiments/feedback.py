"""Pseudo-relevance feedback with and without topics on the shared collections, one table:

    topicir reproduce feedback --data ../shared/data

Per collection (title queries, judged topics, depth 1000, MAP): exact QL; QL+RM3 in our scorer;
Anserini's BM25+RM3 at its defaults; topic smoothing (LBDM); RM3 over the topic-smoothed
ranking and document models; topic-level feedback. The feedback settings of each method are
chosen by leave-one-collection-out over a small grid: a collection's setting is the one with
the best mean MAP over the *other* collections, so no collection's own qrels choose it.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..core.baselines import run_baseline
from ..core.evaluate import judged_topics, per_topic
from ..core.feedback import Settings, sweep_feedback
from ..core.ranking import run_topics
from ..core.scoring import LAM, MU
from ..core.sources import load_qrels, load_topics
from ..core.tables import Table
from .regressions import COLLECTIONS, ensure_index
from .smoothing import _model

log = logging.getLogger(__name__)

# the default model, as the smoothing table trains it (and shares its files)
TRAIN = dict(n_chains=3, n_iter=100, burn_in=50, sample_every=10, seed=0)
K = 800
RM3_GRID = tuple(Settings("rm3", d, n, w) for d in (5, 10, 20) for n in (10, 30) for w in (0.3, 0.5, 0.7))
TOPIC_GRID = tuple(Settings("topics", d, n, w, fb_topics=t)
                   for d in (5, 10) for t in (1, 3) for n in (10, 30) for w in (0.5, 0.7))
METHODS = ("QL+RM3", "LDA+RM3", "LDA topic feedback")  # the columns whose settings LOCO chooses


def collection_feedback(data: Path, name: str, indexes: Path, *, kind: str = "lda", k: int = K,
                        train: dict = TRAIN, mu: float = MU, lam: float = LAM,
                        rm3_grid=RM3_GRID, topic_grid=TOPIC_GRID, progress: bool = False) -> dict:
    """Per-topic AP of every method on one shared collection: ``{"QL": {qid: AP}, ...}`` for the
    fixed methods and ``{method: {Settings: {qid: AP}}}`` for the feedback grids."""
    index = ensure_index(data, name, indexes)
    qrels = load_qrels(data / name / "qrels.txt")
    judged = judged_topics(qrels)
    topics = [t for t in load_topics(data / name / "topics.trec") if t.qid in judged]
    ap = lambda run: per_topic(run, qrels, ["AP"])["AP"]
    out = {"QL": ap(run_topics(index, topics, mu=mu, lam=1.0, progress=False)),
           "BM25+RM3": ap(run_baseline(index, topics, "bm25+rm3", progress=False))}
    model = _model(index, kind, k, train)
    out[kind.upper()] = ap(run_topics(index, topics, mu=mu, lam=lam, model=model, progress=False))
    grids = {"QL+RM3": (None, rm3_grid), "LDA+RM3": (model, rm3_grid), "LDA topic feedback": (model, topic_grid)}
    for method, (m, grid) in grids.items():
        runs = sweep_feedback(index, topics, list(grid), model=m, mu=mu, lam=lam, progress=progress)
        out[method] = {s: ap(run) for s, (run, _) in runs.items()}
        best = max(out[method], key=lambda s: np.mean(list(out[method][s].values())))
        log.info("%s %s: best %s MAP %.4f", name, method, best.label(), np.mean(list(out[method][best].values())))
    return out


def loco_choice(results: dict, name: str, method: str) -> Settings:
    """The setting of ``method`` with the best mean MAP over the collections other than
    ``name`` (its own when it is the only one); ties go to the earlier grid setting."""
    others = [r[method] for n, r in results.items() if n != name] or [results[name][method]]
    grid = list(results[name][method])
    return max(grid, key=lambda s: (np.mean([np.mean(list(o[s].values())) for o in others]), -grid.index(s)))


def _ttest_p(x: dict, y: dict) -> float:
    from scipy.stats import ttest_rel

    qids = sorted(x)
    a, b = np.array([x[q] for q in qids]), np.array([y[q] for q in qids])
    return float(ttest_rel(a, b).pvalue) if len(qids) > 1 and np.any(a != b) else float("nan")


def feedback_table(data, collections=COLLECTIONS, indexes=Path("indexes"), *, kind: str = "lda",
                   k: int = K, train: dict = TRAIN, mu: float = MU, lam: float = LAM,
                   rm3_grid=RM3_GRID, topic_grid=TOPIC_GRID, progress: bool = True) -> Table:
    """MAP per collection of QL, QL+RM3, BM25+RM3, topic smoothing, RM3 over topic smoothing
    and topic feedback, feedback settings by leave-one-collection-out; with the paired t-test
    p of topic feedback against topic smoothing per collection and over all topics."""
    from tqdm.auto import tqdm

    data, indexes = Path(data), Path(indexes)
    results = {name: collection_feedback(data, name, indexes, kind=kind, k=k, train=train, mu=mu, lam=lam,
                                         rm3_grid=rm3_grid, topic_grid=topic_grid)
               for name in tqdm(collections, desc="feedback", unit=" collections", disable=not progress)}
    smooth = kind.upper()
    label = {"LDA+RM3": f"{smooth}+RM3", "LDA topic feedback": f"{smooth} topic feedback"}
    rows, chosen_lines, all_rm, all_tf, all_sm = [], [], {}, {}, {}
    for name, r in results.items():
        chosen = {m: loco_choice(results, name, m) for m in METHODS}
        ap = {"QL": r["QL"], "QL+RM3": r["QL+RM3"][chosen["QL+RM3"]], "BM25+RM3": r["BM25+RM3"],
              smooth: r[smooth], **{label[m]: r[m][chosen[m]] for m in METHODS[1:]}}
        rm, tf = ap[label["LDA+RM3"]], ap[label["LDA topic feedback"]]
        row = {"collection": name, **{key: float(np.mean(list(v.values()))) for key, v in ap.items()},
               f"p (RM3 vs {smooth})": _ttest_p(rm, r[smooth]), f"p (TF vs {smooth})": _ttest_p(tf, r[smooth])}
        rows.append(row)
        all_rm.update({(name, q): v for q, v in rm.items()})
        all_tf.update({(name, q): v for q, v in tf.items()})
        all_sm.update({(name, q): v for q, v in r[smooth].items()})
        chosen_lines.append(f"{name}: " + "; ".join(f"{label.get(m, m)} {s.label()}" for m, s in chosen.items()))
    mean = {"collection": "mean"}
    for key in rows[0]:
        if key != "collection":
            mean[key] = float(np.mean([row[key] for row in rows]))
    mean[f"p (RM3 vs {smooth})"] = _ttest_p(all_rm, all_sm)
    mean[f"p (TF vs {smooth})"] = _ttest_p(all_tf, all_sm)
    notes = [f"{smooth} K={k}, {train.get('n_chains')} chains, {train.get('n_iter')} sweeps; mu={mu:g}, "
             f"lam={lam:g}; BM25+RM3: Anserini defaults (k1 0.9, b 0.4; 10 docs, 10 terms, weight 0.5).",
             "Feedback settings by leave-one-collection-out (docs, terms, topics, original-query weight):",
             *chosen_lines,
             f"p: paired t-test over the judged topics of {smooth}+RM3 (RM3) and of topic feedback (TF) "
             f"vs {smooth} smoothing (mean row: over all collections' topics)."]
    title = ("MAP with pseudo-relevance feedback, with and without topics (title queries, depth 1000, "
             "LOCO feedback settings)")
    return Table(title, rows + [mean], notes)
