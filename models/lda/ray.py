"""LDA sweeps on Ray workers, giving exactly the model of the local trainer.

Layout: worker a owns a contiguous range of document shards [s0, s1), hence a contiguous range
of tokens (sweep order is shard first), of documents and of doc lists. Its tokens, assignments,
doc-topic lists and the rng streams of its shards stay on it. The topic-word counts live as S
term-group slices (the sparse term lists of the terms of group g, as (nnz per term, packed
entries)), which flow between workers through Ray's object store.

Round (chain c, sub-step j) is the local sub-step: every shard s samples its tokens of term
group (s + j) mod S against its copy of n_k, on its own rng stream, with the same kernel
(:func:`models.lda.doc_kernels.sweep_block`). A worker returns the slices it updated and the
n_k deltas of its shards; the next round of the chain takes those deltas from every worker
(integer sums, so the merge is the local one exactly), and each slice goes to the shard that
samples its group next. The driver only submits rounds and passes object references: a whole
sweep of every chain is submitted at once and the driver waits once per sweep, for the deltas.

The driver keeps the model object: initialisation (the online pass is sequential), the
log-likelihood, kept samples, alpha's optimisation and checkpoints run there on state it pulls
back when the fit loop needs it (see :class:`models.common.executors.LocalRunner` for the protocol).
"""
import os
import time

import numpy as np
import ray

from ..common.executors.ray import RayRunner, _nbytes, worker_env
from ..common.executors.rounds import merge_deltas
from . import doc_kernels as lda_doc


def compact_lists(wcap_ptr, wl, wl_nnz, terms):
    """The used part of the term lists of ``terms``: (nnz per term int32, entries)."""
    nnz = wl_nnz[terms].astype(np.int32)
    off = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
    idx = np.repeat(wcap_ptr[terms] - off[:-1], nnz) + np.arange(off[-1])
    return nnz, wl[idx]


def scatter_lists(payload, wcap_ptr, terms, wl, wl_nnz):
    """Write compacted lists back at their capacities ``wcap_ptr[terms]`` in wl and wl_nnz."""
    nnz, entries = payload
    off = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
    wl[np.repeat(wcap_ptr[terms] - off[:-1], nnz) + np.arange(off[-1])] = entries
    wl_nnz[terms] = nnz


class ShardWorker:
    """A Ray actor: the shards [s0, s1) of every chain, sampled one block at a time."""

    def __init__(self, lay, n_chains, n_topics, beta, vbeta):
        self.lay = lay
        self.beta, self.vbeta = beta, vbeta
        K = n_topics
        P = 1
        while P < K:
            P *= 2
        self.tree, self.inv, self.pbuf = np.zeros(2 * P), np.zeros(K), np.zeros(K)
        self.ndk, self.topics = np.zeros(K, np.int32), np.zeros(K, np.int32)
        self.listed = np.zeros(K, np.uint8)
        self.n_k = np.zeros((n_chains, K), np.int64)
        self.chain = [None] * n_chains
        gcap = lay["gcap"]
        self.buf = np.zeros(max(int(g[-1]) for g in gcap), lay["wdtype"])

    def pid(self):
        return os.getpid()

    def load(self, c, z, dt, dt_nnz, rng, alpha, active, n_k):
        self.chain[c] = dict(z=np.array(z), dt=np.array(dt), dt_nnz=np.array(dt_nnz),
                             rng=np.array(rng), alpha=np.array(alpha), active=np.array(active))
        self.n_k[c] = n_k

    def set_alpha(self, c, alpha):
        self.chain[c]["alpha"] = np.array(alpha)

    def set_active(self, c, active):
        self.chain[c]["active"] = np.array(active)

    def round(self, c, j, n_deltas, *args):
        """Sub-step j of chain c: add the previous round's merged n_k delta (``args[0]`` when
        ``n_deltas``), then sample every owned shard s on term group (s + j) mod S (its
        slice in ``args``). Returns the updated slices and (this worker's n_k delta, slice sizes)."""
        lay, st = self.lay, self.chain[c]
        if n_deltas:
            self.n_k[c] += args[0]
        slices = args[n_deltas:]
        S = len(lay["gcap"])
        out, delta, sizes = [], np.zeros(self.n_k.shape[1], np.int64), []
        for i, payload in enumerate(slices):
            s = lay["s0"] + i
            g = (s + j) % S
            gcap = lay["gcap"][g]
            terms = np.arange(len(gcap) - 1)
            wl_nnz = np.empty(len(terms), np.int32)
            scatter_lists(payload, gcap, terms, self.buf, wl_nnz)
            local = self.n_k[c].copy()
            lda_doc.sweep_block(
                lay["bvp"][i, g], lay["bvp"][i, g + 1],
                lda_doc.Visits(lay["visit_ptr"], lay["visit_doc"], lay["word"]), st["z"], local,
                lda_doc.WordLists(gcap, self.buf, lay["wshift"], wl_nnz),
                lda_doc.DocLists(lay["cap_ptr"], st["dt"], lay["cshift"], st["dt_nnz"], st["active"]),
                st["alpha"], self.beta, self.vbeta,
                lda_doc.Scratch(self.tree, self.inv, self.ndk, self.listed, self.topics, self.pbuf),
                st["rng"][i])
            delta += local - self.n_k[c]
            out.append(compact_lists(gcap, self.buf, wl_nnz, terms))
            sizes.append(_nbytes(out[-1]))
        return (*out, (delta, sizes))

    def pull(self, c, docs, assignments):
        st = self.chain[c]
        out = {}
        if docs:
            out.update(dt=st["dt"], dt_nnz=st["dt_nnz"])
        if assignments:
            out.update(z=st["z"], rng=st["rng"])
        return out


class _RayRunner(RayRunner):
    # -- setup --------------------------------------------------------------------------------

    def start(self, model, corpus, checkpoint):
        self._start_ray(model, checkpoint)
        S, C, W, lay = self.S, self.C, self.W, model._lay
        cap_ptr, wcap_ptr = lay["cap_ptr"], lay["wcap_ptr"]
        self.terms = [np.flatnonzero(lay["group"] == g) for g in range(S)]
        local_id = np.empty(len(lay["group"]), np.int32)
        gcap = []
        for t in self.terms:
            local_id[t] = np.arange(len(t), dtype=np.int32)
            gcap.append(np.concatenate([[0], np.cumsum(np.diff(wcap_ptr)[t])]).astype(np.int64))
        self.ranges, args = [], []
        self.merge = ray.remote(num_cpus=0, max_retries=0)(merge_deltas).options(
            runtime_env=worker_env())
        for a in range(W):
            s0, s1 = int(self.shard0[a]), int(self.shard0[a + 1])
            t0, t1 = lay["shard_tok_ptr"][s0], lay["shard_tok_ptr"][s1]
            d0, d1 = lay["shard_doc"][s0], lay["shard_doc"][s1]
            v0, v1 = lay["block_visit_ptr"][s0, 0], lay["block_visit_ptr"][s1 - 1, S]
            self.ranges.append((s0, s1, t0, t1, d0, d1))
            wlay = dict(s0=s0, gcap=gcap, wshift=lay["wshift"], wdtype=lay["wdtype"],
                        cshift=lay["cshift"], bvp=lay["block_visit_ptr"][s0:s1] - v0,
                        visit_ptr=lay["visit_ptr"][v0:v1 + 1] - t0,
                        visit_doc=(lay["visit_doc"][v0:v1] - d0).astype(np.int32),
                        word=local_id[lay["ord_word"][t0:t1]],
                        cap_ptr=cap_ptr[d0:d1 + 1] - cap_ptr[d0])
            args.append((wlay, C, model.n_topics, float(model.beta), corpus.n_terms * float(model.beta)))
        self._spawn(ShardWorker, args)
        self.slices = [[None] * S for _ in range(C)]
        self.pending = [[] for _ in range(C)]
        for c in range(C):
            self._push_chain(model, c)
        self.n_active = None

    def _push_chain(self, model, c):
        """Ship chain c's state from the model's arrays to the workers."""
        cap_ptr = model._lay["cap_ptr"]
        for w, (s0, s1, t0, t1, d0, d1) in zip(self.workers, self.ranges):
            w.load.remote(c, model.z_ord_[c, t0:t1], model.dt_[c, cap_ptr[d0]:cap_ptr[d1]],
                          model.dt_nnz_[c, d0:d1], model.rng_[c, s0:s1], model.alpha_[c],
                          model._active[c, d0:d1], model.n_k_[c])
        wcap = model._lay["wcap_ptr"]
        for g, t in enumerate(self.terms):
            self.slices[c][g] = ray.put(compact_lists(wcap, model.wl_[c], model.wl_nnz_[c], t))
        self.pending[c] = []

    # -- sweeps -------------------------------------------------------------------------------

    def step(self, model, corpus, it):
        D, S, C = corpus.n_docs, self.S, self.C
        model._set_active(it, D)
        n_active = model._sparse_n_active(it, D)
        if n_active != self.n_active:  # sparse initialisation: the active set grew
            for c in range(C):
                for w, (*_, d0, d1) in zip(self.workers, self.ranges):
                    w.set_active.remote(c, model._active[c, d0:d1])
            self.n_active = n_active
        t = time.perf_counter()
        sweep_deltas = [[] for _ in range(C)]
        for j in range(S):
            for c in range(C):  # chains interleaved so that no worker waits on one chain
                prev, cur = self.pending[c], []
                for a, w in enumerate(self.workers):
                    shards = range(*self.ranges[a][:2])
                    groups = [(s + j) % S for s in shards]
                    refs = w.round.options(num_returns=len(groups) + 1).remote(
                        c, j, len(prev), *prev, *[self.slices[c][g] for g in groups])
                    for g, r in zip(groups, refs[:-1]):
                        self.slices[c][g] = r
                    cur.append(refs[-1])
                # one small task sums the workers' deltas; every worker gets the sum next round
                self.pending[c] = [self.merge.remote(*cur)]
                sweep_deltas[c].append(cur)
                self.stats["rounds"] += 1
        flat = [r for c in range(C) for rs in sweep_deltas[c] for r in rs]
        got = iter(self._get(flat, f"sweep {it + 1}"))
        moved = cross = 0
        for c in range(C):
            for j in range(S):
                for a in range(self.W):
                    delta, sizes = next(got)
                    model.n_k_[c] += delta
                    for s, size in zip(range(*self.ranges[a][:2]), sizes):
                        moved += size  # the slice goes to the shard sampling it next round
                        cross += size * (self.owner[(s - 1) % S] != a)
        dt = time.perf_counter() - t
        K = model.n_topics
        active_tokens = int(np.diff(corpus.doc_ptr)[model._active[0] == 1].sum())
        self.stats.update(
            sweeps=self.stats["sweeps"] + 1, workers=self.W, sweep_seconds=dt,
            tokens_per_s=C * active_tokens / dt, slice_bytes_per_sweep=moved,
            cross_worker_bytes_per_sweep=cross,
            # per round: W deltas into the merge task, the sum out to W workers and the driver
            n_k_bytes_per_sweep=C * S * (2 * self.W + 1) * 8 * K)
        model.executor_stats_ = dict(self.stats)
        if model._alpha_due(it):
            for c in range(C):
                self._pull(model, c, docs=True, lists=False, assignments=False)
            model._after_sweeps(it)
            for c in range(C):
                for w in self.workers:
                    w.set_alpha.remote(c, model.alpha_[c])

    # -- state back to the driver -------------------------------------------------------------

    def sync(self, model, counts, assignments):
        if counts or assignments:
            for c in range(self.C):
                self._pull(model, c, docs=counts, lists=counts, assignments=assignments)

    def _pull(self, model, c, docs, lists, assignments):
        cap_ptr, lay = model._lay["cap_ptr"], model._lay
        parts = self._get([w.pull.remote(c, docs, assignments) for w in self.workers], "sync")
        self.stats["sync_bytes"] += sum(a.nbytes for p in parts for a in p.values())
        for p, (s0, s1, t0, t1, d0, d1) in zip(parts, self.ranges):
            if docs:
                model.dt_[c, cap_ptr[d0]:cap_ptr[d1]] = p["dt"]
                model.dt_nnz_[c, d0:d1] = p["dt_nnz"]
            if assignments:
                model.z_ord_[c, t0:t1] = p["z"]
                model.rng_[c, s0:s1] = p["rng"]
        if lists:
            for t, payload in zip(self.terms, self._get(self.slices[c], "sync")):
                self.stats["sync_bytes"] += _nbytes(payload)
                scatter_lists(payload, lay["wcap_ptr"], t, model.wl_[c], model.wl_nnz_[c])
            lda_doc.word_lists_to_dense(lay["wcap_ptr"], model.wl_[c], lay["wshift"],
                                        model.wl_nnz_[c], model.n_kw_[c])
        model.executor_stats_ = dict(self.stats)
