"""`make test` runs again in the same checkout: its pytest line still parses once the folder of
its compile report exists (pytest takes a separate option value for a test path before
tests/conftest.py defines the option)."""
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_test_args():
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipe = lines[lines.index(next(line for line in lines if line.startswith("test:"))) + 1]
    words = shlex.split(recipe.strip())
    return words[words.index("pytest") + 1:]


def test_make_tests_pytest_line_parses_when_its_report_folder_exists(tmp_path):
    args = make_test_args()
    at = next(i for i, a in enumerate(args) if a.startswith("--numba-compiles"))
    report = tmp_path / "numba-compiles"
    report.mkdir()  # as after a first run
    if args[at] == "--numba-compiles":
        args[at + 1] = str(report)
    else:
        args[at] = f"--numba-compiles={report}"
    args = [a for a in args if a not in ("-n", "2", "--dist", "loadfile")]
    # nothing collected: only the command line's parsing is under test
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, "--collect-only",
                           "--ignore-glob=*/test_*.py"],
                          cwd=ROOT, capture_output=True, text=True)
    assert "unrecognized arguments" not in proc.stderr, proc.stderr
    assert proc.returncode == 5, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
