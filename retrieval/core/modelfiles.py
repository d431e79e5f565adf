"""Topic models over an index: the training corpus, training, and loading against an index.

The corpus is the index's own token stream (``topicir-stats/``, memory-mapped), so models see
exactly the terms queries are analysed into; models carry the index fingerprint and refuse to
load against another index.
"""
from __future__ import annotations

import errno
import hashlib
import inspect
import json
import logging
import math
from pathlib import Path

import numpy as np

from models import registry
from models.common.atomic import check_writable, remove_stale, stale_temporaries, target_lock
from models.common import kept
from models.common.checkpoint import read_header
from models.common.corpus import Corpus, make_corpus
from models.common.heldout import training_completion
from models.common.progress import TqdmCallback
from models.common.stopping import StopWhen, TrainingStopped

from .plugins import hook
from .index import MODELS_DIR, Index
from .quick import quick_train_params

log = logging.getLogger(__name__)


def index_corpus(index: Index) -> Corpus:
    s = index.stats
    return make_corpus(s.doc_ptr, s.term_ids, n_terms=s.n_terms, fingerprint=index.fingerprint)


# Parameters that change how fast a model trains, never what it is.
RUNTIME_PARAMS = ("n_jobs", "callback_every", "checkpoint_every", "log_lik_every", "executor", "n_workers",
                  "adam_state")


def shaping(kind: str, params: dict) -> dict:
    """The parameters of ``params`` that shape a ``kind`` model: not n_jobs & co., nor one a later
    version added at the value that gives the models of before (a model file, a settings hash or
    a measured table from before it existed names the same model)."""
    added = registry.model_class(kind)._ADDED_PARAMS
    return {k: v for k, v in params.items()
            if k not in RUNTIME_PARAMS and not (k in added and v == added[k])}


def settings_hash(kind: str, params: dict) -> str:
    """8 hex digits identifying every parameter that shapes the model (not n_jobs & co.); the
    schedule counts as the sweeps it keeps (burn_in=None and 50 are one model at 100 sweeps)."""
    model = registry.model_class(kind)(**params)
    shaping_ = shaping(kind, model.get_params())
    if hasattr(model, "_schedule"):
        try:
            shaping_["burn_in"], shaping_["sample_every"] = model._schedule()
        except (TypeError, ValueError):  # bad values: training reports them
            pass
    return hashlib.sha256(json.dumps(shaping_, sort_keys=True, default=str).encode()).hexdigest()[:8]


def default_model_path(index: Index, kind: str, params: dict) -> Path:
    """``<index>/models/<kind>-k<K>-c<chains>-i<iters>-s<seed>-<hash>.npz``: the readable part
    names the usual settings, the hash all of them (alpha, beta, init, shards, ...), so a model
    trained otherwise never replaces this one."""
    params = registry.model_class(kind)(**params).get_params()  # defaults filled in
    keys = {"n_topics": "k", "n_super": "sup", "n_sub": "sub", "n_chains": "c", "n_iter": "i", "seed": "s"}
    tag = "-".join(f"{short}{params[name]}" for name, short in keys.items() if name in params)
    return index.path / MODELS_DIR / f"{kind}-{tag}-{settings_hash(kind, params)}.npz"


def _check_replace(out: Path, kind: str, params: dict, overwrite: bool) -> None:
    """Refuse to replace a model file trained with other settings (unless ``overwrite``)."""
    if overwrite or not out.exists():
        return
    try:
        old = read_header(out).get("params", {})
    except ValueError:
        old = None
    try:
        same = old is not None and settings_hash(kind, old) == settings_hash(kind, params)
    except TypeError:  # parameters of another version of the model
        same = False
    if not same:
        what = "an unreadable file" if old is None else "a model trained with other settings (" + ", ".join(
            f"{k}: {old.get(k)!r} there vs {v!r} now" for k, v in params.items()
            if k not in RUNTIME_PARAMS and old.get(k) != v) + ")"
        raise FileExistsError(f"{out} is {what}; delete it first or choose another --out")


def train_model(index: Index, kind: str, out=None, *, checkpoint=True, progress: bool = True,
                overwrite: bool = False, stop=None, **params):
    """Train a ``kind`` model (``lda``) on ``index`` and save it; returns (model, path).

    With ``checkpoint`` the run writes ``<out>.ckpt`` as it goes and a rerun of the same
    command resumes from it; the checkpoint is removed once the model is saved. ``stop``: an
    event (``is_set()``) that stops the training after the sweep (epoch) during which it is set,
    with a checkpoint of that sweep (:class:`models.common.stopping.TrainingStopped` is raised). The model path
    is locked while training: a second training of the same model is refused (LockedError).
    An existing ``out`` trained with other settings is refused unless ``overwrite``.
    Under ``TOPICIR_QUICK=1`` the kind's quick settings replace the size and schedule.
    """
    model = registry.model_class(kind)(**quick_train_params(kind, params))
    out = Path(out) if out else default_model_path(index, kind, model.get_params())
    if out.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"is a directory; name the model file to write "
                                f"(e.g. {out / (kind + '.npz')})", str(out))
    check_writable(out.parent)  # before hours of training, not at the first checkpoint
    with target_lock(out, what="model"):
        _check_replace(out, kind, model.get_params(), overwrite)
        # Under the lock no live writer of these names exists: their temporaries are leftovers.
        stale = stale_temporaries(out.parent, out.name) + stale_temporaries(out.parent, out.name + ".ckpt")
        stale += stale_temporaries(kept.kept_dir(out.with_name(out.name + ".ckpt")))
        for p in remove_stale(stale):
            log.warning("removed %s, left by a killed training", p)
        return _train_locked(index, kind, model, out, checkpoint, progress, stop)


def _train_locked(index, kind, model, out, checkpoint, progress, stop):
    ckpt = out.with_name(out.name + ".ckpt") if checkpoint else None
    if ckpt is not None and ckpt.exists():
        log.info("resuming from checkpoint %s", ckpt)
    corpus = index_corpus(index)
    log.info("training %s on %s: %d docs, %d tokens, %d terms, params %s", kind.upper(), index.name,
             corpus.n_docs, corpus.n_tokens, corpus.n_terms, model.get_params())
    _log_schedule(model)
    _warn_size(model, corpus)
    callback = TqdmCallback(desc=f"{kind.upper()} {index.name}", mininterval=2) if progress else None
    if stop is not None:
        callback = StopWhen(stop, callback)
    try:
        model.fit(corpus, callback=callback, checkpoint=ckpt, **training_inputs(index, model, progress))
    except TrainingStopped:
        callback.close()  # the bar's line ends before the stop is reported
        raise
    if ckpt is not None:
        _log_checkpoint_writes(model)
    model.save(out)
    if ckpt is not None:
        kept.remove_checkpoint(ckpt)
    log.info("saved %s", out)
    _log_completion(model, corpus)
    return model, out


def _log_checkpoint_writes(model) -> None:
    """What this run's checkpoints wrote to disk (kept samples once each)."""
    w = model.checkpoint_writes_
    log.info("checkpoints wrote %.1f MiB to disk: %d checkpoints, the last %.1f MiB",
             model.checkpoint_bytes_ / 2**20, len(w), (w[-1, 1] if len(w) else 0) / 2**20)


def _warn_size(model, corpus) -> None:
    """More topics than documents is said, not silently trained: the defaults (K = 800 for LDA,
    gLDA and PAM's sub-topics, 100 for the others) are sized for large collections."""
    k = int(getattr(model, "n_topics", 0))  # PAM's and aviPAM's: their sub-topics
    if k > corpus.n_docs:
        log.warning("%s with %d topics on %d documents (more topics than documents): the defaults are sized for "
                    "large collections; fewer topics (--n-topics) train faster; docs/results/effectiveness.md "
                    "measures the defaults on small collections too", model.kind.upper(), k, corpus.n_docs)


def _log_completion(model, corpus) -> None:
    """The line every kind's training ends on, comparable across kinds trained on one index:
    the log-likelihood per token by document completion of a seeded sample of the training
    documents (:func:`models.common.heldout.training_completion`)."""
    c = training_completion(model, corpus)
    if c is not None:
        log.info("document completion of %d training documents (even positions folded in, odd ones "
                 "scored): %.4f log-likelihood per token, perplexity %.0f", c.n_docs, c.log_lik,
                 math.exp(-c.log_lik))


def _log_schedule(model) -> None:
    """State the sampling schedule, which defaults to the number of sweeps asked for."""
    try:
        burn_in, every = model._schedule()
        iters = model._sample_iters().tolist()
    except (AttributeError, TypeError, ValueError):  # not a Gibbs model, or bad values fit reports
        return
    log.info("schedule: %d sweeps, burn-in %d, a sample every %d: samples after sweeps %s",
             model.n_iter, burn_in, every, ", ".join(map(str, iters)) or "none")


def training_inputs(index: Index, model, progress: bool = True) -> dict:
    """The extra ``fit`` inputs ``model.training_inputs`` names, from the kind's adapter."""
    if not model.training_inputs:
        return {}
    make = hook(model.kind, "training_inputs")
    if make is None:
        raise ValueError(f"{model.kind} needs {', '.join(model.training_inputs)} to train, but "
                         f"retrieval/adapters/{model.kind}.py defines no training_inputs(index, progress)")
    # a hook that names ``model`` reads the model's settings (tree-LDA: its WordNet directory)
    extra = {"model": model} if "model" in inspect.signature(make).parameters else {}
    inputs = make(index, progress=progress, **extra)
    missing = set(model.training_inputs) - set(inputs)
    if missing:
        raise ValueError(f"the {model.kind} adapter did not provide {', '.join(sorted(missing))}")
    return inputs


def load_model(path, index: Index, kind: str | None = None):
    """Load a model file for use with ``index`` (refused if trained on another index, if its
    document tables disagree with the index's documents, or, with ``kind``, if it holds another
    kind of model). On an index grown from the model's own by ``topicir index --add`` it is an
    :class:`~retrieval.core.extension.ExtendedModel`: the added documents are folded in."""
    from .extension import document_model, parent_state

    header = read_header(path)
    parent = parent_state(index, header.get("fingerprint"))
    if parent is not None:
        model = document_model(registry.load(path, fingerprint=parent["fingerprint"],
                                             doc_len=doc_lengths(index, parent["n_docs"]), header=header), index)
        log.info("%s was trained on the first %d of the %d documents of %s; the other %d are folded in",
                 path, parent["n_docs"], index.stats.n_docs, index.path, index.stats.n_docs - parent["n_docs"])
    else:
        model = registry.load(path, fingerprint=index.fingerprint, doc_len=doc_lengths(index), header=header)
    if kind is not None and model.kind != kind:
        raise ValueError(f"{path}: holds a {model.kind} model; this command needs a {kind} model")
    return model


def doc_lengths(index: Index, n_docs: int | None = None):
    """Token counts of the first ``n_docs`` (default: all) documents of ``index``, which a model
    trained on them must hold: a grown index keeps its earlier documents in its first rows."""
    ptr = index.stats.doc_ptr
    return np.diff(ptr[:(len(ptr) if n_docs is None else n_docs + 1)]).astype(np.int64)
