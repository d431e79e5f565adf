"""The tables of ``topicir bench full``: every step's measured figures beside the projection of
``topicir bench scale`` (read from its generated file), with the ratio measured / projected,
and every part of a step measured in parts."""
from __future__ import annotations

import re
from pathlib import Path
from statistics import median

from ..core.quick import is_quick
from ..core.tables import Table
from .full_child import progress
from .scale import N_QUERIES
from .scale_batch import BATCH_REPEATS

_FIGURE = re.compile(r"([\d.,]+) (min|s|GiB)")
_UNIT_S = {"s": 1.0, "min": 60.0}
ENDED = {"deadline": "stopped at a checkpoint (--stop-after)", "ctrl-c": "interrupted (Ctrl-C or SIGTERM)",
         "lost": "not measured (the benchmark was killed)"}


def read_projection(path: Path) -> dict | None:
    """``bench scale``'s generated file: its command, the collection size it projects to, and
    the figures of its first table by measure (``{"lda: peak memory": (11.3, "GiB"), ...}``,
    the marks ``*`` dropped); None when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    command = re.search(r"^Command: `(.*)`", text, re.M)
    target = re.search(r"Target collection: ([\d,]+) documents", text)
    figures = {}
    for line in text.split("\n## ", 2)[1].splitlines() if "\n## " in text else []:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = _FIGURE.fullmatch(cells[1]) if len(cells) > 1 else None
        if line.startswith("|") and m:
            figures[cells[0].rstrip("*")] = (float(m.group(1).replace(",", "")), m.group(2))
    if not figures:
        raise ValueError(f"{path}: no figures in its first table; is it written by topicir bench scale --write?")
    return dict(command=command.group(1) if command else "?", path=str(path), figures=figures,
                docs=int(target.group(1).replace(",", "")) if target else None)


def _find(proj: dict | None, prefix: str, suffix: str = "") -> tuple[str, float, str] | None:
    """(measure, value, unit) of the first figure whose measure starts with ``prefix``."""
    for measure, (value, unit) in (proj or {}).get("figures", {}).items():
        if measure.startswith(prefix) and measure.endswith(suffix):
            return measure, value, unit
    return None


def projected(proj: dict | None, step) -> tuple[float | None, float | None]:
    """(wall seconds, peak GiB) of ``step`` in ``proj``; None where it projects none."""
    if step.what == "index":
        wall, peak = _find(proj, "indexing ", "(wall)"), _find(proj, "indexing: peak memory")
    elif step.name == "ql":
        wall, peak = _find(proj, f"{N_QUERIES}-query batch, exact QL"), None
    elif step.what == "train":
        wall, peak = _find(proj, f"{step.kind}: default training"), _find(proj, f"{step.kind}: peak memory")
    else:
        wall, peak = _find(proj, f"{step.kind}: {N_QUERIES}-query batch with the model"), None
    seconds = wall[1] * _UNIT_S[wall[2]] if wall else None
    return seconds, peak[1] if peak else None


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 120:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


def size(n: float | None) -> str:
    if n is None:
        return ""
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _ratio(measured, proj, comparable: bool) -> str:
    return f"{measured / proj:.2f}" if comparable and measured is not None and proj else ""


def voided(parts: list[dict]) -> int:
    """How many of a step's first parts a later start from scratch threw away: a training part
    records the sweep it started from (0: no checkpoint to resume), and a part without that
    record started from scratch when no part before it wrote a checkpoint."""
    last, wrote = 0, False
    for i, p in enumerate(parts):
        if (p["sweep_start"] == 0) if "sweep_start" in p else not wrote:
            last = i
        wrote = wrote or bool(p.get("checkpoints"))
    return last


def _runs(record: dict | None) -> list[dict]:
    return [p for p in (record or {}).get("parts", []) if p.get("exit") == 0 and p.get("wall_s") is not None]


def finished_runs(record: dict | None) -> int:
    """How many runs of a ranking step finished and were measured."""
    return len(_runs(record))


def totals(record: dict | None, ranking: bool = False) -> dict:
    """A step's figures over the parts that count (those after the last start from scratch):
    wall, CPU and bytes written add up, peak memory is the largest part's; ``lost``: a part
    that could not be measured; ``sweep``: (done, of) where a training stopped short. A
    ``ranking`` step's finished parts are runs of the whole command: the median run's wall, CPU
    and bytes written, the largest peak, and ``runs``, the wall times of them all."""
    runs = _runs(record)
    if ranking and runs:
        return dict(parts=len(runs), lost=0, voided=0, sweep=None, runs=sorted(p["wall_s"] for p in runs),
                    wall_s=median(p["wall_s"] for p in runs), cpu_s=median(p["user_s"] + p["sys_s"] for p in runs),
                    peak_gib=max(p["peak_gib"] for p in runs), written_bytes=median(p["written_bytes"] for p in runs),
                    checkpoints=0)
    parts = (record or {}).get("parts", [])
    void = voided(parts)
    last = parts[-1] if parts else {}
    sweep = (last["sweep_end"], last.get("sweeps")) if last.get("sweep_end") is not None else None
    parts = parts[void:]
    measured = [p for p in parts if p.get("wall_s") is not None]
    if not measured:
        return dict(parts=len(parts), lost=len(parts), voided=void, sweep=sweep)
    return dict(parts=len(parts), lost=len(parts) - len(measured), voided=void, sweep=sweep,
                wall_s=sum(p["wall_s"] for p in measured),
                cpu_s=sum(p["user_s"] + p["sys_s"] for p in measured), peak_gib=max(p["peak_gib"] for p in measured),
                written_bytes=sum(p["written_bytes"] for p in measured),
                checkpoints=sum(p.get("checkpoints", 0) for p in measured))


def unit(kind: str | None) -> str:
    """What a training of ``kind`` counts: "epoch" for a kind trained in epochs, else "sweep"."""
    if kind is None:
        return "sweep"
    from models.registry import model_class

    return "epoch" if "epochs" in model_class(kind)().get_params() else "sweep"


def status(record: dict | None, t: dict) -> str:
    if not t["parts"]:
        return "projected"
    lost = f"; {t['lost']} part not measured: a lower bound" if t["lost"] else ""
    void = (f"; {t['voided']} earlier part(s) thrown away by a start from scratch, not counted"
            if t["voided"] else "")
    if record.get("done") and len(t.get("runs", ())) > 1:
        return f"measured: median of {len(t['runs'])} runs ({duration(t['runs'][0])} to {duration(t['runs'][-1])})"
    if record.get("done"):
        return ("measured" if t["parts"] == 1 else f"measured in {t['parts']} parts (resumed)") + lost + void
    last = record["parts"][-1]
    if last.get("exit") not in (0, 130, None):
        return f"failed (exit {last['exit']}), not measured"
    sweep = t["sweep"]
    reached = "" if sweep is None else (f", checkpoint at {t['unit']} {sweep[0]}"
                                        + (f" of {sweep[1]}" if sweep[1] else ""))
    peak = f", peak memory {t['peak_gib']:.2f} GiB" if t.get("peak_gib") is not None else ""
    ahead = ""
    pace = checkpoint_pace(record["parts"][t["voided"]:])
    if pace and sweep and sweep[1] and t.get("wall_s") is not None and not t["lost"]:
        ahead = (f"; at the pace of its checkpoints so far ({duration(pace)} per {t['unit']}) about "
                 f"{duration(t['wall_s'] + (sweep[1] - sweep[0]) * pace)} in all to {t['unit']} {sweep[1]}, "
                 f"before what ends the training")
    return f"in progress: {t['parts']} part(s), {duration(t.get('wall_s'))} so far{reached}{peak}{lost}{void}{ahead}; projected"


def checkpoint_pace(parts: list[dict]) -> float | None:
    """Seconds a sweep (epoch) over the parts that record when their checkpoints were written:
    each such part's time to its last checkpoint (its start included) over the sweeps from where
    it started to that checkpoint; None where no part records one."""
    seconds = units = 0.0
    for p in parts:
        done = [(sec, sweep) for sec, sweep in p.get("checkpoint_times") or [] if sweep is not None]
        if done and p.get("sweep_start") is not None and done[-1][1] > p["sweep_start"]:
            seconds += done[-1][0]
            units += done[-1][1] - p["sweep_start"]
    return seconds / units if units else None


def _made(step, record: dict | None) -> str:
    out = (record or {}).get("output")
    if not out:
        return ""
    if step.what == "index":
        return f"{out['n_docs']:,} docs, {out['n_tokens'] / 1e6:.1f} M tokens, {size(out['bytes'])}"
    if step.what == "run":
        return f"{out['topics']} topics, {out['lines']:,} lines"
    return size(out["bytes"])


def tables(state: dict, steps: list, kinds: list[str], projection: Path, info: dict) -> list[Table]:
    """The main table (a row per step) and the parts table."""
    proj = read_projection(projection)
    default = info["iterations"] is None
    comparable = bool(proj) and proj["docs"] == info["docs"] and default and not is_quick()
    rows, parts = [], []
    for step in steps:
        record = state["steps"].get(step.name)
        t = dict(totals(record, ranking=step.what == "run"), unit=unit(step.kind))
        done = bool(record and record.get("done"))
        if step.what == "train" and t["parts"] and not done and t["sweep"] is None:  # a part recorded without it
            t["sweep"] = progress(step.checkpoint)
        wall_p, peak_p = projected(proj, step)
        shown = lambda key: t.get(key) if done else None  # noqa: E731
        batch_s = (record or {}).get("batch", {}).get("batch_s") if done else None
        rows.append({"step": step.name, "command": f"`{step.shown()}`", "status": status(record, t),
                     "wall": duration(shown("wall_s")), "projected wall": duration(wall_p),
                     "wall: measured / projected": _ratio(shown("wall_s"), wall_p, comparable),
                     "batch alone": duration(batch_s),
                     "batch: measured / projected": _ratio(batch_s, wall_p, comparable),
                     "CPU (user + sys)": duration(shown("cpu_s")),
                     "peak memory": f"{t['peak_gib']:.2f} GiB" if done else "",
                     "projected peak": f"{peak_p:.2f} GiB" if peak_p is not None else "",
                     "peak: measured / projected": _ratio(shown("peak_gib"), peak_p, comparable),
                     "written to disk": size(shown("written_bytes")),
                     "checkpoints written": str(t["checkpoints"]) if done and step.what == "train" else "",
                     "made": _made(step, record)})
        void = 0 if step.what == "run" else voided((record or {}).get("parts", []))
        for n, p in enumerate((record or {}).get("parts", []), 1):
            ended = ENDED.get(p.get("interrupted")) or ("finished" if p.get("exit") == 0 else f"exit {p.get('exit')}")
            if p.get("sweep_end") is not None:
                ended += f" at {t['unit']} {p['sweep_end']}"
            if n <= void:
                ended += "; thrown away (the next part started from scratch), not counted"
            measured = p.get("wall_s") is not None
            parts.append({"step": step.name, "part": n, "started (UTC)": p["started"], "ended": ended,
                          "wall": duration(p.get("wall_s")),
                          "CPU (user + sys)": duration(p["user_s"] + p["sys_s"]) if measured else "",
                          "peak memory": f"{p['peak_gib']:.2f} GiB" if measured else "",
                          "written to disk": size(p.get("written_bytes")),
                          "write calls": size(p.get("wchar_bytes")),
                          "checkpoints written": p.get("checkpoints", ""),
                          "load at start, end": (f"{p['load'][0]:.1f}, {p['load'][1]:.1f}" if p.get("load") else ""),
                          "CPU": p.get("cpu", ""),
                          "largest checkpoint": size(p.get("checkpoint_max_bytes") or None),
                          "checkpoints: sweep at time into the part": _pace(p.get("checkpoint_times"))})
    return [Table(_title(comparable), rows, notes=_notes(state, steps, proj, comparable, info)),
            Table("Every part of every step", parts, notes=[
                "A step interrupted (Ctrl-C, SIGTERM, or --stop-after at a checkpoint) and run again is measured in "
                "parts; its figures above add the parts' wall, CPU and disk writes, and take the largest part's peak "
                "memory. A ranking step (ql, run-KIND) runs whole several times (--runs), each run a part; its figures "
                "above are the median run's wall, CPU and disk writes and the largest run's peak memory. 'write calls': the bytes the process handed to write calls (its log included); 'written to "
                "disk': what reached the storage layer. 'load': the machine's 1-minute load average when the part "
                "started and ended (more than the threads asked for means other work shared the cores and "
                "stretched the wall time, not the CPU time); 'CPU': the machine it ran on, where recorded; "
                "'checkpoints': the sweep (epoch) of each checkpoint seen written and when, where recorded."])]


def _pace(times) -> str:
    """Each checkpoint write of a part as "SWEEP at TIME" (its pace: early sweeps of a chain far
    from settled can take several times the later ones)."""
    return ", ".join(f"{'?' if sweep is None else sweep} at {duration(sec)}" for sec, sweep in times or [])


def _title(comparable: bool) -> str:
    return ("The user's path measured, beside the projection" if comparable else
            "The user's path measured (not at the projection's size or schedule: no ratios)")


def _notes(state, steps, proj, comparable, info) -> list[str]:
    index = state["steps"].get("index", {}).get("output")
    vocab = info["vocab"]
    collection = (f"{index['n_docs']:,} documents, {index['n_tokens'] / 1e6:.1f} M tokens, {index['n_terms']:,} terms "
                  f"after analysis" if index else f"{info['docs']:,} documents")
    notes = [
        f"Collection: {collection}, synthetic AP-layout TREC SGML (retrieval.datasets.ap_synth, seed {info['seed']}, "
        f"{info['terms']:,}-word generator: {vocab.n_wordnet:,} WordNet lemmas, {len(vocab.words) - vocab.n_wordnet:,} "
        f"other words; written, or found already written, in {duration(info['gen_s'])} before the steps, in this "
        f"process); {N_QUERIES} generated title queries of 2-4 words, a qid<TAB>query topics file. The runs are "
        f"TREC run files of every query, read back; the synthetic collection has no relevance judgments.",
        f"Each command ran as printed (as python -m retrieval), in its own process, with --threads {info['threads']} "
        f"and NUMBA_NUM_THREADS={info['threads']}: wall from its start to its exit; CPU, user + system time of the "
        f"process (all its threads, the JVM's included); peak memory, its VmHWM (/proc/PID/status, polled while it runs); written to disk, write_bytes "
        f"less cancelled_write_bytes of /proc/PID/io read at its exit (a training's checkpoints and model file, an "
        f"index's files); checkpoints written, the times its checkpoint file was replaced. A training's wall is the "
        f"whole command too: the corpus read from the index, the sweeps and checkpoints, the model saved and the "
        f"document completion it ends on. A run's wall is the whole command (start, the index and model loaded, the "
        f"{N_QUERIES} queries, the run file written), the median of its runs where it ran several times (their "
        f"range in its status), each after a warm-up run that is not measured (the first run after the code "
        f"changed compiles the kernels it uses, which numba then caches on disk), the projection is of the batch alone, timed warm: their ratio "
        f"bounds the batch projection's error from above. Batch alone: the same {N_QUERIES} queries ranked in "
        f"another process as the projection times them (the index and model loaded, two queries first, then the "
        f"fastest of {BATCH_REPEATS} batches), so its ratio is the projection's error.",
        ("Trainings at each kind's defaults." if info["iterations"] is None else
         f"Trainings with --iterations {info['iterations']} (epochs for a kind trained in epochs): NOT the default "
         f"schedule."),
    ]
    if proj is None:
        notes.append("No projection to compare with: the projection file was not found (topicir bench scale --write "
                     "writes it).")
    else:
        notes.append(f"Projected: `{proj['command']}` ({proj['path']}), for {proj['docs'] or 0:,} documents at the "
                     f"default schedule on the machine it ran on. A row marked projected has no measurement yet: run "
                     f"the command again (it goes on where it stopped)."
                     + ("" if comparable else " This run is not of that size or schedule (or ran under "
                                              "TOPICIR_QUICK=1), so no ratio is given."))
    return notes
