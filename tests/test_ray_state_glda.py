"""gLDA on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state.py checks for LDA): whole chains per worker, the driver holds no token-,
group- or document-sized array, the model is the local one array for array, a checkpoint is a
manifest of the workers' parts that resumes bit-identically, a damaged part is refused in one
line, and a lost worker names itself and the checkpoint."""
import numpy as np
import pytest

from models.common import checkpoint as ckpt
from models import synthetic_corpus
from models.glda.model import GroupedLDA
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import chains_on_workers, lost_worker_then_resume, same_model

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
    # the sample iterations and the workers' chain ranges; the checkpoint's parts
    h, parts, state = chains_on_workers(model, ex, local, data, path)
    assert not any(hasattr(model, n) for n in ("g_", "zg_", "z_", "n_kw_", "group_ptr_", "_lay", "_corpus"))
    assert set(state) == {"gz", "rng"} and state["gz"].shape == (1, data.n_tokens + local.zg_.shape[1])
    np.testing.assert_array_equal(state["gz"][0], local.gz_[1])
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


@pytest.mark.long
def test_glda_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    lost_worker_then_resume(GroupedLDA, KW, corpus(), tmp_path / "run.ckpt.npz", tmp_path, executor, unit="chain")


# document shards (n_shards > 1): three shards on two workers, worker 0 owns shards 0-1
SHARDED = dict(KW, n_chains=2, n_shards=3)


def two_vocabularies():
    """Documents of terms 0-59, then of terms 40-99: the last shard's worker holds 60 terms' rows."""
    from models.common.corpus import make_corpus

    a, b = (synthetic_corpus(100, 60, 40, seed=s, n_latent=5) for s in (3, 4))
    return make_corpus(np.concatenate([a.doc_ptr, b.doc_ptr[1:] + a.n_tokens]),
                       np.concatenate([a.term_ids, b.term_ids + 40]), n_terms=100, fingerprint="two")


@pytest.mark.parametrize("extra", [{}, dict(restricted=True, init="random")])
def test_sharded_glda_on_workers_is_the_local_model_and_the_driver_holds_totals_only(ray_cluster, tmp_path, extra):  # noqa: F811
    from tests.test_ray_state import driver_arrays

    data, path, kw = two_vocabularies(), tmp_path / "run.ckpt.npz", dict(SHARDED, **extra)
    local = GroupedLDA(**kw).fit(data)
    ex = executor()
    model = GroupedLDA(executor=ex, **kw).fit(data, checkpoint=path)
    same_model(model, local, tmp_path)
    C, K, V = model.n_chains, model.n_topics, data.n_terms
    # the driver: every chain's topic totals (C x K), no counts, nothing per token, group or document
    assert max(a.size for a in driver_arrays(model, ex)) <= C * K
    assert not any(hasattr(model, n) for n in ("g_", "zg_", "z_", "n_kw_", "rng_", "_lay", "_corpus"))
    stats, runner = model.executor_stats_, ex.last_runner
    assert stats["workers"] == 2 and stats["sync_bytes"] == 0
    np.testing.assert_array_equal(runner.n_k, local.n_k_)
    # the owners' rows: terms 0-49 on worker 0, 50-99 on worker 1; every worker is sent the rows
    # of its documents' terms (the last shard's: terms 40-99), every owner the changes of its rows
    assert runner.cuts.tolist() == [0, 50, 100]
    want = [np.unique(data.term_ids[data.doc_ptr[local._shard_doc[s0]]:data.doc_ptr[local._shard_doc[s1]]])
            for s0, s1 in runner.ranges]
    assert [len(t) for t in want] == [V, 60]
    assert 0 < stats["counts_bytes_per_sweep"] <= sum(C * len(t) * K * 4 for t in want)
    assert stats["slice_bytes_per_sweep"] == stats["counts_bytes_per_sweep"] + stats["changed_bytes_per_sweep"]
    assert 0 < stats["cross_worker_bytes_per_sweep"] < stats["slice_bytes_per_sweep"]
    h = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header
    assert [p[:2] for p in h["state_parts"]] == [[s, f"state.shard{s}.sweep12.npz"] for s in range(3)]
    parts = path.with_name(path.name + ".parts")
    # a kept sample's rows: the owners' parts, each its range's rows of the local counts
    last = next(s for s in h["samples"] if (s["chain"], s["iter"]) == (1, 12))
    for (p, name, _), (lo, hi) in zip(last["owned"], [(0, 50), (50, 100)]):
        rows = ckpt.read_model_file(parts / name, kind=ckpt.CHECKPOINT_FORMAT).arrays
        dense = np.zeros((hi - lo, K), np.int32)
        r = np.repeat(np.arange(hi - lo), np.diff(rows["tw_ptr"]))
        dense[r, rows["tw_topic"]] = rows["tw_count"]
        np.testing.assert_array_equal(dense, local.n_kw_[1, lo:hi])
    # what each checkpoint wrote: the manifest, the workers' state parts, the samples' parts since
    # the checkpoint before (the last: the samples of sweeps 10 and 12)
    assert model.checkpoint_writes_[:, 0].tolist() == [3, 6, 9, 12]
    written = [parts / f"state.shard{s}.sweep12.npz" for s in range(3)] + [
        parts / f"chain{c}.sweep{i}.{p}.npz" for c in range(C) for i in (10, 12)
        for p in ("words", "shard0", "shard1", "shard2", "owned0", "owned1")]
    assert model.checkpoint_writes_[-1, 1] == path.stat().st_size + sum(f.stat().st_size for f in written)
    part = ckpt.read_model_file(parts / "state.shard1.sweep12.npz", kind=ckpt.CHECKPOINT_FORMAT).arrays
    np.testing.assert_array_equal(part["rng"], local.rng_[:, 1])
    a, b = local._shard_doc[1:3]
    t0, t1 = data.doc_ptr[a], data.doc_ptr[b]
    np.testing.assert_array_equal(part["gz"][:, :t1 - t0], local.g_[:, t0:t1])
    h0, h1 = local.group_ptr_[a], local.group_ptr_[b]
    np.testing.assert_array_equal(part["gz"][:, t1 - t0:], local.zg_[:, h0:h1])
    # an owner's part of a kept sample, damaged: refused in one line naming it
    victim = parts / last["owned"][1][1]
    victim.write_bytes((parts / last["owned"][0][1]).read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of owner 1 ") as e:
        GroupedLDA(executor=executor(), **kw).fit(data, checkpoint=path)
    assert "\n" not in str(e.value)


def test_count_rows_travel_as_their_nonzeros_where_those_take_fewer_bytes():
    from models.glda.ray_shards import _packed

    dense = np.zeros((2, 30, 40), np.int32)
    dense[1, 7, 3], dense[0, 29, 39] = 5, 2
    idx, count = _packed(dense)
    assert idx.dtype == np.int32 and count.tolist() == [2, 5]
    back = np.zeros_like(dense)
    back.reshape(-1)[idx] = count
    np.testing.assert_array_equal(back, dense)
    full = np.ones((2, 3, 4), np.int32)
    assert _packed(full) is full  # every entry nonzero: the dense rows are fewer bytes


def test_sharded_glda_needs_the_state_on_the_workers():
    from models.common.executors.ray import RayExecutor

    with pytest.raises(ValueError, match=r"n_shards > 1.*state='workers'"):
        GroupedLDA(**SHARDED)._ray_runner(RayExecutor(n_workers=2))


@pytest.mark.long
def test_sharded_glda_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    lost_worker_then_resume(GroupedLDA, SHARDED, corpus(), tmp_path / "run.ckpt.npz", tmp_path, executor)


def test_a_stop_between_checkpoints_writes_the_owners_rows_of_that_sweep(ray_cluster, tmp_path):  # noqa: F811
    """A stop request after sweep 7 (the first Ctrl-C of ``topicir train``; checkpoints every 3):
    the workers write their shards' state and the owners their rows as of sweep 7, and the rerun
    is the local model."""
    from tests.helpers import stopped_at

    data, path = two_vocabularies(), tmp_path / "run.ckpt.npz"
    local = GroupedLDA(**SHARDED).fit(data)
    stopped_at(lambda stop: GroupedLDA(executor=executor(), **SHARDED).fit(data, callback=stop, checkpoint=path),
               path, 7)
    same_model(GroupedLDA(executor=executor(), **SHARDED).fit(data, checkpoint=path), local, tmp_path)
