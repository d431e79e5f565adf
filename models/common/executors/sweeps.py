"""Sweeps on Ray whose units share nothing while they run (AD-LDA shards, whole chains)."""
import time

import ray

from .ray import RayRunner, nbytes


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
            sent += nbytes(params) * len(self._owners(c))
            ref = ray.put(params)
            refs.append([(r, w.sweep.remote(c, ref)) for w, r in self._owners(c)])
        got = iter(self._get([ref for rs in refs for _, ref in rs], f"sweep {it + 1}"))
        moved = 0
        for c in range(C):
            parts = [(r, next(got)) for r, _ in refs[c]]
            moved += nbytes([p for _, p in parts])
            hook.merge(model, c, parts)
        dt = time.perf_counter() - t
        # the keys of the partition rounds' stats: what comes back from the workers, and the
        # shared state they take (TCM's restaurants) in place of the totals
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
            self.stats["sync_bytes"] += nbytes(parts)
            for (_, r), p in zip(owners, parts):
                self.hook.put_state(model, c, r, p)
        model.executor_stats_ = dict(self.stats)
