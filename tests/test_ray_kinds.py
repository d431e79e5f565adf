"""Ray executor of the Gibbs kinds besides LDA (tests/test_ray.py): for a seed and shard count
the model trained on Ray workers is the local one, array for array; a killed worker stops
training with a message naming it and the checkpoint, and fitting again resumes to the model
of an uninterrupted run. A local Ray cluster (2 CPUs) is started once for the module."""
import io
import os
import signal

import numpy as np
import pytest

from models import PAM, synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.executors import RAY_KINDS, WorkerLostError
from models.common.progress import TqdmCallback
from tests.helpers import assert_same_fit

# Every kind: its class, settings that exercise what its Ray rounds carry besides the sweep
# (PAM: sparse initialisation, pruned sweeps, alpha learnt after every sweep), the state compared.
KINDS = {
    "pam": (PAM, dict(n_super=3, n_sub=6, n_chains=2, n_iter=12, burn_in=6, sample_every=2,
                      n_shards=3, seed=3, init="sparse", sparse_init_frac=0.25,
                      sparse_init_every=1, sampler="pruned", prune_start=2, log_lik_every=2,
                      checkpoint_every=3),
            ("z_", "n_wj_", "n_j_", "n_ds_", "alpha_", "rng_", "sweep_stats_")),
}
# A second setting per kind, run on one worker that owns every shard.
ONE_WORKER = {
    "pam": dict(init="random", sampler="exact", n_shards=4, learn_alpha=False),
}


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from models.common.executors.signals import init_ray, shutdown_ray

    init_ray(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield ray
    shutdown_ray()


def corpus():
    return synthetic_corpus(120, 300, 30, seed=3, n_latent=5)


def test_every_kind_here_is_a_ray_kind():
    assert set(KINDS) | {"lda"} == set(RAY_KINDS)


@pytest.mark.parametrize("kind, n_workers", [(k, w) for k in KINDS for w in (2, 1)])
def test_ray_model_equals_local_model_array_for_array(ray_cluster, tmp_path, kind, n_workers):
    from models.common.executors.ray import RayExecutor

    cls, kw, state = KINDS[kind]
    kw = dict(kw, **(ONE_WORKER[kind] if n_workers == 1 else {}))
    data = corpus()
    local = cls(**kw).fit(data)
    bar = io.StringIO()
    remote = cls(executor=RayExecutor(n_workers=n_workers), **kw).fit(
        data, callback=TqdmCallback(file=bar))
    assert_same_fit(remote, local, *state)
    assert "rounds=" in bar.getvalue() and "MB_sweep=" in bar.getvalue()
    local.save(tmp_path / "local.npz", full=True)
    remote.save(tmp_path / "ray.npz", full=True)
    a, b = (ckpt.read_model_file(tmp_path / n) for n in ("local.npz", "ray.npz"))
    assert a.header == b.header and "executor" not in a.header["params"]
    assert a.arrays.keys() == b.arrays.keys()
    for name in a.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name], err_msg=name)
    st = remote.executor_stats_
    assert st["workers"] == n_workers
    assert st["rounds"] == kw["n_iter"] * kw["n_shards"] * kw["n_chains"]
    assert (st["cross_worker_bytes_per_sweep"] > 0) == (n_workers > 1)


@pytest.mark.parametrize("kind", KINDS)
def test_killed_worker_fails_clearly_and_resume_gives_the_same_model(ray_cluster, tmp_path, kind):
    from models.common.executors.ray import RayExecutor

    cls, kw, state = KINDS[kind]
    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = cls(**kw).fit(data)
    ex = RayExecutor(n_workers=2)

    def kill(model, it, n_iter):
        if it == 7:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=r"Ray worker 1 \(shards 2-2\) died during sweep 8.*"
                                              r"holds sweep 6; fit again with the same checkpoint"):
        cls(executor=ex, **kw).fit(data, callback=kill, checkpoint=path)
    assert ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header["iteration"] == 6
    resumed = cls(executor=RayExecutor(n_workers=2), **kw).fit(data, checkpoint=path)
    assert_same_fit(resumed, full, *state)


@pytest.mark.parametrize("kind", KINDS)
def test_train_command_has_the_ray_flag(kind):
    from retrieval.ui.cli_parser import train_parser

    args = train_parser(kind).parse_args(["--index", "x", "--ray"])
    assert args.ray == "" and args.executor == "local"
