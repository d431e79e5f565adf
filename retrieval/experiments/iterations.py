"""MAP per Gibbs sample iteration, as Wei & Croft / Li & McCallum tabulate it.

Avg1: MAP of each chain's sample alone, averaged over chains. Avg2: MAP when the chains'
document models at that iteration are averaged first, then used for ranking.
"""
from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from ..core.evaluate import aggregate, judged_topics
from ..core.index import Index
from ..core.ranking import DEPTH, collecting_runs, prepare_topics, ranked
from ..core.scoring import LAM, MU
from ..core.trec import Qrel, Topic


def iteration_table(index: Index, model, topics: list[Topic], qrels: list[Qrel], *, field: str = "title",
                    mu: float = MU, lam: float = LAM, depth: int = DEPTH) -> list[dict]:
    """Rows ``{"iteration", "avg1", "avg2", "chain MAPs"}``, one per kept sample iteration."""
    judged = judged_topics(qrels)
    topics = [t for t in topics if t.qid in judged]
    n_chains, n_samples = model.n_chains, len(model.sample_iter_)
    runs_single = [[[] for _ in range(n_samples)] for _ in range(n_chains)]
    runs_avg = [[] for _ in range(n_samples)]
    with collecting_runs():
        for topic, prepared in tqdm(prepare_topics(index, topics, model, field=field, per_sample=True),
                                    total=len(topics), desc="ranking per sample", unit=" topics", mininterval=1):
            for s in range(n_samples):
                for c in range(n_chains):
                    scores = prepared.scores(mu, lam, select=lambda a, c=c, s=s: a[c, s])
                    runs_single[c][s].extend(ranked(index, topic.qid, scores, depth))
                scores = prepared.scores(mu, lam, select=lambda a, s=s: a[:, s].mean(axis=0))
                runs_avg[s].extend(ranked(index, topic.qid, scores, depth))
    rows = []
    for s, it in enumerate(model.sample_iter_):
        chain_maps = [aggregate(runs_single[c][s], qrels, ["AP"])["AP"] for c in range(n_chains)]
        rows.append({"iteration": int(it), "avg1": float(np.mean(chain_maps)),
                     "avg2": aggregate(runs_avg[s], qrels, ["AP"])["AP"],
                     "chains": " ".join(f"{m:.4f}" for m in chain_maps)})
    return rows
