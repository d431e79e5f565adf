"""aviPAM data-parallel on Ray Train (``executor="ray"``): the local trainer's mini-batches, each
split among the workers.

Every worker (a ``TorchTrainer`` worker: torch.distributed over gloo on CPUs, NCCL on GPUs)
holds one contiguous range of the documents (through Ray's object store: it gets its range,
not the corpus; no shared file system is needed) and runs the local epoch loop of
:meth:`models.common.variational.VariationalModel._fit` with a :class:`Share`: it shuffles the
documents with the same stream as one process and takes, of every mini-batch (sorted, as one
process reads it), the documents of its range, which are contiguous in it (none, some batches);
it draws the noise and dropout masks of the whole batch from the same stream, keeping its rows
(:class:`models.avipam.nets.draws.RowShare`). What crosses documents is summed over the workers:

- the loss is the sum of the worker's negative ELBOs over the global batch's size, and the
  gradients are summed (:func:`sum_gradients`: an all-reduce of the batch's term mask, then one
  of the gradients with the first layers' rows of those terms only), so every worker takes the
  one-process step;
  with ``adam_state="partitioned"`` each worker keeps Adam's state of one range of the
  parameters, updates that range alone and sends it to the others (:mod:`models.avipam.zero`);
- batch normalisation uses the batch's statistics over all workers (:class:`SharedBatchNorm`,
  gradients through the all-reduce included);
- the M-step topics' expected counts, and the epoch's ELBO, are summed before they are read.

So the ELBO trajectory is the local one up to the float rounding of sums taken in another order
(per worker, then across workers): tests/test_avipam_ray.py holds the two traces to a relative
1e-5 over a few epochs. Rank 0 alone records the completion trace and sends its progress and
checkpoint state (partitioned: Adam's ranges gathered from every worker) to the driver, which
reports it and writes checkpoints with the local code;
the driver resumes a checkpoint (validated there) by handing its state to every worker, and
builds the fitted model from the network rank 0 sends at the end and the documents' posteriors:
every worker infers those of the finishing's batches within its range (ranges of whole batches
wherever every worker can have one; the driver infers the others), each batch as one process
does (its rows, its number, the seed), so the driver never holds the corpus's count matrix.
"""
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid

import numpy as np
import torch
from torch import nn

from ..common.corpus import Corpus, read_piece
from ..common.heldout import training_sample
from ..common.stopping import StopTraining, TrainingStopped
from ..common.variational import count_matrix
from .executor import ray_target
from .foldin import REFINE_BATCH, normalise_chains
from .nets.draws import RowShare
from .nets.term_layer import TermLayer
from .zero import PartitionedAdam

log = logging.getLogger(__name__)


# What this worker's collectives carried, by purpose: calls, bytes and seconds (waiting for the
# other workers included). Rank 0 reports its running totals to the driver after every epoch.
# "parameters": the ranges exchanged every step with adam_state="partitioned".
PURPOSES = ("gradients", "parameters", "batch norm", "epoch sums")
_traffic = {}


def _reset_traffic():
    _traffic.clear()
    _traffic.update({p: [0, 0, 0.0] for p in PURPOSES})


def _count(purpose, call, n_bytes):
    """Run the collective ``call`` and tally it under ``purpose``."""
    t0 = time.perf_counter()
    call()
    tally = _traffic[purpose]
    tally[0] += 1
    tally[1] += n_bytes
    tally[2] += time.perf_counter() - t0


def _all_reduce(t, purpose):
    import torch.distributed as dist

    _count(purpose, lambda: dist.all_reduce(t), t.numel() * t.element_size())


def _sum(tensors, purpose):
    """Sum ``tensors`` over the workers: one all-reduce, the results as new tensors."""
    flat = torch.cat([t.reshape(-1) for t in tensors])
    _all_reduce(flat, purpose)
    return [v.view_as(t) for v, t in zip(flat.split([t.numel() for t in tensors]), tensors)]


def sum_gradients(net, params):
    """Sum the gradients of ``params`` over the workers, in place of every ``p.grad``: one
    all-reduce of them all, in which an encoder's first layer (:class:`TermLayer`) sends only
    the rows of the global batch's terms, the rows that any worker's documents touched (found by
    an all-reduce of a term mask first): its other rows are zero on every worker."""
    layers = {}
    for m in net.modules():
        if isinstance(m, TermLayer) and m.summed_rows() is not None:
            layers[id(m.rows)] = m
    rows = None
    if layers:
        first = next(iter(layers.values()))
        mask = torch.zeros(first.rows.shape[0], dtype=torch.int32, device=first.rows.device)
        for m in layers.values():
            mask[m.summed_rows()] = 1
        _all_reduce(mask, "gradients")
        rows = mask.nonzero().squeeze(1)
    summed = _sum([p.grad[rows] if id(p) in layers else p.grad for p in params], "gradients")
    for p, v in zip(params, summed):
        if id(p) in layers:
            layers[id(p)].set_grad_rows(rows, v)
        else:  # a new tensor: the step reads the sum
            p.grad = v


class _AllSum(torch.autograd.Function):
    """The sum over the workers of a tensor; its gradient is the sum of the workers' gradients."""

    @staticmethod
    def forward(ctx, x):
        out = x.clone()
        _all_reduce(out, "batch norm")
        return out

    @staticmethod
    def backward(ctx, grad):
        out = grad.contiguous().clone()
        _all_reduce(out, "batch norm")
        return out


class SharedBatchNorm(nn.BatchNorm1d):
    """Batch normalisation over the documents of the global batch, whichever worker holds them:
    the mean and the variance (about the mean, in a second pass, as one process takes it) are
    sums over all workers; running statistics and evaluation as :class:`torch.nn.BatchNorm1d`."""

    def forward(self, x):
        if not self.training:
            return super().forward(x)
        s = _AllSum.apply(torch.cat([x.sum(0), x.new_full((1,), x.shape[0])]))
        n = s[-1].detach()
        mean = s[:-1] / n
        var = _AllSum.apply(((x - mean) ** 2).sum(0)) / n
        with torch.no_grad():
            m = self.momentum
            self.running_mean.mul_(1 - m).add_(m * mean)
            self.running_var.mul_(1 - m).add_(m * var * n / (n - 1))
            self.num_batches_tracked.add_(1)
        return (x - mean) / torch.sqrt(var + self.eps)


class Share:
    """One worker's part of data-parallel training (see the module docstring), as
    :meth:`models.common.variational.VariationalModel._fit` asks of it.

    Parameters
    ----------
    rank, world : int
    docs : (int, int)
        This worker's documents [d0, d1) of the collection.
    n_docs, n_tokens : int
        The collection's.
    term_counts : ndarray (n_terms,)
        The collection's term frequencies (the M-step topics start from them).
    dc_docs : list of ndarray
        The documents of the completion trace (rank 0's; empty for the others).
    resume : (header, arrays) or None
        The training state to start from (a checkpoint's, validated by the driver).
    outbox : ray.util.queue.Queue or None
        Rank 0's channel to the driver: after every epoch the traces, and the checkpoint state
        when ``checkpointing`` and one is due.
    """

    def __init__(self, rank, world, docs, n_docs, n_tokens, term_counts, dc_docs=(), resume=None,
                 outbox=None, checkpointing=False, partition=False):
        self.rank, self.world = rank, world
        self.docs, self.n_docs, self.n_tokens = docs, n_docs, n_tokens
        self.term_counts, self.dc_docs = term_counts, list(dc_docs)
        self.partition = partition
        self.adam = None
        self.resume = resume
        self.outbox = outbox
        self.checkpointing = checkpointing

    def attach(self, net, opt):
        """Batch normalisation over the global batch; partitioned, Adam's state of this worker's
        range of the parameters alone (taken from ``opt``'s when a checkpoint filled it)."""
        for m in net.modules():
            if type(m) is nn.BatchNorm1d:
                m.__class__ = SharedBatchNorm
        if self.partition:
            self.adam = PartitionedAdam(opt, self.rank, self.world, _count, lambda ps: sum_gradients(net, ps))

    def rows(self, idx, gen):
        """This worker's documents of the sorted batch ``idx`` (rows of its own count matrix),
        its draws and the batch's size (the loss is a mean over the whole batch)."""
        lo, hi = np.searchsorted(idx, self.docs)
        return idx[lo:hi] - self.docs[0], RowShare(gen, len(idx), int(lo)), len(idx)

    def step(self, net, opt):
        """Adam's step on the gradients summed over the workers (one worker thread: see
        :func:`_train_loop`)."""
        if self.adam is not None:
            self.adam.step()
            return
        sum_gradients(net, [p for p in net.parameters() if p.grad is not None])
        opt.step()

    def sum_epoch(self, net, total):
        """The epoch's negative ELBO (summed over its documents) over all workers; the M-step's
        expected counts summed in place."""
        counts = [m.em_counts for m in net.modules() if getattr(m, "topic_em", 0) > 0]
        if counts:
            for buf, s in zip(counts, _sum(counts, "epoch sums")):
                buf.copy_(s)
        dev = counts[0].device if counts else next(net.parameters()).device
        t = torch.as_tensor(np.atleast_1d(total), dtype=torch.float64, device=dev)
        return _sum([t], "epoch sums")[0].cpu().numpy()

    def epoch_done(self, model, net, opt, order_gen, gen):
        done = model.n_iter_
        due = self.checkpointing and (done % model.checkpoint_every == 0 or done == model.epochs)
        # partitioned, every worker sends its range of Adam's state to rank 0
        moments = self.adam.gathered() if due and self.adam is not None else {}
        if self.outbox is None:
            return
        adam_bytes = self.adam.state_bytes() if self.adam is not None else sum(
            v.numel() * v.element_size() for st in opt.state.values() for v in st.values())
        msg = dict(done=done, log_lik=model._log_lik_rows, log_lik_iter=model._log_lik_iters,
                   dc=model._dc_rows, dc_iter=model._dc_iters, traffic={k: list(v) for k, v in _traffic.items()},
                   adam_state_bytes=adam_bytes)
        if due:
            msg["arrays"] = dict(model._checkpoint_arrays(net, opt, order_gen, gen), **moments)
        self.outbox.put(msg)


def _net_arrays(net):
    return {"net." + k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}


def _train_loop(config):
    """A Ray Train worker: the local epoch loop on its share of every mini-batch."""
    import ray
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    rank = ctx.get_world_rank()
    model = config["model"]
    docs, doc_ref, tok_ref = config["parts"][rank]
    doc_ptr = ray.get(doc_ref)
    corpus = Corpus(doc_ptr - doc_ptr[0], ray.get(tok_ref), *config["vocabulary"])
    if model.device != "cpu":
        model.device = str(ray.train.torch.get_device())
    outbox = config["outbox"] if rank == 0 else None
    share = Share(rank, ctx.get_world_size(), docs, *config["totals"], config["term_counts"],
                  config["dc_docs"] if rank == 0 else (), config["resume"], outbox,
                  config["checkpointing"], partition=model.adam_state == "partitioned")
    torch.set_num_threads(1)  # as one process on the CPU: the sums split by thread count
    _reset_traffic()
    net, X = model._fit(corpus, None, None, 1, share)
    if outbox is not None:
        outbox.put({"final": _net_arrays(net)})
    # the documents' posteriors: this worker's whole batches of the finishing (every worker's
    # network is rank 0's: the same summed gradients, the same steps)
    lo, hi = whole_batches(docs, share.n_docs)
    mix = None
    if hi > lo:
        model.net_ = net
        mix = model._encode(X[lo - docs[0]:hi - docs[0]], 1, first_batch=lo // REFINE_BATCH, normalise=False)
    config["outbox"].put({"mix": (lo, mix)})


def workers(n_workers, gpu, smallest):
    """The number of workers: ``n_workers``, or one per CPU (GPU) of the cluster, at most
    ``smallest`` (the documents of the smallest mini-batch: more would wait out steps)."""
    import ray

    what = "GPU" if gpu else "CPU"
    if n_workers is None:
        n_workers = max(1, min(int(ray.cluster_resources().get(what, 1)), smallest))
    if n_workers > smallest:
        raise ValueError(f"{n_workers} Ray workers for mini-batches of {smallest} documents: some "
                         f"would hold none of a step; raise batch_size or use fewer workers")
    return n_workers


def doc_parts(corpus, n_workers):
    """Every worker's documents: ``((d0, d1), doc_ptr ref, term_ids ref)``, contiguous ranges
    of near-equal tokens, each range's arrays one object-store copy. Where every worker can
    have one, the ranges hold whole batches of the finishing (:data:`REFINE_BATCH` documents),
    so that the workers infer every document's posterior (:func:`whole_batches`)."""
    import ray

    D, N = corpus.n_docs, corpus.n_tokens
    unit = REFINE_BATCH if D >= n_workers * REFINE_BATCH else 1
    n_units = -(-D // unit)
    cuts = [0]
    for r in range(1, n_workers):  # every worker holds a unit at least
        cut = round(int(np.searchsorted(corpus.doc_ptr, r * N / n_workers)) / unit)
        cuts.append(min(max(cut, cuts[-1] + 1), n_units - n_workers + r))
    bounds = [c * unit for c in cuts] + [D]
    parts = []
    for d0, d1 in zip(bounds[:-1], bounds[1:]):
        t0, t1 = int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])
        parts.append(((d0, d1), ray.put(read_piece(corpus.doc_ptr, d0, d1 + 1).astype(np.int64)),
                      ray.put(np.ascontiguousarray(read_piece(corpus.term_ids, t0, t1)))))
    return parts


def whole_batches(docs, n_docs):
    """The rows [lo, hi) of the finishing's batches (:data:`REFINE_BATCH` documents from row 0,
    the last one shorter) that lie within the documents ``docs`` = (d0, d1) of ``n_docs``."""
    d0, d1 = docs
    lo = -(-d0 // REFINE_BATCH) * REFINE_BATCH
    hi = d1 if d1 == n_docs else d1 // REFINE_BATCH * REFINE_BATCH
    return min(lo, hi), hi


def _rows(corpus, lo, hi):
    """The count matrix of documents [lo, hi) of ``corpus`` (read a piece at a time)."""
    ptr = read_piece(corpus.doc_ptr, lo, hi + 1).astype(np.int64)
    ids = read_piece(corpus.term_ids, int(ptr[0]), int(ptr[-1]))
    return count_matrix(Corpus(ptr - ptr[0], ids, corpus.n_terms, corpus.fingerprint))


def term_counts(corpus):
    """The collection's term frequencies, its tokens read a piece at a time."""
    n, step = np.zeros(corpus.n_terms, dtype=np.int64), 1 << 22
    for lo in range(0, corpus.n_tokens, step):
        n += np.bincount(read_piece(corpus.term_ids, lo, min(corpus.n_tokens, lo + step)), minlength=corpus.n_terms)
    return n


def fit_on_ray(model, corpus, callback, checkpoint, step_threads):
    """``model._fit`` on Ray Train workers (see the module docstring)."""
    import ray
    from ray.util.queue import Queue

    from ..common.executors.signals import init_ray, shutdown_ray

    address, n_workers = ray_target(model)
    model._start_fit(corpus, matrix=False)
    resume = None
    if checkpoint is not None and os.path.exists(checkpoint):
        state = model._training_state(corpus.n_terms)
        model._resume(checkpoint, corpus, *state)
        resume = (model._checkpoint_header(), model._checkpoint_arrays(*state))
    gpu = torch.device(model.device).type == "cuda"
    D = corpus.n_docs
    smallest = D // max(1, -(-D // model.batch_size))
    owns = not ray.is_initialized()
    if owns:
        init_ray(address=address, log_to_driver=False, configure_logging=False)
    storage = tempfile.mkdtemp(prefix="topicir-ray-train-")
    try:
        W = workers(n_workers, gpu, smallest)
        outbox = Queue(actor_options={"num_cpus": 0})
        try:
            worker_model = type(model)(**dict(model.get_params(), executor="local", n_workers=None))
            parts = doc_parts(corpus, W)
            config = dict(model=worker_model, parts=parts, vocabulary=(corpus.n_terms, corpus.fingerprint),
                          totals=(D, corpus.n_tokens), term_counts=term_counts(corpus),
                          dc_docs=training_sample(corpus, model.seed), resume=resume, outbox=outbox,
                          checkpointing=checkpoint is not None)
            log.info("training %s on %d Ray Train workers (%s)", model.kind, W, "NCCL" if gpu else "gloo")
            tokens = [int(corpus.doc_ptr[d1]) - int(corpus.doc_ptr[d0]) for (d0, d1), _, _ in parts]
            final, mix = _drive(_trainer(config, W, gpu, storage), W, outbox, model, callback, checkpoint, tokens)
        finally:
            outbox.shutdown()
    finally:
        shutil.rmtree(storage, ignore_errors=True)
        if owns:
            shutdown_ray()
    net = model._make_net(corpus.n_terms)
    model._load_net_state(net, final)
    model._end_fit(net, None, step_threads, callback, _posteriors(model, net, corpus, mix, step_threads))


def _posteriors(model, net, corpus, parts, threads):
    """Every document's mixtures from the workers' ``parts`` ({first row: mixtures}), the
    batches no worker held whole (ranges shorter than a batch) inferred here; normalised."""
    D = corpus.n_docs
    out = np.empty((D, model.n_chains * model.n_topics))
    done = np.zeros(-(-D // REFINE_BATCH), dtype=bool)
    for lo, mix in parts.items():
        out[lo:lo + len(mix)] = mix
        done[lo // REFINE_BATCH:-(-(lo + len(mix)) // REFINE_BATCH)] = True
    model.net_ = net
    here = 0
    for b in np.flatnonzero(~done).tolist():
        lo, hi = b * REFINE_BATCH, min(D, (b + 1) * REFINE_BATCH)
        out[lo:hi] = model._encode(_rows(corpus, lo, hi), threads, first_batch=b, normalise=False)
        here += hi - lo
    if hasattr(model, "executor_stats_"):  # (none when a checkpoint had every epoch)
        model.executor_stats_["posteriors"] = dict(workers=D - here, driver=here)
    return normalise_chains(out, model.n_chains)


def _trainer(config, n_workers, gpu, storage):
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from ..common.executors.ray import worker_env

    return TorchTrainer(
        _train_loop, train_loop_config=config,
        torch_config=TorchConfig(backend="nccl" if gpu else "gloo"),
        scaling_config=ScalingConfig(num_workers=n_workers, use_gpu=gpu),
        run_config=RunConfig(name=f"topicir-{uuid.uuid4().hex[:12]}", storage_path=storage,
                             worker_runtime_env=worker_env(), failure_config=FailureConfig(max_failures=0)))


def _drive(trainer, n_workers, outbox, model, callback, checkpoint, tokens):
    """Run ``trainer`` while taking rank 0's messages: the traces into ``model``, checkpoints
    written, ``callback`` called, as the local loop does; returns the final network's arrays.
    ``tokens``: every worker's, for ``executor_stats_``."""
    from ray.util.queue import Empty

    failed = []

    def run():
        try:
            trainer.fit()
        except Exception as e:  # reported below, on the driver's thread
            failed.append(e)

    thread = threading.Thread(target=run, name="ray-train", daemon=True)
    thread.start()
    final, mix, stage = None, {}, getattr(callback, "stage", None)
    stop = False
    while True:
        try:
            msg = outbox.get(timeout=0.5)
        except Empty:
            if thread.is_alive() or not outbox.empty():
                continue
            break
        if "final" in msg:
            final = msg["final"]
            continue
        if "mix" in msg:
            lo, part = msg["mix"]
            if part is not None:
                mix[lo] = part
            if stage is not None:
                stage("document posteriors", sum(len(p) for p in mix.values()), model.n_docs_)
            continue
        model._log_lik_rows, model._log_lik_iters = msg["log_lik"], msg["log_lik_iter"]
        model._dc_rows, model._dc_iters = msg["dc"], msg["dc_iter"]
        done = model.n_iter_ = msg["done"]
        model.executor_stats_ = dict(epochs=done, workers=n_workers, worker_tokens=tokens,
                                     adam_state_bytes=msg["adam_state_bytes"],
                                     collectives={p: dict(calls=c, bytes=b, seconds=t)
                                                  for p, (c, b, t) in msg["traffic"].items()})
        if "arrays" in msg:
            model._write_checkpoint_arrays(checkpoint, msg["arrays"])
        if callback is not None and (done % model.callback_every == 0 or done == model.epochs):
            try:
                callback(model, done, model.epochs)
            except StopTraining:  # the workers run on: stop at the next epoch whose checkpoint comes
                stop = True
        if stop and ("arrays" in msg or checkpoint is None):
            raise TrainingStopped(done, model.epochs, checkpoint, unit="epoch")
    thread.join()
    if failed:
        raise _worker_error(model, failed[0]) from None
    if final is None:
        raise RuntimeError(f"{model.kind} training on Ray ended without rank 0's network")
    return final, mix


def _worker_error(model, error):
    """A worker's error as the local trainer would raise it: its type when a ValueError or
    RuntimeError, its first line, the rank (a ValueError first, since the other workers then
    fail on the broken collective; else the lowest rank's); else Ray's first line."""
    failures = getattr(error, "worker_failures", None) or {}
    where, exc = "Ray", error
    if failures:
        rank = min(failures, key=lambda r: (type(failures[r]) is not ValueError, r))
        where, exc = f"Ray worker {rank}", failures[rank]
    kind = type(exc) if type(exc) in (ValueError, RuntimeError) else RuntimeError
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    return kind(f"{model.kind} training on {where}: {lines[0]}")
