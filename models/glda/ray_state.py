"""gLDA with the chain state on the Ray workers (``RayExecutor(state="workers")``): gLDA's part
of :class:`models.common.executors.chains.ChainRunner`.

With one shard (``n_shards=1``) gLDA samples every chain sequentially in document order, so a
worker owns whole chains (at most ``n_chains`` useful workers); more shards run on
:mod:`models.glda.ray_shards`. It reads the corpus itself, builds the groups' layout, and keeps
its chains' groups, group topics, topic-word counts and rng streams for the whole fit; it
starts, sweeps, computes the log-likelihood and takes the kept samples with the local
trainer's code (:class:`models.glda.model.GroupedLDA` over its chains), so the model is the
local one bit for bit. The driver keeps the parameters, the chains' alpha and the traces; it
writes the checkpoints' manifest and streams the kept samples' parts into the model file (an
LDA model file, as locally).
"""
import numpy as np

from ..common.corpus import make_corpus
from ..common.executors.chains import ChainHook, ChainRunner, ChainWorker
from ..common.kernels.rng import make_rng_states
from ..lda.ray import LdaShardHook
from . import files

_WORDS = ("tw_ptr", "tw_topic", "tw_count", "n_k", "alpha")  # a kept sample's model-level part
_DOCS = ("kd_ptr", "kd_doc", "kd_count")


def chain_runner(executor, model):
    return ChainRunner(executor, model, GldaChainHook())


class GldaChainWorker(ChainWorker):
    """The chains ``lay["c0"]`` to ``lay["c1"] - 1`` as a local :class:`GroupedLDA` of those
    chains holds them."""

    SAMPLE_ENTRIES = "kd_doc"
    STATE, PRIOR = "gz", "alpha_"

    def setup(self, cls, params):
        # the driver's model class (this module is imported by it); one CPU an actor, so one
        # thread (a chain's draws never depend on the threads)
        self.model = cls(**dict(params, n_chains=len(self.chains()), n_jobs=1))

    def build(self):
        self.read_tokens()
        self.corpus = make_corpus(self.doc_ptr, self.term_ids, n_terms=self.lay["V"], fingerprint="")
        del self.doc_ptr, self.term_ids
        m, C = self.model, self.model.n_chains
        m._build_layout(self.corpus)
        m._alloc_chain_state(self.corpus)
        m._keep_sample_state = False  # the samples' parts are written once, in their final form
        m.rng_ = np.zeros((C, 1, 4), np.uint64)
        m.alpha_ = np.zeros((C, m.n_topics))

    def start_chains(self, rng, prior):
        m = self.model
        m.rng_[:], m.alpha_[:] = rng, prior
        m._with_threads(m._init_chains, self.corpus)

    def sweep(self):
        self.model._with_threads(self.model._step, self.corpus, None)

    def sample(self, i, sweep):
        s = self.model._take_sample(i, sweep)
        return {k: s[k] for k in _WORDS}, {k: s[k] for k in _DOCS}

    def chain_state(self, i):
        return np.concatenate([self.model.g_[i], self.model.zg_[i]])

    def state_width(self):
        return self.corpus.n_tokens + self.model.zg_.shape[1]

    def state_fault(self, gz):
        """Every group within its document and every topic in range."""
        return files.group_fault(self.model, self.corpus, gz)


class GldaChainHook(ChainHook):
    """gLDA's part of :class:`ChainRunner`: the start's streams and priors, and LDA's model
    file written from the parts."""

    worker = GldaChainWorker
    write_model = staticmethod(LdaShardHook.write_model)
    loaded = staticmethod(LdaShardHook.loaded)

    @staticmethod
    def worker_args(model, corpus):
        return type(model), {k: v for k, v in model.get_params().items() if k != "executor"}

    @staticmethod
    def start(model):
        C = model.n_chains
        model.alpha_ = np.full((C, model.n_topics), model._alpha0())
        return make_rng_states(model.seed, C, 1), model.alpha_
