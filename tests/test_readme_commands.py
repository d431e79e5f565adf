"""Every command of README.md runs as printed, so no example drifts from the code.

The commands are the README's code blocks (4-space indented or fenced): a block whose lines start
with ``topicir``, ``python`` (``-m retrieval``), ``make`` or ``pip`` is a shell block, one that starts
with ``import``/``from`` is a Python snippet; other blocks (formulas) are text. Each command runs
in-process, in README order, in one scratch directory, after these rewrite rules (and no others):

1. ``../shared/data`` is the shared test collections' folder (tests/conftest.py; skipped if absent).
2. One collection: every shared collection named in an index path (``indexes/cacm``), a data path
   (``.../cacm/topics.trec``) or ``--collections`` becomes med (1,033 documents); so does AP
   (``indexes/ap``), which users index from their own TREC disks (not in the shared data).
3. ``--ray ADDRESS`` (a cluster of the reader's) trains on a local Ray cluster (``--ray``).
   Trainings are shortened: ``train`` gets 10 topics (PAM: 2 super-, 8 sub-topics), 1 chain,
   3 sweeps, burn-in 2, a sample every sweep (so one sample); ``smoothing`` K = 10 with the same
   schedule; ``make demo`` is ``topicir demo --k 10 --iterations 3``.
4. A model file a command names that no earlier command wrote (its name records the printed,
   not the shortened, settings) is the newest model of that kind on that index, or, if there is
   none, a shortened model trained there first.
5. An index a command names that does not exist yet is built first (shared collection, or
   ``irds:<name>``); ``topicir index`` onto an existing index gets ``--force``.
6. ``topicir console`` reads ``#1`` and ``:why 1`` from stdin; globs are expanded as a shell would.
   The commands ``make demo`` prints to go on with run too, as printed.
7. Not run: ``make test`` and ``python -m pytest`` (this suite), ``make install`` and ``pip
   install`` (the test setup has installed). Marked slow (``pytest --runslow``): ``bench``,
   ``comp5``, ``heldout`` (minutes), ``regressions`` (minutes; tests/test_regressions.py runs it
   collection by collection), and the benchmark and experiment modules ``python -m
   retrieval.bench.X`` / ``retrieval.experiments.X`` (minutes to hours), which then run
   in-process through their ``main(argv)`` after rules 1 and 2.

A command line no rule knows fails the test: add a rule here when the README gains one.
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

README = ROOT / "README.md"
COMMAND_WORDS = ("topicir", "python", "make", "pip")
SMALL = "med"
COLLECTIONS = ("med", "cran", "cisi", "cacm", "npl", "scifact", "adi")
SLOW = {"bench", "comp5", "heldout", "regressions"}
MODULES = ("retrieval.bench.", "retrieval.experiments.")
NOT_RUN = {("make", "test"), ("make", "install"), ("pip", "install")}
SHORT_TRAIN = {"--chains": "1", "--iterations": "3", "--burn-in": "2", "--sample-every": "1"}
SHORT_SIZE = {"pam": {"--super": "2", "--sub": "8"}}  # every other kind: 10 topics
MODEL_PATH = re.compile(r"indexes/([\w.+-]+)/models/(tree-lda|\w+)-[\w.+-]*\.npz")


@dataclass(frozen=True)
class Block:
    line: int        # 1-based line of README.md where the block starts
    kind: str        # "shell" or "python"
    lines: tuple     # (line number, text) per line


def readme_blocks(text: str) -> list[Block]:
    """Code blocks of a Markdown text: 4-space indented ones after a blank line, and fenced ones."""
    raw, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            raw.append([(n + 1, lines[n]) for n in range(i + 1, j)])
            i = j + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            raw.append([(n + 1, lines[n][4:]) for n in range(i, j) if lines[n].strip()])
            i = j
        else:
            i += 1
    blocks = []
    for body in raw:
        body = [(n, t) for n, t in body if t.strip()]
        if not body:
            continue
        first = body[0][1].lstrip()
        if first.startswith(("import ", "from ")):
            blocks.append(Block(body[0][0], "python", tuple(body)))
        elif any(t.split()[0] in COMMAND_WORDS for _, t in body) or all(
                re.fullmatch(r"[a-z][\w.-]*", t.split()[0]) and len(t.split()) > 1 and t.split()[1] != "="
                for _, t in body):
            # a block of command-like lines even if no rule knows the program: fails loudly in rewrite
            blocks.append(Block(body[0][0], "shell", tuple(body)))
    return blocks


def readme_commands() -> list:
    params = []
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.kind == "python":
            params.append(pytest.param(block, id=f"README.md:{block.line} python"))
            continue
        for line_no, text in block.lines:
            argv = shlex.split(text, comments=True)
            marks = [pytest.mark.slow] if len(argv) > 1 and argv[1] in SLOW or _module(argv) else []
            params.append(pytest.param((line_no, text, argv), id=f"README.md:{line_no} {' '.join(argv[:2])}",
                                       marks=marks))
    return params


# --- rewrite rules ---------------------------------------------------------------------------

def _set(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        argv = list(argv)
        argv[argv.index(flag) + 1] = value
        return argv
    return [*argv, flag, value]


def _module(argv: list[str]) -> str | None:
    """The benchmark or experiment module a ``python -m`` line runs (rule 7), else None."""
    if argv[:2] == ["python", "-m"] and len(argv) > 2 and argv[2].startswith(MODULES):
        return argv[2]
    return None


def _one_collection(arg: str) -> str:
    """Rule 2: any shared collection (and AP) in a path becomes SMALL."""
    names = "|".join(c for c in (*COLLECTIONS, "ap") if c != SMALL)
    return re.sub(rf"(indexes/|data/)({names})(?=/|$)", rf"\g<1>{SMALL}", arg)


def rewrite(argv: list[str], data: Path) -> list[str] | None:
    """The argv to run for a README command line (rules 1-3, 6, 7); None: not run."""
    if tuple(argv[:2]) in NOT_RUN:
        return None
    if argv[:2] == ["make", "demo"]:
        return ["demo", "--k", "10", "--iterations", "3"]
    if argv[:3] == ["python", "-m", "pytest"]:
        return None
    if _module(argv):
        return ["-m", argv[2], *[_one_collection(a.replace("../shared/data", str(data))) for a in argv[3:]]]
    if argv[:3] == ["python", "-m", "retrieval"]:
        argv = ["topicir", *argv[3:]]
    if argv[0] != "topicir":
        raise AssertionError(f"no README rule for {' '.join(argv)!r}: add one to tests/test_readme_commands.py")
    argv = [_one_collection(a.replace("../shared/data", str(data))) for a in argv[1:]]
    if "--collections" in argv:
        start = argv.index("--collections") + 1
        end = next((i for i in range(start, len(argv)) if argv[i].startswith("--")), len(argv))
        argv = argv[:start] + [SMALL] + argv[end:]
    command = argv[0]
    if command == "train":
        if "--ray" in argv and argv.index("--ray") + 1 < len(argv) and not argv[argv.index("--ray") + 1].startswith("-"):
            del argv[argv.index("--ray") + 1]
        for flag, value in {**SHORT_SIZE.get(argv[1], {"--topics": "10"}), **SHORT_TRAIN}.items():
            argv = _set(argv, flag, value)
    elif command == "smoothing":
        for flag, value in {"--k": "10", "--collections": SMALL, **SHORT_TRAIN}.items():
            argv = _set(argv, flag, value)
    expanded = []
    for arg in argv:  # rule 6: the shell's globbing
        matches = sorted(glob.glob(arg)) if any(c in arg for c in "*?[") and not arg.startswith("-") else [arg]
        assert matches, f"{arg}: no file matches the README's glob"
        expanded += matches
    return expanded


def _ensure_index(name: str, data: Path):
    """Rule 5."""
    from retrieval.core.index import build_index

    path = Path("indexes") / name
    if not path.exists():
        source = str(data / name / "docs") if (data / name).is_dir() else f"irds:{name}"
        build_index([source], path)
    return path


def _ensure_models(argv: list[str], data: Path) -> list[str]:
    """Rules 4 and 5 for the index and model paths of one command."""
    from retrieval.core.index import Index
    from retrieval.core.modelfiles import train_model

    if "--index" in argv and argv[0] != "index":
        _ensure_index(Path(argv[argv.index("--index") + 1]).name, data)
    if argv[0] == "index" and "--out" in argv and Path(argv[argv.index("--out") + 1]).exists():
        argv = [*argv, "--force"]
    out = []
    for arg in argv:
        m = MODEL_PATH.fullmatch(arg)
        if m and not Path(arg).exists():
            name, kind = m.groups()
            _ensure_index(name, data)
            trained = sorted(Path(arg).parent.glob(f"{kind}-*.npz"), key=lambda p: p.stat().st_mtime)
            if trained:
                arg = str(trained[-1])
            else:
                size = {"pam": dict(n_super=2, n_sub=8)}.get(kind, dict(n_topics=10))
                train_model(Index(Path("indexes") / name), kind, arg, progress=False, checkpoint=False,
                            n_chains=1, n_iter=3, burn_in=2, sample_every=1, **size)
        out.append(arg)
    return out


# --- the test --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A scratch directory as the cwd of every README command, with Cranfield in ir_datasets' cache."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    import ir_datasets

    cran = ir_datasets.util.home_path() / "cranfield" / "cran.tar.gz"
    if not cran.exists():  # byte-identical to ir_datasets' download (see ../shared/data/README.md)
        cran.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SHARED_DATA / "irds-cache" / "cranfield" / "cran.tar.gz", cran)
    work = tmp_path_factory.mktemp("readme")
    old = os.getcwd()
    os.chdir(work)
    yield work
    os.chdir(old)


def test_readme_has_commands():
    params = readme_commands()
    assert len(params) > 20
    kinds = {p.values[0].kind if isinstance(p.values[0], Block) else p.values[0][2][0] for p in params}
    assert {"topicir", "make", "python"} <= kinds


@pytest.mark.regression
@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command, workspace, monkeypatch, capsys):
    data = SHARED_DATA.resolve()
    if isinstance(command, Block):
        source = "\n".join(t for _, t in command.lines)
        source = _one_collection(source.replace("../shared/data", str(data)))
        for path in {m.group(0) for m in MODEL_PATH.finditer(source)}:
            source = source.replace(path, _ensure_models([path], data)[0])
        exec(compile(source, f"README.md:{command.line}", "exec"), {"__name__": "__readme__"})
        assert capsys.readouterr().out.strip(), "the snippet printed nothing"
        return
    line_no, text, argv = command
    argv = rewrite(argv, data)
    if argv is None:
        pytest.skip(f"README.md:{line_no}: {text.strip()!r} is not run (rule 7)")
    argv = _ensure_models(argv, data)
    if argv[0] == "-m":  # rule 7: a benchmark or experiment module, in-process
        import importlib

        rc = importlib.import_module(argv[1]).main(argv[2:])
        assert rc in (0, None), f"README.md:{line_no}: python -m {' '.join(argv[1:])} exited {rc}"
        assert capsys.readouterr().out.strip(), f"README.md:{line_no}: printed nothing"
        return
    if argv[0] == "console":
        monkeypatch.setattr(sys, "stdin", io.StringIO("#1\n:why 1\n"))
    from retrieval.ui.cli import main

    with contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0, f"README.md:{line_no}: topicir {' '.join(argv)} exited {rc}\n{err.getvalue()[-2000:]}"
    assert out.strip(), f"README.md:{line_no}: topicir {' '.join(argv)} printed nothing"
    if argv[0] == "demo":  # its table, and the next commands it prints run as pasted
        assert all(m in out for m in ("QL (exact Dirichlet)", "BM25+RM3", "LDA smoothing", "p vs QL"))
        pasted = [shlex.split(line)[1:] for line in out.splitlines() if line.startswith("    topicir ")]
        assert [a[0] for a in pasted] == ["console", "report"]
        monkeypatch.setattr(sys, "stdin", io.StringIO("#1\n:why 1\n"))
        for args in pasted:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                assert main(args) == 0, f"demo's next command topicir {' '.join(args)}:\n{err.getvalue()[-2000:]}"
        assert "AP" in capsys.readouterr().out  # the console's topic #1 with its AP


def test_blocks_and_rules_on_a_made_up_readme(tmp_path):
    text = ("# t\n\n    score(d) = sum of log P(w|d)\n\ntext\n\n    topicir run --index indexes/cacm  # QL\n"
            "    make test\n\n```sh\npython -m retrieval smoothing --data ../shared/data --collections cacm npl\n```\n\n"
            "    import pyterrier as pt\n    print(1)\n\nmore\n\n    docker run x\n")
    blocks = readme_blocks(text)
    assert [(b.line, b.kind, len(b.lines)) for b in blocks] == [(7, "shell", 2), (11, "shell", 1), (14, "python", 2),
                                                                  (19, "shell", 1)]
    data = tmp_path
    assert rewrite(shlex.split(blocks[0].lines[0][1], comments=True), data) == ["run", "--index", "indexes/med"]
    assert rewrite(["make", "test"], data) is None
    smoothing = rewrite(shlex.split(blocks[1].lines[0][1]), data)
    assert smoothing[:5] == ["smoothing", "--data", str(data), "--collections", "med"]
    assert smoothing[5:] == ["--k", "10", "--chains", "1", "--iterations", "3", "--burn-in", "2", "--sample-every", "1"]
    train = rewrite(["topicir", "train", "pam", "--index", "indexes/cran", "--sub", "800", "--iterations", "100"], data)
    assert train[:8] == ["train", "pam", "--index", "indexes/med", "--sub", "8", "--iterations", "3"]
    with pytest.raises(AssertionError, match="no README rule for 'docker run x'"):
        rewrite(["docker", "run", "x"], data)
