"""Evaluation reports: ``topicir report RUN... --qrels FILE [--baseline RUN] [--out DIR]``.

Each run is evaluated with :func:`retrieval.core.evaluate.aggregate` and :func:`~retrieval.core.evaluate.per_topic`,
the functions behind ``topicir eval``, so the numbers are the same. The report compares every run
with a baseline run (paired t-test and Wilcoxon signed-rank test over the judged topics, per-topic
wins, ties and losses), draws per-topic differences and 11-point precision-recall curves, finds
parameter sweeps in run file names (``...mu1000_lam0.7.txt``, as :func:`retrieval.core.ranking.run_name`
writes them) and plots MAP against each parameter, and renders a table of MAP against Gibbs
iteration (``--iterations``) and the top words of a topic model's topics (``--model``).

It writes ``report.html`` (self-contained: plots are embedded PNGs) and ``report.md`` (plots in
``plots/``) into the output directory.
"""
from __future__ import annotations

import base64
import csv
import html
import json
import math
import os
import re
import shlex
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core.plugins import hook
from ..core.evaluate import DEFAULT_MEASURES, aggregate, judged_topics, parse_measures, per_topic
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


def evaluate_runs(runs: Mapping[str, Path], qrels: Sequence[Qrel], measures=DEFAULT_MEASURES) -> list[RunEval]:
    """Evaluate each run: means through ``evaluate.aggregate`` (as ``topicir eval``), per topic
    through ``evaluate.per_topic`` with the 11 interpolated precisions added."""
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


# -- the document: sections of tables, figures and text, rendered as HTML and Markdown ----------


class Table(NamedTuple):
    header: list[str]
    rows: list[list[str]]
    caption: str = ""
    bold: frozenset = frozenset()   # (row, column) cells to emphasise
    collapsed: bool = False         # HTML: inside <details>


class Plot(NamedTuple):
    name: str       # file stem under plots/
    png: bytes
    caption: str


class Para(NamedTuple):
    text: str
    code: bool = False


class Section(NamedTuple):
    title: str
    anchor: str
    blocks: list


def _fmt(value: float, digits: int = 4) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _fmt_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _num(x: float) -> str:
    return f"{x:g}"


def _section_summary(evals, base, keys, alpha) -> Section:
    header = ["run"] + [label_of(k) for k in keys]
    rows, bold = [], set()
    best = {k: max(ev.means[k] for ev in evals) for k in keys}
    for i, ev in enumerate(evals):
        cells = [ev.label + (" (baseline)" if ev is base else "")]
        for j, k in enumerate(keys, 1):
            mark = ""
            if ev is not base:
                p = compare_to_baseline(ev, base, k)
                mark = ("\u2020" if p.t_p < alpha else "") + ("\u2021" if p.w_p < alpha else "")
            cells.append(_fmt(ev.means[k]) + mark)
            if ev.means[k] == best[k]:
                bold.add((i, j))
        rows.append(cells)
    n = len(base.per_topic[keys[0]])
    note = (f"Means over the {n} judged topics (topics with a relevant document; a judged topic missing "
            f"from a run counts 0), as topicir eval computes them. \u2020: paired t-test, \u2021: Wilcoxon "
            f"signed-rank test, p < {alpha:g} against the baseline {base.label}. Best in bold.")
    return Section("Summary", "summary", [Table(header, rows, bold=frozenset(bold)), Para(note)])


def _section_significance(evals, base, keys, alpha) -> Section:
    header = ["run", "measure", "mean", "baseline", "\u0394", "\u0394 %", "t-test p", "Wilcoxon p", "win / tie / loss"]
    rows, bold = [], set()
    for ev in evals:
        if ev is base:
            continue
        for k in keys:
            p = compare_to_baseline(ev, base, k)
            rel = f"{100 * p.delta / p.base_mean:+.1f}%" if p.base_mean else "n/a"
            rows.append([ev.label, label_of(k), _fmt(p.mean), _fmt(p.base_mean), f"{p.delta:+.4f}", rel,
                         _fmt_p(p.t_p), _fmt_p(p.w_p), f"{p.wins} / {p.ties} / {p.losses}"])
            for col, pv in ((6, p.t_p), (7, p.w_p)):
                if pv < alpha:
                    bold.add((len(rows) - 1, col))
    note = (f"Paired over the judged topics: scipy.stats.ttest_rel and scipy.stats.wilcoxon (two-sided; "
            f"topics with equal values are dropped from the Wilcoxon test and counted as ties). "
            f"p < {alpha:g} in bold.")
    return Section(f"Significance against {base.label}", "significance",
                   [Table(header, rows, bold=frozenset(bold)), Para(note)])


def _section_topics(evals, base, plots) -> Section:
    others = [ev for ev in evals if ev is not base]
    qids = sorted(base.per_topic[HEADLINE], key=lambda q: (len(q), q))
    blocks = []
    if others:
        diffs = {ev.label: [ev.per_topic[HEADLINE][q] - base.per_topic[HEADLINE][q] for q in qids] for ev in others}
        blocks.append(Plot("topic_differences", plots.topic_differences(diffs, base.label),
                           f"Per-topic MAP (AP) of each run minus {base.label}, topics sorted by the difference."))
    header = ["topic"] + [ev.label for ev in evals] + [f"\u0394 {ev.label}" for ev in others]
    rows = [[q] + [_fmt(ev.per_topic[HEADLINE][q]) for ev in evals]
            + [f"{ev.per_topic[HEADLINE][q] - base.per_topic[HEADLINE][q]:+.4f}" for ev in others] for q in qids]
    blocks.append(Table(header, rows, caption=f"AP per topic ({len(qids)} judged topics); \u0394 against {base.label}",
                        collapsed=True))
    return Section("Per-topic MAP", "per-topic", blocks)


def _section_pr(evals, plots) -> Section:
    curves = {ev.label: (RECALL_LEVELS, [float(np.mean(list(ev.per_topic[m].values()))) if ev.per_topic[m] else 0.0
                                         for m in IPREC]) for ev in evals}
    header = ["run"] + [f"{r:.1f}" for r in RECALL_LEVELS]
    rows = [[label] + [_fmt(p) for p in prec] for label, (_, prec) in curves.items()]
    return Section("Precision-recall", "precision-recall", [
        Plot("precision_recall", plots.pr_curves(curves),
             "11-point interpolated precision (ir_measures IPrec@0.0 ... IPrec@1.0), mean over judged topics."),
        Table(header, rows, caption="interpolated precision at recall")])


def _section_sweeps(sweeps, base, keys, plots) -> Section:
    blocks = []
    hline = (f"{base.label} (baseline)", base.means[HEADLINE])
    for i, sw in enumerate(sweeps):
        fixed = ", ".join(f"{p}={_num(v)}" for p, v in sw.fixed.items())
        title = sw.family + (f" ({fixed})" if fixed else "")
        blocks.append(Para(f"Sweep {sw.family}: {len(sw.runs)} runs" + (f", {fixed}" if fixed else "") + "."))
        if len(sw.varying) == 1:
            p = sw.varying[0]
            series = {sw.family: ([ev.params[p] for ev in sw.runs], [ev.means[HEADLINE] for ev in sw.runs])}
            blocks.append(Plot(f"sweep{i + 1}_{p}", plots.lines(series, p, title=title, hline=hline, logx=p == "mu"),
                               f"MAP against {p}: {title}"))
            best = max(range(len(sw.runs)), key=lambda j: sw.runs[j].means[HEADLINE])
            rows = [[_num(ev.params[p])] + [_fmt(ev.means[k]) for k in keys] for ev in sw.runs]
            blocks.append(Table([p] + [label_of(k) for k in keys], rows, caption=title, bold=frozenset({(best, 1)})))
        else:
            mus = sorted({ev.params["mu"] for ev in sw.runs})
            lams = sorted({ev.params["lam"] for ev in sw.runs})
            grid = {(ev.params["mu"], ev.params["lam"]): ev.means[HEADLINE] for ev in sw.runs}

            by_mu = {f"mu={_num(m)}": ([lam for lam in lams if (m, lam) in grid],
                                       [grid[m, lam] for lam in lams if (m, lam) in grid]) for m in mus}
            by_lam = {f"lam={_num(lam)}": ([m for m in mus if (m, lam) in grid],
                                           [grid[m, lam] for m in mus if (m, lam) in grid]) for lam in lams}
            blocks.append(Plot(f"sweep{i + 1}_lam", plots.lines(by_mu, "lam", title=title, hline=hline),
                               f"MAP against lam, one line per mu: {title}"))
            blocks.append(Plot(f"sweep{i + 1}_mu", plots.lines(by_lam, "mu", title=title, hline=hline, logx=True),
                               f"MAP against mu, one line per lam: {title}"))
            best = max(grid, key=grid.get)
            rows = [[_num(m)] + [_fmt(grid[m, lam]) if (m, lam) in grid else "" for lam in lams] for m in mus]
            bold = frozenset({(mus.index(best[0]), lams.index(best[1]) + 1)})
            blocks.append(Table(["mu \\ lam"] + [_num(lam) for lam in lams], rows, caption=f"MAP: {title}", bold=bold))
    return Section("Parameter sweeps", "sweeps", blocks)


def _section_iterations(path, table, plots) -> Section:
    columns, rows = table
    xs = [r[0] for r in rows]
    series = {c: (xs, [r[i] for r in rows]) for i, c in enumerate(columns[1:], 1)}
    best = {i: max(range(len(rows)), key=lambda j: rows[j][i]) for i in range(1, len(columns))}
    table = Table(columns, [[_num(r[0])] + [_fmt(v) for v in r[1:]] for r in rows], caption=f"from {path}",
                  bold=frozenset((j, i) for i, j in best.items()))
    return Section("MAP against Gibbs iteration", "iterations", [
        Plot("iterations", plots.lines(series, "Gibbs iteration", title="MAP against Gibbs iteration"),
             f"MAP against Gibbs iteration ({', '.join(columns[1:])}), from {Path(path).name}"), table])


def topic_rows(model, stats, evals: Sequence[RunEval], max_topics: int = 30, words: int = 10,
               depth: int = 10) -> tuple[list[list[str]], str]:
    """Top words of the topics most present in the top ``depth`` documents of the runs that mix
    in a topic model (lam < 1 in the name; all runs when none does)."""
    model_runs = [ev for ev in evals if ev.params.get("lam", 1.0) < 1.0] or list(evals)
    mass = np.zeros(model.n_topics)
    for ev in model_runs:
        by_qid: dict[str, list[tuple[float, str]]] = {}
        for r in ev.run:
            by_qid.setdefault(r.qid, []).append((-r.score, r.docno))
        for ranked in by_qid.values():
            for _, docno in sorted(ranked)[:depth]:
                doc = stats.doc_index.get(docno)
                if doc is not None:
                    ids, probs = model.doc_topics(doc, top=5)
                    mass[np.asarray(ids, dtype=np.int64)] += probs
    order = np.argsort(-mass, kind="stable")[:max_topics]
    total = mass.sum()
    rows = []
    for k in order:
        term_ids, _ = model.topic_words(int(k), top=words)
        share = f"{100 * mass[k] / total:.1f}%" if total else ""
        rows.append([str(int(k)), share, " ".join(stats.terms[w] for w in term_ids)])
    how = (f"The {len(order)} of {model.n_topics} topics with the most weight (top-5 topics of each document) in the "
           f"top {depth} documents of {', '.join(ev.label for ev in model_runs)}.")
    return rows, how


def _section_model(model, stats, evals, model_name) -> Section:
    section = hook(model.kind, "report_section")  # e.g. PAM's correlations, TCM's collocations
    if section is not None:
        part = section(model, stats.terms)
        items = []
        if part.get("figure"):
            items.append(Plot(*part["figure"]))
        items.append(Para(part["text"], code=True))
        return Section(f"{part['title']} of {model_name}", "topics", items)
    rows, how = topic_rows(model, stats, evals)
    return Section(f"Topics of {model_name}", "topics", [Table(["topic", "share", "top words"], rows), Para(how)])


# -- rendering -------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
  color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;color:#555;padding:.2em 0}
code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.6em;white-space:pre-wrap;word-break:break-all}
img{max-width:100%}figure{margin:1em 0}figcaption{color:#555;font-size:.9em}nav a{margin-right:1em}
p.note{color:#555;font-size:.9em}
"""
_OWN_PLOT = re.compile(r"(topic_differences|precision_recall|iterations|sweep\d+_(mu|lam))\.png")
_NUMERIC = re.compile(r"^[+-]?(\d[\d.,]*|n/a|<0\.0001)[%\u2020\u2021]*$|^\d+ / \d+ / \d+$")


def _html_table(t: Table) -> str:
    out = ["<table>"]
    if t.caption:
        out.append(f"<caption>{html.escape(t.caption)}</caption>")
    out.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in t.header) + "</tr>")
    for i, row in enumerate(t.rows):
        cells = []
        for j, c in enumerate(row):
            text = html.escape(c)
            if (i, j) in t.bold:
                text = f"<b>{text}</b>"
            cls = ' class="num"' if _NUMERIC.match(c) else ""
            cells.append(f"<td{cls}>{text}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    table = "\n".join(out)
    if t.collapsed:
        return f"<details><summary>{html.escape(t.caption or 'table')}</summary>\n{table}\n</details>"
    return table


def render_html(title: str, intro: list, sections: list[Section]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts.append("<nav>" + "".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in sections) + "</nav>")

    def block(b) -> str:
        if isinstance(b, Table):
            return _html_table(b)
        if isinstance(b, Plot):
            data = base64.b64encode(b.png).decode("ascii")
            return (f'<figure><img alt="{html.escape(b.caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{html.escape(b.caption)}</figcaption></figure>")
        return f"<pre>{html.escape(b.text)}</pre>" if b.code else f'<p class="note">{html.escape(b.text)}</p>'

    parts += [block(b) for b in intro]
    for s in sections:
        parts.append(f'<h2 id="{s.anchor}">{html.escape(s.title)}</h2>')
        parts += [block(b) for b in s.blocks]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(title: str, intro: list, sections: list[Section], plot_dir: str = "plots") -> str:
    def block(b) -> str:
        if isinstance(b, Table):
            head = [f"*{b.caption}*", ""] if b.caption else []
            rows = [[f"**{_md_cell(c)}**" if (i, j) in b.bold else _md_cell(c) for j, c in enumerate(r)]
                    for i, r in enumerate(b.rows)]
            align = ["---"] + ["---:" if all(_NUMERIC.match(r[j]) for r in b.rows if r[j]) else "---"
                               for j in range(1, len(b.header))]
            lines = ["| " + " | ".join(map(_md_cell, b.header)) + " |", "|" + "|".join(align) + "|"]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
            return "\n".join(head + lines)
        if isinstance(b, Plot):
            return f"![{b.caption}]({plot_dir}/{b.name}.png)"
        return f"    {b.text}" if b.code else b.text

    parts = [f"# {title}", ""] + [block(b) + "\n" for b in intro]
    for s in sections:
        parts += [f"## {s.title}", ""] + [block(b) + "\n" for b in s.blocks]
    return "\n".join(parts)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# -- the report ------------------------------------------------------------------------------


class ReportFiles(NamedTuple):
    html: Path
    markdown: Path


def _resolve_baseline(evals: list[RunEval], baseline) -> RunEval:
    if baseline is None:
        return evals[0]
    for ev in evals:
        if str(baseline) in (ev.label, str(ev.path), ev.path.name):
            return ev
    raise ValueError(f"baseline {str(baseline)!r} is none of the runs; give one of: "
                     f"{', '.join(ev.label for ev in evals)}")


def _load_model(model, index):
    if model is None or not isinstance(model, (str, os.PathLike)):
        return model
    if index is None:
        raise ValueError("--model needs --index (the index the model was trained on) for its words")
    from ..core.modelfiles import load_model

    return load_model(model, index)


def build_report(runs, qrels, *, baseline=None, out_dir=OUT_DIR, measures=DEFAULT_MEASURES,
                 iterations=None, model=None, index=None, title: str | None = None,
                 alpha: float = ALPHA, command: str | None = None) -> ReportFiles:
    """Evaluate ``runs`` and write ``report.html`` and ``report.md`` (with ``plots/``) into ``out_dir``.

    Parameters
    ----------
    runs : mapping label -> run file, or a sequence of ``PATH`` / ``LABEL=PATH``
    qrels : path, ``irds:`` id, or list of Qrel
    baseline : label, path or file name of one of the runs; default the first
    measures : measure names as ``topicir eval --measures`` takes them; MAP is always included
    iterations : CSV/JSON table with columns iteration, avg1, avg2 (MAP against Gibbs iteration)
    model, index : a topic model (object, or directory loaded with ``models_io.load_model``) and its
        index (``Index`` or directory); adds the model's most present topics and their top words
    command : the command line shown in the report; default the equivalent ``topicir report``
    """
    from . import plots
    from ..core.sources import load_qrels

    run_args = [f"{k}={v}" for k, v in runs.items()] if isinstance(runs, Mapping) else [str(r) for r in runs]
    if not isinstance(runs, Mapping):
        runs = label_runs(runs)
    if not runs:
        raise ValueError("no runs to report on")
    for path in runs.values():
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such run file")
    qrels_name = qrels if isinstance(qrels, (str, os.PathLike)) else "(given qrels)"
    qrels = load_qrels(qrels) if isinstance(qrels, (str, os.PathLike)) else list(qrels)
    if not judged_topics(qrels):
        raise ValueError(f"{qrels_name}: no topic has a relevant document; is this the right qrels file?")
    if alpha is None or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if isinstance(index, (str, os.PathLike)):
        from ..core.index import Index

        index = Index(index)
    model_arg = model if isinstance(model, (str, os.PathLike)) else None
    model_name = Path(model).stem if model_arg is not None else type(model).__name__
    model = _load_model(model, index)
    table = read_iterations(iterations) if iterations else None  # fails before the evaluation
    if model is not None and index is None:
        raise ValueError("a topic model needs its index (index=...) to show its words")

    evals = evaluate_runs(runs, qrels, measures)
    base = _resolve_baseline(evals, baseline)
    keys = [k for k in evals[0].means]
    out_dir = Path(out_dir)
    if command is None:
        args = ["topicir", "report", *run_args, "--qrels", str(qrels_name), "--baseline", base.label,
                "--out", str(out_dir)]
        if list(measures) != list(DEFAULT_MEASURES):
            args += ["--measures", *map(str, measures)]
        if iterations:
            args += ["--iterations", str(iterations)]
        if model_arg is not None:
            args += ["--model", str(model_arg), "--index", str(index.path)]
        command = shlex.join(args)

    sections = [_section_summary(evals, base, keys, alpha)]
    if len(evals) > 1:
        sections.append(_section_significance(evals, base, keys, alpha))
    sections += [_section_topics(evals, base, plots), _section_pr(evals, plots)]
    sweeps = find_sweeps(evals)
    if sweeps:
        sections.append(_section_sweeps(sweeps, base, keys, plots))
    if table is not None:
        sections.append(_section_iterations(iterations, table, plots))
    if model is not None:
        sections.append(_section_model(model, index.stats, evals, model_name))

    runs_table = Table(["run", "file", "topics in run"],
                       [[ev.label, str(ev.path), str(len({r.qid for r in ev.run}))] for ev in evals])
    n_judged = len(judged_topics(qrels))
    intro = [Para(command, code=True),
             Para(f"qrels: {qrels_name} ({n_judged} topics with relevant documents); baseline: {base.label}; "
                  f"measures through ir-measures, as topicir eval."),
             runs_table]
    title = title or f"Evaluation of {len(evals)} run{'s' * (len(evals) > 1)}"

    out_dir.mkdir(parents=True, exist_ok=True)
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    for old in plot_dir.glob("*.png"):
        if _OWN_PLOT.fullmatch(old.name):
            old.unlink()  # a plot of an earlier report into the same directory
    for s in sections:
        for b in s.blocks:
            if isinstance(b, Plot):
                (plot_dir / f"{b.name}.png").write_bytes(b.png)
    html_path, md_path = out_dir / "report.html", out_dir / "report.md"
    _write_text(html_path, render_html(title, intro, sections))
    _write_text(md_path, render_markdown(title, intro, sections))
    return ReportFiles(html_path, md_path)
