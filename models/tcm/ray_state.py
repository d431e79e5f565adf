"""TCM's whole chains on the Ray workers (``RayExecutor(state="workers")`` and ``n_shards=1``;
more shards run on :mod:`models.tcm.ray_shards`): TCM's part of
:class:`models.common.executors.chains.ChainRunner`.

A worker owns whole chains (at most ``n_chains`` useful workers). It reads the corpus itself,
takes the split flags once from the object store, and keeps its chains' boundaries, document
topic lists, restaurants, alpha0 and rng streams for the whole fit; it starts, sweeps (the
restaurants' rebuild and alpha0's resampling after it), computes the log-likelihood and takes
the kept samples with the local trainer's code (:class:`models.tcm.model.TCM` over its chains),
so the model is the local one bit for bit. The driver keeps the parameters, every chain's
alpha0 (the trace) and the log-likelihoods; it writes the checkpoints' manifest and the model
file from the kept samples' parts (:func:`write_tcm_model`, which the sharded runner shares).
"""
import os

import numpy as np

from ..common import checkpoint as ckpt
from ..common.corpus import make_corpus
from ..common.executors.chains import ChainHook, ChainRunner, ChainWorker
from ..common.executors.owners import sample_words
from ..common.executors.parts import DocParts
from ..common.executors.sharded import read_source, source
from ..common.kernels.rng import make_rng_states
from . import files
from .stack import stack_restaurants

# a kept sample's model-level part: its restaurants (types by first occurrence), totals, alpha0
_WORDS = ("ty_pos", "ty_len", "en_ptr", "en_topic", "en_count", "n_k")


def chain_runner(executor, model):
    return ChainRunner(executor, model, TcmChainHook())


class TcmChainWorker(ChainWorker):
    """The chains ``lay["c0"]`` to ``lay["c1"] - 1`` as a local :class:`TCM` of those chains
    holds them."""

    SAMPLE_ENTRIES = "dk_topic"
    STATE, PRIOR = "b", "alpha0_"

    def setup(self, cls, params, split_src):
        # the driver's model class (this module is imported by it); one CPU an actor, so one
        # thread (the shards' draws never depend on the threads)
        self.model = cls(**dict(params, n_chains=len(self.chains()), n_jobs=1))
        self.split_src = split_src

    def build(self):
        self.read_tokens()
        self.corpus = make_corpus(self.doc_ptr, self.term_ids, n_terms=self.lay["V"], fingerprint="")
        del self.doc_ptr, self.term_ids
        m, C = self.model, self.model.n_chains
        m._split = read_source(self.split_src).astype(np.uint8)
        del self.split_src
        m._build_layout(self.corpus)
        m._alloc_chain_state(self.corpus)
        m._keep_sample_state = False  # the samples' parts are written once, in their final form
        m.rng_ = np.zeros((C, m.n_shards + 1, 4), np.uint64)
        m.alpha0_ = np.zeros(C)
        m._alpha0_rows = []

    def start_chains(self, rng, prior):
        m = self.model
        m.rng_[:], m.alpha0_[:] = rng, prior
        m._with_threads(m._init_chains, self.corpus)

    def sweep(self):
        """Every chain's shards, restaurants rebuilt, alpha0 resampled (``TCM._step``); returns
        its chains' alpha0."""
        m = self.model
        m._with_threads(m._step, self.corpus, None)
        m._alpha0_rows.clear()  # the driver keeps the trace
        return m.alpha0_.tolist()

    def sample(self, i, sweep):
        s = self.model._take_sample(i, sweep)
        words = {k: s[k] for k in _WORDS}
        words["alpha0"] = np.array([s["alpha0"]])
        # every document's topic count, from which the model file's dk_ptr is rebuilt
        docs = dict(dk_nnz=np.diff(s["dk_ptr"]).astype(np.int32), dk_topic=s["dk_topic"], dk_count=s["dk_count"])
        return words, docs

    def chain_state(self, i):
        return self.model.b_[i].copy()

    def state_width(self):
        return self.corpus.n_tokens

    def state_fault(self, b):
        """Every boundary a topic in range, and the collocations within the splits, the
        documents and max_len."""
        return files.boundary_fault(self.model, b)


class TcmChainHook(ChainHook):
    """TCM's part of :class:`ChainRunner`: the split flags to the workers, the start's streams
    and alpha0, the alpha0 trace, and TCM's model file written from the parts."""

    worker = TcmChainWorker

    @staticmethod
    def worker_args(model, corpus):
        split = source(model._split, 0, corpus.n_tokens)
        model._split = None  # the workers' from here (the corpus hash is taken)
        model._set_priors(model._alpha(), corpus.n_terms)
        return type(model), {k: v for k, v in model.get_params().items() if k != "executor"}, split

    @staticmethod
    def start(model):
        C, S = model.n_chains, model.n_shards
        # streams 0..S-1 sample the shards; stream S resamples alpha0 (TCM._start)
        model.alpha0_ = np.full(C, model._alpha0(model.p0_len_))
        return make_rng_states(model.seed, C, S + 1), model.alpha0_

    @staticmethod
    def prior_shape(model):
        """The checkpoint's ``alpha``: the documents' prior (every chain's alpha0 is in the trace)."""
        return (1,)

    @staticmethod
    def resumed(model, path, header):
        """Every chain's alpha0 as the trace's last row (alpha0 after the checkpoint's sweep)."""
        model.alpha_ = float(model.alpha_[0])
        trace = np.array(model._alpha0_rows, dtype=np.float64)
        if trace.shape != (header["iteration"], model.n_chains) or not (trace > 0).all() \
                or not np.isfinite(trace).all():
            raise ValueError(f"{os.fspath(path)}: damaged checkpoint (alpha0_trace of shape {trace.shape}, "
                             f"not alpha0 > 0 of {model.n_chains} chains after each of {header['iteration']} "
                             f"sweeps); delete it to start afresh")
        model.alpha0_ = trace[-1].copy()
        return model.alpha0_

    @staticmethod
    def swept(model, answers):
        model.alpha0_ = np.array([a for chains in answers for a in chains], dtype=np.float64)
        model._alpha0_rows.append(model.alpha0_.tolist())

    @staticmethod
    def write_model(model, corpus, samples, directory, path):
        write_tcm_model(model, corpus, samples, directory, path, np.array([0, corpus.n_docs], np.int64))

    @staticmethod
    def loaded(model):
        model.__dict__.pop("_blocks", None)  # of the types' lengths, which the file replaced


def write_tcm_model(model, corpus, samples, directory, path, shard_doc):
    """The model file from the kept samples' parts: the restaurants stacked as the local trainer
    stacks them (model-level), the documents' topic lists streamed (their parts cut at
    ``shard_doc``). A sample's types are in its words part, or in its owners' parts
    (:mod:`models.tcm.ray_shards`)."""
    words = [sample_words(directory, s, "en_ptr") for s in samples]
    stacked = stack_restaurants(words, corpus.term_ids, model.max_len)
    docs = DocParts(directory, samples, shard_doc)
    CS = len(samples)
    whole = dict(stacked, n_k_samples=np.stack([w["n_k"] for w in words]).astype(np.int64),
                 alpha0_samples=np.concatenate([w["alpha0"] for w in words]).astype(np.float64))
    streamed = dict(dk_ptr=((CS, corpus.n_docs + 1), np.int64, docs.ptr("dk_nnz")),
                    dk_topic=((docs.total,), docs.dtype("dk_topic"), docs.entries("dk_topic")),
                    dk_count=((docs.total,), docs.dtype("dk_count"), docs.entries("dk_count")))
    members = [(name, *streamed[name]) if name in streamed else
               (name, whole[name].shape, whole[name].dtype, [whole[name]]) for name in model._INFERENCE_ARRAYS]
    ckpt.write_model_file_streamed(path, model._model_header(), members)

