"""The ``topicir`` command: argparse only; every subcommand is one library call."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from models.registry import kinds

from .. import __version__
from ..core.plugins import hook
from .guard import check_writable as _check_writable, cli_flags as _flags, finite as _finite
from .guard import floats as _floats, pos_int as _pos_int, run_guarded, weights as _weights
from .cli_bench import add_bench
from .cli_more import add_coherence
from .cli_reference import add_cli_reference
from .cli_reproduce import add_reproduce

log = logging.getLogger("topicir")


def _topics_name(source: str) -> str:
    from ..core.ranking import topics_key

    return topics_key(source)


def cmd_index(args) -> int:
    from ..core.index import add_documents, build_index

    if args.add:
        if not args.index or args.out or args.force:
            raise ValueError("--add appends to an existing index: give it as --index DIR (not --out, "
                             "no --force)")
        index = add_documents(args.sources, args.index, threads=args.threads)
    elif not args.out or args.index:
        raise ValueError("give the new index as --out DIR (--index DIR with --add appends to an existing one)")
    else:
        index = build_index(args.sources, args.out, threads=args.threads, force=args.force)
    m = index.manifest
    added = (f"{m['n_added_docs']} documents added to {m['parents'][-1]['n_docs']}; now "
             if args.add else "")
    print(f"{index.path}: {added}{m['n_docs']} documents, {m['n_terms']} terms, {m['n_tokens']} tokens, "
          f"fingerprint {m['fingerprint']} ({m['build_seconds']} s)")
    return 0


def _weight(text: str) -> float:
    value = _weights(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"expected one weight in [0, 1], got {text!r}")
    return value[0]


def _run_settings(args, index, *, method, mu, lam=None, model=None) -> dict:
    """What made a run, for the settings file beside it."""
    return {"method": method, "index": str(Path(index.path).resolve()), "fingerprint": index.fingerprint,
            "topics": str(args.topics), "field": args.field, "mu": mu, "lam": lam,
            "model": str(Path(model).resolve()) if model else None}


def cmd_run(args) -> int:
    from ..core.baselines import MU_FREE, run_baseline
    from ..core.ranking import DEPTH, run_name, save_run, sweep_topics
    from ..core.index import Index
    from ..core.sources import load_topics

    from ..core.scoring import LAM

    if args.lam is not None and args.lam != [LAM] and (args.baseline or not args.model):
        raise ValueError(f"--lam {','.join(f'{x:g}' for x in args.lam)} weighs a topic model against QL: give "
                         f"--model MODEL{' instead of --baseline' if args.baseline else ''} (without one the run "
                         f"is plain QL)")
    fb = _feedback_settings(args)
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
                       params=_run_settings(args, index, method=args.baseline,
                                                   mu=args.mu[0] if args.baseline not in MU_FREE else None)))
        return 0
    model, model_name, lams = None, "ql", [1.0]
    if args.model:
        from ..core.modelfiles import load_model

        model = load_model(args.model, index)
        model_name, lams = Path(args.model).stem, args.lam or [LAM]
    settings = [(mu, lam) for mu in args.mu for lam in lams]
    if args.out and len(settings) > 1:
        raise ValueError("--out names one file; a sweep writes one run per setting into --out-dir")
    if fb is None:
        runs = {s: (run, None) for s, run in sweep_topics(index, topics, settings, field=args.field, model=model,
                                                          depth=args.depth).items()}
    else:
        from ..core.feedback import run_feedback

        runs = {(mu, lam): run_feedback(index, topics, fb, model=model, mu=mu, lam=lam, field=args.field,
                                        depth=args.depth) for mu, lam in settings}
    for (mu, lam), (run, expansions) in runs.items():
        params = {"mu": f"{mu:g}"} | ({"lam": f"{lam:g}"} if model is not None else {})
        params |= fb.params() if fb is not None else {}
        params |= ({"depth": args.depth} if args.depth != DEPTH else {}) | ({"tag": args.tag} if args.tag else {})
        path = Path(args.out) if args.out else out_dir / run_name(f"{index.name}.{tname}.{args.field}", model_name, **params)
        record = _run_settings(args, index, method=model_name, mu=mu, lam=lam if model is not None else None,
                               model=args.model) | ({"feedback": fb.as_dict()} if fb is not None else {})
        print(save_run(run, path, tag=args.tag or f"topicir-{model_name}", depth=args.depth, params=record,
                       expansions=list(expansions.values()) if expansions is not None else None))
    return 0


def _feedback_settings(args):
    """The feedback :class:`~retrieval.core.feedback.Settings` of ``topicir run``, or None."""
    from ..core.feedback import Settings

    given = [flag for flag, v in (("--fb-docs", args.fb_docs), ("--fb-terms", args.fb_terms),
                                  ("--fb-weight", args.fb_weight), ("--fb-topics", args.fb_topics)) if v is not None]
    if args.feedback is None:
        if given:
            raise ValueError(f"{given[0]} sets pseudo-relevance feedback: add --feedback rm3 or --feedback topics")
        return None
    if args.baseline:
        raise ValueError(f"--feedback {args.feedback} ranks with topicir's query likelihood: drop --baseline "
                         f"{args.baseline} (--baseline bm25+rm3 is Anserini's RM3)")
    if args.feedback == "topics" and not args.model:
        raise ValueError("--feedback topics expands queries with a topic model's topics: give --model MODEL "
                         "(--feedback rm3 needs none)")
    if args.fb_topics is not None and args.feedback != "topics":
        raise ValueError("--fb-topics is the number of topics of --feedback topics; rm3 has none")
    values = {"fb_docs": args.fb_docs, "fb_terms": args.fb_terms, "original_weight": args.fb_weight,
              "fb_topics": args.fb_topics}
    return Settings(args.feedback, **{k: v for k, v in values.items() if v is not None})


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
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only, no progress bars")
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
    if targs.quiet and not args.quiet:  # `topicir train KIND -q ...`
        from .logs import setup_logging

        args.quiet = True
        setup_logging(True)
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


def cmd_heldout(args) -> int:
    import math

    from ..core.index import Index
    from ..core.infer import heldout_likelihood
    from ..core.modelfiles import load_model

    index = Index(args.index)
    c = heldout_likelihood(load_model(args.model, index), index, args.docs, seed=args.seed)
    what = (", ".join(args.docs) + " (analysed by the index)") if args.docs else "the documents added after training"
    print(f"{Path(args.model).name} on {index.path}: {c.n_docs} documents of {what}, by document completion "
          f"(tokens at even positions folded in, {c.n_observed}; at odd positions scored, {c.n_scored})")
    print(f"held-out log-likelihood per token  {c.log_lik:.4f}")
    print(f"perplexity                         {math.exp(-c.log_lik):.1f}")
    print("fold-in " + " ".join(f"{k}={v}" for k, v in c.params.items()))
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


def cmd_demo(args) -> int:
    from ..core.sources import DownloadError, irds_home
    from .demo import DATASET, SHARED_COPY, run_demo

    try:
        print(run_demo(Path(args.indexes), args.dataset, k=args.k, iterations=args.iterations))
    except DownloadError as exc:
        if args.dataset != DATASET:
            raise
        raise DownloadError(f"{exc}. Offline, seed it: copy {SHARED_COPY} into {irds_home()}/cranfield/ "
                            f"(`make demo` does it from the shared data folder)") from None
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


def build_parser() -> argparse.ArgumentParser:
    from ..core.baselines import BASELINES
    from ..core.ranking import DEPTH, RUNS_DIR
    from .console import HITS
    from .demo import DATASET
    from ..core.evaluate import DEFAULT_MEASURES
    from ..experiments.compare import METHODS
    from .report import OUT_DIR as REPORTS_DIR
    from ..core.scoring import LAM, MU
    from ..core.trec import TOPIC_FIELDS
    from ..core.feedback import FB_DOCS, FB_TERMS, FB_TOPICS, METHODS as FB_METHODS, ORIGINAL_WEIGHT

    p = argparse.ArgumentParser(prog="topicir", description="Topic-model-smoothed query likelihood over Lucene indexes.")
    p.add_argument("--version", action="version", version=f"topicir {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only, no progress bars")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("index", help="index TREC SGML files/dirs (plain or .gz), JSON lines, or irds:<id>; "
                       "--add appends to an index")
    s.add_argument("sources", nargs="+", help="files, directories, or irds:<dataset-id>")
    s.add_argument("--out", help="index directory to build, e.g. indexes/ap")
    s.add_argument("--add", action="store_true", help="append the documents to the existing index --index DIR "
                   "(after its documents, same analyzer; models of it rank the result with fold-in)")
    s.add_argument("--index", help="with --add: the index to append to")
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
    s.add_argument("--lam", type=_weights, help=f"weight of QL against the topic model, in [0, 1] (default {LAM:g}); "
                   "comma list for a sweep; needs --model")
    s.add_argument("--model", help="topic model file (topicir train ...)")
    s.add_argument("--baseline", choices=BASELINES, help="run a Lucene baseline instead")
    s.add_argument("--out", help="run file (default: topics_runs/run.<index>.<topics>.<field>.<model>.<params>.txt)")
    s.add_argument("--out-dir", default=str(RUNS_DIR))
    s.add_argument("--topics-name", help="name used in run file names (default: from --topics)")
    s.add_argument("--tag", help="run tag (last column)")
    fb = s.add_argument_group("pseudo-relevance feedback", "rank again with the query expanded from its top "
                              "documents; each query's expansion is written beside the run "
                              "(<run>.expansions.jsonl)")
    fb.add_argument("--feedback", choices=FB_METHODS, help="rm3: relevance model (exact QL+RM3 without --model, "
                    "over the topic-smoothed document models with one); topics: the top documents' topics' "
                    "words (needs --model)")
    fb.add_argument("--fb-docs", type=_pos_int, help=f"feedback documents (default {FB_DOCS})")
    fb.add_argument("--fb-terms", type=_pos_int, help=f"expansion terms (default {FB_TERMS})")
    fb.add_argument("--fb-weight", type=_weight, help=f"weight of the original query, in [0, 1] "
                    f"(default {ORIGINAL_WEIGHT:g}; 1 ranks as without feedback)")
    fb.add_argument("--fb-topics", type=_pos_int, help=f"topics that expand a query, --feedback topics "
                    f"(default {FB_TOPICS})")
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

    what = ("held-out log-likelihood and perplexity of a model by document completion (Wallach et al. 2009): "
            "of the documents added to the index after training, or of --docs")
    s = sub.add_parser("heldout", help=what, description=what + ". (`topicir reproduce heldout` is the PAM "
                       "paper's empirical likelihood.)")
    s.add_argument("--model", required=True, help="topic model file (topicir train ...)")
    s.add_argument("--index", required=True, help="the model's index, or one grown from it (topicir index --add)")
    s.add_argument("--docs", nargs="+", help="held-out documents: TREC files/dirs, JSON lines or irds:<id>, "
                   "analysed by the index (default: the documents added to the index after training)")
    s.add_argument("--seed", type=int, default=0, help="seed of the fold-in")
    s.set_defaults(func=cmd_heldout)

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
    s.add_argument("--model", action="append", help="topic model file: show its topics' top words in the top "
                   "documents of the runs made with it (needs --index; repeat for several models)")
    s.add_argument("--index", help="the index the model was trained on")
    s.add_argument("--title")
    s.set_defaults(func=cmd_report)

    add_coherence(sub)

    for kind in kinds():  # commands of a kind's own (pam-view, tcm-view, ...) come from its adapter
        add = hook(kind, "add_commands")
        if add is not None:
            add(sub)

    add_reproduce(sub)
    add_bench(sub)
    add_cli_reference(sub)
    return p


def _quiet_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-q`` after the subcommand too (``topicir run -q ...``), at every level; SUPPRESS keeps a
    ``-q`` given before the subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if "-q" not in sub._option_string_actions:
                    sub.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                                     help="log warnings only, no progress bars")
                _quiet_everywhere(sub)


def main(argv=None) -> int:
    from .logs import setup_logging
    from .progress import progress_bars

    parser = build_parser()
    _quiet_everywhere(parser)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging(args.quiet)
    with progress_bars(not args.quiet):
        return run_guarded(args.command, args.func, args, own_signals=argv is None)


if __name__ == "__main__":
    raise SystemExit(main())
