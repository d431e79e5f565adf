"""The numbers of a report: runs evaluated with the calls behind ``topicir eval``, paired tests
against a baseline, parameter sweeps found in run names, and MAP-per-iteration tables."""
from __future__ import annotations

import csv
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core.evaluate import DEFAULT_MEASURES, aggregate, parse_measures, per_topic
from ..core.trec import Qrel, ScoredDoc, read_run


OUT_DIR = Path("reports")
ALPHA = 0.05
HEADLINE = "AP"
IPREC = tuple(f"IPrec@{i / 10:.1f}" for i in range(11))
RECALL_LEVELS = tuple(i / 10 for i in range(11))
LABELS = {"AP": "MAP"}
SWEEP_PARAMS = ("mu", "lam")
# A parameter in a run file name: "mu1000", "lam0.7", preceded by the start, ".", "_" or "-".
_PARAM = re.compile(r"(?<![^._-])(mu|lam)(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?=[._-]|$)")
# Run file names split into dot-separated parts, except dots inside numbers ("lam0.7").
_PART_DOT = re.compile(r"\.(?!\d)")


def label_of(measure: str) -> str:
    return LABELS.get(measure, measure)


# -- evaluation -------------------------------------------------------------------------------


class RunEval(NamedTuple):
    """One run's evaluation."""
    label: str
    path: Path
    run: list[ScoredDoc]
    params: dict[str, float]                 # parsed from the file name: {"mu": 1000.0, "lam": 0.7}
    means: dict[str, float]                  # measure -> mean over judged topics (evaluate.aggregate)
    per_topic: dict[str, dict[str, float]]   # measure (and IPrec@x) -> qid -> value


class Paired(NamedTuple):
    """A run against the baseline on one measure, paired over the judged topics."""
    measure: str
    n: int
    mean: float
    base_mean: float
    t_p: float      # two-sided paired t-test p-value (nan when undefined)
    w_p: float      # two-sided Wilcoxon signed-rank p-value, zero differences dropped
    wins: int
    ties: int
    losses: int

    @property
    def delta(self) -> float:
        return self.mean - self.base_mean


def run_params(name: str) -> dict[str, float]:
    """Sweep parameters in a run file name: ``run.med.lda.mu1000_lam0.7.txt`` -> {mu: 1000, lam: 0.7}."""
    return {m.group(1): float(m.group(2)) for m in _PARAM.finditer(name)}


def short_labels(names: Sequence[str]) -> list[str]:
    """Run file names without the parts they all share at the front and without ``.txt``:
    ``run.med.t.title.ql.mu1000.txt``, ``run.med.t.title.bm25.txt`` -> ``ql.mu1000``, ``bm25``."""
    parts = [_PART_DOT.split(n[:-4] if n.endswith(".txt") else n) for n in names]
    if len(parts) > 1:
        common = 0
        while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
            common += 1
        parts = [p[common:] for p in parts]
    elif parts and len(parts[0]) > 1 and parts[0][0] == "run":
        parts = [parts[0][1:]]
    return [".".join(p) for p in parts]


def label_runs(runs: Sequence[str]) -> dict[str, Path]:
    """``{label: path}`` from ``PATH`` or ``LABEL=PATH`` arguments; unnamed runs get short labels
    (with their directory when two files have the same name)."""
    named, unnamed = {}, []
    for arg in runs:
        label, eq, path = str(arg).partition("=")
        if eq and label and not Path(arg).exists():
            named[label] = Path(path)
        else:
            unnamed.append(Path(arg))
    labels = short_labels([p.name for p in unnamed])
    if len(set(labels)) < len(labels):
        labels = short_labels([f"{p.parent.name}/{p.name}" for p in unnamed])
    out: dict[str, Path] = {}
    for label, path in [*zip(labels, unnamed), *named.items()]:
        if label in out:
            raise ValueError(f"two runs are both labelled {label!r} ({out[label]} and {path}); "
                             f"name them as LABEL=PATH")
        out[label] = path
    return out


def evaluate_runs(runs: Mapping[str, Path], qrels: Sequence[Qrel], measures=DEFAULT_MEASURES,
                  on_run=None) -> list[RunEval]:
    """Evaluate each run: means through ``evaluate.aggregate`` (as ``topicir eval``), per topic
    through ``evaluate.per_topic`` with the 11 interpolated precisions added; ``on_run()`` is
    called after each (progress)."""
    keys = [str(m) for m in parse_measures(measures)]
    if HEADLINE not in keys:
        keys.insert(0, HEADLINE)
    out = []
    for label, path in runs.items():
        run = read_run(Path(path))
        means = aggregate(run, qrels, keys)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # aggregate has warned about missing topics already
            table = per_topic(run, qrels, keys + [m for m in IPREC if m not in keys])
        out.append(RunEval(label, Path(path), run, run_params(Path(path).name), means, table))
        if on_run is not None:
            on_run()
    return out


def paired_tests(values: Sequence[float], base: Sequence[float]) -> tuple[float, float, int, int, int]:
    """Two-sided paired t-test and Wilcoxon signed-rank p-values of ``values`` against ``base``
    (same topics, same order) and the wins, ties and losses.

    All differences zero gives p = 1 for both tests; fewer than two topics gives nan.
    """
    from scipy import stats

    a, b = np.asarray(values, dtype=np.float64), np.asarray(base, dtype=np.float64)
    d = a - b
    wins, losses = int((d > 0).sum()), int((d < 0).sum())
    ties = len(d) - wins - losses
    if len(d) < 2:
        return math.nan, math.nan, wins, ties, losses
    if not d.any():
        return 1.0, 1.0, wins, ties, losses
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # constant differences: t is infinite, scipy warns
        t_p = float(stats.ttest_rel(a, b).pvalue)
        w_p = float(stats.wilcoxon(d, zero_method="wilcox").pvalue)
    return t_p, w_p, wins, ties, losses


def compare_to_baseline(ev: RunEval, base: RunEval, measure: str) -> Paired:
    qids = sorted(base.per_topic[measure], key=lambda q: (len(q), q))
    a = [ev.per_topic[measure][q] for q in qids]
    b = [base.per_topic[measure][q] for q in qids]
    t_p, w_p, wins, ties, losses = paired_tests(a, b)
    return Paired(measure, len(qids), ev.means[measure], base.means[measure], t_p, w_p, wins, ties, losses)


class Sweep(NamedTuple):
    """Runs that differ only in the values of sweep parameters."""
    family: str                          # label with the varying values replaced by '*'
    varying: list[str]                   # parameters with more than one value, e.g. ["lam"]
    fixed: dict[str, float]              # the others
    runs: list[RunEval]


def find_sweeps(evals: Sequence[RunEval]) -> list[Sweep]:
    groups: dict[str, list[RunEval]] = {}
    for ev in evals:
        if ev.params:
            groups.setdefault(_PARAM.sub(lambda m: m.group(1) + "*", ev.path.name), []).append(ev)
    sweeps = []
    for key, members in groups.items():
        values = {p: sorted({ev.params[p] for ev in members if p in ev.params}) for p in SWEEP_PARAMS}
        varying = [p for p in SWEEP_PARAMS if len(values[p]) > 1]
        if not varying or len(members) < 2:
            continue
        fixed = {p: v[0] for p, v in values.items() if len(v) == 1}
        family = _PARAM.sub(lambda m: m.group(1) + ("*" if m.group(1) in varying else m.group(2)), members[0].label)
        members = sorted(members, key=lambda e: [e.params.get(p, 0) for p in varying])
        sweeps.append(Sweep(family, varying, fixed, members))
    return sweeps


def read_iterations(path) -> tuple[list[str], list[list[float]]]:
    """A table of MAP against Gibbs iteration: CSV/TSV with a header, or JSON (a list of objects or
    an object of columns). Needs an ``iteration`` column (the papers' tables add ``avg1``, ``avg2``).

    Returns the column names (``iteration`` first) and the rows sorted by iteration.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(data, dict) and "rows" in data:
            data = data["rows"]
        if isinstance(data, dict):
            columns = list(data)
            lengths = {len(v) if isinstance(v, list) else -1 for v in data.values()}
            if len(lengths) != 1 or -1 in lengths:
                shapes = {k: len(v) if isinstance(v, list) else type(v).__name__ for k, v in data.items()}
                raise ValueError(f"{path}: a JSON object of columns needs lists of equal length, got {shapes}")
            records = [(i + 1, [data[c][i] for c in columns]) for i in range(lengths.pop())]
        elif isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
            columns = list(data[0])
            records = [(i + 1, [r.get(c) for c in columns]) for i, r in enumerate(data)]
        else:
            raise ValueError(f"{path}: expected a list of objects like "
                             f'{{"iteration": 100, "avg1": 0.21, "avg2": 0.22}} or an object of columns')
    else:
        lines = text.splitlines()
        delimiter = "\t" if lines and "\t" in lines[0] else ","
        reader = csv.reader(lines, delimiter=delimiter)
        columns = [c.strip() for c in next(reader, [])]
        records = [(n, row) for n, row in enumerate(reader, 2) if any(c.strip() for c in row)]
        for n, row in records:
            if len(row) != len(columns):
                raise ValueError(f"{path}:{n}: expected {len(columns)} fields ({', '.join(columns)}), "
                                 f"got {len(row)}: {delimiter.join(row)!r}")
    lower = [str(c).lower() for c in columns]
    if "iteration" not in lower:
        raise ValueError(f"{path}: no 'iteration' column (columns: {', '.join(map(str, columns)) or 'none'}); "
                         f"expected e.g. iteration,avg1,avg2")
    if len(columns) < 2:
        raise ValueError(f"{path}: only an iteration column; add columns of MAP values such as avg1,avg2")
    first = lower.index("iteration")
    order = [first] + [i for i in range(len(columns)) if i != first]
    # A column of several numbers per row ("chains": "0.5378 0.5256", or a JSON list) becomes
    # one column per number: "chains 1", "chains 2".
    names, getters = ["iteration"], [lambda row, i=first: row[i]]
    for i in order[1:]:
        parts = [_split(row[i]) for _, row in records]
        width = {len(p) for p in parts}
        if len(width) == 1 and (n := width.pop()) > 1:
            names += [f"{columns[i]} {j + 1}" for j in range(n)]
            getters += [lambda row, i=i, j=j: _split(row[i])[j] for j in range(n)]
        else:
            names.append(str(columns[i]))
            getters.append(lambda row, i=i: row[i])
    rows = []
    for where, row in records:
        try:
            rows.append([float(get(row)) for get in getters])
        except (TypeError, ValueError):
            raise ValueError(f"{path}:{where}: expected numbers, got {row!r}") from None
    if not rows:
        raise ValueError(f"{path}: no rows")
    rows.sort(key=lambda r: r[0])
    return names, rows


def _split(value) -> list:
    return list(value) if isinstance(value, list) else str(value).split()
