"""Issue 59: Lucene's failures and what an index command leaves behind. Documents with only
stopwords, a disk that fills up inside Lucene, a damaged segment, lock files left beside every
output, and ``index --force`` dropping the replaced index's models; one test (or a few) each.
"""
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from models.common import atomic
from retrieval.core import index as index_module
from retrieval.core.index import Index, build_index
from retrieval.core.modelfiles import load_model, train_model
from retrieval.core.scoring import Scorer
from retrieval.ui.cli import main
from tests.conftest import ROOT, sigint_as_from_a_terminal

DATA = Path(__file__).parent / "data"
SMALL = dict(n_topics=3, n_chains=1, n_iter=8, seed=1)


def trec(docs) -> str:
    return "".join(f"<DOC>\n<DOCNO> {docno} </DOCNO>\n<TEXT>{text}</TEXT>\n</DOC>\n" for docno, text in docs)


def hidden(directory: Path) -> list[str]:
    """Temporaries, work directories and lock files in ``directory``."""
    return sorted(p.name for p in directory.glob(".*"))


def random_text(n_docs: int, seed: int = 0) -> str:
    """Documents of made-up words, which Lucene cannot compress much."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = ["".join(rng.choice(letters, size=rng.integers(4, 10))) for _ in range(5000)]
    return trec((f"R{i}", " ".join(rng.choice(words, size=100))) for i in range(n_docs))


# -- documents with only stopwords -----------------------------------------------------------

def test_stopword_only_documents_keep_their_rows_as_empty_documents(tmp_path):
    src = tmp_path / "mixed.trec"
    src.write_text(trec([("D1", "apple banana"), ("D2", "the of and a"), ("D3", "cherry banana")]))
    with pytest.warns(UserWarning, match=rf"1 documents have only stopwords or punctuation and are indexed "
                                         rf"as empty documents, .* e\.g\. D2 \({src}:5\)"):
        index = build_index([src], tmp_path / "idx")
    s = index.stats
    assert s.docnos == ["D1", "D2", "D3"] and s.doc_len.tolist() == [2, 0, 2]
    assert index.manifest["n_docs"] == 3 and index.manifest["n_tokens"] == 4
    assert index.document("D2")["contents"] == "the of and a"  # Lucene has it, at the same row
    scores = Scorer(s, mu=1000.0, lam=1.0).score(Scorer(s, mu=1000.0, lam=1.0).query("banana", ["banana"]))
    assert np.isfinite(scores).all() and scores[1] == pytest.approx(np.log(2 / 4))  # the background alone


def test_a_build_of_only_stopwords_is_refused_in_one_line(tmp_path, capfd):
    src = tmp_path / "stop.trec"
    src.write_text(trec([("D1", "the of and"), ("D2", "a an, ...")]))
    assert main(["-q", "index", str(src), "--out", str(tmp_path / "idx")]) == 2
    assert capfd.readouterr().err == (f"topicir index: error: no document in {src} has a term to index: "
                                      f"all 2 are only stopwords or punctuation\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stop.trec"]


def test_adding_stopword_only_documents_equals_a_build_of_all(tmp_path, capfd):
    base, added = [("D1", "apple banana"), ("D3", "cherry banana")], [("D9", "the and of"), ("D10", "!!! ...")]
    (tmp_path / "base.trec").write_text(trec(base))
    (tmp_path / "add.trec").write_text(trec(added))
    (tmp_path / "all.trec").write_text(trec(base + added))
    build_index([tmp_path / "base.trec"], tmp_path / "idx")
    capfd.readouterr()
    with pytest.warns(UserWarning) as got:
        assert main(["-q", "index", "--add", str(tmp_path / "add.trec"), "--index", str(tmp_path / "idx")]) == 0
    assert [str(w.message) for w in got] == [
        f"2 documents have only stopwords or punctuation and are indexed as empty documents, which no query "
        f"matches, e.g. D9 ({tmp_path / 'add.trec'}:1), D10 ({tmp_path / 'add.trec'}:5)"]
    assert capfd.readouterr().err == ""
    grown = Index(tmp_path / "idx")
    with pytest.warns(UserWarning, match="2 documents have only stopwords"):
        whole = build_index([tmp_path / "all.trec"], tmp_path / "whole")
    assert grown.stats.docnos == whole.stats.docnos == ["D1", "D3", "D9", "D10"]
    assert grown.stats.doc_len.tolist() == [2, 2, 0, 0] and grown.fingerprint == whole.fingerprint
    assert grown.document("D10")["contents"] == "!!! ..."
    assert hidden(tmp_path) == []


# -- a full disk inside Lucene ---------------------------------------------------------------

@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MB file system (a tmpfs; needs root), or a skip."""
    disk = tmp_path / "tiny"
    disk.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
                                 capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make a small file system")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a 1 MB tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_full_disk_inside_lucene_names_the_index(tmp_path, tiny_disk, capfd, monkeypatch):
    src = tmp_path / "big.trec"
    src.write_text(random_text(600))  # 0.45 MB of text: its JSON fits, the Lucene index does not
    lucene = []
    real = index_module._index_shards

    def spy(*args):
        try:
            real(*args)
        except OSError as e:
            lucene.append(e.errno)
            raise

    monkeypatch.setattr(index_module, "_index_shards", spy)
    out = tiny_disk / "idx"
    assert main(["-q", "index", str(src), "--out", str(out)]) == 1
    assert capfd.readouterr().err == f"topicir index: error: {out}: No space left on device\n"
    assert lucene == [28] and os.listdir(tiny_disk) == []  # ENOSPC in Lucene; nothing left
    # appending: the same line, and the old index as it was
    build_index([DATA / "docs.trec"], out)
    before = (out / "topicir.json").read_text()
    capfd.readouterr()
    assert main(["-q", "index", "--add", str(src), "--index", str(out)]) == 1
    assert capfd.readouterr().err == f"topicir index: error: {out}: No space left on device\n"
    assert lucene == [28, 28] and (out / "topicir.json").read_text() == before
    assert os.listdir(tiny_disk) == ["idx"] and Index(out).stats.n_docs == 4


# -- a damaged Lucene segment ----------------------------------------------------------------

@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return build_index([DATA / "docs.trec"], tmp_path_factory.mktemp("damaged") / "mini")


def damaged(index: Index, tmp_path: Path, name: str, at: int) -> Path:
    """A copy of ``index`` with the byte ``at`` (from the end if negative) of ``name`` flipped."""
    copy = tmp_path / f"copy-{name}"
    shutil.copytree(index.path, copy)
    data = bytearray((copy / name).read_bytes())
    data[at] ^= 0xFF
    (copy / name).write_bytes(bytes(data))
    return copy


@pytest.mark.parametrize("name, at, what", [
    ("_0.si", -8, "CorruptIndexException: Illegal CRC-32 checksum"),  # found when Lucene opens the index
    ("_0_Lucene99_0.tim", 373, "EOFException: seek past EOF"),  # found by a search thread, which goes on
])
def test_a_damaged_segment_is_one_line_naming_the_index(mini, tmp_path, capfd, monkeypatch, name, at, what):
    import io

    copy = damaged(mini, tmp_path, name, at)
    run = tmp_path / "bm25.txt"
    assert main(["-q", "run", "--index", str(copy), "--topics", str(DATA / "topics.trec"), "--baseline", "bm25",
                 "--out", str(run)]) == 2
    err = capfd.readouterr().err
    assert err.startswith(f"topicir run: error: {copy}: damaged Lucene index ({what}")
    assert err.endswith("; rebuild it with `topicir index`\n") and err.count("\n") == 1
    assert not run.exists()
    if name == "_0.si":  # the console reads documents through Lucene
        monkeypatch.setattr("sys.stdin", io.StringIO("#1\n"))
        assert main(["-q", "console", "--index", str(copy), "--topics", str(DATA / "topics.trec")]) == 2
        err = capfd.readouterr().err
        assert err.startswith(f"topicir console: error: {copy}: damaged Lucene index ({what}")
        assert err.count("\n") == 1


# -- lock files --------------------------------------------------------------------------------

def test_commands_leave_no_lock_file(tmp_path, capfd):
    src = tmp_path / "docs.trec"
    shutil.copy(DATA / "docs.trec", src)
    assert main(["-q", "index", str(src), "--out", str(tmp_path / "idx")]) == 0
    (tmp_path / "more.trec").write_text(trec([("N1", "airbus subsidies")]))
    assert main(["-q", "index", "--add", str(tmp_path / "more.trec"), "--index", str(tmp_path / "idx")]) == 0
    model = tmp_path / "models" / "lda.npz"
    assert main(["-q", "train", "lda", "--index", str(tmp_path / "idx"), "--out", str(model), "--topics", "3",
                 "--chains", "1", "--iterations", "4"]) == 0
    assert main(["-q", "run", "--index", str(tmp_path / "idx"), "--topics", str(DATA / "topics.trec"),
                 "--out-dir", str(tmp_path / "runs")]) == 0
    # a build that never finished
    (tmp_path / "bad.trec").write_text("<DOC>\n<DOCNO> X </DOCNO>\n<TEXT>unclosed")
    assert main(["-q", "index", str(tmp_path / "bad.trec"), "--out", str(tmp_path / "bad")]) == 2
    capfd.readouterr()
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob(".*")] == []


def test_the_lock_refuses_a_second_writer_and_a_killed_holder_leaves_none(tmp_path):
    target = tmp_path / "m.npz"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from models.common.atomic import target_lock\n"
                               f"with target_lock({str(target)!r}):\n print('held', flush=True); time.sleep(60)"],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert hidden(tmp_path) == [".m.npz.lock"]
        with pytest.raises(atomic.LockedError, match=f"{target}: another process is writing this model"):
            with atomic.target_lock(target, what="model"):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert hidden(tmp_path) == [".m.npz.lock"]  # kill -9 runs no clean-up; the OS dropped the lock
    with atomic.target_lock(target):
        pass
    assert hidden(tmp_path) == []  # the next writer took it and removed it
    with pytest.raises(RuntimeError, match="boom"), atomic.target_lock(target):
        raise RuntimeError("boom")
    assert hidden(tmp_path) == []


def test_a_lock_file_removed_before_it_was_locked_is_taken_again(tmp_path, monkeypatch):
    """A taker that opened the lock file just before its holder removed it ends up locking a file
    that no longer has the name; it must take the lock again on the file that has it."""
    real = atomic.filelock.FileLock
    attempts = []

    def racing_lock(path, *, on_acquired, **kw):
        def replaced_first(fd):
            attempts.append(os.fstat(fd).st_ino)
            if len(attempts) == 1:  # meanwhile the holder removed it and a third writer made a new one
                (tmp_path / "new").write_text("")
                os.replace(tmp_path / "new", path)
            on_acquired(fd)
        return real(path, on_acquired=replaced_first, **kw)

    monkeypatch.setattr(atomic.filelock, "FileLock", racing_lock)
    with atomic.target_lock(tmp_path / "x"):
        assert len(attempts) == 2 and os.stat(tmp_path / ".x.lock").st_ino == attempts[1]
    assert hidden(tmp_path) == []


@pytest.mark.long  # a real index command interrupted
def test_sigint_while_lucene_indexes_leaves_nothing(tmp_path):
    src = tmp_path / "big.trec"
    doc = "<DOC>\n<DOCNO> D{} </DOCNO>\n<TEXT>airbus subsidies rail strike number {}</TEXT>\n</DOC>\n"
    src.write_text("".join(doc.format(i, i) for i in range(150_000)))
    proc = subprocess.Popen([sys.executable, "-m", "retrieval", "-q", "index", str(src), "--out", str(tmp_path / "idx")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_from_a_terminal)
    deadline = time.time() + 120
    while time.time() < deadline and not [p for p in tmp_path.glob(".idx.building-*/*") if p.name != "write.lock"]:
        time.sleep(0.05)  # until Lucene writes
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and err == "topicir index: interrupted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.trec"]


# -- index --force keeps the replaced index's models -------------------------------------------

def test_force_keeps_the_models_of_the_replaced_index(tmp_path, caplog, capfd):
    src = tmp_path / "docs.trec"
    shutil.copy(DATA / "docs.trec", src)
    index = build_index([src], tmp_path / "idx")
    _, path = train_model(index, "lda", None, progress=False, checkpoint=False, **SMALL)
    assert path.parent == tmp_path / "idx" / "models"
    (path.parent / f".{path.name}.tmp-x1").write_bytes(b"partial")  # a training still running
    (path.parent / f".{path.name}.lock").write_text("")
    with caplog.at_level(logging.INFO, logger="retrieval.core.index"):
        again = build_index([src], tmp_path / "idx", force=True)
    assert f"kept the 1 model file of the replaced index in {path.parent} ({path.name}): same documents" \
        in caplog.text
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert load_model(path, again).get_params()["n_topics"] == 3
    # other documents: the model is kept and said so; loading it is refused by its fingerprint
    with open(src, "a") as f:
        f.write(trec([("NEW1", "zeppelin airship")]))
    capfd.readouterr()
    assert main(["-q", "index", str(src), "--out", str(tmp_path / "idx"), "--force"]) == 0
    err = capfd.readouterr().err
    assert err == (f"topicir: warning: kept the 1 model file of the replaced index in {path.parent} "
                   f"({path.name}); the documents changed, so a model trained on the replaced index is "
                   f"refused when loaded on this one: retrain it\n")
    assert path.is_file() and json.loads((tmp_path / "idx" / "topicir.json").read_text())["n_docs"] == 5
    with pytest.raises(ValueError, match=str(path)):
        load_model(path, Index(tmp_path / "idx"))
    assert hidden(tmp_path) == []


def test_an_unexpected_java_exception_is_still_one_line(capsys, monkeypatch):
    from retrieval.ui.guard import run_guarded

    def fails(args):
        raise RuntimeError("JVM exception occurred: boom\n\tat org.apache.lucene.X.y(X.java:1)\nCaused by: z")

    monkeypatch.delenv("TOPICIR_TRACEBACK", raising=False)
    assert run_guarded("run", fails, None) == 1
    assert capsys.readouterr().err == ("topicir run: internal error: RuntimeError: JVM exception occurred: boom "
                                       "(TOPICIR_TRACEBACK=1 shows the traceback; please report it)\n")
