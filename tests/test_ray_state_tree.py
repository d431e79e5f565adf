"""tree-LDA on Ray with the chain state on the workers (``RayExecutor(state="workers")``, as
tests/test_ray_state.py checks for LDA): a worker's sweep order is the local one's, its
documents' log-likelihood terms continue the driver's float, the driver holds no token- or
document-sized array, the model is the local one array for array, a lost worker names itself
and the checkpoint, whose parts resume bit-identically, and a damaged part is refused in one
line."""
import numpy as np
import pytest

from models import synthetic_corpus
from models.common import checkpoint as ckpt
from models.common.gibbs import shard_docs
from models.tree_lda import state as S_
from models.tree_lda.model import TreeLDA
from models.tree_lda.shards import sweep_order, tree_shards
from models.tree_lda.tree import build_tree
from tests.test_ray import ray_cluster  # noqa: F401  (the module's Ray cluster)
from tests.test_ray_state import driver_arrays, lost_worker_then_resume, same_model

SYNSETS = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7], [10, 11, 12, 13], [20, 21], [30, 31, 32]]
KW = dict(n_topics=5, n_shards=3, n_chains=2, n_iter=12, burn_in=6, sample_every=2, seed=3,
          log_lik_every=2, checkpoint_every=3)


def executor():
    from models.common.executors.ray import RayExecutor

    return RayExecutor(n_workers=2, state="workers")


def test_a_workers_sweep_order_is_its_shards_part_of_the_local_one():
    data = synthetic_corpus(60, 40, 20, seed=5, n_latent=3)
    tree = build_tree(SYNSETS, data.n_terms, 0.01, 100.0, False)
    S = 4
    local = tree_shards(data, tree, S)
    shard_doc = shard_docs(data, S)
    s0, s1 = 1, 3  # a worker's shards
    d0, d1 = shard_doc[s0], shard_doc[s1]
    t0, t1 = data.doc_ptr[d0], data.doc_ptr[d1]
    order, term_ids, run_ptr, run_doc, block_ptr = sweep_order(
        data.doc_ptr[d0:d1 + 1] - t0, data.term_ids[t0:t1], local.word_group, shard_doc[s0:s1 + 1] - d0, S)
    r0, r1 = local.block_ptr[s0, 0], local.block_ptr[s1 - 1, S]
    np.testing.assert_array_equal(order + t0, local.order[t0:t1])
    np.testing.assert_array_equal(term_ids, local.term_ids[t0:t1])
    np.testing.assert_array_equal(run_ptr, local.run_ptr[r0:r1 + 1] - t0)
    np.testing.assert_array_equal(run_doc, local.run_doc[r0:r1] - d0)
    np.testing.assert_array_equal(block_ptr, local.block_ptr[s0:s1] - r0)


def test_documents_log_lik_terms_continue_the_trees_float():
    data = synthetic_corpus(50, 40, 20, seed=2, n_latent=3)
    model = TreeLDA(**dict(KW, n_iter=2, burn_in=1, sample_every=1, n_shards=1)).fit(data, synsets=SYNSETS)
    t, c, cut = model.tree_, 1, 23
    whole = S_.log_lik(t.parent, t.beta, t.beta_sum, model.n_e_[c], model.n_i_[c], model.n_dk_[c],
                       data.doc_ptr, model.alpha_[c])
    total = S_.log_lik_nodes(t.parent, t.beta, t.beta_sum, model.n_e_[c], model.n_i_[c])
    for a, b in ((0, cut), (cut, data.n_docs)):  # two workers' documents in turn
        total = S_.log_lik_docs(total, model.n_dk_[c, a:b], data.doc_ptr[a:b + 1] - data.doc_ptr[a],
                                model.alpha_[c])
    assert total == whole
    assert model.log_lik_[-1, c] == whole / data.n_tokens


def _worker(tmp_path, data, model):
    """A worker of one shard, all of ``data``'s documents, started at random (no Ray)."""
    from models.common.kernels.rng import make_rng_states
    from models.tree_lda.ray_state import TreeShardHook, TreeShardWorker

    data.doc_ptr.tofile(tmp_path / "doc_ptr")
    data.term_ids.tofile(tmp_path / "term_ids")
    D, hook = data.n_docs, TreeShardHook()
    lay = dict(s0=0, S=1, d0=0, d1=D, D=D, V=data.n_terms, shard_doc=np.array([0, D]),  # one worker, one shard
               doc_src=("file", str(tmp_path / "doc_ptr"), 0, data.doc_ptr.dtype.str, D + 1),
               tok_src=("file", str(tmp_path / "term_ids"), 0, data.term_ids.dtype.str, data.n_tokens))
    worker = TreeShardWorker(lay, 1, KW["n_topics"], *hook.worker_args(model, data))
    worker.build(*hook.layout(model, data, [worker.corpus_stats()]))
    rng = make_rng_states(0, 1, 1)
    worker.init_random(rng[:, 0], rng, hook.worker_prior(model), D)
    return worker, hook


def _one_chain_model(data):
    model = TreeLDA(**dict(KW, n_chains=1, n_shards=1))
    model.tree_ = build_tree(SYNSETS, data.n_terms, 0.01, 100.0, False)
    model.alpha_ = np.full((1, KW["n_topics"]), 10.0)
    return model


def test_a_state_part_with_a_token_off_its_words_paths_or_topics_is_refused(tmp_path):
    data = synthetic_corpus(30, 40, 20, seed=5, n_latent=3)
    model = _one_chain_model(data)
    worker, _ = _worker(tmp_path, data, model)
    part = worker.state_part(0)
    # the paths as ranks among their words' paths, 2 bytes a token as the topics
    assert set(part) == {"z", "zp_rank", "rng"} and part["z"].dtype == part["zp_rank"].dtype == np.uint16
    ptr = model.tree_.word_path_ptr
    np.testing.assert_array_equal(part["zp_rank"][0] + ptr[data.term_ids], worker.doc_order(0, "zp"))
    ids = worker.path_ids("state.shard0.npz", 0, part)
    np.testing.assert_array_equal(ids["zp"][0], worker.doc_order(0, "zp"))
    worker.check_state("state.shard0.npz", 0, ids)
    t = int(np.flatnonzero(np.diff(ptr)[data.term_ids] == 1)[0])  # a token of a word with one path
    bad = dict(part, zp_rank=part["zp_rank"].copy())
    bad["zp_rank"][0, t] = 1
    with pytest.raises(ValueError, match=r"^state.shard0.npz: damaged state part \(a path rank beyond its "
                                         r"word's paths\); delete the checkpoint to start afresh$"):
        worker.path_ids("state.shard0.npz", 0, bad)
    for wrong in (dict(part, zp_rank=part["zp_rank"].astype(np.int32)), dict(part, zp=ids["zp"])):
        with pytest.raises(ValueError, match=r"^state.shard0.npz: damaged state part \(shapes or arrays"):
            worker.path_ids("state.shard0.npz", 0, wrong)
    # a part of path ids (as written before): checked as such
    for key, value, why in (("zp", (ptr[data.term_ids[t]] + 1) % ptr[-1], "a token on a path not of its word"),
                            ("z", -1, "a token without a topic")):
        bad = {k: v.astype(np.int64) for k, v in ids.items()}
        bad[key][0, t] = value
        with pytest.raises(ValueError, match=rf"^state.shard0.npz: damaged state part \({why}\)"):
            worker.check_state("state.shard0.npz", 0, bad)


def test_state_parts_of_path_ranks_and_of_path_ids_resume_a_worker_alike(tmp_path):
    """A worker resumed from its state part holds the topics and paths it wrote, whether the
    part holds path ranks (uint16) or the path ids written before (uint16 here: the tree's
    paths fit)."""
    from models.common.kept import digest

    data = synthetic_corpus(30, 40, 20, seed=5, n_latent=3)
    model = _one_chain_model(data)
    worker, hook = _worker(tmp_path, data, model)
    base = dict(model="TreeLDA", fingerprint=data.fingerprint, corpus_hash="h")
    (tmp_path / "parts").mkdir()
    listed = worker.write_state(tmp_path / "parts", base, 3)
    part = tmp_path / "parts" / listed[0][1]
    f = ckpt.read_model_file(part, kind=ckpt.CHECKPOINT_FORMAT)
    assert "zp_rank" in f.arrays
    z, zp = worker.doc_order(0, "z"), worker.doc_order(0, "zp")
    ids = dict(z=f.arrays["z"], zp=zp[None].astype(np.uint16), rng=f.arrays["rng"])
    header = {k: f.header[k] for k in (*base, "part", "shard", "sweep")}
    for arrays in (f.arrays, ids):
        ckpt.write_model_file(part, header, arrays, kind=ckpt.CHECKPOINT_FORMAT)
        again, _ = _worker(tmp_path, data, model)
        again.resume(tmp_path / "parts", tmp_path / "m.ckpt", base, [[0, part.name, digest(arrays)]], [],
                     hook.worker_prior(model), data.n_docs)
        np.testing.assert_array_equal(again.doc_order(0, "z"), z)
        np.testing.assert_array_equal(again.doc_order(0, "zp"), zp)


@pytest.mark.long
def test_tree_driver_holds_no_token_or_document_array_and_model_is_local(ray_cluster, tmp_path):  # noqa: F811
    data = synthetic_corpus(400, 100, 60, seed=3, n_latent=5)  # tokens >> chains x nodes x K
    local = TreeLDA(**KW).fit(data, synsets=SYNSETS)
    ex = executor()
    model = TreeLDA(executor=ex, **KW).fit(data, synsets=SYNSETS)
    same_model(model, local, tmp_path)
    terms = np.arange(data.n_terms)
    np.testing.assert_array_equal(model.p_w_d(terms), local.p_w_d(terms))
    for name in ("n_e_", "n_i_", "inv_", "alpha_"):  # the driver's tables (the streams live on the workers)
        np.testing.assert_array_equal(getattr(model, name), getattr(local, name), err_msg=name)
    held = driver_arrays(model, ex)
    C, M, K = KW["n_chains"], model.tree_.n_nodes, KW["n_topics"]
    assert data.n_tokens > 10 * C * M * K
    assert max(a.size for a in held) <= C * M * K
    assert not any(a.shape[-1:] == (data.n_docs,) or a.shape[:2] == (C, data.n_docs) for a in held)
    assert not any(hasattr(model, n) for n in ("z_", "zp_", "n_dk_", "_shards", "_corpus"))


@pytest.mark.long
def test_tree_lost_worker_then_checkpoint_parts_resume_bit_identically(ray_cluster, tmp_path):  # noqa: F811
    data, path = synthetic_corpus(120, 300, 30, seed=3, n_latent=5), tmp_path / "run.ckpt.npz"

    def check(header, parts):
        state = ckpt.read_model_file(parts / "state.shard0.sweep9.npz", kind=ckpt.CHECKPOINT_FORMAT).arrays
        assert set(state) == {"z", "zp_rank", "rng"} and state["z"].dtype == state["zp_rank"].dtype == np.uint16

    lost_worker_then_resume(TreeLDA, KW, data, path, tmp_path, executor, check=check, synsets=SYNSETS)
