"""The ``topicir`` command: argparse only; every subcommand is one library call."""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

from models.registry import kinds

from .. import __version__
from ..core.plugins import hook
from .guard import check_writable as _check_writable, cli_flags as _flags, finite as _finite
from .guard import floats as _floats, pos_int as _pos_int, run_guarded

log = logging.getLogger("topicir")


def _topics_name(source: str) -> str:
    return source.removeprefix("irds:").replace("/", "-") if source.startswith("irds:") else Path(source).name.split(".")[0]


def cmd_index(args) -> int:
    from ..core.index import build_index

    index = build_index(args.sources, args.out, threads=args.threads, force=args.force)
    m = index.manifest
    print(f"{index.path}: {m['n_docs']} documents, {m['n_terms']} terms, {m['n_tokens']} tokens, "
          f"fingerprint {m['fingerprint']} ({m['build_seconds']} s)")
    return 0


def _run_settings(args, index, *, method, mu, lam=None, model=None) -> dict:
    """What made a run, for the settings file beside it."""
    return {"method": method, "index": str(Path(index.path).resolve()), "fingerprint": index.fingerprint,
            "topics": str(args.topics), "field": args.field, "mu": mu, "lam": lam,
            "model": str(Path(model).resolve()) if model else None}


def cmd_run(args) -> int:
    from ..core.baselines import run_baseline
    from ..core.ranking import DEPTH, run_name, save_run, sweep_topics
    from ..core.index import Index
    from ..core.sources import load_topics

    index = Index(args.index)
    topics = load_topics(args.topics)
    tname = args.topics_name or _topics_name(args.topics)
    out_dir = Path(args.out_dir)
    _check_writable(Path(args.out).parent if args.out else out_dir)
    if args.baseline:
        run = run_baseline(index, topics, args.baseline, field=args.field, depth=args.depth, mu=args.mu[0])
        params = {"mu": f"{args.mu[0]:g}"} if args.baseline == "qld" else {}  # as `topicir compare` names it
        path = Path(args.out or out_dir / run_name(f"{index.name}.{tname}.{args.field}", args.baseline, **params))
        print(save_run(run, path, tag=args.tag or f"topicir-{args.baseline}", depth=args.depth,
                       params=_run_settings(args, index, method=args.baseline, mu=args.mu[0])))
        return 0
    model, model_name, lams = None, "ql", [1.0]
    if args.model:
        from ..core.modelfiles import load_model

        model = load_model(args.model, index)
        model_name, lams = Path(args.model).stem, args.lam
    settings = [(mu, lam) for mu in args.mu for lam in lams]
    if args.out and len(settings) > 1:
        raise ValueError("--out names one file; a sweep writes one run per setting into --out-dir")
    runs = sweep_topics(index, topics, settings, field=args.field, model=model, depth=args.depth)
    for (mu, lam), run in runs.items():
        params = {"mu": f"{mu:g}"} | ({"lam": f"{lam:g}"} if model is not None else {})
        params |= ({"depth": args.depth} if args.depth != DEPTH else {}) | ({"tag": args.tag} if args.tag else {})
        path = Path(args.out) if args.out else out_dir / run_name(f"{index.name}.{tname}.{args.field}", model_name, **params)
        print(save_run(run, path, tag=args.tag or f"topicir-{model_name}", depth=args.depth,
                       params=_run_settings(args, index, method=model_name, mu=mu,
                                            lam=lam if model is not None else None, model=args.model)))
    return 0


def train_parser(kind: str) -> argparse.ArgumentParser:
    """``topicir train KIND``: the estimator's own parameters, generated from its signature and
    docstring (see :mod:`retrieval.ui.estimator_args`)."""
    from models.registry import model_class

    from .estimator_args import add_estimator_args

    cls = model_class(kind)
    doc = (cls.__doc__ or "").strip().splitlines()[0]
    p = argparse.ArgumentParser(prog=f"topicir train {kind}", description=f"{doc} Checkpoints as it goes; "
                                f"rerun the same command to resume.")
    p.add_argument("--index", required=True, help="the index to train on")
    p.add_argument("--out", help="model file (default: <index>/models/<kind>-<settings>.npz)")
    p.add_argument("--no-checkpoint", action="store_true", help="write no checkpoint (no resume)")
    names = add_estimator_args(p.add_argument_group(f"{kind} parameters"), cls)
    if "executor" in names:
        p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                       help="train on Ray: a local cluster, or the one at ADDRESS (same model as locally)")
    return p


def cmd_train(args) -> int:
    from models.registry import model_class

    from ..core.index import Index
    from ..core.modelfiles import train_model

    targs = train_parser(args.kind).parse_args(args.rest)
    params = {name: getattr(targs, name) for name in model_class(args.kind)._param_names()
              if hasattr(targs, name)}
    if getattr(targs, "ray", None) is not None:
        from models.executors import executor_from_flag

        params["executor"] = executor_from_flag(targs.ray)
    try:
        model, path = train_model(Index(targs.index), args.kind, targs.out, checkpoint=not targs.no_checkpoint,
                                  progress=not args.quiet, **params)
    except ValueError as exc:
        raise ValueError(_flags(str(exc))) from None
    print(path)
    return 0


def cmd_iterations(args) -> int:
    from ..experiments.compare import format_table
    from ..core.index import Index
    from ..experiments.iterations import iteration_table
    from ..core.modelfiles import load_model
    from ..core.sources import load_qrels, load_topics

    index = Index(args.index)
    rows = iteration_table(index, load_model(args.model, index), load_topics(args.topics),
                           load_qrels(args.qrels), field=args.field, mu=args.mu, lam=args.lam, depth=args.depth)
    print(format_table(rows, title=f"MAP per sample iteration: {Path(args.model).name} on {index.name} "
                                   f"(mu={args.mu:g}, lam={args.lam:g})"))
    if args.csv:
        import csv

        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


def cmd_eval(args) -> int:
    from ..core.evaluate import judged_topics
    from ..core.sources import load_qrels
    from ..experiments.compare import eval_report

    if not judged_topics(load_qrels(args.qrels)):
        raise ValueError(f"{args.qrels}: no relevant judgment (no line with rel > 0); nothing to evaluate. "
                         f"Is this the qrels file?")

    print(eval_report(args.runs, args.qrels, args.measures, per_topic=args.per_topic))
    return 0


def cmd_compare(args) -> int:
    from ..core.evaluate import judged_topics
    from ..experiments.compare import compare, format_table, recall_note
    from ..core.index import Index
    from ..core.sources import load_qrels, load_topics

    index = Index(args.index)
    qrels = load_qrels(args.qrels)
    rows = compare(index, load_topics(args.topics), qrels, methods=args.methods,
                   field=args.field, mu=args.mu, depth=args.depth, measures=args.measures,
                   topics_name=_topics_name(args.topics))
    print(format_table(rows, title=f"{index.name}: {args.topics} ({args.field}); means over the "
                                   f"{len(judged_topics(qrels))} judged topics"))
    print(recall_note(args.measures), end="")
    return 0


def cmd_regressions(args) -> int:
    from ..experiments.compare import format_table
    from ..experiments.regressions import check, run_collection

    rows = []
    for name in args.collections:
        rows += run_collection(Path(args.data), name, Path(args.indexes))
    print(format_table(rows, title="Shared collections: title queries, mu=1000, depth 1000, judged topics"))
    misses = check(rows)
    for miss in misses:
        print(f"REGRESSION: {miss}", file=sys.stderr)
    return 1 if misses else 0


def cmd_smoothing(args) -> int:
    from ..experiments.compare import format_table
    from ..experiments.smoothing import REFERENCE_KIND, TRAIN, comparison_table

    train = dict(TRAIN, n_chains=args.chains, n_iter=args.iterations, burn_in=args.burn_in,
                 sample_every=args.sample_every)
    kinds = list(dict.fromkeys([REFERENCE_KIND, args.kind]))  # a new kind is shown beside LDA
    rows = comparison_table(Path(args.data), args.collections, Path(args.indexes), kinds, ks=args.k,
                            lams=args.lam, mu=args.mu, train=train)
    print(format_table(rows, title=f"MAP: QL vs {' vs '.join(k.upper() for k in kinds)} smoothing (title "
                                   f"queries, mu={args.mu:g}, {args.chains} chains, {args.iterations} sweeps); "
                                   f"LOCO = K and lam chosen on the other collections"))
    return 0


def cmd_heldout(args) -> int:
    from ..experiments.compare import format_table
    from ..experiments.pam_eval import heldout

    res = heldout(args.data, kinds=args.kinds, seed=args.seed, n_docs=args.samples, n_jobs=args.threads)
    print(format_table([{"model": k, **v} for k, v in res.items()],
                       title="comp5 held-out likelihood (empirical likelihood, 75/25 split; lower bits/word is better)"))
    return 0


def cmd_comp5(args) -> int:
    from ..experiments.compare import format_table
    from ..experiments.pam_eval import PAPER_COMP5, comp5_accuracy

    res = comp5_accuracy(args.data, kinds=args.kinds, seed=args.seed, n_docs=args.samples, n_jobs=args.threads)
    rows = [{"model": k, "paper %": PAPER_COMP5.get(k, float("nan")), **v} for k, v in res.items()]
    print(format_table(rows, title="20 Newsgroups comp5 classification accuracy (%), one model per class", digits=2))
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    print(run_demo(Path(args.indexes), args.dataset, k=args.k, iterations=args.iterations))
    return 0


def cmd_console(args) -> int:
    from .console_app import run_console

    return run_console(args.index, model=args.model, mu=args.mu, lam=args.lam, field=args.field,
                       topics=args.topics, qrels=args.qrels, hits=args.hits, history=args.history)


def cmd_report(args) -> int:
    from .report import build_report

    files = build_report(args.runs, args.qrels, baseline=args.baseline, out_dir=args.out, measures=args.measures,
                         iterations=args.iterations, model=args.model, index=args.index, title=args.title)
    print(f"{files.html}\n{files.markdown}")
    return 0


def bench_areas() -> list[str]:
    """One benchmark per module of retrieval/bench (ql, and one per model kind)."""
    import pkgutil

    from .. import bench

    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def cmd_bench(args) -> int:
    import importlib

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    return importlib.import_module(f"..bench.{args.area}", __package__).main(rest) or 0


def build_parser() -> argparse.ArgumentParser:
    from ..core.baselines import BASELINES
    from ..core.ranking import DEPTH, RUNS_DIR
    from .console import HITS
    from .demo import DATASET
    from ..core.evaluate import DEFAULT_MEASURES
    from ..experiments.compare import METHODS
    from ..experiments.regressions import COLLECTIONS
    from .report import OUT_DIR as REPORTS_DIR
    from ..core.scoring import LAM, MU
    from ..core.trec import TOPIC_FIELDS

    p = argparse.ArgumentParser(prog="topicir", description="Topic-model-smoothed query likelihood over Lucene indexes.")
    p.add_argument("--version", action="version", version=f"topicir {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only, no progress bars")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("index", help="index TREC SGML files/dirs (plain or .gz), JSON lines, or irds:<id>")
    s.add_argument("sources", nargs="+", help="files, directories, or irds:<dataset-id>")
    s.add_argument("--out", required=True, help="index directory, e.g. indexes/ap")
    s.add_argument("--threads", type=_pos_int, default=2)
    s.add_argument("--force", action="store_true", help="replace an existing index (atomically)")
    s.set_defaults(func=cmd_index)

    def add_query_args(s):
        s.add_argument("--index", required=True)
        s.add_argument("--topics", required=True, help="TREC topics file, TSV, or irds:<id>")
        s.add_argument("--field", default="title", choices=TOPIC_FIELDS)
        s.add_argument("--depth", type=int, default=DEPTH)

    s = sub.add_parser("run", help="rank topics over the whole collection and write TREC run files")
    add_query_args(s)
    s.add_argument("--mu", type=_floats, default=[MU], help="Dirichlet prior; comma list for a sweep")
    s.add_argument("--lam", type=_floats, default=[LAM], help="weight of QL against the topic model; comma list for a sweep")
    s.add_argument("--model", help="topic model file (topicir train ...)")
    s.add_argument("--baseline", choices=BASELINES, help="run a Lucene baseline instead")
    s.add_argument("--out", help="run file (default: topics_runs/run.<index>.<topics>.<field>.<model>.<params>.txt)")
    s.add_argument("--out-dir", default=str(RUNS_DIR))
    s.add_argument("--topics-name", help="name used in run file names (default: from --topics)")
    s.add_argument("--tag", help="run tag (last column)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("train", help="train a topic model on an index (checkpoints; rerun to resume)",
                       description="topicir train KIND --help lists that kind's options.")
    s.add_argument("kind", choices=kinds(), help="the model kind")
    s.add_argument("rest", nargs=argparse.REMAINDER, help="--index DIR and the kind's options")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("iterations", help="MAP per sample iteration: Avg1 (chains alone) and Avg2 (chains averaged)")
    add_query_args(s)
    s.add_argument("--model", required=True)
    s.add_argument("--qrels", required=True)
    s.add_argument("--mu", type=_finite, default=MU)
    s.add_argument("--lam", type=_finite, default=LAM)
    s.add_argument("--csv", help="also write the table as CSV (for topicir report --iterations)")
    s.set_defaults(func=cmd_iterations)

    what = ("evaluate TREC runs with ir-measures: means over the judged topics (with a relevant document, "
            "column 'topics'); judged topics a run lacks count 0")
    s = sub.add_parser("eval", help=what, description=what)
    s.add_argument("runs", nargs="+")
    s.add_argument("--qrels", required=True, help="TREC qrels file or irds:<id>")
    s.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES), help="e.g. MAP P@10 nDCG@10 R@1000")
    s.add_argument("--per-topic", action="store_true")
    s.set_defaults(func=cmd_eval)

    s = sub.add_parser("compare", help="exact QL and the Lucene baselines side by side")
    add_query_args(s)
    s.add_argument("--qrels", required=True)
    s.add_argument("--mu", type=_finite, default=MU)
    s.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    s.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES))
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("regressions", help="build and check every shared test collection")
    s.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    s.add_argument("--indexes", default="indexes")
    s.add_argument("--collections", nargs="+", default=list(COLLECTIONS), choices=COLLECTIONS)
    s.set_defaults(func=cmd_regressions)

    s = sub.add_parser("smoothing", help="topic smoothing vs QL on the shared collections (LOCO-tuned K and lam)")
    s.add_argument("--kind", choices=kinds(), default="lda",
                   help="the model kind; another kind than lda is shown beside LDA")
    s.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    s.add_argument("--indexes", default="indexes")
    s.add_argument("--collections", nargs="+", default=list(COLLECTIONS), choices=COLLECTIONS)
    s.add_argument("--k", type=lambda t: [int(x) for x in t.split(",")], default=[100, 200, 400, 800])
    s.add_argument("--lam", type=_floats, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    s.add_argument("--mu", type=_finite, default=MU)
    s.add_argument("--chains", type=int, default=3)
    s.add_argument("--iterations", type=int, default=100)
    s.add_argument("--burn-in", type=int, default=50)
    s.add_argument("--sample-every", type=int, default=10)
    s.set_defaults(func=cmd_smoothing)

    s = sub.add_parser("demo", help="Cranfield: QL, BM25, BM25+RM3 and LDA smoothing with t-tests against QL")
    s.add_argument("--dataset", default=DATASET)
    s.add_argument("--indexes", default="indexes")
    s.add_argument("--k", type=int, help="LDA topics (default: the demo's 100)")
    s.add_argument("--iterations", type=int, help="LDA sweeps (default: the demo's 60)")
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("console", help="interactive queries: hits with snippets, score breakdowns, settings on the fly")
    s.add_argument("--index", required=True)
    s.add_argument("--model", help="topic model file (topicir train ...)")
    s.add_argument("--mu", type=_finite, default=MU)
    s.add_argument("--lam", type=_finite, default=LAM, help="weight of QL against the topic model")
    s.add_argument("--topics", help="topics file: #QID then runs topic QID")
    s.add_argument("--field", default="title", choices=TOPIC_FIELDS, help="field of #QID queries")
    s.add_argument("--qrels", help="qrels: mark relevant hits and show AP of #QID queries")
    s.add_argument("--hits", type=int, default=HITS, help="hits shown per query")
    s.add_argument("--history", help="history file (default: ~/.cache/topicir/console_history)")
    s.set_defaults(func=cmd_console)

    s = sub.add_parser("report", help="HTML and Markdown evaluation report: measures, significance, plots")
    s.add_argument("runs", nargs="+", help="run files, or LABEL=PATH")
    s.add_argument("--qrels", required=True, help="TREC qrels file or irds:<id>")
    s.add_argument("--baseline", help="label or file of the baseline run (default: the first)")
    s.add_argument("--out", default=str(REPORTS_DIR), help="directory for report.html, report.md and plots/")
    s.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES), help="MAP is always included")
    s.add_argument("--iterations", help="CSV/JSON table iteration,avg1,avg2 (MAP against Gibbs iteration)")
    s.add_argument("--model", help="topic model directory: show its topics' top words (needs --index)")
    s.add_argument("--index", help="the index the model was trained on")
    s.add_argument("--title")
    s.set_defaults(func=cmd_report)

    from ..experiments import coherence

    s = sub.add_parser("coherence", help="NPMI topic coherence of model files (any kind)",
                       description=coherence.__doc__)
    coherence.add_arguments(s)
    s.set_defaults(func=coherence.run)

    for kind in kinds():  # commands of a kind's own (pam-view, tcm-view, ...) come from its adapter
        add = hook(kind, "add_commands")
        if add is not None:
            add(sub)

    for name, func, what in (("heldout", cmd_heldout, "held-out likelihood (empirical likelihood) of LDA and PAM on comp5"),
                             ("comp5", cmd_comp5, "20 Newsgroups comp5 classification with LDA and PAM (paper Table 6)")):
        s = sub.add_parser(name, help=what)
        s.add_argument("--data", required=True, help="20news-bydate.tar.gz, e.g. in ../shared/data/20news")
        s.add_argument("--kinds", nargs="+", default=["lda", "pam"], choices=("lda", "pam", "glda"),
                       help="kinds that draw documents, at the paper's settings (gLDA at LDA's)")
        s.add_argument("--samples", type=int, default=1000, help="documents sampled for the empirical likelihood")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--threads", type=int, default=None)
        s.set_defaults(func=func)

    s = sub.add_parser("bench", help="benchmarks (ql: ranking speed; a model kind: its training speed)")
    s.add_argument("area", choices=bench_areas())
    s.add_argument("rest", nargs=argparse.REMAINDER, help="options of the benchmark (see topicir bench AREA -- --help)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    from .progress import progress_bars

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    warnings.simplefilter("default")
    with progress_bars(not args.quiet):
        return run_guarded(args.command, args.func, args, own_signals=argv is None)


if __name__ == "__main__":
    raise SystemExit(main())
