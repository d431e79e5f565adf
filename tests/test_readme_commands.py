"""Every command printed in README.md and docs/ runs as printed, so no example drifts from the code.

Pages: README.md, then the docs pages in the order of mkdocs.yml's nav (then any page the nav
lacks), except docs/results/ (written by the commands) and docs/cli.md (generated from the
parsers). Their fenced code blocks are read by language: ``sh`` blocks hold one command per line
(``# comments`` allowed), ``python`` blocks are snippets, ``text`` blocks are not run. Every line
runs in page order, in one scratch directory shared by all pages (so a page may use the index
of the README's tour, as it says), with these liberties and no others:

1. ``../shared/data`` is the shared collections' folder (tests/conftest.py; skipped if absent).
2. ``TOPICIR_QUICK=1`` is set (documented in docs/benchmarks.md): trainings, benchmarks and
   reproductions run at their small settings. ``VAR=value`` before a command sets it too.
3. ``topicir ARGS`` and ``python -m retrieval ARGS`` run in-process (``retrieval.ui.cli.main``);
   ``make demo`` runs its Makefile recipe's last step, ``python -m retrieval demo`` (the install
   before it is the test setup's), then the commands the demo prints to go on with.
4. Not run: ``make test``, ``pip install``, ``python -m pytest`` (this suite) and ``mkdocs``
   (tests/test_docs_site.py). A command printed twice runs once (its first place); README's
   Python API block is tests/test_readme_api.py's, so it runs there (copies of it are checked
   to be identical).
5. ``topicir console`` reads ``#1`` and ``:why 1`` from stdin; globs expand as a shell would.
6. ``reproduce`` and ``bench`` lines are marked slow (``pytest --runslow``) unless listed in
   QUICK_SECONDS (those take seconds in quick mode), and so are ``--ray`` lines (a cluster's
   start; tests/test_ray.py trains on Ray in the default suite). Lines training or running tree-LDA skip
   when WordNet is not installed (``make wordnet``).
7. The lines run as one tour of minutes (each page's commands use what the ones before them
   built), so the tour is marked long: ``make test-long`` runs it, as CI does after ``make
   test``. The default suite checks that every printed line parses and that the pages keep
   their commands.

A command line no rule knows fails the test: add a rule here when the docs gain one.
"""
from __future__ import annotations

import contextlib
import glob
import io
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, SHARED_DATA

DATA_ROOT = "../shared/data"
NOT_RUN = (("make", "test"), ("pip", "install"), ("python", "-m", "pytest"), ("mkdocs",))
SLOW_COMMANDS = {"reproduce", "bench"}
# reproduce/bench lines (their first two words after topicir) that take seconds in quick mode
QUICK_SECONDS: set[tuple[str, str]] = set()
SHELL, PYTHON, TEXT = ("sh", "bash", "shell", "console"), ("python", "py"), ("text", "")
FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str        # path relative to the repository root
    line: int        # 1-based line of the block's first code line
    lang: str
    lines: tuple     # (line number, text) per non-blank line


def pages() -> list[Path]:
    """README.md, then docs/ in the nav order of mkdocs.yml, then any page the nav lacks."""
    docs = ROOT / "docs"
    nav = re.findall(r":\s*([\w./-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    found = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))
    order = [n for n in nav if n in found] + [n for n in found if n not in nav]
    return [ROOT / "README.md"] + [docs / n for n in order
                                   if not n.startswith("results/") and n != "cli.md"]


def fenced_blocks(text: str, page: str = "page.md") -> list[Block]:
    """The fenced code blocks of a Markdown text, with their language."""
    blocks, lang, start, body = [], None, 0, []
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line.strip())
        if lang is None and m:
            lang, start, body = m.group(1).lower(), n + 1, []
        elif lang is not None and line.strip() == "```":
            blocks.append(Block(page, start, lang, tuple(body)))
            lang = None
        elif lang is not None and line.strip():
            body.append((n, line))
    return blocks


def _key(argv: list[str]) -> str:
    return " ".join(argv)


def _api_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"## Python API.*?```python\n(.*?)```", readme, re.S).group(1)


def printed_commands() -> list:
    """One pytest param per command line and Python block, in page order (rule 4 applied)."""
    params, seen, api = [], {}, _api_block().strip()
    for page in pages():
        rel = page.relative_to(ROOT).as_posix()
        for block in fenced_blocks(page.read_text(encoding="utf-8"), rel):
            where = f"{rel}:{block.line}"
            if block.lang in PYTHON:
                source = "\n".join(t for _, t in block.lines)
                if source.strip() == api.strip() or source in seen:
                    continue
                seen[source] = where
                params.append(pytest.param(block, id=f"{where} python"))
            elif block.lang in SHELL:
                for line_no, text in block.lines:
                    argv = shlex.split(text, comments=True)
                    if not argv or _key(argv) in seen:
                        continue
                    seen[_key(argv)] = f"{rel}:{line_no}"
                    words = [a for a in argv if "=" not in a or a.startswith("-")]
                    slow = (len(words) > 2 and words[0] == "topicir" and words[1] in SLOW_COMMANDS
                            and tuple(words[1:3]) not in QUICK_SECONDS) or "--ray" in words
                    params.append(pytest.param((rel, line_no, argv), id=f"{rel}:{line_no} {' '.join(words[:3])}",
                                               marks=[pytest.mark.slow] if slow else []))
            elif block.lang not in TEXT:
                raise AssertionError(f"{where}: code block language {block.lang!r}: use sh, python or text")
    return params


# --- what a printed line runs as -------------------------------------------------------------

def to_cli(argv: list[str], data: Path) -> tuple[dict, list[str] | None]:
    """(environment settings, topicir argv) for a printed line; argv None: not run (rule 4)."""
    env = {}
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
        name, value = argv[0].split("=", 1)
        env[name], argv = value, argv[1:]
    if any(tuple(argv[:len(p)]) == p for p in NOT_RUN):
        return env, None
    argv = [a.replace(DATA_ROOT, str(data)) for a in argv]
    if argv[:2] == ["make", "demo"]:
        recipe = (ROOT / "Makefile").read_text(encoding="utf-8").split("\ndemo:", 1)[1].split("\n\n", 1)[0]
        assert recipe.rstrip().endswith("-m retrieval demo"), "the Makefile's demo recipe changed: update rule 3"
        return env, ["demo"]
    if argv[:3] == ["python", "-m", "retrieval"]:
        return env, argv[3:]
    if argv[:1] == ["topicir"]:
        return env, argv[1:]
    raise AssertionError(f"no rule for {' '.join(argv)!r}: add one to tests/test_readme_commands.py")


def _glob(argv: list[str]) -> list[str]:
    out = []
    for arg in argv:
        matches = sorted(glob.glob(arg)) if any(c in arg for c in "*?[") and not arg.startswith("-") else [arg]
        assert matches, f"{arg}: no file matches the printed glob"
        out += matches
    return out


def _has_wordnet() -> bool:
    return Path(os.environ.get("WORDNET_DIR", "/usr/share/wordnet"), "data.noun").exists()


# --- the tests -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The scratch directory every printed command runs in, in quick mode, with Cranfield in
    ir_datasets' download cache (a copy of the download, as `make demo` seeds it)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    import ir_datasets

    cran = ir_datasets.util.home_path() / "cranfield" / "cran.tar.gz"
    if not cran.exists():
        cran.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED_DATA / "irds-cache" / "cranfield" / "cran.tar.gz", cran)
    work = tmp_path_factory.mktemp("printed-commands")
    old_cwd, old_quick = os.getcwd(), os.environ.get("TOPICIR_QUICK")
    os.chdir(work)
    os.environ["TOPICIR_QUICK"] = "1"
    yield work
    os.chdir(old_cwd)
    if old_quick is None:
        os.environ.pop("TOPICIR_QUICK", None)
    else:
        os.environ["TOPICIR_QUICK"] = old_quick


def test_pages_have_commands():
    params = printed_commands()
    lines = [p.values[0] for p in params if not isinstance(p.values[0], Block)]
    assert len(lines) > 30
    assert {"README.md", "docs/models/lda.md", "docs/user-guide.md"} <= {page for page, _, _ in lines}
    assert any(argv[:2] == ["make", "demo"] for _, _, argv in lines)


def test_copies_of_the_api_block_are_the_readmes():
    """The Python API block appears verbatim wherever it is printed (tests/test_readme_api.py runs it)."""
    api = _api_block()
    copies = [p for p in pages() if "tir.build_index([" in p.read_text(encoding="utf-8")]
    assert copies, "README.md's Python API block is gone"
    for page in copies:
        assert api in page.read_text(encoding="utf-8"), f"{page}: its copy of README's Python API block differs"


def test_readme_table_commands_are_printed_and_run():
    """The model table's `train` commands (inline code) are lines of the docs' sh blocks, so they run."""
    printed = {_key(p.values[0][2]) for p in printed_commands() if not isinstance(p.values[0], Block)}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    inline = [c for row in readme.splitlines() if row.startswith("|")
              for c in re.findall(r"`(topicir [^`]+)`", row)]
    assert len(inline) == 6
    for command in inline:
        assert _key(shlex.split(command)) in printed, f"README table command not printed in a page: {command}"


@pytest.mark.regression
@pytest.mark.long
@pytest.mark.parametrize("command", printed_commands())
def test_printed_command_runs(command, workspace, monkeypatch, capsys):
    data = SHARED_DATA.resolve()
    if isinstance(command, Block):
        source = "\n".join(t for _, t in command.lines).replace(DATA_ROOT, str(data))
        exec(compile(source, f"{command.page}:{command.line}", "exec"), {"__name__": "__docs__"})
        assert capsys.readouterr().out.strip(), f"{command.page}:{command.line}: the snippet printed nothing"
        return
    page, line_no, printed = command
    env, argv = to_cli(printed, data)
    where = f"{page}:{line_no}: {' '.join(printed)}"
    if argv is None:
        pytest.skip(f"{where} is not run (rule 4)")
    if "tree-lda" in printed and not _has_wordnet():
        pytest.skip("WordNet is not installed (make wordnet)")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    argv = _glob(argv)
    if argv[0] == "console":
        monkeypatch.setattr(sys, "stdin", io.StringIO("#1\n:why 1\n"))
    from retrieval.ui.cli import main

    with contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, f"{where}\nexited {rc}:\n{err.getvalue()[-3000:]}"
    assert out.strip(), f"{where}\nprinted nothing"
    if argv[0] == "train":  # one stdout line: the model path given with --out
        assert out.strip().splitlines()[-1] == argv[argv.index("--out") + 1]
    if argv[0] == "demo":  # its table, and the commands it prints to go on with, pasted
        assert all(m in out for m in ("QL (exact Dirichlet)", "BM25+RM3", "LDA smoothing", "p vs QL"))
        pasted = [shlex.split(line)[1:] for line in out.splitlines() if line.startswith("    topicir ")]
        assert [a[0] for a in pasted] == ["console", "report"]
        monkeypatch.setattr(sys, "stdin", io.StringIO("#1\n:why 1\n"))
        for args in pasted:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                assert main(args) == 0, f"demo's next command topicir {' '.join(args)}:\n{err.getvalue()[-2000:]}"
        assert "AP" in capsys.readouterr().out  # the console's topic #1 with its AP


def test_rules_on_a_made_up_page(tmp_path):
    text = ("# t\n\n```text\nscore(d) = sum of log P(w|d)\n```\n\n```sh\ntopicir run --index indexes/x  # QL\n"
            "make test\nTOPICIR_QUICK=1 topicir bench ql\n```\n\n```python\nimport os\nprint(1)\n```\n\n"
            "```sh\ndocker run x\n```\n")
    blocks = fenced_blocks(text)
    assert [(b.line, b.lang, len(b.lines)) for b in blocks] == [(4, "text", 1), (8, "sh", 3), (14, "python", 2),
                                                                  (19, "sh", 1)]
    run = shlex.split(blocks[1].lines[0][1], comments=True)
    assert to_cli(run, tmp_path) == ({}, ["run", "--index", "indexes/x"])
    assert to_cli(["make", "test"], tmp_path) == ({}, None)
    assert to_cli(shlex.split(blocks[1].lines[2][1]), tmp_path) == ({"TOPICIR_QUICK": "1"}, ["bench", "ql"])
    assert to_cli(["topicir", "reproduce", "smoothing", "--data", "../shared/data"], tmp_path)[1] == [
        "reproduce", "smoothing", "--data", str(tmp_path)]
    assert to_cli(["make", "demo"], tmp_path) == ({}, ["demo"])
    with pytest.raises(AssertionError, match="no rule for 'docker run x'"):
        to_cli(["docker", "run", "x"], tmp_path)


def test_every_printed_command_parses(tmp_path):
    """Every printed topicir line, the slow ones included, is accepted by the command's parser:
    a renamed option or a missing subcommand fails here without running anything."""
    from retrieval.ui.cli_parser import build_parser

    parser = build_parser()
    lines = [p.values[0] for p in printed_commands() if not isinstance(p.values[0], Block)]
    checked = 0
    for page, line_no, printed in lines:
        _, argv = to_cli(printed, tmp_path)
        if argv is None:
            continue
        with contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                parser.parse_args(argv)
            except SystemExit:
                pytest.fail(f"{page}:{line_no}: {' '.join(printed)}\n{err.getvalue()[-500:]}")
        checked += 1
    assert checked > 30
