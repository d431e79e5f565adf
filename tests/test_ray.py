"""Ray executor: the model trained on Ray workers is the local one, array for array; a killed
worker stops training with a clear error, and resuming from the checkpoint ends as an
uninterrupted run. A local Ray cluster (2 CPUs) is started once for the module."""
import io
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from models import LDA, synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.executors import executor_from_flag, parse_executor
from models.common.progress import TqdmCallback
from tests.helpers import assert_same_fit

KW = dict(n_topics=8, n_chains=2, n_iter=12, burn_in=6, sample_every=2, n_shards=3, seed=3,
          init="sparse", sparse_init_frac=0.25, sparse_init_every=1, optimize_alpha=True,
          optimize_every=4, log_lik_every=2, checkpoint_every=3)
STATE = ("z_", "n_kw_", "n_k_", "alpha_", "rng_")


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from models.common.executors.signals import init_ray, shutdown_ray

    init_ray(num_cpus=2, log_to_driver=False, include_dashboard=False)  # keeps the JVM's handlers
    yield ray
    shutdown_ray()


def corpus():
    return synthetic_corpus(120, 300, 30, seed=3, n_latent=5)


def test_executor_strings_are_parsed_and_checked():
    assert parse_executor("local") == ("local", None)
    assert parse_executor("ray") == ("ray", None)
    assert parse_executor("ray:10.0.0.1:6379") == ("ray", "10.0.0.1:6379")
    assert parse_executor("ray://head:10001") == ("ray", "ray://head:10001")
    assert [executor_from_flag(f) for f in (None, True, "", "auto", "ray://h:1")] == [
        "local", "ray", "ray", "ray:auto", "ray://h:1"]
    for bad in ("ray:", "spark", 3):
        with pytest.raises(ValueError, match="executor must be"):
            parse_executor(bad)
    with pytest.raises(ValueError, match="executor must be"):
        LDA(n_iter=2, burn_in=1, sample_every=1, executor="dask").fit(corpus())


def test_default_executor_never_imports_ray(tmp_path):
    code = ("import sys; from models import LDA, synthetic_corpus; "
            "m = LDA(n_topics=4, n_chains=1, n_iter=2, burn_in=1, sample_every=1)"
            ".fit(synthetic_corpus(20, 50, 10, seed=1)); "
            f"m.save({str(tmp_path / 'm.npz')!r}); assert 'ray' not in sys.modules, 'ray imported'")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.parametrize("n_workers, kw", [
    (2, {}),  # sparse init, alpha optimisation, 3 shards on 2 workers
    pytest.param(1, dict(init="online", n_shards=4, n_topics=12, optimize_alpha=False),
                 marks=pytest.mark.long),
])
def test_ray_model_equals_local_model_array_for_array(ray_cluster, tmp_path, n_workers, kw):
    from models.common.executors.ray import RayExecutor

    data, kw = corpus(), dict(KW, **kw)
    local = LDA(**kw).fit(data)  # all numba threads
    ex, bar = RayExecutor(n_workers=n_workers), io.StringIO()
    remote = LDA(executor=ex, **kw).fit(data, callback=TqdmCallback(file=bar))
    assert_same_fit(remote, local, *STATE)
    assert "rounds=" in bar.getvalue() and "MB_sweep=" in bar.getvalue()  # progress on Ray
    # the model files are the same bytes' worth: same header, same arrays
    local.save(tmp_path / "local.npz", full=True)
    remote.save(tmp_path / "ray.npz", full=True)
    a, b = (ckpt.read_model_file(tmp_path / n) for n in ("local.npz", "ray.npz"))
    assert a.header == b.header and "executor" not in a.header["params"]
    assert a.arrays.keys() == b.arrays.keys()
    for name in a.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name], err_msg=name)
    st = remote.executor_stats_
    S, C = kw["n_shards"], kw["n_chains"]
    assert st["workers"] == n_workers and st["rounds"] == kw["n_iter"] * S * C
    assert st["slice_bytes_per_sweep"] > 0 and st["tokens_per_s"] > 0
    # one worker hands every slice to itself; two hand a slice over at every worker boundary
    assert (st["cross_worker_bytes_per_sweep"] > 0) == (n_workers > 1)


@pytest.mark.long  # a worker killed and the fit resumed on fresh workers
def test_killed_worker_fails_clearly_and_resume_gives_the_same_model(ray_cluster, tmp_path):
    from models.common.executors.ray import RayExecutor
    from models.common.executors import WorkerLostError

    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = LDA(**KW).fit(data)
    ex = RayExecutor(n_workers=2)

    def kill(model, it, n_iter):
        if it == 7:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=r"worker 1 \(shards 2-2\) died during sweep 8.*"
                                              r"holds sweep 6; fit again with the same checkpoint"):
        LDA(executor=ex, **KW).fit(data, callback=kill, checkpoint=path)
    header = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert header["iteration"] == 6 and "executor" not in header["params"]
    # the checkpoint is the executor's business no more than the model file: it resumes locally
    local_path = tmp_path / "local.ckpt.npz"
    local_path.write_bytes(path.read_bytes())
    assert_same_fit(LDA(**KW).fit(data, checkpoint=local_path), full, *STATE)
    resumed = LDA(executor=RayExecutor(n_workers=2), **KW).fit(data, checkpoint=path)
    assert_same_fit(resumed, full, *STATE)


def test_a_worker_busy_with_its_task_is_not_named_among_the_lost_ones(ray_cluster):
    """A ping waits behind the worker's running task: on a loaded machine a live worker still
    in its part of the failed round must not be reported dead beside the one that died."""
    import time

    from models.common.executors.ray import _dead

    @ray_cluster.remote(num_cpus=0, max_restarts=0)
    class Worker:
        def pid(self):
            return os.getpid()

        def work(self, seconds):
            time.sleep(seconds)

    busy, victim = Worker.remote(), Worker.remote()
    pids = ray_cluster.get([busy.pid.remote(), victim.pid.remote()])
    busy.work.remote(25)
    os.kill(pids[1], signal.SIGKILL)
    start = time.monotonic()
    assert _dead([busy, victim], timeout=12) == [1]
    assert time.monotonic() - start < 20
    ray_cluster.kill(busy)


def test_starting_ray_keeps_the_jvms_signal_handlers():
    """ray.init replaces the JVM's SIGSEGV/SIGBUS handlers and ray.shutdown resets them; the JVM
    faults on purpose, so a later Lucene call would kill the process. init_ray and shutdown_ray
    put them back (checked in a child
    process: the JVM and Ray both stay for the life of a process)."""
    pytest.importorskip("ray")
    code = """
import signal
from models.common.executors.signals import FATAL, handler_address, init_ray, shutdown_ray
from retrieval.core.jvm import jclass
jclass("java.lang.String")
jvm = [handler_address(s) for s in FATAL]
init_ray(num_cpus=1, log_to_driver=False, include_dashboard=False)
kept = [handler_address(s) for s in FATAL]
shutdown_ray()
kept_down = [handler_address(s) for s in FATAL]
import ray
ray.init(num_cpus=1, log_to_driver=False, include_dashboard=False)  # the unguarded calls
plain = [handler_address(s) for s in FATAL]
ray.shutdown()
plain_down = [handler_address(s) for s in FATAL]
print(jvm[0] != 0, kept == jvm == kept_down, plain[0] != jvm[0], plain_down[0] == 0)
"""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-4:] == ["True"] * 4, out.stdout


def test_lost_worker_is_one_line_of_the_command_naming_the_checkpoint(ray_cluster, tmp_path, capsys,
                                                                     caplog, monkeypatch):
    """Issue 30: a lost worker is an expected failure: one message naming the worker and the
    checkpoint a rerun resumes from; Ray's report of the death goes to the log, not the screen."""
    import logging
    import time

    from models.common.executors.rounds import PartitionRunner
    from retrieval.core.index import build_index
    from retrieval.ui.cli import main

    src = tmp_path / "docs.trec"
    rng = np.random.default_rng(0)
    src.write_text("".join(f"<DOC>\n<DOCNO> D{i} </DOCNO>\n<TEXT>"
                           f"{' '.join(f'w{t}' for t in rng.integers(0, 80, 30))}</TEXT>\n</DOC>\n"
                           for i in range(120)))
    index = build_index([src], tmp_path / "idx")
    capsys.readouterr()
    step = PartitionRunner.step

    def step_then_kill(self, model, corpus, it):
        if it == 7:
            os.kill(self.worker_pids()[1], signal.SIGKILL)
        return step(self, model, corpus, it)

    monkeypatch.setattr(PartitionRunner, "step", step_then_kill)
    caplog.set_level(logging.DEBUG, logger="models.common.executors.ray")
    out = tmp_path / "m.npz"
    code = main(["-q", "train", "lda", "--index", str(index.path), "--out", str(out), "--topics", "4",
                 "--chains", "1", "--iterations", "40", "--shards", "2", "--checkpoint-every", "3",
                 "--ray"])
    deadline = time.time() + 20  # the raylet's report reaches the driver asynchronously
    while time.time() < deadline and not any("Ray: " in r.getMessage() for r in caplog.records):
        time.sleep(0.2)
    import gc

    gc.collect()  # Ray logs the dead worker's unread results as they are collected
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == (f"topicir train: error: Ray worker 1 (shards 1-1) died during sweep 8; "
                            f"rerun the same command to resume from the checkpoint {out}.ckpt (sweep 6)\n")
    assert "died" not in captured.out and "Unhandled error" not in captured.err
    assert any("Ray: " in r.getMessage() and "died" in r.getMessage() for r in caplog.records)


def test_a_stop_between_checkpoints_brings_the_chains_back_first(ray_cluster, tmp_path):
    """State on the driver: the workers' chains come back to it only for scheduled checkpoints,
    samples and log-likelihoods, so a stop request after sweep 7 (checkpoints every 3) syncs
    them before writing; the checkpoint then resumes, locally too, to the local model."""
    from models.common.executors.ray import RayExecutor
    from tests.helpers import stopped_at

    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = LDA(**KW).fit(data)
    stopped_at(lambda stop: LDA(executor=RayExecutor(n_workers=2), **KW).fit(data, callback=stop, checkpoint=path),
               path, 7)
    assert_same_fit(LDA(**KW).fit(data, checkpoint=path), full, *STATE)
