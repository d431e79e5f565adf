"""PAM on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state.py checks for LDA): the driver holds no token-sized array, the model is
the local one array for array (sparse start, pruned sweeps, alpha learnt after every sweep by
either estimator),
a lost worker names itself and the checkpoint, whose parts resume bit-identically, and a
damaged part is refused in one line."""
import os

import numpy as np
import pytest

from models import PAM, synthetic_corpus
from models.common import checkpoint as ckpt
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import driver_arrays, lost_worker_then_resume, same_model

KW = dict(n_super=3, n_sub=6, n_chains=2, n_iter=12, burn_in=6, sample_every=2, n_shards=3, seed=3,
          init="sparse", sparse_init_frac=0.25, sparse_init_every=1, sampler="pruned", prune_start=2,
          log_lik_every=2, checkpoint_every=3)


def executor():
    from models.common.executors.ray import RayExecutor

    return RayExecutor(n_workers=2, state="workers")


def test_pam_driver_holds_no_token_array_and_model_is_local(ray_cluster, tmp_path):  # noqa: F811
    data = synthetic_corpus(400, 100, 60, seed=3, n_latent=5)  # tokens >> chains x V x s'
    local = PAM(**KW).fit(data)
    ex = executor()
    model = PAM(executor=ex, **KW).fit(data)
    same_model(model, local, tmp_path)
    # the model file its parts were streamed into gone (as once train_model removes the
    # checkpoint's parts), saving writes the arrays mapped from it: the same file
    os.unlink(model._model_file)
    model.save(tmp_path / "again.npz")
    again, want = (ckpt.read_model_file(tmp_path / n) for n in ("again.npz", "want.npz"))
    assert again.header == want.header
    for name in want.arrays:
        np.testing.assert_array_equal(again.arrays[name], want.arrays[name], err_msg=name)
    np.testing.assert_array_equal(model.sweep_stats_, local.sweep_stats_)
    terms = np.arange(data.n_terms)
    np.testing.assert_array_equal(model.p_w_d(terms), local.p_w_d(terms))
    held = driver_arrays(model, ex)
    C, V, s2 = KW["n_chains"], data.n_terms, KW["n_sub"]
    assert data.n_tokens > 10 * C * V * s2
    assert max(a.size for a in held) <= C * V * s2
    token_or_doc_sized = ("z_ord_", "n_ds_", "dp_key_", "dp_count_", "dp_nnz_", "_active")
    assert not any(hasattr(model, n) for n in token_or_doc_sized)


@pytest.mark.long  # a worker lost and the fit resumed on fresh workers
def test_pam_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    # moment matching here (Minka's fixed point above): its two passes run from worker to worker
    kw = dict(KW, alpha_estimator="moments")
    data, path = synthetic_corpus(120, 300, 30, seed=3, n_latent=5), tmp_path / "run.ckpt.npz"
    resumed, full = lost_worker_then_resume(PAM, kw, data, path, tmp_path, executor)
    np.testing.assert_array_equal(resumed.sweep_stats_, full.sweep_stats_)


def test_removing_a_checkpoint_removes_its_parts(tmp_path):
    from models.common import kept

    path = tmp_path / "model.npz.ckpt"
    path.write_bytes(b"checkpoint")
    parts = kept.parts_dir(path)
    parts.mkdir()
    for name in ("state.shard0.sweep3.npz", "chain0.sweep2.shard0.npz", "model.npz"):
        (parts / name).write_bytes(b"part")
    kept.remove_checkpoint(path)
    assert not path.exists() and not parts.exists()
