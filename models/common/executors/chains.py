"""Whole chains on Ray workers with their state kept there (``RayExecutor(state="workers")`` of a
kind whose chain is not cut into document ranges: gLDA's with one shard samples every chain
sequentially, and TCM's with one shard likewise).

Every worker owns a contiguous range of the chains: it reads the corpus itself (from the
corpus files when the corpus arrays are memory mapped, else from one object-store copy that all
workers share), starts its chains from their streams, sweeps them, and keeps their whole state
until the end. Nothing crosses workers during training. The driver keeps the parameters, the
chains' priors and the traces (what the workers' sweeps return: the hook's ``swept``), and
runs :class:`models.common.executors.sharded.WorkerStateLoop`:

- log-likelihood: every worker computes its chains' whole log-likelihood, side by side;
- kept samples: the worker of the chain writes both parts of the sample
  (``chain<c>.sweep<i>.words.npz``, the model-level part, and ``chain<c>.sweep<i>.docs.npz``);
- checkpoints: every worker writes its chains' state (``state.chain<c>.sweep<i>.npz``), then
  the driver the manifest that lists every part with its SHA-256; a resume checks each part on
  the worker that reads it and refuses a damaged or foreign one in one line naming the file.

A run has at most as many useful workers as chains.
"""
import os
import time
from pathlib import Path

import numpy as np

from .. import checkpoint as ckpt
from ..kept import digest
from .ray import RayRunner, RayWorker
from .sharded import TokenReader, WorkerStateLoop, read_part, source


class ChainRunner(WorkerStateLoop, RayRunner):
    """:class:`WorkerStateLoop` over whole chains. ``hook`` gives ``worker`` (a
    :class:`ChainWorker`), ``worker_args(model, corpus)``, ``start(model)`` (every chain's rng
    stream and prior as the local start sets them), ``write_model(model, corpus, samples,
    directory, path)`` and ``loaded(model)``, besides what :class:`ChainHook` gives."""

    unit = "chain"

    def __init__(self, executor, model, hook):
        super().__init__(executor, model)
        self.hook = hook

    def _setup(self, model, corpus):
        self._start_ray(model, self.checkpoint, model.n_chains)
        self.ranges = [(int(self.shard0[a]), int(self.shard0[a + 1])) for a in range(self.W)]
        where = dict(D=corpus.n_docs, V=corpus.n_terms, doc_src=source(corpus.doc_ptr, 0, corpus.n_docs + 1),
                     tok_src=source(corpus.term_ids, 0, corpus.n_tokens))
        args = self.hook.worker_args(model, corpus)
        self._spawn(self.hook.worker, [(dict(where, c0=c0, c1=c1), self.C, *args) for c0, c1 in self.ranges])
        self._each(lambda w, c0, c1: w.build.remote(), "reading the corpus")

    def _each(self, call, what):
        """``call(worker, c0, c1)`` on every worker at once; their answers in chain order."""
        return self._get([call(w, c0, c1) for w, (c0, c1) in zip(self.workers, self.ranges)], what)

    @staticmethod
    def _by_chain(answers):
        """Every worker's list of answers (one a chain it owns), as one list in chain order."""
        return [x for xs in answers for x in xs]

    def _start_fresh(self, model, corpus):
        rng, prior = self.hook.start(model)
        self._each(lambda w, c0, c1: w.start.remote(rng[c0:c1], prior[c0:c1]), "initialisation")

    def _load_chains(self, model):
        """Nothing to hand over: a worker's chains never leave it."""

    def _gather(self, model):
        """Nothing to pull: the workers compute the log-likelihood and write the samples."""

    def step(self, model, corpus, it):
        t = time.perf_counter()
        self.hook.swept(model, self._each(lambda w, c0, c1: w.sweep.remote(), f"sweep {it + 1}"))
        dt = time.perf_counter() - t
        self.stats.update(rounds=self.stats["rounds"] + self.C, sweeps=self.stats["sweeps"] + 1, workers=self.W,
                          sweep_seconds=dt, tokens_per_s=self.C * corpus.n_tokens / dt,
                          slice_bytes_per_sweep=0, n_k_bytes_per_sweep=0)
        model.executor_stats_ = dict(self.stats)

    def _log_liks(self, model):
        return self._by_chain(self._each(lambda w, c0, c1: w.log_liks.remote(), "log-likelihood"))

    def _take_samples(self, model, sweep):
        return self._by_chain(self._each(lambda w, c0, c1: w.write_samples.remote(os.fspath(self.dir), self.base,
                                                                                  sweep), f"kept sample of sweep {sweep}"))

    def _resume_workers(self, model, corpus, path, h, start):
        prior = self.hook.resumed(model, path, h)
        self._each(lambda w, c0, c1: w.resume.remote(os.fspath(self.dir), os.fspath(path), self.base,
                                                      h["state_parts"], h["samples"], prior[c0:c1]), "resuming")


class ChainHook:
    """What a kind's hook of :class:`ChainRunner` may leave as it is."""

    @staticmethod
    def prior_shape(model):
        """The shape of ``model.alpha_``, which a checkpoint holds."""
        return (model.n_chains, model.n_topics)

    @staticmethod
    def resumed(model, path, header):
        """The driver's side of a resume, once ``model.alpha_`` and the traces are those of
        checkpoint ``path`` (whose header is ``header``): returns every chain's prior, which the
        workers' ``set_state`` takes."""
        return model.alpha_

    @staticmethod
    def swept(model, answers):
        """What the driver keeps of a sweep: ``answers``, every worker's ``sweep()``."""


class ChainWorker(TokenReader, RayWorker):
    """A worker of :class:`ChainRunner`: chains ``lay["c0"]`` to ``lay["c1"] - 1``, held by a
    local model of those chains (``self.model``, over ``self.corpus``). The kind gives
    ``setup(*args)``, ``build()`` (reads the tokens: :meth:`read_tokens`),
    ``start_chains(rng, prior)``, ``sweep()``, ``sample(i, sweep)`` (the model-level and the
    per-document arrays of the i-th chain it owns), and for the state parts ``chain_state(i)``
    (the chain's int32 assignments, one row), ``state_width()`` (that row's length) and
    ``state_fault(row)`` (what is wrong with a part's row, or None); ``STATE`` names the row in
    a part, ``PRIOR`` the model's attribute of the chains' priors, ``SAMPLE_ENTRIES`` the
    per-document array whose length the manifest records."""

    SAMPLE_ENTRIES = None
    STATE = None
    PRIOR = None

    def chains(self):
        return range(self.lay["c0"], self.lay["c1"])

    def log_liks(self):
        return [self.model._log_lik(i) for i in range(self.model.n_chains)]

    def state(self, i):
        return {self.STATE: self.chain_state(i)[None], "rng": self.model.rng_[i][None].copy()}

    def check_state(self, path, i, arrays):
        """The shapes, then the kind's check of the assignments (:meth:`state_fault`)."""
        row, rng = arrays.get(self.STATE), arrays.get("rng")
        if row is None or row.shape != (1, self.state_width()) or row.dtype != np.int32 or rng is None \
                or rng.shape != (1, *self.model.rng_.shape[1:]) or rng.dtype != np.uint64:
            fault = "shapes or arrays not those of a chain"
        else:
            fault = self.state_fault(row)
        if fault:
            raise ValueError(f"{path}: damaged state part ({fault}); delete the checkpoint to start afresh")

    def set_state(self, i, arrays, prior):
        m = self.model
        getattr(m, self.PRIOR)[i] = prior
        m._set_chain_state(self.corpus, i, arrays[self.STATE][0])
        m.rng_[i] = arrays["rng"][0]

    def start(self, rng, prior):
        self.start_chains(np.array(rng), np.array(prior))

    def write_samples(self, directory, base, sweep):
        out = []
        for i, c in enumerate(self.chains()):
            words, docs = self.sample(i, sweep)
            names = f"chain{c}.sweep{sweep}.words.npz", f"chain{c}.sweep{sweep}.docs.npz"
            ckpt.write_model_file(Path(directory) / names[0], dict(base, part="sample-words", shard=-1, chain=c,
                                                                   sweep=sweep), words, kind=ckpt.CHECKPOINT_FORMAT)
            ckpt.write_model_file(Path(directory) / names[1], dict(base, part="sample", shard=0, chain=c,
                                                                   sweep=sweep), docs, kind=ckpt.CHECKPOINT_FORMAT)
            out.append(dict(chain=c, iter=sweep, words=[-1, names[0], digest(words)],
                            shards=[[0, names[1], digest(docs), int(len(docs[self.SAMPLE_ENTRIES]))]]))
        return out

    def write_state(self, directory, base, sweep):
        out = []
        for i, c in enumerate(self.chains()):
            arrays, name = self.state(i), f"state.chain{c}.sweep{sweep}.npz"
            ckpt.write_model_file(Path(directory) / name, dict(base, part="state", chain=c, sweep=sweep),
                                  arrays, kind=ckpt.CHECKPOINT_FORMAT)
            out.append([c, name, digest(arrays)])
        return out

    def resume(self, directory, checkpoint, base, state, samples, prior):
        """Check its chains' kept-sample parts, then set its chains from their state parts."""
        mine, directory = set(self.chains()), Path(directory)
        for s in samples:
            if s["chain"] in mine:
                _, name, sha, _ = s["shards"][0]
                read_part(directory / name, checkpoint, base, s["chain"], sha, unit="chain")
        parts = {c: (name, sha) for c, name, sha in state if c in mine}
        for i, c in enumerate(self.chains()):
            if c not in parts:
                raise ValueError(f"{os.fspath(checkpoint)}: lists no state part of chain {c}; "
                                 f"delete it to start afresh")
            path = directory / parts[c][0]
            arrays = read_part(path, checkpoint, base, c, parts[c][1], unit="chain")
            self.check_state(path, i, arrays)
            self.set_state(i, arrays, np.array(prior[i]))
