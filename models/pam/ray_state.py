"""PAM with the chain state on the Ray workers (``RayExecutor(state="workers")``): PAM's part of
:class:`models.common.executors.sharded.ShardedRunner`.

A worker reads its documents' tokens, builds their sweep order (:mod:`models.pam.layout`) and
keeps their pair keys, super-topic counts, pair lists and rng streams for the whole fit; it
sweeps with :class:`models.pam.ray.PamWorker`'s blocks. The driver keeps n_wj and n_j (every
chain's V x s' table and its totals), alpha, the edges of the pruned sweeps and the traces:

- alpha: Minka's fixed point from the workers' histograms of their documents' counts
  (:func:`models.pam.counts.count_hists`, merged on the driver), or moment matching's two
  passes over the documents, each continued from worker to worker;
- the log-likelihood: the sub-topic-word part on the driver, the documents' terms summed by the
  workers in turn;
- kept samples: every worker writes its shards' pair lists, the driver n_wj's nonzeros, n_j and
  alpha; the model file streams them (one piece in memory at a time).
"""
import numpy as np

from ..common import checkpoint as ckpt
from ..common.executors.parts import DocParts, doc_len_pieces
from ..common.executors.sharded import ShardedRunner, ShardHook, ShardWorker
from ..common.gibbs import shard_docs
from ..common.kernels.dirichlet import sum_from, topic_word_log_lik
from ..common.kernels.rng import make_rng_states
from ..lda.layout import cap_ptrs, term_groups
from .counts import (build_doc_lists, build_n_wj, compact_doc_lists, count_hists, init_random,
                     log_lik_doc_parts, merge_count_hists, ml_alpha_hists, moment_finish, moment_means,
                     moment_squares, moment_sums)
from .infer import count_csr, count_dtype
from .kernels import A_TABLE_ROWS
from .layout import sweep_order
from .ray import PamHook, PamWorker

# The initialisations this module runs on the workers (others train with state="driver").
INITS = ("random", "sparse")


def sharded_runner(executor, model):
    if model.init not in INITS:
        raise ValueError(f"RayExecutor(state='workers') trains PAM with init in {INITS}, not "
                         f"init={model.init!r}; use state='driver'")
    return ShardedRunner(executor, model, PamShardHook())


class PamShardWorker(ShardWorker, PamWorker):
    """A :class:`PamWorker` that reads its documents' tokens itself and keeps their state for
    the whole fit: its layout, initialisation, log-likelihood terms, alpha's histograms, and
    the parts of kept samples and checkpoints (:class:`ShardWorker`'s protocol)."""

    SAMPLE_ENTRIES = "dp_key"

    def setup(self, n_terms, n_super, n_sub, seed):
        self.V, self.n_super, self.n_sub, self.seed = n_terms, n_super, n_sub, seed
        self.n_labels = n_super * n_sub
        self.read_tokens()

    def build(self, group, pbuf_len, a_rows, counts):
        lay, S = self.lay, self.lay["S"]
        order = sweep_order(self.doc_ptr, self.term_ids, group, lay["shard_doc"], S)
        lay.update(brp=order["block_run_ptr"], run_word=order["run_word"], run_ptr=order["run_ptr"],
                   ord_doc=order["ord_doc"], ord_pos=order["ord_pos"], shard_tok_ptr=order["shard_tok_ptr"],
                   cap_ptr=cap_ptrs(np.diff(self.doc_ptr), self.n_labels),
                   terms=[np.flatnonzero(group == g) for g in range(S)], counts=np.dtype(counts))
        del self.term_ids  # the runs hold the same tokens
        PamWorker.setup(self, self.V, self.n_super, self.n_sub, pbuf_len, a_rows)

    def _term_ids(self):
        """This worker's tokens' terms in document order, from the sweep order's runs."""
        lay = self.lay
        out = np.empty(len(lay["ord_pos"]), np.int32)
        out[lay["ord_pos"]] = np.repeat(lay["run_word"], np.diff(lay["run_ptr"]))
        return out

    def set_chains(self, z_docs, rng, prior, n_active):
        """Every chain's state from its tokens' pair keys (document order) and this worker's
        rng rows; returns the sub-topic-word counts of its tokens (chains, V, s') for the
        driver's sum."""
        lay, C = self.lay, len(self.chain)
        D, cap, dtype = len(self.doc_ptr) - 1, int(lay["cap_ptr"][-1]), lay["counts"]
        term_ids = self._term_ids()
        n_wj = np.zeros((C, self.V, self.n_sub), np.int32)
        for c, z_doc in enumerate(z_docs):
            z_doc = np.ascontiguousarray(z_doc, np.int32)
            st = dict(z=np.ascontiguousarray(z_doc[lay["ord_pos"]]), n_ds=np.zeros((D, self.n_super), dtype),
                      dp_key=np.zeros(cap, np.int32), dp_count=np.zeros(cap, dtype),
                      dp_nnz=np.zeros(D, np.int32), rng=np.array(rng[c]), active=self.active(c, n_active))
            build_doc_lists(self.doc_ptr, z_doc, self.n_sub, lay["cap_ptr"], st["dp_key"], st["dp_count"],
                            st["dp_nnz"], st["n_ds"])
            build_n_wj(term_ids, z_doc, self.n_sub, n_wj[c], np.zeros(self.n_sub, np.int64))
            self.chain[c] = st
        return n_wj

    def init_random(self, rng, n_active):
        """The random start of PAM._start on this worker's shards (their rng rows)."""
        lay, rng = self.lay, np.array(rng)
        z_docs = []
        for c in range(len(self.chain)):
            z = np.full(len(lay["ord_pos"]), -1, np.int32)
            init_random(lay["shard_tok_ptr"], lay["ord_doc"], self.active(c, n_active), z,
                        self.n_super, self.n_sub, rng[c])
            z_doc = np.empty_like(z)
            z_doc[lay["ord_pos"]] = z
            z_docs.append(z_doc)
        return self.set_chains(z_docs, rng, None, n_active)

    def _docs(self, c):
        st = self.chain[c]
        return self.lay["cap_ptr"], st["dp_key"], st["dp_count"], st["dp_nnz"], st["n_ds"], st["active"]

    def log_lik_docs(self, c, total, alpha_r, alpha, alpha_sum):
        """``total`` plus this worker's documents' log-likelihood terms, in document order."""
        part = log_lik_doc_parts(*self._docs(c), alpha_r, np.array(alpha), np.array(alpha_sum))
        return sum_from(total, part)

    def alpha_hists(self, c):
        return count_hists(*self._docs(c), self.n_super, self.n_sub)

    def add_moment_sums(self, c, n_used, nz, mean):
        """The previous worker's :func:`moment_sums` continued over this worker's documents."""
        n_used, nz, mean = np.array(n_used), np.array(nz), np.array(mean)
        moment_sums(*self._docs(c), n_used, nz, mean)
        return n_used, nz, mean

    def add_moment_squares(self, c, mean, ss):
        """The previous worker's :func:`moment_squares` continued over this worker's documents."""
        ss = np.array(ss)
        moment_squares(*self._docs(c), np.array(mean), ss)
        return ss

    def sample_part(self, c, s):
        """Chain c's pair lists of the documents of shard s: dp_nnz per document, then their
        (key, count) entries."""
        lay, st = self.lay, self.chain[c]
        a, b = lay["shard_doc"][s - lay["s0"]], lay["shard_doc"][s - lay["s0"] + 1]
        cap = lay["cap_ptr"][a:b + 1]
        nnz = np.array(st["dp_nnz"][a:b])
        ptr = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
        key, count = np.empty(ptr[-1], np.int32), np.empty(ptr[-1], st["dp_count"].dtype)
        compact_doc_lists(cap - cap[0], st["dp_key"][cap[0]:cap[-1]], st["dp_count"][cap[0]:cap[-1]], nnz,
                          ptr, key, count)
        return dict(dp_nnz=nnz, dp_key=key, dp_count=count)


class PamShardHook(ShardHook, PamHook):
    """PAM's part of :class:`models.common.executors.sharded.ShardedRunner`."""

    worker = PamShardWorker

    @staticmethod
    def worker_args(model, corpus):
        return corpus.n_terms, model.n_super, model.n_sub, int(model.seed)

    @staticmethod
    def n_totals(model):
        return model.n_sub

    @staticmethod
    def prior_shape(model):
        return (model.n_chains, model.n_super, model.n_sub)

    def layout(self, model, corpus, stats):
        cf = np.sum([s[0] for s in stats], axis=0)
        max_len = max(s[1] for s in stats)
        model._lay = dict(group=term_groups(cf, model.n_shards))
        longest = max(1, max_len)  # the buffers of PAM._alloc_chain_state
        return (model._lay["group"], min(longest, model.n_super * model.n_sub),
                min(longest + 1, A_TABLE_ROWS), np.dtype(count_dtype(max_len)).str)

    @staticmethod
    def alloc(model, corpus):
        C, V = model.n_chains, corpus.n_terms
        model.n_wj_ = np.zeros((C, V, model.n_sub), dtype=np.int32)
        model.n_j_ = np.zeros((C, model.n_sub), dtype=np.int64)
        model._edges = [None] * C

    @staticmethod
    def counts_from(model, n_wj):
        model.n_wj_[:] = n_wj
        model.n_j_[:] = n_wj.sum(axis=1)

    def start(self, model, corpus, runner):
        C = model.n_chains
        model.rng_ = make_rng_states(model.seed, C, model.n_shards)
        model.alpha_ = np.full((C, model.n_super, model.n_sub), float(model.alpha_sub))
        n = model._sparse_n_active(0, corpus.n_docs)
        self.counts_from(model, runner._sum([w.init_random.remote(model.rng_[:, s0:s1], n)
                                             for w, (s0, s1, *_) in zip(runner.workers, runner.ranges)],
                                            "initialisation"))

    def before_sweeps(self, model, it):
        super().before_sweeps(model, it)
        self.pruned = bool(model._is_pruned(it))
        self.priors = [model._sweep_prior(c, self.pruned) for c in range(model.n_chains)]

    def sweep_params(self, model, c, r):
        prior, edges = self.priors[c]
        return dict(n_active=self.n_active, pruned=self.pruned, prior=prior, edges=edges)

    @staticmethod
    def after_sweeps(model, it, counters, runner):
        def update_alpha(c):
            if model.alpha_estimator == "minka":  # the documents' histograms, summed
                parts = runner._get([w.alpha_hists.remote(c) for w in runner.workers], "alpha")
                ml_alpha_hists(model.alpha_[c], *merge_count_hists(parts), model._FP_ITERS, model._FP_SHAPE,
                               model._FP_SCALE)
            else:  # moment matching's two passes, each continued from worker to worker
                s, s2 = model.n_super, model.n_sub
                sums = (np.zeros(s, np.int64), np.zeros((s, s2), np.int64), np.zeros((s, s2)))
                for w in runner.workers:
                    sums = runner._get(w.add_moment_sums.remote(c, *sums), "alpha")
                n_used, nz, mean = (np.array(a) for a in sums)
                moment_means(n_used, mean)
                ss = np.zeros((s, s2))
                for w in runner.workers:
                    ss = runner._get(w.add_moment_squares.remote(c, mean, ss), "alpha")
                moment_finish(model.alpha_[c], n_used, nz, mean, np.array(ss))
            model._edges[c] = None

        model._after_sweeps(it, counters, update_alpha)

    @staticmethod
    def log_lik(model, c, runner):
        """Chain c's log-likelihood per token: the sub-topic-word part here, the documents'
        summed by the workers in turn (the local trainer's float, term for term)."""
        alpha = model.alpha_[c]
        ll = topic_word_log_lik(model.n_wj_[c], model.n_j_[c], float(model.beta))
        total = 0.0
        for w in runner.workers:
            total = runner._get(w.log_lik_docs.remote(c, total, model._alpha_r(), alpha, alpha.sum(1)),
                                "log-likelihood")
        return (ll + total) / max(int(model.n_j_[c].sum()), 1)

    @staticmethod
    def sample_words(model, c):
        tw_ptr, tw_sub, tw_count = count_csr(model.n_wj_[c])
        return dict(tw_ptr=tw_ptr, tw_sub=tw_sub, tw_count=tw_count, n_j=model.n_j_[c].copy(),
                    alpha=model.alpha_[c].copy())

    @staticmethod
    def write_model(model, corpus, samples, directory, path):
        """The model file of PAM._finalize from the kept samples' parts, streamed."""
        D, V, CS = corpus.n_docs, corpus.n_terms, len(samples)
        shard_doc = shard_docs(corpus, model.n_shards)
        words = [ckpt.read_model_file(directory / s["words"][1], kind=ckpt.CHECKPOINT_FORMAT).arrays
                 for s in samples]  # model-level: (V + 1) pointers and V x s' entries at most each
        parts = DocParts(directory, samples, shard_doc)
        tw_len = [len(w["tw_sub"]) for w in words]
        tw_off = np.concatenate([[0], np.cumsum(tw_len)]).astype(np.int64)
        tw_ptr = np.stack([w["tw_ptr"] + o for w, o in zip(words, tw_off[:-1])]).astype(np.int64)
        total, tw_total = parts.total, int(tw_off[-1])
        ckpt.write_model_file_streamed(path, model._model_header(), [
            ("dp_ptr", (CS, D + 1), np.int64, parts.ptr("dp_nnz")),
            ("dp_key_samples", (total,), np.int32, parts.entries("dp_key")),
            ("dp_count_samples", (total,), parts.dtype("dp_count"), parts.entries("dp_count")),
            ("tw_ptr", (CS, V + 1), np.int64, [tw_ptr]),
            ("tw_sub", (tw_total,), np.result_type(*[w["tw_sub"].dtype for w in words]),
             (w["tw_sub"] for w in words)),
            ("tw_count", (tw_total,), np.result_type(*[w["tw_count"].dtype for w in words]),
             (w["tw_count"] for w in words)),
            ("n_j_samples", (CS, model.n_sub), np.int64, [np.stack([w["n_j"] for w in words])]),
            ("alpha_samples", (CS, model.n_super, model.n_sub), np.float64,
             [np.stack([w["alpha"] for w in words])]),
            ("doc_len", (D,), np.int64, doc_len_pieces(corpus))])
