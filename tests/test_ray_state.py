"""Ray with the chain state on the workers (``RayExecutor(state="workers")``): the driver holds
no token-sized array, the model is the local one array for array, a checkpoint is a manifest
of the workers' parts that resumes bit-identically, and a damaged part is refused in one line."""
import os
import signal

import numpy as np
import pytest

from models import LDA, synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.executors import WorkerLostError
from tests.test_ray import KW, ray_cluster  # noqa: F401  (the module's Ray cluster)


def corpus():
    return synthetic_corpus(120, 300, 30, seed=3, n_latent=5)


def fit(kw, data, **fit_kw):
    from models.common.executors.ray import RayExecutor

    ex = RayExecutor(n_workers=2, state="workers")
    return LDA(executor=ex, **kw).fit(data, **fit_kw), ex


def same_model(got, want, tmp_path):
    np.testing.assert_array_equal(got.log_lik_, want.log_lik_)
    got.save(tmp_path / "got.npz")
    want.save(tmp_path / "want.npz")
    a, b = (ckpt.read_model_file(tmp_path / n) for n in ("got.npz", "want.npz"))
    assert a.header == b.header
    for name in want._INFERENCE_ARRAYS:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name], err_msg=name)


def lost_worker_then_resume(cls, kw, data, path, tmp_path, executor, check=None, **fit_kw):
    """Worker 1 of 2 (shard 2 of 3) killed after sweep 10 of a fit that checkpoints every 3
    sweeps: the error names the worker and the checkpoint of sweep 9, whose kept samples and
    per-shard state parts are listed; the local trainer refuses it; ``check(header, parts)``
    looks at the parts; a damaged part is refused in one line naming it; fitting again resumes
    to the uninterrupted model."""
    assert kw["n_shards"] == 3 and kw["checkpoint_every"] == 3 and kw["n_chains"] == 2
    full = cls(**kw).fit(data, **fit_kw)
    ex = executor()

    def kill(model, it, n_iter):
        if it == 10:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=rf"Ray worker 1 \(shards 2-2\) died during sweep 11.*"
                                              rf"{path} holds sweep 9; fit again with the same checkpoint"):
        cls(executor=ex, **kw).fit(data, callback=kill, checkpoint=path, **fit_kw)
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == 9 and h["layout"] == "ray-shards"
    assert [(s["chain"], s["iter"]) for s in h["samples"]] == [(0, 8), (1, 8)]
    parts = path.with_name(path.name + ".parts")
    assert sorted(p.name for p in parts.glob("state.*")) == [f"state.shard{s}.sweep9.npz" for s in range(3)]
    with pytest.raises(ValueError, match="stayed on Ray workers"):
        cls(**kw).fit(data, checkpoint=path, **fit_kw)
    if check is not None:
        check(h, parts)
    victim, other = parts / h["state_parts"][2][1], parts / h["state_parts"][0][1]
    good = victim.read_bytes()
    victim.write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of shard 2") as e:
        cls(executor=executor(), **kw).fit(data, checkpoint=path, **fit_kw)
    assert "\n" not in str(e.value)
    victim.write_bytes(good)
    resumed = cls(executor=executor(), **kw).fit(data, checkpoint=path, **fit_kw)
    same_model(resumed, full, tmp_path)
    return resumed, full


def test_driver_holds_no_token_array_and_model_is_local(ray_cluster, tmp_path):  # noqa: F811
    data = synthetic_corpus(400, 100, 60, seed=3, n_latent=5)  # tokens >> chains x V x K
    local = LDA(**KW).fit(data)
    model, ex = fit(KW, data)
    same_model(model, local, tmp_path)
    # what the driver keeps besides the model's arrays (read from its file like any loaded
    # model's): model-level tables (chains x V x K at most), none per token
    output = {n + "_" for n in model._INFERENCE_ARRAYS}
    held = [a for a in ex.last_runner.__dict__.values() if isinstance(a, np.ndarray)]
    held += [a for k, a in model.__dict__.items() if isinstance(a, np.ndarray) and k not in output]
    held += [a for a in model._lay.values() if isinstance(a, np.ndarray)]
    C, V, K = KW["n_chains"], data.n_terms, KW["n_topics"]
    assert data.n_tokens > 10 * C * V * K
    assert max(a.size for a in held) <= C * V * K
    assert not any(hasattr(model, n) for n in ("z_ord_", "dt_", "dt_nnz_", "_active"))


def test_checkpoint_parts_resume_bit_identically_and_damage_is_refused(ray_cluster, tmp_path):  # noqa: F811
    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = LDA(**KW).fit(data)

    class Stop(Exception):
        pass

    def halt(model, it, n_iter):
        if it == 10:
            raise Stop

    with pytest.raises(Stop):
        fit(KW, data, callback=halt, checkpoint=path)
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == 9 and len(h["samples"]) == KW["n_chains"] and h["layout"] == "ray-shards"
    assert [p[0] for p in h["state_parts"]] == list(range(KW["n_shards"]))
    parts = path.with_name(path.name + ".parts")
    assert sorted(p.name for p in parts.glob("state.*")) == [
        f"state.shard{s}.sweep9.npz" for s in range(KW["n_shards"])]
    # the local trainer says where such a checkpoint resumes
    with pytest.raises(ValueError, match="stayed on Ray workers"):
        LDA(**KW).fit(data, checkpoint=path)
    # a damaged part: one line naming it, before any sweep
    victim = parts / h["state_parts"][1][1]
    good = victim.read_bytes()
    other = parts / h["state_parts"][0][1]
    victim.write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of shard 1") as e:
        fit(KW, data, checkpoint=path)
    assert "\n" not in str(e.value)
    victim.write_bytes(good)
    kept = parts / h["samples"][0]["shards"][0][1]
    kept_bytes = kept.read_bytes()
    kept.unlink()
    with pytest.raises(ValueError, match=rf"lists a part {kept} that is missing"):
        fit(KW, data, checkpoint=path)
    kept.write_bytes(kept_bytes)
    resumed, _ = fit(KW, data, checkpoint=path)
    same_model(resumed, full, tmp_path)


def test_workers_read_an_index_corpus_from_its_files(tmp_path):
    from models.common.corpus import make_corpus, mapped_file, read_piece
    from models.common.executors.sharded import read_source, source

    data = corpus()
    np.save(tmp_path / "p.npy", data.doc_ptr)
    np.save(tmp_path / "t.npy", data.term_ids)
    mapped = make_corpus(np.load(tmp_path / "p.npy", mmap_mode="r"), np.load(tmp_path / "t.npy", mmap_mode="r"),
                         n_terms=data.n_terms, fingerprint="f")  # as an index's corpus: views of memmaps
    assert mapped_file(mapped.term_ids)[0] == str(tmp_path / "t.npy")
    spec = source(mapped.term_ids, 100, 250)
    assert spec[0] == "file"
    np.testing.assert_array_equal(read_source(spec), data.term_ids[100:250])
    np.testing.assert_array_equal(read_piece(mapped.doc_ptr, 3, 9), data.doc_ptr[3:9])
    assert mapped_file(data.term_ids) is None and mapped_file(mapped.term_ids[::2]) is None
    with pytest.raises(ValueError, match=r"term_ids\[7\] = 2 is out of range for n_terms = 2"):
        make_corpus([0, 10], np.array([0, 1, 1, 0, 0, 1, 1, 2, 0, 0]), n_terms=2)
