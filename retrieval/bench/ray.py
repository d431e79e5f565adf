"""Benchmark: LDA training on Ray workers against the local threaded trainer, same model.

    topicir bench ray                         # 20 Newsgroups, K = 100 and 800
    topicir bench ray --synthetic --iters 3   # AP-scale synthetic corpus, shortened
    topicir bench ray --workers 1 2 4 8       # more workers (needs that many CPUs)

Every configuration trains the same model (same seed, n_shards, chains: the Ray executor is exact)
and is timed sweep by sweep: tokens/s = tokens x chains / median seconds of a sweep, over the
sweeps after the first (the first loads the kernels in fresh Ray workers) and before the last
(the last also computes the log-likelihood and keeps a sample). Setup (layout, the initialising
pass, starting the workers) is reported apart. ``local`` is the threaded trainer with
``n_jobs=--threads``; ``ray W`` runs W Ray actors of one CPU each on a local Ray cluster of
max(W) CPUs started here (or the one at ``--address``).

Bytes per sweep (Ray rows): ``slices`` is the sparse topic-word slices handed from round to
round (every slice once per round), ``cross`` the part of them that changes worker (what goes
over the network on a multi-machine cluster), ``n_k`` the topic totals (each worker's delta to
the merging task and the sum back to every worker and the driver), ``sync`` what the driver
pulled back (state for the log-likelihood, kept samples and the end of training) over the run.
The last column is the check that the Ray model is the local one (z, n_kw, log-likelihood).
"""
import logging
import time
from types import SimpleNamespace

import numpy as np

from models.common.corpus import synthetic_corpus
from models.lda.model import LDA

from ..core.tables import Table, fixed
from .lda import first_docs

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


def _fit(corpus, k, args, executor):
    m = LDA(n_topics=k, n_chains=args.chains, n_iter=args.iters, burn_in=args.iters - 1,
            sample_every=1, n_shards=args.shards, n_jobs=args.threads, seed=args.seed,
            log_lik_every=args.iters, executor=executor)
    stamps, sweep_secs = [], []

    def cb(model, it, n_iter):
        stamps.append(time.perf_counter())
        st = getattr(model, "executor_stats_", None)
        if st:
            sweep_secs.append(st["sweep_seconds"])

    t0 = time.perf_counter()
    m.fit(corpus, callback=cb)
    total = time.perf_counter() - t0
    ray = bool(sweep_secs)
    if not ray:  # local: the time between callbacks is the sweep
        sweep_secs = [np.nan] + np.diff(stamps).tolist()
    sweep = float(np.median(sweep_secs[1:-1]))
    # before the first callback: setup and sweep 1 (measured on Ray; about a median one locally)
    setup = stamps[0] - t0 - (sweep_secs[0] if ray else sweep)
    return m, dict(total=total, setup=setup, sweep=sweep)


def bench(corpus, name, args):
    from models.common.executors.ray import RayExecutor
    from models.common.executors.signals import shutdown_ray

    rows = []
    for k in args.k:
        local, t = _fit(corpus, k, args, "local")
        tps_local = corpus.n_tokens * args.chains / t["sweep"]
        rows.append({"corpus": name, "K": k, "run": f"local {args.threads}", "setup s": fixed(t["setup"], 1),
                     "s/sweep": fixed(t["sweep"], 2), "M tok/s": fixed(tps_local / 1e6, 2), "local/run": "1.00"})
        for w in args.workers:
            m, t = _fit(corpus, k, args, RayExecutor(address=args.address, n_workers=w))
            st = m.executor_stats_
            tps = corpus.n_tokens * args.chains / t["sweep"]
            same = (np.array_equal(m.z_, local.z_) and np.array_equal(m.n_kw_, local.n_kw_)
                    and np.array_equal(m.log_lik_, local.log_lik_))
            rows.append({"corpus": name, "K": k, "run": f"ray {w}", "setup s": fixed(t["setup"], 1),
                         "s/sweep": fixed(t["sweep"], 2), "M tok/s": fixed(tps / 1e6, 2),
                         "local/run": fixed(tps_local / tps, 2),
                         "slices MB": fixed(st["slice_bytes_per_sweep"] / 1e6, 2),
                         "cross MB": fixed(st["cross_worker_bytes_per_sweep"] / 1e6, 2),
                         "n_k MB": fixed(st["n_k_bytes_per_sweep"] / 1e6, 3), "sync MB": fixed(st["sync_bytes"] / 1e6, 1),
                         "same model": str(same)})
            log.info("%s K=%d ray %d: %.2f s/sweep", name, k, w, t["sweep"])
    shutdown_ray()
    return rows


def sweep_seconds(n_tokens, workers, rate, slice_bytes, round_latency, bandwidth):
    """Modelled seconds of one sweep of one chain on ``workers`` workers with S = W shards:
    compute N / (W r); every round each worker receives the slice of its next term group from
    its neighbour (slice_bytes / S), so each link carries the whole sparse n_kw once per sweep
    whatever W (rounds are barriers, so it is not overlapped); and S round latencies."""
    return (n_tokens / (workers * rate) + (slice_bytes / bandwidth if workers > 1 else 0.0)
            + workers * round_latency)


def modelled_sweeps(args) -> Table:
    """The modelled table: one sweep at AP scale and at 100x, for 1, 8, 32 and 128 workers;
    and the time of one driver sync (z and doc lists, 8 bytes per token, plus the slices, over
    the driver's one link), due every ``log_lik_every`` sweeps and at every kept sample."""
    bw = args.gbps * 1e9 / 8
    rows = []
    for name, n in (("AP", 60e6), ("100xAP", 6e9)):
        L = args.slice_bytes_per_token * n  # upper bound: rows of frequent terms saturate at K
        t1 = sweep_seconds(n, 1, args.rate, L, args.round_latency, bw)
        for w in (1, 8, 32, 128):
            t = sweep_seconds(n, w, args.rate, L, args.round_latency, bw)
            rows.append({"scale": name, "tokens": f"{n / 1e6:.0f}M", "n_kw MB": fixed(L / 1e6, 0), "W": w,
                         "s/sweep": fixed(t, 2), "compute": fixed(n / (w * args.rate), 2),
                         "network": fixed(L / bw if w > 1 else 0, 2), "latency": fixed(w * args.round_latency, 3),
                         "speed-up": fixed(t1 / t, 1), "driver sync s": fixed((8 * n + L) / bw, 1)})
    return Table("Distributed LDA on Ray: modelled seconds per sweep", rows,
                 notes=[f"inputs: {args.rate / 1e6:.2f} M tokens/s per worker, {args.slice_bytes_per_token:.3f} "
                        f"bytes of sparse n_kw slices per token, {args.round_latency * 1e3:.1f} ms per round, "
                        f"{args.gbps:g} Gb/s links"])


def run(*, data: str = DEFAULT_20NEWS, docs: int | None = None, synthetic: bool = False, syn_docs: int = 250_000,
        syn_terms: int = 200_000, syn_len: float = 240.0, k=None, iters: int = 8, chains: int = 1, shards: int = 4,
        threads: int = 2, workers=(1, 2), address: str | None = None, seed: int = 0, cost_model: bool = False,
        rate: float = 2.0e6, slice_bytes_per_token: float = 1.0, round_latency: float = 0.005,
        gbps: float = 10.0) -> list[Table]:
    """LDA trained locally and on Ray with each worker count of ``workers`` (20 Newsgroups, its
    first ``docs`` posts, or the synthetic corpus); with ``cost_model``, the modelled sweep times
    from ``rate``, ``slice_bytes_per_token``, ``round_latency`` and ``gbps`` (nothing trained)."""
    args = SimpleNamespace(**locals())
    if cost_model:
        return [modelled_sweeps(args)]
    if iters < 3:
        raise ValueError("--iters must be >= 3 (the first and last sweeps are not timed)")
    from models.common.executors.signals import init_ray

    if address is None:
        init_ray(num_cpus=max(workers), log_to_driver=False, include_dashboard=False)
    else:
        init_ray(address=address, log_to_driver=False)
    if synthetic:
        corpus = synthetic_corpus(syn_docs, syn_terms, syn_len, seed=seed)
        name, args.k = "synthetic", k or [800]
    else:
        from ..datasets.newsgroups import newsgroups_corpus

        corpus = first_docs(newsgroups_corpus(data)[0], docs)
        name, args.k = "20news", k or [100, 800]
    # compile the kernels once (the local warm-up fills numba's cache that Ray workers read)
    LDA(n_topics=8, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=shards,
        log_lik_every=1).fit(synthetic_corpus(200, 500, 30, seed=0, n_latent=5))
    rows = bench(corpus, name, args)
    return [Table("Distributed LDA on Ray against the local trainer", rows,
                  notes=[f"{name}: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms; "
                         f"sweeps={iters}, chains={chains}, n_shards={shards}, seed={seed}; 'same model': "
                         f"z, n_kw and log-likelihood equal to the local run's"])]
