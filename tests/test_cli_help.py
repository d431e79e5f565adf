"""Issue 59: every ``--help`` of the topicir command (each subcommand, each ``train KIND``, each
``bench`` and ``reproduce`` table) shows every option's default and cuts no sentence; the
estimators' help is read from their source without importing numba or torch."""
import argparse
import re
import subprocess
import sys

import pytest

from models.registry import class_path, kinds
from retrieval.ui.cli_parser import _quiet_everywhere, build_parser, show_defaults, shown_default, train_parser
from retrieval.ui.cli_reference import _walk
from retrieval.ui.estimator_args import first_sentence, parse_docstring
from tests.conftest import ROOT

_FLAGS = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction, argparse._VersionAction)
# a sentence cut at an abbreviation, an initial or a formula's dot, just before "(default" or the end
_CUT = re.compile(r"(\b(?:et al|eq|eqs|i\.e|e\.g|cf|vs)\.|\s\.|\b[A-Z]\.)\s*(\(default|$)")


def every_parser():
    """(command, parser) of every help page: the commands at every level, and train KIND."""
    parser = build_parser()
    _quiet_everywhere(parser)
    show_defaults(parser)
    for path, p in _walk(parser):
        yield " ".join(("topicir",) + path), p
    for kind in kinds():
        yield f"topicir train {kind}", train_parser(kind)


def helps(parser):
    """(action, its help as printed) of every option."""
    formatter = parser._get_formatter()
    return [(a, formatter._expand_help(a) if a.help else "") for a in parser._actions]


def cut(text: str) -> str | None:
    """What shows that ``text`` was cut mid-sentence, or None."""
    for left, right in ("()", "[]"):
        if text.count(left) != text.count(right):
            return f"unbalanced {left}{right}"
    m = _CUT.search(text)
    return m.group(0) if m else None


PARSERS = list(every_parser())


def test_every_help_page_is_covered():
    names = [name for name, _ in PARSERS]
    assert {"topicir run", "topicir compare", "topicir train lda", "topicir train avipam", "topicir bench lda",
            "topicir bench avipam collapse", "topicir reproduce smoothing", "topicir pam-view"} <= set(names)
    assert len(names) > 40


@pytest.mark.parametrize("name, parser", PARSERS, ids=[n for n, _ in PARSERS])
def test_help_shows_every_default_and_cuts_no_sentence(name, parser):
    for action, text in helps(parser):
        if text:
            assert cut(text) is None, f"{name} {action.option_strings}: {text!r} is cut ({cut(text)})"
        if (not action.option_strings or isinstance(action, _FLAGS)
                or action.default in (None, argparse.SUPPRESS)):
            continue
        shown = {shown_default(action.default), str(action.default)}
        assert "default" in text and any(s in text for s in shown), \
            f"{name} {action.option_strings[-1]}: the default {action.default!r} is not shown: {text!r}"
    description = parser.description or ""
    assert cut(description) is None, f"{name}: description {description!r} is cut"


def test_the_helps_the_issue_found_cut_read_whole(capsys):
    pages = {name: parser.format_help() for name, parser in PARSERS}
    text = " ".join(" ".join(page.split()) for page in pages.values())
    for bad in ("kept as a Checkpoints", "kept Checkpoints", "with Checkpoints", "Wallach et al. (default",
                "Yan et al. (default", "eq. (default", "i.e. (default", "mix_d . (default"):
        assert bad not in text, bad
    train = " ".join(pages["topicir train pam"].split())
    assert "Four-level PAM trained by collapsed Gibbs sampling with several chains, kept as a document model. " \
           "Checkpoints as it goes" in train
    lda = " ".join(pages["topicir train lda"].split())
    assert "Minka's fixed point (Wallach et al. 2009; as in Mallet, with a Gamma(1.001, 1) prior) every " \
           "optimize_every sweeps. (default: False)" in lda
    assert "K. Wei & Croft (2006) use 800 on TREC collections. (default: 800)" in lda
    avipam = " ".join(pages["topicir train avipam"].split())
    assert "keep 0.4, i.e. 0.6). (default: 0.0)" in avipam
    assert 'p(w | d) = mix_d . softmax(norm(beta)). (default: mixture)' in avipam
    for command in ("topicir run", "topicir compare"):
        page = " ".join(pages[command].split())
        for flag, default in (("--mu MU", "1000"), ("--depth DEPTH", "1000"), ("--field {title,desc,narr,title+desc}",
                                                                             "title")):
            assert re.search(re.escape(flag) + r" [^-]*\(default: " + re.escape(default) + r"\)", page), (command, flag)


@pytest.mark.parametrize("text, sentence", [
    ("Learn alpha (Wallach et al. 2009; as in Mallet) every sweep. More.", "Learn alpha (Wallach et al. 2009; as in Mallet) every sweep."),
    ("What the doc factor of eq. 3 counts. \"groups\": ...", "What the doc factor of eq. 3 counts."),
    ("Dropout (keep 0.4, i.e. 0.6). Next.", "Dropout (keep 0.4, i.e. 0.6)."),
    ("p(w | d) = mix_d . softmax(beta). \"product\": x.", "p(w | d) = mix_d . softmax(beta)."),
    ("K. Wei & Croft use 800. More.", "K. Wei & Croft use 800."),
    ("S shards (the scheme of Yan et al. 2009, tomotopy's). n_kw is exact.", "S shards (the scheme of Yan et al. 2009, tomotopy's)."),
    ("K.", "K."),
    ("No period at all", "No period at all"),
    ("Sizes, e.g. 20 or 50. Then.", "Sizes, e.g. 20 or 50."),
])
def test_first_sentence(text, sentence):
    assert first_sentence(text) == sentence


@pytest.mark.parametrize("kind", kinds())
def test_train_options_are_whole_sentences_of_the_docstring(kind):
    from retrieval.ui.source_values import class_info

    docs = parse_docstring(class_info(class_path(kind)).doc)
    for action, text in helps(train_parser(kind)):
        entry = docs.get(action.dest, ("", ""))[1]
        if not entry:
            continue
        shown = re.sub(r" \(default: .*\)$", "", text)
        plain = re.sub(r"``([^`]+)``", r"\1", re.sub(r":\w+:`~?([^`]+)`", r"\1", entry))
        assert plain.startswith(shown) and (shown == plain or plain[len(shown)] == " "), (kind, action.dest)


def test_estimator_help_reads_the_source_as_the_class_says():
    """The signature and docstring read from the source are the imported class's."""
    import inspect

    from models.registry import model_class
    from retrieval.ui import source_values

    for kind in kinds():
        module, name = class_path(kind).split(":")
        static = source_values._static_class(module, name)  # raises NotStatic if anything is not a literal
        cls = model_class(kind)
        assert static.signature == inspect.signature(cls.__init__), kind
        assert inspect.cleandoc(static.doc) == inspect.cleandoc(cls.__doc__), kind


def test_help_of_train_imports_no_numba_or_torch():
    code = ("import sys, io, contextlib\nfrom retrieval.ui.cli import main\n"
            "for argv in (['train', 'lda', '--help'], ['train', 'avipam', '--help'], ['run', '--help'],"
            " ['tcm-view', '--help'], ['pam-view', '--help'], ['bench', 'tree-lda', '--help'],"
            " ['reproduce', 'feedback', '--help'], ['--help'], ['--version']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try:\n            main(argv)\n        except SystemExit:\n            pass\n"
            "heavy = ('numpy', 'numba', 'torch', 'scipy', 'pandas', 'matplotlib', 'jnius', 'ir_measures')\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_partial_parser_lists_the_commands_the_full_one_has():
    """``topicir CMD`` builds only CMD's options; the others (the adapters' included) are listed
    with the same names and help."""
    def listing(parser):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return [(c.dest, c.help) for c in sub._choices_actions]

    full = listing(build_parser())
    assert listing(build_parser("")) == full
    assert listing(build_parser("tcm-view")) == full
    assert "pam-view" in dict(full) and "tcm-view" in dict(full)


def test_library_constants_are_read_without_an_import():
    """The values the parsers show are read from the source, and are the library's."""
    from retrieval.ui import source_values

    for module, name in [("retrieval.core.scoring", "MU"), ("retrieval.core.scoring", "LAM"),
                         ("retrieval.core.ranking", "DEPTH"), ("retrieval.core.runs", "RUNS_DIR"),
                         ("retrieval.experiments.compare", "METHODS"), ("retrieval.core.feedback", "FB_TOPICS"),
                         ("retrieval.core.feedback", "ORIGINAL_WEIGHT"), ("retrieval.ui.report", "OUT_DIR"),
                         ("models.tree_lda.kernels", "SAMPLERS"), ("retrieval.experiments.effectiveness", "COLLECTIONS"),
                         ("retrieval.ui.console", "HITS"), ("retrieval.core.evaluate", "DEFAULT_MEASURES")]:
        import importlib

        static = source_values._static_constant(module, name)
        assert static == getattr(importlib.import_module(module), name), (module, name)
    with pytest.raises(source_values.NotStatic):
        source_values._static_constant("retrieval.core.trec", "_TOP")  # a compiled regex: imported instead


def test_train_help_says_what_the_estimator_says_of_retrieval(capsys):
    """A kind's docstring paragraph "In retrieval: ..." closes its train --help (aviPAM's says it
    does not beat exact QL everywhere); kinds without one show none."""
    from retrieval.ui.cli_parser import train_parser

    avipam = " ".join(train_parser("avipam").format_help().split())
    assert "In retrieval: with these defaults it is significantly below exact QL on no shared" in avipam
    assert "no architecture tried, these defaults included, beats exact QL on every shared" in avipam
    assert "In retrieval" not in train_parser("lda").format_help()
