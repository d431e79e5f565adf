"""Topic models over an index: the training corpus, training, and loading against an index.

The corpus is the index's own token stream (``topicir-stats/``, memory-mapped), so models see
exactly the terms queries are analysed into; models carry the index fingerprint and refuse to
load against another index.
"""
from __future__ import annotations

import logging
from pathlib import Path

from models import registry
from models.corpus import Corpus, make_corpus
from models.progress import TqdmCallback

from .plugins import hook
from .index import Index

log = logging.getLogger(__name__)

MODELS_DIR = "models"


def index_corpus(index: Index) -> Corpus:
    s = index.stats
    return make_corpus(s.doc_ptr, s.term_ids, n_terms=s.n_terms, fingerprint=index.fingerprint)


def default_model_path(index: Index, kind: str, params: dict) -> Path:
    keys = {"n_topics": "k", "n_super": "sup", "n_sub": "sub", "n_chains": "c", "n_iter": "i", "seed": "s"}
    tag = "-".join(f"{short}{params[name]}" for name, short in keys.items() if name in params)
    return index.path / MODELS_DIR / f"{kind}-{tag}.npz"


def train_model(index: Index, kind: str, out=None, *, checkpoint=True, progress: bool = True, **params):
    """Train a ``kind`` model (``lda``) on ``index`` and save it; returns (model, path).

    With ``checkpoint`` the run writes ``<out>.ckpt`` as it goes and a rerun of the same
    command resumes from it; the checkpoint is removed once the model is saved.
    """
    model = registry.model_class(kind)(**params)
    out = Path(out) if out else default_model_path(index, kind, model.get_params())
    out.parent.mkdir(parents=True, exist_ok=True)
    ckpt = out.with_name(out.name + ".ckpt") if checkpoint else None
    if ckpt is not None and ckpt.exists():
        log.info("resuming from checkpoint %s", ckpt)
    corpus = index_corpus(index)
    log.info("training %s on %s: %d docs, %d tokens, %d terms, params %s", kind.upper(), index.name,
             corpus.n_docs, corpus.n_tokens, corpus.n_terms, model.get_params())
    callback = TqdmCallback(desc=f"{kind.upper()} {index.name}", mininterval=2) if progress else None
    model.fit(corpus, callback=callback, checkpoint=ckpt, **training_inputs(index, model, progress))
    model.save(out)
    if ckpt is not None:
        ckpt.unlink(missing_ok=True)
    log.info("saved %s", out)
    return model, out


def training_inputs(index: Index, model, progress: bool = True) -> dict:
    """The extra ``fit`` inputs ``model.training_inputs`` names, from the kind's adapter."""
    if not model.training_inputs:
        return {}
    make = hook(model.kind, "training_inputs")
    if make is None:
        raise ValueError(f"{model.kind} needs {', '.join(model.training_inputs)} to train, but "
                         f"retrieval/adapters/{model.kind}.py defines no training_inputs(index, progress)")
    inputs = make(index, progress=progress)
    missing = set(model.training_inputs) - set(inputs)
    if missing:
        raise ValueError(f"the {model.kind} adapter did not provide {', '.join(sorted(missing))}")
    return inputs


def load_model(path, index: Index, kind: str | None = None):
    """Load a model file for use with ``index`` (refused if trained on another index, or, with
    ``kind``, if it holds another kind of model)."""
    model = registry.load(path, fingerprint=index.fingerprint)
    if kind is not None and model.kind != kind:
        raise ValueError(f"{path}: holds a {model.kind} model; this command needs a {kind} model")
    return model
