"""Model kinds by name: ``topicir train KIND``, model files and the conformance tests read this.

A new model is one line here (kind -> "models.<kind>.model:Class", imported on first use, so that
asking for LDA never imports torch) plus its folder ``models/<kind>/`` (the kind's name with "-"
as "_"; docs/architecture.md, "Adding a model kind"); retrieval finds an optional adapter for it
in ``retrieval/adapters/<kind>.py``.
"""
import importlib

_KINDS = {
    "lda": "models.lda.model:LDA",
    "pam": "models.pam.model:PAM",
    "tcm": "models.tcm.model:TCM",
    "glda": "models.glda.model:GroupedLDA",
    "avipam": "models.avipam.model:AVIPAM",
    "tree-lda": "models.tree_lda.model:TreeLDA",
}


def kinds():
    """The registered kind names, in registration order."""
    return list(_KINDS)


def class_path(kind):
    """Where the estimator of ``kind`` lives, ``"module:Class"`` (a ValueError listing the kinds
    for an unknown one); the command line reads its parameters from there without importing it."""
    if kind not in _KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose from {', '.join(_KINDS)}")
    return _KINDS[kind]


def model_class(kind):
    """The estimator class of ``kind`` (a ValueError listing the kinds for an unknown one)."""
    module, name = class_path(kind).split(":")
    return getattr(importlib.import_module(module), name)


def kind_of_header(header):
    """The kind a model file's header names (files before the registry only name the class)."""
    kind = header.get("kind") or str(header.get("model", "")).lower()
    return kind if kind in _KINDS else None


def load(path, fingerprint=None, doc_len=None, header=None):
    """Load any registered model file, refused (ValueError naming the file) when its kind is
    unknown, it was trained on another ``fingerprint`` or its documents disagree with
    ``doc_len`` (the token counts of the index's documents it describes). ``header``: the
    file's header, when the caller has read it already."""
    if header is None:
        from .common.checkpoint import read_header  # numpy: not for `kinds()` at the command's start

        header = read_header(path)
    kind = kind_of_header(header)
    if kind is None:
        raise ValueError(f"{path}: unknown model type {header.get('model')!r}; known kinds: "
                         f"{', '.join(_KINDS)}")
    return model_class(kind).load(path, fingerprint=fingerprint, doc_len=doc_len)
