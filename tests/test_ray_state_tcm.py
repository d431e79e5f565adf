"""TCM on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state_glda.py checks for gLDA): whole chains per worker, the driver holds no
token- or document-sized array, the model is the local one array for array (alpha0 resampled
after every sweep, splits inside documents), a checkpoint is a manifest of the workers' parts
that resumes bit-identically, a damaged part is refused in one line, and a lost worker names
itself and the checkpoint."""
import numpy as np
import pytest

from models import TCM, synthetic_corpus
from models.common import checkpoint as ckpt
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import chains_on_workers, lost_worker_then_resume, same_model

# three chains on two workers: worker 0 owns chains 0-1, worker 1 chain 2
KW = dict(n_topics=5, n_chains=3, n_iter=12, burn_in=6, sample_every=2, seed=3, log_lik_every=2,
          checkpoint_every=3, n_shards=3, max_len=4, resample_alpha0=True)


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
