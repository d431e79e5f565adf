"""Ray executor of the Gibbs kinds besides LDA (tests/test_ray.py): for a seed and shard count
the model trained on Ray workers is the local one, array for array; a killed worker stops
training with a message naming it and the checkpoint, and fitting again resumes to the model
of an uninterrupted run. A local Ray cluster (2 CPUs) is started once for the module."""
import io
import os
import signal

import numpy as np
import pytest

from models import PAM, TCM, synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.executors import RAY_KINDS, WorkerLostError
from models.common.progress import TqdmCallback
from models.glda.model import GroupedLDA
from models.tree_lda.model import TreeLDA
from tests.helpers import assert_same_fit

SYNSETS = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7], [10, 11, 12, 13], [20, 21], [30, 31, 32]]
SCHEDULE = dict(n_chains=2, n_iter=12, burn_in=6, sample_every=2, seed=3, log_lik_every=2,
                checkpoint_every=3)
# Every kind: its class, settings that exercise what its Ray runner carries besides the sweep,
# its fit inputs, and the chain state compared besides the kept samples. PAM: sparse
# initialisation, pruned sweeps, alpha learnt after every sweep; TCM: alpha0 resampled on the
# driver's stream; gLDA: two chains on two workers; tree-LDA: three shards on two workers.
KINDS = {
    "pam": (PAM, dict(SCHEDULE, n_super=3, n_sub=6, n_shards=3, init="sparse",
                      sparse_init_frac=0.25, sparse_init_every=1, sampler="pruned",
                      prune_start=2),
            {}, ("z_", "n_wj_", "n_j_", "n_ds_", "alpha_", "rng_", "sweep_stats_")),
    "tcm": (TCM, dict(SCHEDULE, n_topics=5, n_shards=3, resample_alpha0=True), {},
            ("b_", "dt_topic_", "dt_count_", "dt_nnz_", "alpha0_", "rng_", "alpha0_trace_")),
    "glda": (GroupedLDA, dict(SCHEDULE, n_topics=6), {},
             ("g_", "zg_", "n_kw_", "n_k_", "alpha_", "rng_")),
    "tree-lda": (TreeLDA, dict(SCHEDULE, n_topics=5, n_shards=3), dict(synsets=SYNSETS),
                 ("z_", "zp_", "n_e_", "n_i_", "n_dk_", "inv_", "alpha_", "rng_")),
}
# A second setting per kind, run on one worker that owns every shard (gLDA: both chains).
ONE_WORKER = {
    "pam": dict(init="random", sampler="exact", n_shards=4, learn_alpha=False),
    "tcm": dict(sampler="exact", n_shards=2, resample_alpha0=False),
    "glda": dict(restricted=True),
    "tree-lda": dict(n_shards=1),  # the sequential sampler, which counts in the root's own row
}
# Arrays a resumed run leaves otherwise than an uninterrupted one where nothing reads them, as a
# local resume does: TCM's doc lists past their lengths (stale entries, or zeros once rebuilt).
NOT_RESUMED = {"tcm": ("dt_topic_", "dt_count_")}
# What the lost-worker message calls worker 1's units (shard 2 of 3, or chain 1 of 2).
WORKER_1 = {"pam": "shards 2-2", "tcm": "shards 2-2", "glda": "chains 1-1",
            "tree-lda": "shards 2-2"}


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from models.common.executors.signals import init_ray, shutdown_ray

    init_ray(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield ray
    shutdown_ray()


def corpus():
    return synthetic_corpus(120, 300, 30, seed=3, n_latent=5)


def test_every_gibbs_kind_has_a_ray_executor():
    assert set(KINDS) | {"lda"} == set(RAY_KINDS)


# The default suite runs two workers (PAM's and tree-LDA's, a minute or more each, in make
# test-long); one worker owning every unit is a --runslow check.
@pytest.mark.parametrize("kind, n_workers", [
    pytest.param(k, 2, marks=[pytest.mark.long] if k in ("pam", "tree-lda") else []) for k in KINDS] + [
    pytest.param(k, 1, marks=pytest.mark.slow) for k in KINDS])
def test_ray_model_equals_local_model_array_for_array(ray_cluster, tmp_path, kind, n_workers):
    from models.common.executors.ray import RayExecutor

    cls, kw, inputs, state = KINDS[kind]
    kw = dict(kw, **(ONE_WORKER[kind] if n_workers == 1 else {}))
    data = corpus()
    local = cls(**kw).fit(data, **inputs)
    bar = io.StringIO()
    remote = cls(executor=RayExecutor(n_workers=n_workers), **kw).fit(
        data, callback=TqdmCallback(file=bar), **inputs)
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
    assert st["workers"] == n_workers and st["sweeps"] == kw["n_iter"]


# One kind per runner in make test-long (partition rounds: PAM; whole chains: gLDA), the others
# with --runslow.
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.long if k in ("pam", "glda") else pytest.mark.slow)
                                  for k in KINDS])
def test_killed_worker_fails_clearly_and_resume_gives_the_same_model(ray_cluster, tmp_path, kind):
    from models.common.executors.ray import RayExecutor

    cls, kw, inputs, state = KINDS[kind]
    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = cls(**kw).fit(data, **inputs)
    ex = RayExecutor(n_workers=2)

    def kill(model, it, n_iter):
        if it == 7:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=rf"Ray worker 1 \({WORKER_1[kind]}\) died during "
                                              rf"sweep 8.*holds sweep 6; fit again with the same "
                                              rf"checkpoint"):
        cls(executor=ex, **kw).fit(data, callback=kill, checkpoint=path, **inputs)
    assert ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header["iteration"] == 6
    resumed = cls(executor=RayExecutor(n_workers=2), **kw).fit(data, checkpoint=path, **inputs)
    assert_same_fit(resumed, full, *(a for a in state if a not in NOT_RESUMED.get(kind, ())))


@pytest.mark.parametrize("kind", KINDS)
def test_train_command_has_the_ray_flag(kind):
    from retrieval.ui.cli_parser import train_parser

    args = train_parser(kind).parse_args(["--index", "x", "--ray"])
    assert args.ray == "" and args.executor == "local"
