"""Ray with the chain state on the workers (``RayExecutor(state="workers")``): the driver holds
no token-sized array, the model is the local one array for array, a checkpoint is a manifest
of the workers' parts that resumes bit-identically, and a damaged part is refused in one line;
every kind trains that way from the command line. The helpers here serve every kind's file
(tests/test_ray_state_*.py): the sharded kinds' and the whole-chain kinds' lost worker and
resume, the driver's arrays, a whole-chain fit's checkpoint."""
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


def driver_arrays(model, ex) -> list:
    """The arrays the driver keeps after a fit besides the model's output arrays (read from its
    file like any loaded model's): the runner's, the model's and its layout's."""
    output = {n + "_" for n in model._INFERENCE_ARRAYS}
    held = [a for a in ex.last_runner.__dict__.values() if isinstance(a, np.ndarray)]
    held += [a for k, a in model.__dict__.items() if isinstance(a, np.ndarray) and k not in output]
    return held + [a for a in getattr(model, "_lay", {}).values() if isinstance(a, np.ndarray)]


def chains_on_workers(model, ex, local, data, path):
    """A whole-chain kind's fit (gLDA, TCM: 3 chains on 2 workers, checkpointed at its last
    sweep) against the local one: the driver holds no array larger than chains x topics (no
    chain state, nothing per token, group or document), nothing reaches it from the workers, the
    checkpoint is a manifest of every chain's state part, written by its worker, and chain 1's
    part holds the local chain's random stream. Returns the header, the parts' folder and chain
    1's part."""
    C, K, n_iter = model.n_chains, model.n_topics, model.n_iter
    assert max(a.size for a in driver_arrays(model, ex)) <= C * K < data.n_docs
    assert model.executor_stats_["workers"] == 2 and model.executor_stats_["sync_bytes"] == 0
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == n_iter and h["layout"] == "ray-shards"
    assert [p[:2] for p in h["state_parts"]] == [[c, f"state.chain{c}.sweep{n_iter}.npz"] for c in range(C)]
    parts = path.with_name(path.name + ".parts")
    state = ckpt.read_model_file(parts / f"state.chain1.sweep{n_iter}.npz", kind=ckpt.CHECKPOINT_FORMAT).arrays
    np.testing.assert_array_equal(state["rng"][0], local.rng_[1])
    return h, parts, state


def lost_worker_then_resume(cls, kw, data, path, tmp_path, executor, unit="shard", check=None, **fit_kw):
    """Worker 1 of 2 (``unit`` 2 of 3: a document shard, or a whole chain for gLDA and TCM)
    killed after sweep 10 of a fit that checkpoints every 3 sweeps: the error names the worker
    and its units and the checkpoint of sweep 9, whose kept samples and per-unit state parts are
    listed; the local trainer refuses it; ``check(header, parts)`` looks at the parts; a damaged
    state part is refused in one line naming it, a missing part of the last chain's kept sample
    by naming it; fitting again resumes to the uninterrupted model."""
    units = {"shard": kw.get("n_shards"), "chain": kw["n_chains"]}[unit]
    assert units == 3 and kw["checkpoint_every"] == 3 and (unit == "chain" or kw["n_chains"] == 2)
    full = cls(**kw).fit(data, **fit_kw)
    ex = executor()

    def kill(model, it, n_iter):
        if it == 10:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=rf"^Ray worker 1 \({unit}s 2-2\) died during sweep 11.*"
                                              rf"{path} holds sweep 9; fit again with the same checkpoint"):
        cls(executor=ex, **kw).fit(data, callback=kill, checkpoint=path, **fit_kw)
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == 9 and h["layout"] == "ray-shards"
    assert [(s["chain"], s["iter"]) for s in h["samples"]] == [(c, 8) for c in range(kw["n_chains"])]
    parts = path.with_name(path.name + ".parts")
    assert sorted(p.name for p in parts.glob("state.*")) == [f"state.{unit}{u}.sweep9.npz" for u in range(3)]
    with pytest.raises(ValueError, match="stayed on Ray workers"):
        cls(**kw).fit(data, checkpoint=path, **fit_kw)
    if check is not None:
        check(h, parts)
    victim, other = parts / h["state_parts"][2][1], parts / h["state_parts"][0][1]
    good = victim.read_bytes()
    victim.write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of {unit} 2") as e:
        cls(executor=executor(), **kw).fit(data, checkpoint=path, **fit_kw)
    assert "\n" not in str(e.value)
    victim.write_bytes(good)
    kept = parts / h["samples"][-1]["shards"][0][1]  # the last chain's
    kept_bytes = kept.read_bytes()
    kept.unlink()
    with pytest.raises(ValueError, match=rf"^{path}: lists a part {kept} that is missing"):
        cls(executor=executor(), **kw).fit(data, checkpoint=path, **fit_kw)
    kept.write_bytes(kept_bytes)
    resumed = cls(executor=executor(), **kw).fit(data, checkpoint=path, **fit_kw)
    same_model(resumed, full, tmp_path)
    return resumed, full


@pytest.mark.parametrize("kind", ["lda", "pam", "glda", "tree-lda", "tcm"])
def test_every_kind_trains_with_the_state_on_the_workers_from_the_command_line_and_the_bench(kind):
    from models.common.executors.ray import WORKER_STATE_KINDS
    from retrieval.bench.ray import KINDS
    from retrieval.ui.cli_parser import train_parser

    assert kind in WORKER_STATE_KINDS and set(WORKER_STATE_KINDS) <= set(KINDS)
    args = train_parser(kind).parse_args(["--index", "x", "--ray", "--ray-state", "workers"])
    assert args.ray == "" and args.ray_state == "workers"


def test_driver_holds_no_token_array_and_model_is_local(ray_cluster, tmp_path):  # noqa: F811
    data = synthetic_corpus(400, 100, 60, seed=3, n_latent=5)  # tokens >> chains x V x K
    local = LDA(**KW).fit(data)
    model, ex = fit(KW, data)
    same_model(model, local, tmp_path)
    # what the driver keeps besides the model's arrays (read from its file like any loaded
    # model's): model-level tables (chains x V x K at most), none per token
    held = driver_arrays(model, ex)
    C, V, K = KW["n_chains"], data.n_terms, KW["n_topics"]
    assert data.n_tokens > 10 * C * V * K
    assert max(a.size for a in held) <= C * V * K
    assert not any(hasattr(model, n) for n in ("z_ord_", "dt_", "dt_nnz_", "_active"))


@pytest.mark.long  # three Ray trainings and a resume (make test-long)
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


@pytest.mark.long  # a stopped Ray training and its rerun (make test-long)
def test_a_stop_on_the_workers_writes_the_sweep_it_follows(ray_cluster, tmp_path):  # noqa: F811
    """A stop request (the first Ctrl-C of ``topicir train``) between scheduled checkpoints: the
    workers write their parts of that sweep, and the rerun is the uninterrupted model."""
    from tests.helpers import stopped_at

    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = LDA(**KW).fit(data)
    stopped_at(lambda stop: fit(KW, data, callback=stop, checkpoint=path), path, 7)
    resumed, _ = fit(KW, data, checkpoint=path)
    same_model(resumed, full, tmp_path)
