"""tree-LDA sweeps on Ray workers: the partition rounds of
:class:`models.common.executors.rounds.PartitionRunner` with tree-LDA's blocks
(:mod:`models.tree_lda.shards`).

A worker owns shards [s0, s1): their tokens' topics and paths (sweep order), their documents'
topic counts and their rng streams, and builds every chain's sparse tables itself (they depend
on the tree and the chain's s_bound only; the root edges' lists are built and written back
within every block). A term group's slice is the ``n_e`` rows of the nodes below the root that
the group owns (whole synset components) and the ``n_i`` rows of those that are internal (a
leaf's row is always 0); the receiver recomputes their ``inv = 1 / (beta_sum + n_i)`` (a pure
function of n_i), so a slice is 4 K bytes a node and 4 K more an internal node. The totals are
the root's ``n_i`` row: a block counts in its shard's private root row, set from the totals
before it, and the row's ``inv`` is recomputed from the merged totals as the local merge does.
"""
import numpy as np

from ..common.executors.rounds import PartitionRunner, PartitionWorker
from ..common.gibbs import shard_docs
from . import kernels as T
from .kernels import NAIVE, sweep_runs, sweep_work
from .shards import node_groups


def runner(executor, model):
    return PartitionRunner(executor, model, TreeHook())


def _positions(model, t0, t1):
    """Corpus positions of the tokens t0:t1 in sweep order (one shard: the corpus order)."""
    order = model._shards.order
    return slice(t0, t1) if order is None else order[t0:t1]


class TreeWorker(PartitionWorker):
    def setup(self, tree, variant, n_topics, s_bound, alpha):
        self.tree = tuple(np.array(a) for a in tree)  # ptr, path_edges, path_len, beta, beta_sum, path_prior, parent
        ptr, path_edges, path_len, beta, beta_sum, path_prior, parent = self.tree
        M, S = len(parent), self.lay["S"]
        root = self.lay["root"]
        self.bsum = np.concatenate([beta_sum, np.full(S, beta_sum[root])])
        self.variant, self.s_bound, self.alpha = variant, np.array(s_bound), np.array(alpha)
        self.n_e = np.zeros((M, n_topics), np.int32)
        self.n_i = np.zeros((M + S, n_topics), np.int32)
        self.inv = np.zeros((M + S, n_topics))
        self.work = [None if variant == NAIVE else
                     sweep_work(ptr, path_edges, path_len, parent, beta, beta_sum, path_prior,
                                self.s_bound[c], n_topics) for c in range(len(self.s_bound))]

    def inner_rows(self, g):
        """Group g's internal nodes (the rows its slice carries of n_i)."""
        if "inner_rows" not in self.lay:
            self.lay["inner_rows"] = [r[self.bsum[r] > 0] for r in self.lay["rows"]]
        return self.lay["inner_rows"][g]

    def merged(self, c):
        root = self.lay["root"]
        self.chain[c]["root_inv"] = 1.0 / (self.bsum[root] + self.totals[c])

    def sweep_block(self, c, i, g, payload, totals):
        lay, st = self.lay, self.chain[c]
        ptr, path_edges, path_len, beta, _, path_prior, _ = self.tree
        rows, inner = lay["rows"][g], self.inner_rows(g)
        self.n_e[rows], self.n_i[inner] = payload
        self.inv[inner] = 1.0 / (self.bsum[inner, None] + payload[1])
        row = len(self.n_e) + lay["s0"] + i  # the shard's private root row
        self.n_i[row] = totals
        self.inv[row] = st["root_inv"]
        lo, hi = lay["block_ptr"][i, g], lay["block_ptr"][i, g + 1]
        sweep_runs(self.variant, lay["run_ptr"][lo:hi + 1], lay["run_doc"][lo:hi], row,
                   lay["term_ids"], st["z"], st["zp"], ptr, path_edges, path_len,
                   lay["parents"][i, g], beta, self.bsum, path_prior, self.s_bound[c], self.n_e,
                   self.n_i, st["n_dk"], self.inv, self.alpha[c], st["rng"][i],
                   work=self.work[c])
        totals[:] = self.n_i[row]
        return (self.n_e[rows], self.n_i[inner]), np.zeros(0, np.int64)


class TreeHook:
    """tree-LDA's part of the partition rounds (see :class:`PartitionRunner` for the protocol)."""

    worker = TreeWorker
    DOC_KEYS = ("n_dk",)
    ASSIGNMENT_KEYS = ("z", "zp", "rng")

    def groups(self, model):
        """A group's slice holds its nodes' rows: the node plays the term's part."""
        self.node_group = node_groups(model.tree_, model._shards.word_group)
        self.shard_doc = shard_docs(model._corpus, model.n_shards)
        return self.node_group

    def ranges(self, model, s0, s1):
        sh = model._shards
        return (int(sh.run_ptr[sh.block_ptr[s0, 0]]), int(sh.run_ptr[sh.block_ptr[s1 - 1, sh.n_shards]]),
                int(self.shard_doc[s0]), int(self.shard_doc[s1]))

    def worker_layout(self, model, s0, s1):
        sh, S = model._shards, model.n_shards
        t0, t1, d0, _ = self.ranges(model, s0, s1)
        r0, r1 = sh.block_ptr[s0, 0], sh.block_ptr[s1 - 1, S]
        return dict(root=sh.root, block_ptr=sh.block_ptr[s0:s1] - r0,
                    run_ptr=sh.run_ptr[r0:r1 + 1] - t0, run_doc=sh.run_doc[r0:r1] - d0,
                    term_ids=sh.term_ids[t0:t1], parents=sh.parents[s0:s1],
                    rows=[np.flatnonzero(self.node_group == g) for g in range(S)])

    @staticmethod
    def worker_args(model, corpus):
        t = model.tree_
        tree = (t.word_path_ptr, t.path_edges, t.path_len, t.beta, t.beta_sum, model._path_prior,
                model._shards.parent)
        return (tree, T.SAMPLERS.index(model.sampler), model.n_topics, model._bounds(),
                model.alpha_)

    @staticmethod
    def totals(model):
        return model.n_i_[:, model._shards.root]

    @staticmethod
    def get_slice(model, c, rows):
        return model.n_e_[c][rows], model.n_i_[c][rows[model.tree_.beta_sum[rows] > 0]]

    @staticmethod
    def put_slice(model, c, rows, payload):
        inner = rows[model.tree_.beta_sum[rows] > 0]
        model.n_e_[c][rows], model.n_i_[c][inner] = payload
        model.inv_[c][inner] = 1.0 / (model.tree_.beta_sum[inner, None] + payload[1])

    @staticmethod
    def after_lists(model, c):
        root = model._shards.root
        model.inv_[c][root] = 1.0 / (model.tree_.beta_sum[root] + model.n_i_[c][root])

    @staticmethod
    def chain_state(model, c, r):
        s0, s1, t0, t1, d0, d1 = r
        pos = _positions(model, t0, t1)
        return dict(z=model.z_[c][pos], zp=model.zp_[c][pos], n_dk=model.n_dk_[c, d0:d1],
                    rng=model.rng_[c, s0:s1], root_inv=model.inv_[c][model._shards.root])

    @staticmethod
    def put_state(model, c, r, part):
        s0, s1, t0, t1, d0, d1 = r
        pos = _positions(model, t0, t1)
        for key, value in part.items():
            if key == "n_dk":
                model.n_dk_[c, d0:d1] = value
            elif key == "rng":
                model.rng_[c, s0:s1] = value
            else:
                getattr(model, key + "_")[c][pos] = value

    @staticmethod
    def before_sweeps(model, it):
        pass

    @staticmethod
    def sweep_params(model, c, r):
        return {}

    @staticmethod
    def after_sweeps(model, it, counters, runner):
        pass
