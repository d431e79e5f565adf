"""aviPAM data-parallel on Ray Train (models/avipam/distributed.py): two workers, each holding
half of every mini-batch, follow the ELBO trajectory of one process training on the same global
batches, to the float rounding of sums taken in another order (per worker, then across them);
the driver reports progress, writes the checkpoints and returns an ordinary model. A local Ray
cluster (2 CPUs) is started once for the module."""
import numpy as np
import pytest
import torch

from models.avipam.distributed import doc_parts, whole_batches
from models.avipam.foldin import REFINE_BATCH
from models.avipam.model import AVIPAM
from models.avipam.nets.draws import RowShare, normal, uniform
from models.avipam.nets.term_layer import TermLayer
from models.avipam.zero import PartitionedAdam
from models.common import checkpoint as ckpt
from models.common.corpus import synthetic_corpus
from models.common.variational import count_matrix
from tests.helpers import Killed

# Two chains with the M-step topics (the default) and theta dropout: every draw and every sum
# across documents (batch normalisation, gradients, expected counts) is exercised.
KW = dict(arch="4pam:3,8", hidden=16, epochs=3, batch_size=20, n_chains=2, theta_dropout=0.3, seed=3,
          refine_steps=0, doc_samples=0, log_lik_every=2, checkpoint_every=2)
# The stated agreement: the ELBO per token of every epoch and chain, relative.
ELBO_RTOL = 1e-5
# The biases feeding a batch normalisation without scale and shift have a gradient of zero
# whatever the data; Adam (m / sqrt(v)) moves them by the rounding noise of that zero in both
# runs, and the running means follow them. Nothing the model computes in training depends on them.
SHIFT_FREE = (".mu.bias", ".logvar.bias", ".running_mean")


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.train.torch")
    from models.common.executors.signals import init_ray, shutdown_ray

    init_ray(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield ray
    shutdown_ray()


def corpus():
    return synthetic_corpus(80, 60, 30, seed=1)


def assert_same_training(got, want, weights_atol=1e-5, topics_rtol=1e-4):
    np.testing.assert_allclose(got.log_lik_, want.log_lik_, rtol=ELBO_RTOL, atol=0)
    np.testing.assert_array_equal(got.dc_log_lik_iter_, want.dc_log_lik_iter_)
    np.testing.assert_allclose(got.dc_log_lik_, want.dc_log_lik_, rtol=1e-4)
    np.testing.assert_allclose(got.topic_word_, want.topic_word_, rtol=topics_rtol, atol=1e-9)
    mine, theirs = got.net_.state_dict(), want.net_.state_dict()
    assert mine.keys() == theirs.keys()
    for name, value in theirs.items():
        if value.is_floating_point() and not name.endswith(SHIFT_FREE):
            np.testing.assert_allclose(mine[name].numpy(), value.numpy(), rtol=1e-4, atol=weights_atol, err_msg=name)


def global_batches(data, kw):
    """The mini-batches of the local loop, epoch by epoch (its shuffle stream, seeded by ``seed``)."""
    order = torch.Generator().manual_seed(kw["seed"])
    n_batches = -(-data.n_docs // kw["batch_size"])
    for _ in range(kw["epochs"]):
        yield from np.array_split(torch.randperm(data.n_docs, generator=order).numpy(), n_batches)


def gradient_bytes(model, data, kw):
    """The bytes of the gradients' sums of a run: every step a term mask (int32) and the
    gradients, of which the first layers' rows of the batch's terms only."""
    width = sum(m.rows.shape[1] for m in model.net_.modules() if isinstance(m, TermLayer))
    grads = sum(p.numel() for p in model.net_.parameters() if p.requires_grad)
    total = 0
    for batch in global_batches(data, kw):
        terms = np.unique(np.concatenate([data.term_ids[data.doc_ptr[d]:data.doc_ptr[d + 1]] for d in batch]))
        total += 4 * (data.n_terms + grads - width * (data.n_terms - len(terms)))
    return total


def test_row_share_draws_the_batch_rows():
    """A worker holding rows [lo, lo + B) of a batch draws exactly those rows of the batch's draws."""
    full = torch.Generator().manual_seed(5)
    part = torch.Generator().manual_seed(5)
    want_u, want_n = uniform((7, 4), full, "cpu"), normal((7, 2, 3), full, "cpu", torch.float32)
    got_u = uniform((3, 4), RowShare(part, 7, 2), "cpu")
    got_n = normal((3, 2, 3), RowShare(part, 7, 2), "cpu", torch.float32)
    np.testing.assert_array_equal(got_u.numpy(), want_u[2:5].numpy())
    np.testing.assert_array_equal(got_n.numpy(), want_n[2:5].numpy())
    assert torch.equal(full.get_state(), part.get_state())  # the stream moves as one process's


def test_executor_and_workers_are_checked():
    data = corpus()
    with pytest.raises(ValueError, match="executor must be"):
        AVIPAM(**dict(KW, executor="spark")).fit(data)
    with pytest.raises(ValueError, match="n_workers must be"):
        AVIPAM(**dict(KW, executor="ray", n_workers=0)).fit(data)
    with pytest.raises(ValueError, match="adam_state must be one of"):
        AVIPAM(**dict(KW, executor="ray", adam_state="sharded")).fit(data)
    with pytest.raises(ValueError, match="splits Adam's state among Ray workers: train on Ray"):
        AVIPAM(**dict(KW, adam_state="partitioned")).fit(data)


def test_a_worker_error_reads_as_the_local_one():
    """Ray Train's failure (every rank's exception) becomes the worker's own one-line error; a
    ValueError wins over the collective errors it causes on the other ranks."""
    from models.avipam.distributed import _worker_error

    class Failed(Exception):
        def __init__(self, failures):
            super().__init__("Training failed due to worker errors:\nrank 0: ...")
            self.worker_failures = failures

    model = AVIPAM(**KW)
    err = _worker_error(model, Failed({0: RuntimeError("gloo: connection closed"),
                                       1: ValueError("bad input\nTraceback ...")}))
    assert type(err) is ValueError and str(err) == "avipam training on Ray worker 1: bad input"
    err = _worker_error(model, Failed({1: RuntimeError("the ELBO became [nan]"), 0: RuntimeError("the ELBO became [nan]")}))
    assert type(err) is RuntimeError and str(err) == "avipam training on Ray worker 0: the ELBO became [nan]"
    err = _worker_error(model, KeyError("controller"))
    assert type(err) is RuntimeError and str(err) == "avipam training on Ray: 'controller'"


@pytest.mark.long  # Ray Train's start and two torch workers: a minute or more (make test-long)
def test_two_workers_follow_the_local_trajectory(ray_cluster, tmp_path):
    data = corpus()
    want = AVIPAM(**KW).fit(data)
    seen = []
    path = tmp_path / "avi.ckpt"
    got = AVIPAM(**dict(KW, executor="ray", n_workers=2)).fit(
        data, callback=lambda m, e, n: seen.append((e, n, m.log_lik_.shape[0])), checkpoint=path)
    assert seen == [(1, 3, 1), (2, 3, 2), (3, 3, 3)]  # progress on the driver, every epoch
    assert_same_training(got, want)
    assert got.doc_mix_.shape == want.doc_mix_.shape
    # rank 0's all-reduces: the gradients once a step, whole; the epoch's sums once an epoch
    st = got.executor_stats_
    assert st["epochs"] == 3 and st["workers"] == 2 and not hasattr(want, "executor_stats_")
    assert sum(st["worker_tokens"]) == data.n_tokens and min(st["worker_tokens"]) > 0
    # 80 documents, less than a batch of the posteriors' each: the driver inferred them, as one process
    assert st["posteriors"] == dict(workers=0, driver=80)
    np.testing.assert_array_equal(got.doc_mix_, got._encode(count_matrix(data), 2))
    steps = 3 * 4  # 80 documents in batches of 20
    grads = sum(p.numel() for p in got.net_.parameters() if p.requires_grad)
    traffic = st["collectives"]
    # a step: the batch's term mask, then the gradients with the first layers' rows of its terms only
    assert traffic["gradients"]["calls"] == 2 * steps and traffic["parameters"]["calls"] == 0
    assert traffic["gradients"]["bytes"] == gradient_bytes(got, data, KW)
    assert traffic["batch norm"]["calls"] > 0 and traffic["epoch sums"]["calls"] == 3 * 2
    assert st["adam_state_bytes"] == 2 * 4 * grads + 4 * sum(p.requires_grad for p in got.net_.parameters())
    # the driver wrote the checkpoints (epochs 2 and 3), atomically
    assert got.checkpoint_writes_[:, 0].tolist() == [2, 3]
    assert ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).header["iteration"] == 3
    assert not path.with_name(path.name + ".tmp").exists()
    # an ordinary model file, without where it was trained
    got.save(tmp_path / "avi.npz")
    back = AVIPAM.load(tmp_path / "avi.npz")
    assert "executor" not in ckpt.read_model_file(tmp_path / "avi.npz").header["params"]
    assert back.executor == "local" and back.n_workers is None
    np.testing.assert_array_equal(back.doc_mix_, got.doc_mix_)
    np.testing.assert_array_equal(back.log_lik_, got.log_lik_)


@pytest.mark.long  # two Ray Train workers trained twice: about a minute (make test-long)
def test_partitioned_adam_state_trains_the_replicated_model_bit_for_bit(ray_cluster, tmp_path):
    """adam_state="partitioned": each worker keeps Adam's moments of its range of the parameters;
    the same gradients' sums and the same elementwise update give the replicated run's model,
    and the checkpoint holds one process's layout (rank 0 gathers the ranges)."""
    data = corpus()
    kw = dict(KW, executor="ray", n_workers=2)
    runs = {}
    for state in ("replicated", "partitioned"):
        path = tmp_path / f"{state}.ckpt"
        runs[state] = (AVIPAM(**kw, adam_state=state).fit(data, checkpoint=path),
                       ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT).arrays)
    (whole, whole_ckpt), (part, part_ckpt) = runs["replicated"], runs["partitioned"]
    np.testing.assert_array_equal(part.log_lik_, whole.log_lik_)
    for name, value in whole.net_.state_dict().items():
        np.testing.assert_array_equal(part.net_.state_dict()[name].numpy(), value.numpy(), err_msg=name)
    assert part_ckpt.keys() == whole_ckpt.keys()
    for key in whole_ckpt:
        np.testing.assert_array_equal(part_ckpt[key], whole_ckpt[key], err_msg=key)
    st = part.executor_stats_
    assert st["collectives"]["gradients"]["bytes"] == whole.executor_stats_["collectives"]["gradients"]["bytes"]
    chunk = PartitionedAdam(torch.optim.Adam(part.net_.parameters()), 0, 2, None).chunk
    trained = sum(p.numel() for p in part.net_.parameters() if p.requires_grad)
    assert trained / 2 <= chunk < trained and st["adam_state_bytes"] == 2 * 4 * chunk
    steps = 3 * 4
    # gloo: one broadcast of each worker's range a step, after the gradients' all-reduce
    assert st["collectives"]["parameters"]["calls"] == 2 * steps
    assert st["collectives"]["parameters"]["bytes"] == steps * 4 * 2 * chunk
    assert "adam_state" not in ckpt.read_model_file(tmp_path / "partitioned.ckpt",
                                                    kind=ckpt.CHECKPOINT_FORMAT).header["params"]


def test_every_worker_gets_its_documents_only(ray_cluster):
    """Contiguous document ranges of near-equal tokens, one object-store copy each, that cover
    the collection: no worker receives the corpus."""
    data = synthetic_corpus(50, 40, 20, seed=2)
    for W in (1, 2, 3, 50):
        parts = doc_parts(data, W)
        bounds = [p[0] for p in parts]
        assert bounds[0][0] == 0 and bounds[-1][1] == data.n_docs
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(bounds, bounds[1:] + [(data.n_docs, None)]))
        tokens = []
        for (d0, d1), doc_ref, tok_ref in parts:
            ptr, ids = ray_cluster.get(doc_ref), ray_cluster.get(tok_ref)
            np.testing.assert_array_equal(ptr, data.doc_ptr[d0:d1 + 1])
            np.testing.assert_array_equal(ids, data.term_ids[ptr[0]:ptr[-1]])
            tokens.append(len(ids))
        longest = int(np.diff(data.doc_ptr).max())
        assert max(tokens) - min(tokens) <= 2 * longest or W == 50


@pytest.mark.long
def test_a_worker_without_documents_of_a_step_still_takes_it(ray_cluster):
    """Batches of 2-3 documents over two workers' halves: a quarter of the steps or more find
    one worker without a document; it still joins every sum (batch normalisation, gradients)
    and the run follows the local one."""
    data = corpus()
    kw = dict(KW, batch_size=3, epochs=2, log_lik_every=1)
    want = AVIPAM(**kw).fit(data)
    got = AVIPAM(**dict(kw, executor="ray", n_workers=2)).fit(data)
    # the steps where a worker had no document
    first = doc_parts(data, 2)[0][0][1]
    assert sum(bool((b < first).all() or (b >= first).all()) for b in global_batches(data, kw)) > 0
    # small batches: their terms are a part of the vocabulary, the first layers' other rows stay home
    sent = got.executor_stats_["collectives"]["gradients"]["bytes"]
    assert sent == gradient_bytes(got, data, kw)
    dense = 4 * sum(p.numel() for p in got.net_.parameters() if p.requires_grad) * len(list(global_batches(data, kw)))
    assert sent < 0.8 * dense
    # 54 steps, 4.5 times the other runs': Adam's normalised steps carry the sums' rounding
    # further into the weights and the topics (a few entries 2e-4 apart with some CPUs' kernels;
    # the ELBO trace and the completion as stated)
    assert_same_training(got, want, weights_atol=1e-3, topics_rtol=1e-3)


@pytest.mark.long  # Ray workers inferring every batch: about 40 s (make test-long)
def test_the_workers_infer_the_posteriors_of_their_whole_batches(ray_cluster):
    """Two workers' ranges of whole batches of the posteriors (REFINE_BATCH documents, the last
    one shorter): each worker infers its documents' mixtures, which are the one-process
    inference's from the trained network, bit for bit; the driver infers none."""
    data = synthetic_corpus(2 * REFINE_BATCH + 150, 40, 12, seed=4)
    parts = doc_parts(data, 2)
    assert [p[0] for p in parts] in ([(0, REFINE_BATCH), (REFINE_BATCH, data.n_docs)],
                                     [(0, 2 * REFINE_BATCH), (2 * REFINE_BATCH, data.n_docs)])
    kw = dict(KW, epochs=2, batch_size=400, log_lik_every=2)
    got = AVIPAM(**dict(kw, executor="ray", n_workers=2)).fit(data)
    assert got.executor_stats_["posteriors"] == dict(workers=data.n_docs, driver=0)
    np.testing.assert_array_equal(got.doc_mix_, got._encode(count_matrix(data), 1))
    # a range that ends inside a batch leaves that batch to the driver
    assert whole_batches((0, REFINE_BATCH + 7), data.n_docs) == (0, REFINE_BATCH)
    assert whole_batches((REFINE_BATCH + 7, data.n_docs), data.n_docs) == (2 * REFINE_BATCH, data.n_docs)
    assert whole_batches((3, 9), data.n_docs) == (0, 0)


def test_too_many_workers_for_a_mini_batch(ray_cluster):
    with pytest.raises(ValueError, match="3 Ray workers for mini-batches of 2 documents"):
        AVIPAM(**dict(KW, batch_size=2, executor="ray", n_workers=3)).fit(corpus())


@pytest.mark.slow
def test_ray_resumes_a_local_checkpoint(ray_cluster, tmp_path):
    """A run killed after epoch 2 resumes on Ray (the driver validates the checkpoint and hands
    its state to the workers) and ends as the uninterrupted local run, within the tolerance."""
    data = corpus()
    kw = dict(KW, epochs=4, checkpoint_every=1)
    want = AVIPAM(**kw).fit(data)
    path = tmp_path / "avi.ckpt"

    def kill(model, epoch, epochs):
        if epoch == 2:
            raise Killed

    with pytest.raises(Killed):
        AVIPAM(**kw).fit(data, callback=kill, checkpoint=path)
    got = AVIPAM(**dict(kw, executor="ray", n_workers=2)).fit(data, checkpoint=path)
    np.testing.assert_array_equal(got.log_lik_[:2], want.log_lik_[:2])
    assert_same_training(got, want)
    assert got.checkpoint_writes_[:, 0].tolist() == [3, 4]


@pytest.mark.long
def test_a_stop_on_ray_waits_for_the_next_checkpointed_epoch(ray_cluster, tmp_path):
    """The workers run on while the driver takes their epochs: a stop asked for after epoch 1
    ends the fit at epoch 2, the next one whose checkpoint the workers send, and the rerun
    ends as the uninterrupted run."""
    from tests.helpers import stopped_at

    data = corpus()
    kw = dict(KW, epochs=4, checkpoint_every=2, executor="ray", n_workers=2)
    want = AVIPAM(**kw).fit(data)
    path = tmp_path / "avi.ckpt"
    stopped = stopped_at(lambda stop: AVIPAM(**kw).fit(data, callback=stop, checkpoint=path), path, 1, written=2)
    assert str(stopped).startswith("training stopped after epoch 2 of 4;")
    got = AVIPAM(**kw).fit(data, checkpoint=path)
    assert_same_training(got, want)
