"""A growing index on the shared collections, one table:

    topicir reproduce growing --data ../shared/data

Per collection: every fifth document (in file order) is held back, the other 80% are indexed
and a model is trained on them; the held-back 20% are then added to that index (``topicir index
--add``) and the title topics are ranked with the 80% model, the added documents folded in.
This is compared with the same model settings (and seed) trained on the whole collection, and
with exact QL (MAP over the judged topics, depth 1000). The fold-in time is the time to fold in
the added documents once, for the whole run.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np

from models.common.atomic import atomic_open

from ..core.evaluate import aggregate, judged_topics
from ..core.extension import document_model
from ..core.index import Index, add_documents, build_index
from ..core.ranking import run_topics
from ..core.scoring import LAM, MU
from ..core.sources import iter_docs, load_qrels, load_topics
from ..core.tables import Table, fixed
from .regressions import COLLECTIONS, ensure_index
from .smoothing import _model

log = logging.getLogger(__name__)

TRAIN = dict(n_chains=2, n_iter=60, burn_in=30, sample_every=10, seed=0)
K = 100
HELD_EVERY = 5  # every HELD_EVERY-th document is added after training: 20%
TARGET = 0.01


def _split(data: Path, name: str, out: Path) -> tuple[Path, Path]:
    """The collection's documents as two JSON-lines files: the first 80% and the held-back 20%."""
    first, rest = out / "first.jsonl", out / "added.jsonl"
    if first.is_file() and rest.is_file():
        return first, rest
    out.mkdir(parents=True, exist_ok=True)
    docs = list(iter_docs([data / name / "docs"]))
    for path, part in ((first, [d for i, d in enumerate(docs) if i % HELD_EVERY != HELD_EVERY - 1]),
                       (rest, [d for i, d in enumerate(docs) if i % HELD_EVERY == HELD_EVERY - 1])):
        with atomic_open(path, "w", encoding="utf-8") as f:
            for d in part:
                f.write(json.dumps({"id": d.docno, "contents": d.contents, "title": d.title}) + "\n")
    return first, rest


def _indexes(data: Path, name: str, indexes: Path) -> tuple[Index, Index]:
    """The index of the first 80% and that index grown by the other 20% (built on first use)."""
    work = indexes / "growing" / name
    first, rest = _split(data, name, work)
    try:
        part = Index(work / "first")
    except FileNotFoundError:
        part = build_index([first], work / "first", force=(work / "first").exists())
    try:
        grown = Index(work / "grown")
        if [p["fingerprint"] for p in grown.parents] != [part.fingerprint]:
            raise FileNotFoundError
    except FileNotFoundError:
        build_index([first], work / "grown", force=(work / "grown").exists())
        grown = add_documents([rest], work / "grown")
    return part, grown


def collection_growing(data: Path, name: str, indexes: Path, *, kind: str = "lda", k: int = K,
                       train: dict = TRAIN, mu: float = MU, lam: float = LAM) -> dict:
    """One row: MAP of QL, of the model trained on every document, and of the model trained on
    80% ranking the grown index with fold-in; the fold-in's time."""
    full = ensure_index(data, name, indexes)
    part, grown = _indexes(data, name, indexes)
    qrels = load_qrels(data / name / "qrels.txt")
    judged = judged_topics(qrels)
    topics = [t for t in load_topics(data / name / "topics.trec") if t.qid in judged]
    mean_ap = lambda run: aggregate(run, qrels, ["AP"])["AP"]
    ql = mean_ap(run_topics(full, topics, mu=mu, lam=1.0, progress=False))
    whole = mean_ap(run_topics(full, topics, mu=mu, lam=lam, model=_model(full, kind, k, train), progress=False))
    extended = document_model(_model(part, kind, k, train), grown)
    start = time.perf_counter()
    extended.folded  # noqa: B018  (fold in now, to time it apart from ranking)
    fold_s = time.perf_counter() - start
    folded = mean_ap(run_topics(grown, topics, mu=mu, lam=lam, model=extended, progress=False))
    log.info("%s: QL %.4f, %s (all) %.4f, %s (80%%) + fold-in %.4f; fold-in of %d documents %.1f s",
             name, ql, kind, whole, kind, folded, extended.n_added, fold_s)
    return {"collection": name, "docs": full.stats.n_docs, "added": extended.n_added, "QL": ql,
            f"{kind.upper()} all docs": whole, f"{kind.upper()} 80% + fold-in": folded,
            "difference": folded - whole, "fold-in s": fixed(fold_s, 1)}


def growing_table(data, collections=COLLECTIONS, indexes=Path("indexes"), *, kind: str = "lda", k: int = K,
                  train: dict = TRAIN, mu: float = MU, lam: float = LAM, seeds=(0,)) -> Table:
    """MAP per collection of a model trained on 80% of the documents ranking the whole collection
    (the other 20% added to its index and folded in), against the same model trained on all.

    With several ``seeds`` both models are trained once per seed and every MAP is the mean over
    the seeds: on a collection of a few thousand documents one seed's difference moves by as much
    as the target (the ``sd`` and ``per seed`` columns), so one seed cannot tell a fold-in loss
    from the seed's noise. ``sd`` is the standard deviation over the seeds of the difference."""
    from tqdm.auto import tqdm

    seeds = [int(s) for s in seeds]
    rows = []
    for name in tqdm(collections, desc="collections", unit=" collections"):
        per_seed = [collection_growing(Path(data), name, Path(indexes), kind=kind, k=k,
                                       train=dict(train, seed=seed), mu=mu, lam=lam) for seed in seeds]
        row = dict(per_seed[0])
        for key, value in row.items():
            if isinstance(value, float):
                row[key] = float(np.mean([r[key] for r in per_seed]))
        row["fold-in s"] = fixed(float(np.mean([float(r["fold-in s"]) for r in per_seed])), 1)
        if len(seeds) > 1:
            diffs = [r["difference"] for r in per_seed]
            row["sd"] = float(np.std(diffs, ddof=1))
            row["per seed"] = " ".join(f"{d:+.4f}" for d in diffs)
        rows.append(row)
    within = sum(abs(r["difference"]) <= TARGET for r in rows)
    not_below = sum(r["difference"] >= -TARGET for r in rows)
    settings = ", ".join(f"{key}={value}" for key, value in train.items() if key != "seed")
    seed_note = (f"seed {seeds[0]}" if len(seeds) == 1 else
                 f"seeds {' '.join(map(str, seeds))}: every MAP is the mean over the seeds; sd and per seed: "
                 f"the difference's standard deviation over the seeds and its value for each")
    return Table(f"A growing index: {kind.upper()} trained on 80% of the documents, the other 20% added "
                 f"and folded in", rows, notes=[
                     f"Title topics, MAP over the judged topics, depth 1000, mu={mu:g}, lam={lam:g}; {kind} K={k}, "
                     f"{settings}, the same settings and seed for both models; {seed_note}.",
                     f"Added: every {HELD_EVERY}th document of the collection (in file order), added with "
                     f"`topicir index --add` to the index of the others and folded in under every kept sample "
                     f"(fold-in seed 0) once per run; fold-in s is that time.",
                     f"difference = 80% + fold-in minus all docs: at most {TARGET} MAP below on {not_below} of "
                     f"{len(rows)} collections, within {TARGET} either way on {within}."])
