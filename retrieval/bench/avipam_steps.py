"""Benchmark: where aviPAM's training time goes, at its defaults on a corpus of AP's vocabulary.

    topicir bench avipam steps --write docs/results/bench-avipam-steps.md
    topicir bench avipam steps --device cuda

A mini-batch step's cost depends on the batch (documents of AP's length), the vocabulary (the
encoders' first layers and Adam's step are vocabulary-sized) and the architecture, not on how
many documents the collection holds; an epoch is ``ceil(docs / batch_size)`` steps and a pass of
the closed-form topics (M-step) over the vocabulary. So the corpus here has the target's
vocabulary and document lengths but fewer documents (a seeded Zipf corpus,
``models.common.corpus.synthetic_corpus``), and the figures are projected to the target collection:
steps of an epoch times the measured step, plus the measured M-step, times the epochs; and the
finishing (every training document's posterior refined and averaged) per document times the
target's documents. The parts of a step are timed where the training loop calls them (the
device synchronised at each boundary), on the epochs after the first.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict

import numpy as np

from models.avipam.model import AVIPAM
from models.common.corpus import synthetic_corpus

from ..core.tables import Table, fixed

# A CPU step with several chains and threads runs each chain's forward, backward and dense
# gradients on its own thread: one part then, the three parts' rows are left out.
PARTS = ("batch input", "forward", "backward", "dense gradients", "chains side by side", "Adam step")
WHAT = {"batch input": "the batch's term counts, as the encoders read them, on the device",
        "forward": "encoders, every level's noise, mixtures and KL, the decoder's log-likelihood",
        "backward": "gradients of the loss",
        "dense gradients": "the encoders' first layers' sparse gradients written where Adam reads them",
        "chains side by side": "every chain's forward, backward and dense gradients, the chains on threads",
        "Adam step": "Adam's update of every parameter (fused; the first layers are V x hidden)",
        "other": "the rest of a step (the batch's rows sliced, gradients zeroed, the ELBO's sum)"}


class StepClock:
    """Seconds in each part of the training steps of one model, read from wrappers around the
    methods the loop calls (the device synchronised at every boundary so that its queued work
    counts where it was asked for). Only what runs while ``keep`` is set counts:
    :meth:`epoch_done`, called after every epoch, sets it for the epochs after the first."""

    def __init__(self, device: str):
        self.sync = _synchroniser(device)
        self.parts = defaultdict(float)
        self.steps = 0
        self.mstep = []
        self.keep = False
        self._step_start = None
        self._loss_end = None

    def epoch_done(self, epoch: int, total: int) -> None:
        """After epoch ``epoch`` of ``total``: count the epochs after the first, not the finishing."""
        self.keep = 1 <= epoch < total

    def per_step(self, *parts) -> float:
        """Seconds a counted step spends in ``parts`` (together)."""
        return sum(self.parts[p] for p in parts) / self.steps

    @property
    def mstep_s(self) -> float:
        """Median seconds of the counted M-steps (0 without any)."""
        return float(np.median(self.mstep)) if self.mstep else 0.0

    def now(self) -> float:
        self.sync()
        return time.perf_counter()

    def _add(self, part, seconds):
        if self.keep:
            self.parts[part] += seconds

    def _close_step(self, at):
        if self._step_start is not None and self.keep:
            self.parts["step"] += at - self._step_start
            self.steps += 1
        self._step_start = None

    def wrap(self, obj, name, part):
        inner = getattr(obj, name)

        def timed(*args, **kwargs):
            t0 = self.now()
            if part == "batch input":
                self._close_step(t0)
                self._step_start = t0
            elif part == "dense gradients" and self._loss_end is not None:
                self._add("backward", t0 - self._loss_end)
            elif part == "M-step":
                self._close_step(t0)
            out = inner(*args, **kwargs)
            t1 = self.now()
            if part == "M-step":
                if self.keep:
                    self.mstep.append(t1 - t0)
            else:
                self._add(part, t1 - t0)
            self._loss_end = t1 if part == "forward" else None
            return out

        setattr(obj, name, timed)


def _synchroniser(device: str):
    import torch

    if torch.device(device).type == "cuda":
        return torch.cuda.synchronize
    return lambda: None


def _device_name(device: str) -> str:
    """``device`` with the GPU's name where it is one (the results' header names the CPU only)."""
    import torch

    dev = torch.device(device)
    return f"{device} ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else device


def time_parts(model, device: str) -> StepClock:
    """A :class:`StepClock` of ``model`` (an aviPAM not fitted yet): wrappers around the methods
    its training loop calls, and around its network's once ``fit`` builds it."""
    clock = StepClock(device)
    make_net = model._make_net

    def timed_net(n_terms):
        net = make_net(n_terms)
        for name, part in (("loss", "forward"), ("dense_grads", "dense gradients"),
                           ("loss_backward", "chains side by side"), ("end_epoch", "M-step")):
            if hasattr(net, name):
                clock.wrap(net, name, part)
        return net

    model._make_net = timed_net
    for name, part in (("_batch_input", "batch input"), ("_adam_step", "Adam step")):
        clock.wrap(model, name, part)
    return clock


def _corpus(index, docs, terms, mean_len, seed):
    """The training corpus and how it was made (a note)."""
    start = time.perf_counter()
    if index:
        from ..core.index import Index
        from ..core.modelfiles import index_corpus
        from .lda import first_docs

        corpus = first_docs(index_corpus(Index(index)), docs)
        made = f"the first {corpus.n_docs:,} documents of the index {index}"
    else:
        corpus = synthetic_corpus(docs, terms, mean_len, seed=seed)
        made = f"models.common.corpus.synthetic_corpus, {corpus.n_docs:,} documents"
    return corpus, f"{made}, {corpus.n_tokens:,} tokens, {corpus.n_terms:,} terms (read or made in {time.perf_counter() - start:.0f} s)"


def run(*, docs: int = 20_000, terms: int = 200_000, mean_len: float = 282.0, index: str | None = None,
        target_docs: int = 250_000, epochs: int = 3, threads: int = 2, device: str = "cpu",
        seed: int = 0) -> list[Table]:
    if epochs < 2:
        raise ValueError(f"epochs must be >= 2 (the first one is not timed), got {epochs!r}")
    model = AVIPAM(epochs=epochs, seed=seed, device=device, n_jobs=threads)
    model._check_params()  # a device torch cannot use is refused before the corpus is made
    model._check_device()
    corpus, made = _corpus(index, docs, terms, mean_len, seed)
    clock = time_parts(model, device)
    ticks = []

    def callback(m, epoch, total):
        ticks.append(clock.now())
        clock.epoch_done(epoch, total)

    t0 = clock.now()
    model.fit(corpus, callback=callback)
    end = clock.now()
    epoch_s = np.diff([t0] + ticks)
    finish_s = end - ticks[-1]
    return [_table(model, corpus, clock, epoch_s, finish_s, target_docs, made, threads, device)]


def _table(model, corpus, clock, epoch_s, finish_s, target_docs, made, threads, device) -> Table:
    step_s = clock.per_step("step")
    per_step = {p: clock.per_step(p) for p in PARTS if p in clock.parts}
    per_step["other"] = max(0.0, step_s - sum(per_step.values()))
    target_steps = math.ceil(target_docs / model.batch_size)
    n_epochs = AVIPAM().epochs  # the default schedule
    mstep_s = clock.mstep_s
    epoch_target = target_steps * step_s + mstep_s
    finish_target = finish_s / corpus.n_docs * target_docs
    def row(part, what, epoch_s, total_s, step=None):
        """A row: seconds per epoch and in all; a part of a step also per step and its share."""
        return {"part": part, "what": what,
                "ms per step": "" if step is None else fixed(1000 * step, 2),
                "share of a step": "" if step is None else f"{100 * step / step_s:.0f}%",
                "projected s per epoch": "" if epoch_s is None else fixed(epoch_s, 1),
                "projected min, all epochs": fixed(total_s / 60, 1)}

    rows = [row(part, WHAT[part], target_steps * s, n_epochs * target_steps * s, step=s)
            for part, s in per_step.items()]
    rows.append(row("step", "all of the above", target_steps * step_s, n_epochs * target_steps * step_s,
                    step=step_s))
    rows.append(row("topics (M-step)", "the closed-form topics, once an epoch", mstep_s, n_epochs * mstep_s))
    rows.append(row("finishing", "every training document's posterior refined and averaged, once", None,
                    finish_target))
    rows.append(row("training", f"{n_epochs} epochs and the finishing", epoch_target,
                    n_epochs * epoch_target + finish_target))
    params = {k: v for k, v in model.get_params().items() if k not in ("epochs", "device", "n_jobs")}
    notes = [f"Corpus: {made}. Trained {len(epoch_s)} epochs at AVIPAM's defaults "
             f"on {_device_name(device)} ({threads} threads): epochs took {', '.join(f'{s:.1f}' for s in epoch_s)} s, the "
             f"finishing {finish_s:.1f} s; parts timed over the {clock.steps} steps of the epochs after the first.",
             f"Projected to {target_docs:,} documents of the same lengths and vocabulary: {target_steps:,} steps an "
             f"epoch (batch_size {model.batch_size}) times the step, plus the M-step; {n_epochs} epochs "
             "(AVIPAM's default); the finishing scaled by the documents.",
             "Settings: " + ", ".join(f"{k}={v}" for k, v in params.items()) + "."]
    return Table(f"aviPAM training: where the time goes ({device})", rows, notes=notes)
