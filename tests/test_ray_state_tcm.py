"""TCM on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state_glda.py checks for gLDA): whole chains per worker (``n_shards=1``) or
document shards (``n_shards`` > 1), the driver holds no token- or document-sized array, the
model is the local one array for array (alpha0 resampled after every sweep, splits inside
documents), a checkpoint is a manifest of the workers' parts that resumes bit-identically, a
damaged part is refused in one line, and a lost worker names itself and the checkpoint."""
import numpy as np
import pytest

from models import TCM, synthetic_corpus
from models.common import checkpoint as ckpt
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import chains_on_workers, lost_worker_then_resume, same_model

# three chains on two workers: worker 0 owns chains 0-1, worker 1 chain 2
KW = dict(n_topics=5, n_chains=3, n_iter=12, burn_in=6, sample_every=2, seed=3, log_lik_every=2,
          checkpoint_every=3, n_shards=1, max_len=4, resample_alpha0=True)


def corpus():
    data = synthetic_corpus(120, 60, 30, seed=3, n_latent=5)  # tokens >> chains x K
    split = (np.arange(data.n_tokens) % 7 == 3).astype(np.uint8)  # stopwords removed there
    return data, split


def executor():
    from models.common.executors.ray import RayExecutor

    return RayExecutor(n_workers=2, state="workers")


def test_tcm_driver_holds_no_chain_state_and_a_damaged_checkpoint_part_is_refused(ray_cluster, tmp_path):  # noqa: F811
    (data, split), path = corpus(), tmp_path / "run.ckpt.npz"
    local = TCM(**KW).fit(data, split=split)
    ex = executor()
    model = TCM(executor=ex, **KW).fit(data, split=split, checkpoint=path)
    same_model(model, local, tmp_path)
    np.testing.assert_array_equal(model.alpha0_trace_, local.alpha0_trace_)
    assert len(np.unique(local.alpha0_trace_)) > KW["n_chains"]  # alpha0 moved every sweep
    assert model.alpha_ == local.alpha_ and isinstance(model.alpha_, float)
    np.testing.assert_array_equal(model.p0_len_, local.p0_len_)
    # it scores as the local one: document 0's first tokens as a two-word collocation, then each
    terms = data.term_ids[:2]
    np.testing.assert_array_equal(model.p_c_d(terms, [0, 2]), local.p_c_d(terms, [0, 2]))
    np.testing.assert_array_equal(model.p_w_d(terms), local.p_w_d(terms))
    # what the driver keeps besides the model's arrays (read from its file): every chain's
    # alpha0, P0's table, the sample iterations and the workers' chain ranges (no boundaries,
    # restaurants or split flags); the checkpoint's parts (boundaries, rng streams)
    h, parts, state = chains_on_workers(model, ex, local, data, path)
    assert not any(getattr(model, n, None) is not None
                   for n in ("b_", "dt_topic_", "dt_nnz_", "_tables", "_split", "_corpus", "_shard_doc"))
    assert set(state) == {"b", "rng"} and state["b"].shape == (1, data.n_tokens)
    np.testing.assert_array_equal(state["b"][0], local.b_[1])
    with pytest.raises(ValueError, match="stayed on Ray workers"):
        TCM(**KW).fit(data, split=split, checkpoint=path)
    # a damaged part: one line naming it, before any sweep (resuming: the long test below)
    victim, other = parts / h["state_parts"][1][1], parts / h["state_parts"][0][1]
    good = victim.read_bytes()
    victim.write_bytes(other.read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not a part of chain 1 ") as e:
        TCM(executor=executor(), **KW).fit(data, split=split, checkpoint=path)
    assert "\n" not in str(e.value)
    victim.write_bytes(good[:len(good) // 2])  # cut short
    with pytest.raises(ValueError, match=rf"^{victim}: ") as e:
        TCM(executor=executor(), **KW).fit(data, split=split, checkpoint=path)
    assert "\n" not in str(e.value)
    # the manifest's alpha0 trace, from which the chains' alpha0 resume: a sweep short
    victim.write_bytes(good)
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    ckpt.write_model_file(path, dict(f.header, alpha0_trace=f.header["alpha0_trace"][:-1]), dict(f.arrays),
                          kind=ckpt.CHECKPOINT_FORMAT)
    with pytest.raises(ValueError, match=rf"^{path}: damaged checkpoint \(alpha0_trace of shape \(11, 3\)"):
        TCM(executor=executor(), **KW).fit(data, split=split, checkpoint=path)


def test_a_state_part_with_a_topic_out_of_range_or_a_collocation_past_a_split_or_max_len_is_refused(tmp_path):
    from models.common.kernels.rng import make_rng_states
    from models.tcm.ray_state import TcmChainWorker
    from models.tcm.split import split_flags

    data, split = corpus()
    flags = split_flags(data, split)  # as the driver hands them on: documents' ends added
    for name, a in (("doc_ptr", data.doc_ptr), ("term_ids", data.term_ids), ("split", flags)):
        a.tofile(tmp_path / name)

    def src(name, a):
        return ("file", str(tmp_path / name), 0, a.dtype.str, len(a))

    lay = dict(c0=1, c1=2, D=data.n_docs, V=data.n_terms,  # a worker of chain 1 of two, without Ray
               doc_src=src("doc_ptr", data.doc_ptr), tok_src=src("term_ids", data.term_ids))
    params = TCM(**dict(KW, n_chains=2)).get_params()
    del params["executor"]
    worker = TcmChainWorker(lay, 2, TCM, params, src("split", flags))
    worker.build()
    worker.start_chains(make_rng_states(KW["seed"], 2, KW["n_shards"] + 1)[1:], np.full(1, 0.5))
    part = worker.state(0)
    worker.check_state("state.chain1.npz", 0, part)
    at = int(np.flatnonzero(flags)[0])  # a split: a collocation ends there
    # max_len + 1 tokens with no split among them: continued, one collocation longer than max_len
    p = next(p for p in range(data.n_tokens) if not flags[p:p + KW["max_len"] + 1].any())
    cases = ((0, KW["n_topics"], r"b gives a topic 5, outside \[-1, 5\)"),
             (at, -1, "b continues a collocation across a split or a document's end"),
             (slice(p, p + KW["max_len"] + 1), -1, "b holds a collocation longer than max_len = 4"))
    for where, value, why in cases:
        bad = {k: v.copy() for k, v in part.items()}
        bad["b"][0, where] = value
        with pytest.raises(ValueError, match=rf"^state.chain1.npz: damaged state part \({why}\)"):
            worker.check_state("state.chain1.npz", 0, bad)
    for bad in (dict(part, b=part["b"][:, 1:]), dict(part, rng=part["rng"][:, 1:]),
                dict(part, b=part["b"].astype(np.int64))):
        with pytest.raises(ValueError, match=r"^state.chain1.npz: damaged state part \(shapes or arrays"):
            worker.check_state("state.chain1.npz", 0, bad)


@pytest.mark.long
def test_tcm_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    data, split = corpus()
    resumed, full = lost_worker_then_resume(TCM, KW, data, tmp_path / "run.ckpt.npz", tmp_path, executor,
                                            unit="chain", split=split)
    np.testing.assert_array_equal(resumed.alpha0_trace_, full.alpha0_trace_)


# document shards (n_shards > 1): three shards on two workers, worker 0 owns shards 0-1
SHARDED = dict(KW, n_chains=2, n_shards=3)


def two_vocabularies():
    """Documents of terms 0-59, then of terms 40-99 (split flags inside them): the last shard's
    worker is sent only the collocation types of its 60 terms."""
    from models.common.corpus import make_corpus

    a, b = (synthetic_corpus(60, 60, 30, seed=s, n_latent=5) for s in (3, 4))
    data = make_corpus(np.concatenate([a.doc_ptr, b.doc_ptr[1:] + a.n_tokens]),
                       np.concatenate([a.term_ids, b.term_ids + 40]), n_terms=100, fingerprint="two")
    return data, (np.arange(data.n_tokens) % 7 == 3).astype(np.uint8)


@pytest.mark.long  # a sharded Ray training beside the local one: most of a minute (make test-long)
def test_sharded_tcm_on_workers_is_the_local_model_and_the_driver_holds_totals_only(ray_cluster, tmp_path):  # noqa: F811
    from models.tcm import merge_kernels as MK
    from models.tcm.build_kernels import build_tables
    from models.tcm.split import split_flags

    (data, split), path = two_vocabularies(), tmp_path / "run.ckpt.npz"
    local = TCM(**SHARDED).fit(data, split=split)
    ex = executor()
    model = TCM(executor=ex, **SHARDED).fit(data, split=split, checkpoint=path)
    same_model(model, local, tmp_path)
    np.testing.assert_array_equal(model.alpha0_trace_, local.alpha0_trace_)
    assert len(np.unique(local.alpha0_trace_)) > SHARDED["n_chains"]
    C, K, V = model.n_chains, model.n_topics, data.n_terms
    runner = ex.last_runner
    # the driver: every chain's totals and entry histogram, nothing per token or type
    held = [a for v in runner.__dict__.values() for a in (v if isinstance(v, list) else [v])
            for a in (a if isinstance(a, tuple) else [a]) if isinstance(a, np.ndarray)]
    assert held and max(a.size for a in held) <= max(C * 4, K, SHARDED["max_len"] * 100)
    assert not any(getattr(model, n, None) is not None
                   for n in ("b_", "dt_topic_", "dt_nnz_", "_tables", "_split", "_corpus", "rng_"))
    np.testing.assert_array_equal(runner.n_k, [local._tables[c].n_k for c in range(C)])
    # the owners' types of the last kept sample: the local restaurants (the rebuild from every
    # boundary), each type with its first occurrence and entries, cut by route key
    parts = path.with_name(path.name + ".parts")
    last = {s["chain"]: s for s in ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header["samples"]
            if s["iter"] == 12}
    for c in range(C):
        want = MK.compact(build_tables(data.term_ids, local.b_[c], K), data.term_ids, 0)
        owned = [ckpt.read_model_file(parts / name, kind=ckpt.CHECKPOINT_FORMAT).arrays for _, name, _ in last[c]["owned"]]
        assert [p for p, _, _ in last[c]["owned"]] == [0, 1] and all(len(o["ty_pos"]) for o in owned)
        pos = np.concatenate([o["ty_pos"] for o in owned])
        order = np.argsort(pos)
        np.testing.assert_array_equal(pos[order], want.pos)
        np.testing.assert_array_equal(np.concatenate([o["ty_len"] for o in owned])[order], np.diff(want.text_ptr))
        for key, got in (("en_topic", want.en_topic), ("en_count", want.en_count)):
            rows = [r for o in owned for r in np.split(o[key], o["en_ptr"][1:-1])]
            np.testing.assert_array_equal(np.concatenate([rows[i] for i in order]), got)
    # what a worker is sent: the types whose route key (term, or first two terms) its documents
    # hold, fewer than all
    t1 = data.doc_ptr[local._shard_doc[2]]
    keys = MK.route_keys(data.term_ids[t1:], split_flags(data, split)[t1:], V)
    whole = MK.compact(build_tables(data.term_ids, local.b_[0], K), data.term_ids, 0)
    mine = MK.with_keys(whole, keys, V)
    assert 0 < len(mine.pos) < len(whole.pos)
    stats = model.executor_stats_
    assert stats["workers"] == 2 and stats["sync_bytes"] == 0 and stats["counts_bytes_per_sweep"] > 0
    assert stats["slice_bytes_per_sweep"] == stats["counts_bytes_per_sweep"] + stats["changed_bytes_per_sweep"]
    assert 0 < stats["cross_worker_bytes_per_sweep"] < stats["slice_bytes_per_sweep"]
    # the checkpoint: every shard's boundaries and streams by its worker, alpha0's streams in the manifest
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    assert [p[:2] for p in f.header["state_parts"]] == [[s, f"state.shard{s}.sweep12.npz"] for s in range(3)]
    np.testing.assert_array_equal(f.arrays["rng"], local.rng_[:, 3])
    part = ckpt.read_model_file(parts / "state.shard1.sweep12.npz", kind=ckpt.CHECKPOINT_FORMAT).arrays
    np.testing.assert_array_equal(part["rng"], local.rng_[:, 1])
    a, b = data.doc_ptr[local._shard_doc[1:3]]
    np.testing.assert_array_equal(part["b"], local.b_[:, a:b])
    assert model.checkpoint_writes_[:, 0].tolist() == [3, 6, 9, 12]
    written = [parts / f"state.shard{s}.sweep12.npz" for s in range(3)] + [
        parts / f"chain{c}.sweep{i}.{p}.npz" for c in range(C) for i in (10, 12)
        for p in ("words", "shard0", "shard1", "shard2", "owned0", "owned1")]
    assert model.checkpoint_writes_[-1, 1] == path.stat().st_size + sum(f.stat().st_size for f in written)
    # the manifest's alpha0 streams, and an owner's part of a kept sample: refused in one line
    victim = parts / last[1]["owned"][1][1]
    good = victim.read_bytes()
    victim.write_bytes((parts / last[0]["owned"][1][1]).read_bytes())
    with pytest.raises(ValueError, match=rf"^{victim}: not the part checkpoint {path} lists"):
        TCM(executor=executor(), **SHARDED).fit(data, split=split, checkpoint=path)
    victim.write_bytes(good)
    ckpt.write_model_file(path, f.header, dict(f.arrays, rng=f.arrays["rng"][:1]), kind=ckpt.CHECKPOINT_FORMAT)
    with pytest.raises(ValueError, match=rf"^{path}: damaged checkpoint \(rng, alpha0's streams"):
        TCM(executor=executor(), **SHARDED).fit(data, split=split, checkpoint=path)


def test_a_shard_state_part_with_a_topic_out_of_range_or_a_collocation_past_a_split_or_max_len_is_refused(tmp_path):
    from models.common.kernels.rng import make_rng_states
    from models.tcm.ray_shards import TcmShardWorker
    from models.tcm.split import split_flags

    data, split = corpus()
    flags = split_flags(data, split)
    for name, a in (("doc_ptr", data.doc_ptr), ("term_ids", data.term_ids), ("split", flags)):
        a.tofile(tmp_path / name)

    def src(name, a, lo, hi):
        return ("file", str(tmp_path / name), lo * a.itemsize, a.dtype.str, hi - lo)

    d0, d1 = 40, 120  # a worker of shards 1-2 of three, without Ray
    t0, t1 = int(data.doc_ptr[d0]), int(data.doc_ptr[d1])
    lay = dict(a=1, W=2, s0=1, S=3, d0=d0, d1=d1, t0=t0, D=data.n_docs, V=data.n_terms,
               shard_doc=np.array([0, 40, 80]), doc_src=src("doc_ptr", data.doc_ptr, d0, d1 + 1),
               tok_src=src("term_ids", data.term_ids, t0, t1))
    params = TCM(**SHARDED).get_params()
    del params["executor"]
    worker = TcmShardWorker(lay, 2, TCM, params, src("split", flags, t0, t1))
    keys = worker.build()
    assert len(keys) == 2 and set(np.concatenate(keys)) >= set(data.term_ids[t0:t1].tolist())
    worker.start(make_rng_states(KW["seed"], 2, 4)[:, 1:3])
    part = worker.state_part(2)
    worker.check_state("state.shard2.npz", 2, part)
    lo = int(data.doc_ptr[d0 + 40]) - t0
    local_flags = flags[t0 + lo:t1]
    at = int(np.flatnonzero(local_flags)[0])
    p = next(p for p in range(len(local_flags)) if not local_flags[p:p + KW["max_len"] + 1].any())
    cases = ((0, KW["n_topics"], r"b gives a topic 5, outside \[-1, 5\)"),
             (at, -1, "b continues a collocation across a split or a document's end"),
             (slice(p, p + KW["max_len"] + 1), -1, "b holds a collocation longer than max_len = 4"))
    for where, value, why in cases:
        bad = {k: v.copy() for k, v in part.items()}
        bad["b"][1, where] = value
        with pytest.raises(ValueError, match=rf"^state.shard2.npz: damaged state part \({why}\)"):
            worker.check_state("state.shard2.npz", 2, bad)
    for bad in (dict(part, b=part["b"][:, 1:]), dict(part, rng=part["rng"][:1])):
        with pytest.raises(ValueError, match=r"^state.shard2.npz: damaged state part \(shapes or arrays"):
            worker.check_state("state.shard2.npz", 2, bad)


@pytest.mark.long
def test_sharded_tcm_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    data, split = two_vocabularies()
    resumed, full = lost_worker_then_resume(TCM, SHARDED, data, tmp_path / "run.ckpt.npz", tmp_path, executor,
                                            split=split)
    np.testing.assert_array_equal(resumed.alpha0_trace_, full.alpha0_trace_)


@pytest.mark.long  # a sharded Ray training of TCM: half a minute (make test-long)
def test_sharded_tcm_on_one_worker_owns_every_shard_and_type(ray_cluster, tmp_path):  # noqa: F811
    from models.common.executors.ray import RayExecutor

    data, split = two_vocabularies()
    local = TCM(**SHARDED).fit(data, split=split)
    model = TCM(executor=RayExecutor(n_workers=1, state="workers"), **SHARDED).fit(data, split=split)
    same_model(model, local, tmp_path)
    assert model.executor_stats_["workers"] == 1 and model.executor_stats_["cross_worker_bytes_per_sweep"] == 0
