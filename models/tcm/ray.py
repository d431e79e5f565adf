"""TCM sweeps on Ray workers: the AD-LDA sweeps of :class:`models.common.executors.sweeps.SweepRunner`.

A worker owns shards [s0, s1) of every chain: their boundaries, their documents' topic lists
and their rng streams. Before a sweep it takes the chain's restaurants and alpha0; it samples
each shard against its own copy of them with the local kernel and returns its boundaries. The
driver then does what the local trainer does after its sweep: it rebuilds the restaurants from
the boundaries and resamples alpha0 (on the chain's last rng stream, which stays there). The
restaurants point into the corpus by token position (a type's first occurrence, the entry of
every collocation), so a worker keeps the corpus and its chains' arrays whole, current in its
own range.
"""
import numpy as np

from ..common.corpus import read_only
from ..common.executors.ray import RayWorker, own
from ..common.executors.sweeps import SweepRunner
from .kernels import Prior, Text, _sweep_shard
from .restaurants import DocTopics


def runner(executor, model):
    return SweepRunner(executor, model, TcmHook())


class TcmWorker(RayWorker):
    def setup(self, doc_ptr, term_ids, split, cap_ptr, shard_doc, alpha, p0_len, max_len, sparse):
        # the corpus read-only, as the driver's: the local trainer's compiled sweep
        self.text = Text(read_only(np.array(doc_ptr)), read_only(np.array(term_ids)), np.array(split))
        self.cap_ptr, self.shard_doc = np.array(cap_ptr), np.array(shard_doc)
        self.alpha, self.p0_len, self.max_len, self.sparse = alpha, np.array(p0_len), max_len, sparse
        self.record = np.zeros((0, 0))
        self.no_code = np.empty(0, dtype=np.int32)  # the driver rebuilds its tables from b

    def load(self, c, state):
        lay = self.lay
        t0, d0, e0 = lay["t0"], lay["d0"], lay["e0"]
        b = np.full(len(self.text.term_ids), -1, np.int32)
        topic = np.zeros(self.cap_ptr[-1], np.int32)
        count = np.zeros(self.cap_ptr[-1], np.int32)
        nnz = np.zeros(len(self.cap_ptr) - 1, np.int32)
        b[t0:t0 + len(state["b"])] = state["b"]
        topic[e0:e0 + len(state["dt_topic"])] = state["dt_topic"]
        count[e0:e0 + len(state["dt_count"])] = state["dt_count"]
        nnz[d0:d0 + len(state["dt_nnz"])] = state["dt_nnz"]
        self.chain[c] = dict(b=b, docs=DocTopics(self.cap_ptr, topic, count, nnz),
                             rng=np.array(state["rng"]))

    def pull(self, c, keys):
        lay, st = self.lay, self.chain[c]
        docs = st["docs"]
        where = dict(b=st["b"][lay["t0"]:lay["t1"]], dt_topic=docs.topic[lay["e0"]:lay["e1"]],
                     dt_count=docs.count[lay["e0"]:lay["e1"]],
                     dt_nnz=docs.nnz[lay["d0"]:lay["d1"]], rng=st["rng"])
        return {k: where[k] for k in keys}

    def sweep(self, c, params):
        lay, st = self.lay, self.chain[c]
        tables = own(params["tables"])
        prior = Prior(self.alpha, params["alpha0"], self.p0_len, self.max_len)
        for i, s in enumerate(range(lay["s0"], lay["s1"])):
            _sweep_shard(self.shard_doc[s], self.shard_doc[s + 1], self.text, st["b"], st["docs"],
                         tables, prior, self.sparse, st["rng"][i], self.record, self.no_code)
        return st["b"][lay["t0"]:lay["t1"]]


class TcmHook:
    """TCM's part of the sweeps (see :class:`SweepRunner` for the protocol)."""

    unit = "shard"
    worker = TcmWorker
    DOC_KEYS = ("dt_topic", "dt_count", "dt_nnz")
    # the boundaries come back after every sweep
    ASSIGNMENT_KEYS = ("rng",)

    @staticmethod
    def n_units(model):
        return model.n_shards

    @staticmethod
    def worker_layout(model, s0, s1):
        doc_ptr, shard_doc, cap_ptr = model._corpus.doc_ptr, model._shard_doc, model._cap_ptr
        d0, d1 = int(shard_doc[s0]), int(shard_doc[s1])
        return dict(s0=s0, s1=s1, d0=d0, d1=d1, t0=int(doc_ptr[d0]), t1=int(doc_ptr[d1]),
                    e0=int(cap_ptr[d0]), e1=int(cap_ptr[d1]))

    @staticmethod
    def worker_args(model, corpus):
        return (corpus.doc_ptr, corpus.term_ids, model._split, model._cap_ptr, model._shard_doc,
                float(model.alpha_), model.p0_len_, int(model.max_len), model.sampler == "sparse")

    @staticmethod
    def owns(c, r):
        return True

    def chain_state(self, model, c, r):
        w = self.worker_layout(model, *r)
        return dict(b=model.b_[c, w["t0"]:w["t1"]], dt_topic=model.dt_topic_[c, w["e0"]:w["e1"]],
                    dt_count=model.dt_count_[c, w["e0"]:w["e1"]],
                    dt_nnz=model.dt_nnz_[c, w["d0"]:w["d1"]], rng=model.rng_[c, r[0]:r[1]])

    def put_state(self, model, c, r, part):
        w = self.worker_layout(model, *r)
        where = dict(b=(model.b_, "t"), dt_topic=(model.dt_topic_, "e"),
                     dt_count=(model.dt_count_, "e"), dt_nnz=(model.dt_nnz_, "d"))
        for key, value in part.items():
            if key == "rng":  # the shards' streams; the last one (alpha0's) stays here
                model.rng_[c, r[0]:r[1]] = value
            else:
                table, axis = where[key]
                table[c, w[axis + "0"]:w[axis + "1"]] = value

    @staticmethod
    def before_sweeps(model, it):
        pass

    @staticmethod
    def sweep_params(model, c):
        return dict(tables=model._chain_tables(c), alpha0=float(model.alpha0_[c]))

    def merge(self, model, c, parts):
        for r, b in parts:
            self.put_state(model, c, r, dict(b=b))

    @staticmethod
    def after_sweeps(model, it, runner):
        model._after_sweeps(it)
