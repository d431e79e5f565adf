"""tree-LDA with the chain state on the Ray workers (``RayExecutor(state="workers")``): tree-LDA's
part of :class:`models.common.executors.sharded.ShardedRunner`.

A worker reads its documents' tokens, builds their sweep order (:func:`models.tree_lda.shards.sweep_order`)
and keeps their topics and paths, document-topic counts and rng streams for the whole fit; it
sweeps with :class:`models.tree_lda.ray.TreeWorker`'s blocks. The driver keeps every chain's node
tables n_e, n_i and inv (nodes x K), alpha, s_bound and the traces:

- the start: every chain's random topics and paths drawn from its stream of shard 0 over the
  tokens in corpus order, the stream passed from worker to worker (the local start's draws);
- the log-likelihood: the tree's terms on the driver, the documents' terms summed by the workers
  in turn;
- kept samples: every worker writes its shards' document-topic rows, the driver the edge
  counts' and alpha; the model file streams them (one piece in memory at a time);
- checkpoints: every worker writes its shards' topics and paths, the paths as ranks among their
  words' paths (uint16, as a local checkpoint holds them) where every word's path count fits;
  state parts of path ids (written before) still resume.
"""
from pathlib import Path

import numpy as np

from ..common import checkpoint as ckpt
from ..common.executors.ray import sum_parts
from ..common.executors.parts import DocParts, doc_len_pieces
from ..common.executors.sharded import ShardedRunner, ShardHook, ShardWorker
from ..common.gibbs import rows_csr, shard_docs, stack_ptrs
from ..common.kernels.rng import make_rng_states
from . import files
from . import kernels as T
from . import state as S_
from .ray import TreeHook, TreeWorker
from .shards import node_groups, shard_parents, sweep_order, word_groups
from .sparse_kernels import root_of
from .tree import synset_arrays


def sharded_runner(executor, model):
    return ShardedRunner(executor, model, TreeShardHook())


class TreeShardWorker(ShardWorker, TreeWorker):
    """A :class:`TreeWorker` that reads its documents' tokens itself and keeps their state for
    the whole fit: its sweep order, start, log-likelihood terms and the parts of kept samples
    and checkpoints (:class:`ShardWorker`'s protocol)."""

    SAMPLE_ENTRIES = "dk_topic"
    ASSIGNMENTS = {"z": np.int32, "zp": np.int32}

    def setup(self, tree, variant, n_topics, seed):
        # ptr, path_edges, path_len, beta, beta_sum, path_prior, parent (writable: what numba
        # compiles the kernels for)
        self.arrays = tuple(np.array(a) for a in tree)
        self.variant, self.K, self.seed = variant, n_topics, seed
        self.n_labels = n_topics
        self.read_tokens()

    def labels(self, key):
        return self.n_labels if key == "z" else len(self.arrays[2])  # paths

    def build(self, word_group, node_group, root):
        lay, S = self.lay, self.lay["S"]
        rows = len(lay["shard_doc"]) - 1
        order, term_ids, run_ptr, run_doc, block_ptr = sweep_order(
            self.doc_ptr, self.term_ids, word_group, lay["shard_doc"], S)
        lay.update(root=root, block_ptr=block_ptr, run_ptr=run_ptr, run_doc=run_doc, term_ids=term_ids,
                   parents=shard_parents(self.arrays[6], root, node_group, range(lay["s0"], lay["s0"] + rows), S),
                   rows=[np.flatnonzero(node_group == g) for g in range(S)],
                   ord_pos=np.arange(len(term_ids)) if order is None else order)
        del self.term_ids  # the sweep order's term_ids hold the same tokens

    def _doc_terms(self):
        """This worker's tokens' terms in document order."""
        out = np.empty_like(self.lay["term_ids"])
        out[self.lay["ord_pos"]] = self.lay["term_ids"]
        return out

    def set_chains(self, z_docs, zp_docs, rng, prior, n_active):
        """Every chain's state from its tokens' topics and paths (document order) and this
        worker's rng rows; ``prior``: (alpha, s_bound) of every chain. Returns the node counts
        n_e and n_i of its tokens (chains, 2, nodes, K) for the driver's sum."""
        alpha, s_bound = prior
        TreeWorker.setup(self, self.arrays, self.variant, self.K, s_bound, alpha)
        ptr, path_edges, path_len, _, beta_sum, _, parent = self.tree
        lay, M, D = self.lay, len(parent), len(self.doc_ptr) - 1
        counts = np.zeros((len(self.chain), 2, M, self.K), np.int32)
        for c, (z_doc, zp_doc) in enumerate(zip(z_docs, zp_docs)):
            z_doc, zp_doc = np.ascontiguousarray(z_doc, np.int32), np.ascontiguousarray(zp_doc, np.int32)
            n_dk = np.zeros((D, self.K), np.int32)
            S_.build_counts(self.doc_ptr, z_doc, zp_doc, path_edges, path_len, parent, beta_sum,
                            counts[c, 0], counts[c, 1], n_dk, np.zeros((M, self.K)), True)
            self.chain[c] = dict(z=z_doc[lay["ord_pos"]], zp=zp_doc[lay["ord_pos"]], n_dk=n_dk,
                                 rng=np.array(rng[c]), active=self.active(c, n_active))
        return counts

    def init_random(self, rng0, rng, prior, n_active):
        """The random start of TreeLDA._start on this worker's tokens, every chain's draws
        continuing its stream ``rng0`` (shard 0's, as the previous worker left it); returns
        the node counts (:meth:`set_chains`) and the streams as they end."""
        ptr, rng0 = self.arrays[0], np.array(rng0)
        term_ids = self._doc_terms()
        z_docs, zp_docs = [], []
        for c in range(len(self.chain)):
            z, zp = np.empty(len(term_ids), np.int32), np.empty(len(term_ids), np.int32)
            S_.init_random(term_ids, ptr, self.K, z, zp, rng0[c])
            z_docs.append(z)
            zp_docs.append(zp)
        return self.set_chains(z_docs, zp_docs, rng, prior, n_active), rng0

    def state_part(self, s):
        """:meth:`ShardWorker.state_part`, the paths as ranks among their words' paths
        (``zp_rank``, uint16, :func:`models.tree_lda.files.stored_paths`) where every word's path
        count fits, not path ids (``zp``)."""
        out = super().state_part(s)
        ptr = self.arrays[0]
        if files.path_dtype(ptr) is np.uint16:
            lo, hi = self.shard_tokens(s)
            out["zp_rank"] = files.stored_paths(out.pop("zp"), self._doc_terms()[lo:hi], ptr, np.uint16)
        return out

    def check_parts(self, directory, checkpoint, base, listed):
        """:meth:`ShardWorker.check_parts`, a state part's path ranks turned into path ids
        (:meth:`path_ids`)."""
        names = {s: name for s, name, *_ in listed}
        parts = super().check_parts(directory, checkpoint, base, listed)
        return {s: self.path_ids(Path(directory) / names[s], s, a) for s, a in parts.items()}

    def path_ids(self, path, s, arrays):
        """The arrays of a part of shard s with its paths as path ids (``zp``): the ranks of a
        state part that holds them (``zp_rank``), checked against their words' path counts
        first; any other part (a kept sample's, a state part of path ids) as it is."""
        if "zp_rank" not in arrays:
            return arrays
        lo, hi = self.shard_tokens(s)
        rank, ptr = arrays["zp_rank"], self.arrays[0]
        if "zp" in arrays or rank.dtype != np.uint16 or rank.shape != (len(self.chain), hi - lo):
            raise ValueError(f"{path}: damaged state part (shapes or arrays not those of shard {s}); "
                             f"delete the checkpoint to start afresh")
        words = self._doc_terms()[lo:hi]
        if (rank >= np.diff(ptr)[words]).any():
            raise ValueError(f"{path}: damaged state part (a path rank beyond its word's paths); "
                             f"delete the checkpoint to start afresh")
        out = {k: v for k, v in arrays.items() if k != "zp_rank"}
        out["zp"] = np.stack([files.path_ids(r, words, ptr, np.empty(hi - lo, np.int32)) for r in rank])
        return out

    def check_state(self, path, s, arrays):
        """Besides the shapes and ranges: every topic in [0, K), every token on a path of its word."""
        super().check_state(path, s, arrays)
        lo, hi = self.shard_tokens(s)
        words = self._doc_terms()[lo:hi]
        ptr = self.arrays[0]
        z, zp = arrays["z"], arrays["zp"].astype(np.int64)
        if z.size and z.min() < 0:
            raise ValueError(f"{path}: damaged state part (a token without a topic); "
                             f"delete the checkpoint to start afresh")
        if zp.size and ((zp < ptr[words]) | (zp >= ptr[words + 1])).any():
            raise ValueError(f"{path}: damaged state part (a token on a path not of its word); "
                             f"delete the checkpoint to start afresh")

    def load_totals(self, c, totals):
        super().load_totals(c, totals)
        self.merged(c)  # the root's inv row

    def log_lik_docs(self, c, total, alpha):
        """``total`` plus this worker's documents' log-likelihood terms, in document order."""
        return S_.log_lik_docs(total, self.chain[c]["n_dk"], self.doc_ptr, np.array(alpha))

    def sample_part(self, c, s):
        """Chain c's document-topic rows of the documents of shard s: nonzeros per document,
        then their (topic, count) entries."""
        lay = self.lay
        a, b = lay["shard_doc"][s - lay["s0"]], lay["shard_doc"][s - lay["s0"] + 1]
        ptr, topic, count = rows_csr(self.chain[c]["n_dk"][a:b])
        return dict(dk_nnz=np.diff(ptr), dk_topic=topic, dk_count=count)


class TreeShardHook(ShardHook, TreeHook):
    """tree-LDA's part of :class:`models.common.executors.sharded.ShardedRunner`."""

    worker = TreeShardWorker

    @staticmethod
    def worker_args(model, corpus):
        t = model.tree_
        tree = (t.word_path_ptr, t.path_edges, t.path_len, t.beta, t.beta_sum, t.path_prior(),
                t.parent.astype(np.int64))
        return tree, T.SAMPLERS.index(model.sampler), model.n_topics, int(model.seed)

    @staticmethod
    def n_totals(model):
        return model.n_topics

    def layout(self, model, corpus, stats):
        tree, S = model.tree_, model.n_shards
        cf = np.sum([s[0] for s in stats], axis=0)
        group = word_groups(tree, cf, S) if S > 1 else np.zeros(tree.n_terms, dtype=np.int64)
        root = int(root_of(tree.parent.astype(np.int64)))
        model._lay = dict(node_group=node_groups(tree, group), root=root)
        self.n_tokens = int(corpus.n_tokens)
        return group, model._lay["node_group"], root

    @staticmethod
    def alloc(model, corpus):
        C, M, K = model.n_chains, model.tree_.n_nodes, model.n_topics
        model.n_e_ = np.zeros((C, M, K), dtype=np.int32)
        model.n_i_ = np.zeros((C, M, K), dtype=np.int32)
        model.inv_ = np.zeros((C, M, K))
        model._s_bound = None
        model._cache = {}

    @staticmethod
    def counts_from(model, counts):
        """The driver's node tables of every chain from the workers' summed n_e and n_i."""
        model.n_e_[:] = counts[:, 0]
        model.n_i_[:] = counts[:, 1]
        beta_sum = model.tree_.beta_sum
        inner = beta_sum > 0  # as S_.build_counts: leaves' rows stay 0
        for c in range(model.n_chains):
            model.inv_[c][inner] = 1.0 / (beta_sum[inner, None] + model.n_i_[c][inner])

    @staticmethod
    def worker_prior(model):
        return model.alpha_, model._bounds()

    def start(self, model, corpus, runner):
        C = model.n_chains
        model.rng_ = make_rng_states(model.seed, C, model.n_shards)
        model.alpha_ = np.full((C, model.n_topics), model._alpha0())
        model._s_bound = None
        prior, n = self.worker_prior(model), model._sparse_n_active(0, corpus.n_docs)
        rng0 = model.rng_[:, 0].copy()

        def counts():  # every worker's, its start continuing the stream where the last left it
            nonlocal rng0
            for w, (s0, s1, *_) in zip(runner.workers, runner.ranges):
                part, rng0 = runner._get(w.init_random.remote(rng0, model.rng_[:, s0:s1], prior, n),
                                         "initialisation")
                yield part

        total = sum_parts(counts())
        model.rng_[:, 0] = rng0
        for c in range(C):
            runner.workers[0].set_rng0.remote(c, rng0[c])
        self.counts_from(model, total)

    @staticmethod
    def groups(model):
        return model._lay["node_group"]

    @staticmethod
    def totals(model):
        return model.n_i_[:, model._lay["root"]]

    @staticmethod
    def after_lists(model, c):
        root = model._lay["root"]
        model.inv_[c][root] = 1.0 / (model.tree_.beta_sum[root] + model.n_i_[c][root])

    def sweep_params(self, model, c, r):
        return dict(n_active=self.n_active)

    def log_lik(self, model, c, runner):
        """Chain c's log-likelihood per token: the tree's terms here, the documents' summed by
        the workers in turn (the local trainer's float, term for term)."""
        t = model.tree_
        total = S_.log_lik_nodes(t.parent, t.beta, t.beta_sum, model.n_e_[c], model.n_i_[c])
        for w in runner.workers:
            total = runner._get(w.log_lik_docs.remote(c, total, model.alpha_[c]), "log-likelihood")
        return total / max(self.n_tokens, 1)

    @staticmethod
    def sample_words(model, c):
        ne_ptr, ne_topic, ne_count = rows_csr(model.n_e_[c])
        return dict(ne_ptr=ne_ptr, ne_topic=ne_topic, ne_count=ne_count, alpha=model.alpha_[c].copy())

    @staticmethod
    def write_model(model, corpus, samples, directory, path):
        """The model file of TreeLDA._finalize from the kept samples' parts, streamed."""
        D, M, CS = corpus.n_docs, model.tree_.n_nodes, len(samples)
        words = [ckpt.read_model_file(directory / s["words"][1], kind=ckpt.CHECKPOINT_FORMAT).arrays
                 for s in samples]  # model-level: (nodes + 1) pointers and nodes x K entries at most each
        parts = DocParts(directory, samples, shard_docs(corpus, model.n_shards))
        ne_ptr, ne_topic = stack_ptrs([w["ne_ptr"] for w in words], [w["ne_topic"] for w in words])
        syn_ptr, syn_terms = synset_arrays(model.tree_.synsets)
        ckpt.write_model_file_streamed(path, model._model_header(), [
            ("ne_ptr", (CS, M + 1), np.int64, [ne_ptr]),
            ("ne_topic", ne_topic.shape, ne_topic.dtype, [ne_topic]),
            ("ne_count", ne_topic.shape, np.int32, (w["ne_count"] for w in words)),
            ("dk_ptr", (CS, D + 1), np.int64, parts.ptr("dk_nnz")),
            ("dk_topic", (parts.total,), parts.dtype("dk_topic"), parts.entries("dk_topic")),
            ("dk_count", (parts.total,), np.int32, parts.entries("dk_count")),
            ("alpha_samples", (CS, model.n_topics), np.float64, [np.stack([w["alpha"] for w in words])]),
            ("doc_len", (D,), np.int64, doc_len_pieces(corpus)),
            ("syn_ptr", syn_ptr.shape, np.int64, [syn_ptr]),
            ("syn_terms", syn_terms.shape, np.int64, [syn_terms])])

    @staticmethod
    def loaded(model):
        model._s_bound = None
        model._work = None
        model._cache = {}
