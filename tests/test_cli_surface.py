"""The surface of the topicir command as a new user meets it (issue 29, point 5): an offline
demo, the settings check of reruns, -q in both places, progress, one warning style, --lam,
and train's one line on stdout."""
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.core.runs import changed_settings, read_settings
from retrieval.ui.cli import main
from retrieval.ui.cli_parser import build_parser

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("surface") / "ap-mini"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 0
    return out


def status(argv) -> int:
    """``main(argv)``'s exit status, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def topicir(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "retrieval", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


# -- 1. the demo offline -------------------------------------------------------------------------

class _Offline:
    """An ir_datasets dataset whose files cannot be downloaded (as ir_datasets fails offline)."""

    def has_docs(self):
        return True

    def docs_iter(self):
        raise RuntimeError("All download sources failed", [("https://mirror", "ConnectionError")])

    has_queries = has_qrels = has_docs
    queries_iter = qrels_iter = docs_iter


def test_demo_offline_says_the_download_failed_and_how_to_seed_it(monkeypatch, tmp_path, capsys):
    from retrieval.core import sources

    monkeypatch.setattr(sources, "_irds_dataset", lambda source: _Offline())
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    assert main(["-q", "demo", "--indexes", str(tmp_path / "indexes")]) == 1
    err = capsys.readouterr().err
    assert "internal error" not in err and "please report" not in err and err.count("\n") == 1
    assert err.startswith("topicir demo: error: irds:cranfield: ir_datasets could not download the collection")
    assert f"copy ../shared/data/irds-cache/cranfield/cran.tar.gz into {tmp_path / 'irds'}/cranfield/" in err
    assert "`make demo` does it from the shared data folder" in err


def test_download_failure_of_topics_and_qrels_names_the_dataset(monkeypatch):
    from retrieval.core import sources

    monkeypatch.setattr(sources, "_irds_dataset", lambda source: _Offline())
    for load in (sources.load_topics, sources.load_qrels):
        with pytest.raises(sources.DownloadError, match="irds:cranfield: ir_datasets could not download"):
            load("irds:cranfield")


# -- 2. a rerun warns only when what changes the run changed -------------------------------------

def test_settings_compared_normalised():
    base = {"method": "ql", "fingerprint": "f", "index": "/a/idx", "topics": "irds:cranfield", "field": "title",
            "mu": 1000.0, "lam": None, "depth": 1000, "topicir": "0.1.0", "written": "x"}
    assert changed_settings(base, dict(base, topics="cranfield", written="y", topicir="0.2.0")) == []
    assert changed_settings(base, dict(base, index="/b/idx")) == []  # moved, same fingerprint
    assert changed_settings(base, dict(base, index="/b/idx", fingerprint="g")) == ["fingerprint", "index"]
    assert changed_settings(base, dict(base, topics="irds:cranfield/other")) == ["topics"]
    bm25 = dict(base, method="bm25", mu=None)
    assert changed_settings(bm25, dict(bm25, mu=1000.0)) == []
    assert changed_settings(base, dict(base, mu=500.0)) == ["mu"]


def test_rerun_with_another_spelling_of_the_topics_is_quiet(index_dir, tmp_path, caplog, monkeypatch):
    out = tmp_path / "bm25.txt"
    monkeypatch.chdir(DATA)
    args = ["-q", "run", "--index", str(index_dir), "--baseline", "bm25", "--out", str(out)]
    assert main(args + ["--topics", "topics.trec"]) == 0
    assert read_settings(out)["mu"] is None  # BM25 has no Dirichlet prior
    caplog.clear()
    assert main(args + ["--topics", str(DATA / "topics.trec")]) == 0
    assert "other settings" not in caplog.text


# -- 3. -q before or after the subcommand ---------------------------------------------------------

@pytest.mark.parametrize("argv, quiet", [
    (["run", "--index", "i", "--topics", "t"], False),
    (["-q", "run", "--index", "i", "--topics", "t"], True),
    (["run", "-q", "--index", "i", "--topics", "t"], True),
    (["run", "--index", "i", "--topics", "t", "--quiet"], True),
    (["reproduce", "regressions", "-q", "--data", "d"], True),
    (["bench", "avipam", "collapse", "-q"], True),
    (["eval", "r", "--qrels", "q", "-q"], True),
])
def test_quiet_is_accepted_in_both_places(argv, quiet):
    assert build_parser_quiet().parse_args(argv).quiet is quiet


def build_parser_quiet():
    from retrieval.ui.cli_parser import _quiet_everywhere

    parser = build_parser()
    _quiet_everywhere(parser)
    return parser


def test_every_subcommand_takes_quiet():
    from retrieval.ui.cli_reference import _walk

    for path, parser in _walk(build_parser_quiet()):
        assert "-q" in parser._option_string_actions, path


def test_train_takes_quiet_after_the_kind(index_dir, tmp_path, capfd):
    out = tmp_path / "m.npz"
    assert main(["train", "lda", "-q", "--index", str(index_dir), "--out", str(out), "--topics", "3",
                 "--chains", "1", "--iterations", "4", "--burn-in", "2", "--sample-every", "1"]) == 0
    captured = capfd.readouterr()
    assert captured.out == f"{out}\n" and "%|" not in captured.err


# -- 4. progress of the Lucene baselines and of report ------------------------------------------

def test_baselines_show_progress_and_rank_as_without(index_dir, capsys):
    from retrieval.core.baselines import run_baseline
    from retrieval.core.index import Index
    from retrieval.core.sources import load_topics

    index, topics = Index(index_dir), load_topics(DATA / "topics.trec")
    quiet = run_baseline(index, topics, "bm25", progress=False)
    assert "bm25" not in capsys.readouterr().err
    shown = run_baseline(index, topics, "bm25", progress=True)
    err = capsys.readouterr().err
    assert "bm25: 100%" in err and f"{len(topics)}/{len(topics)}" in err
    assert shown == quiet


def test_report_shows_progress_unless_quiet(index_dir, tmp_path, capsys):
    run = tmp_path / "ql.txt"
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"), "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["report", str(run), "--qrels", str(DATA / "qrels.txt"), "--out", str(tmp_path / "r")]) == 0
    assert "report: 100%" in capsys.readouterr().err
    assert main(["report", str(run), "--qrels", str(DATA / "qrels.txt"), "--out", str(tmp_path / "r"), "-q"]) == 0
    assert "report:" not in capsys.readouterr().err


# -- 5. one style for every user-facing warning ---------------------------------------------------

def test_logging_warnings_are_one_topicir_line():
    from retrieval.ui.logs import UserFormatter

    fmt = UserFormatter()
    rec = logging.LogRecord("retrieval.core.ranking", logging.WARNING, __file__, 1, "%s: two\nlines", ("run.txt",), None)
    assert fmt.format(rec) == "topicir: warning: run.txt: two lines"
    rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "bad", None, None)
    assert fmt.format(rec) == "topicir: error: bad"
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "indexing", None, None)
    assert fmt.format(rec).endswith(" indexing") and fmt.format(rec)[2] == ":"  # HH:MM:SS message


def test_a_librarys_deprecation_of_its_own_internals_is_not_shown():
    import warnings

    from retrieval.ui.logs import setup_logging

    with warnings.catch_warnings(record=True) as shown:
        setup_logging(quiet=True)
        warnings.warn_explicit("`use_polars` is deprecated", DeprecationWarning, "context.py", 1, module="ray.data.context")
        warnings.warn_explicit("old call", DeprecationWarning, "ranking.py", 2, module="retrieval.core.ranking")
        warnings.warn_explicit("rayon", DeprecationWarning, "rayon.py", 3, module="rayon")
    assert [str(w.message) for w in shown] == ["old call", "rayon"]


def test_an_unclosed_file_is_not_a_users_warning(tmp_path):
    """A signal between an import's open and its ``with`` leaves a file for the collector to close:
    its ResourceWarning is not printed while the command stops with its one line."""
    import gc
    import warnings

    from retrieval.ui.logs import setup_logging

    (tmp_path / "f").write_bytes(b"x")
    with warnings.catch_warnings(record=True) as shown:
        setup_logging(quiet=True)
        open(tmp_path / "f", "rb")
        gc.collect()
        warnings.warn("kept", UserWarning)
    assert [str(w.message) for w in shown] == ["kept"]


def test_a_rerun_warning_reads_as_the_docs_promise(index_dir, tmp_path):
    out = tmp_path / "ql.txt"
    args = ["-q", "run", "--index", index_dir, "--topics", DATA / "topics.trec", "--out", out]
    assert topicir(*args).returncode == 0
    proc = topicir(*args, "--mu", "500")
    assert proc.returncode == 0
    assert proc.stderr == f"topicir: warning: {out}: replacing a run made with other settings (mu: 1000.0 -> 500.0)\n"


# -- 6. --lam -------------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, message", [
    (["--lam", "2"], "expected weights between 0 and 1, got 2"),
    (["--lam", "0.5,-0.1"], "expected weights between 0 and 1, got -0.1"),
    (["--lam", "0.5"], "--lam 0.5 weighs a topic model against QL: give --model MODEL"),
    (["--lam", "0.5", "--baseline", "bm25"], "give --model MODEL instead of --baseline"),
])
def test_lam_is_refused_out_of_range_or_without_a_model(index_dir, tmp_path, capsys, extra, message):
    args = ["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
            "--out-dir", str(tmp_path)]
    assert status(args + extra) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_lam_out_of_range_is_refused_with_a_model_too(index_dir, tmp_path, capsys):
    assert status(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                   "--model", str(tmp_path / "any.npz"), "--lam", "1.5"]) == 2
    assert "expected weights between 0 and 1, got 1.5" in capsys.readouterr().err


def test_default_lam_without_a_model_is_plain_ql(index_dir, tmp_path):
    assert main(["-q", "run", "--index", str(index_dir), "--topics", str(DATA / "topics.trec"),
                 "--lam", "0.7", "--out", str(tmp_path / "ql.txt")]) == 0
    assert read_settings(tmp_path / "ql.txt")["lam"] is None


# -- 7. train prints the model path, one line ---------------------------------------------------

def test_train_prints_exactly_the_model_path(index_dir, tmp_path):
    out = tmp_path / "models" / "lda.npz"
    proc = topicir("train", "lda", "--index", index_dir, "--out", out, "--topics", "3", "--chains", "1",
                   "--iterations", "4", "--burn-in", "2", "--sample-every", "1", "--no-checkpoint")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [str(out)] and out.is_file()
    default = topicir("-q", "train", "lda", "--index", index_dir, "--topics", "3", "--chains", "1",
                      "--iterations", "4", "--burn-in", "2", "--sample-every", "1")
    assert default.returncode == 0, default.stderr
    lines = default.stdout.splitlines()
    assert len(lines) == 1 and Path(lines[0]).is_file() and Path(lines[0]).parent == index_dir / "models"
