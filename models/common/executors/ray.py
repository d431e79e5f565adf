"""Gibbs sweeps on Ray workers, giving exactly the model of the local trainer.

:class:`RayExecutor` is what ``executor="ray"`` builds; its runner is the model class's
(``_ray_runner(executor)``, which imports Ray). :class:`RayRunner` is what every runner shares:
Ray started or joined, one actor per contiguous range of the shards (or chains), the
lost-worker error; :class:`RayWorker` is what every actor shares. The runners:

- :class:`models.common.executors.rounds.PartitionRunner`: the partition rounds of the kinds
  whose shards sample term groups in turn (LDA, PAM, tree-LDA);
- :class:`models.common.executors.sweeps.SweepRunner`: sweeps whose units share nothing while
  they run, merged on the driver (TCM's shards, gLDA's chains);
- with ``state="workers"``, :class:`models.common.executors.sharded.ShardedRunner` (the
  partition rounds) and :class:`models.common.executors.chains.ChainRunner` (gLDA's whole
  chains), whose chain state never leaves the workers.

A kind's ``ray.py`` gives its worker and the hook that tells the runner what its state is. The
driver keeps the model object: initialisation, the log-likelihood, kept samples,
hyperparameter updates and checkpoints run there on state pulled back when the fit loop needs
it (see :class:`models.common.executors.LocalRunner` for the protocol).
"""
import logging
import os
import sys
import threading
import time

import numpy as np
import ray
from .memory import peak_memory
from ray.exceptions import ActorDiedError, ObjectLostError, OwnerDiedError, RayActorError, WorkerCrashedError


from .errors import WorkerLostError
from .signals import init_ray, shutdown_ray

log = logging.getLogger(__name__)

STATES = ("driver", "workers")
MEMORY_CAP_ENV = "TOPICIR_RAY_WORKER_MEMORY"
MEMORY_EXIT = 86  # a worker past its memory cap
# Kinds whose chain state can stay on the workers for the whole fit.
WORKER_STATE_KINDS = ("lda", "pam", "glda", "tree-lda", "tcm")

_DIED = (RayActorError, WorkerCrashedError, ObjectLostError, OwnerDiedError)
# Workers import the models package from where the driver imported it (same code on both sides).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def worker_env():
    """The runtime environment of every actor and task: this package on PYTHONPATH."""
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (_ROOT, os.environ.get("PYTHONPATH")) if p)}}


def sum_parts(parts):
    """The sum of the arrays ``parts`` yields, taken as they come: the driver holds the sum and
    one part, not every worker's part at once (tree-LDA's are nodes x K per chain)."""
    total = None
    for part in parts:
        if total is None:
            total = np.array(part)
        else:
            total += part
    return total


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
    state : {"driver", "workers"}
        "driver": the driver keeps the model and pulls the chain state back for the
        log-likelihood, kept samples and checkpoints. "workers" (LDA, PAM, TCM, gLDA, tree-LDA): the
        token-sized state never leaves the workers, which read their documents themselves and
        write their parts of kept samples and checkpoints
        (:mod:`models.common.executors.sharded`; gLDA's and TCM's shards: their ``ray_shards.py``;
        whole chains: :mod:`models.common.executors.chains`); the parts directory must be one every worker
        reaches at the same path.
    worker_memory : int or None
        A cap in bytes on every worker's peak resident memory (``VmHWM``, shared pages it
        touched included): a worker checks it between its calls and every 50 ms while Python
        runs, and exits once past it, which fails the fit as a lost worker. None: no cap.
    """

    def __init__(self, address=None, n_workers=None, state="driver", worker_memory=None):
        if n_workers is not None and (not isinstance(n_workers, int) or n_workers < 1):
            raise ValueError(f"n_workers must be an int >= 1 or None, got {n_workers!r}")
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}, got {state!r}")
        if worker_memory is not None and (not isinstance(worker_memory, int) or worker_memory < 1):
            raise ValueError(f"worker_memory must be a number of bytes >= 1 or None, got {worker_memory!r}")
        self.address = address
        self.n_workers = n_workers
        self.state = state
        self.worker_memory = worker_memory
        self.last_runner = None

    def __repr__(self):
        return (f"RayExecutor(address={self.address!r}, n_workers={self.n_workers!r}, state={self.state!r}, "
                f"worker_memory={self.worker_memory!r})")

    def runner(self, model):
        self.last_runner = model._ray_runner(self)
        return self.last_runner

    def worker_pids(self):
        """Process ids of the workers of the current (or last) training run."""
        return self.last_runner.worker_pids()

    def worker_peaks(self):
        """Every worker's peak resident memory so far, in bytes (``VmHWM``), while they run."""
        return ray.get([w.peak_memory.remote() for w in self.last_runner.workers])


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
        cap = getattr(self.ex, "worker_memory", None)
        env = worker_env()
        if cap is not None:  # read by RayWorker.__init__, so the cap holds from its first byte
            env["env_vars"][MEMORY_CAP_ENV] = str(cap)
        self.workers = [actor.options(runtime_env=env).remote(*a) for a in args]
        self._pids = self._get([w.pid.remote() for w in self.workers], "starting")

    def worker_pids(self):
        return list(self._pids)

    def checkpointed(self, iteration):
        self.last_ckpt = iteration

    def _get(self, refs, what):
        try:
            return ray.get(refs)
        except _DIED as e:
            dead = _dead(self.workers)
            who = ", ".join(f"Ray worker {a} ({self.unit}s {self.shard0[a]}-{self.shard0[a + 1] - 1})"
                            for a in dead) or "a Ray worker"
            log.debug("Ray's report of the lost worker: %s", e)
            ckpt = None if self.checkpoint is None else os.fspath(self.checkpoint)
            cause = type(e).__name__
            cap = getattr(self.ex, "worker_memory", None)
            if cap is not None:
                cause += f"; a worker exits past worker_memory={cap / 2**20:.0f} MiB"
            raise WorkerLostError(who, what, ckpt, self.last_ckpt, cause) from None

    def _sum(self, refs, what):
        """The sum of the workers' arrays, fetched one at a time (:func:`sum_parts`)."""
        return sum_parts(self._get(r, what) for r in refs)

    def close(self):
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._owns_ray:
            shutdown_ray()


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


def nbytes(obj):
    """Bytes of the arrays in ``obj`` (an array, or tuples, lists and dicts of them)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (tuple, list)):
        return sum(map(nbytes, obj))
    if isinstance(obj, dict):
        return sum(map(nbytes, obj.values()))
    return 0


class RayWorker:
    """A Ray actor that owns a range of units (``lay``: its layout) of every chain; the state of
    chain c is the dict ``chain[c]``. A kind's subclass adds ``setup(*args)`` (its buffers) and
    its sweep."""

    def __init__(self, lay, n_chains, *args):
        cap = os.environ.get(MEMORY_CAP_ENV)
        if cap:
            threading.Thread(target=_watch_memory, args=(int(cap),), daemon=True).start()
        self.lay = lay
        self.chain = [None] * n_chains
        self.setup(*args)

    def setup(self, *args):
        """The worker's own buffers (``args``: what the kind's hook passes)."""

    def pid(self):
        return os.getpid()

    def peak_memory(self):
        return peak_memory()

    def load(self, c, state):
        self.chain[c] = own(state)

    def update(self, c, params):
        self.chain[c].update(own(params))

    def pull(self, c, keys):
        return {k: self.chain[c][k] for k in keys}


def _watch_memory(cap):
    """A worker's cap (RayExecutor's ``worker_memory``): the peak resident memory is checked
    every 50 ms while Python runs (a kernel holds the interpreter until it returns; the peak is
    kept, so it is caught then); past the cap the process exits."""
    while True:
        peak = peak_memory()
        if peak > cap:
            print(f"topicir: Ray worker {os.getpid()} at {peak / 2**20:.0f} MiB resident, past its cap of "
                  f"{cap / 2**20:.0f} MiB (worker_memory); exiting", file=sys.stderr, flush=True)
            os._exit(MEMORY_EXIT)
        time.sleep(0.05)


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


def _dead(workers, timeout=30.0):
    """The indices of the workers Ray reports dead. A ping waits behind the worker's queued
    tasks, so a worker still busy with its part of the failed round (a loaded machine) does not
    answer in time: only a ping that fails with ActorDiedError names a worker."""
    pings = [w.pid.remote() for w in workers]
    ray.wait(pings, num_returns=len(pings), timeout=timeout)
    dead = []
    for a, ping in enumerate(pings):
        try:
            ray.get(ping, timeout=0)
        except ActorDiedError:
            dead.append(a)
        except Exception:  # busy (GetTimeoutError) or unreachable for now: not known dead
            pass
    return dead
