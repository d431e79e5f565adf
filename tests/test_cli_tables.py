"""`topicir reproduce NAME` and `topicir bench AREA` (issue 29, point 3): the names of the
results contract, one header for every written table, quick settings, and docs/cli.md current."""
import datetime as dt
import os
import re
from pathlib import Path

import pytest

from retrieval.core.tables import Table
from retrieval.ui.cli import main

ROOT = Path(__file__).resolve().parents[1]
NEWS = Path(os.environ.get("TOPICIR_SHARED_DATA", ROOT.parent / "shared" / "data")) / "20news" / "20news-bydate.tar.gz"


def test_names_are_the_contracts():
    from retrieval.ui.cli_bench import bench_areas
    from retrieval.ui.cli_reproduce import REPRODUCTIONS

    assert [r.name for r in REPRODUCTIONS] == ["regressions", "effectiveness", "smoothing", "comp5", "heldout",
                                               "glda-table", "glda-map", "tree-lda-table1", "tree-lda-map", "growing",
                                               "avipam-tables"]
    assert bench_areas() == sorted(["ql", "lda", "pam", "tcm", "glda", "tree-lda", "avipam", "ray", "ray-memory",
                                    "scale", "full", "peers", "foldin", "files"])


def test_no_module_entry_points_or_argparse_outside_the_cli():
    for layer in ("bench", "experiments"):
        for path in (ROOT / "retrieval" / layer).glob("*.py"):
            text = path.read_text()
            assert "argparse" not in text and "def main(" not in text and "__main__" not in text, path
            assert "python -m retrieval." not in text, path


def test_table_text_and_markdown():
    t = Table("T", [{"name": "a|b", "AP": 0.5, "n": 3, "speed": "2.0x"}, {"name": "c", "AP": 0.25, "n": 4,
                                                                          "speed": "n/a"}], notes=["n1", "n2"])
    assert t.text().splitlines() == ["T", "name     MAP  n  speed", "----  ------  -  -----",
                                     "a|b   0.5000  3   2.0x", "c     0.2500  4    n/a", "n1", "n2"]
    assert t.markdown().splitlines() == ["## T", "", "| name | MAP | n | speed |", "|---|---:|---:|---|",
                                         "| a\\|b | 0.5000 | 3 | 2.0x |", "| c | 0.2500 | 4 | n/a |", "",
                                         "n1  ", "n2"]


def test_header_says_how_the_figures_were_made(monkeypatch):
    from retrieval import __version__
    from retrieval.ui.results import cpu_model, header

    monkeypatch.delenv("TOPICIR_QUICK", raising=False)
    text = header(["bench", "ql", "--docs", "a b"], dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.timezone.utc))
    assert "Command: `topicir bench ql --docs 'a b'`" in text
    assert f"topicir {__version__}, 2026-01-02 03:04 UTC, {cpu_model()} ({os.cpu_count()} cores)" in text
    assert cpu_model() and cpu_model() != "unknown CPU"
    monkeypatch.setenv("TOPICIR_QUICK", "1")
    assert "Command: `TOPICIR_QUICK=1 topicir bench ql" in header(["bench", "ql"])


def test_bench_ql_prints_and_writes_its_table(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TOPICIR_QUICK", raising=False)
    out = tmp_path / "results" / "bench-ql.md"
    # no shared index, no baselines: indexes/cranfield, there after `make demo`, would time the Lucene
    # baselines for minutes (tests/test_baselines.py checks that table on a small index)
    argv = ["-q", "bench", "ql", "--docs", "500", "--terms", "800", "--mean-len", "30", "--queries", "5",
            "--shared", "", "--baselines", "", "--write", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Ranking 5 three-term queries over every document") and "synthetic 500 docs" in printed
    text = out.read_text()
    assert f"Command: `topicir {' '.join(a if a else repr(a) for a in argv)}`" in text
    assert "| synthetic 500 docs, 0.0 M tokens | topicir exact QL |" in text
    assert "Lucene baselines" not in text
    assert [p.name for p in out.parent.iterdir()] == ["bench-ql.md"]  # no temporary left


def test_write_is_atomic(tmp_path, monkeypatch):
    from retrieval.ui import results

    path = tmp_path / "r.md"
    path.write_text("old\n")

    class Boom(Table):
        def markdown(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        results.write_tables(path, [Table("ok", [{"a": 1}]), Boom("x", [])], ["bench", "ql"])
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["r.md"]


def test_quick_settings_take_the_place_of_defaults_only(monkeypatch):
    from retrieval.ui.cli_parser import _quiet_everywhere, build_parser
    from retrieval.ui.cli_tables import options

    parser = build_parser()
    _quiet_everywhere(parser)
    monkeypatch.setenv("TOPICIR_QUICK", "1")
    kw = options(parser.parse_args(["bench", "lda"]))
    assert (kw["k"], kw["iters"], kw["docs"]) == ([10], 5, 500)
    kw = options(parser.parse_args(["bench", "lda", "--iters", "7"]))
    assert (kw["k"], kw["iters"]) == ([10], 7)  # given on the command line: kept
    kw = options(parser.parse_args(["reproduce", "comp5"]))
    assert kw["samples"] == 20 and set(kw["params"]) == {"lda", "pam", "glda"}
    monkeypatch.delenv("TOPICIR_QUICK")
    kw = options(parser.parse_args(["bench", "lda"]))
    assert (kw["k"], kw["iters"], kw["docs"]) == ([100, 800], 50, None)


def test_every_command_declares_quick_settings_that_are_its_options():
    from retrieval.ui.cli_parser import build_parser
    from retrieval.ui.cli_bench import AVIPAM, BENCHES
    from retrieval.ui.cli_reproduce import REPRODUCTIONS

    build_parser()
    for cmd in BENCHES + AVIPAM + REPRODUCTIONS:
        if cmd.name == "prepare":
            continue  # writes a file, measures nothing
        assert cmd.quick, cmd.name
        import argparse

        p = argparse.ArgumentParser()
        cmd.add(p)
        dests = {a.dest for a in p._actions}
        assert set(cmd.quick) - {"params"} <= dests, cmd.name


def test_regressions_exit_1_on_a_regression(monkeypatch, tmp_path, capsys):
    from retrieval.experiments import regressions

    row = {"collection": "med", "method": "QL (exact Dirichlet)", "AP": 0.40, "P@10": 0.5, "expected MAP": 0.4955}
    monkeypatch.setattr(regressions, "run_collection", lambda data, name, indexes: [dict(row)])
    out = tmp_path / "regressions.md"
    assert main(["-q", "reproduce", "regressions", "--data", str(tmp_path), "--collections", "med",
                 "--write", str(out)]) == 1
    captured = capsys.readouterr()
    assert "REGRESSION: med QL (exact Dirichlet): MAP 0.4000, expected 0.4955" in captured.err
    assert "| med | QL (exact Dirichlet) | 0.4000 | 0.5000 | 0.4955 |" in out.read_text()
    monkeypatch.setattr(regressions, "run_collection", lambda data, name, indexes: [dict(row, AP=0.4950)])
    assert main(["-q", "reproduce", "regressions", "--data", str(tmp_path), "--collections", "med"]) == 0


@pytest.mark.skipif(not NEWS.is_file(), reason="20 Newsgroups not in the shared data")
def test_bench_pam_ends_with_tables(capsys, monkeypatch):
    monkeypatch.setenv("TOPICIR_QUICK", "1")
    assert main(["-q", "bench", "pam", "--data", str(NEWS), "--every", "200"]) == 0
    out = capsys.readouterr().out
    assert "PAM training speed: topicir against tomotopy's PAModel" in out
    assert "Terms evaluated per token along each topicir run" in out
    assert "<models." not in out and "array(" not in out and "{" not in out
    rows = [line.split() for line in out.splitlines() if line.startswith("4,8")]
    assert [r[1] for r in rows[:3]] == ["tomotopy", "exact", "pruned"]


def test_cli_reference_is_current(tmp_path, monkeypatch):
    """docs/cli.md is the parsers' help; regenerate it with `topicir cli-reference --write docs/cli.md`."""
    from retrieval.ui.cli_parser import write_reference
    from retrieval.ui.cli_reference import COMMAND

    monkeypatch.delenv("TOPICIR_QUICK", raising=False)
    fresh = write_reference(tmp_path / "cli.md").read_text()
    assert fresh.startswith(f"<!-- Generated by `{COMMAND}`")
    for name in ("topicir reproduce regressions", "topicir bench pam", "topicir train lda", "topicir run"):
        assert f"\n## {name}\n" in fresh
    assert (ROOT / "docs" / "cli.md").read_text() == fresh, f"docs/cli.md is stale: run `{COMMAND}`"


def test_cli_reference_command_writes_the_file(tmp_path, capsys):
    assert main(["-q", "cli-reference", "--write", str(tmp_path / "cli.md")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'cli.md'}\n"
    assert re.search(r"^## topicir bench avipam map$", (tmp_path / "cli.md").read_text(), re.M)


QUICK_COMMANDS = [
    ["reproduce", "regressions", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "effectiveness", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "smoothing", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "comp5", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["reproduce", "heldout", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["reproduce", "glda-table", "--data", "{data}", "--out", "{tmp}/glda", "--cache", "{tmp}/cache"],
    ["reproduce", "glda-map", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "tree-lda-table1", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["reproduce", "tree-lda-map", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "growing", "--data", "{data}", "--indexes", "{indexes}"],
    ["reproduce", "avipam-tables", "--newsgroups", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "ql"],
    ["bench", "lda", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "pam", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "tcm", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "glda", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "tree-lda", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "avipam", "collapse", "--newsgroups", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "avipam", "map", "--data", "{data}", "--indexes", "{indexes}"],
    ["bench", "ray", "--data", "{data}/20news/20news-bydate.tar.gz"],
    ["bench", "ray-memory", "--work", "{tmp}/ray-memory"],
    ["bench", "scale", "--work", "{tmp}/scale"],
    ["bench", "full", "--work", "{tmp}/full"],
    ["bench", "foldin"],
]


@pytest.mark.slow
@pytest.mark.parametrize("argv", QUICK_COMMANDS, ids=lambda a: " ".join(a[:3 if a[1] == "avipam" else 2]))
def test_every_command_runs_quick_and_writes_its_table(argv, shared_data, shared_indexes, tmp_path, monkeypatch,
                                                       capsys):
    """Each reproduction and benchmark at its quick settings (a smoke test of about a minute)."""
    monkeypatch.setenv("TOPICIR_QUICK", "1")
    fill = dict(data=shared_data, indexes=shared_indexes, tmp=tmp_path)
    out = tmp_path / "table.md"
    assert main(["-q", *(a.format(**fill) for a in argv), "--write", str(out)]) == 0
    printed = capsys.readouterr().out
    text = out.read_text()
    assert text.startswith("<!-- Generated by the command below") and "Command: `TOPICIR_QUICK=1 topicir" in text
    assert "\n## " in text and "|---" in text and printed.strip()
