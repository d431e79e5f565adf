"""Topic models for topicir: corpora, the model protocol and registry, and the trainers.

Each kind's estimator, file spec and kernels live in its folder (``models/lda``, ``models/pam``,
...; ``registry.py`` names them), what the kinds share in ``models/common``, which imports no kind.

This package never imports ``retrieval``, jnius or pyserini (and torch only for the kinds that
need it, on first use through the registry). Its names are imported on first use (PEP 562), so
that ``import models`` (and the ``topicir`` command's start) loads no numpy or numba.
"""
import importlib

_EXPORTS = {
    "TopicModel": "common.base", "Corpus": "common.corpus", "corpus_from_docs": "common.corpus",
    "make_corpus": "common.corpus", "synthetic_corpus": "common.corpus", "LDA": "lda.model", "PAM": "pam.model",
    "TCM": "tcm.model", "TqdmCallback": "common.progress",
    "kinds": "registry", "load": "registry", "model_class": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
