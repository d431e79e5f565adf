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

from ..common.executors.rounds import DocumentShards, PartitionRunner, PartitionWorker
from . import doc_kernels as lda_doc


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
