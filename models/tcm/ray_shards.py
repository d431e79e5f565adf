"""TCM's document shards on Ray with their state on the workers (``n_shards`` > 1 and
``RayExecutor(state="workers")``), the local trainer's sharded sweep bit for bit.

Worker a owns the shards [s0, s1) of every chain: it reads their documents' tokens and split
flags itself and holds, in a local :class:`models.tcm.model.TCM` of the chains over those
documents, their boundaries, document topic lists and rng streams. The restaurants are owned by
the workers too, cut by hash partition of a type's route key (its term, or its first two terms:
:mod:`models.tcm.merge_kernels`): worker p owns partition p of every chain's types. A sweep:

1. every worker sweeps each of its shards with the local kernel on the shard's stream, against
   restaurants rebuilt from the types its owners sent it (those whose route key occurs in its
   documents, so every span it can look up) and the chain's totals, then builds the
   restaurants of its documents from their new boundaries and sends each owner its part;
2. every owner merges the parts of its partition in document order (the types, their first
   occurrences and summed entries the local rebuild from every boundary gives), keeps them for
   the kept samples, sends every worker the types of its route keys for the next sweep and the
   driver the chain's totals and its entries' histogram.

Parts move from worker to worker through the object store; the driver passes references and
holds what does not grow with the tokens: every chain's totals, histogram and alpha0, alpha0's
streams (in the checkpoint's manifest) and the traces. It resamples alpha0 from the histograms
on the chain's last stream, as the local trainer does. The log-likelihood's document terms are
summed by the workers in turn (the local float); kept samples and checkpoints are parts the
workers write (:mod:`models.common.executors.sharded`): their shards' topic lists and state, and
each owner its partition's types of a kept sample; the model file is written from them.
"""
import os
import time
from types import SimpleNamespace

import numpy as np

from ..common.corpus import make_corpus, read_only
from ..common.executors.ray import RayWorker, nbytes
from ..common.executors.owners import Owner, OwnerShardRunner, each_ref, moved_bytes, one_each
from ..common.executors.sharded import ShardWorker, read_source, source
from ..common.gibbs import shard_docs
from ..common.kernels.dirichlet import log_lik_docs_parts, sum_from
from ..common.kernels.rng import make_rng_states
from . import files
from . import merge_kernels as MK
from .build_kernels import build_doc_lists, build_tables
from .kernels import Prior, Text, sweep
from .ray_state import TcmChainHook, write_tcm_model
from .score_kernels import compact_doc_lists, log_lik_restaurants


def shard_runner(executor, model):
    return TcmShardRunner(executor, model)


class TcmShardWorker(Owner, ShardWorker, RayWorker):
    """Shards [s0, s1) of every chain as one local TCM of the chains over their documents, and
    owner of the restaurants' types of hash partition ``lay["a"]`` of every chain."""

    SAMPLE_ENTRIES = "dk_topic"

    def setup(self, cls, params, split_src):
        self.cls, self.params, self.split_src = cls, params, split_src

    def build(self):
        """Reads the tokens and split flags; returns its route keys by owner (the types every
        owner sends it for a sweep are those of its keys)."""
        self.read_tokens()
        lay = self.lay
        S = len(lay["shard_doc"]) - 1
        self.corpus = make_corpus(self.doc_ptr, self.term_ids, n_terms=lay["V"], fingerprint="")
        m = self.m = self.cls(**dict(self.params, n_shards=S, n_jobs=1))
        m._split = read_source(self.split_src).astype(np.uint8)
        del self.split_src
        m._build_layout(self.corpus)
        m._shard_doc = np.asarray(lay["shard_doc"], np.int64)  # the driver's cuts, not this range's own
        m._alloc_chain_state(self.corpus)
        m.rng_ = np.zeros((len(self.chain), S + 1, 4), np.uint64)
        keys = MK.route_keys(self.term_ids, m._split, lay["V"])
        owner = MK.owner_of(keys, lay["W"])
        return one_each([keys[owner == p] for p in range(lay["W"])])

    def set_routes(self, *keys):
        """The route keys of every worker that fall to this owner."""
        self.routes = keys

    def _routed(self):
        """Every chain's restaurants of its documents, from their boundaries, compacted and cut
        into their owners' parts: one answer per owner (the chains' parts)."""
        m, t0, V, W = self.m, self.lay["t0"], self.lay["V"], self.lay["W"]
        out = [[] for _ in range(W)]
        for c in range(len(self.chain)):
            whole = MK.compact(build_tables(self.term_ids, m.b_[c], m.n_topics), self.term_ids, t0)
            for p, part in enumerate(MK.by_owner(whole, V, W)):
                out[p].append(part)
        return one_each(out)

    def start(self, rng):
        """Every chain's random start on the streams of its shards (as locally)."""
        m = self.m
        m.rng_[:, :-1] = rng
        m._with_threads(m._init_chains, self.corpus)
        return self._routed()

    def sweep(self, alpha0, *owned):
        """Every chain's sweep of its shards against its types from every owner (``owned[p][c]``,
        each with the chain's n_k); returns the restaurants of its documents after it, by owner."""
        m, N = self.m, self.corpus.n_tokens
        for c in range(len(self.chain)):
            part = MK.concat([o[c] for o in owned])
            text = read_only(np.concatenate([self.term_ids, part.text]))
            tables = MK.tables_from(text, N, part.text_ptr, part.en_ptr, part.en_topic, part.en_count,
                                    np.array(part.n_k), m.b_[c])
            del part
            m._with_threads(sweep, m._shard_doc, Text(self.corpus.doc_ptr, text, m._split), m.b_[c],
                            m._docs(c), tables, Prior(m.alpha_, float(alpha0[c]), m.p0_len_, m.max_len),
                            m.sampler == "sparse", m.rng_[c, :-1], np.zeros((0, 0)))
            del tables, text
        return self._routed()

    def merge_owned(self, *routed):
        """As owner: every chain's types of this partition from every worker's (``routed[a][c]``,
        in document order) merged; returns per chain n_k and the histogram of the entries, the
        bytes it received and sent, then every worker's types of its route keys."""
        p = self.lay["a"]
        self.owned = [MK.merge([r[c] for r in routed]) for c in range(len(self.chain))]
        out = [[MK.with_keys(o, keys, self.lay["V"]) for o in self.owned] for keys in self.routes]
        moved = moved_bytes([nbytes(r) for r in routed], [nbytes(o) for o in out], p)
        return ([(o.n_k, MK.entry_hist(o, self.m.max_len)) for o in self.owned], moved), *out

    def log_lik_docs(self, c, total):
        """``total`` plus the documents' terms of chain c's log p(w, b), document after document."""
        return sum_from(total, log_lik_docs_parts(*self.m._docs(c), self.m.alpha_, self.m.n_topics))

    def sample_part(self, c, s):
        """Chain c's topic lists of the documents of shard s."""
        m, i = self.m, s - self.lay["s0"]
        d0, d1 = int(m._shard_doc[i]), int(m._shard_doc[i + 1])
        docs = m._docs(c)
        nnz = docs.nnz[d0:d1]
        ptr = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
        topic, count = np.empty(ptr[-1], np.uint16), np.empty(ptr[-1], np.int32)
        e0, e1 = docs.cap_ptr[d0], docs.cap_ptr[d1]
        compact_doc_lists(docs.cap_ptr[d0:d1 + 1] - e0, docs.topic[e0:e1], docs.count[e0:e1], nnz, ptr, topic, count)
        return dict(dk_nnz=nnz.copy(), dk_topic=topic, dk_count=count)

    def owned_part(self, c):
        """As owner: chain c's types of this partition, a kept sample's part."""
        o = self.owned[c]
        return dict(ty_pos=o.pos, ty_len=np.diff(o.text_ptr).astype(np.int32), en_ptr=o.en_ptr,
                    en_topic=o.en_topic.astype(np.uint16), en_count=o.en_count)

    def state_part(self, s):
        """Shard s's boundaries of every chain (the checkpoints' dtype) and its streams."""
        m, (lo, hi) = self.m, self.shard_tokens(s)
        return {"b": m.b_[:, lo:hi].astype(m._b_file_dtype()), "rng": m.rng_[:, s - self.lay["s0"]].copy()}

    def check_state(self, path, s, arrays):
        m, (lo, hi) = self.m, self.shard_tokens(s)
        b, rng = arrays.get("b"), arrays.get("rng")
        C = len(self.chain)
        if b is None or b.shape != (C, hi - lo) or b.dtype.kind not in "iu" \
                or rng is None or rng.shape != (C, 4) or rng.dtype != np.uint64:
            fault = f"shapes or arrays not those of shard {s}"
        else:
            within = SimpleNamespace(n_topics=m.n_topics, max_len=m.max_len, _split=m._split[lo:hi])
            fault = files.boundary_fault(within, b.astype(np.int32))
        if fault:
            raise ValueError(f"{path}: damaged state part ({fault}); delete the checkpoint to start afresh")

    def resume(self, directory, checkpoint, base, state, samples, owned):
        """Check this worker's parts (its shards' and, as owner, its types'), set its shards from
        their state parts; returns the restaurants of its documents by owner."""
        parts = self.resume_parts(directory, checkpoint, base, state, samples, owned)
        m, s0 = self.m, self.lay["s0"]
        for s in range(s0, s0 + m.n_shards):
            lo, hi = self.shard_tokens(s)
            m.b_[:, lo:hi] = parts[s]["b"]
            m.rng_[:, s - s0] = parts[s]["rng"]
        for c in range(len(self.chain)):
            build_doc_lists(self.corpus.doc_ptr, m.b_[c], *m._docs(c))
        return self._routed()


class TcmShardHook(TcmChainHook):
    """What :class:`WorkerStateLoop` asks of the kind: the checkpoint's prior (alpha, with
    alpha0 in the trace) and the model file from the parts, read by shard."""

    @staticmethod
    def write_model(model, corpus, samples, directory, path):
        write_tcm_model(model, corpus, samples, directory, path, shard_docs(corpus, model.n_shards))


class TcmShardRunner(OwnerShardRunner):
    """The fit loop of :class:`WorkerStateLoop` over TCM's shards (module docstring)."""

    HOOK = TcmShardHook

    def _setup(self, model, corpus):
        self._start_ray(model, self.checkpoint)
        split = model._split
        model._split = None  # the workers' from here (the corpus hash is taken)
        self._spawn_owners(model, corpus, TcmShardWorker, lambda t0, t1: (source(split, t0, t1),))
        model._set_priors(model._alpha(), corpus.n_terms)
        W = self.W
        keys = [each_ref(w.build.options(num_returns=W).remote(), W) for w in self.workers]
        self._get([w.set_routes.remote(*[k[p] for k in keys]) for p, w in enumerate(self.workers)],
                  "reading the corpus")
        self.n_tokens = corpus.n_tokens

    def _merge(self, routed, what):
        """The owners' merges of the workers' restaurants ``routed[a]`` (refs, one per owner):
        every chain's n_k and entry histogram here, every worker's types of the next sweep
        (``self.owned[p][a]``) left in the object store. Returns the bytes the owners received
        and sent, and those that changed worker."""
        W = self.W
        routed = [each_ref(r, W) for r in routed]
        answers = [w.merge_owned.options(num_returns=W + 1).remote(*[r[p] for r in routed])
                   for p, w in enumerate(self.workers)]
        small = self._get([a[0] for a in answers], what)
        self.owned = [a[1:] for a in answers]
        self.n_k = [small[0][0][c][0] for c in range(self.C)]
        self.hist = [_hist_sum([s[0][c][1] for s in small]) for c in range(self.C)]
        return {k: sum(s[1][k] for s in small) for k in ("received", "sent", "cross")}

    def _start_fresh(self, model, corpus):
        C, S, W = model.n_chains, self.S, self.W
        rng = make_rng_states(model.seed, C, S + 1)  # streams 0..S-1 the shards, S alpha0 (TCM._start)
        self.rng_alpha0 = rng[:, S].copy()
        model.alpha0_ = np.full(C, model._alpha0(model.p0_len_))
        self._merge([w.start.options(num_returns=W).remote(rng[:, s0:s1])
                     for w, (s0, s1) in zip(self.workers, self.ranges)], "initialisation")

    def step(self, model, corpus, it):
        t = time.perf_counter()
        W = self.W
        routed = [w.sweep.options(num_returns=W).remote(model.alpha0_, *[self.owned[p][a] for p in range(W)])
                  for a, w in enumerate(self.workers)]
        moved = self._merge(routed, f"sweep {it + 1}")
        if model.resample_alpha0:
            for c in range(self.C):
                model.alpha0_[c] = model._alpha0_draw(float(model.alpha0_[c]), self.hist[c], self.n_k[c],
                                                      self.rng_alpha0[c])
        model._alpha0_rows.append(model.alpha0_.tolist())
        # the restaurants of every worker's documents to their owners, every worker's types back
        self._swept(model, corpus, time.perf_counter() - t, moved)

    def _log_liks(self, model):
        out = []
        for c in range(self.C):
            ll = log_lik_restaurants(*self.hist[c], self.n_k[c], model.p0_len_, float(model.alpha0_[c]))
            out.append((ll + self._running_sum("log_lik_docs", c)) / max(self.n_tokens, 1))
        return out

    def _sample_words(self, model, c):
        """A kept sample's totals and alpha0 (its types: the owners' parts)."""
        return dict(n_k=self.n_k[c].copy(), alpha0=np.array([model.alpha0_[c]]))

    def _manifest_arrays(self, model):
        return dict(super()._manifest_arrays(model), rng=self.rng_alpha0)

    def _resume_workers(self, model, corpus, path, h, start):
        self.hook.resumed(model, path, h)
        rng = self.manifest.get("rng")
        if rng is None or rng.shape != (self.C, 4) or rng.dtype != np.uint64:
            raise ValueError(f"{os.fspath(path)}: damaged checkpoint (rng, alpha0's streams, not of shape "
                             f"({self.C}, 4)); delete it to start afresh")
        self.rng_alpha0 = np.array(rng)
        self._merge([w.resume.options(num_returns=self.W).remote(
            str(self.dir), str(path), self.base, h["state_parts"], [s["shards"] for s in h["samples"]],
            [s.get("owned", []) for s in h["samples"]]) for w in self.workers], "resuming")


def _hist_sum(hists):
    """The owners' entry histograms (length, count, multiplicity) as one (``score_kernels.
    entry_hist`` of the whole restaurants)."""
    return MK.histogram(*(np.concatenate(x) for x in zip(*hists)))
