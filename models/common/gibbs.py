"""What the Gibbs-sampled topic models (LDA, PAM, TCM, ...) share: parameter checks, the sampling
schedule, the fit loop with its log-likelihood/checkpoint/callback cadence, checkpoints and model
files. Each model supplies its layout, chain state, sweeps, kept samples and inference.
"""
import math
import os
from functools import partial

import numpy as np

from . import checkpoint as ckpt
from . import kept
from . import validate_files
from .kernels.sparse import row_nnz, rows_to_csr
from .base import TopicModel
from .corpus import content_hash
from .stopping import stop_point

# Parameters that may differ between a checkpoint and the resuming estimator.
_RESUME_FREE = ("n_jobs", "callback_every", "checkpoint_every", "log_lik_every", "executor")
# Parameters that say where training runs, not what it computes: never written to model files.
_RUNTIME_PARAMS = ("executor",)
# Int parameters (>= 1) of every sampler.
_SHARED_INTS = ("n_chains", "n_iter", "sample_every", "n_shards", "log_lik_every",
                "callback_every", "checkpoint_every")


def shard_docs(corpus, n_shards):
    """Shard s holds docs ``out[s]:out[s + 1]``: contiguous ranges cut at token quantiles."""
    D, N = corpus.n_docs, corpus.n_tokens
    cuts = np.searchsorted(corpus.doc_ptr, np.arange(1, n_shards) * (N / n_shards), side="left")
    shard_doc = np.concatenate([[0], np.minimum(cuts, D), [D]]).astype(np.int64)
    return np.maximum.accumulate(shard_doc)


def key_runs(key_sorted):
    """Runs of equal keys in a sorted key array: (run_ptr int64 of length n_runs + 1, run keys)."""
    starts = np.flatnonzero(np.concatenate([[True], key_sorted[1:] != key_sorted[:-1]]))
    return np.concatenate([starts, [len(key_sorted)]]).astype(np.int64), key_sorted[starts]


def block_run_ptrs(run_block, n_shards, n_rows=None):
    """Partition scheme: the runs of block (shard s, term group g), in sweep order, start at
    ``out[s, g]`` for the sorted block ids ``run_block = s * n_shards + g``; shape (S, S + 1),
    or (n_rows, S + 1) for the first n_rows shards (a Ray worker's own)."""
    S = n_shards
    rows = S if n_rows is None else n_rows
    return np.searchsorted(
        run_block, np.arange(rows)[:, None] * S + np.arange(S + 1)[None, :], side="left"
    ).astype(np.int64)


def rows_csr(dense):
    """The nonzeros of a dense (rows, cols) count table as CSR: (ptr int64, cols, counts int32);
    columns as uint16 when they fit (topic ids), halving what kept samples store."""
    nnz = np.empty(dense.shape[0], dtype=np.int64)
    row_nnz(dense, nnz)
    ptr = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    cols = np.empty(ptr[-1], dtype=np.uint16 if dense.shape[1] <= 65535 else np.int32)
    counts = np.empty(ptr[-1], dtype=np.int32)
    rows_to_csr(dense, ptr, cols, counts)
    return ptr, cols, counts


def concat_ranges(starts, lengths):
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every i, concatenated: the
    entries of some CSR rows at once."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts, lengths)


def stack_ptrs(ptrs, parts):
    """One CSR structure over all kept samples: the parts concatenated, and every sample's
    pointer row shifted to where its part starts. Returns (ptr rows int64, values)."""
    off = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    return (np.stack([p + o for p, o in zip(ptrs, off[:-1])]).astype(np.int64),
            np.concatenate(parts))


def _damaged(path, exc, what):
    """A ValueError naming the file when its header or arrays lack something or do not fit."""
    detail = f"missing {exc.args[0]}" if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
    return ValueError(f"{os.fspath(path)}: damaged or incomplete {what} file ({detail}); "
                      f"{'retrain' if what == 'model' else 'delete it to start afresh'} or restore the file")


class GibbsModel(TopicModel):
    """Base of the topic models trained by collapsed Gibbs sampling with several chains and
    kept as document models (the average over kept samples of all chains).

    Subclasses store their constructor parameters verbatim in ``__init__`` (scikit-learn style)
    and define:

    ``_INFERENCE_ARRAYS``
        Names (without the trailing ``_``) of the fitted arrays a model file holds; the first
        one exists exactly when the model is fitted.
    ``_STATE``
        (assignments, prior) names of the chain state that checkpoints and ``save(full=True)``
        keep besides the rng state; kept samples store them under the same keys.
    ``_TRACES``
        Header key -> attribute of further per-sweep lists kept like the log-likelihood.

    and the methods ``_check_params``, ``_build_layout``, ``_alloc_chain_state``, ``_start``,
    ``_step``, ``_log_lik``, ``_take_sample``, ``_finalize`` and ``_set_chain_state``.
    """

    _INFERENCE_ARRAYS = ()
    _STATE = ()
    _TRACES = {}

    # -- parameters ---------------------------------------------------------------------------

    def _check_shared_params(self, *ints):
        """``ints`` and the int parameters of every sampler, then the sampling schedule."""
        for name in ints + tuple(n for n in _SHARED_INTS if n != "sample_every"):
            self._pos_int(name)
        if self.sample_every is not None:
            self._pos_int("sample_every")
        if self.burn_in is not None:
            self._pos_int("burn_in", 0)
        self._pos_int("seed", 0)
        if self.n_jobs is not None:
            self._pos_int("n_jobs")
        burn_in, every = self._schedule()
        if burn_in >= self.n_iter:
            raise ValueError(
                f"burn_in ({burn_in!r}) must be < n_iter ({self.n_iter!r}) so that at least one "
                f"sample is kept; e.g. burn_in={self.n_iter - 1}, sample_every=1, or leave burn_in "
                f"unset (None: samples over the last half)")
        if burn_in + every > self.n_iter:
            raise ValueError(
                f"no sample is kept: the first is after sweep burn_in + sample_every = "
                f"{burn_in + every} > n_iter = {self.n_iter}; lower sample_every")

    def _schedule(self):
        """(burn_in, sample_every) as used: ``burn_in=None`` keeps samples over the last half of
        the sweeps (the papers' 60..100 of 100 style), ``sample_every=None`` keeps 5 of them
        (fewer when there are fewer sweeps), so 100 sweeps give 50 and 10, the former defaults,
        and ``n_iter=40`` gives 20 and 4 instead of an error."""
        burn_in = self.n_iter // 2 if self.burn_in is None else self.burn_in
        every = self.sample_every
        if every is None:
            every = max(1, (self.n_iter - burn_in) // 5)
        return burn_in, every

    def _sample_iters(self):
        burn_in, every = self._schedule()
        return np.arange(burn_in + every, self.n_iter + 1, every, dtype=np.int64)

    # -- training -----------------------------------------------------------------------------

    def fit(self, corpus, callback=None, checkpoint=None):
        """Train all chains on ``corpus``.

        Parameters
        ----------
        corpus : Corpus
        callback : callable or None
            ``callback(model, iteration, n_iter)`` after every ``callback_every`` sweeps (and after
            the last); progress bars are callbacks (see :class:`models.common.progress.TqdmCallback`).
        checkpoint : str or PathLike or None
            Checkpoint file. If it exists, training resumes from it (it must come from the same
            corpus and parameters) and ends with the same model as an uninterrupted run. It is
            rewritten every ``checkpoint_every`` sweeps and after the last one, and holds the
            chains' live state; every kept sample is written once, when taken, to a file of its
            own beside it (:mod:`models.common.kept`). Without the file, training starts afresh
            and removes the kept samples of an earlier checkpoint of that name.
            ``checkpoint_writes_`` then gives the bytes every checkpoint wrote.

        Returns
        -------
        self
        """
        self._check_params(corpus)
        return self._fit_with_threads(corpus, callback, checkpoint)

    def _fit_with_threads(self, corpus, callback, checkpoint):
        # Imported here: the executors module imports Ray only for a Ray executor.
        from .executors import make_runner

        runner = make_runner(self)
        self.__dict__.pop("_model_file", None)
        try:
            if hasattr(runner, "fit"):  # it keeps the chains' state on its workers: its own loop
                self._with_threads(runner.fit, self, corpus, callback, checkpoint)
            else:
                self._with_threads(self._fit, corpus, callback, checkpoint, runner)
        finally:
            runner.close()
        return self

    def _corpus_hash(self, corpus):
        return content_hash(corpus.doc_ptr, corpus.term_ids, corpus.n_terms)

    def _fit(self, corpus, callback, checkpoint, runner):
        C = self.n_chains
        self.fingerprint_ = corpus.fingerprint
        self.corpus_hash_ = self._corpus_hash(corpus)
        self.n_terms_ = corpus.n_terms
        self._build_layout(corpus)
        self._alloc_chain_state(corpus)
        self._samples = []  # per kept (chain, sample), in order of iteration then chain
        # Under a checkpoint, kept samples keep their assignments until written to their files,
        # from which a resumed run rebuilds them.
        self._keep_sample_state = checkpoint is not None
        sample_iters = set(self._sample_iters().tolist())
        self._ckpt_writes, self._ckpt_pending = [], 0
        if checkpoint is not None and os.path.exists(checkpoint):
            start = self._resume(corpus, checkpoint)
        else:
            if checkpoint is not None:
                kept.remove(checkpoint)
            self._log_lik_rows, self._log_lik_iters = [], []
            for attr in self._TRACES.values():
                setattr(self, attr, [])
            self._start(corpus)
            start = 0
        runner.start(self, corpus, checkpoint)
        for it in range(start, self.n_iter):
            runner.step(self, corpus, it)
            done = it + 1
            self.n_iter_ = done
            log_due = done % self.log_lik_every == 0 or done == self.n_iter
            ckpt_due = checkpoint is not None and (done % self.checkpoint_every == 0
                                                   or done == self.n_iter)
            # A runner that keeps chain state elsewhere brings back what is read below.
            runner.sync(self, counts=log_due or done in sample_iters,
                        assignments=ckpt_due or done == self.n_iter
                        or (done in sample_iters and self._keep_sample_state))
            if log_due:
                self._log_lik_rows.append([self._log_lik(c) for c in range(C)])
                self._log_lik_iters.append(done)
            if done in sample_iters:
                for c in range(C):
                    sample = self._take_sample(c, done)
                    if checkpoint is not None:
                        self._wrote(kept.write(self, checkpoint, sample))
                    self._samples.append(sample)
            if ckpt_due:
                self._checkpointed(checkpoint, runner, done)
            if callback is not None and (done % self.callback_every == 0 or done == self.n_iter):
                write = None if ckpt_due else partial(self._checkpointed, checkpoint, runner, done, synced=False)
                with stop_point(done, self.n_iter, checkpoint, write):
                    callback(self, done, self.n_iter)
        self._finalize(corpus)
        if not self._keep_sample_state:
            self._samples = []

    def _checkpointed(self, checkpoint, runner, done, synced=True):
        if not synced:  # a stop between scheduled checkpoints: a runner's chains come back first
            runner.sync(self, counts=True, assignments=True)
        self._write_checkpoint(checkpoint)
        runner.checkpointed(done)

    def _sorted_samples(self):
        """The kept samples as (chain, sample) = cs = c * n_samples + s; sets n_samples_ and
        sample_iter_."""
        samples = sorted(self._samples, key=lambda s: (s["chain"], s["iter"]))
        S = len(samples) // self.n_chains
        self.n_samples_ = S
        self.sample_iter_ = np.array([s["iter"] for s in samples[:S]], dtype=np.int64)
        return samples

    # -- checkpoints --------------------------------------------------------------------------

    def _file_header(self):
        header = super()._file_header()
        header["params"] = {k: v for k, v in header["params"].items() if k not in _RUNTIME_PARAMS}
        return header

    def _header(self):
        header = dict(self._file_header(), log_lik=self._log_lik_rows, log_lik_iter=self._log_lik_iters)
        header.update({key: getattr(self, attr) for key, attr in self._TRACES.items()})
        return header

    def _write_checkpoint(self, path):
        """The chains' live state, and the list of the kept samples written so far."""
        header = dict(self._header(), iteration=self.n_iter_,
                      sample_chain=[s["chain"] for s in self._samples],
                      sample_iter=[s["iter"] for s in self._samples],
                      sample_sha256=[s["sha256"] for s in self._samples])
        assign, prior = self._STATE
        z, p = self._checkpoint_assignments(), getattr(self, prior + "_")
        if isinstance(z, np.ndarray):
            arrays = {assign: z, "rng": self.rng_, prior: p}
            size = ckpt.write_model_file(path, header, arrays, kind=ckpt.CHECKPOINT_FORMAT)
        else:  # (shape, dtype, pieces): written piece by piece, never joined in memory
            size = ckpt.write_model_file_streamed(path, header, [
                (assign, *z), ("rng", self.rng_.shape, self.rng_.dtype, [self.rng_]),
                (prior, p.shape, p.dtype, [p])], kind=ckpt.CHECKPOINT_FORMAT)
        self._wrote(size, self.n_iter_)

    def _checkpoint_assignments(self):
        """The chains' assignments as a checkpoint holds them (a kind may narrow their dtype
        where its file spec allows): an array, or (shape, dtype, pieces) whose pieces' bytes
        in turn are the array's (C order)."""
        return getattr(self, self._STATE[0] + "_")

    def _resume(self, corpus, path):
        try:
            return self._resume_from(corpus, path)
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise _damaged(path, e, "checkpoint") from e

    def _resume_from(self, corpus, path):
        f = self._open_checkpoint(path, corpus, _RESUME_FREE)
        h, a = f.header, f.arrays
        if "state_parts" in h:
            raise ValueError(f"{os.fspath(path)}: a checkpoint whose chain state stayed on Ray workers "
                             f"(parts in {os.path.basename(path)}.parts); resume it with "
                             f"executor=RayExecutor(state='workers')")
        validate_files.gibbs_checkpoint(self, path, f, corpus)
        assign, prior = self._STATE
        self.rng_ = np.ascontiguousarray(a["rng"], dtype=np.uint64)
        priors = np.ascontiguousarray(a[prior], dtype=np.float64)
        setattr(self, prior + "_", priors)
        self._log_lik_rows = [list(r) for r in h["log_lik"]]
        self._log_lik_iters = list(h["log_lik_iter"])
        for key, attr in self._TRACES.items():
            setattr(self, attr, [list(r) for r in h[key]])
        # Every kept sample is rebuilt through its chain's state, then the current state; the
        # samples of a checkpoint of the earlier layout (arrays, no files) get their files now.
        for c, sit, sha256, state, sample_prior in kept.states(self, path, f, corpus):
            self._set_chain_state(corpus, c, state)
            saved = priors[c].copy()
            priors[c] = sample_prior
            sample = self._take_sample(c, int(sit))
            priors[c] = saved
            if sha256 is None:
                self._wrote(kept.write(self, path, sample))
            else:
                sample.pop(assign, None)
                sample["sha256"] = sha256
            self._samples.append(sample)
        for c in range(self.n_chains):
            self._set_chain_state(corpus, c, a[assign][c])
        self.n_iter_ = int(h["iteration"])
        return self.n_iter_

    # -- fitted model -------------------------------------------------------------------------

    def _is_fitted(self):
        return hasattr(self, self._INFERENCE_ARRAYS[0] + "_")

    def _cs_of_chain(self, chain):
        """Indices cs = chain * n_samples + s of the kept samples of ``chain``."""
        if not 0 <= chain < self.n_chains:
            raise ValueError(f"chain must be in [0, {self.n_chains}), got {chain!r}")
        S = self.n_samples_
        return range(chain * S, (chain + 1) * S)

    # -- model files --------------------------------------------------------------------------

    def save(self, path, full=False):
        """Write the model (atomically) with its parameters and corpus fingerprint.

        ``full=False`` keeps what inference needs (the kept samples' counts); ``full=True`` adds
        the chains' current state (assignments, prior) and rng state.
        """
        self._check_fitted()
        source = getattr(self, "_model_file", None)
        # written by a Ray fit whose state stayed on workers (once its parts are removed, the
        # arrays below, mapped from it, are written instead)
        if source is not None and not full and os.path.exists(source):
            ckpt.copy_model_file(source, path)
            return
        arrays = {name: getattr(self, name + "_") for name in self._INFERENCE_ARRAYS}
        header = self._model_header()
        if full:
            arrays.update({name: getattr(self, name + "_") for name in self._STATE + ("rng",)})
        ckpt.write_model_file(path, header, arrays)

    def _model_header(self):
        return dict(self._header(), n_iter=int(self.n_iter_), n_samples=int(self.n_samples_),
                    sample_iter=self.sample_iter_.tolist())

    @classmethod
    def load(cls, path, fingerprint=None, doc_len=None):
        """Read a model written by :meth:`save`.

        Parameters
        ----------
        fingerprint : str or None
            Fingerprint of the corpus/index the model will be used with; a model trained on
            another one is refused with a ValueError naming both fingerprints.
        doc_len : ndarray of int or None
            Token counts of the documents the model describes in that index; a file whose
            document tables disagree with them is refused.
        """
        f = cls._read_file(path, fingerprint)
        validate_files.gibbs_model_file(cls, path, f, doc_len)
        try:
            return cls._from_file(f)
        except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
            raise _damaged(path, e, "model") from e

    @classmethod
    def _from_file(cls, f):
        h, a = f.header, f.arrays
        missing = [n for n in cls._INFERENCE_ARRAYS if n not in a]
        if missing:
            raise KeyError(f"array {missing[0]!r}")
        model = cls._from_params(h["params"])
        model.fingerprint_ = h["fingerprint"]
        model.corpus_hash_ = h.get("corpus_hash")
        model.n_iter_ = h["n_iter"]
        model.n_samples_ = h["n_samples"]
        model.sample_iter_ = np.array(h["sample_iter"], dtype=np.int64)
        model.n_terms_ = int(h["n_terms"])
        model._log_lik_rows = h["log_lik"]
        model._log_lik_iters = h["log_lik_iter"]
        for key, attr in cls._TRACES.items():
            setattr(model, attr, h.get(key, []))
        for name in cls._INFERENCE_ARRAYS:
            setattr(model, name + "_", a[name])
        assign, prior = cls._STATE
        if assign in a:  # saved with full=True
            model._set_saved_assignments(a[assign])
            setattr(model, prior + "_", a[prior])
            model.rng_ = a["rng"]
        model._after_load(h)
        return model

    def _set_saved_assignments(self, assignments):
        setattr(self, self._STATE[0] + "_", assignments)

    def _sparse_n_active(self, it, n_docs):
        """Documents active during sweep ``it``: every one (kinds with the sparse
        initialisation of :class:`SweepOrderModel` start from fewer)."""
        return n_docs

    def _after_load(self, header):
        """Derived attributes a loaded model needs besides what the file holds."""


class SweepOrderModel(GibbsModel):
    """A :class:`GibbsModel` whose chains keep the assignment of every token in sweep order
    (``z_ord_``; LDA and PAM), with the sparse initialisation of the PAM paper: a growing set of
    active documents (``_active``, ``_doc_perm``, allocated by ``_alloc_chain_state``).

    Subclasses provide ``_rebuild_counts(corpus, c)``: the counts of chain c from its ``z``.
    """

    _STATE = ("z", "alpha")

    def _check_corpus(self, corpus):
        super()._check_corpus(corpus)
        if not (0 < float(self.sparse_init_frac) <= 1):
            raise ValueError(f"sparse_init_frac must be in (0, 1], got {self.sparse_init_frac!r}")
        if self.init == "sparse":
            full, burn_in = self._sparse_full_iter(corpus.n_docs), self._schedule()[0]
            if full > burn_in:
                raise ValueError(
                    f"init='sparse' activates all {corpus.n_docs} documents only at sweep {full}, after "
                    f"burn_in={burn_in}; raise burn_in or sparse_init_frac, or lower sparse_init_every")

    def _sparse_n_active(self, it, n_docs):
        """Documents active during sweep ``it`` (0-based) under the sparse initialisation."""
        if self.init != "sparse":
            return n_docs
        start = max(1, int(math.ceil(self.sparse_init_frac * n_docs)))
        return min(n_docs, start << min(60, it // self.sparse_init_every))

    def _sparse_full_iter(self, n_docs):
        it = 0
        while self._sparse_n_active(it, n_docs) < n_docs:
            it += self.sparse_init_every
        return it

    def _set_active(self, it, n_docs):
        n = self._sparse_n_active(it, n_docs)
        for c in range(self.n_chains):
            if n >= n_docs:
                self._active[c] = 1
            else:
                self._active[c] = 0
                self._active[c, self._doc_perm[c][:n]] = 1

    def _z_doc(self, c):
        """Assignments of chain c in document order."""
        out = np.empty(self.z_ord_.shape[1], dtype=np.int32)
        out[self._lay["ord_pos"]] = self.z_ord_[c]
        return out

    def _set_chain_state(self, corpus, c, z):
        self.z_ord_[c] = np.asarray(z, dtype=np.int32)[self._lay["ord_pos"]]
        self._rebuild_counts(corpus, c)

    def _set_saved_assignments(self, z):
        self._z_full = z

    @property
    def z_(self):
        if not hasattr(self, "z_ord_"):
            if hasattr(self, "_z_full"):  # loaded with save(full=True)
                return self._z_full
            raise AttributeError("z_ is only available after fit or for models saved with full=True")
        return np.stack([self._z_doc(c) for c in range(self.n_chains)])
