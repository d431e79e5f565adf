"""Topic smoothing against QL on the shared collections, one command:

    topicir reproduce smoothing --data ../shared/data

For every collection: exact QL; LDA smoothing (LBDM) with the papers' defaults (K = 800,
3 chains, lam = 0.7, mu = 1000, 100 sweeps, samples every 10 after 50); and LBDM with K and lam
chosen by leave-one-collection-out: the setting with the best mean MAP over the *other*
collections, so no collection's own qrels choose its setting.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from models.common.checkpoint import read_header

from ..core.ranking import sweep_topics
from ..core.evaluate import aggregate, judged_topics
from models.registry import model_class

from ..core.modelfiles import default_model_path, load_model, shaping, train_model
from .regressions import COLLECTIONS, ensure_index
from ..core.scoring import LAM, MU
from ..core.sources import load_qrels, load_topics

log = logging.getLogger(__name__)

KS = (100, 200, 400, 800)
LAMS = (0.5, 0.6, 0.7, 0.8, 0.9)
PAPER_K, PAPER_LAM = 800, LAM
TRAIN = dict(n_chains=3, n_iter=100, burn_in=50, sample_every=10, seed=0)


# The model every other kind is compared with.
REFERENCE_KIND = "lda"


def model_params(kind: str, k: int, train: dict) -> dict:
    """The settings of ``kind``'s model of size ``k``: the schedule's that the kind has (a
    variational kind has no chains or sweeps), its defaults otherwise."""
    cls = model_class(kind)
    return dict({key: v for key, v in train.items() if key in cls._param_names()}, **cls.size_params(k))


def settings_note(kind: str, k: int, train: dict) -> str:
    """``kind``'s settings at size ``k`` (what shapes the model), as a table's note."""
    params = shaping(kind, model_class(kind)(**model_params(kind, k, train)).get_params())
    return f"{kind.upper()} at K={k}: " + ", ".join(f"{key}={v}" for key, v in params.items())


def _model(index, kind: str, k: int, train: dict):
    params = model_params(kind, k, train)
    path = default_model_path(index, kind, params)
    # the file name holds only K, chains, sweeps and seed: a file trained under other defaults
    # (e.g. TCM before alpha = 50 / K) is retrained, not reused
    # (where training runs, e.g. the executor, is not written to model files and not compared)
    want = shaping(kind, model_class(kind)(**params).get_params())
    if path.exists() and shaping(kind, read_header(path).get("params") or {}) == want:
        return load_model(path, index)
    return train_model(index, kind, path, overwrite=True, **params)[0]


def collection_grid(data: Path, name: str, indexes: Path, ks=KS, lams=LAMS, mu: float = MU,
                    kind: str = "lda", train: dict = TRAIN) -> tuple[float, dict]:
    """QL MAP and ``{(K, lam): MAP}`` of topic smoothing on one shared collection."""
    index = ensure_index(data, name, indexes)
    qrels = load_qrels(data / name / "qrels.txt")
    judged = judged_topics(qrels)
    topics = [t for t in load_topics(data / name / "topics.trec") if t.qid in judged]
    ql = aggregate(sweep_topics(index, topics, [(mu, 1.0)], progress=False)[(mu, 1.0)], qrels, ["AP"])["AP"]
    grid = {}
    for k in ks:
        model = _model(index, kind, k, train)
        runs = sweep_topics(index, topics, [(mu, lam) for lam in lams], model=model, progress=False)
        for (_, lam), run in runs.items():
            grid[(k, lam)] = aggregate(run, qrels, ["AP"])["AP"]
        log.info("%s K=%d: %s", name, k, " ".join(f"lam{lam:g}={grid[(k, lam)]:.4f}" for lam in lams))
    return ql, grid


def smoothing_table(data: Path, collections=COLLECTIONS, indexes: Path = Path("indexes"), ks=KS, lams=LAMS,
                    mu: float = MU, kind: str = "lda", train: dict = TRAIN) -> list[dict]:
    data, indexes = Path(data), Path(indexes)
    results = {name: collection_grid(data, name, indexes, ks, lams, mu, kind, train) for name in collections}
    paper = (PAPER_K if PAPER_K in ks else max(ks), PAPER_LAM if PAPER_LAM in lams else lams[len(lams) // 2])
    rows = []
    for name, (ql, grid) in results.items():
        others = [results[o][1] for o in collections if o != name] or [grid]
        chosen = max(grid, key=lambda s: (np.mean([g[s] for g in others]), -s[0], s[1]))
        rows.append({"collection": name, "QL": ql, f"{kind.upper()} K{paper[0]} lam{paper[1]:g}": grid[paper],
                     f"{kind.upper()} LOCO": grid[chosen], "LOCO setting": f"K{chosen[0]} lam{chosen[1]:g}",
                     "best (oracle)": max(grid.values())})
    mean = {"collection": "mean"}
    for key in rows[0]:
        if key != "collection":
            mean[key] = float(np.mean([r[key] for r in rows])) if isinstance(rows[0][key], float) else ""
    return rows + [mean]


def comparison_table(data, collections, indexes, kinds, ks=(800,), lams=LAMS, mu: float = MU,
                     train: dict = TRAIN) -> list[dict]:
    """MAP of QL and of each kind's smoothing on the shared collections, side by side.

    One :func:`smoothing_table` per kind (models trained on first use, then loaded from
    ``<index>/models/``), merged by collection: QL, each kind at the paper's setting (K = 800,
    lam = 0.7) and with K and lam chosen by leave-one-collection-out."""
    merged = {}
    for kind in kinds:
        for row in smoothing_table(Path(data), collections, Path(indexes), ks=ks, lams=lams, mu=mu,
                                   kind=kind, train=train):
            out = merged.setdefault(row["collection"], {"collection": row["collection"], "QL": row["QL"]})
            for key, value in row.items():
                if key not in ("collection", "QL"):
                    out[key if key.startswith(kind.upper()) else f"{kind.upper()} {key}"] = value
    return list(merged.values())
