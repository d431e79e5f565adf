"""Issue 59: the start of a topicir command. Ctrl-C or SIGTERM in its first moments (while the
library loads) ends it with one line and exit 130, and the start itself loads only what the
command runs (``--version`` and ``--help`` load no numpy)."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, sigint_as_from_a_terminal

DATA = Path(__file__).parent / "data"
# The entry point as the installed `topicir` script runs it; "started" once its module is imported.
ENTRY = "import sys\nfrom retrieval.ui.cli import main\nprint('started', flush=True)\nsys.exit(main())"


@pytest.mark.parametrize("command", [
    ["index", DATA / "docs.trec", "--out", "{tmp}/idx"],
    ["train", "lda", "--index", "{tmp}/none", "--topics", "3"],
    ["run", "--index", "{tmp}/none", "--topics", DATA / "topics.trec", "--out-dir", "{tmp}/runs"],
])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_library_loads_is_one_line_and_exit_130(command, signum, tmp_path):
    argv = [str(a).format(tmp=tmp_path) for a in command]
    proc = subprocess.Popen([sys.executable, "-c", ENTRY, "-q", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_as_from_a_terminal)
    assert proc.stdout.readline() == "started\n"
    time.sleep(0.05)  # in the imports of the parser and the command (numba, the index reader)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err in (f"topicir {argv[0]}: interrupted\n", "topicir: interrupted\n")
    assert out == "" and not (tmp_path / "idx").exists()


@pytest.mark.parametrize("error, wait", [("KeyboardInterrupt", 5), ("KeyboardInterrupt", 0), ("ValueError('kept')", 0)])
def test_an_interrupt_python_drops_in_a_callback_still_stops_the_command(error, wait):
    """A signal that lands in a weakref callback of the import machinery is "Exception ignored"
    and dropped by Python: the command line delivers it again, also where the command ends at once;
    other such errors are only printed."""
    code = ("import signal, time, weakref\nfrom retrieval.ui.stop_signals import interrupts_not_lost, terminate\n"
            "signal.signal(signal.SIGTERM, terminate)\nclass A: pass\n"
            f"def callback(ref): raise {error}\n"
            "try:\n    with interrupts_not_lost():\n        a = A(); ref = weakref.ref(a, callback); del a\n"
            f"        time.sleep({wait})\n    print('went on')\n"
            "except KeyboardInterrupt:\n    print('interrupted')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if error == "KeyboardInterrupt":
        assert (out.stdout, out.stderr) == ("interrupted\n", "")
    else:
        assert out.stdout == "went on\n" and "Exception ignored" in out.stderr and "ValueError: kept" in out.stderr


def test_the_entry_module_imports_only_the_standard_library():
    """What runs before main() installs the handlers: nothing of numpy, argparse's parsers or the library
    (the signal handlers' module is standard library only)."""
    code = ("import sys\nbefore = set(sys.modules)\nimport retrieval.ui.cli\n"
            "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in ('retrieval', 'models'))\n"
            "print(new, 'numpy' in sys.modules, 'argparse' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['models', 'models._version', 'retrieval', 'retrieval.ui', 'retrieval.ui.cli', 'retrieval.ui.stop_signals'] False False"


def test_version_and_help_load_no_numpy():
    code = ("import sys, io, contextlib\nfrom retrieval.ui.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    for argv in (['--version'], ['--help'], ['run', '--help'], ['eval', '--help']):\n"
            "        try:\n            main(argv)\n        except SystemExit:\n            pass\n"
            "print(out.getvalue().splitlines()[0], 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "topicir 0.1.0 False"


def test_the_public_api_is_imported_on_first_use():
    code = ("import sys, retrieval, models\nassert 'numpy' not in sys.modules and 'numba' not in sys.modules\n"
            "from retrieval import MU, Index, FeedbackSettings, kinds\nfrom models import LDA\n"
            "import retrieval.core.feedback as fb\nassert FeedbackSettings is fb.Settings\n"
            "print(MU, Index.__module__, kinds()[0], LDA.__module__, sorted(set(retrieval.__all__) - set(dir(retrieval))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1000.0 retrieval.core.index lda models.lda.model []"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import retrieval

        retrieval.nothing


def test_an_interrupt_wrapped_by_an_import_is_an_interruption(monkeypatch, capsys):
    """A signal inside a dataclass's __set_name__ while the parsers import arrives as a
    RuntimeError caused by KeyboardInterrupt: still one line and exit 130."""
    import builtins

    from retrieval.ui import cli

    real_import = builtins.__import__

    def importing(name, *args, **kwargs):
        if name == "cli_parser" or name.endswith(".cli_parser"):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as exc:
                raise RuntimeError("Error calling __set_name__") from exc
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", importing)
    assert cli.main(["--version"]) == 130
    assert capsys.readouterr().err == "topicir: interrupted\n"
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert not cli._caused_by_interrupt(RuntimeError("Error calling __set_name__"))  # other failures stay failures


def test_a_run_with_a_model_loads_only_what_ranking_needs(tmp_path):
    """``topicir run --model`` with an LDA model: no torch, Ray, scipy.special or plotting on the
    way (each costs a second or more at the start of a command)."""
    from retrieval.core.index import build_index
    from retrieval.core.modelfiles import train_model

    index = build_index([DATA / "docs.trec"], tmp_path / "idx")
    model = tmp_path / "lda.npz"
    train_model(index, "lda", model, progress=False, n_topics=3, n_chains=1, n_iter=8, seed=1)
    argv = ["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"), "--model", str(model)]
    argv += ["--out", str(tmp_path / "a.txt")]
    code = (f"import sys\nfrom retrieval.ui.cli import main\nassert main({argv!r}) == 0\n"
            "print(sorted(m for m in ('torch', 'ray', 'scipy.special', 'matplotlib', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert len((tmp_path / "a.txt").read_text().splitlines()) == 8  # the 2 topics' documents
