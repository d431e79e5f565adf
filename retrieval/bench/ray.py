"""Benchmark: every Gibbs kind trained on Ray workers against the local threaded trainer (same
model), aviPAM on Ray Train workers against one process (:mod:`retrieval.bench.ray_train`), and
the cost model of a cluster projected from what they measure.

    topicir bench ray                          # every kind, 20 Newsgroups' first posts
    topicir bench ray --kinds lda pam --docs 6000
    topicir bench ray --workers 1 2 4 8        # more workers (needs that many CPUs)
    topicir bench ray --gbps 25                # the projection with faster links

Every kind trains at its default topic counts (``--sizes quick``: its quick ones) with the same
seed, n_shards and chains locally (``n_jobs=--threads``) and on W Ray actors of one CPU each, for
every W of ``--workers`` (a local Ray cluster of max(W) CPUs started here, or the one at
``--address``), and every run is timed sweep by sweep. ``s/sweep`` is the median wall time of
the sweeps after the first (the first loads the kernels in fresh workers) and before the last
(the last also pulls the state back, computes the log-likelihood and keeps a sample); of it,
``driver`` is what the driver does after the workers' part (alpha updates, TCM's restaurants).
Setup (layout, the initialising pass, starting the workers) is reported apart. Bytes come from
the runner's counters: ``moved`` is what the workers hand on in a sweep (the partition kinds'
term-group slices, every slice once a round; TCM's boundaries), ``cross`` the part of it that
changes worker (what a multi-machine cluster sends over the network), ``shared`` the totals'
deltas and sums of the partition rounds or TCM's restaurants sent to the workers, ``setup`` the
state shipped to the workers at the start (metered on the kind's hook). The last column checks
that the Ray model is the local one (assignments, counts and log-likelihood). A kind whose chain
state can stay on the workers (``--ray-state workers``) runs that way too, on every W, its rows
marked "state on workers" (the same model: every array of its model file and the log-likelihood).
gLDA runs whole chains with the state on the driver (one shard) and ``--shards`` document shards
with the state on the workers, each against a local run of the same shards.

The measured parts (per-core rate, round latency from a chain of actor calls, the driver's
per-token work, the bytes per token) feed :mod:`retrieval.bench.ray_cost`, which projects a
default training (default topics, chains and sweeps, n_shards = W) on 8, 32 and 128 workers for
an AP-size collection and one ten times larger.
"""
from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import numpy as np

from ..core.tables import Table, fixed
from . import ray_cost as cost
from .lda import first_docs

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"
GIBBS = ("lda", "pam", "tcm", "glda", "tree-lda")
KINDS = GIBBS + ("avipam",)  # aviPAM: data-parallel on Ray Train (retrieval.bench.ray_train)
SIZE_KEYS = ("n_topics", "n_super", "n_sub")
# Chain state compared between the local and the Ray model, besides the log-likelihood.
STATE = {"lda": ("z_", "n_kw_"), "pam": ("z_", "n_wj_"), "tcm": ("b_",), "glda": ("g_", "zg_", "n_kw_"),
         "tree-lda": ("z_", "zp_", "n_e_")}
MOVED = {"lda": "sparse n_kw term lists", "pam": "dense n_wj rows", "tree-lda": "node rows of n_e, internal nodes' of n_i",
         "tcm": "boundaries (4 B a token)", "glda": "nothing"}
FORMULA = {"lda": "4 V + b sum_w min(cf_w, K)", "pam": "4 V s'", "tree-lda": "4 K (nodes + internal nodes)", "tcm": "4 N",
           "glda": "0"}
TARGET = ("10xAP", "lda", 32, 2.0)  # collection, kind, workers, hours
PROJECTED_WORKERS = (8, 32, 128)


# -- one training, timed -----------------------------------------------------------------------

def _executor(address, workers, metered, state="driver"):
    from models.common.executors.ray import RayExecutor, nbytes

    class MeteredExecutor(RayExecutor):
        """Counts the bytes of what the kind's hook hands the runner to ship at the start."""

        def runner(self, model):
            runner = super().runner(model)
            runner.hook = _Metered(runner.hook, metered, nbytes)
            return runner

    return MeteredExecutor(address=address, n_workers=workers, state=state)


class _Metered:
    """A runner hook that adds up the bytes its start-up methods return."""

    SHIPPED = ("chain_state", "get_slice", "worker_layout", "worker_args")

    def __init__(self, hook, counts, nbytes):
        self._hook, self._counts, self._nbytes = hook, counts, nbytes

    def __getattr__(self, name):
        value = getattr(self._hook, name)
        if name not in self.SHIPPED:
            return value

        def metered(*args):
            out = value(*args)
            self._counts[name] = self._counts.get(name, 0) + self._nbytes(out)
            return out
        return metered


def _fit(kind, corpus, inputs, params, executor, metered=None):
    from models.registry import model_class

    m = model_class(kind)(**params, executor=executor)
    stamps, stats = [], []

    def cb(model, it, n_iter):
        stamps.append(time.perf_counter())
        stats.append(dict(getattr(model, "executor_stats_", {})))

    t0 = time.perf_counter()
    m.fit(corpus, callback=cb, **inputs)
    walls = np.diff([t0] + stamps)
    wall = float(np.median(walls[1:-1]))
    ray = bool(stats[0])
    workers = float(np.median([s["sweep_seconds"] for s in stats[1:-1]])) if ray else wall
    first = stats[0]["sweep_seconds"] + wall - workers if ray else wall
    out = dict(model=m, setup=walls[0] - first, wall=wall, workers=workers, event=walls[-1] - wall,
               stats=stats[-1])
    if ray:
        sync = np.diff([0] + [s["sync_bytes"] for s in stats])
        per_sweep = float(np.median(sync[1:-1]))
        out.update(sync_per_sweep=per_sweep, sync_event=float(sync[-1] - per_sweep), shipped=dict(metered))
    return out


def _params(kind, args, state="driver"):
    """The run's parameters: n_shards = --shards where the kind has shards (gLDA's run on the
    driver: one, whole chains; its shards run with the state on the workers)."""
    from models.registry import model_class

    cls = model_class(kind)
    defaults = cls().get_params()
    sizes = cls.quick_params if args.sizes == "quick" else defaults
    params = {k: sizes[k] for k in SIZE_KEYS if k in defaults}
    params.update(n_chains=args.chains, n_iter=args.iters, burn_in=args.iters - 1, sample_every=1,
                  log_lik_every=args.iters, n_jobs=args.threads, seed=args.seed)
    if "n_shards" in defaults and (kind != "glda" or state == "workers"):
        params["n_shards"] = args.shards
    return params


def _size_label(params):
    if "n_super" in params:
        return f"{params['n_super']},{params['n_sub']}"
    return str(params["n_topics"])


def _same(kind, a, b):
    return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in STATE[kind] + ("log_lik_",))


def _same_model(a, b):
    """The arrays a model file keeps and the log-likelihood trace (the chain state of a run with
    the state on the workers stays there)."""
    return all(np.array_equal(getattr(a, n + "_"), getattr(b, n + "_")) for n in a._INFERENCE_ARRAYS + ("log_lik",))


ON_WORKERS = " (state on workers)"


def base_kind(key: str) -> str:
    """The kind of a cost-model entry (``lda`` or ``lda (state on workers)``)."""
    return key.split(" ")[0]


# -- what is measured --------------------------------------------------------------------------

def round_latency(n_rounds: int = 200) -> float:
    """Seconds of one round: an actor call taking the previous round's merged delta and slice,
    then the merge task, in a dependent chain alternating between two actors (as the partition
    rounds run); the median of five chains."""
    import ray

    from models.common.executors.ray import worker_env
    from models.common.executors.rounds import merge_deltas

    class Probe:
        def round(self, delta, payload):
            return payload, (delta + 1,)

    actor = ray.remote(num_cpus=0)(Probe)
    probes = [actor.options(runtime_env=worker_env()).remote() for _ in range(2)]
    merge = ray.remote(num_cpus=0)(merge_deltas).options(runtime_env=worker_env())
    delta, payload = np.zeros(800, np.int64), np.zeros(256, np.int32)
    times = []
    for rep in range(6):
        d, p = ray.put(delta), ray.put(payload)
        t = time.perf_counter()
        for j in range(n_rounds if rep else 10):  # the first chain warms the actors up
            p, part = probes[j % 2].round.options(num_returns=2).remote(d, p)
            d = merge.remote(part)
        ray.get([d, p])
        if rep:
            times.append((time.perf_counter() - t) / n_rounds)
    for a in probes:
        ray.kill(a)
    return float(np.median(times))


def bench_kind(kind, corpus, inputs, args, rows, checks):
    """Local and Ray runs of one kind (rows of the first table, formula checks of the second);
    returns its measured parts for the cost model: ``{kind: parts}``, and for a kind whose state
    can stay on the workers ``{kind + ON_WORKERS: parts}`` too."""
    params = _params(kind, args)
    C, N = args.chains, corpus.n_tokens
    from models.registry import model_class

    model_class(kind)(**dict(params, n_iter=2, burn_in=1, log_lik_every=1)).fit(  # kernels compiled
        first_docs(corpus, 50), **inputs)
    local = _fit(kind, corpus, inputs, params, "local")
    tps_local = N * C / local["wall"]
    base = {"kind": kind, "K": _size_label(params)}
    blank = dict.fromkeys(("moved MB", "cross MB", "shared MB", "KB/round", "sync MB", "setup MB", "same model"), "")
    rows.append({**base, "run": f"local {args.threads}", "setup s": fixed(local["setup"], 1),
                 "s/sweep": fixed(local["wall"], 3), "driver s": "", "M tok/s": fixed(tps_local / 1e6, 2),
                 "local/run": "1.00", **blank})
    from models.common.executors.ray import WORKER_STATE_KINDS

    runs, on_workers = {}, {}
    states = ("driver", "workers") if kind in WORKER_STATE_KINDS else ("driver",)
    worker_params = _params(kind, args, "workers")
    local_w = local if worker_params == params else _fit(kind, corpus, inputs, worker_params, "local")
    for state, w in ((state, w) for state in states for w in args.workers):
        metered = {}
        p = params if state == "driver" else worker_params
        r = _fit(kind, corpus, inputs, p, _executor(args.address, w, metered, state), metered)
        (runs if state == "driver" else on_workers)[w] = r
        same = _same(kind, r["model"], local["model"]) if state == "driver" else _same_model(r["model"], local_w["model"])
        st = r["stats"]
        per_sweep = st["slice_bytes_per_sweep"] + st["n_k_bytes_per_sweep"]
        rounds = st["rounds"] / st["sweeps"]
        tps = N * C / r["wall"]
        label = f"ray {w}" + (ON_WORKERS if state == "workers" else "")
        rows.append({**base, "run": label, "setup s": fixed(r["setup"], 1), "s/sweep": fixed(r["wall"], 3),
                     "driver s": fixed(r["wall"] - r["workers"], 3), "M tok/s": fixed(tps / 1e6, 2),
                     "local/run": fixed(tps_local / tps, 2),
                     "moved MB": fixed(st["slice_bytes_per_sweep"] / 1e6, 2),
                     "cross MB": fixed(st.get("cross_worker_bytes_per_sweep", st["slice_bytes_per_sweep"]) / 1e6, 2),
                     "shared MB": fixed(st["n_k_bytes_per_sweep"] / 1e6, 3),
                     "KB/round": fixed(per_sweep / rounds / 1e3, 1), "sync MB": fixed(st["sync_bytes"] / 1e6, 1),
                     "setup MB": fixed(sum(r["shipped"].values()) / 1e6, 1),
                     "same model": str(same)})
        log.info("%s %s: %.3f s/sweep (local %.3f)", kind, label, r["wall"], local["wall"])
    w_min, w_max = min(runs), max(runs)
    one, big = runs[w_min], runs[w_max]
    m = big["model"]
    S = params.get("n_shards", C)
    nodes = inner = 0
    if kind == "tree-lda":
        from models.tree_lda.shards import node_groups

        on_path = node_groups(m.tree_, np.zeros(m.tree_.n_terms, np.int64)) >= 0
        nodes, inner = int(on_path.sum()), int((on_path & (m.tree_.beta_sum > 0)).sum())
    sizes = cost.Sizes(k=params.get("n_sub", params.get("n_topics")), n_totals=0, chains=C, sweeps=args.iters,
                       events=1)
    parts_for_check = cost.Parts(rate=1, latency=0, setup_s_per_token=0, start_s=0, driver_s_per_token=0,
                                 event_s_per_token=0, state_bytes_per_token=0, layout_bytes_per_token=0,
                                 worker_bytes_per_token=0, driver_bytes_per_token=0, sync_bytes_per_token=0,
                                 nodes_per_term=nodes / corpus.n_terms, inner_per_term=inner / corpus.n_terms)
    moved = big["stats"]["slice_bytes_per_sweep"]
    if kind == "lda":
        cf = np.bincount(corpus.term_ids, minlength=corpus.n_terms)
        model_b, measured = cost.lda_list_bytes(cf, sizes.k), moved / (C * S)
    elif kind in ("pam", "tree-lda"):
        coll = cost.Collection("bench", corpus.n_docs, N, corpus.n_terms)
        model_b, measured = cost.state_bytes(kind, coll, sizes, parts_for_check), moved / (C * S)
    elif kind == "tcm":
        model_b, measured = cost.BOUNDARY_BYTES * N, moved / C
    else:
        model_b, measured = 0.0, moved / C
    checks.append({"kind": kind, "moved per chain and sweep": MOVED[kind], "formula": FORMULA[kind],
                   "formula MB": fixed(model_b / 1e6, 3), "measured MB": fixed(measured / 1e6, 3),
                   "measured/formula": fixed(measured / model_b, 3) if model_b else "-"})
    def restaurant_bytes(r, per_worker):
        """TCM's restaurants a worker is sent whole, per chain, sweep and token: with the state
        on the driver, every worker's copy; on the workers, what the owners send w_min workers,
        every one of the W^-beta of the whole its documents hold (:mod:`ray_cost`)."""
        if kind != "tcm":
            return 0.0
        if per_worker:
            return r["stats"]["counts_bytes_per_sweep"] / (C * N * w_min ** (1 - args.heaps_beta))
        return big["stats"]["n_k_bytes_per_sweep"] / (C * w_max * N)

    def measured(r, per_worker):
        """Parts from run ``r`` on w_min workers; ``per_worker``: setup's and a sync's work ran on
        the workers side by side (per token of one worker's share). The initialising pass is the
        local one's work either way; the rest of a run's setup is the workers' start."""
        shipped, share = r["shipped"], w_min if per_worker else 1
        init = max(local["setup"], 0.0)
        return cost.Parts(
            rate=N * C / (w_min * r["workers"]), latency=args.latency, setup_s_per_token=init / N,
            start_s=max(r["setup"] - init / share, 0.0), driver_s_per_token=max(r["wall"] - r["workers"], 0.0) / N,
            event_s_per_token=share * max(r["event"], 0.0) / (C * N),
            state_bytes_per_token=(shipped.get("chain_state", 0) + shipped.get("get_slice", 0)) / (C * N),
            layout_bytes_per_token=shipped.get("worker_layout", 0) / N,
            worker_bytes_per_token=shipped.get("worker_args", 0) / (w_min * N),
            driver_bytes_per_token=max(r["sync_per_sweep"], 0.0) / (C * N),
            sync_bytes_per_token=max(r["sync_event"], 0.0) / (C * N),
            restaurant_bytes_per_token=restaurant_bytes(r, per_worker),
            changed_bytes_per_token=r["stats"].get("changed_bytes_per_sweep", 0) / (C * N),
            nodes_per_term=nodes / corpus.n_terms, inner_per_term=inner / corpus.n_terms, on_workers=per_worker)

    parts = {kind: measured(one, False)}
    if on_workers:
        parts[kind + ON_WORKERS] = measured(on_workers[min(on_workers)], True)
    return parts


# -- the projection ----------------------------------------------------------------------------

def default_sizes(kind: str) -> cost.Sizes:
    """A default training of ``kind``: its topics, chains, sweeps and sync sweeps."""
    from models.registry import model_class

    m = model_class(kind)()
    k = getattr(m, "n_sub", None) or m.n_topics
    events = {d for d in range(1, m.n_iter + 1) if d % m.log_lik_every == 0 or d == m.n_iter}
    events |= set(m._sample_iters().tolist())
    return cost.Sizes(k=k, n_totals=k, chains=m.n_chains, sweeps=m.n_iter, events=len(events))


def projection_tables(parts: dict, gbps: float, heaps_beta: float, zipf: float) -> list[Table]:
    colls = [cost.AP, cost.grown(cost.AP, 10, heaps_beta)]
    rows, totals = [], {}
    for coll in colls:
        for kind, p in parts.items():
            sizes = default_sizes(base_kind(kind))
            for w in PROJECTED_WORKERS:
                pr = cost.project(base_kind(kind), coll, w, sizes, p, gbps, zipf, heaps_beta)
                totals[(coll.name, kind, w)] = pr["total"]
                rows.append({"collection": coll.name, "kind": kind, "W": w, "used": pr["workers_used"],
                             "MB/sweep": fixed(pr["sweep_bytes"] / 1e6, 0),
                             **{f"{part} min": fixed(pr[part] / 60, 1)
                                for part in ("setup", "compute", "transfer", "latency", "driver", "syncs")},
                             "total h": fixed(pr["total"] / 3600, 2)})
    notes = [f"{c.name}: {c.docs:,.0f} docs, {c.tokens / 1e6:,.1f}M tokens, {c.terms:,.0f} terms" for c in colls]
    notes += [f"default training of each kind (topics, chains, sweeps, syncs every log_lik_every sweeps and at "
              f"kept samples), n_shards = W; {gbps:g} Gb/s links; vocabulary by Heaps' law (beta {heaps_beta:g}), "
              f"term frequencies by Zipf's law (exponent {zipf:g}) for LDA's lists; MB/sweep: the busiest link's "
              f"bytes in a sweep of every chain",
              "per-core rates are those of the first sweeps of a small corpus (chains speed up as they settle); "
              "TCM's restaurants go from the driver to every worker (no relay; with the state on the workers, "
              "worker to worker, a worker's part of them as its terms by Heaps' law); rounds are not overlapped",
              f"{ON_WORKERS.strip()}: the workers initialise and compute their part of every log-likelihood, "
              "sample and checkpoint side by side (per-token setup and sync work divided by W, W round latencies "
              "a sync); the others pull every chain's state to the driver at a sync"]
    coll, kind, w, hours = TARGET
    best = kind + ON_WORKERS if (coll, kind + ON_WORKERS, w) in totals else kind
    got = totals.get((coll, best, w))
    target = []
    if got is not None:
        target.append({"target": f"{coll} {best} training on {w} workers", "bound h": fixed(hours, 1),
                       "projected h": fixed(got / 3600, 2), "met": "met" if got <= hours * 3600 else "missed"})
    tables = [Table("Projected training on a Ray cluster: minutes by part", rows, notes=notes)]
    if target:
        tables.append(Table("Scale-out target", target))
    return tables


def parts_table(parts: dict, latency: float) -> Table:
    rows = [{"kind": k, "M tok/s/core": fixed(p.rate / 1e6, 2), "setup us/tok": fixed(p.setup_s_per_token * 1e6, 3),
             "start s": fixed(p.start_s, 1), "driver us/tok/sweep": fixed(p.driver_s_per_token * 1e6, 4),
             "sync us/tok": fixed(p.event_s_per_token * 1e6, 3), "state B/tok": fixed(p.state_bytes_per_token, 1),
             "layout B/tok": fixed(p.layout_bytes_per_token, 1), "per-worker B/tok": fixed(p.worker_bytes_per_token, 1),
             "driver B/tok/sweep": fixed(p.driver_bytes_per_token, 2), "sync B/tok": fixed(p.sync_bytes_per_token, 1),
             "restaurants B/tok": fixed(p.restaurant_bytes_per_token, 1), "nodes/term": fixed(p.nodes_per_term, 2),
             "internal nodes/term": fixed(p.inner_per_term, 3)}
            for k, p in parts.items()]
    return Table("Measured parts of the cost model", rows,
                 notes=[f"round latency {latency * 1e3:.2f} ms (a dependent chain of actor calls and merge tasks); "
                        "rate: tokens x chains / the workers' seconds of a sweep on the fewest workers, per worker; "
                        "per token: setup and the driver's work per sweep of every chain; sync, state, sync bytes "
                        "per chain; per-worker: what every worker takes whole"])


# -- the command -------------------------------------------------------------------------------

def _inputs(kind, vocab):
    if kind != "tree-lda":
        return {}
    from ..datasets import wordnet

    ids = {t: i for i, t in enumerate(vocab)}
    return dict(synsets=wordnet.synsets_as_terms(wordnet.read_synsets(), ids.get))


def _own_vocabulary(corpus, vocab):
    """The corpus renumbered to the terms it uses (count tables sized by its own vocabulary)."""
    from models.common.corpus import make_corpus

    used, term_ids = np.unique(corpus.term_ids, return_inverse=True)
    return (make_corpus(corpus.doc_ptr, term_ids.astype(np.int32), n_terms=len(used),
                        fingerprint=f"{corpus.fingerprint}:own-vocabulary"), [vocab[t] for t in used])


def run(*, data: str = DEFAULT_20NEWS, docs: int | None = 1500, kinds=KINDS, sizes: str = "default",
        iters: int = 4, chains: int = 2, shards: int = 4, threads: int = 2, workers=(1, 2),
        address: str | None = None, seed: int = 0, gbps: float = 10.0, heaps_beta: float = 0.5,
        zipf: float = 1.0) -> list[Table]:
    """Every kind of ``kinds`` trained locally and on Ray with each worker count of ``workers``
    on the first ``docs`` posts of 20 Newsgroups; the formula check of the bytes each moves;
    the measured parts; the projection of default trainings at AP size and ten times it."""
    args = SimpleNamespace(**locals())
    if iters < 3:
        raise ValueError("--iters must be >= 3 (the first and last sweeps are not timed)")
    if max(workers) > chains and "glda" in kinds:
        raise ValueError(f"gLDA's Ray workers (one shard, the state on the driver) own whole chains: "
                         f"--chains ({chains}) must be >= every --workers")
    from models.common.executors.signals import init_ray, shutdown_ray

    from ..datasets.newsgroups import newsgroups_corpus

    corpus, vocab, _ = newsgroups_corpus(data)
    corpus, vocab = _own_vocabulary(first_docs(corpus, docs), vocab)
    if address is None:
        init_ray(num_cpus=max(workers), log_to_driver=False, include_dashboard=False)
    else:
        init_ray(address=address, log_to_driver=False)
    rows, checks, parts, train = [], [], {}, []
    try:
        args.latency = round_latency()
        for kind in (k for k in kinds if k in GIBBS):
            parts.update(bench_kind(kind, corpus, _inputs(kind, vocab), args, rows, checks))
        if "avipam" in kinds:
            from . import ray_train

            train = ray_train.tables(*ray_train.bench(corpus, args), corpus, args)
    finally:
        shutdown_ray()
    if not parts:
        return train
    note = (f"20news (first {corpus.n_docs} posts): {corpus.n_tokens} tokens, {corpus.n_terms} terms; sweeps={iters}, "
            f"chains={chains}, n_shards={shards}, seed={seed}, topic counts: {sizes}; MB are per sweep of every chain "
            f"(sync MB: over the run); 'same model': assignments, counts and log-likelihood equal to the local run's; "
            f"gLDA: one shard (whole chains) with the state on the driver, n_shards={shards} on the workers")
    return [Table("Gibbs kinds on Ray against the local trainer", rows, notes=[note]),
            Table("What each kind moves per sweep: formula against measurement", checks,
                  notes=["per chain and sweep; partition kinds: the whole state once a round (measured / (chains x "
                         "n_shards)); LDA's formula is an upper bound (a term has at most min(cf_w, K) topics), b the "
                         "packed entry's bytes"]),
            parts_table(parts, args.latency), *projection_tables(parts, gbps, heaps_beta, zipf), *train]
