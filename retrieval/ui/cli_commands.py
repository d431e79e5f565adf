"""The ``topicir`` subcommands: each turns its parsed arguments into one library call and
prints the result (the parsers are in :mod:`retrieval.ui.cli_parser`). Imports are made inside
the handlers, so that the command's start loads only what the command runs."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from .guard import cli_flags as _flags

log = logging.getLogger("topicir")


def cmd_index(args) -> int:
    from ..core.index import add_documents, build_index

    if args.shards is not None:
        return _index_shards(args)
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


def _index_shards(args) -> int:
    from ..core.shards import build_shards

    if args.add or args.index or not args.out:
        raise ValueError("--shards builds a new sharded index: give it as --out DIR (--add appends to a single "
                         "index only)")
    sharded = build_shards(args.sources, args.out, args.shards, threads=args.threads, force=args.force)
    m = sharded.manifest
    print(f"{sharded.path}: {m['n_shards']} shards, {m['n_docs']} documents, {m['n_terms']} terms, "
          f"{m['n_tokens']} tokens, fingerprint {m['fingerprint']} ({m['build_seconds']} s)")
    return 0


def cmd_run(args) -> int:
    from ..core.index import Index
    from ..core.runs import Batch, run_batch
    from ..core.shards import is_sharded
    from ..core.sources import load_topics

    _check_lam(args)
    feedback = _feedback_settings(args)
    if is_sharded(args.index):
        return _run_sharded(args, feedback)
    if args.ray is not None or args.workers is not None:
        raise ValueError(f"--ray and --workers rank a sharded index (topicir index --shards N); {args.index} is "
                         f"one index: rank it without them")
    batch = Batch(Index(args.index), args.topics, field=args.field, depth=args.depth, topics_name=args.topics_name,
                  out_dir=args.out_dir, out=args.out, tag=args.tag)
    for path in run_batch(batch, load_topics(args.topics), mu=args.mu, lam=args.lam, model=args.model,
                          baseline=args.baseline, feedback=feedback):
        print(path)
    return 0


def _run_sharded(args, feedback) -> int:
    from models.common.executors import executor_from_flag

    from ..core.sharded_ranking import run_sharded_batch
    from ..core.runs import Batch
    from ..core.shards import ShardedIndex
    from ..core.sources import load_topics

    if args.baseline or feedback is not None:
        raise ValueError(f"{'--baseline' if args.baseline else '--feedback'} needs one index; {args.index} is a "
                         f"sharded index (rank it with QL or --model, or build it without --shards)")
    if args.workers is not None and args.ray is None:
        raise ValueError("--workers sets the Ray workers: give --ray too")
    batch = Batch(ShardedIndex(args.index), args.topics, field=args.field, depth=args.depth,
                  topics_name=args.topics_name, out_dir=args.out_dir, out=args.out, tag=args.tag)
    for path in run_sharded_batch(batch, load_topics(args.topics), mu=args.mu, lam=args.lam, model=args.model,
                                  executor=executor_from_flag(args.ray), n_workers=args.workers):
        print(path)
    return 0


def _check_lam(args) -> None:
    """``--lam`` other than the default is refused without a topic model to weigh."""
    from ..core.scoring import LAM

    if args.lam is not None and args.lam != [LAM] and (args.baseline or not args.model):
        raise ValueError(f"--lam {','.join(f'{x:g}' for x in args.lam)} weighs a topic model against QL: give "
                         f"--model MODEL{' instead of --baseline' if args.baseline else ''} (without one the run "
                         f"is plain QL)")


def _feedback_settings(args):
    """The feedback :class:`~retrieval.core.feedback.Settings` of ``topicir run``, or None."""
    from ..core.feedback import Settings

    flags = {"--fb-docs": "fb_docs", "--fb-terms": "fb_terms", "--fb-weight": "fb_weight", "--fb-topics": "fb_topics",
             "--fb-max-df": "fb_max_df", "--fb-length": "fb_length"}
    given = [flag for flag, name in flags.items() if getattr(args, name) is not None]
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
              "fb_topics": args.fb_topics, "fb_max_df": args.fb_max_df}
    values = {k: v for k, v in values.items() if v is not None}
    if args.fb_length is not None:  # 'none' is given as False: no length rule
        values["fb_length"] = args.fb_length or None
    return Settings(args.feedback, **values)


def cmd_train(args) -> int:
    from models.common.stopping import TrainingStopped
    from models.registry import model_class

    from ..core.index import Index
    from ..core.modelfiles import train_model
    from .logs import above_progress_bars
    from .stop_signals import stop_after_sweep

    targs = args.train  # the kind's options (parsed by retrieval.ui.cli_parser.parse_args)
    params = {name: getattr(targs, name) for name in model_class(args.kind)._param_names()
              if hasattr(targs, name)}
    if getattr(targs, "ray", None) is not None:
        from models.common.executors import executor_from_flag

        params["executor"] = executor_from_flag(targs.ray, getattr(targs, "ray_state", "driver"))
    elif getattr(targs, "ray_state", "driver") != "driver":
        raise ValueError("--ray-state workers trains on Ray: add --ray")
    # log lines (a stop's warning among them) go above the progress bar, not into its line
    with stop_after_sweep(not targs.no_checkpoint) as stop, above_progress_bars():
        try:
            model, path = train_model(Index(targs.index), args.kind, targs.out, checkpoint=not targs.no_checkpoint,
                                      progress=not args.quiet, stop=stop, **params)
        except ValueError as exc:
            raise ValueError(_flags(str(exc))) from None
        except TrainingStopped as e:
            print(f"topicir train: stopped after {e.unit} {e.iteration} of {e.n_iter}, written to {e.checkpoint}; "
                  f"rerun the same command to go on from there", file=sys.stderr)
            return 130
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
    from models.common.atomic import check_writable

    from ..core.evaluate import judged_topics
    from ..core.index import Index
    from ..core.sources import load_qrels, load_topics
    from ..core.runs import topics_key
    from ..experiments.compare import compare, format_table, recall_note

    check_writable(Path(args.out_dir))
    index = Index(args.index)
    qrels = load_qrels(args.qrels)
    rows = compare(index, load_topics(args.topics), qrels, methods=args.methods,
                   field=args.field, mu=args.mu, depth=args.depth, measures=args.measures,
                   topics_name=topics_key(args.topics), runs_dir=args.out_dir)
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
