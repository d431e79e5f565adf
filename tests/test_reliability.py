"""Issue 12: concurrent writers, corrupt files, OS errors, leftovers and the last bad inputs.

One test (or a few) per defect of the issue, numbered as there; each fails on the code before
the fix. Everything runs on the 4-document fixture; CLI calls go through ``main(argv)``
in-process, or ``python -m retrieval`` where a real second process or a signal is the point.
"""
import errno
import gzip
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from models.common import atomic
from models.lda.model import LDA
from retrieval.core.index import build_index
from retrieval.core.modelfiles import default_model_path, index_corpus, load_model, train_model
from retrieval.core.trec import TrecFormatError, read_run, write_run
from retrieval.ui.cli import main

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(n_topics=3, n_chains=2, n_iter=12, burn_in=6, sample_every=3, seed=1)


def cli(*args, **kw):
    """``python -m retrieval ARGS`` as a separate process (from this checkout)."""
    return subprocess.Popen([sys.executable, "-m", "retrieval", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("rel")
    index = build_index([DATA / "docs.trec"], root / "mini")
    _, path = train_model(index, "lda", root / "lda.npz", progress=False, **SMALL)
    return index, path


def leftovers(directory: Path) -> list[str]:
    """Temporaries, build directories and lock files anywhere below ``directory``."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(".*"))


# -- 1. concurrent writers ---------------------------------------------------------------------

_WRITER = """
import sys
from retrieval.core.trec import ScoredDoc, write_run
label = sys.argv[2]
run = [ScoredDoc(str(q), f"{label}-{d}", float(-d)) for q in range(1, 30) for d in range(40)]
for _ in range(60):
    write_run(sys.argv[1], run, tag=label)
"""


def test_1_two_processes_writing_one_run_never_mix(tmp_path):
    dest = tmp_path / "run.txt"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(dest), label], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for label in ("A", "B")]
    errs = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    run = read_run(dest)  # well-formed: every line has 6 fields
    labels = {r.docno.split("-")[0] for r in run}
    assert len(run) == 29 * 40 and len(labels) == 1  # all of one writer's run, nothing of the other
    assert leftovers(tmp_path) == []


def test_1_second_training_of_one_model_is_refused(mini, tmp_path):
    index, _ = mini
    out = tmp_path / "m.npz"
    args = ["-q", "train", "lda", "--index", index.path, "--out", out, "--topics", 3, "--chains", 2,
            "--iterations", 400, "--threads", 1]
    first = cli(*args)
    lock = atomic.lock_path(out)
    deadline = time.time() + 120
    while time.time() < deadline and first.poll() is None:  # until the first holds the lock
        try:
            with atomic.target_lock(out):
                pass
        except atomic.LockedError:
            break
        time.sleep(0.05)
    assert first.poll() is None, "the first training ended before the test could overlap it"
    first.send_signal(signal.SIGSTOP)  # paused while holding the lock: the overlap is certain
    try:
        second = cli(*args)
        _, err = second.communicate(timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    assert second.returncode == 1
    assert f"{out}: another process is writing this model" in err and "Traceback" not in err
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert not lock.exists() and not out.with_name(out.name + ".ckpt").exists()
    # the survivor's model is whole: it loads and equals a training nobody disturbed
    alone = LDA(n_topics=3, n_chains=2, n_iter=400, seed=0).fit(index_corpus(index))
    terms = np.arange(index.stats.n_terms)
    np.testing.assert_array_equal(load_model(out, index).p_w_d(terms), alone.p_w_d(terms))


def test_1_atomic_writes_use_unique_temporaries_and_clean_up(tmp_path):
    dest = tmp_path / "f.bin"
    with atomic.atomic_open(dest, "wb") as a, atomic.atomic_open(dest, "wb") as b:
        assert a.name != b.name and Path(a.name).parent == tmp_path
        a.write(b"a")
        b.write(b"b")
    assert dest.read_bytes() == b"a"  # the last to finish wins, whole
    with pytest.raises(OSError):
        with atomic.atomic_open(dest, "wb") as f:
            f.write(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device", f.name)
    assert dest.read_bytes() == b"a" and leftovers(tmp_path) == []


# -- 2. truncated or corrupt model files -------------------------------------------------------

def _damaged_copies(path: Path, tmp_path: Path) -> dict[str, Path]:
    data = path.read_bytes()
    out = {"truncated": tmp_path / "trunc.npz", "garbage": tmp_path / "garbage.npz"}
    out["truncated"].write_bytes(data[: len(data) * 2 // 3])
    out["garbage"].write_bytes(data[:100] + bytes(len(data) - 100))
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    missing = dict(arrays)
    del missing["kd_count"]
    np.savez(tmp_path / "missing.npz", **missing)
    bent = dict(arrays, kd_ptr=arrays["kd_ptr"][:2])
    np.savez(tmp_path / "misshapen.npz", **bent)
    out["missing"], out["misshapen"] = tmp_path / "missing.npz", tmp_path / "misshapen.npz"
    return out


def test_2_damaged_model_is_one_message_naming_the_file(mini, tmp_path, capsys):
    index, path = mini
    for what, bad in _damaged_copies(path, tmp_path).items():
        with pytest.raises(ValueError, match=str(bad)):
            load_model(bad, index)
        code = main(["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                     "--model", str(bad), "--out-dir", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and str(bad) in err, (what, err)


def test_2_missing_or_misshapen_array_is_named(mini, tmp_path):
    index, path = mini
    bad = _damaged_copies(path, tmp_path)
    with pytest.raises(ValueError, match=r"missing.npz: damaged or incomplete file \(missing array 'kd_count'\)"):
        load_model(bad["missing"], index)
    with pytest.raises(ValueError, match=r"misshapen.npz: damaged file: array 'kd_ptr' has shape \(2, "):
        load_model(bad["misshapen"], index)


def test_2_corrupt_checkpoint_is_refused_by_name(mini, tmp_path):
    index, _ = mini
    ckpt = tmp_path / "c.npz.ckpt"
    LDA(**dict(SMALL, checkpoint_every=4)).fit(index_corpus(index), checkpoint=ckpt)
    data = ckpt.read_bytes()
    ckpt.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=f"{ckpt}: not a topicir model file, or truncated/corrupt .*; delete it to train afresh"):
        LDA(**SMALL).fit(index_corpus(index), checkpoint=ckpt)


def test_2_console_keeps_its_model_after_a_corrupt_one(mini, tmp_path):
    from retrieval.ui.console import Session

    index, path = mini
    session = Session(index, model=load_model(path, index), model_name="lda")
    before = session.model
    for bad in _damaged_copies(path, tmp_path).values():
        out = "".join(text for _, text in session.execute(f":model {bad}"))
        assert out.startswith("error: ") and str(bad) in out
        assert session.model is before and session.model_name == "lda"
    assert "lda" in "".join(t for _, t in session.execute(":model"))


# -- 3. the same file twice --------------------------------------------------------------------

def test_3_a_file_given_twice_is_refused(tmp_path):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "a.trec").write_bytes((DATA / "docs.trec").read_bytes())
    for sources in ([src / "a.trec", src / "a.trec"], [src, src / "a.trec"], [src / "a.trec", src / ".." / "docs"]):
        with pytest.raises(TrecFormatError, match=r"a.trec: given twice \(as a file, or inside a directory given\)"):
            build_index(sources, tmp_path / "idx")
        assert leftovers(tmp_path) == []


# -- 4. operating-system errors ----------------------------------------------------------------

def test_4_unwritable_model_output_fails_before_training(mini, tmp_path, capsys, monkeypatch):
    index, _ = mini
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["-q", "train", "lda", "--index", str(index.path), "--out", str(blocker / "m.npz"),
                 "--topics", "3", "--chains", "1", "--iterations", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err == f"topicir train: error: {blocker}: is a file, not a directory\n"

    # root writes anywhere, so a refusal of the first write stands for a read-only directory
    def denied(*a, dir=None, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(dir))

    monkeypatch.setattr("models.common.atomic.tempfile.TemporaryFile", denied)
    fitted = []
    monkeypatch.setattr(LDA, "fit", lambda *a, **k: fitted.append(1))
    code = main(["-q", "train", "lda", "--index", str(index.path), "--out", str(tmp_path / "ro" / "m.npz"),
                 "--topics", "3", "--chains", "1", "--iterations", "4"])
    err = capsys.readouterr().err
    assert code == 2 and fitted == [] and f"{tmp_path / 'ro'}: Permission denied" in err


def test_4_full_disk_leaves_no_temporary_and_one_line(mini, tmp_path, capsys, monkeypatch):
    index, _ = mini

    def full(f, **arrays):
        f.write(b"PK partial")
        raise OSError(errno.ENOSPC, "No space left on device", getattr(f, "name", None))

    monkeypatch.setattr("models.common.checkpoint.np.savez", full)
    out = tmp_path / "m" / "m.npz"
    code = main(["-q", "train", "lda", "--index", str(index.path), "--out", str(out), "--topics", "3",
                 "--chains", "1", "--iterations", "20", "--threads", "1"])
    err = [line[line.index("topicir"):] for line in capsys.readouterr().err.split("\n") if "topicir" in line]
    assert code == 1 and err == [f"topicir train: error: {out}.ckpt: No space left on device"]
    assert leftovers(out.parent) == [] and not out.exists()


def test_4_unwritable_run_output_fails_before_ranking(mini, tmp_path, capsys):
    index, _ = mini
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                 "--out", str(blocker / "run.txt")])
    assert code == 2 and capsys.readouterr().err == f"topicir run: error: {blocker}: is a file, not a directory\n"


# -- 5. corrupt .gz sources --------------------------------------------------------------------

def test_5_truncated_gzip_names_the_file(tmp_path):
    packed = gzip.compress((DATA / "docs.trec").read_bytes() * 3)
    bad = tmp_path / "docs.trec.gz"
    bad.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(TrecFormatError, match=f"{bad}: truncated or corrupt gzip data"):
        build_index([bad], tmp_path / "idx")
    jsonl = tmp_path / "docs.jsonl.gz"
    lines = "".join(f'{{"id": "d{i}", "contents": "word {i}"}}\n' for i in range(2000))
    packed = gzip.compress(lines.encode())
    jsonl.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(TrecFormatError, match=f"{jsonl}: truncated or corrupt gzip data"):
        build_index([jsonl], tmp_path / "idx2")


# -- 6. leftovers of killed builds ---------------------------------------------------------------

def test_6_next_build_removes_dead_builds_keeps_live_ones(tmp_path):
    for name in (".idx.building-x1", ".idx.jsonl-x2", ".other.jsonl-x3", ".live.building-x4"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "docs-00000.jsonl").write_text("{}\n")
    with atomic.target_lock(tmp_path / "live", what="index"):  # a build of "live" still running
        build_index([DATA / "docs.trec"], tmp_path / "idx")
    assert leftovers(tmp_path) == [".live.building-x4"] and (tmp_path / "idx").is_dir()


def test_6_sigterm_cleans_up_like_ctrl_c(tmp_path):
    src = tmp_path / "big.trec"
    doc = "<DOC>\n<DOCNO> D{} </DOCNO>\n<TEXT>airbus subsidies rail strike number {}</TEXT>\n</DOC>\n"
    src.write_text("".join(doc.format(i, i) for i in range(300_000)))
    proc = cli("-q", "index", src, "--out", tmp_path / "idx")
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob(".idx.jsonl-*/docs-*")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    assert leftovers(tmp_path) == [] and not (tmp_path / "idx").exists()


# -- 7. NaN and infinite scores ----------------------------------------------------------------

def test_7_eval_refuses_nan_and_inf_scores(tmp_path, capsys):
    for bad in ("nan", "inf", "-inf"):
        run = tmp_path / f"run-{bad}.txt"
        run.write_text(f"1 Q0 AP880212-0001 1 2.5 t\n1 Q0 AP880212-0002 2 {bad} t\n")
        with pytest.raises(TrecFormatError, match=f"{run}:2: score must be a finite number, got '{bad}'"):
            read_run(run)
        assert main(["eval", str(run), "--qrels", str(DATA / "qrels.txt")]) == 2
        assert f"{run}:2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="rankings need finite numbers"):
        from retrieval.core.trec import ScoredDoc

        write_run(tmp_path / "w.txt", [ScoredDoc("1", "d", float("inf"))])


# -- 8. parameter checks -----------------------------------------------------------------------

@pytest.mark.parametrize("args", [
    ["train", "lda", "--index", "x", "--alpha", "inf"],
    ["train", "lda", "--index", "x", "--beta", "nan"],
    ["run", "--index", "x", "--topics", "t", "--mu", "inf"],
    ["run", "--index", "x", "--topics", "t", "--mu", ","],
    ["run", "--index", "x", "--topics", "t", "--lam", "0.5,inf"],
    ["index", "src", "--out", "x", "--threads", "0"],
    ["train", "lda", "--index", "x", "--threads", "-1"],
])
def test_8_bad_numbers_are_refused_by_the_parser(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2 and "expected" in capsys.readouterr().err


def test_8_library_refuses_zero_threads_and_infinite_mu(tmp_path, mini):
    from retrieval.core.scoring import Scorer

    with pytest.raises(ValueError, match="threads must be an int >= 1, got 0"):
        build_index([DATA / "docs.trec"], tmp_path / "idx", threads=0)
    with pytest.raises(ValueError, match="mu must be a finite number > 0, got inf"):
        Scorer(mini[0].stats, mu=float("inf"))


def test_8_schedule_errors_name_the_flags(mini, tmp_path, capsys):
    code = main(["-q", "train", "lda", "--index", str(mini[0].path), "--out", str(tmp_path / "m.npz"),
                 "--topics", "3", "--iterations", "10", "--burn-in", "10"])
    err = capsys.readouterr().err
    assert code == 2 and "--burn-in (10) must be < --iterations (10)" in err and "burn_in" not in err


# -- 9. a schedule scaled to the sweeps asked for -----------------------------------------------

def test_9_fewer_sweeps_keep_samples_over_the_last_half(mini, tmp_path, caplog):
    index, _ = mini
    assert LDA(n_iter=100)._sample_iters().tolist() == [60, 70, 80, 90, 100]  # as before
    with caplog.at_level("INFO"):
        model, _ = train_model(index, "lda", tmp_path / "m.npz", progress=False, n_topics=3,
                               n_chains=1, n_iter=40)
    assert model.sample_iter_.tolist() == [24, 28, 32, 36, 40]
    assert "schedule: 40 sweeps, burn-in 20, a sample every 4: samples after sweeps 24, 28, 32, 36, 40" in caplog.text
    assert LDA(n_iter=3)._sample_iters().tolist() == [2, 3]


# -- 10. silent overwrites ---------------------------------------------------------------------

def test_10_model_names_identify_all_settings(mini, tmp_path, capsys):
    index, _ = mini
    base = dict(n_topics=3, n_chains=1, n_iter=8)
    names = {default_model_path(index, "lda", dict(base, **extra)).name
             for extra in ({}, {"beta": 0.1}, {"alpha": 0.5}, {"init": "random"}, {"n_shards": 2})}
    assert len(names) == 5
    assert default_model_path(index, "lda", dict(base, n_jobs=2)) == default_model_path(index, "lda", base)
    out = tmp_path / "m.npz"
    train_model(index, "lda", out, progress=False, **base)
    with pytest.raises(FileExistsError, match=r"m.npz is a model trained with other settings \(beta: 0.01 there vs 0.1 now\)"):
        train_model(index, "lda", out, progress=False, **dict(base, beta=0.1))
    train_model(index, "lda", out, progress=False, **base)  # the same settings: retrained in place


def test_10_run_names_hold_depth_and_tag(mini, tmp_path):
    index, _ = mini
    for extra in ([], ["--depth", "2"], ["--tag", "mine"]):
        assert main(["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
                     "--out-dir", str(tmp_path), *extra]) == 0
    assert sorted(p.name for p in tmp_path.glob("run.*.txt")) == [
        "run.mini.topics.title.ql.mu1000.txt", "run.mini.topics.title.ql.mu1000_depth2.txt",
        "run.mini.topics.title.ql.mu1000_tagmine.txt"]


def test_10_a_concurrent_index_build_is_refused(tmp_path):
    with atomic.target_lock(tmp_path / "idx", what="index"):
        with pytest.raises(atomic.LockedError, match="another process is writing this index"):
            build_index([DATA / "docs.trec"], tmp_path / "idx")


# -- 11. smaller ones --------------------------------------------------------------------------

def test_11_eval_of_a_directory_and_empty_qrels(tmp_path, capsys):
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 AP880212-0001 1 2.5 t\n")
    assert main(["eval", str(tmp_path), "--qrels", str(DATA / "qrels.txt")]) == 2
    assert f"{tmp_path}: Is a directory" in capsys.readouterr().err
    empty = tmp_path / "empty.qrels"
    empty.write_text("")
    assert main(["eval", str(run), "--qrels", str(empty)]) == 2
    assert "no relevant judgment" in capsys.readouterr().err


def test_11_index_directories_follow_the_umask(mini):
    index, _ = mini
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(index.path.stat().st_mode) == 0o777 & ~mask


def test_11_warnings_are_one_line_without_source(tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("1 Q0 AP880212-0001 1 2.5 t\n")  # topic 2 is judged but missing: a warning
    proc = cli("-q", "eval", run, "--qrels", DATA / "qrels.txt")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert err.startswith("topicir: warning: 1 judged topics have no results") and err.count("\n") == 1


# -- 12. runs carry their settings ---------------------------------------------------------------

def test_12_a_run_records_its_settings_and_a_changed_rerun_is_logged(mini, tmp_path, caplog):
    from retrieval.core.runs import read_settings

    index, model = mini
    out = tmp_path / "run.txt"
    base = ["-q", "run", "--index", str(index.path), "--topics", str(DATA / "topics.trec"),
            "--model", str(model), "--out", str(out)]
    assert main(base + ["--lam", "0.7"]) == 0
    first = read_settings(out)
    assert {k: first[k] for k in ("method", "fingerprint", "field", "mu", "lam", "depth")} == {
        "method": model.stem, "fingerprint": index.fingerprint, "field": "title", "mu": 1000.0,
        "lam": 0.7, "depth": 1000}
    assert first["model"] == str(model.resolve()) and first["index"] == str(Path(index.path).resolve())
    caplog.clear()
    assert main(base + ["--lam", "0.7"]) == 0  # same settings: nothing to say
    assert "other settings" not in caplog.text
    assert main(base + ["--lam", "0.5"]) == 0
    assert "replacing a run made with other settings (lam: 0.7 -> 0.5)" in caplog.text
    assert read_settings(out)["lam"] == 0.5 and leftovers(tmp_path) == []
