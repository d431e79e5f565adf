"""aviPAM in ``topicir bench ray``: one process against W data-parallel Ray Train workers
(``executor="ray"``, :mod:`models.avipam.distributed`), and a cost model of a cluster from
what they measure.

Every run trains the same mini-batches for ``--iters`` epochs (the kind's default network and
chains, or its quick ones). ``s/epoch`` is the median wall time of the epochs after
the first and before the last, as the driver sees them; setup is the time to the first epoch's
end less an epoch (Ray Train's start, every worker's range of the documents shipped, the networks
built);
finishing is every training document's posterior, which the workers infer after the epochs.
The all-reduces are counted by rank 0 by purpose (gradients, batch normalisation's sums, the
epoch's sums), with the seconds spent in them (waiting for the slower worker included). The
ELBO trace of every run is compared with the one-thread local run's (relative, in the first epoch
and in any). The largest W also runs with Adam's state partitioned (``adam_state="partitioned"``:
the same model, the parameters' ranges exchanged every step). A ring step's latency comes from a
probe: back-to-back all-reduces of one value on Ray Train workers.

The cost model (:func:`project`): an epoch is ``ceil(D / batch_size)`` steps; a step's
per-document parts (the batch's input, forward and backward passes) split among the W workers
and grow with the tokens of a batch, its vocabulary-sized parts (the first layers' dense
gradients, Adam's step) run on every worker whole and grow with the vocabulary. The gradients'
sum is a ring all-reduce of a term mask (4 bytes a term) and then of G bytes, the gradients with
the first layers' rows of the batch's distinct terms only (grown from the bench's batches by
Heaps' law): ``2 (W - 1) / W * G / bandwidth`` plus ``2 (W - 1)`` hop latencies each (batch
normalisation's small sums add hop latencies only); every epoch
adds the M-step (on every worker) and its sums; the finishing (every document's posterior) splits
among the workers by whole batches of the inference. With Adam's
state partitioned, Adam's step divides by W and every step adds the parameters' exchange, an
all-gather of the parameters' bytes P: ``(W - 1) / W * P / bandwidth`` plus ``W - 1`` hop
latencies.
"""
from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
import torch

from models.avipam.foldin import REFINE_BATCH

from ..core.tables import Table, fixed
from .avipam_steps import time_parts
from .ray_cost import AP, Collection, grown

DOC_PARTS = ("batch input", "forward", "backward", "other")
VOCAB_PARTS = ("dense gradients", "Adam step")
BYTES_PER_VALUE = 4  # float32 parameters and gradients


class TrainParts(NamedTuple):
    """What the benchmark measured of aviPAM (one core; per token, per term, per call)."""

    doc_s_per_token: float     # a step's per-document parts, per token of its batch
    grad_s_per_term: float     # a step's first layers' dense gradients, per term
    adam_s_per_term: float     # a step's Adam update, per term
    mstep_s_per_term: float    # the M-step of an epoch, per term
    finish_s_per_doc: float    # the finishing on one worker, per document
    start_s: float             # Ray Train's start (fixed)
    param_bytes: float         # the parameters that train (their dense gradients) at n_terms
    n_terms: int
    grad_bytes_per_term: float  # the first layers' row of a term (their growth with the vocabulary)
    batch_tokens: float        # a mini-batch of the projected batch_size on the bench's corpus
    batch_terms: float         # its distinct terms (the first layers' rows summed in a step)
    epoch_bytes_per_term: float  # the epoch's sums (M-step counts), per term
    small_calls_per_step: float  # batch normalisation's all-reduces
    hop_latency: float         # s per hop of a ring all-reduce
    corpus_bytes_per_token: float  # the corpus, sent once (a range to each worker)
    batch_size: int            # of the projected (default) training


def _model(params, **kw):
    from models.avipam.model import AVIPAM

    return AVIPAM(**params, **kw)


def _params(args):
    from models.avipam.model import AVIPAM

    base = dict(AVIPAM.quick_params) if args.sizes == "quick" else {}
    base.update(epochs=args.iters, seed=args.seed)  # the network's own chains: what a training steps
    return base


def _timed_fit(model, corpus, clock=None):
    """Fit ``model``; its epochs' and finishing's seconds as the driver sees them."""
    stamps, stats = [], []

    def cb(m, epoch, total):
        stamps.append(time.perf_counter())
        stats.append(dict(getattr(m, "executor_stats_", {})))
        if clock is not None:
            clock.epoch_done(epoch, total)

    t0 = time.perf_counter()
    model.fit(corpus, callback=cb)
    end = time.perf_counter()
    walls = np.diff([t0] + stamps)
    epoch = float(np.median(walls[1:-1]))
    return dict(model=model, epoch=epoch, setup=float(walls[0] - epoch), finish=end - stamps[-1], stats=stats)


def _traffic_per_epoch(stats):
    """Calls, bytes and seconds of every purpose per epoch: the median over the epochs after the first."""
    per = {}
    for purpose in stats[-1]["collectives"]:
        run = [s["collectives"][purpose] for s in stats]
        per[purpose] = {k: float(np.median(np.diff([r[k] for r in run])[1:])) for k in ("calls", "bytes", "seconds")}
    return per


def batch_terms(corpus, batch_size, n_batches=100, seed=0):
    """Mean tokens and distinct terms of ``n_batches`` random mini-batches of ``batch_size``
    documents of ``corpus``."""
    rng = np.random.default_rng(seed)
    tokens, terms = [], []
    for _ in range(n_batches):
        docs = rng.choice(corpus.n_docs, min(batch_size, corpus.n_docs), replace=False)
        ids = np.concatenate([corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] for d in docs])
        tokens.append(len(ids))
        terms.append(len(np.unique(ids)))
    return dict(batch_tokens=float(np.mean(tokens)), batch_terms=float(np.mean(terms)))


def _grad_values(params, n_terms):
    """Values of the parameters that take a gradient step, for a vocabulary of ``n_terms``."""
    net = _model(params)._make_net(n_terms)
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def elbo_drift(a, b) -> tuple[float, float]:
    """The largest relative difference of ``a``'s ELBO per token from ``b``'s over the chains, in
    the first epoch and in any epoch."""
    if a.log_lik_.shape != b.log_lik_.shape:
        raise ValueError(f"ELBO traces of shapes {a.log_lik_.shape} and {b.log_lik_.shape}")
    rel = np.abs(a.log_lik_ - b.log_lik_) / np.abs(b.log_lik_)
    return float(rel[0].max()), float(rel.max())


def bench(corpus, args) -> tuple[list[dict], TrainParts]:
    """aviPAM local (``--threads``) and on every W of ``--workers`` Ray Train workers: the rows of
    the table, and the parts of the cost model (from a one-thread local run split by part, and
    the smallest Ray run's traffic)."""
    params = _params(args)
    D, N, V = corpus.n_docs, corpus.n_tokens, corpus.n_terms
    batch = _model(params).batch_size
    steps = math.ceil(D / batch)
    _model(dict(params, epochs=2)).fit(corpus)  # torch's and the kernels' first use
    local = _timed_fit(_model(params, n_jobs=args.threads), corpus)
    one = _model(params, n_jobs=1)
    clock = time_parts(one, "cpu")
    single = _timed_fit(one, corpus, clock)
    rows = [{"run": f"local {t}", "setup s": fixed(r["setup"], 1), "s/epoch": fixed(r["epoch"], 3),
             "finishing s": fixed(r["finish"], 1), "local/run": fixed(r["epoch"] / local["epoch"], 2),
             "gradients MB/step": "", "parameters MB/step": "", "collectives/step": "", "collectives s/epoch": "",
             "epoch sums MB": "", "Adam state MB": "", "ELBO rel diff, epoch 1": "", "ELBO rel diff, max": ""}
            for t, r in ((args.threads, local), (1, single))]
    runs = {}
    biggest = max(args.workers)
    for w, adam in [(w, "replicated") for w in args.workers] + [(biggest, "partitioned")] * (biggest > 1):
        r = _timed_fit(_model(params, executor=_executor(args.address), n_workers=w, adam_state=adam), corpus)
        if adam == "replicated":
            runs[w] = r
        traffic = _traffic_per_epoch(r["stats"])
        first, worst = elbo_drift(r["model"], single["model"])
        grads, exchange = traffic["gradients"], traffic["parameters"]
        rows.append({"run": f"ray {w}" + (", Adam partitioned" if adam == "partitioned" else ""),
                     "setup s": fixed(r["setup"], 1), "s/epoch": fixed(r["epoch"], 3),
                     "finishing s": fixed(r["finish"], 1), "local/run": fixed(r["epoch"] / local["epoch"], 2),
                     "gradients MB/step": fixed(grads["bytes"] / steps / 1e6, 3),
                     "parameters MB/step": fixed(exchange["bytes"] / steps / 1e6, 3),
                     "collectives/step": fixed(sum(t["calls"] for p, t in traffic.items() if p != "epoch sums") / steps, 1),
                     "collectives s/epoch": fixed(sum(t["seconds"] for t in traffic.values()), 3),
                     "epoch sums MB": fixed(traffic["epoch sums"]["bytes"] / 1e6, 3),
                     "Adam state MB": fixed(r["stats"][-1]["adam_state_bytes"] / 1e6, 1),
                     "ELBO rel diff, epoch 1": f"{first:.1e}", "ELBO rel diff, max": f"{worst:.1e}"})
    w_small = min(runs)
    small = runs[w_small]
    traffic = _traffic_per_epoch(small["stats"])
    bn = traffic["batch norm"]
    two = [w for w in runs if w > 1]
    hop = allreduce_latency(min(two)) / (2 * (min(two) - 1)) if two else 0.0
    grads = traffic["gradients"]
    slope = BYTES_PER_VALUE * (_grad_values(params, 2 * V) - _grad_values(params, V)) / V
    doc_s = clock.per_step(*DOC_PARTS[:-1]) + max(0.0, clock.per_step("step") - clock.per_step(*DOC_PARTS[:-1], *VOCAB_PARTS))
    parts = TrainParts(
        doc_s_per_token=doc_s / (N / steps), grad_s_per_term=clock.per_step(VOCAB_PARTS[0]) / V,
        adam_s_per_term=clock.per_step(VOCAB_PARTS[1]) / V,
        mstep_s_per_term=clock.mstep_s / V, finish_s_per_doc=small["finish"] / D,
        start_s=max(small["setup"] - single["setup"], 0.0), param_bytes=BYTES_PER_VALUE * _grad_values(params, V),
        n_terms=V, grad_bytes_per_term=slope, **batch_terms(corpus, _model({}).batch_size),
        epoch_bytes_per_term=traffic["epoch sums"]["bytes"] / V,
        small_calls_per_step=bn["calls"] / steps, hop_latency=hop,
        corpus_bytes_per_token=corpus.term_ids.itemsize + corpus.doc_ptr.itemsize * (D + 1) / N,
        batch_size=_model({}).batch_size)
    return rows, parts


def _probe_loop(config):
    """A Ray Train worker timing back-to-back all-reduces of one value (after a warm-up); rank 0
    puts its median in the queue."""
    import ray.train
    import torch.distributed as dist

    x = torch.zeros(1)
    times = []
    for i in range(config["calls"] + 20):
        t0 = time.perf_counter()
        dist.all_reduce(x)
        if i >= 20:
            times.append(time.perf_counter() - t0)
    if ray.train.get_context().get_world_rank() == 0:
        config["outbox"].put(float(np.median(times)))


def allreduce_latency(workers: int, calls: int = 500) -> float:
    """Seconds of an all-reduce of one value among ``workers`` Ray Train workers over gloo (rank
    0's median of ``calls`` back-to-back ones): the latency of 2 (W - 1) ring steps."""
    import tempfile

    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    from ray.util.queue import Queue

    from models.common.executors.ray import worker_env

    outbox = Queue(actor_options={"num_cpus": 0})
    try:
        with tempfile.TemporaryDirectory(prefix="topicir-ray-probe-") as storage:
            TorchTrainer(_probe_loop, train_loop_config={"calls": calls, "outbox": outbox},
                         torch_config=TorchConfig(backend="gloo"), scaling_config=ScalingConfig(num_workers=workers),
                         run_config=RunConfig(storage_path=storage, worker_runtime_env=worker_env())).fit()
        return float(outbox.get(timeout=60))
    finally:
        outbox.shutdown()


def _executor(address):
    return "ray" if address is None else f"ray:{address}"


def allreduce_seconds(nbytes: float, workers: int, bw: float, hop: float) -> float:
    """A ring all-reduce of ``nbytes`` among ``workers``: 2 (W - 1) steps, each sending a W-th."""
    if workers <= 1:
        return 0.0
    return 2 * (workers - 1) * (nbytes / workers / bw + hop)


def allgather_seconds(nbytes: float, workers: int, bw: float, hop: float) -> float:
    """A ring all-gather of ``nbytes`` (a W-th from each worker): W - 1 steps, each sending a W-th."""
    if workers <= 1:
        return 0.0
    return (workers - 1) * (nbytes / workers / bw + hop)


def project(coll: Collection, workers: int, epochs: int, parts: TrainParts, gbps: float,
            adam: str = "replicated", heaps_beta: float = 0.5) -> dict:
    """Seconds of a default aviPAM training on ``workers`` Ray Train workers, by part; ``adam``:
    Adam's state replicated or partitioned (its step split, the parameters exchanged). A
    batch's distinct terms grow from the bench's by Heaps' law (``heaps_beta``)."""
    bw = gbps * 1e9 / 8
    W, V = workers, coll.terms
    steps = math.ceil(coll.docs / parts.batch_size)
    batch_tokens = parts.batch_size * coll.tokens / coll.docs
    param_bytes = parts.param_bytes + parts.grad_bytes_per_term * (V - parts.n_terms)
    terms = min(V, parts.batch_terms * (batch_tokens / parts.batch_tokens) ** heaps_beta)
    mask_bytes = 4 * V  # the batch's terms, int32, summed first
    grad_bytes = param_bytes - parts.grad_bytes_per_term * (V - terms)
    split = W if adam == "partitioned" else 1
    step = dict(compute=parts.doc_s_per_token * batch_tokens / W,
                replicated=(parts.grad_s_per_term + parts.adam_s_per_term / split) * V,
                allreduce=allreduce_seconds(mask_bytes, W, bw, parts.hop_latency)
                + allreduce_seconds(grad_bytes, W, bw, parts.hop_latency)
                + parts.small_calls_per_step * allreduce_seconds(0.0, W, bw, parts.hop_latency),
                exchange=allgather_seconds(param_bytes, W, bw, parts.hop_latency) if split > 1 else 0.0)
    out = {k: epochs * steps * v for k, v in step.items()}
    out["M-step"] = epochs * (parts.mstep_s_per_term * V
                              + allreduce_seconds(parts.epoch_bytes_per_term * V, W, bw, parts.hop_latency))
    out["setup"] = parts.start_s + parts.corpus_bytes_per_token * coll.tokens / bw
    # the posteriors: batches of REFINE_BATCH documents, whole ones to each worker
    out["finishing"] = parts.finish_s_per_doc * REFINE_BATCH * math.ceil(math.ceil(coll.docs / REFINE_BATCH) / W)
    out["total"] = sum(out.values())
    out.update(steps=steps, grad_bytes=grad_bytes + mask_bytes, param_bytes=param_bytes, batch_terms=terms)
    return out


def tables(rows, parts: TrainParts, corpus, args, workers=(1, 8, 32, 128)) -> list[Table]:
    from models.avipam.model import AVIPAM

    epochs = AVIPAM().epochs
    batch = _model(_params(args)).batch_size
    note = (f"20news (first {corpus.n_docs} posts): {corpus.n_tokens} tokens, {corpus.n_terms} terms; "
            f"{args.iters} epochs, {_model(_params(args)).n_chains} chains, batch_size {batch} "
            f"({math.ceil(corpus.n_docs / batch)} steps an epoch), seed {args.seed}, network: "
            f"{args.sizes}; local 1: one torch thread, as every Ray Train worker; collectives per step: the "
            f"gradients' all-reduce, batch normalisation's and, with Adam's state partitioned, the parameters' "
            f"ranges exchanged (parameters MB: every worker's range, as broadcast), with the seconds spent in them "
            f"(waiting for the slower worker included); Adam state MB: rank 0's; ELBO rel diff: the largest relative difference of a chain's ELBO per token from the "
            f"one-thread local run's, in the first epoch and in any (the same steps but for the order of float "
            f"sums; Adam's normalised steps amplify that rounding where training is unstable)")
    proj = []
    for coll in (AP, grown(AP, 10, args.heaps_beta)):
        for w, adam in [(w, a) for w in workers for a in ("replicated", "partitioned") if a == "replicated" or w > 1]:
            if w > parts.batch_size:
                continue
            p = project(coll, w, epochs, parts, args.gbps, adam, args.heaps_beta)
            proj.append({"collection": coll.name, "W": w, "Adam state": adam, "steps/epoch": f"{p['steps']:,}",
                         "batch terms": f"{p['batch_terms']:,.0f}", "gradients MB": fixed(p["grad_bytes"] / 1e6, 1),
                         "parameters MB": fixed(p["param_bytes"] / 1e6, 1),
                         **{f"{k} min": fixed(p[k] / 60, 1)
                            for k in ("setup", "compute", "replicated", "allreduce", "exchange", "M-step", "finishing")},
                         "total h": fixed(p["total"] / 3600, 2)})
    measured = [{"per-document part us/token": fixed(parts.doc_s_per_token * 1e6, 3),
                 "dense gradients us/term/step": fixed(parts.grad_s_per_term * 1e6, 4),
                 "Adam us/term/step": fixed(parts.adam_s_per_term * 1e6, 4),
                 "M-step us/term": fixed(parts.mstep_s_per_term * 1e6, 4),
                 "finishing ms/doc": fixed(parts.finish_s_per_doc * 1e3, 2), "start s": fixed(parts.start_s, 1),
                 "gradient B/term": fixed(parts.grad_bytes_per_term, 0),
                 "batch tokens": fixed(parts.batch_tokens, 0), "batch terms": fixed(parts.batch_terms, 0),
                 "epoch sums B/term": fixed(parts.epoch_bytes_per_term, 0),
                 "small all-reduces/step": fixed(parts.small_calls_per_step, 0),
                 "hop latency ms": fixed(parts.hop_latency * 1e3, 3)}]
    return [Table("aviPAM on Ray Train against one process", rows, notes=[note]),
            Table("aviPAM: measured parts of the cost model", measured,
                  notes=["per-document part: batch input, forward and backward per token of a batch (split among "
                         "the workers); the first layers' dense gradients and Adam's step: every worker whole (Adam's "
                         "a W-th with its state partitioned); from the one-thread local run, parts timed over the epochs after the first; hop "
                         "latency: the median of back-to-back all-reduces of one value on the smallest W > 1, per "
                         "ring step (gloo); gradient bytes per term: the parameters' growth with the vocabulary "
                         "(a term's rows of the first layers); batch tokens and terms: the mean of 100 random "
                         "mini-batches of the projected batch_size"]),
            Table("aviPAM: projected training on a Ray cluster, minutes by part", proj,
                  notes=[f"default training ({epochs} epochs, batch_size {parts.batch_size}); {args.gbps:g} Gb/s links, ring all-reduce of the "
                         "gradients every step (2 (W - 1) / W of them over the busiest link, 2 (W - 1) hop "
                         "latencies; the batch's term mask first, then the gradients with the first layers' rows "
                         f"of the batch's terms only, 'batch terms', grown by Heaps' law with beta {args.heaps_beta:g} "
                         "from the bench's batches) and of the M-step's counts every epoch; replicated: the first layers' dense "
                         "gradients and Adam's step; Adam state partitioned: Adam's step split among the workers "
                         "and, every step, the parameters' exchange (exchange: a ring all-gather, (W - 1) / W of "
                         "them over the busiest link, W - 1 hop latencies); documents of the collection's mean "
                         "length; setup: Ray Train's start and the corpus sent once, a range to each worker; "
                         f"finishing: the posteriors, batches of {REFINE_BATCH} documents split among the workers; "
                         "W at most batch_size"])]
