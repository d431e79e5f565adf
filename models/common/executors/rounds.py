"""Partition rounds on Ray (Yan et al. 2009, as the local samplers of PAM and tree-LDA run them).

Documents are S shards and terms S groups; in sub-step j shard s samples its tokens of group
(s + j) mod S against its copy of the topic totals. Worker a owns the shards [s0, s1) of every
chain, hence a contiguous range of tokens (sweep order is shard first) and of documents; their
assignments, document counts and the rng streams of its shards stay on it. The topic-word
counts live as S term-group slices, which flow between workers through Ray's object store:
round (chain c, sub-step j) samples every shard's block with the local kernel and returns the
slices it updated and the totals' deltas of its shards; the next round of the chain takes the
deltas of every worker (integer sums, so the merge is the local one exactly), and each slice
goes to the shard that samples its group next. The driver submits a whole sweep of every chain
at once and waits once per sweep.
"""
import time

import numpy as np
import ray

from .ray import RayRunner, RayWorker, nbytes, worker_env


def merge_deltas(*parts):
    """The totals' change of a round: the sum of every worker's (integer, so order-free)."""
    return np.sum([p[0] for p in parts], axis=0)


class PartitionWorker(RayWorker):
    """A Ray actor: the shards [s0, s1) of every chain, for :class:`PartitionRunner`. A kind's
    subclass defines ``sweep_block(c, i, g, payload, totals)``: sample block (shard s0 + i,
    term group g) of chain c with that group's slice ``payload`` against ``totals`` (changed
    in place), and return the updated slice and the block's counters (int64 array); and
    ``merged(c)`` where something follows from the totals once a round's delta is in them."""

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
            sizes.append(nbytes(payload))
        return (*out, (delta, sizes, counts))


class DocumentShards:
    """The ``groups``, ``ranges`` and chain state of a hook whose layout (``model._lay``) shards
    the documents and groups the terms as LDA's does (LDA, PAM). The hook gives
    ``state_slices(model, r)``: every chain-state array with the range of it that the worker
    ``r`` (its (s0, s1, t0, t1, d0, d1)) owns, as ``{key: (array, start, stop)}``."""

    def chain_state(self, model, c, r):
        return {key: table[c, a:b] for key, (table, a, b) in self.state_slices(model, r).items()}

    def put_state(self, model, c, r, part):
        where = self.state_slices(model, r)
        for key, value in part.items():
            table, a, b = where[key]
            table[c, a:b] = value

    @staticmethod
    def groups(model):
        return model._lay["group"]

    @staticmethod
    def ranges(model, s0, s1):
        lay = model._lay
        return (lay["shard_tok_ptr"][s0], lay["shard_tok_ptr"][s1], lay["shard_doc"][s0],
                lay["shard_doc"][s1])


class PartitionRunner(RayRunner):
    """Partition rounds (module docstring) of a kind described by ``hook``, which gives:

    ``worker``
        its :class:`PartitionWorker` subclass;
    ``ranges(model, s0, s1)``
        the token and document ranges (t0, t1, d0, d1) of shards [s0, s1);
    ``worker_layout(model, s0, s1)`` and ``worker_args(model, corpus)``
        what a worker's constructor takes besides (layout, chains, totals' length);
    ``totals(model)``
        the (chains, n) integer totals that the driver keeps current from the deltas (LDA's
        n_k, PAM's n_j, tree-LDA's root row of n_i);
    ``groups(model)``
        the term group of every term (tree-LDA: of every node below the root, -1 elsewhere);
    ``get_slice(model, c, terms)`` / ``put_slice(model, c, terms, payload)``
        a term group's slice of chain c's topic-word counts out of and into the model (LDA's
        sparse term lists, PAM's dense n_wj rows, tree-LDA's node rows);
    ``chain_state(model, c, r)`` / ``put_state(model, c, r, part)``
        a worker's chain state (``r``: its (s0, s1, t0, t1, d0, d1)) out of and into the
        model; ``DOC_KEYS`` and ``ASSIGNMENT_KEYS`` name the parts the fit loop reads;
    ``after_lists(model, c)``
        what follows once chain c's slices are back (tree-LDA: the root's inv row);
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
            n_k_bytes_per_sweep=C * S * (2 * self.W + 1) * 8 * totals.shape[1])
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
            self.stats["sync_bytes"] += nbytes(parts)
            for p, r in zip(parts, self.ranges):
                hook.put_state(model, c, r, p)
        if lists:
            for t, payload in zip(self.terms, self._get(self.slices[c], "sync")):
                self.stats["sync_bytes"] += nbytes(payload)
                hook.put_slice(model, c, t, payload)
            hook.after_lists(model, c)
        model.executor_stats_ = dict(self.stats)
