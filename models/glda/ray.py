"""gLDA sweeps on Ray workers: whole chains on :class:`models.common.executors.sweeps.SweepRunner`.

gLDA samples every chain sequentially in document order (one shard a chain), so a worker owns a
range of chains: their groups, group topics, counts, word bitsets and rng streams, swept with
the local kernel on one thread (the kernel cuts a chain's sweep into parts only to share
threads between chains, and its parts draw what the whole sweep draws). Nothing crosses
workers during training; the driver pulls the chains' state when the fit loop reads it
(``RayExecutor(state="workers")`` keeps it on the workers: :mod:`models.glda.ray_state`).
"""
import numpy as np

from ..common.corpus import read_only
from ..common.executors.ray import RayWorker
from ..common.executors.sweeps import SweepRunner
from . import kernels as G_
from . import sweep_kernels as SW_


def runner(executor, model):
    return SweepRunner(executor, model, GldaHook())


class GldaWorker(RayWorker):
    def setup(self, doc_ptr, term_ids, grp_ptr, run_ptr, tok_run, beta, unit, resample_groups,
              max_groups, max_len):
        # the corpus read-only, as the driver's: the local trainer's compiled sweep
        self.text = (read_only(np.array(doc_ptr)), read_only(np.array(term_ids)),
                     *(np.array(a) for a in (grp_ptr, run_ptr, tok_run)))
        self.beta, self.unit, self.resample_groups = beta, unit, resample_groups
        self.max_groups, self.max_len = max_groups, max_len

    def load(self, c, state):
        super().load(c, state)
        st = self.chain[c]
        st["wbits"] = G_.word_bits(st["n_kw"][None])  # a function of the counts, as the driver's

    def sweep(self, c, params):
        st = self.chain[c]
        SW_.sweep_chains(*self.text, st["g"][None], st["zg"][None], st["n_kw"][None],
                        st["n_k"][None], st["alpha"][None], self.beta, self.unit,
                        self.resample_groups, st["rng"], self.max_groups, self.max_len, 1,
                        st["wbits"], st["n_kw"].shape[0])


class GldaHook:
    """gLDA's part of the sweeps (see :class:`SweepRunner` for the protocol)."""

    unit = "chain"
    worker = GldaWorker
    DOC_KEYS = ("g", "zg", "n_kw", "n_k")
    ASSIGNMENT_KEYS = ("g", "zg", "rng")

    @staticmethod
    def n_units(model):
        return model.n_chains

    @staticmethod
    def worker_layout(model, c0, c1):
        return dict(c0=c0, c1=c1)

    @staticmethod
    def worker_args(model, corpus):
        lay = model._lay
        return (corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], lay["run_ptr"], lay["tok_run"],
                float(model.beta), model._unit(), not model.restricted, lay["max_groups"],
                lay["max_len"])

    @staticmethod
    def owns(c, r):
        return r[0] <= c < r[1]

    @staticmethod
    def chain_state(model, c, r):
        return dict(g=model.g_[c], zg=model.zg_[c], n_kw=model.n_kw_[c], n_k=model.n_k_[c],
                    alpha=model.alpha_[c], rng=model.rng_[c])

    @staticmethod
    def put_state(model, c, r, part):
        for key, value in part.items():
            getattr(model, key + "_")[c] = value

    @staticmethod
    def before_sweeps(model, it):
        pass

    @staticmethod
    def sweep_params(model, c):
        return None

    @staticmethod
    def merge(model, c, parts):
        pass

    @staticmethod
    def after_sweeps(model, it, runner):
        pass
