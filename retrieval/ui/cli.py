"""The ``topicir`` command: argparse only; every subcommand is one library call."""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path

from .. import __version__

log = logging.getLogger("topicir")


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None


def _topics_name(source: str) -> str:
    return source.removeprefix("irds:").replace("/", "-") if source.startswith("irds:") else Path(source).name.split(".")[0]


def cmd_index(args) -> int:
    from ..core.index import build_index

    index = build_index(args.sources, args.out, threads=args.threads, force=args.force)
    m = index.manifest
    print(f"{index.path}: {m['n_docs']} documents, {m['n_terms']} terms, {m['n_tokens']} tokens, "
          f"fingerprint {m['fingerprint']} ({m['build_seconds']} s)")
    return 0


def cmd_run(args) -> int:
    from ..core.baselines import run_baseline
    from ..core.ranking import run_name, save_run, sweep_topics
    from ..core.index import Index
    from ..core.sources import load_topics

    index = Index(args.index)
    topics = load_topics(args.topics)
    tname = args.topics_name or _topics_name(args.topics)
    out_dir = Path(args.out_dir)
    if args.baseline:
        run = run_baseline(index, topics, args.baseline, field=args.field, depth=args.depth, mu=args.mu[0])
        params = {"mu": f"{args.mu[0]:g}"} if args.baseline == "qld" else {}  # as `topicir compare` names it
        path = Path(args.out or out_dir / run_name(f"{index.name}.{tname}.{args.field}", args.baseline, **params))
        print(save_run(run, path, tag=args.tag or f"topicir-{args.baseline}", depth=args.depth))
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
        path = Path(args.out) if args.out else out_dir / run_name(f"{index.name}.{tname}.{args.field}", model_name, **params)
        print(save_run(run, path, tag=args.tag or f"topicir-{model_name}", depth=args.depth))
    return 0


def cmd_train(args) -> int:
    from ..core.index import Index
    from ..core.modelfiles import train_model

    params = dict(n_topics=args.topics, alpha=args.alpha, beta=args.beta, n_chains=args.chains,
                  n_iter=args.iterations, burn_in=args.burn_in, sample_every=args.sample_every,
                  init=args.init, optimize_alpha=args.optimize_alpha, n_shards=args.shards,
                  seed=args.seed, n_jobs=args.threads)
    if args.kind == "tcm":
        params = dict(n_topics=args.topics, alpha=args.alpha, alpha0=args.alpha0, p_stop=args.p_stop,
                      max_len=args.max_len, resample_alpha0=args.resample_alpha0, n_chains=args.chains,
                      n_iter=args.iterations, burn_in=args.burn_in, sample_every=args.sample_every,
                      init=args.tcm_init, sampler=args.tcm_sampler, n_shards=args.shards, seed=args.seed,
                      n_jobs=args.threads)
    if args.kind == "pam":
        params = dict(n_super=args.super, n_sub=args.sub, alpha_root=args.alpha_root, beta=args.beta,
                      n_chains=args.chains, n_iter=args.iterations, burn_in=args.burn_in,
                      sample_every=args.sample_every, init=args.init, sampler=args.sampler,
                      n_shards=args.shards, seed=args.seed, n_jobs=args.threads)
    params = {k: v for k, v in params.items() if not (k == "init" and v is None)}  # model default
    model, path = train_model(Index(args.index), args.kind, args.out, checkpoint=not args.no_checkpoint, **params)
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
    from ..experiments.compare import eval_report

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
    from ..experiments.smoothing import TRAIN, smoothing_table

    train = dict(TRAIN, n_chains=args.chains, n_iter=args.iterations, burn_in=args.burn_in,
                 sample_every=args.sample_every)
    if args.kind == "tcm":
        from ..experiments.pam_eval import smoothing_comparison

        rows = smoothing_comparison(Path(args.data), args.collections, Path(args.indexes), ks=args.k,
                                    lams=args.lam, mu=args.mu, train=train, kinds=("lda", "tcm"))
        print(format_table(rows, title=f"MAP: QL vs LDA vs TCM smoothing (title queries, mu={args.mu:g}, "
                                       f"{args.chains} chains, {args.iterations} sweeps; TCM queries segmented "
                                       f"into collocations); LOCO = K and lam chosen on the other collections"))
        return 0
    if args.kind == "pam":
        from ..experiments.pam_eval import smoothing_comparison

        rows = smoothing_comparison(Path(args.data), args.collections, Path(args.indexes), ks=args.k,
                                    lams=args.lam, mu=args.mu, train=train)
        print(format_table(rows, title=f"MAP: QL vs LDA vs PAM smoothing (title queries, mu={args.mu:g}, "
                                       f"{args.chains} chains, {args.iterations} sweeps; PAM K = K sub-topics "
                                       f"under K/8 super-topics); LOCO = K and lam chosen on the other collections"))
        return 0
    rows = smoothing_table(Path(args.data), args.collections, Path(args.indexes), ks=args.k, lams=args.lam,
                           mu=args.mu, kind=args.kind, train=train)
    print(format_table(rows, title=f"MAP: QL vs {args.kind.upper()} smoothing (title queries, mu={args.mu:g}, "
                                   f"{args.chains} chains, {args.iterations} sweeps); LOCO = K and lam chosen "
                                   f"on the other collections"))
    return 0


def cmd_pam_view(args) -> int:
    from ..core.index import Index
    from ..core.modelfiles import load_model
    from ..adapters.pam import correlation_figure, correlation_rows, correlation_text

    index = Index(args.index)
    model = load_model(args.model, index)
    if not hasattr(model, "correlations"):
        raise ValueError(f"{args.model}: a {type(model).__name__} model has no super-topics; pass a PAM model")
    rows = correlation_rows(model, index.stats.terms, chain=args.chain, n_super=args.supers,
                            n_sub=args.subs, n_words=args.words)
    print(correlation_text(rows))
    if args.out:
        out = Path(args.out)
        out.write_bytes(correlation_figure(rows, fmt=out.suffix.lstrip(".").lower() or "png"))
        print(out)
    return 0


def cmd_tcm_view(args) -> int:
    from ..core.index import Index
    from ..core.modelfiles import load_model
    from ..adapters.tcm import collocation_rows, phrase_rows, view_text

    index = Index(args.index)
    model = load_model(args.model, index)
    if not hasattr(model, "topic_collocations"):
        raise ValueError(f"{args.model}: a {type(model).__name__} model has no collocations; pass a TCM model")
    terms = index.stats.terms
    rows = collocation_rows(model, terms, topics=args.topic_ids, n_topics=args.topics, top=args.top,
                            chain=args.chain, min_len=args.min_len)
    print(view_text(rows, phrase_rows(model, terms, top=args.phrases, chain=args.chain) if args.phrases else None))
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
    from .console import run_console

    return run_console(args.index, model=args.model, mu=args.mu, lam=args.lam, field=args.field,
                       topics=args.topics, qrels=args.qrels, hits=args.hits, history=args.history)


def cmd_report(args) -> int:
    from .report import build_report

    files = build_report(args.runs, args.qrels, baseline=args.baseline, out_dir=args.out, measures=args.measures,
                         iterations=args.iterations, model=args.model, index=args.index, title=args.title)
    print(f"{files.html}\n{files.markdown}")
    return 0


def cmd_bench(args) -> int:
    if args.area == "ql":
        from ..bench.ql import main as bench
    elif args.area == "tcm":
        from ..bench.tcm import main as bench
    elif args.area == "pam":
        from ..bench.pam import main as bench

        bench(args.rest)
        return 0
    else:
        from ..bench.lda import main as bench
    return bench(args.rest) or 0


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
    s.add_argument("--threads", type=int, default=2)
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
    s.add_argument("--model", help="topic model directory (topicir train ...)")
    s.add_argument("--baseline", choices=BASELINES, help="run a Lucene baseline instead")
    s.add_argument("--out", help="run file (default: topics_runs/run.<index>.<topics>.<field>.<model>.<params>.txt)")
    s.add_argument("--out-dir", default=str(RUNS_DIR))
    s.add_argument("--topics-name", help="name used in run file names (default: from --topics)")
    s.add_argument("--tag", help="run tag (last column)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("train", help="train a topic model on an index (checkpoints; rerun to resume)")
    s.add_argument("kind", choices=("lda", "pam", "tcm"))
    s.add_argument("--index", required=True)
    s.add_argument("--out", help="model file (default: <index>/models/<kind>-k<K>-c<chains>-i<iters>-s<seed>.npz)")
    s.add_argument("--topics", type=int, default=800, help="number of topics K (papers: 800)")
    s.add_argument("--alpha", type=float, default=None, help="symmetric alpha (default 50/K)")
    s.add_argument("--beta", type=float, default=0.01)
    s.add_argument("--chains", type=int, default=3)
    s.add_argument("--iterations", type=int, default=100)
    s.add_argument("--burn-in", type=int, default=50)
    s.add_argument("--sample-every", type=int, default=10)
    s.add_argument("--init", choices=("online", "random", "sparse"), default=None,
                   help="LDA default online (a sequential pass draws every token given those "
                        "before it), PAM default random; sparse: the PAM paper's growing document set")
    s.add_argument("--optimize-alpha", action="store_true", help="asymmetric alpha by Minka's fixed point")
    s.add_argument("--shards", type=int, default=4, help="fixed document shards (results never depend on --threads)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--no-checkpoint", action="store_true")
    g = s.add_argument_group("pam", "four-level Pachinko Allocation (topicir train pam)")
    g.add_argument("--super", type=int, default=100, help="super-topics s (paper on AP: 100)")
    g.add_argument("--sub", type=int, default=800, help="sub-topics s' (paper on AP: 800)")
    g.add_argument("--alpha-root", type=float, default=0.01, help="fixed symmetric prior over super-topics")
    g.add_argument("--sampler", choices=("exact", "pruned"), default="exact",
                   help="pruned: sparse PAM, exact and edge-pruned sweeps alternate")
    g = s.add_argument_group("tcm", "Topical Collocation Model (topicir train tcm; --alpha defaults to 50/K)")
    g.add_argument("--alpha0", type=float, default=None,
                   help="DP concentration (paper: 100, resampled); default: alpha0 P0(w) = 0.01")
    g.add_argument("--resample-alpha0", action="store_true", help="resample alpha0 after every sweep")
    g.add_argument("--p-stop", type=float, default=0.5, help="p#, stop probability of P0's collocation length")
    g.add_argument("--max-len", type=int, default=8, help="longest collocation")
    g.add_argument("--tcm-sampler", choices=("sparse", "exact"), default="sparse",
                   help="sparse: bucket decomposition (same conditional, faster); exact: dense O(K)")
    g.add_argument("--tcm-init", choices=("random", "unigram"), default="random")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("iterations", help="MAP per sample iteration: Avg1 (chains alone) and Avg2 (chains averaged)")
    add_query_args(s)
    s.add_argument("--model", required=True)
    s.add_argument("--qrels", required=True)
    s.add_argument("--mu", type=float, default=MU)
    s.add_argument("--lam", type=float, default=LAM)
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
    s.add_argument("--mu", type=float, default=MU)
    s.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    s.add_argument("--measures", nargs="+", default=list(DEFAULT_MEASURES))
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser("regressions", help="build and check every shared test collection")
    s.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    s.add_argument("--indexes", default="indexes")
    s.add_argument("--collections", nargs="+", default=list(COLLECTIONS), choices=COLLECTIONS)
    s.set_defaults(func=cmd_regressions)

    s = sub.add_parser("smoothing", help="topic smoothing vs QL on the shared collections (LOCO-tuned K and lam)")
    s.add_argument("--kind", choices=("lda", "pam", "tcm"), default="lda",
                   help="pam, tcm: QL, LDA and PAM (TCM) side by side")
    s.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    s.add_argument("--indexes", default="indexes")
    s.add_argument("--collections", nargs="+", default=list(COLLECTIONS), choices=COLLECTIONS)
    s.add_argument("--k", type=lambda t: [int(x) for x in t.split(",")], default=[100, 200, 400, 800])
    s.add_argument("--lam", type=_floats, default=[0.5, 0.6, 0.7, 0.8, 0.9])
    s.add_argument("--mu", type=float, default=MU)
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
    s.add_argument("--model", help="topic model directory (topicir train ...)")
    s.add_argument("--mu", type=float, default=MU)
    s.add_argument("--lam", type=float, default=LAM, help="weight of QL against the topic model")
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

    s = sub.add_parser("pam-view", help="PAM topic correlations: super-topics, sub-topics by alpha_ij, top words")
    s.add_argument("--index", required=True)
    s.add_argument("--model", required=True, help="a PAM model file (topicir train pam)")
    s.add_argument("--chain", type=int, default=0)
    s.add_argument("--supers", type=int, default=10, help="super-topics shown (largest first)")
    s.add_argument("--subs", type=int, default=5, help="sub-topics per super-topic")
    s.add_argument("--words", type=int, default=8)
    s.add_argument("--out", help="also draw the graph into this .png or .svg file")
    s.set_defaults(func=cmd_pam_view)

    s = sub.add_parser("tcm-view", help="TCM collocations: top per topic by P(c|t) and smoothed P(t|c)")
    s.add_argument("--index", required=True)
    s.add_argument("--model", required=True, help="a TCM model file (topicir train tcm)")
    s.add_argument("--chain", type=int, default=0)
    s.add_argument("--topics", type=int, default=10, help="topics shown (largest first)")
    s.add_argument("--topic-ids", type=lambda t: [int(x) for x in t.split(",")], help="these topics instead")
    s.add_argument("--top", type=int, default=10, help="collocations per topic and list")
    s.add_argument("--min-len", type=int, default=1, help="shortest collocation listed (2: phrases only)")
    s.add_argument("--phrases", type=int, default=30, help="most frequent multi-word collocations shown first")
    s.set_defaults(func=cmd_tcm_view)

    for name, func, what in (("heldout", cmd_heldout, "held-out likelihood (empirical likelihood) of LDA and PAM on comp5"),
                             ("comp5", cmd_comp5, "20 Newsgroups comp5 classification with LDA and PAM (paper Table 6)")):
        s = sub.add_parser(name, help=what)
        s.add_argument("--data", required=True, help="20news-bydate.tar.gz, e.g. in ../shared/data/20news")
        s.add_argument("--kinds", nargs="+", default=["lda", "pam"], choices=("lda", "pam"))
        s.add_argument("--samples", type=int, default=1000, help="documents sampled for the empirical likelihood")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--threads", type=int, default=None)
        s.set_defaults(func=func)

    s = sub.add_parser("bench", help="benchmarks (ql: ranking speed; lda, pam: training speed vs tomotopy)")
    s.add_argument("area", choices=("ql", "lda", "pam", "tcm"))
    s.add_argument("rest", nargs=argparse.REMAINDER, help="options of the benchmark (see topicir bench AREA -- --help)")
    s.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    from .progress import progress_bars

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    warnings.simplefilter("default")
    try:
        with progress_bars(not args.quiet):
            return args.func(args)
    except (ValueError, KeyError, FileNotFoundError, FileExistsError) as exc:
        print(f"topicir {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"topicir {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
