"""gLDA on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state.py checks for LDA): whole chains per worker, the driver holds no token-,
group- or document-sized array, the model is the local one array for array, a checkpoint is a
manifest of the workers' parts that resumes bit-identically, a damaged part is refused in one
line, and a lost worker names itself and the checkpoint."""
import os
import signal

import numpy as np
import pytest

from models import synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.executors import WorkerLostError
from models.glda.model import GroupedLDA
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import same_model

# three chains on two workers: worker 0 owns chains 0-1, worker 1 chain 2
KW = dict(n_topics=5, n_chains=3, n_iter=12, burn_in=6, sample_every=2, seed=3, log_lik_every=2,
          checkpoint_every=3)


def corpus():
    return synthetic_corpus(200, 100, 40, seed=3, n_latent=5)  # tokens >> chains x K


def executor():
    from models.common.executors.ray import RayExecutor

    return RayExecutor(n_workers=2, state="workers")


def test_glda_driver_holds_no_chain_state_and_a_damaged_checkpoint_part_is_refused(ray_cluster, tmp_path):  # noqa: F811
    data, path = corpus(), tmp_path / "run.ckpt.npz"
    local = GroupedLDA(**KW).fit(data)
    ex = executor()
    model = GroupedLDA(executor=ex, **KW).fit(data, checkpoint=path)
    same_model(model, local, tmp_path)
    # what the driver keeps besides the model's arrays (read from its file): the chains' alpha,
    # the sample iterations and the workers' chain ranges; no chain state, nothing per token,
    # group or document
    output = {n + "_" for n in model._INFERENCE_ARRAYS}
    held = [a for a in ex.last_runner.__dict__.values() if isinstance(a, np.ndarray)]
    held += [a for k, a in model.__dict__.items() if isinstance(a, np.ndarray) and k not in output]
    assert max(a.size for a in held) <= KW["n_chains"] * KW["n_topics"] < data.n_docs
    assert not any(hasattr(model, n) for n in ("g_", "zg_", "z_", "n_kw_", "group_ptr_", "_lay", "_corpus"))
    assert model.executor_stats_["workers"] == 2 and model.executor_stats_["sync_bytes"] == 0
    # the checkpoint: a manifest of every chain's state part, written by its worker
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == KW["n_iter"] and h["layout"] == "ray-shards"
    assert [p[:2] for p in h["state_parts"]] == [[c, f"state.chain{c}.sweep12.npz"] for c in range(3)]
    parts = path.with_name(path.name + ".parts")
    state = ckpt.read_model_file(parts / "state.chain1.sweep12.npz", kind=ckpt.CHECKPOINT_FORMAT).arrays
    assert set(state) == {"gz", "rng"} and state["gz"].shape == (1, data.n_tokens + local.zg_.shape[1])
    np.testing.assert_array_equal(state["gz"][0], local.gz_[1])
    np.testing.assert_array_equal(state["rng"][0], local.rng_[1])
    with pytest.raises(ValueError, match="stayed on Ray workers"):
        GroupedLDA(**KW).fit(data, checkpoint=path)
    # a damaged part: one line naming it, before any sweep (resuming: the long test below)
    victim, other = parts / h["state_parts"][1][1], parts / h["state_parts"][0][1]
    victim.write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of chain 1 ") as e:
        GroupedLDA(executor=executor(), **KW).fit(data, checkpoint=path)
    assert "\n" not in str(e.value)


def test_a_state_part_with_a_group_outside_its_document_or_a_topic_out_of_range_is_refused(tmp_path):
    from models.common.kernels.rng import make_rng_states
    from models.glda.ray_state import GldaChainHook, GldaChainWorker

    data = synthetic_corpus(30, 40, 20, seed=5, n_latent=3)
    data.doc_ptr.tofile(tmp_path / "doc_ptr")
    data.term_ids.tofile(tmp_path / "term_ids")
    lay = dict(c0=1, c1=2, D=data.n_docs, V=data.n_terms,  # a worker of chain 1 of two, without Ray
               doc_src=("file", str(tmp_path / "doc_ptr"), 0, data.doc_ptr.dtype.str, data.n_docs + 1),
               tok_src=("file", str(tmp_path / "term_ids"), 0, data.term_ids.dtype.str, data.n_tokens))
    model = GroupedLDA(**dict(KW, n_chains=2))
    worker = GldaChainWorker(lay, 2, *GldaChainHook.worker_args(model, data))
    worker.build()
    worker.start_chains(make_rng_states(KW["seed"], 2)[1:], np.full((1, KW["n_topics"]), 10.0))
    part = worker.state(0)
    worker.check_state("state.chain1.npz", 0, part)
    n_groups = int(np.ceil((data.doc_ptr[1] - data.doc_ptr[0]) / model.group_size))
    for where, value, why in ((0, n_groups, "gz puts a token in group"),
                              (data.n_tokens, KW["n_topics"], "gz gives a group topic 5, outside")):
        bad = {k: v.copy() for k, v in part.items()}
        bad["gz"][0, where] = value
        with pytest.raises(ValueError, match=rf"^state.chain1.npz: damaged state part \({why}"):
            worker.check_state("state.chain1.npz", 0, bad)
    with pytest.raises(ValueError, match=r"^state.chain1.npz: damaged state part \(shapes or arrays"):
        worker.check_state("state.chain1.npz", 0, dict(part, gz=part["gz"][:, 1:]))


def test_glda_trains_with_the_state_on_the_workers_from_the_command_line_and_the_bench():
    from models.common.executors.ray import WORKER_STATE_KINDS
    from retrieval.bench.ray import KINDS
    from retrieval.ui.cli_parser import train_parser

    assert "glda" in WORKER_STATE_KINDS and set(WORKER_STATE_KINDS) <= set(KINDS)
    args = train_parser("glda").parse_args(["--index", "x", "--ray", "--ray-state", "workers"])
    assert args.ray == "" and args.ray_state == "workers"


@pytest.mark.long
def test_glda_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    data, path = corpus(), tmp_path / "run.ckpt.npz"
    full = GroupedLDA(**KW).fit(data)
    ex = executor()

    def kill(model, it, n_iter):
        if it == 10:
            os.kill(ex.worker_pids()[1], signal.SIGKILL)

    with pytest.raises(WorkerLostError, match=rf"^Ray worker 1 \(chains 2-2\) died during sweep 11.*"
                                              rf"{path} holds sweep 9; fit again with the same checkpoint"):
        GroupedLDA(executor=ex, **KW).fit(data, callback=kill, checkpoint=path)
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert h["iteration"] == 9 and [(s["chain"], s["iter"]) for s in h["samples"]] == [(0, 8), (1, 8), (2, 8)]
    parts = path.with_name(path.name + ".parts")
    assert sorted(p.name for p in parts.glob("state.*")) == [f"state.chain{c}.sweep9.npz" for c in range(3)]
    kept = parts / h["samples"][2]["shards"][0][1]  # chain 2's, read by worker 1
    kept_bytes = kept.read_bytes()
    kept.unlink()
    with pytest.raises(ValueError, match=rf"^{path}: lists a part {kept} that is missing"):
        GroupedLDA(executor=executor(), **KW).fit(data, checkpoint=path)
    kept.write_bytes(kept_bytes)
    resumed = GroupedLDA(executor=executor(), **KW).fit(data, checkpoint=path)
    same_model(resumed, full, tmp_path)
