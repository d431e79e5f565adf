"""Gibbs sweeps on Ray workers, giving exactly the model of the local trainer.

:class:`RayExecutor` is what ``executor="ray"`` builds; its runner is the model class's
(``_ray_runner(executor)``). :class:`RayRunner` is what every kind's runner shares: Ray started
or joined, one actor per contiguous range of the document shards, the lost-worker error. A kind
whose sweep is the partition scheme of Yan et al. 2009 (S document shards x S term groups,
sub-step j: shard s samples term group (s + j) mod S against its copy of the topic totals)
runs on :class:`PartitionRunner` with a small hook object of its own (PAM's:
:mod:`models.pam.ray`); LDA's runner (:mod:`models.lda.ray`) ships its sparse term lists itself.

Partition rounds: worker a owns the shards [s0, s1) of every chain, hence a contiguous range
of tokens (sweep order is shard first) and of documents; their assignments, document counts
and the rng streams of its shards stay on it. The topic-word counts live as S term-group
slices, which flow between workers through Ray's object store: round (chain c, sub-step j)
samples every shard's block with the local kernel and returns the slices it updated and the
totals' deltas of its shards; the next round of the chain takes the deltas of every worker
(integer sums, so the merge is the local one exactly), and each slice goes to the shard that
samples its group next. The driver submits a whole sweep of every chain at once and waits once
per sweep. It keeps the model object: initialisation, the log-likelihood, kept samples,
hyperparameter updates and checkpoints run there on state pulled back when the fit loop needs
it (see :class:`models.common.executors.LocalRunner` for the protocol).
"""
import logging
import os
import time

import numpy as np
import ray
from ray.exceptions import ObjectLostError, OwnerDiedError, RayActorError, WorkerCrashedError

from .errors import WorkerLostError
from .signals import init_ray, shutdown_ray

log = logging.getLogger(__name__)

_DIED = (RayActorError, WorkerCrashedError, ObjectLostError, OwnerDiedError)
# Workers import the models package from where the driver imported it (same code on both sides).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def worker_env():
    """The runtime environment of every actor and task: this package on PYTHONPATH."""
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)}}


class RayExecutor:
    """Run a Gibbs trainer's sweeps on Ray (``LDA(executor=RayExecutor(...))``).

    Parameters
    ----------
    address : str or None
        Ray cluster (``ray.init(address=...)``): None uses the cluster already initialised in
        this process, else ``RAY_ADDRESS``, else starts a local one (shut down after training).
    n_workers : int or None
        Ray actors (one CPU each), each owning a contiguous range of the ``n_shards`` shards;
        None: as many as the cluster has CPUs, at most ``n_shards``.
    """

    def __init__(self, address=None, n_workers=None):
        if n_workers is not None and (not isinstance(n_workers, int) or n_workers < 1):
            raise ValueError(f"n_workers must be an int >= 1 or None, got {n_workers!r}")
        self.address = address
        self.n_workers = n_workers
        self.last_runner = None

    def __repr__(self):
        return f"RayExecutor(address={self.address!r}, n_workers={self.n_workers!r})"

    def runner(self, model):
        self.last_runner = model._ray_runner(self)
        return self.last_runner

    def worker_pids(self):
        """Process ids of the workers of the current (or last) training run."""
        return self.last_runner.worker_pids()


class RayRunner:
    """What every Ray runner shares: Ray, the actors over shard ranges, the lost-worker error."""

    def __init__(self, executor, model):
        self.ex = executor
        self.workers = []
        self._owns_ray = False
        self.stats = dict(rounds=0, sweeps=0, sync_bytes=0)

    # what a worker owns a contiguous range of: the shards of every chain (or whole chains)
    unit = "shard"

    def _start_ray(self, model, checkpoint, n_units=None):
        """Ray up; the ranges [shard0[a], shard0[a + 1]) of the ``n_units`` units (default: the
        shards) that the W workers own."""
        _ray_reports_to_log()
        if not ray.is_initialized():
            # Ray's log records (its start-up banner) go to this process's log, not Ray's handler
            init_ray(address=self.ex.address, log_to_driver=False, configure_logging=False)
            self._owns_ray = True
        S = model.n_shards if n_units is None else n_units
        cpus = int(ray.cluster_resources().get("CPU", 1))
        W = self.ex.n_workers or max(1, min(S, cpus))
        if W > S:
            raise ValueError(f"{W} Ray workers for {S} {self.unit}s: every worker needs a "
                             f"{self.unit}; raise n_{self.unit}s or use fewer workers")
        self.checkpoint, self.last_ckpt = checkpoint, getattr(model, "n_iter_", 0)
        self.S, self.C, self.W = S, model.n_chains, W
        self.owner = np.repeat(np.arange(W), [len(a) for a in np.array_split(np.arange(S), W)])
        self.shard0 = np.concatenate([[0], np.cumsum(np.bincount(self.owner, minlength=W))])

    def _spawn(self, cls, args):
        """One actor of ``cls`` per worker, built with ``args[a]``."""
        actor = ray.remote(num_cpus=1, max_restarts=0)(cls)
        self.workers = [actor.options(runtime_env=worker_env()).remote(*a) for a in args]
        self._pids = self._get([w.pid.remote() for w in self.workers], "starting")

    def worker_pids(self):
        return list(self._pids)

    def checkpointed(self, iteration):
        self.last_ckpt = iteration

    def _get(self, refs, what):
        try:
            return ray.get(refs)
        except _DIED as e:
            dead = [a for a, w in enumerate(self.workers) if not _alive(w)]
            who = ", ".join(f"Ray worker {a} ({self.unit}s {self.shard0[a]}-{self.shard0[a + 1] - 1})"
                            for a in dead) or "a Ray worker"
            log.debug("Ray's report of the lost worker: %s", e)
            ckpt = None if self.checkpoint is None else os.fspath(self.checkpoint)
            raise WorkerLostError(who, what, ckpt, self.last_ckpt, type(e).__name__) from None

    def close(self):
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._owns_ray:
            shutdown_ray()


def _nbytes(obj):
    return sum(a.nbytes for a in obj) if isinstance(obj, tuple) else obj.nbytes


def merge_deltas(*parts):
    """The totals' change of a round: the sum of every worker's (integer, so order-free)."""
    return np.sum([p[0] for p in parts], axis=0)


def own(value):
    """A writable copy of what Ray hands over: arrays from its object store are read only, and
    numba compiles read-only arrays as another type (NamedTuples of arrays are copied field by
    field)."""
    if isinstance(value, np.ndarray):
        return np.array(value)
    if isinstance(value, tuple):
        return type(value)(*map(own, value))
    if isinstance(value, dict):
        return {k: own(v) for k, v in value.items()}
    return value


def _deep_nbytes(obj):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(map(_deep_nbytes, obj))
    if isinstance(obj, dict):
        return sum(map(_deep_nbytes, obj.values()))
    return 0


class RayWorker:
    """A Ray actor that owns a range of units (``lay``: its layout) of every chain; the state of
    chain c is the dict ``chain[c]``. A kind's subclass adds ``setup(*args)`` (its buffers) and
    its sweep."""

    def __init__(self, lay, n_chains, *args):
        self.lay = lay
        self.chain = [None] * n_chains
        self.setup(*args)

    def setup(self, *args):
        """The worker's own buffers (``args``: what the kind's hook passes)."""

    def pid(self):
        return os.getpid()

    def load(self, c, state):
        self.chain[c] = own(state)

    def update(self, c, params):
        self.chain[c].update(own(params))

    def pull(self, c, keys):
        return {k: self.chain[c][k] for k in keys}


class PartitionWorker(RayWorker):
    """A Ray actor: the shards [s0, s1) of every chain, for :class:`PartitionRunner`. A kind's
    subclass defines ``sweep_block(c, i, g, payload, totals)``: sample block (shard s0 + i,
    term group g) of chain c with that group's slice ``payload`` against ``totals`` (changed
    in place), and return the updated slice and the block's counters (int64 array)."""

    def __init__(self, lay, n_chains, n_totals, *args):
        self.totals = np.zeros((n_chains, n_totals), np.int64)
        super().__init__(lay, n_chains, *args)

    def load(self, c, state, totals):
        super().load(c, state)
        self.totals[c] = totals

    def merged(self, c):
        """What follows from chain c's totals once a round's delta is in them."""

    def round(self, c, j, n_deltas, *args):
        """Sub-step j of chain c: add the previous round's merged delta (``args[0]`` when
        ``n_deltas``), then sample every owned shard s on term group (s + j) mod S (its slice
        in ``args``). Returns the updated slices and (this worker's delta, slice sizes, counters)."""
        if n_deltas:
            self.totals[c] += args[0]
            self.merged(c)
        S, s0 = self.lay["S"], self.lay["s0"]
        out, sizes, delta, counts = [], [], np.zeros(self.totals.shape[1], np.int64), 0
        for i, payload in enumerate(args[n_deltas:]):
            local = self.totals[c].copy()
            payload, n = self.sweep_block(c, i, (s0 + i + j) % S, payload, local)
            delta += local - self.totals[c]
            counts = counts + n
            out.append(payload)
            sizes.append(_nbytes(payload))
        return (*out, (delta, sizes, counts))


class PartitionRunner(RayRunner):
    """Partition rounds (module docstring) of a kind described by ``hook``, which gives:

    ``worker``
        its :class:`PartitionWorker` subclass;
    ``ranges(model, s0, s1)``
        the token and document ranges (t0, t1, d0, d1) of shards [s0, s1);
    ``worker_layout(model, s0, s1)`` and ``worker_args(model, corpus)``
        what a worker's constructor takes besides (layout, chains, totals' length);
    ``totals(model)``
        the (chains, n) int64 totals (n_k, n_j) that the driver keeps current from the deltas;
    ``groups(model)``
        the term group of every term;
    ``get_slice(model, c, terms)`` / ``put_slice(model, c, terms, payload)``
        a term group's slice of chain c's topic-word counts out of and into the model;
    ``chain_state(model, c, r)`` / ``put_state(model, c, r, part)``
        a worker's chain state (``r``: its (s0, s1, t0, t1, d0, d1)) out of and into the
        model; ``DOC_KEYS`` and ``ASSIGNMENT_KEYS`` name the parts the fit loop reads;
    ``after_lists(model, c)``
        what follows once chain c's slices are back (dense tables from lists);
    ``before_sweeps(model, it)`` and ``sweep_params(model, c, r)``
        the local trainer's work before sweep ``it``, then what the workers take for it (the
        prior, the active documents, ...);
    ``after_sweeps(model, it, counters, runner)``
        the local trainer's work after the sweeps (``runner.pull_docs(model)`` brings the
        document state back first where it needs it).
    """

    def __init__(self, executor, model, hook):
        super().__init__(executor, model)
        self.hook = hook

    def start(self, model, corpus, checkpoint):
        self._start_ray(model, checkpoint)
        hook, S = self.hook, self.S
        group = hook.groups(model)
        self.terms = [np.flatnonzero(group == g) for g in range(S)]
        self.ranges = []
        args = []
        for a in range(self.W):
            s0, s1 = int(self.shard0[a]), int(self.shard0[a + 1])
            self.ranges.append((s0, s1, *hook.ranges(model, s0, s1)))
            wlay = dict(hook.worker_layout(model, s0, s1), s0=s0, S=S)
            args.append((wlay, self.C, hook.totals(model).shape[1], *hook.worker_args(model, corpus)))
        self.merge = ray.remote(num_cpus=0, max_retries=0)(merge_deltas).options(
            runtime_env=worker_env())
        self._spawn(hook.worker, args)
        self.slices = [[None] * S for _ in range(self.C)]
        self.pending = [[] for _ in range(self.C)]
        for c in range(self.C):
            for w, r in zip(self.workers, self.ranges):
                w.load.remote(c, hook.chain_state(model, c, r), hook.totals(model)[c])
            for g, t in enumerate(self.terms):
                self.slices[c][g] = ray.put(hook.get_slice(model, c, t))

    def step(self, model, corpus, it):
        hook, S, C = self.hook, self.S, self.C
        hook.before_sweeps(model, it)
        for c in range(C):
            for w, r in zip(self.workers, self.ranges):
                w.update.remote(c, hook.sweep_params(model, c, r))
        t = time.perf_counter()
        sweep_deltas = [[] for _ in range(C)]
        for j in range(S):
            for c in range(C):  # chains interleaved so that no worker waits on one chain
                prev, cur = self.pending[c], []
                for (s0, s1, *_), w in zip(self.ranges, self.workers):
                    groups = [(s + j) % S for s in range(s0, s1)]
                    refs = w.round.options(num_returns=len(groups) + 1).remote(
                        c, j, len(prev), *prev, *[self.slices[c][g] for g in groups])
                    for g, ref in zip(groups, refs[:-1]):
                        self.slices[c][g] = ref
                    cur.append(refs[-1])
                # one small task sums the workers' deltas; every worker gets the sum next round
                self.pending[c] = [self.merge.remote(*cur)]
                sweep_deltas[c].append(cur)
                self.stats["rounds"] += 1
        flat = [r for c in range(C) for rs in sweep_deltas[c] for r in rs]
        got = iter(self._get(flat, f"sweep {it + 1}"))
        moved = cross = 0
        counters = 0
        totals = hook.totals(model)
        for c in range(C):
            for j in range(S):
                for a in range(self.W):
                    delta, sizes, n = next(got)
                    totals[c] += delta
                    counters = counters + n
                    for s, size in zip(range(*self.ranges[a][:2]), sizes):
                        moved += size  # the slice goes to the shard sampling it next round
                        cross += size * (self.owner[(s - 1) % S] != a)
        dt = time.perf_counter() - t
        self.stats.update(
            sweeps=self.stats["sweeps"] + 1, workers=self.W, sweep_seconds=dt,
            tokens_per_s=C * corpus.n_tokens / dt, slice_bytes_per_sweep=moved,
            cross_worker_bytes_per_sweep=cross,
            # the totals (n_k, n_j) per round: W deltas into the merge task, the sum out to W
            # workers and the driver
            n_k_bytes_per_sweep=C * S * (2 * self.W + 1) * totals[0].nbytes)
        model.executor_stats_ = dict(self.stats)
        hook.after_sweeps(model, it, counters, self)

    # -- state back to the driver -------------------------------------------------------------

    def sync(self, model, counts, assignments):
        for c in range(self.C):
            self._pull(model, c, docs=counts, lists=counts, assignments=assignments)

    def pull_docs(self, model):
        """Every chain's document state back in the model (for a hyperparameter update)."""
        for c in range(self.C):
            self._pull(model, c, docs=True, lists=False, assignments=False)

    def _pull(self, model, c, docs, lists, assignments):
        hook = self.hook
        keys = (hook.DOC_KEYS if docs else ()) + (hook.ASSIGNMENT_KEYS if assignments else ())
        if keys:
            parts = self._get([w.pull.remote(c, keys) for w in self.workers], "sync")
            self.stats["sync_bytes"] += sum(a.nbytes for p in parts for a in p.values())
            for p, r in zip(parts, self.ranges):
                hook.put_state(model, c, r, p)
        if lists:
            for t, payload in zip(self.terms, self._get(self.slices[c], "sync")):
                self.stats["sync_bytes"] += _nbytes(payload)
                hook.put_slice(model, c, t, payload)
            hook.after_lists(model, c)
        model.executor_stats_ = dict(self.stats)


class SweepRunner(RayRunner):
    """Sweeps whose units share nothing while they run: AD-LDA shards against a copy of global
    tables (TCM), or whole chains (gLDA). Every worker sweeps what it owns of every chain with
    the sweep's parameters (one object a chain, put once for every worker), and the driver
    merges what comes back, as the local trainer merges after its sweep. ``hook`` gives:

    ``unit``, ``n_units(model)``
        what a worker owns a range [u0, u1) of ("shard" or "chain"), and how many there are;
    ``worker``, ``worker_layout(model, u0, u1)``, ``worker_args(model, corpus)``
        the :class:`RayWorker` subclass, which defines ``sweep(c, params)``, and what it takes;
    ``owns(c, r)``
        whether the worker of units ``r`` = (u0, u1) holds state of chain c;
    ``chain_state(model, c, r)`` / ``put_state(model, c, r, part)``, ``DOC_KEYS``,
    ``ASSIGNMENT_KEYS``
        as for :class:`PartitionRunner`;
    ``before_sweeps(model, it)``, ``sweep_params(model, c)``
        the local trainer's work before sweep ``it``, then what chain c's sweep reads;
    ``merge(model, c, parts)``
        chain c's ``(r, part)`` of every worker that swept it, into the model;
    ``after_sweeps(model, it, runner)``
        the local trainer's work after the sweeps (``runner.pull_docs(model)`` as above).
    """

    def __init__(self, executor, model, hook):
        super().__init__(executor, model)
        self.hook = hook
        self.unit = hook.unit

    def start(self, model, corpus, checkpoint):
        hook = self.hook
        self._start_ray(model, checkpoint, hook.n_units(model))
        self.ranges = [(int(self.shard0[a]), int(self.shard0[a + 1])) for a in range(self.W)]
        self._spawn(hook.worker, [(hook.worker_layout(model, *r), self.C,
                                   *hook.worker_args(model, corpus)) for r in self.ranges])
        for c in range(self.C):
            for w, r in self._owners(c):
                w.load.remote(c, hook.chain_state(model, c, r))

    def _owners(self, c):
        return [(w, r) for w, r in zip(self.workers, self.ranges) if self.hook.owns(c, r)]

    def step(self, model, corpus, it):
        hook, C = self.hook, self.C
        hook.before_sweeps(model, it)
        t = time.perf_counter()
        refs, sent = [], 0
        for c in range(C):
            params = hook.sweep_params(model, c)
            sent += _deep_nbytes(params) * len(self._owners(c))
            ref = ray.put(params)
            refs.append([(r, w.sweep.remote(c, ref)) for w, r in self._owners(c)])
        got = iter(self._get([ref for rs in refs for _, ref in rs], f"sweep {it + 1}"))
        moved = 0
        for c in range(C):
            parts = [(r, next(got)) for r, _ in refs[c]]
            moved += _deep_nbytes([p for _, p in parts])
            hook.merge(model, c, parts)
        dt = time.perf_counter() - t
        self.stats.update(rounds=self.stats["rounds"] + C, sweeps=self.stats["sweeps"] + 1,
                          workers=self.W, sweep_seconds=dt, tokens_per_s=C * corpus.n_tokens / dt,
                          slice_bytes_per_sweep=moved, n_k_bytes_per_sweep=sent)
        model.executor_stats_ = dict(self.stats)
        hook.after_sweeps(model, it, self)

    def sync(self, model, counts, assignments):
        hook = self.hook
        keys = (hook.DOC_KEYS if counts else ()) + (hook.ASSIGNMENT_KEYS if assignments else ())
        self._pull(model, tuple(dict.fromkeys(keys)))

    def pull_docs(self, model):
        self._pull(model, self.hook.DOC_KEYS)

    def _pull(self, model, keys):
        if not keys:
            return
        for c in range(self.C):
            owners = self._owners(c)
            parts = self._get([w.pull.remote(c, keys) for w, _ in owners], "sync")
            self.stats["sync_bytes"] += _deep_nbytes(parts)
            for (_, r), p in zip(owners, parts):
                self.hook.put_state(model, c, r, p)
        model.executor_stats_ = dict(self.stats)


def _ray_reports_to_log():
    """Ray's driver prints its raylet's error reports (a lost worker: a screenful) on stdout and
    logs an "Unhandled error" for every result a dead worker left unread; they go to this
    module's log at DEBUG instead, since :class:`WorkerLostError` says what happened. Ray's
    session logs keep them too."""
    try:
        import ray._private.worker as driver

        original = driver.print_to_stdstream
    except (ImportError, AttributeError):  # another Ray: its reports stay as they are
        return
    if getattr(original, "raylet_to_log", False):
        return

    def print_to_stdstream(data, *args, **kwargs):
        if data.get("pid") != "raylet":
            return original(data, *args, **kwargs)
        for line in data.get("lines", ()):
            log.debug("Ray: %s", line)

    def unhandled_to_log(record):
        if not record.getMessage().startswith("Unhandled error"):
            return True
        log.debug("Ray: %s", record.getMessage())
        return False

    print_to_stdstream.raylet_to_log = True
    driver.print_to_stdstream = print_to_stdstream
    logging.getLogger(driver.__name__).addFilter(unhandled_to_log)


def _alive(worker):
    try:
        ray.get(worker.pid.remote(), timeout=10)
        return True
    except Exception:  # any failure to answer counts as dead here
        return False
