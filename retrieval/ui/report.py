"""Evaluation reports: ``topicir report RUN... --qrels FILE [--baseline RUN] [--out DIR]``.

Each run is evaluated with :func:`retrieval.core.evaluate.aggregate` and :func:`~retrieval.core.evaluate.per_topic`,
the functions behind ``topicir eval``, so the numbers are the same. The report compares every run
with a baseline run (paired t-test and Wilcoxon signed-rank test over the judged topics, per-topic
wins, ties and losses), draws per-topic differences and 11-point precision-recall curves, finds
parameter sweeps in run file names (``...mu1000_lam0.7.txt``, as :func:`retrieval.core.runs.run_name`
writes them) and plots MAP against each parameter, and renders a table of MAP against Gibbs
iteration (``--iterations``) and the top words of each topic model's topics (``--model``, once per model).

It writes ``report.html`` (self-contained: plots are embedded PNGs) and ``report.md`` (plots in
``plots/``) into the output directory.
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm import tqdm

from ..core.plugins import hook
from ..core.evaluate import DEFAULT_MEASURES, judged_topics
from .report_eval import (ALPHA, HEADLINE, IPREC, OUT_DIR, RECALL_LEVELS, RunEval, compare_to_baseline,
                          evaluate_runs, find_sweeps, label_of, label_runs, read_iterations)
from .report_render import (_OWN_PLOT, Para, Plot, Section, Table, _fmt, _fmt_p, _num, _write_text, render_html,
                            render_markdown)


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
                           f"Per-topic AP of each run minus {base.label}, topics sorted by the difference."))
    header = ["topic"] + [ev.label for ev in evals] + [f"\u0394 {ev.label}" for ev in others]
    rows = [[q] + [_fmt(ev.per_topic[HEADLINE][q]) for ev in evals]
            + [f"{ev.per_topic[HEADLINE][q] - base.per_topic[HEADLINE][q]:+.4f}" for ev in others] for q in qids]
    blocks.append(Table(header, rows, caption=f"AP per topic ({len(qids)} judged topics); \u0394 against {base.label}",
                        collapsed=True))
    return Section("Per-topic AP", "per-topic", blocks)


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


def topic_rows(model, stats, runs: Sequence[RunEval], max_topics: int = 30, words: int = 10,
               depth: int = 10) -> tuple[list[list[str]], str]:
    """Top words of the topics most present in the top ``depth`` documents of ``runs``."""
    mass = np.zeros(model.n_topics)
    for ev in runs:
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
           f"top {depth} documents of {', '.join(ev.label for ev in runs)}.")
    return rows, how


class ReportModel(NamedTuple):
    """A topic model shown in a report: its name there, the model, its file (None for an object)."""
    name: str
    model: object
    path: Path | None


def model_runs(given: ReportModel, evals: Sequence[RunEval]) -> tuple[list[RunEval], str]:
    """The runs made with ``given`` and how they were found. A model file's runs are those whose
    settings (``<run>.json``) name it or, without settings, whose file name holds its name as
    ``topicir run`` writes it (lam < 1); a model object's, the runs that mix in a topic model (lam < 1
    in the name). With none, every run, and the reason says so."""
    from ..core.runs import read_settings

    if given.path is None:
        found = [ev for ev in evals if ev.params.get("lam", 1.0) < 1.0]
    else:
        target, part = given.path.resolve(), f".{given.path.stem}."
        found = []
        for ev in evals:
            settings = read_settings(ev.path)
            if settings is not None and "model" in settings:
                made_with = settings["model"] is not None and Path(settings["model"]).resolve() == target
            else:
                made_with = part in f".{ev.path.name}" and ev.params.get("lam", 1.0) < 1.0
            if made_with:
                found.append(ev)
    if found:
        return found, ""
    return list(evals), f" None of the runs was made with {given.name}; these are the topics in all of them."


def _section_model(given: ReportModel, stats, evals, anchor: str) -> Section:
    section = hook(given.model.kind, "report_section")  # e.g. PAM's correlations, TCM's collocations
    part = section(given.model, stats.terms) if section is not None else None  # None: the default table
    if part is not None:
        items = []
        if part.get("figure"):
            items.append(Plot(*part["figure"]))
        items.append(Para(part["text"], code=True))
        return Section(f"{part['title']} of {given.name}", anchor, items)
    runs, caveat = model_runs(given, evals)
    rows, how = topic_rows(given.model, stats, runs)
    return Section(f"Topics of {given.name}", anchor, [Table(["topic", "share", "top words"], rows), Para(how + caveat)])


def _section_expansions(evals, terms: int = 10) -> Section | None:
    """Per run with an expansions file beside it (``topicir run --feedback``), each topic's expanded
    query (its heaviest ``terms`` terms) and, for topic feedback, the topics that expanded it."""
    from ..core.runs import expansions_path, read_expansions

    blocks = []
    for ev in evals:
        path = expansions_path(ev.path)
        if not path.is_file():
            continue
        records = sorted(read_expansions(path), key=lambda r: (len(r["qid"]), r["qid"]))
        chains = any(c for r in records for c, _, _ in r.get("topics", []))
        header = ["topic", "expanded query (weight)"]
        if any(r.get("topics") for r in records):
            header.append("topics P(k|Q)" + (" (chain:topic)" if chains else ""))
        rows = []
        for r in records:
            row = [r["qid"], ", ".join(f"{t} {w:.3f}" for t, w in r["terms"][:terms])]
            if len(header) == 3:
                row.append(", ".join(f"{f'{c}:' if chains else ''}{k} {p:.2f}" for c, k, p in r.get("topics", [])))
            rows.append(row)
        what = f"{records[0]['method']} {records[0]['settings']}" if records else "no topics"
        blocks.append(Table(header, rows, caption=f"{ev.label}: feedback {what}, from {path.name}", collapsed=True))
    if not blocks:
        return None
    note = (f"Pseudo-relevance feedback (topicir run --feedback): each query as it was ranked again, the original "
            f"query's terms and the feedback terms with their weights in it (the {terms} heaviest).")
    return Section("Feedback expansions", "feedback", blocks + [Para(note)])


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


def _report_models(model, index) -> list[ReportModel]:
    """``model`` (one model or file, or a list of them) loaded, each named by its file (by its path
    where two files share a name; an object by its class)."""
    given = list(model) if isinstance(model, (list, tuple)) else [] if model is None else [model]
    is_file = [isinstance(m, (str, os.PathLike)) for m in given]
    names = [Path(m).name if f else type(m).__name__ for m, f in zip(given, is_file)]
    names = [str(m) if f and names.count(n) > 1 else n for m, f, n in zip(given, is_file, names)]
    names = [n if names[:i].count(n) == 0 else f"{n} ({names[:i].count(n) + 1})" for i, n in enumerate(names)]
    if any(is_file) and index is None:
        raise ValueError("--model needs --index (the index the model was trained on) for its words")
    from ..core.modelfiles import load_model

    return [ReportModel(n, load_model(m, index), Path(m)) if f else ReportModel(n, m, None)
            for m, f, n in zip(given, is_file, names)]


def build_report(runs, qrels, *, baseline=None, out_dir=OUT_DIR, measures=DEFAULT_MEASURES,
                 iterations=None, model=None, index=None, title: str | None = None,
                 alpha: float = ALPHA, command: str | None = None, progress: bool = True) -> ReportFiles:
    """Evaluate ``runs`` and write ``report.html`` and ``report.md`` (with ``plots/``) into ``out_dir``.

    Parameters
    ----------
    runs : mapping label -> run file, or a sequence of ``PATH`` / ``LABEL=PATH``
    qrels : path, ``irds:`` id, or list of Qrel
    baseline : label, path or file name of one of the runs; default the first
    measures : measure names as ``topicir eval --measures`` takes them; MAP is always included
    iterations : CSV/JSON table with columns iteration, avg1, avg2 (MAP against Gibbs iteration)
    model, index : a topic model (object, or file loaded with :func:`retrieval.core.modelfiles.load_model`),
        or a list of them, and the index they were trained on (``Index`` or directory); adds a section per
        model, named by its file: its topics most present in the top documents of the runs made with it
    command : the command line shown in the report; default the equivalent ``topicir report``
    progress : a progress bar over the runs evaluated and the sections drawn
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
    models = _report_models(model, index)
    table = read_iterations(iterations) if iterations else None  # fails before the evaluation
    if models and index is None:
        raise ValueError("a topic model needs its index (index=...) to show its words")

    bar = tqdm(total=len(runs) + 5 + (table is not None) + len(models), desc="report", unit="step",
               disable=not progress)
    evals = evaluate_runs(runs, qrels, measures, on_run=bar.update)
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
        for m in models:
            args += ["--model", str(m.path)] if m.path is not None else []
        if any(m.path is not None for m in models):
            args += ["--index", str(index.path)]
        command = shlex.join(args)

    def step(section):
        bar.update()
        return section

    sections = [step(_section_summary(evals, base, keys, alpha))]
    if len(evals) > 1:
        sections.append(_section_significance(evals, base, keys, alpha))
    bar.update()
    sections += [step(_section_topics(evals, base, plots)), step(_section_pr(evals, plots))]
    sweeps = find_sweeps(evals)
    if sweeps:
        sections.append(_section_sweeps(sweeps, base, keys, plots))
    bar.update()
    if table is not None:
        sections.append(step(_section_iterations(iterations, table, plots)))
    for i, m in enumerate(models):
        sections.append(step(_section_model(m, index.stats, evals, "topics" if i == 0 else f"topics-{i + 1}")))
    expansions = _section_expansions(evals)
    if expansions is not None:
        sections.append(expansions)

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
    bar.close()
    return ReportFiles(html_path, md_path)
