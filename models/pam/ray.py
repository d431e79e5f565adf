"""PAM sweeps on Ray workers: the partition rounds of
:class:`models.common.executors.rounds.PartitionRunner` with PAM's blocks.

A worker owns shards [s0, s1): their tokens' pair keys, their documents' super-topic counts and
pair lists, and their rng streams. A term group's slice is the dense n_wj rows of its terms; a
worker writes it into a full (V, s') table before a block, since the kernel takes V from that
table's shape and reads only the rows of the block's terms. The totals are n_j. Per sweep the
workers take the active documents, the prior and the edges of every chain (alpha changes after
every sweep by default); the sampler's counters come back with the deltas.
"""
import numpy as np

from ..common.executors.ray import own
from ..common.executors.rounds import DocumentShards, PartitionRunner, PartitionWorker
from .buckets import a_table
from .kernels import N_STATS, BlockWork, DocPairs, PamState, SweepOrder, _sweep_block


def runner(executor, model):
    return PartitionRunner(executor, model, PamHook())


class PamWorker(PartitionWorker):
    def setup(self, n_terms, n_super, n_sub, pbuf_len, a_rows):
        self.n_wj = np.zeros((n_terms, n_sub), np.int32)
        self.a_shape = (a_rows, n_super)
        self.work = [BlockWork(np.zeros(n_super), np.zeros(n_super), np.zeros(n_sub),
                               np.zeros(n_sub), np.zeros(pbuf_len), np.zeros(n_super),
                               np.zeros(n_sub), np.zeros(N_STATS, np.int64))
                     for _ in range(len(self.lay["brp"]))]

    def update(self, c, params):
        st = self.chain[c]
        st.update(own(params))
        if "A_tab" not in st:
            st["A_tab"] = np.zeros(self.a_shape)
        a_table(st["prior"].alpha_r, st["prior"].alpha_sum, st["A_tab"])

    def sweep_block(self, c, i, g, payload, totals):
        lay, st = self.lay, self.chain[c]
        terms = lay["terms"][g]
        self.n_wj[terms] = payload
        work = self.work[i]
        work.stats[:] = 0
        _sweep_block(lay["brp"][i, g], lay["brp"][i, g + 1],
                     SweepOrder(lay["brp"], lay["run_word"], lay["run_ptr"], lay["ord_doc"]),
                     PamState(st["z"], self.n_wj, totals, st["n_ds"]),
                     DocPairs(lay["cap_ptr"], st["dp_key"], st["dp_count"], st["dp_nnz"]),
                     st["active"], st["pruned"], st["prior"], st["edges"], st["A_tab"], work,
                     st["rng"][i])
        return self.n_wj[terms], work.stats.copy()


class PamHook(DocumentShards):
    """PAM's part of the partition rounds (see :class:`PartitionRunner` for the protocol)."""

    worker = PamWorker
    DOC_KEYS = ("n_ds", "dp_key", "dp_count", "dp_nnz")
    ASSIGNMENT_KEYS = ("z", "rng")

    def worker_layout(self, model, s0, s1):
        lay, S = model._lay, model.n_shards
        t0, t1, d0, d1 = self.ranges(model, s0, s1)
        r0, r1 = lay["block_run_ptr"][s0, 0], lay["block_run_ptr"][s1 - 1, S]
        cap_ptr = lay["cap_ptr"]
        return dict(brp=lay["block_run_ptr"][s0:s1] - r0, run_word=lay["run_word"][r0:r1],
                    run_ptr=lay["run_ptr"][r0:r1 + 1] - t0,
                    ord_doc=(lay["ord_doc"][t0:t1] - d0).astype(lay["ord_doc"].dtype),
                    cap_ptr=cap_ptr[d0:d1 + 1] - cap_ptr[d0],
                    terms=[np.flatnonzero(lay["group"] == g) for g in range(S)])

    @staticmethod
    def worker_args(model, corpus):
        s = model._scratch
        return (corpus.n_terms, model.n_super, model.n_sub, s.pbufs.shape[1], s.A_tab.shape[0])

    @staticmethod
    def totals(model):
        return model.n_j_

    @staticmethod
    def get_slice(model, c, terms):
        return model.n_wj_[c][terms]

    @staticmethod
    def put_slice(model, c, terms, payload):
        model.n_wj_[c][terms] = payload

    @staticmethod
    def after_lists(model, c):
        pass

    @staticmethod
    def state_slices(model, r):
        s0, s1, t0, t1, d0, d1 = r
        e0, e1 = model._lay["cap_ptr"][d0], model._lay["cap_ptr"][d1]
        return dict(z=(model.z_ord_, t0, t1), n_ds=(model.n_ds_, d0, d1),
                    dp_key=(model.dp_key_, e0, e1), dp_count=(model.dp_count_, e0, e1),
                    dp_nnz=(model.dp_nnz_, d0, d1), rng=(model.rng_, s0, s1))

    def before_sweeps(self, model, it):
        model._set_active(it, model._active.shape[1])
        self.pruned = bool(model._is_pruned(it))
        self.priors = [model._sweep_prior(c, self.pruned) for c in range(model.n_chains)]

    def sweep_params(self, model, c, r):
        *_, d0, d1 = r
        prior, edges = self.priors[c]
        return dict(active=model._active[c, d0:d1], pruned=self.pruned, prior=prior, edges=edges)

    @staticmethod
    def after_sweeps(model, it, counters, runner):
        if model._alpha_due(it):
            runner.pull_docs(model)
        model._after_sweeps(it, counters)
