"""Per-topic AP of every setting a default is chosen from, on one shared collection.

A grid is ``{setting: {qid: AP}}`` over the collection's judged topics: exact QL under several
Dirichlet priors, a topic model's smoothing under several (mu, lam), a feedback mode under many
:class:`~retrieval.core.feedback.Settings`. Grids take minutes to hours (the models behind them
are trained on first use), so each is kept as JSON beside the collection's index
(``<index>/grids/``), named by a hash of everything that made it; a rerun reads it back.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import NamedTuple

from models.common.atomic import atomic_open
from models.common.checkpoint import read_header
from models.registry import model_class

from ..core.baselines import run_baseline
from ..core.evaluate import judged_topics, per_topic
from ..core.feedback import Settings, sweep_feedback
from ..core.index import Index
from ..core.modelfiles import default_model_path, load_model, shaping, train_model
from ..core.quick import quick_train_params
from ..core.ranking import sweep_topics
from ..core.sources import load_qrels, load_topics
from ..core.trec import Qrel, Topic
from .protocol import QueryInfo
from .regressions import ensure_index

log = logging.getLogger(__name__)

GRIDS_DIR = "grids"


class Material(NamedTuple):
    """A shared collection as the protocol reads it."""
    name: str
    index: Index
    topics: list[Topic]      # the judged ones
    qrels: list[Qrel]
    queries: list[QueryInfo]


def material(data: Path, name: str, indexes: Path) -> Material:
    index = ensure_index(Path(data), name, Path(indexes))
    qrels = load_qrels(Path(data) / name / "qrels.txt")
    judged = judged_topics(qrels)
    topics = [t for t in load_topics(Path(data) / name / "topics.trec") if t.qid in judged]
    queries = [QueryInfo(t.qid, len(index.analyze(t.title))) for t in topics]
    return Material(name, index, topics, qrels, queries)


# Topics ranked at a time: a grid holds the runs of every setting until they are evaluated.
CHUNK = 50


def _ap(m: Material, run) -> dict[str, float]:
    return per_topic(run, m.qrels, ["AP"])["AP"]


def _by_chunks(m: Material, rank) -> dict:
    """``{setting: {qid: AP}}`` of ``rank(topics) -> {setting: run}``, CHUNK topics at a time,
    so that memory holds the runs of one chunk, not of the whole grid."""
    out: dict = {}
    for start in range(0, len(m.topics), CHUNK):
        chunk = m.topics[start:start + CHUNK]
        judged = {t.qid for t in chunk}
        qrels = [q for q in m.qrels if q.qid in judged]
        for key, run in rank(chunk).items():
            out.setdefault(key, {}).update(per_topic(run, qrels, ["AP"])["AP"])
    return out


def _cached(m: Material, what: dict, compute, keys: list, label=str) -> dict:
    """The grid ``what`` describes, for the settings ``keys``: what ``<index>/grids/`` holds of
    it, the rest computed (``compute(missing, stored) -> {setting: {qid: AP}}``, ``stored``:
    the settings already there) and added to the file. ``label`` names a setting in the file."""
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]
    path = m.index.path / GRIDS_DIR / f"{what['method']}-{digest}.json"
    stored = json.loads(path.read_text(encoding="utf-8"))["ap"] if path.exists() else {}
    have = {k: stored[label(k)] for k in keys if label(k) in stored}
    missing = [k for k in keys if k not in have]
    if missing:
        have.update(compute(missing, have))
        stored.update({label(k): have[k] for k in missing})
        path.parent.mkdir(exist_ok=True)
        with atomic_open(path, "w", encoding="utf-8") as out:
            json.dump({"what": what, "ap": stored}, out)
    return {k: have[k] for k in keys}


def ql_grid(m: Material, mus) -> dict:
    """Exact QL under each Dirichlet prior: ``{(mu, 1.0): {qid: AP}}``."""
    keys = [(float(mu), 1.0) for mu in mus]

    def compute(missing, _):
        return _by_chunks(m, lambda topics: sweep_topics(m.index, topics, missing, progress=False))
    return _cached(m, {"method": "ql", "fingerprint": m.index.fingerprint}, compute, keys)


def baseline_ap(m: Material, method: str) -> dict[str, float]:
    """Anserini's ``bm25`` or ``bm25+rm3`` at its defaults."""
    def compute(*_):
        return {method: _ap(m, run_baseline(m.index, m.topics, method, progress=False))}
    return _cached(m, {"method": method.replace("+", "-"), "fingerprint": m.index.fingerprint},
                   compute, [method])[method]


def model(m: Material, kind: str, params: dict, progress: bool = False):
    """``kind``'s model of the collection with ``params`` (its defaults for the rest), trained
    on first use and kept in ``<index>/models/``."""
    params = quick_train_params(kind, params)  # a quick model under its own name
    path = default_model_path(m.index, kind, params)
    want = shaping(kind, model_class(kind)(**params).get_params())
    if path.exists() and shaping(kind, read_header(path).get("params") or {}) == want:
        return load_model(path, m.index)
    log.info("%s: training %s %s", m.name, kind, params or "(defaults)")
    return train_model(m.index, kind, path, overwrite=True, progress=progress, **params)[0]


def _model_what(m: Material, kind: str, params: dict) -> dict:
    return {"fingerprint": m.index.fingerprint, "kind": kind,
            "params": shaping(kind, model_class(kind)(**quick_train_params(kind, params)).get_params())}


def smoothing_grid(m: Material, kind: str, params: dict, mus, lams) -> dict:
    """Topic smoothing with ``kind``'s model under each (mu, lam): ``{(mu, lam): {qid: AP}}``."""
    keys = [(float(mu), float(lam)) for mu in mus for lam in lams]

    def compute(missing, _):
        mdl = model(m, kind, params)
        return _by_chunks(m, lambda topics: sweep_topics(m.index, topics, missing, model=mdl, progress=False))
    return _cached(m, {"method": f"smoothing-{kind}", **_model_what(m, kind, params)}, compute, keys)


def feedback_grid(m: Material, kind: str | None, params: dict, settings: list[Settings], *,
                  mu: float, lam: float) -> dict:
    """Feedback under each of ``settings`` over exact QL (``kind`` None) or ``kind``'s
    smoothing at (mu, lam): ``{Settings: {qid: AP}}``. A setting with ``fb_length`` ranks as
    the same setting without it every query of at most fb_length tokens: only the longer ones
    are ranked again."""
    def compute(missing, stored):
        mdl = model(m, kind, params) if kind else None

        def ranker(group):
            def rank(topics):
                runs = sweep_feedback(m.index, topics, group, model=mdl, mu=mu, lam=lam if kind else 1.0,
                                      progress=False)
                return {s: run for s, (run, _) in runs.items()}
            return rank
        plain = [s for s in dict.fromkeys(replace(s, fb_length=None) for s in missing) if s not in stored]
        grid = {**stored, **(_by_chunks(m, ranker(plain)) if plain else {})}
        length = {q.qid: q.length for q in m.queries}
        for cut in sorted({s.fb_length for s in missing} - {None}):
            group = [s for s in missing if s.fb_length == cut]
            long = m._replace(topics=[t for t in m.topics if length[t.qid] > cut])
            again = _by_chunks(long, ranker(group)) if long.topics else {s: {} for s in group}
            for s in group:
                grid[s] = {**grid[replace(s, fb_length=None)], **again[s]}
        return {s: grid[s] for s in missing}
    what = {"method": f"feedback-{kind or 'ql'}", "mu": mu, "lam": lam,
            **(_model_what(m, kind, params) if kind else {"fingerprint": m.index.fingerprint})}
    return _cached(m, what, compute, list(settings), label=lambda s: json.dumps(asdict(s), sort_keys=True))
