"""The parsers of the ``topicir`` command: argparse only. Defaults shown in ``--help`` are the
library's, read from its source (:mod:`retrieval.ui.source_values`) so that building the parsers
imports no numpy, numba, torch or JVM; the handlers are in :mod:`retrieval.ui.cli_commands`."""
from __future__ import annotations

import argparse
import sys

from models._version import __version__
from models.registry import class_path, kinds

from ..core.plugins import ADAPTERS, hook
from . import cli_commands as cmd
from .cli_bench import BENCH
from .cli_more import COHERENCE
from .cli_reference import reference, write_page
from .cli_reproduce import REPRODUCE
from .cli_tables import Command
from .file_checks import FILE_CHECKS
from .guard import finite as _finite, floats as _floats, pos_int as _pos_int, weights as _weights
from .source_values import NotStatic, class_info, constant, subcommands

SCORING = "retrieval.core.scoring"


def _weight(text: str) -> float:
    value = _weights(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"expected one weight in [0, 1], got {text!r}")
    return value[0]


def _share(text: str) -> float:
    value = _weight(text)
    if value <= 0.0:
        raise argparse.ArgumentTypeError(f"expected a share of the documents in (0, 1], got {text!r}")
    return value


def _length(text: str) -> int:
    return 0 if text.lower() == "none" else _pos_int(text)  # 0: no length rule


class _Runs(argparse.Action):
    """The positional run files: appended to what ``--measures`` passed on (see :class:`_Measures`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, (getattr(namespace, self.dest, None) or []) + list(values))


class _Measures(argparse.Action):
    """``--measures A B ...``: argparse hands the option every word up to the next option, so in
    ``--measures AP P@10 run1 run2`` the words from the first one that names no measure (for
    ir_measures or trec_eval) are the command's run files; a command without runs refuses it."""

    def __init__(self, *args, runs: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.runs = runs

    def __call__(self, parser, namespace, values, option_string=None):
        from ..core.evaluate import is_measure

        n = next((i for i, v in enumerate(values) if not is_measure(v)), len(values))
        if n == 0 or (n < len(values) and self.runs is None):
            parser.error(f"argument --measures: unknown measure {values[n]!r}; e.g. AP (MAP), P@10, nDCG@10, "
                         f"R@1000, or trec_eval's map, P_10, ndcg_cut_10")
        setattr(namespace, self.dest, values[:n])
        if n < len(values):
            setattr(namespace, self.runs, (getattr(namespace, self.runs, None) or []) + values[n:])


def _add_measures(s, runs: str | None = None, runs_help: str = "run files",
                  help: str = "e.g. AP (MAP) P@10 nDCG@10 R@1000, or trec_eval's names (map P_10 ndcg_cut_10)") -> None:
    if runs is not None:
        s.add_argument(runs, nargs="*", action=_Runs, default=[], metavar="RUN",
                       help=f"{runs_help} (at least one), before the options or after the measures")
    s.add_argument("--measures", nargs="+", action=_Measures, runs=runs, metavar="MEASURE",
                   default=list(constant("retrieval.core.evaluate", "DEFAULT_MEASURES")), help=help)


def _add_query_args(s) -> None:
    s.add_argument("--index", required=True)
    s.add_argument("--topics", required=True, help="TREC topics file, TSV, or irds:<id>")
    s.add_argument("--field", default="title", choices=constant("retrieval.core.trec", "TOPIC_FIELDS"),
                   help="the topics' field that is the query")
    s.add_argument("--depth", type=_pos_int, default=constant("retrieval.core.ranking", "DEPTH"),
                   help="documents ranked per topic")


def _fill_index(s) -> None:
    s.add_argument("sources", nargs="+", help="files, directories, or irds:<dataset-id>")
    s.add_argument("--out", help="index directory to build, e.g. indexes/ap")
    s.add_argument("--add", action="store_true", help="append the documents to the existing index --index DIR "
                   "(after its documents, same analyzer; models of it rank the result with fold-in)")
    s.add_argument("--index", help="with --add: the index to append to")
    s.add_argument("--threads", type=_pos_int, default=2, help="indexing threads")
    s.add_argument("--shards", type=_pos_int, help="build a sharded index: this many indexes of contiguous "
                   "slices of the documents under --out, ranked by `topicir run` (--ray: on Ray workers)")
    s.add_argument("--force", action="store_true", help="replace an existing index (atomically)")
    s.set_defaults(func=cmd.cmd_index)


def _fill_run(s) -> None:
    runs_dir = str(constant("retrieval.core.runs", "RUNS_DIR"))
    fb_value = lambda name: constant("retrieval.core.feedback", name)  # noqa: E731
    _add_query_args(s)
    s.add_argument("--mu", type=_floats, default=[constant(SCORING, "MU")], help="Dirichlet prior; comma list for a sweep")
    s.add_argument("--lam", type=_weights, help=f"weight of QL against the topic model, in [0, 1] (default "
                   f"{constant(SCORING, 'LAM'):g}); comma list for a sweep; needs --model")
    s.add_argument("--model", help="topic model file (topicir train ...)")
    s.add_argument("--baseline", choices=constant("retrieval.core.baselines", "BASELINES"),
                   help="run a Lucene baseline instead")
    s.add_argument("--out", help=f"run file (default: {runs_dir}/run.<index>.<topics>.<field>.<model>.<params>.txt)")
    s.add_argument("--out-dir", default=runs_dir, help="folder of the run files")
    s.add_argument("--topics-name", help="name used in run file names (default: from --topics)")
    s.add_argument("--tag", help="run tag (last column; default: topicir-<model>.<params>, as in the file name)")
    sh = s.add_argument_group("sharded indexes", "an --index built with `topicir index --shards` is ranked shard "
                              "by shard, the run the same as a single index's")
    sh.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                    help="rank the shards on Ray workers: a local cluster, or the one at ADDRESS")
    sh.add_argument("--workers", type=_pos_int, help="Ray workers (default: one per CPU of the cluster, at most "
                    "one per shard)")
    fb = s.add_argument_group("pseudo-relevance feedback", "rank again with the query expanded from its top "
                              "documents; each query's expansion is written beside the run "
                              "(<run>.expansions.jsonl)")
    fb.add_argument("--feedback", choices=fb_value("METHODS"), help="rm3: relevance model (exact QL+RM3 without "
                    "--model, over the topic-smoothed document models with one); topics: the top documents' "
                    "topics' words (needs --model)")
    fb.add_argument("--fb-docs", type=_pos_int, help=f"feedback documents (default {fb_value('FB_DOCS')})")
    fb.add_argument("--fb-terms", type=_pos_int, help=f"expansion terms (default {fb_value('FB_TERMS')})")
    fb.add_argument("--fb-weight", type=_weight, help=f"weight of the original query, in [0, 1] "
                    f"(default {fb_value('ORIGINAL_WEIGHT'):g}; 1 ranks as without feedback)")
    fb.add_argument("--fb-topics", type=_pos_int, help=f"topics that expand a query, --feedback topics "
                    f"(default {fb_value('FB_TOPICS')})")
    fb.add_argument("--fb-max-df", type=_share, help=f"expansion terms are in at most this share of the documents "
                    f"(default {fb_value('FB_MAX_DF'):g}); stopwords never expand a query")
    fb.add_argument("--fb-length", type=_length, help=f"queries longer than this many tokens weigh the expansion "
                    f"less, in proportion to their length ('none': never; default {fb_value('FB_LENGTH')})")
    s.set_defaults(func=cmd.cmd_run)


def _fill_train(s) -> None:
    s.add_argument("kind", choices=kinds(), metavar="KIND",
                   help="the model kind: " + ", ".join(kinds()))
    s.add_argument("rest", nargs=argparse.REMAINDER, metavar="OPTIONS", help="--index DIR and the kind's options")
    s.set_defaults(func=cmd.cmd_train)


def _fill_iterations(s) -> None:
    _add_query_args(s)
    s.add_argument("--model", required=True)
    s.add_argument("--qrels", required=True)
    s.add_argument("--mu", type=_finite, default=constant(SCORING, "MU"), help="Dirichlet prior")
    s.add_argument("--lam", type=_finite, default=constant(SCORING, "LAM"), help="weight of QL against the topic model")
    s.add_argument("--csv", help="also write the table as CSV (for topicir report --iterations)")
    s.set_defaults(func=cmd.cmd_iterations)


def _fill_heldout(s) -> None:
    s.add_argument("--model", required=True, help="topic model file (topicir train ...)")
    s.add_argument("--index", required=True, help="the model's index, or one grown from it (topicir index --add)")
    s.add_argument("--docs", nargs="+", help="held-out documents: TREC files/dirs, JSON lines or irds:<id>, "
                   "analysed by the index (default: the documents added to the index after training)")
    s.add_argument("--seed", type=int, default=0, help="seed of the fold-in")
    s.set_defaults(func=cmd.cmd_heldout)


def _fill_eval(s) -> None:
    s.add_argument("--qrels", required=True, help="TREC qrels file or irds:<id>")
    _add_measures(s, runs="runs")
    s.add_argument("--per-topic", action="store_true", help="also a table of every topic's values per run")
    s.set_defaults(func=cmd.cmd_eval)


def _fill_compare(s) -> None:
    methods = constant("retrieval.experiments.compare", "METHODS")
    _add_query_args(s)
    s.add_argument("--qrels", required=True)
    s.add_argument("--mu", type=_finite, default=constant(SCORING, "MU"), help="Dirichlet prior (QL and Lucene QLD)")
    s.add_argument("--methods", nargs="+", default=list(methods), choices=methods)
    _add_measures(s)
    s.add_argument("--out-dir", default=str(constant("retrieval.core.runs", "RUNS_DIR")),
                   help="folder of the run files")
    s.set_defaults(func=cmd.cmd_compare)


def _fill_demo(s) -> None:
    s.add_argument("--dataset", default=constant("retrieval.ui.demo", "DATASET"))
    s.add_argument("--indexes", default="indexes", help="folder of the demo's index")
    s.add_argument("--k", type=_pos_int, help="LDA topics (default: the demo's 100)")
    s.add_argument("--iterations", type=_pos_int, help="LDA sweeps (default: the demo's 60)")
    s.set_defaults(func=cmd.cmd_demo)


def _fill_console(s) -> None:
    s.add_argument("--index", required=True)
    s.add_argument("--model", help="topic model file (topicir train ...)")
    s.add_argument("--mu", type=_finite, default=constant(SCORING, "MU"), help="Dirichlet prior")
    s.add_argument("--lam", type=_finite, default=constant(SCORING, "LAM"), help="weight of QL against the topic model")
    s.add_argument("--topics", help="topics file: #QID then runs topic QID")
    s.add_argument("--field", default="title", choices=constant("retrieval.core.trec", "TOPIC_FIELDS"),
                   help="field of #QID queries")
    s.add_argument("--qrels", help="qrels: mark relevant hits and show AP of #QID queries")
    s.add_argument("--hits", type=_pos_int, default=constant("retrieval.ui.console", "HITS"), help="hits shown per query")
    s.add_argument("--history", help="history file (default: ~/.cache/topicir/console_history)")
    s.set_defaults(func=cmd.cmd_console)


def _fill_report(s) -> None:
    s.add_argument("--qrels", required=True, help="TREC qrels file or irds:<id>")
    s.add_argument("--baseline", help="label or file of the baseline run (default: the first)")
    s.add_argument("--out", default=str(constant("retrieval.ui.report", "OUT_DIR")),
                   help="directory for report.html, report.md and plots/")
    _add_measures(s, runs="runs", runs_help="run files, or LABEL=PATH", help="AP (MAP) is always included")
    s.add_argument("--iterations", help="CSV/JSON table iteration,avg1,avg2 (MAP against Gibbs iteration)")
    s.add_argument("--model", action="append", help="topic model file: show its topics' top words in the top "
                   "documents of the runs made with it (needs --index; repeat for several models)")
    s.add_argument("--index", help="the index the model was trained on")
    s.add_argument("--title")
    s.set_defaults(func=cmd.cmd_report)


_HELDOUT = ("held-out log-likelihood and perplexity of a model by document completion (Wallach et al. 2009): "
            "of the documents added to the index after training, or of --docs")
_EVAL = ("evaluate TREC runs with ir-measures: means over the judged topics (with a relevant document, "
         "column 'topics'); judged topics a run lacks count 0")
COMMANDS = [
    Command("index", "index TREC SGML files/dirs (plain or .gz), JSON lines, or irds:<id>; --add appends to an "
            "index", _fill_index),
    Command("run", "rank topics over the whole collection and write TREC run files", _fill_run),
    Command("train", "train a topic model on an index (checkpoints; rerun to resume)", _fill_train,
            "topicir train KIND --help lists that kind's options."),
    Command("iterations", "MAP per sample iteration: Avg1 (chains alone) and Avg2 (chains averaged)",
            _fill_iterations),
    Command("heldout", _HELDOUT, _fill_heldout, _HELDOUT[0].upper() + _HELDOUT[1:] + ". (`topicir reproduce "
            "heldout` is the PAM paper's empirical likelihood.)"),
    Command("eval", _EVAL, _fill_eval),
    Command("compare", "exact QL and the Lucene baselines side by side", _fill_compare),
    Command("demo", "Cranfield: QL, BM25, BM25+RM3 and LDA smoothing with t-tests against QL", _fill_demo),
    Command("console", "interactive queries: hits with snippets, score breakdowns, settings on the fly",
            _fill_console),
    Command("report", "HTML and Markdown evaluation report: measures, significance, plots", _fill_report),
    COHERENCE,
]


def _fill_cli_reference(s) -> None:
    s.add_argument("--write", metavar="PATH", required=True, help="the Markdown file, e.g. docs/cli.md")
    s.set_defaults(func=lambda args: print(write_reference(args.write)) or 0)


CLI_REFERENCE = Command("cli-reference", "write this command-line reference (docs/cli.md) from the parsers",
                        _fill_cli_reference)
LAST = [REPRODUCE, BENCH, CLI_REFERENCE, FILE_CHECKS]  # after the commands of the kinds' adapters


def _add_adapter_commands(sub, command: str | None) -> None:
    """The commands of a kind's own (pam-view, tcm-view, ...), from its adapter's
    ``add_commands``; unless it is the command that runs (or ``command`` is None: all), each is
    listed by the name and help its source gives, without importing the adapter."""
    for kind in kinds():
        add = None if command is not None else hook(kind, "add_commands")
        if command is not None:
            try:
                listed = subcommands(f"{ADAPTERS}.{kind.replace('-', '_')}") or []
                runs = command in [name for name, _ in listed]
            except NotStatic:  # names not written as literals: the adapter adds its commands
                listed, runs = [], True
            if runs:
                add = hook(kind, "add_commands")
            for name, text in [] if runs else listed:
                sub.add_parser(name, help=text)
        if add is not None:
            add(sub)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``topicir`` parser. With ``command`` only that subcommand gets its options (the others
    are listed by name and help), so that a command's start reads no other command's defaults."""
    p = argparse.ArgumentParser(prog="topicir", description="Topic-model-smoothed query likelihood over Lucene indexes.")
    p.add_argument("--version", action="version", version=f"topicir {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only, no progress bars")
    sub = p.add_subparsers(dest="command", required=True)
    for c in COMMANDS:
        c.add(sub, full=command in (None, c.name))
    _add_adapter_commands(sub, command)
    for c in LAST:
        c.add(sub, full=command in (None, c.name))
    return p


def train_parser(kind: str) -> argparse.ArgumentParser:
    """``topicir train KIND``: the estimator's own parameters, generated from its signature and
    docstring (see :mod:`retrieval.ui.estimator_args`), read without importing the estimator."""
    from .estimator_args import add_estimator_args, first_sentence

    info = class_info(class_path(kind))
    paragraphs = [" ".join(part.split()) for part in info.doc.strip().split("\n\n")]
    summary = first_sentence(paragraphs[0])
    # what the estimator's docstring says of the kind "In retrieval:" is said in its help too
    retrieval = " ".join(part for part in paragraphs if part.startswith("In retrieval:"))
    p = argparse.ArgumentParser(prog=f"topicir train {kind}", description=f"{summary} Checkpoints as it goes; "
                                f"Ctrl-C (or SIGTERM) stops after the sweep in progress, once its checkpoint "
                                f"is written (a second one at once); rerun the same command to resume.",
                                epilog=retrieval or None)
    p.add_argument("--index", required=True, help="the index to train on")
    p.add_argument("--out", help="model file (default: <index>/models/<kind>-<settings>.npz)")
    p.add_argument("--no-checkpoint", action="store_true", help="write no checkpoint (no resume)")
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only, no progress bars")
    names = add_estimator_args(p.add_argument_group(f"{kind} parameters"), info)
    if "executor" in names:
        p.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                       help="train on Ray: a local cluster, or the one at ADDRESS (same model as locally)")
    if "executor" in names and kind in constant("models.common.executors.ray", "WORKER_STATE_KINDS"):
        p.add_argument("--ray-state", choices=("driver", "workers"), default="driver",
                       help="with --ray, where the chains' per-token state lives: 'driver' pulls it back to "
                            "this process for the log-likelihood, kept samples and checkpoints; 'workers' "
                            "keeps it on the workers, which read the index's tokens themselves and "
                            "write their parts of checkpoints (every worker must reach the index and the "
                            "model's folder at the same paths)")
    show_defaults(p)
    return p


def write_reference(path):
    """docs/cli.md (:func:`retrieval.ui.cli_reference.reference`) of every parser, written to ``path``."""
    parser = build_parser()
    _quiet_everywhere(parser)
    show_defaults(parser)
    return write_page(path, reference(parser, train_parser, kinds()))


def _subparsers(parser: argparse.ArgumentParser):
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _quiet_everywhere(parser: argparse.ArgumentParser) -> None:
    """``-q`` after the subcommand too (``topicir run -q ...``), at every level; SUPPRESS keeps a
    ``-q`` given before the subcommand."""
    for action in _subparsers(parser):
        for sub in action.choices.values():
            if "-q" not in sub._option_string_actions:
                sub.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                                 help="log warnings only, no progress bars")
            _quiet_everywhere(sub)


def shown_default(value) -> str:
    """A default as it is typed on the command line: lists as space-separated words."""
    if isinstance(value, (list, tuple)):
        return " ".join(shown_default(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option's help ends with its default, at every level, unless the help already says
    it; flags (off unless given) and options without a default say none."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
            continue
        default = action.default
        if (default in (None, argparse.SUPPRESS) or not action.option_strings or action.help == argparse.SUPPRESS
                or isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                                       argparse._VersionAction))):
            continue
        text = action.help or ""
        if "%(default)" in text or f"default: {shown_default(default)}" in text:
            continue
        action.help = (text + " " if text else "") + f"(default: {shown_default(default)})".replace("%", "%%")


def parse_args(argv=None) -> argparse.Namespace:
    """The parsed command line of ``topicir``; ``argv`` None: ``sys.argv``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), "")  # top-level options take no value
    parser = build_parser(command)
    _quiet_everywhere(parser)
    show_defaults(parser)
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command == "train":  # the kind's own options; `--help` exits here
        args.train = train_parser(args.kind).parse_args(args.rest)
        args.quiet = args.quiet or args.train.quiet  # `topicir train KIND -q ...`
    if getattr(args, "runs", None) == [] and args.command in ("eval", "report"):
        _subparsers(parser)[0].choices[args.command].error("the following arguments are required: RUN")
    return args
