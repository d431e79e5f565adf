"""Issue 30, point 3: the smaller defects of the probe of untrusted input, one test (or a few)
per defect. Full disks and read-only directories are simulated (the tests run as root, which
writes anywhere): the OS call that would fail raises the error the OS would give.
"""
import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from models import synthetic_corpus

from models.common import atomic
from models.common.checkpoint import CHECKPOINT_FORMAT, read_header, read_model_file
from models.glda.model import GroupedLDA
from models.lda.model import LDA
from retrieval.core import index as index_module
from retrieval.core.index import build_index
from retrieval.core.modelfiles import train_model
from retrieval.core.trec import TrecFormatError, read_run
from retrieval.ui.cli import main

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(n_topics=3, n_chains=1, n_iter=8, seed=1)


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    root = tmp_path_factory.mktemp("untrusted")
    return build_index([DATA / "docs.trec"], root / "mini")


def hidden(directory: Path) -> list[str]:
    """Temporaries, work directories and lock files left in ``directory``."""
    return sorted(p.name for p in directory.glob(".*"))


# -- a document twice in one topic of a run ----------------------------------------------------

def test_eval_refuses_a_document_listed_twice_for_a_topic(tmp_path, capsys):
    run = tmp_path / "run.txt"
    lines = [f"1 Q0 ADI-17 {r} {10 - r} t\n" for r in range(1, 4)] + ["2 Q0 ADI-17 1 5 t\n"]
    run.write_text("".join(lines))
    with pytest.raises(TrecFormatError, match=rf"{run}:2: topic '1' lists document 'ADI-17' again "
                                              rf"\(first at line 1\)"):
        read_run(run)
    assert main(["eval", str(run), "--qrels", str(DATA / "qrels.txt")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run}:2: topic '1' lists document 'ADI-17' again" in err
    # the same document in two topics, and qids written two ways ('01' is topic 1), as trec_eval
    run.write_text("1 Q0 ADI-17 1 2 t\n2 Q0 ADI-17 1 2 t\n01 Q0 ADI-18 1 1 t\n")
    assert [r.qid for r in read_run(run)] == ["1", "2", "1"]
    run.write_text("1 Q0 ADI-17 1 2 t\n01 Q0 ADI-17 2 1 t\n")
    with pytest.raises(TrecFormatError, match=f"{run}:2: topic '1' lists document 'ADI-17' again"):
        read_run(run)


# -- gLDA's schedule ---------------------------------------------------------------------------

def test_glda_schedule_defaults_to_the_shared_one():
    for n_iter in (6, 40, 100):
        glda, lda = GroupedLDA(n_iter=n_iter), LDA(n_iter=n_iter)
        assert glda.burn_in is None and glda.sample_every is None
        assert glda._schedule() == lda._schedule()
        assert glda._sample_iters().tolist() == lda._sample_iters().tolist()
    model = GroupedLDA(n_topics=3, n_chains=1, n_iter=6, seed=1).fit(synthetic_corpus(20, 40, 8, seed=1))
    assert model.sample_iter_.tolist() == [4, 5, 6]


def test_glda_trains_with_few_iterations_from_the_command_line(mini, tmp_path, capsys):
    out = tmp_path / "g.npz"
    code = main(["-q", "train", "glda", "--index", str(mini.path), "--out", str(out), "--topics", "3",
                 "--chains", "1", "--iterations", "6"])
    assert code == 0, capsys.readouterr().err
    assert read_header(out)["params"]["burn_in"] is None and out.is_file()


# -- full disk and read-only targets -----------------------------------------------------------

def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as a failed write: no file name


def test_full_disk_names_the_target_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(OSError) as info:
        with atomic.atomic_open(target) as f:
            f.write("x")
            _full_disk()
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(target))
    assert hidden(tmp_path) == [] and not target.exists()


def test_full_disk_is_one_line_with_the_path_for_run_and_train(mini, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("models.common.atomic.os.fsync", _full_disk)
    out = tmp_path / "runs" / "run.txt"
    code = main(["-q", "run", "--index", str(mini.path), "--topics", str(DATA / "topics.trec"),
                 "--out", str(out)])
    assert (code, capsys.readouterr().err) == (1, f"topicir run: error: {out}: No space left on device\n")
    assert hidden(out.parent) == [] and not out.exists()
    model = tmp_path / "m" / "m.npz"
    code = main(["-q", "train", "lda", "--index", str(mini.path), "--out", str(model), "--topics", "3",
                 "--chains", "1", "--iterations", "4"])
    err = capsys.readouterr().err
    # the first file training writes: the first kept sample's, beside the checkpoint
    assert (code, err) == (1, f"topicir train: error: {model}.ckpt.kept/chain0.sweep3.npz: No space left on device\n")
    assert hidden(model.parent) == [] and not model.exists()


def test_full_disk_while_indexing_names_the_index(tmp_path, capsys, monkeypatch):
    out = tmp_path / "idx"

    def staging_full(sources, staging, existing=None, docs=None):
        (staging / "docs-00000.jsonl").write_text("{}\n")
        _full_disk()

    monkeypatch.setattr(index_module, "_write_jsonl_shards", staging_full)
    with pytest.raises(OSError) as info:
        build_index([DATA / "docs.trec"], out)
    assert (info.value.errno, info.value.filename) == (errno.ENOSPC, str(out))
    assert hidden(tmp_path) == []
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"topicir index: error: {out}: No space left on device\n"


def test_lucene_failing_on_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    """Anserini logs a failed write and returns; the index it leaves has no commit point."""
    real = index_module.jclass

    class NoCommit:
        @staticmethod
        def main(argv):
            Path(argv[argv.index("-index") + 1], "_0.fdt").write_bytes(b"partial")

    monkeypatch.setattr(index_module, "jclass", lambda name: NoCommit if name.endswith(
        "IndexCollection") else real(name))
    usage = index_module.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(index_module.shutil, "disk_usage", lambda p: usage._replace(free=0))
    out = tmp_path / "idx"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"topicir index: error: {out}: No space left on device (0 bytes free")
    assert err.count("\n") == 1 and hidden(tmp_path) == [] and not out.exists()
    # space enough: another failure of Anserini, still one line naming the index
    monkeypatch.setattr(index_module.shutil, "disk_usage", lambda p: usage)
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"topicir index: error: {out}: Anserini wrote no index\n"


def _read_only(*args, dir=None, prefix="tmp", **kwargs):
    raise OSError(errno.EROFS, "Read-only file system", os.path.join(str(dir), f"{prefix}x81kq"))


def test_read_only_target_is_named_not_the_temporary(mini, tmp_path, capsys, monkeypatch):
    target = tmp_path / "d" / "run.txt"
    target.parent.mkdir()
    monkeypatch.setattr("models.common.atomic.tempfile.mkstemp", _read_only)
    with pytest.raises(OSError) as info:
        with atomic.atomic_open(target):
            pass
    assert (info.value.errno, info.value.filename) == (errno.EROFS, str(target))
    monkeypatch.setattr("models.common.atomic.tempfile.TemporaryFile", _read_only)
    for argv in (["run", "--index", str(mini.path), "--topics", str(DATA / "topics.trec"),
                  "--out", str(target)],
                 ["train", "lda", "--index", str(mini.path), "--out", str(target.parent / "m.npz"),
                  "--topics", "3", "--chains", "1", "--iterations", "4"]):
        assert main(["-q", *argv]) == 1
        assert capsys.readouterr().err == f"topicir {argv[0]}: error: {target.parent}: Read-only file system\n"


def test_read_only_index_parent_names_the_index(tmp_path, capsys, monkeypatch):
    def read_only_lock(self, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system", self.lock_file)

    monkeypatch.setattr("filelock.FileLock.acquire", read_only_lock)
    out = tmp_path / "idx"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(out)]) == 1
    assert capsys.readouterr().err == f"topicir index: error: {out}: Read-only file system\n"


# -- a directory as --out, random bytes as a model ----------------------------------------------

def test_out_directory_is_called_a_directory(mini, tmp_path, capsys):
    out = tmp_path / "models"
    out.mkdir()
    code = main(["-q", "train", "lda", "--index", str(mini.path), "--out", str(out), "--topics", "3",
                 "--chains", "1", "--iterations", "4"])
    assert (code, capsys.readouterr().err) == (
        2, f"topicir train: error: {out}: is a directory; name the model file to write (e.g. {out / 'lda.npz'})\n")
    with pytest.raises(IsADirectoryError):
        train_model(mini, "lda", out, progress=False, **SMALL)


def test_random_bytes_are_not_a_topicir_model_file(mini, tmp_path, capsys):
    bad, empty = tmp_path / "random.npz", tmp_path / "empty.npz"
    bad.write_bytes(np.random.default_rng(0).bytes(3000))
    empty.write_bytes(b"")
    for read in (read_header, read_model_file):
        with pytest.raises(ValueError, match=rf"^{bad}: not a topicir model file \(is not an .npz archive\)$"):
            read(bad)
        with pytest.raises(ValueError, match=rf"^{empty}: not a topicir model file \(is empty\)$"):
            read(empty)
    with pytest.raises(ValueError, match=rf"^{bad}: not a topicir checkpoint file \(is not an .npz "
                                         rf"archive\); delete it to train afresh$"):
        read_model_file(bad, kind=CHECKPOINT_FORMAT)
    code = main(["-q", "run", "--index", str(mini.path), "--topics", str(DATA / "topics.trec"),
                 "--model", str(bad), "--out-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"topicir run: error: {bad}: not a topicir model file (is not an .npz archive)\n"


# -- JVM crash reports -------------------------------------------------------------------------

def test_jvm_crash_report_goes_to_the_temporary_directory(tmp_path):
    from retrieval.core.jvm import jvm_options

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    assert [o for o in jvm_options() if o.startswith("-XX:ErrorFile=")] == [
        f"-XX:ErrorFile={Path(tempfile.gettempdir()) / 'topicir-hs_err_pid%p.log'}"]
    # a native crash with the JVM loaded (as an out-of-range index in a kernel would give)
    code = ("from retrieval.core.jvm import jclass; jclass('java.lang.String'); "
            "import ctypes; ctypes.string_at(0)")
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    cwd = tmp_path / "work"
    cwd.mkdir()
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert list(cwd.iterdir()) == []
    assert [p.name.startswith("topicir-hs_err_pid") for p in tmp.iterdir()] == [True]


# -- the one pass over a count table against its plain numpy twin -----------------------------

@pytest.mark.parametrize("strict", [True, False])
def test_table_pass_agrees_with_numpy(strict):
    """scan_table (models/common/kernels/validate.py) gives the segment totals, the column totals and
    the first bad index, order and count that numpy gives, on sound tables and damaged ones."""
    from models.common.kernels.validate import BAD_COUNT, BAD_INDEX, BAD_ORDER, scan_table

    rng = np.random.default_rng(7)
    R, n, cols = 3, 6, 9
    for trial in range(40):
        lens = rng.integers(0, 5, size=(R, n))
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        ptr = np.hstack([ptr[:-1].reshape(R, n)[:, :1], ptr[1:].reshape(R, n)])
        idx = np.concatenate([np.sort(rng.choice(cols, size=k, replace=not strict)) for k in lens.ravel()])
        idx = idx.astype(np.int32)
        cnt = rng.integers(0, 5, size=len(idx)).astype(np.int32)
        if trial % 2 and len(idx):  # damaged: an index out of range, a swap, a negative count
            j = rng.integers(len(idx), size=3)
            idx[j[0]] = rng.choice([-1, cols, 2 ** 31 - 1])
            idx[j[1]], cnt[j[2]] = rng.integers(cols), -rng.integers(1, 3)
        seg = np.empty((R, n), dtype=np.int64)
        col = np.zeros((R, cols), dtype=np.int64)
        first = np.full((R, 3), -1, dtype=np.int64)
        scan_table(ptr, idx, cnt, cols, strict, seg, col, first)
        # the twin: every segment and entry in plain numpy
        starts = np.zeros(len(idx), dtype=bool)
        starts[ptr[:, :-1].ravel()[lens.ravel() > 0]] = True
        step = np.diff(idx.astype(np.int64))
        bad_order = np.flatnonzero(((step < 1) if strict else (step < 0)) & ~starts[1:]) + 1
        bad_index = np.flatnonzero((idx < 0) | (idx >= cols))
        bad_count = np.flatnonzero(cnt < 0)
        for r in range(R):
            lo, hi = ptr[r, 0], ptr[r, -1]
            for which, bad in ((BAD_INDEX, bad_index), (BAD_ORDER, bad_order), (BAD_COUNT, bad_count)):
                mine = bad[(bad >= lo) & (bad < hi)]
                assert first[r, which] == (mine[0] if mine.size else -1), (trial, r, which)
            assert seg[r].tolist() == [int(cnt[a:b].sum()) for a, b in zip(ptr[r, :-1], ptr[r, 1:])]
            if (first[r] < 0).all():  # a sound row: its column totals
                assert (col[r] == np.bincount(idx[lo:hi], weights=cnt[lo:hi], minlength=cols)).all()


def test_totals_by_a_column_agree_with_numpy():
    """add_by_key and weighted_total (models/common/kernels/validate.py), which total a table's
    counts by one of its columns and weigh them by a column's value, give what numpy gives: keys
    modulo a fold, keys past the width (or negative) left out, an index outside the weights refused."""
    from models.common.kernels.validate import add_by_key, weighted_total

    rng = np.random.default_rng(8)
    for dtype in (np.uint16, np.int32):
        keys = rng.integers(0, 40, 500).astype(dtype)
        if dtype == np.int32:
            keys[::7] = rng.choice([-3, -1, 2 ** 31 - 1], size=len(keys[::7]))
        cnt = rng.integers(0, 2 ** 31 - 1, 500).astype(np.int32)
        for mod, n in ((1 << 62, 30), (7, 7)):
            got = np.zeros(n, dtype=np.int64)
            add_by_key(keys, cnt, mod, got)
            k = keys.astype(np.int64) % mod
            want = [int(cnt[k == c].astype(np.int64).sum()) for c in range(n)]
            assert got.tolist() == want and got.max() > 2 ** 31
    weight = rng.integers(1, 6, 40)
    assert weighted_total(keys[keys >= 0][:100] % 40, cnt[:100], weight) == int(
        (weight[keys[keys >= 0][:100] % 40] * cnt[:100].astype(np.int64)).sum())
    with pytest.raises(IndexError):
        weighted_total(np.array([3, 40], np.int32), np.ones(2, np.int32), weight)
    with pytest.raises(IndexError):
        weighted_total(np.array([-1], np.int32), np.ones(1, np.int32), weight)


# -- aviPAM's prior variances and masks: what the header's priors and architecture give ---------

@pytest.mark.parametrize("n_chains", [1, 2])
def test_avipam_network_buffers_must_match_the_header(tmp_path, n_chains):
    """A prior variance of 1e30 (or a mask that drops an edge) in an aviPAM model file or
    checkpoint is refused in one line naming the file and the array, before any training step."""
    from models.common import checkpoint as ck
    from models.avipam.model import AVIPAM

    corpus = synthetic_corpus(30, 40, 4, seed=2)
    kw = dict(AVIPAM.quick_params, n_chains=n_chains, epochs=2)
    path, ckpt = tmp_path / "m.npz", tmp_path / "m.ckpt"
    AVIPAM(**kw).fit(corpus, checkpoint=ckpt).save(path)  # the checkpoint of its last epoch stays
    for target, kind in ((path, ck.MODEL_FORMAT), (ckpt, ck.CHECKPOINT_FORMAT)):
        f = ck.read_model_file(target, kind=kind)
        header = {k: v for k, v in f.header.items() if k not in ("format", "format_version",
                                                                  "topicir_version", "arrays")}
        for key, value in (("prior_var1", 1e30), ("mask1", False)):
            name = next(k for k in f.arrays if k.endswith(key))
            a = f.arrays[name].copy()
            a.flat[0] = value
            bad = tmp_path / f"bad-{key}{target.suffix}"
            ck.write_model_file(bad, header, dict(f.arrays, **{name: a}), kind=kind)
            want = rf"^{bad}: {name} is not what the header's architecture and priors give"
            with pytest.raises(ValueError, match=want):
                if kind == ck.MODEL_FORMAT:
                    AVIPAM.load(bad)
                else:
                    AVIPAM(**kw).fit(corpus, checkpoint=bad)
