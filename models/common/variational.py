"""What the torch-trained (amortized variational) topic models share: device and seeding, the
epoch/mini-batch loop with its ELBO trace, progress callbacks, checkpoints that resume
bit-identically, and model files through :mod:`models.common.checkpoint`.

torch is imported inside the methods, so that ``import models`` never imports it.

Reproducibility: all randomness (initial weights, batch order, reparameterisation noise,
dropout) comes from streams seeded by ``seed``; same seed, device and thread count give the same
model. On a GPU a seed gives one model run to run too (checked by
``tests/test_variational_cuda.py`` where torch sees one), though not the CPU's: the devices round
differently and draw from different random streams.
"""
import os
import re
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np

from . import checkpoint as ckpt
from . import validate_files
from .base import TopicModel
from .corpus import content_hash
from .heldout import document_completion, training_sample
from .stopping import stop_point

# The devices the torch kinds are built and tested for.
_DEVICE = re.compile(r"cpu|cuda(:[0-9]+)?")

# Parameters that say where training runs, not what it computes: never written to model files.
_RUNTIME_PARAMS = ("executor", "n_workers", "adam_state")
# Parameters a checkpoint may differ in: they do not change training (refine_steps and
# doc_samples only how documents are inferred afterwards).
_RESUME_FREE = ("n_jobs", "callback_every", "checkpoint_every", "log_lik_every", "device",
                "refine_steps", "doc_samples") + _RUNTIME_PARAMS


def count_matrix(corpus):
    """The documents' term counts as a scipy CSR matrix (n_docs, n_terms), float32."""
    from scipy import sparse

    doc = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.doc_ptr))
    X = sparse.csr_matrix((np.ones(corpus.n_tokens, dtype=np.float32), (doc, corpus.term_ids)),
                          shape=(corpus.n_docs, corpus.n_terms))
    X.sum_duplicates()
    return X


def training_loss(neg_elbo, kl, kl_weight, n_batch=None):
    """The loss a training step minimises: the batch mean of the negative ELBO with the KL part
    weighted by ``kl_weight`` (KL warm-up), summed over independent networks ((n_chains, B)
    inputs). ``n_batch``: the global batch's documents when these B are a worker's part of it
    (the mean is then the part's sum over them: a worker may hold none of a batch)."""
    per_doc = neg_elbo - (1.0 - kl_weight) * kl
    loss = per_doc.mean(-1) if n_batch is None else per_doc.sum(-1) / n_batch
    return loss.sum() if loss.dim() else loss


def completion_trace(path, header):
    """The document-completion trace of a file's header as (figures, epochs); empty for files
    written before it existed."""
    v, it = header.get("dc_log_lik", []), header.get("dc_log_lik_iter", [])
    if not (isinstance(v, list) and isinstance(it, list) and len(v) == len(it)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 1 for i in it)):
        raise ValueError(f"{os.fspath(path)}: header dc_log_lik and dc_log_lik_iter are not a list of "
                         f"numbers and a list of epochs of one length")
    return [float(x) for x in v], list(it)


class VariationalModel(TopicModel):
    """Base of the models trained by amortized variational inference in torch.

    Subclasses store the parameters ``epochs``, ``batch_size``, ``lr``, ``kl_warmup``, ``seed``,
    ``device``, ``n_jobs``, ``log_lik_every``, ``callback_every``, ``checkpoint_every`` (and their
    own) and define
    ``_check_params(corpus)``, ``_build_net(n_terms)`` (a module with ``loss(x, gen)`` returning
    the negative ELBO and the KL part of every document of a batch; a network may also define
    ``end_epoch()``, run without gradients after every epoch's last step, for closed-form
    updates such as aviPAM's M-step topics), ``_batch_input(rows, device)`` (the ``x`` that
    ``loss`` takes for a batch's rows of the count matrix, scipy CSR; a network may also define
    ``dense_grads()``, run after every backward pass, to give Adam dense gradients where its
    layers produced sparse ones) and ``_finalize(net, X, threads, stage)``
    (the fitted arrays named in ``_INFERENCE_ARRAYS``, the first of which exists exactly when
    the model is fitted, on ``threads`` threads; ``stage(what, done, total)``, or None, to
    report its progress) and ``_encoder_model(net)`` (a shallow copy of the model whose
    ``fold_in`` infers documents by one pass of ``net`` as it stands, for the completion trace).

    One kept model: ``sample_iter_ = [epochs]``; ``log_lik_`` is the training ELBO per token of
    every epoch (the average of the mini-batch estimates), one column per chain: ``n_chains``
    is 1, or, for a network whose ``loss`` gives (n_chains, B) arrays (independent networks
    trained side by side), its parameter. ``dc_log_lik_`` is the document-completion
    log-likelihood per token of a sample of the training documents
    (:func:`models.common.heldout.training_sample`) every ``log_lik_every`` epochs and after the last,
    at the epochs ``dc_log_lik_iter_``: a figure comparable with other kinds', which the ELBO
    is not.
    """

    n_chains = 1
    _INFERENCE_ARRAYS = ()
    # What a progress bar calls ``log_lik_``.
    log_lik_label = "elbo_per_token"
    # A loaded model's network is checked against the file's parameters and built on first use:
    # ranking reads only the fitted arrays, and neither builds it nor copies its weights.
    _net = None
    _net_state = None
    _net_file = None

    @property
    def net_(self):
        """The trained network (None for a file that holds none)."""
        if self._net is None and self._net_state is not None:
            validate_files.variational_net_state(self, self._net_file, self._net_state)
            net = self._make_net(self.n_terms_)
            self._load_net_state(net, self._net_state)
            net.eval()
            self._net, self._net_state = net, None
        return self._net

    @net_.setter
    def net_(self, net):
        self._net, self._net_state = net, None

    def _net_buffers(self):
        """The network's buffers its parameters fix, by name (a file's must equal them)."""
        return {}

    @classmethod
    def _upgrade_net_arrays(cls, arrays, param_names=()):
        """Bring the network state of a file written by an earlier version (``net.<name>``
        arrays, and a checkpoint's Adam moments ``opt.<i>.<moment>``, ``param_names`` giving the
        parameters in optimizer order) to the network's current layout, in place, before the
        file is validated; a kind whose layout changed overrides it."""

    # -- parameters ---------------------------------------------------------------------------

    def _check_shared_params(self):
        for name in ("epochs", "batch_size", "log_lik_every", "callback_every", "checkpoint_every"):
            self._pos_int(name)
        self._pos_int("seed", 0)
        self._pos_int("kl_warmup", 0)
        if self.n_jobs is not None:
            self._pos_int("n_jobs")
        self._pos_float("lr")
        # checked without torch: a model file's parameters are checked when it loads for ranking,
        # which never starts torch
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ValueError(f"device must be a torch device string such as 'cpu' or 'cuda' "
                             f"(or 'cuda:N'), got {self.device!r}")

    def _check_device(self):
        """A CUDA device is one torch sees (before training on it)."""
        import torch

        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError("device 'cuda' asked for, but torch sees no CUDA device "
                             "(torch.cuda.is_available() is False); use --device cpu")

    # -- training -----------------------------------------------------------------------------

    def fit(self, corpus, callback=None, checkpoint=None):
        """Train on ``corpus``.

        Parameters
        ----------
        corpus : Corpus
        callback : callable or None
            ``callback(model, epoch, epochs)`` after every ``callback_every`` epochs (and the last).
            A callback with a ``stage(what, done, total)`` method (as
            :class:`models.common.progress.TqdmCallback`) also hears how the training documents'
            posteriors advance after the last epoch.
        checkpoint : str or PathLike or None
            Checkpoint file (network, optimizer and random streams). If it exists, training
            resumes from it and ends as an uninterrupted run would (bit-identical on CPU with the
            same thread count); it is rewritten every ``checkpoint_every`` epochs and at the end.

        Returns
        -------
        self
        """
        import torch

        self._check_corpus(corpus)
        self._check_params(corpus)
        self._check_device()
        prev = torch.get_num_threads()
        # One thread on the CPU whatever n_jobs: torch splits its reductions by thread count, so
        # only a fixed count gives the same model for a seed (n_jobs sets transform's threads).
        # Adam's step is elementwise (no reduction): it runs on n_jobs threads.
        step_threads = self.n_jobs or prev
        torch.set_num_threads(1 if self.device == "cpu" else step_threads)
        try:
            self._fit(corpus, callback, checkpoint, step_threads)
        finally:
            torch.set_num_threads(prev)
        return self

    def _make_net(self, n_terms):
        """The network with its initial weights drawn from ``seed`` (the global stream untouched)."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            net = self._build_net(n_terms)
        return net.to(torch.device(self.device))

    def _start_fit(self, corpus, matrix=True):
        """The corpus's fields of the fitted model, empty traces; returns its count matrix
        (None without ``matrix``)."""
        self.fingerprint_ = corpus.fingerprint
        self.corpus_hash_ = content_hash(corpus.doc_ptr, corpus.term_ids, corpus.n_terms)
        self.n_terms_ = corpus.n_terms
        self.n_docs_ = corpus.n_docs
        self._log_lik_rows, self._log_lik_iters = [], []
        self._dc_rows, self._dc_iters = [], []
        self._ckpt_writes, self._ckpt_pending = [], 0
        return count_matrix(corpus) if matrix else None

    def _training_state(self, n_terms):
        """The network at its initial weights, its optimizer and the two random streams."""
        import torch

        net = self._make_net(n_terms)
        # fused: one pass over every parameter per step (the encoders' first layers are V x hidden)
        opt = torch.optim.Adam(net.parameters(), lr=float(self.lr), betas=(self.beta1, 0.999), fused=True)
        # Batch order on the CPU, noise and dropout on the device: both streams are checkpointed.
        order_gen = torch.Generator().manual_seed(self.seed)
        gen = torch.Generator(device=torch.device(self.device)).manual_seed(self.seed + 1)
        return net, opt, order_gen, gen

    def _fit(self, corpus, callback, checkpoint, step_threads, share=None):
        """Train; ``share``: this process's part of data-parallel training
        (:class:`models.avipam.distributed.Share`: its documents of every mini-batch, the sums it
        shares, the training state it starts from), which returns the network and its documents'
        count matrix and leaves the fitted arrays to the driver."""
        import torch

        dev = torch.device(self.device)
        X = self._start_fit(corpus)
        net, opt, order_gen, gen = self._training_state(corpus.n_terms)
        start = 0
        if checkpoint is not None and os.path.exists(checkpoint):
            start = self._resume(checkpoint, corpus, net, opt, order_gen, gen)
        elif share is not None and share.resume is not None:
            start = self._restore(*share.resume, net, opt, order_gen, gen)
        if share is not None:
            share.attach(net, opt)
        # Independent networks (chains) step side by side on the CPU, one torch thread each.
        pool = None
        if share is None and dev.type == "cpu" and step_threads > 1 and hasattr(net, "loss_backward"):
            pool = ThreadPoolExecutor(min(step_threads, len(net.chains)))
        self._dc_docs = training_sample(corpus, self.seed) if share is None else share.dc_docs
        try:
            self._epochs(net, opt, X, start, order_gen, gen, pool, corpus, callback, checkpoint,
                         step_threads, share)
        finally:
            del self._dc_docs
            if pool is not None:
                pool.shutdown()
        if share is not None:
            return net, X
        self._end_fit(net, X, step_threads, callback)

    def _end_fit(self, net, X, threads, callback, doc_mix=None):
        """The fitted arrays of the trained network ``net`` (``doc_mix``: the documents'
        posteriors when they were inferred elsewhere, else inferred from ``X``)."""
        self.net_ = net
        self.n_samples_ = 1
        self.sample_iter_ = np.array([self.epochs], dtype=np.int64)
        self._finalize(net, X, threads, getattr(callback, "stage", None), doc_mix)

    def _epochs(self, net, opt, X, start, order_gen, gen, pool, corpus, callback, checkpoint, step_threads,
                share=None):
        import torch

        dev = gen.device
        # a worker's corpus is its documents: the shuffle and the ELBO per token are the whole one's
        D, N = (corpus.n_docs, corpus.n_tokens) if share is None else (share.n_docs, share.n_tokens)
        n_batches = max(1, -(-D // self.batch_size))
        for epoch in range(start, self.epochs):
            net.train()
            # KL warm-up: the KL terms' weight rises linearly to 1 over the first kl_warmup
            # epochs, a function of the epoch alone so that a resumed run is the same run.
            kl_weight = min(1.0, (epoch + 1) / self.kl_warmup) if self.kl_warmup else 1.0
            perm = torch.randperm(D, generator=order_gen).numpy()
            total = 0.0
            # Near-equal batches (sizes differ by at most one): batch normalisation never sees
            # a batch of one document.
            for idx in np.array_split(perm, n_batches):
                idx, draws, n_batch = np.sort(idx), gen, None
                if share is not None:  # this process's documents of the batch, their draws
                    idx, draws, n_batch = share.rows(idx, gen)
                x = self._batch_input(X[idx], dev)
                opt.zero_grad()
                if pool is not None:
                    neg_elbo, kl = net.loss_backward(x, gen, kl_weight, pool)
                else:
                    neg_elbo, kl = net.loss(x, draws)
                    training_loss(neg_elbo, kl, kl_weight, n_batch).backward()
                    if hasattr(net, "dense_grads"):
                        net.dense_grads()
                if share is not None:
                    share.step(net, opt)
                else:
                    self._adam_step(opt, step_threads)
                total = total + neg_elbo.detach().sum(-1).double().cpu().numpy()
            if share is not None:
                total = share.sum_epoch(net, total)
            if hasattr(net, "end_epoch"):
                with torch.no_grad():
                    net.end_epoch()
            if not np.isfinite(total).all():
                raise RuntimeError(f"the ELBO became {total} in epoch {epoch + 1}; lower lr "
                                   f"(now {self.lr}) or use norm='batch'")
            done = epoch + 1
            self.n_iter_ = done
            self._log_lik_rows.append([float(t) for t in np.atleast_1d(-total / N)])
            self._log_lik_iters.append(done)
            if self._dc_docs and (done % self.log_lik_every == 0 or done == self.epochs):
                self._record_completion(net, done)
            ckpt_due = checkpoint is not None and (done % self.checkpoint_every == 0 or done == self.epochs)
            if ckpt_due:
                self._write_checkpoint(checkpoint, net, opt, order_gen, gen)
            if callback is not None and (done % self.callback_every == 0 or done == self.epochs):
                write = None if ckpt_due else partial(self._write_checkpoint, checkpoint, net, opt, order_gen, gen)
                with stop_point(done, self.epochs, checkpoint, write, unit="epoch"):
                    callback(self, done, self.epochs)
            if share is not None:
                share.epoch_done(self, net, opt, order_gen, gen)

    def _record_completion(self, net, done):
        """Append the completion trace's figure after epoch ``done``: the training sample's
        documents inferred by one pass of the encoder as it stands. Its draws come from streams
        of their own and it takes no gradient step: training goes on as without it."""
        c = document_completion(self._encoder_model(net), self._dc_docs, seed=self.seed)
        self._dc_rows.append(c.log_lik)
        self._dc_iters.append(done)

    @property
    def dc_log_lik_(self):
        return np.array(self._dc_rows, dtype=np.float64)

    @property
    def dc_log_lik_iter_(self):
        return np.array(self._dc_iters, dtype=np.int64)

    def _adam_step(self, opt, threads):
        import torch

        if self.device != "cpu" or threads == 1:
            opt.step()
            return
        torch.set_num_threads(threads)
        try:
            opt.step()
        finally:
            torch.set_num_threads(1)

    # -- checkpoints --------------------------------------------------------------------------

    @staticmethod
    def _opt_arrays(opt):
        out = {}
        for i, st in opt.state_dict()["state"].items():
            for k, v in st.items():
                out[f"opt.{i}.{k}"] = v.detach().cpu().numpy()
        return out

    def _file_header(self):
        header = super()._file_header()
        header["params"] = {k: v for k, v in header["params"].items() if k not in _RUNTIME_PARAMS}
        return header

    def _checkpoint_header(self):
        return dict(self._file_header(), iteration=self.n_iter_, log_lik=self._log_lik_rows,
                    log_lik_iter=self._log_lik_iters, **self._dc_header())

    def _checkpoint_arrays(self, net, opt, order_gen, gen):
        """The training state a checkpoint holds: network, optimizer, random streams."""
        arrays = {"net." + k: v.detach().cpu().numpy() for k, v in net.state_dict().items()}
        arrays.update(self._opt_arrays(opt))
        arrays["order_rng"] = order_gen.get_state().numpy()
        arrays["rng"] = gen.get_state().cpu().numpy()
        return arrays

    def _write_checkpoint(self, path, net, opt, order_gen, gen):
        self._write_checkpoint_arrays(path, self._checkpoint_arrays(net, opt, order_gen, gen))

    def _write_checkpoint_arrays(self, path, arrays):
        """Write the checkpoint of the training state ``arrays`` after epoch ``n_iter_``."""
        self._wrote(ckpt.write_model_file(path, self._checkpoint_header(), arrays,
                                          kind=ckpt.CHECKPOINT_FORMAT), self.n_iter_)

    def _resume(self, path, corpus, net, opt, order_gen, gen):
        f = self._open_checkpoint(path, corpus, _RESUME_FREE)
        a = f.arrays
        self._upgrade_net_arrays(a, [name for name, _ in net.named_parameters()])
        validate_files.variational_checkpoint(self, path, f, net, opt, {"order_rng": order_gen, "rng": gen})
        dc, dc_iter = completion_trace(path, f.header)
        return self._restore(dict(f.header, dc_log_lik=dc, dc_log_lik_iter=dc_iter), a, net, opt, order_gen, gen)

    def _restore(self, h, a, net, opt, order_gen, gen):
        """Load a checkpoint's validated header ``h`` and arrays ``a`` into the training state;
        returns the epochs done."""
        import torch

        self._load_net_state(net, a)
        sd = opt.state_dict()
        state = {}
        for key, v in a.items():
            if key.startswith("opt."):
                _, i, k = key.split(".", 2)
                state.setdefault(int(i), {})[k] = torch.from_numpy(np.array(v))
        opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})
        order_gen.set_state(torch.from_numpy(np.array(a["order_rng"])))
        gen.set_state(torch.from_numpy(np.array(a["rng"])))
        self._log_lik_rows = [list(r) for r in h["log_lik"]]
        self._log_lik_iters = list(h["log_lik_iter"])
        self._dc_rows, self._dc_iters = list(h["dc_log_lik"]), list(h["dc_log_lik_iter"])
        self.n_iter_ = int(h["iteration"])
        return self.n_iter_

    @staticmethod
    def _load_net_state(net, arrays):
        import torch

        dev = next(net.parameters()).device
        sd = {k[4:]: torch.from_numpy(np.array(v)).to(dev) for k, v in arrays.items()
              if k.startswith("net.")}
        net.load_state_dict(sd)

    # -- model files --------------------------------------------------------------------------

    def _is_fitted(self):
        return bool(self._INFERENCE_ARRAYS) and hasattr(self, self._INFERENCE_ARRAYS[0] + "_")

    def _dc_header(self):
        return dict(dc_log_lik=self._dc_rows, dc_log_lik_iter=self._dc_iters)

    def save(self, path, full=False):
        """Write the model atomically: the fitted arrays, the network (so new documents can be
        encoded), parameters, ELBO trace and corpus fingerprint. ``full`` is accepted for the
        protocol; a variational model has no further chain state."""
        self._check_fitted()
        header = dict(self._file_header(), n_iter=int(self.n_iter_), n_samples=1,
                      n_docs=int(self.n_docs_),
                      sample_iter=self.sample_iter_.tolist(), log_lik=self._log_lik_rows,
                      log_lik_iter=self._log_lik_iters, **self._dc_header())
        arrays = {name: getattr(self, name + "_") for name in self._INFERENCE_ARRAYS}
        if getattr(self, "net_", None) is not None:
            arrays.update({"net." + k: v.detach().cpu().numpy()
                           for k, v in self.net_.state_dict().items()})
        ckpt.write_model_file(path, header, arrays)

    @classmethod
    def load(cls, path, fingerprint=None, doc_len=None):
        """Read a model written by :meth:`save` (refused when trained on another ``fingerprint``,
        or when its documents disagree with ``doc_len``, the token counts of the index's).
        The network is rebuilt, on first use (``net_``), on ``device`` of the saved parameters
        when available, else on CPU."""
        f = cls._read_file(path, fingerprint)
        cls._upgrade_net_arrays(f.arrays)
        _, dims = validate_files.variational_model_file(cls, path, f, doc_len)
        h, a = f.header, f.arrays
        model = cls._from_params(h["params"])
        model.fingerprint_ = h["fingerprint"]
        model.corpus_hash_ = h.get("corpus_hash")
        model.n_iter_ = h["n_iter"]
        model.n_samples_ = 1
        model.sample_iter_ = np.array(h["sample_iter"], dtype=np.int64)
        model.n_terms_ = int(h["n_terms"])
        model.n_docs_ = int(dims["documents"])
        model._log_lik_rows = h["log_lik"]
        model._log_lik_iters = h["log_lik_iter"]
        model._dc_rows, model._dc_iters = completion_trace(path, h)
        for name in cls._INFERENCE_ARRAYS:
            setattr(model, name + "_", a[name])
        state = {k: v for k, v in a.items() if k.startswith("net.")}
        if state and model.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                model.device = "cpu"
        model.net_ = None
        # the network checked and built on first use (net_): ranking never needs it, nor torch
        model._net_state, model._net_file = state or None, os.fspath(path)
        return model
