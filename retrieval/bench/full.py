"""Benchmark: the user's path end to end on the synthetic AP collection, every step measured.

    topicir bench full --kinds lda --write docs/results/bench-full-lda.md
    topicir bench full --kinds pam --stop-after 90    # stop after the sweep in progress at 90 min

The collection of :mod:`retrieval.datasets.ap_synth` (``--docs`` documents, gzip'd TREC SGML)
and its 100 generated title queries (a ``qid<TAB>query`` topics file) are written into
``--work``; then each step runs the command a user types, in its own child process, measured
by :mod:`retrieval.bench.full_child` (wall, CPU, peak memory, bytes written to disk):

1. ``topicir index WORK/ap --out WORK/index --threads T``;
2. ``topicir run`` of the 100 queries with exact QL, writing ``WORK/runs/ql.txt``;
3. per kind: ``topicir train KIND --index WORK/index --out WORK/models/KIND.npz --threads T``
   at the kind's defaults (``--iterations N``, or ``--epochs N`` for a kind trained in epochs,
   only when asked, and then said in the table), then ``topicir run`` of the queries with that
   model, writing ``WORK/runs/KIND.txt``.

Every run file is read back (a TREC run of the 100 topics, ready for ``topicir eval`` with
qrels). The synthetic collection has no relevance judgments. After each ranking step, the
batch alone is timed in another process as ``topicir bench scale`` times the batch it projects,
so that the projection of the batch meets a measurement of the same thing.

What each step measured is kept in ``WORK/bench-full.json`` (written atomically after every
step and every part of one), so rerunning the command skips the steps already measured and
goes on: an interrupted training resumes from its checkpoint (``topicir train`` does when rerun
with the same ``--out``), and its figures add the parts before and after the interruption,
each kept. ``--stop-after MIN`` starts no step after MIN minutes and stops a training then,
after its sweep in progress, with its checkpoint (no sweep is lost), so a training can span sittings;
``--stop-after 0`` runs nothing and writes the table of what is measured. A ranking step
(``ql``, ``run-KIND``) runs ``--runs`` times after a warm-up run that is not measured (after a
change to the code, the first run compiles the kernels), each run a part of its own, and its
row gives the median run's wall and CPU time beside the largest peak memory: a single run of a
few seconds says as much about what else the machine was doing as about the command. A
ranking step with fewer runs than asked gets the rest when the command is run again.
``--remeasure STEP`` runs a ranking step measured before again (after a change to the code it
runs), its new runs replacing the old ones; a training or the index is not run again.

The table (:mod:`retrieval.bench.full_table`) puts every figure beside the projection of
``topicir bench scale`` (``--projection``, its generated file) with the ratio measured /
projected, and marks the steps not yet measured as projected.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from models.common.atomic import atomic_open, target_lock

from ..core.tables import Table
from .full_child import Interrupted, progress, run_measured
from .full_table import finished_runs, tables, unit
from .scale import KINDS, N_QUERIES

log = logging.getLogger(__name__)

STATE = "bench-full.json"
FORMAT = 1
SETTINGS = ("docs", "terms", "seed", "threads", "iterations")


@dataclass(frozen=True)
class Step:
    """One command of the user's path: ``name`` (``index``, ``ql``, ``train-KIND``,
    ``run-KIND``), ``args`` after ``topicir``, the step it ``needs`` done first, the
    ``checkpoint`` a training writes, the file or folder it ``makes``."""

    name: str
    what: str
    args: tuple
    makes: Path
    kind: str | None = None
    needs: str | None = None
    checkpoint: Path | None = None

    def shown(self) -> str:
        import shlex

        return shlex.join(["topicir", *self.args])


def _schedule_option(kind: str, iterations: int | None) -> list[str]:
    """``--iterations N`` (``--epochs N`` for a kind trained in epochs); nothing by default."""
    if iterations is None:
        return []
    return ["--epochs" if unit(kind) == "epoch" else "--iterations", str(iterations)]


def plan(work: Path, kinds, threads: int, iterations: int | None) -> list[Step]:
    """The steps, in order."""
    index, topics = work / "index", work / "queries.tsv"
    query = ("--index", str(index), "--topics", str(topics))
    steps = [Step("index", "index", ("index", str(work / "ap"), "--out", str(index), "--threads", str(threads)), index),
             Step("ql", "run", ("run", *query, "--out", str(work / "runs" / "ql.txt")), work / "runs" / "ql.txt",
                  needs="index")]
    for kind in kinds:
        model = work / "models" / f"{kind}.npz"
        steps.append(Step(f"train-{kind}", "train",
                          ("train", kind, "--index", str(index), "--out", str(model), "--threads", str(threads),
                           *_schedule_option(kind, iterations)), model, kind, needs="index",
                          checkpoint=model.with_name(model.name + ".ckpt")))
        steps.append(Step(f"run-{kind}", "run", ("run", *query, "--model", str(model), "--out",
                                                 str(work / "runs" / f"{kind}.txt")),
                          work / "runs" / f"{kind}.txt", kind, needs=f"train-{kind}"))
    return steps


# -- the state file ----------------------------------------------------------------------------

def load_state(path: Path, settings: dict) -> dict:
    """The measured steps recorded in ``path`` (a new state when there is none); a state of
    other settings is refused, naming them."""
    if not path.exists():
        return dict(format=FORMAT, settings=settings, steps={})
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{path}: not a bench full state file ({e}); move it away to start again") from None
    if state.get("format") != FORMAT or not isinstance(state.get("steps"), dict):
        raise ValueError(f"{path}: not a bench full state file of format {FORMAT}; move it away to start again")
    old = state.get("settings", {})
    diff = [f"--{k.replace('_', '-')} {old.get(k)!r} there, {v!r} now" for k, v in settings.items() if old.get(k) != v]
    if diff:
        raise ValueError(f"{path} holds the measurements of other settings ({'; '.join(diff)}): give another "
                         f"--work, or the same settings to go on")
    return state


def save_state(path: Path, state: dict) -> None:
    with atomic_open(path, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1)
        f.write("\n")


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, ``/proc/<pid>/stat``), which tells
    it from a later process given the same pid; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _recover(state: dict, state_path: Path) -> None:
    """A step recorded as running when no benchmark runs it: the benchmark was killed with its
    child (a part that could not be measured, recorded as lost), or its child still runs."""
    running = state.get("running")
    if not running:
        return
    if running.get("pid_start") is not None and process_start(running["pid"]) == running["pid_start"]:
        raise RuntimeError(f"{state_path}: the {running['step']} step of an earlier run is still running "
                           f"(pid {running['pid']}); wait for it to end, or end it, then rerun")
    log.warning("%s: the %s step started %s was not measured to its end (the benchmark was killed); its "
                "figures will say so", state_path, running["step"], running["started"])
    step = state["steps"].setdefault(running["step"], dict(parts=[]))
    step["parts"].append(dict(started=running["started"], exit=None, interrupted="lost"))
    state.pop("running")


# -- outputs -----------------------------------------------------------------------------------

def _tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _output(step: Step) -> dict:
    """What the step made, read back: the index's size, the model file's, the run's topics."""
    out = dict(bytes=_tree_bytes(step.makes))
    if step.what == "index":
        m = json.loads((step.makes / "topicir.json").read_text(encoding="utf-8"))
        out.update(n_docs=m["n_docs"], n_terms=m["n_terms"], n_tokens=m["n_tokens"])
    elif step.what == "run":
        from ..core.trec import read_run

        run = read_run(step.makes)
        out.update(topics=len({r.qid for r in run}), lines=len(run))
        if out["topics"] != N_QUERIES:
            raise RuntimeError(f"{step.makes}: a run of {out['topics']} topics, not the {N_QUERIES} queries; "
                               f"see the log of the {step.name} step")
    return out


# -- the benchmark -----------------------------------------------------------------------------

def _prepare(work: Path, docs: int, terms: int, seed: int, wordnet) -> dict:
    """Generate the collection (reused where already written) and the topics file."""
    from ..datasets.ap_synth import Generator, file_names, generate

    start = time.perf_counter()
    generate(work / "ap", docs, n_terms=terms, seed=seed, wordnet=wordnet)
    names = {name for name, _ in file_names(docs)}
    extra = sorted(p.name for p in (work / "ap").glob("AP*.gz") if p.name not in names)
    if extra:
        raise ValueError(f"{work / 'ap'} holds files of a larger collection ({', '.join(extra[:3])}, ...): "
                         f"give another --work")
    topics = work / "queries.tsv"
    gen = Generator(terms, seed, wordnet=wordnet)
    text = "".join(f"{i}\t{q}\n" for i, q in enumerate(gen.queries(N_QUERIES, seed=seed), 1))
    if not topics.exists() or topics.read_text(encoding="utf-8") != text:
        with atomic_open(topics, "w", encoding="utf-8") as f:
            f.write(text)
    return dict(gen_s=time.perf_counter() - start, vocab=gen.vocab)


def run(*, kinds=KINDS, docs: int = 250_000, terms: int = 200_000, seed: int = 0, threads: int = 2,
        iterations: int | None = None, work: str = "build/bench-full", stop_after: float | None = None,
        projection: str = "docs/results/bench-scale.md", wordnet: str | None = None,
        remeasure=(), runs: int = 3) -> list[Table]:
    """Run (or go on with) the user's path for ``kinds`` on ``docs`` synthetic AP documents and
    return its table beside the projection (module docstring); ``remeasure``: ranking steps to
    run and measure again; ``runs``: the runs of each ranking step."""
    from models.registry import kinds as registered

    unknown = [k for k in kinds if k not in registered()]
    if unknown:
        raise ValueError(f"unknown model kind(s) {', '.join(map(repr, unknown))}; choose from {', '.join(registered())}")
    for name, value in (("docs", docs), ("threads", threads), ("iterations", iterations), ("runs", runs)):
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be >= 1, got {value!r}")
    if stop_after is not None and stop_after < 0:
        raise ValueError(f"--stop-after must be >= 0 minutes, got {stop_after!r}")
    deadline = None if stop_after is None else time.time() + 60 * stop_after
    ranking = ["ql"] + [f"run-{kind}" for kind in kinds]
    wrong = [name for name in remeasure if name not in ranking]
    if wrong:
        raise ValueError(f"--remeasure {wrong[0]}: only ranking steps are measured again ({', '.join(ranking)} "
                         f"with these --kinds); a training or the index would be redone")
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    settings = dict(docs=docs, terms=terms, seed=seed, threads=threads, iterations=iterations)
    with target_lock(work / STATE, what="bench full state"):  # a second benchmark of --work is refused
        return _run_locked(work, list(kinds), settings, deadline, Path(projection), wordnet, set(remeasure), runs)


def _run_locked(work: Path, kinds: list[str], settings: dict, deadline, projection: Path, wordnet,
                remeasure: set, runs: int) -> list[Table]:
    from tqdm.auto import tqdm

    state_path = work / STATE
    state = load_state(state_path, settings)
    _recover(state, state_path)
    save_state(state_path, state)
    info = _prepare(work, settings["docs"], settings["terms"], settings["seed"], wordnet)
    steps = plan(work, kinds, settings["threads"], settings["iterations"])
    env = _child_env(settings["threads"])
    done = lambda name: state["steps"].get(name, {}).get("done", False)  # noqa: E731
    untimed = lambda step: step.what == "run" and "batch" not in state["steps"].get(step.name, {})  # noqa: E731
    short = lambda step: step.what == "run" and finished_runs(state["steps"].get(step.name)) < runs  # noqa: E731
    todo = [s for s in steps if not done(s.name) or s.name in remeasure or untimed(s) or short(s)]
    bar = tqdm(total=len(steps), initial=len(steps) - len(todo), desc="bench full", unit=" steps")
    stopped = None
    try:
        for step in todo:
            if deadline is not None and time.time() >= deadline:
                stopped = step.name
                break
            if step.needs and not done(step.needs):
                stopped = step.name
                break
            if step.name in remeasure and done(step.name):  # its old figures go only once it runs again
                log.info("%s: measured again (its earlier figures are replaced)", step.name)
                state["steps"].pop(step.name)
            if step.what == "run" and (not done(step.name) or short(step)):
                _warm_up(step, work, env)
            if not done(step.name):
                _run_step(step, state, state_path, work, env, deadline)
            while done(step.name) and short(step) and (deadline is None or time.time() < deadline):
                _run_step(step, state, state_path, work, env, deadline)
            if done(step.name) and untimed(step):
                _time_batch(step, state, state_path, work, env)
            bar.update(int(done(step.name)))
            if not done(step.name) or short(step):  # stopped at the deadline
                stopped = step.name
                break
    finally:
        bar.close()
    if stopped:
        left = [s.name for s in steps if not done(s.name) or short(s)]
        log.info("stopped before %s is measured (%d step(s) left: %s); rerun the same command to go on",
                 stopped, len(left), " ".join(left))
    return tables(state, steps, kinds, projection, dict(info, **settings))


def _child_env(threads: int) -> dict:
    """The children's environment: this one, with ``NUMBA_NUM_THREADS`` and this topicir first
    on the path (the commands measured are those of the code that measures them)."""
    root = str(Path(__file__).resolve().parents[2])
    path = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return dict(os.environ, NUMBA_NUM_THREADS=str(threads), PYTHONPATH=os.pathsep.join(path))


def _reached(step: Step, start, part: dict) -> dict:
    """A training's part with the sweep it started from (0: from scratch, which voids the parts
    before it) and, when it stopped short, the sweep of the checkpoint it left."""
    if step.what == "train":
        end = progress(step.checkpoint) if part["exit"] != 0 else None
        part.update(sweep_start=start[0] if start else 0, sweep_end=end[0] if end else None,
                    sweeps=end[1] if end else None)
    return part


def _failed(what: str, log_path: Path) -> RuntimeError:
    """The error of a child that failed: what failed and the end of its log."""
    tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
    return RuntimeError(f"bench full: {what}; the end of its log {log_path}:\n" + "\n".join(tail))


def _warm_up(step: Step, work: Path, env: dict) -> None:
    """A ranking step's command once, not measured, before its measured runs: after a change to
    the code, the first run compiles the kernels it uses (numba caches them on disk), and it
    reads the index and model files into the page cache, so that every measured run starts as a
    user's second run does."""
    log_path = work / "logs" / f"{step.name}.log"
    log.info("%s: a warm-up run, not measured (log: %s)", step.name, log_path)
    part = run_measured([sys.executable, "-m", "retrieval", *step.args], log_path, env=env)
    if part["exit"] != 0:
        raise _failed(f"{step.shown()} exited {part['exit']} (warm-up run)", log_path)


def _time_batch(step: Step, state: dict, state_path: Path, work: Path, env: dict) -> None:
    """The batch of a ranking step alone, timed in a child as ``topicir bench scale`` times the
    batch it projects (:func:`retrieval.bench.scale_batch.time_batch`: the fastest of its
    repeats, after two queries that load the kernels and the model's per-document constants),
    so that the projection meets a measurement of the same thing; recorded with the step."""
    from .scale import child_command

    queries = [line.split("\t", 1)[1] for line in (work / "queries.tsv").read_text(encoding="utf-8").splitlines()]
    args = dict(index=str(work / "index"), queries=queries)
    if step.kind is not None:
        args["model"] = str(work / "models" / f"{step.kind}.npz")
    log_path, out = work / "logs" / f"{step.name}-batch.log", work / "logs" / f"{step.name}-batch.json"
    out.unlink(missing_ok=True)
    log.info("%s: timing the batch alone (log: %s)", step.name, log_path)
    part = run_measured(child_command("ql" if step.kind is None else "model", args, out), log_path, env=env)
    if part["exit"] != 0 or not out.exists():
        raise _failed(f"timing the batch of {step.name} failed (exit {part['exit']})", log_path)
    state["steps"][step.name]["batch"] = dict(json.loads(out.read_text(encoding="utf-8")), wall_s=part["wall_s"])
    save_state(state_path, state)


def _run_step(step: Step, state: dict, state_path: Path, work: Path, env: dict, deadline) -> None:
    """Run one step, record its part (and, when it succeeded, its output), save the state."""
    record = state["steps"].setdefault(step.name, dict(parts=[]))
    record["command"] = step.shown()
    args = list(step.args)
    if step.what == "index" and step.makes.exists():  # built, but its measurement was lost
        args.append("--force")
    log.info("%s: %s (log: %s)", step.name, step.shown(), work / "logs" / f"{step.name}.log")
    start = progress(step.checkpoint) if step.what == "train" else None
    if start is not None:
        log.info("%s: resuming from %s (%s %d)", step.name, step.checkpoint, unit(step.kind), start[0])

    def started(pid):
        state["running"] = dict(step=step.name, pid=pid, pid_start=process_start(pid),
                                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        save_state(state_path, state)

    try:
        part = run_measured([sys.executable, "-m", "retrieval", *args], work / "logs" / f"{step.name}.log", env=env,
                            checkpoint=step.checkpoint, deadline=deadline if step.what == "train" else None,
                            on_start=started)
    except Interrupted as e:
        record["parts"].append(_reached(step, start, e.part))
        state.pop("running", None)
        save_state(state_path, state)
        log.info("%s interrupted; its part is recorded in %s: rerun the same command to go on", step.name, state_path)
        raise
    record["parts"].append(_reached(step, start, part))
    state.pop("running", None)
    if part["exit"] == 0:
        record["output"] = _output(step)
        record["done"] = True
    save_state(state_path, state)
    if part["exit"] not in (0, 130):
        raise _failed(f"{step.shown()} exited {part['exit']}", work / "logs" / f"{step.name}.log")
