"""gLDA's document shards on Ray with their state on the workers (``n_shards`` > 1 and
``RayExecutor(state="workers")``), the local trainer's sharded sweep bit for bit.

Worker a owns the shards [s0, s1) of every chain: it reads their documents' tokens itself and
holds, per shard, a local :class:`models.glda.model.GroupedLDA` of the chains over that shard's
documents (``n_shards=1``): groups, group topics, rng streams; and one working copy of the
counts of its documents' terms (chains x its terms x K), which its shards share. The topic-word
counts are owned by the workers too: worker p holds the rows of the term range
[cuts[p], cuts[p + 1]) of every chain. A sweep runs in two rounds, worker to worker through the
object store: every worker sweeps each of its shards from its terms' rows as the sweep started,
with the local kernel on the shard's stream (what the local trainer's
:func:`models.glda.sweep_kernels.sweep_shards` does with its copies), and sends each owner its
shards' changes of the owner's rows as (flat index, change) pairs; every owner adds them (integer
sums, in any order the same) and sends every worker its terms' rows for the next sweep (their
nonzeros where those take fewer bytes). The
driver passes references and holds what does not grow with the tokens or the vocabulary: every
chain's topic totals, the priors and the traces. The log-likelihood's topic-word rows are summed
by the owners in turn and its document terms by the workers in turn (the local float); kept
samples and checkpoints are parts the workers write (:mod:`models.common.executors.sharded`;
each owner its rows of a kept sample), the model file is written from them (LDA's).
"""
import time

import numpy as np

from ..common.corpus import make_corpus, read_only
from ..common.executors.ray import RayWorker, nbytes
from ..common.executors.owners import Owner, OwnerShardRunner, moved_bytes
from ..common.executors.sharded import ShardHook, ShardWorker
from ..common.gibbs import rows_csr
from ..common.kernels.dirichlet import sum_from, topic_totals_log_lik, word_log_lik_parts
from ..common.kernels.rng import make_rng_states
from ..lda import kernels as K_
from ..lda.layout import count_shift
from ..lda.ray import LdaShardHook
from . import files
from . import kernels as G_
from . import sweep_kernels as SW_


def shard_runner(executor, model):
    return GldaShardRunner(executor, model)


class GldaShardWorker(Owner, ShardWorker, RayWorker):
    """Shards [s0, s1) of every chain, each a local gLDA model of the chains over its documents;
    the shards share one buffer of counts, set to the sweep's start before each one's sweep. As
    owner, the count rows of the term range ``lay["cuts"][a]:lay["cuts"][a + 1]``."""

    SAMPLE_ENTRIES = "kd_doc"

    def setup(self, cls, params):
        self.cls, self.params = cls, params

    def build(self):
        """Reads the tokens and lays out every shard, its documents' terms numbered among this
        worker's (``terms``, increasing global ids: the rows of the counts it holds); returns its
        longest document and most groups in a document (the driver's maxima size every shard's
        scratch, as locally), then its terms in every owner's range."""
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
        # this worker's rows of every owner's range: owner p's rows of its terms come in order
        self.by_owner = np.searchsorted(self.terms, lay["cuts"])
        C, W = len(self.chain), lay["W"]
        lo, hi = lay["cuts"][lay["a"]], lay["cuts"][lay["a"] + 1]
        self.rows = np.zeros((C, hi - lo, self.n_kw.shape[2]), np.int32)
        limits = (max(int(m._lay["max_len"]) for _, m in self.shards),
                  max(int(m._lay["max_groups"]) for _, m in self.shards))
        return (limits, *[self.terms[self.by_owner[p]:self.by_owner[p + 1]] for p in range(W)])

    def set_routes(self, *terms):
        """As owner: every worker's terms in its range, as rows of its counts."""
        self.routes = [np.asarray(t, np.int64) - self.lay["cuts"][self.lay["a"]] for t in terms]

    def set_limits(self, max_len, max_groups):
        for _, m in self.shards:
            m._lay.update(max_len=max_len, max_groups=max_groups, cshift=count_shift(m.n_topics, max_len))

    def _topics(self, m):
        """Every chain's token topics of shard model ``m`` (document order)."""
        return [m._z_doc(c) for c in range(len(self.chain))]

    def _each_shard(self, n_k, owned, fn, started=True):
        """``fn(corpus, model)`` on every shard from the counts of this worker's terms (its rows
        from every owner, ``owned[p]``; ``n_k``); returns the shards' summed changes of the
        counts by owner as (flat index into the owner's rows, change), then of n_k. A shard's
        changes are read off its tokens' topics before and after (none before a start) and taken
        back out of the working counts for the next shard: no pass over the whole counts per
        shard."""
        self.n_kw[:] = 0
        b = self.by_owner
        for p, piece in enumerate(owned):
            if isinstance(piece, np.ndarray):
                self.n_kw[:, b[p]:b[p + 1]] = piece
            else:  # the piece's nonzeros
                idx, count = piece
                width = (b[p + 1] - b[p]) * self.n_kw.shape[2]
                c, rest = np.divmod(idx, width)
                row, k = np.divmod(rest, self.n_kw.shape[2])
                self.n_kw[c, b[p] + row, k] = count
        np.copyto(self.n_k, n_k)
        wbits0 = G_.word_bits(self.n_kw)  # the start's bitsets, as the local sweep builds them
        C, V, K = self.n_kw.shape
        total = np.zeros_like(self.n_kw)
        total_k = np.zeros(n_k.shape, np.int64)
        for corpus, m in self.shards:
            before = self._topics(m) if started else [np.full(corpus.n_tokens, -1, np.int32)] * C
            m._wbits = wbits0.copy()
            m._with_threads(fn, corpus, m)
            for c, z in enumerate(self._topics(m)):
                SW_.take_back_changes(corpus.term_ids, before[c], z, self.n_kw[c], total[c])
            total_k += self.n_k - n_k
            np.copyto(self.n_k, n_k)
        return (*self._to_owners(total), total_k)

    def _to_owners(self, total):
        """Changes of this worker's rows (chains, terms, K) as every owner's (index, change)."""
        cuts, b = self.lay["cuts"], self.by_owner
        out = []
        for p in range(self.lay["W"]):
            piece = total[:, b[p]:b[p + 1]]
            idx = np.flatnonzero(piece)
            c, rest = np.divmod(idx, piece.shape[1] * piece.shape[2])
            row, k = np.divmod(rest, piece.shape[2])
            width = cuts[p + 1] - cuts[p]
            out.append(((c * width + self.terms[b[p] + row] - cuts[p]) * piece.shape[2] + k, piece.reshape(-1)[idx]))
        return out

    def start(self, n_k, rng, alpha):
        """Every shard's start on its streams ``rng[:, i]`` (from zero counts, as locally)."""
        for i, (_, m) in enumerate(self.shards):
            m.rng_[:, 0], m.alpha_[:] = rng[:, i], alpha
        return self._each_shard(n_k, (), lambda corpus, m: m._init_chains(corpus), started=False)

    def sweep(self, n_k, *owned):
        return self._each_shard(n_k, owned, lambda corpus, m: m._step(corpus, None))

    def add_changes(self, *changes):
        """As owner: every worker's changes of its rows added; returns the bytes received and
        sent (and those between workers), then every worker's rows of its terms."""
        a = self.lay["a"]
        flat = self.rows.reshape(-1)
        for idx, change in changes:
            flat[idx] += change  # distinct indices within a worker's changes
        out = [_packed(self.rows[:, r]) for r in self.routes]
        return (moved_bytes([nbytes(x) for x in changes], [nbytes(x) for x in out], a), *out)

    def log_lik_rows(self, c, total):
        """As owner: ``total`` plus chain c's topic-word terms of its rows, row after row."""
        return sum_from(total, word_log_lik_parts(self.rows[c], float(self.params["beta"])))

    def owned_part(self, c):
        """As owner: chain c's rows of its range, a kept sample's part."""
        tw_ptr, tw_topic, tw_count = rows_csr(self.rows[c])
        return dict(tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count)

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

    def resume(self, directory, checkpoint, base, state, samples, owned, alpha):
        """Check this worker's parts (its shards' and, as owner, its rows'), set its shards from
        their state parts; returns its shards' counts as every owner's (index, count), then n_k."""
        parts = self.resume_parts(directory, checkpoint, base, state, samples, owned)
        s0 = self.lay["s0"]
        total = np.zeros(self.n_kw.shape, np.int32)
        for i, (corpus, m) in enumerate(self.shards):
            m.alpha_[:] = alpha
            m.rng_[:, 0] = parts[s0 + i]["rng"]
            for c in range(len(self.chain)):
                m._set_chain_state(corpus, c, parts[s0 + i]["gz"][c])
            total += self.n_kw
        return (*self._to_owners(total), total.sum(axis=1, dtype=np.int64))


def _packed(rows):
    """Count rows as they travel: their nonzeros (flat index, count) where that takes fewer
    bytes than the dense rows (a term is in few of many topics), else the rows."""
    idx = np.flatnonzero(rows)
    if rows.size < 2**31:
        idx = idx.astype(np.int32)
    if idx.size * (idx.itemsize + 4) >= rows.nbytes:
        return rows
    return idx, rows.reshape(-1)[idx]


class GldaShardHook(ShardHook):
    """What :class:`WorkerStateLoop` asks of the kind: LDA's model file from the parts."""

    write_model = staticmethod(LdaShardHook.write_model)
    loaded = staticmethod(LdaShardHook.loaded)


class GldaShardRunner(OwnerShardRunner):
    """The fit loop of :class:`WorkerStateLoop` over gLDA's shards (module docstring)."""

    HOOK = GldaShardHook

    def _setup(self, model, corpus):
        self._start_ray(model, self.checkpoint)
        W = self.W
        # every owner's term range: equal numbers of rows (a row is K counts whatever its term)
        self.cuts = np.linspace(0, corpus.n_terms, W + 1).astype(np.int64)
        self._spawn_owners(model, corpus, GldaShardWorker, cuts=self.cuts)
        built = [w.build.options(num_returns=W + 1).remote() for w in self.workers]
        limits = self._get([b[0] for b in built], "reading the corpus")
        self._get([w.set_limits.remote(max(x[0] for x in limits), max(x[1] for x in limits))
                   for w in self.workers] + [w.set_routes.remote(*[b[1 + p] for b in built])
                                             for p, w in enumerate(self.workers)], "reading the corpus")
        self.n_k = np.zeros((model.n_chains, model.n_topics), np.int64)
        self.owned = [[] for _ in range(W)]  # no rows before the start: the workers start from zero counts

    def _round(self, method, what, args=None):
        """Every worker's ``method(n_k, *args[a], *its rows from every owner)``, then the owners'
        sums of the changes it returns (``(index, change)`` by owner, then n_k's), which leave
        every worker's rows for the next round in the object store. Returns the bytes moved."""
        W = self.W
        args = args or [()] * W
        answers = [getattr(w, method).options(num_returns=W + 1).remote(
            self.n_k, *a, *[self.owned[p][i] for p in range(W) if self.owned[p]])
            for i, (w, a) in enumerate(zip(self.workers, args))]
        summed = [w.add_changes.options(num_returns=W + 1).remote(*[r[p] for r in answers])
                  for p, w in enumerate(self.workers)]
        for delta_k in self._get([r[W] for r in answers], what):
            self.n_k += delta_k
        moved = self._get([x[0] for x in summed], what)
        self.owned = [x[1:] for x in summed]
        return {k: sum(m[k] for m in moved) for k in ("received", "sent", "cross")}

    def _start_fresh(self, model, corpus):
        C, S = model.n_chains, self.S
        rng = make_rng_states(model.seed, C, S)
        model.alpha_ = np.full((C, model.n_topics), model._alpha0())
        self._round("start", "initialisation", [(rng[:, s0:s1], model.alpha_) for s0, s1 in self.ranges])

    def step(self, model, corpus, it):
        t = time.perf_counter()
        moved = self._round("sweep", f"sweep {it + 1}")
        # the shards' changes to the rows' owners, every worker's terms' rows back
        self._swept(model, corpus, time.perf_counter() - t, moved)

    def _log_liks(self, model):
        out = []
        for c in range(self.C):
            # the rows in term order, owner after owner; the documents, worker after worker
            ll = topic_totals_log_lik(self._running_sum("log_lik_rows", c), self.n_k[c], int(self.cuts[-1]),
                                      float(model.beta))
            out.append((ll + self._running_sum("log_lik_docs", c)) / max(int(self.n_k[c].sum()), 1))
        return out

    def _sample_words(self, model, c):
        """A kept sample's totals and prior (its rows: the owners' parts)."""
        return dict(n_k=self.n_k[c].copy(), alpha=model.alpha_[c].copy())

    def _resume_workers(self, model, corpus, path, h, start):
        W = self.W
        answers = [w.resume.options(num_returns=W + 1).remote(
            str(self.dir), str(path), self.base, h["state_parts"], [s["shards"] for s in h["samples"]],
            [s.get("owned", []) for s in h["samples"]], model.alpha_) for w in self.workers]
        summed = [w.add_changes.options(num_returns=W + 1).remote(*[r[p] for r in answers])
                  for p, w in enumerate(self.workers)]
        self.n_k[:] = sum(self._get([r[W] for r in answers], "resuming"))
        self._get([x[0] for x in summed], "resuming")
        self.owned = [x[1:] for x in summed]
