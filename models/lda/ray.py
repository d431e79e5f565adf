"""LDA sweeps on Ray workers: the partition rounds of
:class:`models.common.executors.rounds.PartitionRunner` with LDA's blocks
(:func:`models.lda.doc_kernels.sweep_block`).

A worker owns shards [s0, s1): their tokens' topics (sweep order), their documents' topic lists
and their rng streams. A term group's slice is the sparse term lists of its terms, as (nnz per
term, packed entries); a worker unpacks it into a buffer laid out for the group before a block.
The totals are n_k. Per sweep the workers take the active documents (the sparse
initialisation's growing set) and alpha (optimised on the driver, on the documents' lists it
pulls back).
"""
import numpy as np

from ..common.corpus import read_only
from ..common.executors.rounds import DocumentShards, PartitionRunner, PartitionWorker
from ..common.executors.owners import sample_words
from ..common.executors.parts import doc_len_pieces
from ..common.executors.sharded import ShardedRunner, ShardHook, ShardWorker
from ..common import checkpoint as ckpt
from ..common.gibbs import rows_csr
from ..common.kernels.dirichlet import sum_from, topic_word_log_lik
from . import doc_kernels as lda_doc
from . import kernels as K_
from .layout import cap_ptrs, sweep_order, term_groups, term_packing


def runner(executor, model):
    return PartitionRunner(executor, model, LdaHook())


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


class LdaWorker(PartitionWorker):
    def setup(self, n_topics, beta, vbeta):
        self.beta, self.vbeta = beta, vbeta
        K = n_topics
        P = 1
        while P < K:
            P *= 2
        self.tree, self.inv, self.pbuf = np.zeros(2 * P), np.zeros(K), np.zeros(K)
        self.ndk, self.topics = np.zeros(K, np.int32), np.zeros(K, np.int32)
        self.listed = np.zeros(K, np.uint8)
        gcap = self.lay["gcap"]
        self.buf = np.zeros(max(int(g[-1]) for g in gcap), self.lay["wdtype"])

    def sweep_block(self, c, i, g, payload, totals):
        lay, st = self.lay, self.chain[c]
        gcap = lay["gcap"][g]
        terms = np.arange(len(gcap) - 1)
        wl_nnz = np.empty(len(terms), np.int32)
        scatter_lists(payload, gcap, terms, self.buf, wl_nnz)
        lda_doc.sweep_block(
            lay["bvp"][i, g], lay["bvp"][i, g + 1],
            lda_doc.Visits(lay["visit_ptr"], lay["visit_doc"], lay["word"]), st["z"], totals,
            lda_doc.WordLists(gcap, self.buf, lay["wshift"], wl_nnz),
            lda_doc.DocLists(lay["cap_ptr"], st["dt"], lay["cshift"], st["dt_nnz"], st["active"]),
            st["alpha"], self.beta, self.vbeta,
            lda_doc.Scratch(self.tree, self.inv, self.ndk, self.listed, self.topics, self.pbuf),
            st["rng"][i])
        return compact_lists(gcap, self.buf, wl_nnz, terms), np.zeros(0, np.int64)


class LdaHook(DocumentShards):
    """LDA's part of the partition rounds (see :class:`PartitionRunner` for the protocol)."""

    worker = LdaWorker
    DOC_KEYS = ("dt", "dt_nnz")
    ASSIGNMENT_KEYS = ("z", "rng")

    def worker_layout(self, model, s0, s1):
        lay, S = model._lay, model.n_shards
        wcap_ptr, cap_ptr = lay["wcap_ptr"], lay["cap_ptr"]
        local_id = np.empty(len(lay["group"]), np.int32)
        gcap = []
        for g in range(S):
            t = np.flatnonzero(lay["group"] == g)
            local_id[t] = np.arange(len(t), dtype=np.int32)
            gcap.append(np.concatenate([[0], np.cumsum(np.diff(wcap_ptr)[t])]).astype(np.int64))
        t0, t1, d0, d1 = self.ranges(model, s0, s1)
        v0, v1 = lay["block_visit_ptr"][s0, 0], lay["block_visit_ptr"][s1 - 1, S]
        return dict(gcap=gcap, wshift=lay["wshift"], wdtype=lay["wdtype"], cshift=lay["cshift"],
                    bvp=lay["block_visit_ptr"][s0:s1] - v0,
                    visit_ptr=lay["visit_ptr"][v0:v1 + 1] - t0,
                    visit_doc=(lay["visit_doc"][v0:v1] - d0).astype(np.int32),
                    word=local_id[lay["ord_word"][t0:t1]], cap_ptr=cap_ptr[d0:d1 + 1] - cap_ptr[d0])

    @staticmethod
    def worker_args(model, corpus):
        return model.n_topics, float(model.beta), corpus.n_terms * float(model.beta)

    @staticmethod
    def totals(model):
        return model.n_k_

    @staticmethod
    def get_slice(model, c, terms):
        return compact_lists(model._lay["wcap_ptr"], model.wl_[c], model.wl_nnz_[c], terms)

    @staticmethod
    def put_slice(model, c, terms, payload):
        scatter_lists(payload, model._lay["wcap_ptr"], terms, model.wl_[c], model.wl_nnz_[c])

    @staticmethod
    def after_lists(model, c):
        lay = model._lay
        lda_doc.word_lists_to_dense(lay["wcap_ptr"], model.wl_[c], lay["wshift"],
                                    model.wl_nnz_[c], model.n_kw_[c])

    @staticmethod
    def state_slices(model, r):
        s0, s1, t0, t1, d0, d1 = r
        e0, e1 = model._lay["cap_ptr"][d0], model._lay["cap_ptr"][d1]
        return dict(z=(model.z_ord_, t0, t1), dt=(model.dt_, e0, e1),
                    dt_nnz=(model.dt_nnz_, d0, d1), rng=(model.rng_, s0, s1))

    @staticmethod
    def before_sweeps(model, it):
        model._set_active(it, model._active.shape[1])

    @staticmethod
    def sweep_params(model, c, r):
        *_, d0, d1 = r
        return dict(active=model._active[c, d0:d1], alpha=model.alpha_[c])

    @staticmethod
    def after_sweeps(model, it, counters, runner):
        if model._alpha_due(it):
            runner.pull_docs(model)
        model._after_sweeps(it)


# -- the driver off the data path (models.common.executors.sharded) ---------------------------


def sharded_runner(executor, model):
    return ShardedRunner(executor, model, LdaShardHook())


class LdaShardWorker(ShardWorker, LdaWorker):
    """An :class:`LdaWorker` that reads its documents' tokens itself and keeps their state for
    the whole fit: its layout, initialisation, log-likelihood terms, alpha's histograms, and
    the parts of kept samples and checkpoints (:class:`ShardWorker`'s protocol)."""

    SAMPLE_ENTRIES = "kd_doc"

    def setup(self, n_topics, beta, vbeta, seed):
        self.K, self.beta, self.vbeta, self.seed = n_topics, beta, vbeta, seed
        self.n_labels = n_topics
        self.read_tokens()

    def build(self, group, wcap_ptr, wshift, wdtype, cshift):

        lay, S = self.lay, self.lay["S"]
        order = sweep_order(self.doc_ptr, self.term_ids, group, lay["shard_doc"], S)
        local_id = np.empty(len(group), np.int32)
        gcap = []
        for g in range(S):
            t = np.flatnonzero(group == g)
            local_id[t] = np.arange(len(t), dtype=np.int32)
            gcap.append(np.concatenate([[0], np.cumsum(np.diff(wcap_ptr)[t])]).astype(np.int64))
        lay.update(gcap=gcap, wcap_ptr=wcap_ptr, wshift=wshift, wdtype=wdtype, cshift=cshift,
                   bvp=order["block_visit_ptr"], visit_ptr=order["visit_ptr"],
                   visit_doc=order["visit_doc"], word=local_id[order["ord_word"]],
                   ord_word=order["ord_word"], ord_pos=order["ord_pos"], ord_doc=order["ord_doc"],
                   shard_tok_ptr=order["shard_tok_ptr"],
                   cap_ptr=cap_ptrs(np.diff(self.doc_ptr), self.K))
        del self.term_ids  # the sweep order's ord_word holds the same tokens
        LdaWorker.setup(self, self.K, self.beta, self.vbeta)

    def _doc_lists(self, z_doc):
        lay = self.lay
        dt = np.zeros(int(lay["cap_ptr"][-1]), np.int32)
        dt_nnz = np.zeros(len(self.doc_ptr) - 1, np.int32)
        K_._build_doc_lists(self.doc_ptr, z_doc, lay["cap_ptr"], lay["cshift"], dt, dt_nnz)
        return dt, dt_nnz

    def set_chains(self, z_docs, rng, alpha, n_active):
        """Every chain's state from its tokens' topics (document order) and this worker's rng
        rows; returns the topic-word counts of its tokens (chains, V, K) for the driver's sum."""
        lay = self.lay
        n_kw = np.zeros((len(self.chain), lay["V"], self.K), np.int32)
        for c, z_doc in enumerate(z_docs):
            dt, dt_nnz = self._doc_lists(z_doc)
            z = np.ascontiguousarray(z_doc[lay["ord_pos"]], np.int32)
            self.chain[c] = dict(z=z, dt=dt, dt_nnz=dt_nnz, rng=np.array(rng[c]), alpha=np.array(alpha[c]),
                                 active=self.active(c, n_active))
            K_._build_n_kw(lay["ord_word"], z, n_kw[c], np.zeros(self.K, np.int64))
        return n_kw

    def init_random(self, rng, alpha, n_active):
        lay, z_docs = self.lay, []
        rng = np.array(rng)
        for c in range(len(self.chain)):
            z = np.full(len(lay["ord_pos"]), -1, np.int32)
            K_._init_random(lay["shard_tok_ptr"], lay["ord_doc"], self.active(c, n_active), z, self.K, rng[c])
            z_doc = np.empty_like(z)
            z_doc[lay["ord_pos"]] = z
            z_docs.append(z_doc)
        return self.set_chains(z_docs, rng, alpha, n_active)

    def init_online(self, carry, rng, alpha, n_active):
        """The online pass over this worker's documents, continuing the previous worker's:
        ``carry`` (n_k, wl, wl_nnz, the chains' shard-0 streams), returned as it ends."""
        lay, C, K = self.lay, len(self.chain), self.K
        n_k, wl, wl_nnz, rng0 = (np.array(a) for a in carry)
        D_a, N_a = len(self.doc_ptr) - 1, len(lay["ord_pos"])
        z = np.full((C, N_a), -1, np.int32)
        term_ids = np.empty(N_a, np.int32)
        term_ids[lay["ord_pos"]] = lay["ord_word"]
        dt = np.zeros((C, int(lay["cap_ptr"][-1])), np.int32)
        dt_nnz = np.zeros((C, D_a), np.int32)
        active = np.stack([self.active(c, n_active) for c in range(C)])
        P = len(self.tree) // 2
        lda_doc.online_pass(self.doc_ptr, np.arange(D_a, dtype=np.int32), read_only(term_ids), z, n_k,
                            self.lay["wcap_ptr"], wl, lay["wshift"], wl_nnz, lay["cap_ptr"], dt,
                            lay["cshift"], dt_nnz, active, np.array(alpha), self.beta, self.vbeta,
                            np.zeros((C, 2 * P)), np.zeros((C, K)), np.zeros((C, K), np.int32),
                            np.zeros((C, K), np.uint8), np.zeros((C, K), np.int32),
                            np.zeros((C, K)), rng0[:, None])
        for c in range(C):
            self.chain[c] = dict(z=np.ascontiguousarray(z[c][lay["ord_pos"]]), dt=dt[c],
                                 dt_nnz=dt_nnz[c], rng=np.array(rng[c]), alpha=np.array(alpha[c]),
                                 active=active[c])
        return n_k, wl, wl_nnz, rng0

    def log_lik_docs(self, c, total, alpha):
        st = self.chain[c]
        part = K_._log_lik_doc_parts(self.lay["cap_ptr"], st["dt"], self.lay["cshift"],
                                     st["dt_nnz"], st["active"], alpha)
        return sum_from(total, part)

    def alpha_hists(self, c, max_len):
        st, K = self.chain[c], self.K
        hist, len_hist = np.zeros((K, max_len + 1), np.int64), np.zeros(max_len + 1, np.int64)
        limit = np.zeros(K, np.int64)
        K_._alpha_hists(self.lay["cap_ptr"], st["dt"], self.lay["cshift"], st["dt_nnz"],
                        st["active"], hist, len_hist, limit)
        return hist, len_hist, limit

    def sample_part(self, c, s):
        """Chain c's topic-major postings of the documents of shard s (global ids)."""
        lay, st, K = self.lay, self.chain[c], self.K
        a, b = lay["shard_doc"][s - lay["s0"]], lay["shard_doc"][s - lay["s0"] + 1]
        cap = lay["cap_ptr"][a:b + 1]
        nnz = int(st["dt_nnz"][a:b].sum())
        ptr, doc, count = np.zeros(K + 1, np.int64), np.empty(nnz, np.int32), np.empty(nnz, np.int32)
        K_._doc_lists_to_postings(cap - cap[0], st["dt"][cap[0]:cap[-1]], lay["cshift"],
                                  st["dt_nnz"][a:b], K, ptr, doc, count)
        doc += lay["d0"] + a
        return dict(kd_ptr=ptr, kd_doc=doc, kd_count=count)

class LdaShardHook(ShardHook, LdaHook):
    """LDA's part of :class:`models.common.executors.sharded.ShardedRunner`."""

    worker = LdaShardWorker

    @staticmethod
    def worker_args(model, corpus):
        return model.n_topics, float(model.beta), corpus.n_terms * float(model.beta), int(model.seed)

    @staticmethod
    def n_totals(model):
        return model.n_topics

    def layout(self, model, corpus, stats):

        cf = np.sum([s[0] for s in stats], axis=0)
        max_len = max(s[1] for s in stats)
        pack = term_packing(model.n_topics, cf, max_len)
        model._lay = dict(group=term_groups(cf, model.n_shards), max_len=max_len, **pack)
        return (model._lay["group"], pack["wcap_ptr"], pack["wshift"], pack["wdtype"], pack["cshift"])

    @staticmethod
    def alloc(model, corpus):
        C, Kt, V, lay = model.n_chains, model.n_topics, corpus.n_terms, model._lay
        model._n_kw = np.zeros((C, V, Kt), dtype=np.int32)
        model._n_kw_stale = set()
        model.n_k_ = np.zeros((C, Kt), dtype=np.int64)
        model.wl_ = np.zeros((C, int(lay["wcap_ptr"][-1])), dtype=lay["wdtype"])
        model.wl_nnz_ = np.zeros((C, V), dtype=np.int32)

    @staticmethod
    def counts_from(model, n_kw):
        """The driver's counts of every chain from the workers' summed topic-word counts."""
        lay = model._lay
        model._n_kw[:] = n_kw
        model._n_kw_stale.clear()
        model.n_k_[:] = n_kw.sum(axis=1)
        for c in range(model.n_chains):
            lda_doc.build_word_lists(model._n_kw[c], lay["wcap_ptr"], lay["wshift"], model.wl_[c],
                                     model.wl_nnz_[c])

    def start(self, model, corpus, runner):
        from ..common.kernels.rng import make_rng_states

        C, Kt = model.n_chains, model.n_topics
        model.rng_ = make_rng_states(model.seed, C, model.n_shards)
        model.alpha_ = np.full((C, Kt), model._alpha0())
        n = model._sparse_n_active(0, corpus.n_docs)
        if model.init == "online":
            carry = (model.n_k_, model.wl_, model.wl_nnz_, model.rng_[:, 0].copy())
            for w, (s0, s1, *_) in zip(runner.workers, runner.ranges):
                carry = runner._get(w.init_online.remote(carry, model.rng_[:, s0:s1], model.alpha_, n),
                                    "initialisation")
            model.n_k_[:], model.wl_[:], model.wl_nnz_[:], model.rng_[:, 0] = carry
            model._n_kw_stale.update(range(C))
            for c in range(C):
                runner.workers[0].set_rng0.remote(c, model.rng_[c, 0])
        else:
            self.counts_from(model, runner._sum([w.init_random.remote(model.rng_[:, s0:s1], model.alpha_, n)
                                                 for w, (s0, s1, *_) in zip(runner.workers, runner.ranges)],
                                                "initialisation"))
        return n

    def sweep_params(self, model, c, r):
        return dict(n_active=self.n_active, alpha=model.alpha_[c])

    @staticmethod
    def loaded(model):
        model._doc_consts = None

    @staticmethod
    def after_sweeps(model, it, counters, runner):
        if not model._alpha_due(it):
            return
        max_len = int(model._lay["max_len"])
        for c in range(model.n_chains):
            parts = runner._get([w.alpha_hists.remote(c, max_len) for w in runner.workers], "alpha")
            hist = np.sum([p[0] for p in parts], axis=0)
            len_hist = np.sum([p[1] for p in parts], axis=0)
            limit = np.max([p[2] for p in parts], axis=0)
            K_._alpha_fixed_point(model.alpha_[c], hist, len_hist, limit, 200, 1.001, 1.0)

    @staticmethod
    def log_lik(model, c, runner):
        """Chain c's log-likelihood per token: the topic-word part here, the documents' summed
        by the workers in turn (the local trainer's float, term for term)."""
        ll = topic_word_log_lik(model.n_kw_[c], model.n_k_[c], float(model.beta))
        total = 0.0
        for w in runner.workers:
            total = runner._get(w.log_lik_docs.remote(c, total, model.alpha_[c]), "log-likelihood")
        ll += total
        return ll / max(int(model.n_k_[c].sum()), 1)

    @staticmethod
    def sample_words(model, c):
        """What a kept sample of chain c holds beyond the documents' parts (model-level)."""
        tw_ptr, tw_topic, tw_count = rows_csr(model.n_kw_[c])
        return dict(tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count,
                    n_k=model.n_k_[c].copy(), alpha=model.alpha_[c].copy())

    @staticmethod
    def write_model(model, corpus, samples, directory, path):
        """The model file from the kept samples' parts, streamed (one piece in memory at a time)."""
        K, V = model.n_topics, corpus.n_terms
        # model-level: (V + 1) pointers and V x K entries at most each (gLDA's: joined from its owners' parts)
        words = [sample_words(directory, s, "tw_ptr") for s in samples]
        shard_ptrs = []  # every sample's shards' topic pointers (K + 1 each)
        for s in samples:
            ptrs = []
            for _, name, *_ in s["shards"]:
                with open(directory / name, "rb") as fh:
                    lay = ckpt.member_layouts(fh)
                    ptrs.append(ckpt.read_member_range(fh, lay, "kd_ptr", 0, K + 1))
            shard_ptrs.append(np.stack(ptrs))
        nnz = [int(p[:, -1].sum()) for p in shard_ptrs]
        off = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
        kd_ptr = np.stack([p.sum(axis=0) + o for p, o in zip(shard_ptrs, off[:-1])]).astype(np.int64)
        tw_len = [len(w["tw_topic"]) for w in words]
        tw_off = np.concatenate([[0], np.cumsum(tw_len)]).astype(np.int64)
        tw_ptr = np.stack([w["tw_ptr"] + o for w, o in zip(words, tw_off[:-1])]).astype(np.int64)

        def postings(name):
            for s, ptrs in zip(samples, shard_ptrs):
                handles = [open(directory / p[1], "rb") for p in s["shards"]]
                try:
                    lays = [ckpt.member_layouts(fh) for fh in handles]
                    for k in range(K):
                        for j, (fh, lay) in enumerate(zip(handles, lays)):
                            if ptrs[j, k + 1] > ptrs[j, k]:
                                yield ckpt.read_member_range(fh, lay, name, ptrs[j, k], ptrs[j, k + 1])
                finally:
                    for fh in handles:
                        fh.close()

        CS, total, tw_total = len(samples), int(off[-1]), int(tw_off[-1])
        wtype = words[0]["tw_topic"].dtype
        header = model._model_header()
        ckpt.write_model_file_streamed(path, header, [
            ("kd_ptr", (CS, K + 1), np.int64, [kd_ptr]),
            ("kd_doc", (total,), np.int32, postings("kd_doc")),
            ("kd_count", (total,), np.int32, postings("kd_count")),
            ("tw_ptr", (CS, V + 1), np.int64, [tw_ptr]),
            ("tw_topic", (tw_total,), wtype, (w["tw_topic"] for w in words)),
            ("tw_count", (tw_total,), np.int32, (w["tw_count"] for w in words)),
            ("n_k_samples", (CS, K), np.int64, [np.stack([w["n_k"] for w in words])]),
            ("alpha_samples", (CS, K), np.float64, [np.stack([w["alpha"] for w in words])]),
            ("doc_len", (corpus.n_docs,), np.int64, doc_len_pieces(corpus))])
