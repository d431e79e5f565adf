"""Run files and what lies beside them: the name a run goes by, the settings that made it
(``<run>.json``: TREC run files have no room for them) and its queries' feedback expansions
(``<run>.expansions.jsonl``).

A :class:`Batch` is where a topic set's runs go; :meth:`Batch.write` writes one run of it, named
by the one rule of :meth:`Batch.path`, with its settings and expansions. ``topicir run``
(:func:`run_batch`), ``topicir compare`` and the demo write their runs through it.
"""
from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Iterator, NamedTuple

from models._version import __version__
from models.common.atomic import atomic_open, check_writable

from .baselines import BASELINES, MU_FREE, run_baseline
from .feedback import Settings, run_feedback
from .index import Index
from .modelfiles import load_model
from .ranking import DEPTH, sweep_topics
from .scoring import LAM, MU
from .trec import ScoredDoc, Topic, write_run

log = logging.getLogger(__name__)

RUNS_DIR = Path("topics_runs")


# -- names ---------------------------------------------------------------------------------------


def run_name(topics_name: str, model_name: str, **params) -> str:
    """``run.<topics>.<model>.<params>.txt`` as Anserini's regression pages name runs."""
    def clean(s) -> str:
        return re.sub(r"[^\w.+-]+", "-", str(s)).strip("-")
    settings = "_".join(f"{k}{clean(v)}" for k, v in params.items())
    return ".".join(p for p in ("run", clean(topics_name), clean(model_name), settings, "txt") if p)


def run_tag(model_name: str, **params) -> str:
    """The tag column of a run :func:`run_name` names: ``topicir-<model>.<params>``, so that the
    runs of a sweep (one model, several lam) keep apart once merged into one file."""
    return "topicir-" + run_name("", model_name, **params)[len("run."):-len(".txt")]


def topics_key(source) -> str:
    """The name a topic source goes by in run names, whatever its spelling: ``irds:cranfield``,
    ``cranfield`` and ``topics/cranfield.trec`` are all ``cranfield``."""
    text = str(source)
    if text.startswith("irds:"):
        return text.removeprefix("irds:").replace("/", "-")
    return Path(text).name.split(".")[0]


# -- the files beside a run ----------------------------------------------------------------------


def settings_path(run_path) -> Path:
    """The settings file beside a run: ``<run>.json``."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".json")


def read_settings(run_path) -> dict | None:
    """The settings :func:`save_run` recorded beside a run, or None (none, or unreadable)."""
    try:
        return json.loads(settings_path(run_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def changed_settings(old: dict, new: dict) -> list[str]:
    """The settings that differ between two runs' records and change the ranking: not the
    version, the date or the tag (it names the settings), not the spelling of the topic source,
    not the index's path when its fingerprint is the same, not mu for a method that has none (BM25)."""
    ignore = {"written", "topicir", "tag"}
    if old.get("fingerprint") and old.get("fingerprint") == new.get("fingerprint"):
        ignore.add("index")
    if new.get("method") in MU_FREE and old.get("method") == new.get("method"):
        ignore.add("mu")
    norm = lambda k, v: topics_key(v) if k == "topics" and v is not None else v
    return sorted(k for k in (set(old) | set(new)) - ignore if norm(k, old.get(k)) != norm(k, new.get(k)))


def expansions_path(run_path) -> Path:
    """The expansions file beside a run: ``<run>.expansions.jsonl``."""
    run_path = Path(run_path)
    return run_path.with_name(run_path.name + ".expansions.jsonl")


def write_expansions(path, expansions) -> Path:
    """Every query's :meth:`~retrieval.core.feedback.Expansion.as_dict`, one JSON object a line,
    written atomically."""
    with atomic_open(path, "w", encoding="utf-8") as out:
        for e in expansions:
            out.write(json.dumps(e.as_dict()) + "\n")
    return Path(path)


def read_expansions(path) -> list[dict]:
    """The records :func:`write_expansions` wrote; a line that is not a JSON object is an error
    naming the file and line."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or "qid" not in record or "terms" not in record:
                raise ValueError(f"{path}:{n}: expected an expansion record (JSON with qid and terms), "
                                 f"got {line.strip()[:60]!r}")
            out.append(record)
    return out


def save_run(run: list[ScoredDoc], path, tag: str, depth: int = DEPTH, params: dict | None = None,
             expansions=None) -> Path:
    """Write a TREC run and, with ``params``, the settings that made it to ``<run>.json``.
    Replacing a run made with other settings is logged. ``expansions`` (pseudo-relevance
    feedback's :class:`~retrieval.core.feedback.Expansion` of every query) go to
    ``<run>.expansions.jsonl``; without them an earlier run's file there is removed, so that it
    never describes another run."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if params is not None:
        settings = {"topicir": __version__, "tag": tag, "depth": depth, **params}
        old = read_settings(path) if path.exists() else None
        changed = [] if old is None else changed_settings(old, settings)
        if changed:
            log.warning("%s: replacing a run made with other settings (%s)", path,
                        ", ".join(f"{k}: {old.get(k)!r} -> {settings.get(k)!r}" for k in changed))
    write_run(path, run, tag=tag, depth=depth)
    if expansions is not None:
        write_expansions(expansions_path(path), expansions)
    else:
        expansions_path(path).unlink(missing_ok=True)
    if params is not None:
        with atomic_open(settings_path(path), "w", encoding="utf-8") as out:
            json.dump(settings | {"written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, out, indent=1)
    return path


# -- a batch of runs -----------------------------------------------------------------------------


class Method(NamedTuple):
    """How one run of a batch ranked: ``name`` is ``ql``, a Lucene baseline or the model's name
    (its file's stem); ``mu`` None for a baseline without a Dirichlet prior, ``lam`` None
    without a topic model."""
    name: str
    mu: float | None = MU
    lam: float | None = None
    model: str | None = None      # the model file
    feedback: Settings | None = None

    @property
    def lucene(self) -> bool:
        return self.model is None and self.name in BASELINES


class Batch(NamedTuple):
    """Where the runs of ``index`` on a topic set go: ``out_dir``, each named
    ``run.<index>.<topics>.<field>.<method>.<params>.txt`` (:meth:`path`), or the one file ``out``.
    ``topics`` is the topic source as the settings record it; ``topics_name`` its name in run
    names (default :func:`topics_key` of it); ``tag`` the runs' tag in place of each one's own."""
    index: Index
    topics: str
    field: str = "title"
    depth: int = DEPTH
    topics_name: str | None = None
    out_dir: Path | str = RUNS_DIR
    out: Path | str | None = None
    tag: str | None = None

    def params(self, method: Method) -> dict:
        """The settings in ``method``'s run name, every one that changes its ranking; a Lucene
        baseline's name holds only its mu."""
        params = {"mu": f"{method.mu:g}"} if method.mu is not None else {}
        if method.lucene:
            return params
        params |= {"lam": f"{method.lam:g}"} if method.lam is not None else {}
        params |= method.feedback.params() if method.feedback is not None else {}
        return params | ({"depth": self.depth} if self.depth != DEPTH else {})

    def path(self, method: Method) -> Path:
        """The file of ``method``'s run."""
        if self.out:
            return Path(self.out)
        params = self.params(method)
        if self.tag and not method.lucene:
            params["tag"] = self.tag
        topics = self.topics_name or topics_key(self.topics)
        return Path(self.out_dir) / run_name(f"{self.index.name}.{topics}.{self.field}", method.name, **params)

    def write(self, method: Method, run: list[ScoredDoc], expansions=None) -> Path:
        """Write ``run``, ranked by ``method``, with the settings that made it and ``expansions``
        (``{qid: Expansion}`` of feedback) beside it (:func:`save_run`)."""
        settings = {"method": method.name, "index": str(Path(self.index.path).resolve()),
                    "fingerprint": self.index.fingerprint, "topics": str(self.topics), "field": self.field,
                    "mu": method.mu, "lam": method.lam,
                    "model": str(Path(method.model).resolve()) if method.model else None}
        if method.feedback is not None:
            settings["feedback"] = method.feedback.as_dict()
        return save_run(run, self.path(method), tag=self.tag or run_tag(method.name, **self.params(method)),
                        depth=self.depth, params=settings,
                        expansions=list(expansions.values()) if expansions is not None else None)


def rank_settings(index: Index, topics: list[Topic], settings: list[tuple[float, float]], *, model=None,
                  feedback: Settings | None = None, field: str = "title", depth: int = DEPTH,
                  progress: bool = True) -> dict[tuple[float, float], tuple[list[ScoredDoc], dict | None]]:
    """A run per (mu, lam) setting, with pseudo-relevance ``feedback`` or without, and its
    ``{qid: Expansion}`` (None without feedback)."""
    if feedback is None:
        runs = sweep_topics(index, topics, settings, field=field, model=model, depth=depth, progress=progress)
        return {s: (run, None) for s, run in runs.items()}
    return {(mu, lam): run_feedback(index, topics, feedback, model=model, mu=mu, lam=lam, field=field,
                                    depth=depth, progress=progress) for mu, lam in settings}


def run_batch(batch: Batch, topics: list[Topic], *, mu=(MU,), lam=None, model=None, baseline: str | None = None,
              feedback: Settings | None = None) -> Iterator[Path]:
    """``topicir run``: rank ``topics`` with a Lucene ``baseline`` (at the first ``mu``), or with
    exact QL or the ``model`` file mixed in with weights ``lam`` (default :data:`LAM`), under
    every (mu, lam) setting, with or without ``feedback``; write each run, yielding its path."""
    check_writable(Path(batch.out).parent if batch.out else Path(batch.out_dir))
    if baseline:
        run = run_baseline(batch.index, topics, baseline, field=batch.field, depth=batch.depth, mu=mu[0])
        yield batch.write(Method(baseline, mu=None if baseline in MU_FREE else mu[0]), run)
        return
    loaded, name, lams = None, "ql", [1.0]
    if model:
        loaded, name, lams = load_model(model, batch.index), Path(model).stem, lam or [LAM]
    settings = [(m, x) for m in mu for x in lams]
    if batch.out and len(settings) > 1:
        raise ValueError("--out names one file; a sweep writes one run per setting into --out-dir")
    runs = rank_settings(batch.index, topics, settings, model=loaded, feedback=feedback, field=batch.field,
                         depth=batch.depth)
    for (m, x), (run, expansions) in runs.items():
        method = Method(name, mu=m, lam=x if model else None, model=model, feedback=feedback)
        yield batch.write(method, run, expansions)
