"""Benchmark: LDA training on Ray workers against the local threaded trainer, same model.

    python -m retrieval.bench.ray                         # 20 Newsgroups, K = 100 and 800
    python -m retrieval.bench.ray --synthetic --iters 3   # AP-scale synthetic corpus, shortened
    python -m retrieval.bench.ray --workers 1 2 4 8       # more workers (needs that many CPUs)

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
import argparse
import time

import numpy as np

from models.corpus import synthetic_corpus
from models.lda import LDA

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


def bench(corpus, name, args, out):
    from models.executors.ray import RayExecutor
    from models.executors.signals import shutdown_ray

    out(f"{'corpus':<10} {'K':>4} {'run':<8} {'setup s':>8} {'s/sweep':>8} {'M tok/s':>8} "
        f"{'local/run':>9} {'slices MB':>10} {'cross MB':>9} {'n_k MB':>7} {'sync MB':>8} "
        f"{'same model':>10}")
    for k in args.k:
        local, t = _fit(corpus, k, args, "local")
        tps_local = corpus.n_tokens * args.chains / t["sweep"]
        out(f"{name:<10} {k:>4} {'local ' + str(args.threads):<8} {t['setup']:>8.1f} "
            f"{t['sweep']:>8.2f} {tps_local / 1e6:>8.2f} {1.0:>9.2f}")
        for w in args.workers:
            m, t = _fit(corpus, k, args, RayExecutor(address=args.address, n_workers=w))
            st = m.executor_stats_
            tps = corpus.n_tokens * args.chains / t["sweep"]
            same = (np.array_equal(m.z_, local.z_) and np.array_equal(m.n_kw_, local.n_kw_)
                    and np.array_equal(m.log_lik_, local.log_lik_))
            out(f"{name:<10} {k:>4} {'ray ' + str(w):<8} {t['setup']:>8.1f} {t['sweep']:>8.2f} "
                f"{tps / 1e6:>8.2f} {tps_local / tps:>9.2f} {st['slice_bytes_per_sweep'] / 1e6:>10.2f} "
                f"{st['cross_worker_bytes_per_sweep'] / 1e6:>9.2f} {st['n_k_bytes_per_sweep'] / 1e6:>7.3f} "
                f"{st['sync_bytes'] / 1e6:>8.1f} {str(same):>10}")
    shutdown_ray()


def sweep_seconds(n_tokens, workers, rate, slice_bytes, round_latency, bandwidth):
    """Modelled seconds of one sweep of one chain on ``workers`` workers with S = W shards:
    compute N / (W r); every round each worker receives the slice of its next term group from
    its neighbour (slice_bytes / S), so each link carries the whole sparse n_kw once per sweep
    whatever W (rounds are barriers, so it is not overlapped); and S round latencies."""
    return (n_tokens / (workers * rate) + (slice_bytes / bandwidth if workers > 1 else 0.0)
            + workers * round_latency)


def cost_model(args, out):
    """The README's table: one sweep at AP scale and at 100x, for 1, 8, 32 and 128 workers;
    and the time of one driver sync (z and doc lists, 8 bytes per token, plus the slices, over
    the driver's one link), due every ``log_lik_every`` sweeps and at every kept sample."""
    out(f"# inputs: {args.rate / 1e6:.2f} M tokens/s per worker, {args.slice_bytes_per_token:.3f} "
        f"bytes of sparse n_kw slices per token, {args.round_latency * 1e3:.1f} ms per round, "
        f"{args.gbps:g} Gb/s links")
    bw = args.gbps * 1e9 / 8
    out(f"{'scale':<6} {'tokens':>8} {'n_kw MB':>8} {'W':>4} {'s/sweep':>8} {'compute':>8} "
        f"{'network':>8} {'latency':>8} {'speed-up':>8} {'driver sync s':>13}")
    for name, n in (("AP", 60e6), ("100xAP", 6e9)):
        L = args.slice_bytes_per_token * n  # upper bound: rows of frequent terms saturate at K
        t1 = sweep_seconds(n, 1, args.rate, L, args.round_latency, bw)
        for w in (1, 8, 32, 128):
            t = sweep_seconds(n, w, args.rate, L, args.round_latency, bw)
            out(f"{name:<6} {n / 1e6:>7.0f}M {L / 1e6:>8.0f} {w:>4} {t:>8.2f} "
                f"{n / (w * args.rate):>8.2f} {(L / bw if w > 1 else 0):>8.2f} "
                f"{w * args.round_latency:>8.3f} {t1 / t:>8.1f} {(8 * n + L) / bw:>13.1f}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m retrieval.bench.ray", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--synthetic", action="store_true", help="the AP-scale synthetic corpus instead")
    p.add_argument("--syn-docs", type=int, default=250_000)
    p.add_argument("--syn-terms", type=int, default=200_000)
    p.add_argument("--syn-len", type=float, default=240.0)
    p.add_argument("--k", type=int, nargs="+", default=None, help="topic counts (20news: 100 800; synthetic: 800)")
    p.add_argument("--iters", type=int, default=8, help="sweeps per run")
    p.add_argument("--chains", type=int, default=1)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--threads", type=int, default=2, help="threads of the local trainer")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray worker counts")
    p.add_argument("--address", default=None, help="Ray cluster (default: start a local one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cost-model", action="store_true",
                   help="print the modelled sweep times from the inputs below, train nothing")
    p.add_argument("--rate", type=float, default=2.0e6, help="tokens/s of one worker")
    p.add_argument("--slice-bytes-per-token", type=float, default=1.0,
                   help="bytes of the sparse n_kw slices (slices MB / n_shards) per token")
    p.add_argument("--round-latency", type=float, default=0.005, help="seconds per round")
    p.add_argument("--gbps", type=float, default=10.0, help="network bandwidth, Gb/s")
    args = p.parse_args(argv)

    def out(s):
        print(s, flush=True)

    if args.cost_model:
        cost_model(args, out)
        return 0
    if args.iters < 3:
        p.error("--iters must be >= 3 (the first and last sweeps are not timed)")
    from models.executors.signals import init_ray

    if args.address is None:
        init_ray(num_cpus=max(args.workers), log_to_driver=False, include_dashboard=False)
    else:
        init_ray(address=args.address, log_to_driver=False)

    t = time.perf_counter()
    if args.synthetic:
        corpus = synthetic_corpus(args.syn_docs, args.syn_terms, args.syn_len, seed=args.seed)
        name, args.k = "synthetic", args.k or [800]
    else:
        from ..datasets.newsgroups import newsgroups_corpus

        corpus = newsgroups_corpus(args.data)[0]
        name, args.k = "20news", args.k or [100, 800]
    out(f"# {name}: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms "
        f"(built in {time.perf_counter() - t:.1f} s); sweeps={args.iters}, chains={args.chains}, "
        f"n_shards={args.shards}, seed={args.seed}")
    # compile the kernels once (the local warm-up fills numba's cache that Ray workers read)
    LDA(n_topics=8, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=args.shards,
        log_lik_every=1).fit(synthetic_corpus(200, 500, 30, seed=0, n_latent=5))
    bench(corpus, name, args, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
