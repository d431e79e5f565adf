"""Fault injection (issue 12): ``kill -9`` of ``topicir index`` and ``topicir train`` at random
moments, five times each. The next command must leave no temporaries or build directories
behind, and the model trained through the kills must equal one trained without them.

The moments are drawn from a seed printed in every failure (set TOPICIR_FAULT_SEED to replay).
"""
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from models.lda.model import LDA
from retrieval.core.index import Index, build_index
from retrieval.core.modelfiles import index_corpus, load_model

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
SEED = int(os.environ.get("TOPICIR_FAULT_SEED", random.randrange(1 << 30)))
TRIALS = 5
pytestmark = pytest.mark.long  # real commands killed, five times each


def topicir(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "retrieval", "-q", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def kill_at_random(args, rng, lo, hi) -> int:
    """Start ``topicir ARGS``, SIGKILL it after a random delay; its return code (-9 if killed)."""
    proc = topicir(*args)
    try:
        proc.wait(timeout=rng.uniform(lo, hi))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return proc.returncode


def kill_while_training(args, ckpt: Path, rng) -> int:
    """Start ``topicir train ARGS``; once it has written a checkpoint (it is then mid-training,
    whatever the machine's load), SIGKILL it after a random further delay. Its return code."""
    before = ckpt.stat().st_mtime_ns if ckpt.exists() else 0
    proc = topicir(*args)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if ckpt.exists() and ckpt.stat().st_mtime_ns != before:
            break
        time.sleep(0.01)
    try:
        proc.wait(timeout=rng.uniform(0.0, 0.5))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    proc.communicate()
    return proc.returncode


def leftovers(directory: Path) -> list[str]:
    """Hidden temporaries, build directories and lock files below ``directory``."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(".*"))


def test_kill_9_of_index_leaves_nothing_after_the_next_build(tmp_path):
    rng = random.Random(SEED)
    src = tmp_path / "docs.trec"
    doc = "<DOC>\n<DOCNO> D{} </DOCNO>\n<TEXT>airbus subsidies rail strike story number {}</TEXT>\n</DOC>\n"
    src.write_text("".join(doc.format(i, i) for i in range(3000)))
    out = tmp_path / "ix" / "idx"
    # Kill moments within an uninterrupted build's duration on this machine, so that they land.
    t0 = time.monotonic()
    first = topicir("index", src, "--out", out, "--force")
    _, err = first.communicate(timeout=600)  # drains stderr: a full pipe would stall the build
    assert first.returncode == 0, f"seed {SEED}: {err}"
    took = time.monotonic() - t0
    codes = [kill_at_random(["index", src, "--out", out, "--force"], rng, 0.05 * took, 0.8 * took)
             for _ in range(TRIALS)]
    assert codes.count(-signal.SIGKILL) >= 3, f"seed {SEED}: too few kills landed: {codes}"
    proc = topicir("index", src, "--out", out, "--force")
    assert proc.wait(timeout=600) == 0, f"seed {SEED}: {proc.stderr.read()}"
    assert leftovers(out.parent) == [], f"seed {SEED}, return codes {codes}"
    assert Index(out).manifest["n_docs"] == 3000


def test_kill_9_of_train_resumes_to_the_uninterrupted_model(tmp_path):
    rng = random.Random(SEED + 1)
    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    out = tmp_path / "models" / "lda.npz"
    args = ["train", "lda", "--index", index.path, "--out", out, "--topics", 3, "--chains", 2,
            "--iterations", 3000, "--checkpoint-every", 2, "--threads", 1]
    ckpt = out.with_name(out.name + ".ckpt")
    codes = [kill_while_training(args, ckpt, rng) for _ in range(TRIALS)]
    assert codes.count(-signal.SIGKILL) >= 3, f"seed {SEED + 1}: too few kills landed: {codes}"
    proc = topicir(*args)
    assert proc.wait(timeout=600) == 0, f"seed {SEED + 1}: {proc.stderr.read()}"
    assert leftovers(out.parent) == [] and sorted(p.name for p in out.parent.iterdir()) == ["lda.npz"]
    alone = LDA(n_topics=3, n_chains=2, n_iter=3000, seed=0, n_jobs=1).fit(index_corpus(index))
    got = load_model(out, index)
    terms = np.arange(index.stats.n_terms)
    np.testing.assert_array_equal(got.p_w_d(terms), alone.p_w_d(terms), err_msg=f"seed {SEED + 1}: {codes}")
    np.testing.assert_array_equal(got.log_lik_, alone.log_lik_)
