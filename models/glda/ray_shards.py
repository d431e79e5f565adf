"""gLDA's document shards on Ray with their state on the workers (``n_shards`` > 1 and
``RayExecutor(state="workers")``), the local trainer's sharded sweep bit for bit.

Worker a owns the shards [s0, s1) of every chain: it reads their documents' tokens itself and
holds, per shard, a local :class:`models.glda.model.GroupedLDA` of the chains over that shard's
documents (``n_shards=1``): groups, group topics, rng streams; and one working copy of the
counts of its documents' terms (chains x its terms x K), which its shards share. The driver
holds what does not grow with the tokens: every chain's topic-word counts and totals (C x V x K),
the priors and the traces. A sweep sends every worker its terms' rows of the counts as the sweep
starts; the worker sweeps each of its shards from them with the local kernel on the shard's
stream (what the local trainer's :func:`models.glda.sweep_kernels.sweep_shards` does with its copies)
and returns its shards' changes of the counts as (flat index, change) pairs, which the driver
adds: integer sums, in any order the same. The log-likelihood's document terms are summed by
the workers in turn (the local float); kept samples and checkpoints are written by the workers
as parts (:mod:`models.common.executors.sharded`), the model file by the driver from them (LDA's).
"""
import time
from pathlib import Path

import numpy as np
import ray

from ..common.corpus import make_corpus, read_only
from ..common.executors.ray import RayRunner, RayWorker, nbytes
from ..common.executors.sharded import ShardHook, ShardWorker, WorkerStateLoop, base_sweep, shard_bounds, source
from ..common.gibbs import rows_csr
from ..common.kernels.dirichlet import sum_from, topic_word_log_lik
from ..common.kernels.rng import make_rng_states
from ..lda import kernels as K_
from ..lda.layout import count_shift
from ..lda.ray import LdaShardHook
from . import files
from . import kernels as G_
from . import sweep_kernels as SW_


def shard_runner(executor, model):
    return GldaShardRunner(executor, model)


class GldaShardWorker(ShardWorker, RayWorker):
    """Shards [s0, s1) of every chain, each a local gLDA model of the chains over its documents;
    the shards share one buffer of counts, set to the sweep's start before each one's sweep."""

    SAMPLE_ENTRIES = "kd_doc"

    def setup(self, cls, params):
        self.cls, self.params = cls, params

    def build(self):
        """Reads the tokens and lays out every shard, its documents' terms numbered among this
        worker's (``terms``, increasing global ids: the rows of the counts it holds); returns its
        longest document, most groups in a document (the driver's maxima size every shard's
        scratch, as locally) and ``terms``."""
        self.read_tokens()
        lay = self.lay
        self.terms = np.unique(self.term_ids)
        local = np.searchsorted(self.terms, self.term_ids).astype(np.int32)
        self.shards = []
        for a, b in zip(lay["shard_doc"][:-1], lay["shard_doc"][1:]):
            t0, t1 = int(self.doc_ptr[a]), int(self.doc_ptr[b])
            corpus = make_corpus(read_only(self.doc_ptr[a:b + 1] - t0), read_only(local[t0:t1]),
                                 n_terms=len(self.terms), fingerprint="")
            m = self.cls(**dict(self.params, n_shards=1, n_jobs=1))
            m._n_terms = lay["V"]  # the model's vocabulary: its smoothing's V beta
            m._build_layout(corpus)
            m._alloc_chain_state(corpus)
            m._keep_sample_state = False
            m.rng_ = np.zeros((len(self.chain), 1, 4), np.uint64)
            m.alpha_ = np.zeros((len(self.chain), m.n_topics))
            self.shards.append((corpus, m))
        del self.doc_ptr, self.term_ids
        self.n_kw = self.shards[0][1].n_kw_
        self.n_k = self.shards[0][1].n_k_
        for _, m in self.shards:
            m.n_kw_, m.n_k_ = self.n_kw, self.n_k
        return (max(int(m._lay["max_len"]) for _, m in self.shards),
                max(int(m._lay["max_groups"]) for _, m in self.shards), self.terms)

    def set_limits(self, max_len, max_groups):
        for _, m in self.shards:
            m._lay.update(max_len=max_len, max_groups=max_groups, cshift=count_shift(m.n_topics, max_len))

    def _topics(self, m):
        """Every chain's token topics of shard model ``m`` (document order)."""
        return [m._z_doc(c) for c in range(len(self.chain))]

    def _each_shard(self, counts, fn, started=True):
        """``fn(corpus, model)`` on every shard from the counts ``counts`` (n_kw of this worker's
        terms, n_k); returns the shards' summed changes of the counts as (flat index into the
        driver's (chains, V, K) counts, change). A shard's changes are read off its tokens'
        topics before and after (none before a start) and taken back out of the working counts
        for the next shard: no pass over the whole counts per shard."""
        n_kw0, n_k0 = counts
        np.copyto(self.n_kw, n_kw0)
        np.copyto(self.n_k, n_k0)
        wbits0 = G_.word_bits(self.n_kw)  # the start's bitsets, as the local sweep builds them
        C, V, K = self.n_kw.shape
        total = np.zeros_like(self.n_kw)
        total_k = np.zeros(n_k0.shape, np.int64)
        for corpus, m in self.shards:
            before = self._topics(m) if started else [np.full(corpus.n_tokens, -1, np.int32)] * C
            m._wbits = wbits0.copy()
            m._with_threads(fn, corpus, m)
            for c, z in enumerate(self._topics(m)):
                SW_.take_back_changes(corpus.term_ids, before[c], z, self.n_kw[c], total[c])
            total_k += self.n_k - n_k0
            np.copyto(self.n_k, n_k0)
        idx = np.flatnonzero(total)
        change = total.reshape(-1)[idx]
        c, rest = np.divmod(idx, V * K)
        row, k = np.divmod(rest, K)
        return ((c * self.lay["V"] + self.terms[row]) * K + k, change), total_k

    def start(self, counts, rng, alpha):
        """Every shard's start on its streams ``rng[:, i]`` (from zero counts, as locally)."""
        for i, (_, m) in enumerate(self.shards):
            m.rng_[:, 0], m.alpha_[:] = rng[:, i], alpha
        return self._each_shard(counts, lambda corpus, m: m._init_chains(corpus), started=False)

    def sweep(self, counts):
        return self._each_shard(counts, lambda corpus, m: m._step(corpus, None))

    def log_lik_docs(self, c, total):
        """``total`` plus the documents' terms of chain c's log p(z), shard after shard."""
        for _, m in self.shards:
            dt, dt_nnz = m._doc_lists(c)
            lay = m._lay
            total = sum_from(total, K_._log_lik_doc_parts(lay["cap_ptr"], dt, lay["cshift"], dt_nnz,
                                                          np.ones(len(dt_nnz), np.uint8), m.alpha_[c]))
        return total

    def sample_part(self, c, s):
        """Chain c's topic-major postings of the documents of shard s (global ids)."""
        i = s - self.lay["s0"]
        _, m = self.shards[i]
        dt, dt_nnz = m._doc_lists(c)
        K = m.n_topics
        nnz = int(dt_nnz.sum())
        ptr, doc, count = np.zeros(K + 1, np.int64), np.empty(nnz, np.int32), np.empty(nnz, np.int32)
        K_._doc_lists_to_postings(m._lay["cap_ptr"], dt, m._lay["cshift"], dt_nnz, K, ptr, doc, count)
        doc += self.lay["d0"] + self.lay["shard_doc"][i]
        return dict(kd_ptr=ptr, kd_doc=doc, kd_count=count)

    def state_part(self, s):
        """Shard s's groups and group topics of every chain (one row each) and its streams."""
        _, m = self.shards[s - self.lay["s0"]]
        gz = np.concatenate([m.g_, m.zg_], axis=1).astype(m._gz_file_dtype())
        return {"gz": gz, "rng": m.rng_[:, 0].copy()}

    def check_state(self, path, s, arrays):
        corpus, m = self.shards[s - self.lay["s0"]]
        gz, rng = arrays.get("gz"), arrays.get("rng")
        C = len(self.chain)
        if gz is None or gz.shape != (C, corpus.n_tokens + m.zg_.shape[1]) or gz.dtype.kind not in "iu" \
                or rng is None or rng.shape != (C, 4) or rng.dtype != np.uint64:
            fault = f"shapes or arrays not those of shard {s}"
        else:
            fault = files.group_fault(m, corpus, gz.astype(np.int64))
        if fault:
            raise ValueError(f"{path}: damaged state part ({fault}); delete the checkpoint to start afresh")

    def resume(self, directory, checkpoint, base, state, samples, alpha):
        """Check this worker's parts, set its shards from their state parts; returns the shards'
        counts of this worker's terms (chains, terms, K)."""
        for listed in samples:
            self.check_parts(directory, checkpoint, base, listed)
        parts = self.check_parts(directory, checkpoint, base, state)
        s0 = self.lay["s0"]
        for i, (corpus, m) in enumerate(self.shards):
            s = s0 + i
            if s not in parts:
                raise ValueError(f"{checkpoint}: lists no state part of shard {s}; delete it to start afresh")
            self.check_state(Path(directory) / f"state.shard{s}.sweep{base_sweep(state, s)}.npz", s, parts[s])
        total = np.zeros(self.n_kw.shape, np.int32)
        for i, (corpus, m) in enumerate(self.shards):
            m.alpha_[:] = alpha
            m.rng_[:, 0] = parts[s0 + i]["rng"]
            for c in range(len(self.chain)):
                m._set_chain_state(corpus, c, parts[s0 + i]["gz"][c])
            total += self.n_kw
        return total


class GldaShardHook(ShardHook):
    """What :class:`WorkerStateLoop` asks of the kind: LDA's model file from the parts."""

    write_model = staticmethod(LdaShardHook.write_model)
    loaded = staticmethod(LdaShardHook.loaded)


class GldaShardRunner(WorkerStateLoop, RayRunner):
    """The fit loop of :class:`WorkerStateLoop` over gLDA's shards (module docstring)."""

    def __init__(self, executor, model):
        super().__init__(executor, model)
        self.hook = GldaShardHook()

    def _setup(self, model, corpus):
        self._start_ray(model, self.checkpoint)
        S, C = self.S, model.n_chains
        shard_doc = shard_bounds(corpus, S)
        self.ranges, args = [], []
        params = {k: v for k, v in model.get_params().items() if k != "executor"}
        for a in range(self.W):
            s0, s1 = int(self.shard0[a]), int(self.shard0[a + 1])
            d0, d1 = int(shard_doc[s0]), int(shard_doc[s1])
            self.ranges.append((s0, s1))
            lay = dict(s0=s0, S=S, d0=d0, d1=d1, D=corpus.n_docs, V=corpus.n_terms,
                       shard_doc=shard_doc[s0:s1 + 1] - d0,
                       doc_src=source(corpus.doc_ptr, d0, d1 + 1),
                       tok_src=source(corpus.term_ids, int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])))
            args.append((lay, C, type(model), params))
        self._spawn(GldaShardWorker, args)
        limits = self._get([w.build.remote() for w in self.workers], "reading the corpus")
        self.terms = [x[2] for x in limits]
        self._get([w.set_limits.remote(max(x[0] for x in limits), max(x[1] for x in limits))
                   for w in self.workers], "reading the corpus")
        self.n_kw = np.zeros((C, corpus.n_terms, model.n_topics), np.int32)
        self.n_k = np.zeros((C, model.n_topics), np.int64)

    def _add(self, answers):
        """The workers' changes of the counts (``(index, change), n_k change`` each) added in."""
        flat = self.n_kw.reshape(-1)
        moved = 0
        for (idx, delta), delta_k in answers:
            flat[idx] += delta  # distinct indices
            self.n_k += delta_k
            moved += nbytes((idx, delta, delta_k))
        return moved

    def _round(self, method, what, args=None):
        """Every worker's ``method(counts, *args[a])`` from the counts of its terms as they are
        now; their changes added in. Returns the bytes sent to the workers and back."""
        args = args or [()] * self.W
        counts = [(np.ascontiguousarray(self.n_kw[:, t]), self.n_k) for t in self.terms]
        sent = nbytes(counts)
        refs = [getattr(w, method).remote(ray.put(part), *a) for w, part, a in zip(self.workers, counts, args)]
        del counts
        return sent, self._add(self._get(refs, what))

    def _start_fresh(self, model, corpus):
        C, S = model.n_chains, self.S
        rng = make_rng_states(model.seed, C, S)
        model.alpha_ = np.full((C, model.n_topics), model._alpha0())
        self._round("start", "initialisation", [(rng[:, s0:s1], model.alpha_) for s0, s1 in self.ranges])

    def _load_chains(self, model):
        """Nothing to hand over: the shards' state never leaves their workers."""

    def _gather(self, model):
        """Nothing to pull: the driver's counts are current after every sweep."""

    def step(self, model, corpus, it):
        t = time.perf_counter()
        sent, moved = self._round("sweep", f"sweep {it + 1}")
        dt = time.perf_counter() - t
        self.stats.update(rounds=self.stats["rounds"] + 1, sweeps=self.stats["sweeps"] + 1, workers=self.W,
                          sweep_seconds=dt, tokens_per_s=self.C * corpus.n_tokens / dt,
                          # every worker's terms' counts as the sweep starts, the shards' changes back
                          slice_bytes_per_sweep=sent + moved, changed_bytes_per_sweep=moved,
                          counts_bytes_per_sweep=sent, n_k_bytes_per_sweep=0)
        model.executor_stats_ = dict(self.stats)

    def _log_liks(self, model):
        out = []
        for c in range(self.C):
            ll = topic_word_log_lik(self.n_kw[c], self.n_k[c], float(model.beta))
            total = 0.0
            for w in self.workers:
                total = self._get(w.log_lik_docs.remote(c, total), "log-likelihood")
            out.append((ll + total) / max(int(self.n_k[c].sum()), 1))
        return out

    def _sample_words(self, model, c):
        tw_ptr, tw_topic, tw_count = rows_csr(self.n_kw[c])
        return dict(tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count, n_k=self.n_k[c].copy(),
                    alpha=model.alpha_[c].copy())

    def _resume_workers(self, model, corpus, path, h, start):
        refs = [w.resume.remote(str(self.dir), str(path), self.base, h["state_parts"],
                                [s["shards"] for s in h["samples"]], model.alpha_) for w in self.workers]
        self.n_kw[:] = 0
        for terms, ref in zip(self.terms, refs):  # one worker's counts at a time
            self.n_kw[:, terms] += self._get(ref, "resuming")
        self.n_k[:] = self.n_kw.sum(axis=1)
