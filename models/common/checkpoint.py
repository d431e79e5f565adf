"""The only reader/writer of model and checkpoint files.

A file is an uncompressed ``.npz`` archive whose entry ``__header__`` holds a UTF-8 JSON header::

    {"format": "topicir-model" | "topicir-checkpoint", "format_version": 1,
     "topicir_version": "0.1.0", "model": "LDA", "params": {...constructor parameters...},
     "fingerprint": "...", "corpus_hash": "...", ...}

and every other entry is a plain numpy array (no pickles). Files are written to a temporary of
their own next to ``path`` and moved into place with ``os.replace`` (:mod:`models.common.atomic`), so a
killed writer never leaves a half-written file and two writers never share a temporary. A file
that is truncated or corrupt anyway (copied partly, damaged disk) is refused with a ValueError
naming it and what is wrong.
"""
import json
import os
import zipfile
import zlib
from typing import NamedTuple

import numpy as np

from .._version import __version__
from .atomic import atomic_open

# What numpy raises for a truncated or damaged .npz (besides OSError and ValueError).
_CORRUPT = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, UnicodeDecodeError)

FORMAT_VERSION = 1
TOPICIR_VERSION = __version__
MODEL_FORMAT = "topicir-model"
CHECKPOINT_FORMAT = "topicir-checkpoint"


class ModelFile(NamedTuple):
    header: dict
    arrays: dict


def write_model_file(path, header, arrays, kind=MODEL_FORMAT):
    """Write ``header`` (JSON-serialisable dict) and ``arrays`` (name -> ndarray) atomically;
    returns the number of bytes written.

    ``format``, ``format_version`` and ``topicir_version`` are added to the header.
    """
    path = os.fspath(path)
    header = dict(header, format=kind, format_version=FORMAT_VERSION, topicir_version=TOPICIR_VERSION,
                  arrays={k: [list(np.shape(np.ascontiguousarray(v))), np.asarray(v).dtype.str]
                          for k, v in arrays.items()})  # as stored: ascontiguousarray makes 0-d 1-d
    blob = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    if "__header__" in arrays:
        raise ValueError("array name '__header__' is reserved")
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with atomic_open(path, "wb") as f:
        # A file object keeps numpy from appending ".npz" to the name.
        np.savez(f, __header__=blob, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
        size = f.seek(0, os.SEEK_END)
    return size


def read_header(path):
    """Only the JSON header of a model or checkpoint file (the arrays are not read)."""
    path = os.fspath(path)
    _check_readable(path)
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as npz:
            return json.loads(bytes(npz["__header__"]).decode("utf-8"))
    except _CORRUPT as e:
        raise ValueError(f"{path}: not a topicir model file, or truncated/corrupt "
                         f"({type(e).__name__}: {e})") from e


def _check_readable(path, kind=MODEL_FORMAT):
    """A readable file that starts as an .npz (zip) archive does; FileNotFoundError and
    PermissionError stay what they are (the CLI reports them by path)."""
    what = "checkpoint" if kind == CHECKPOINT_FORMAT else "model"
    if os.path.isdir(path):
        raise ValueError(f"{path}: is a directory, not a {what} file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:2] != b"PK":  # numpy would try the bytes as .npy, then as a pickle
        problem = "is empty" if not magic else "is not an .npz archive"
        fix = "; delete it to train afresh" if kind == CHECKPOINT_FORMAT else ""
        raise ValueError(f"{path}: not a topicir {what} file ({problem}){fix}")


def read_model_file(path, kind=MODEL_FORMAT):
    """Read a file written by :func:`write_model_file`; returns a :class:`ModelFile`.

    Raises ValueError (naming the file) for another format, kind or a newer format version.
    """
    path = os.fspath(path)
    _check_readable(path, kind)
    name = "__header__"
    # Our own file object: numpy leaves its own open when a damaged archive fails to load.
    with open(path, "rb") as fh:
        try:
            with np.load(fh, allow_pickle=False) as npz:
                if "__header__" not in npz.files:
                    raise ValueError(f"{path}: no '__header__' entry; not a topicir model file")
                header = json.loads(bytes(npz[name]).decode("utf-8"))
                arrays = {}
                for name in npz.files:  # read lazily: a truncated file fails on its first damaged entry
                    if name != "__header__":
                        arrays[name] = npz[name]
        except _CORRUPT as e:
            if str(e).startswith(f"{path}: "):
                raise
            where = f": entry {name!r} cannot be read" if name != "__header__" else ""
            fix = "delete it to train afresh" if kind == CHECKPOINT_FORMAT else "retrain or restore the file"
            raise ValueError(f"{path}: not a topicir model file, or truncated/corrupt{where} "
                             f"({type(e).__name__}: {e}); {fix}") from e
    if header.get("format") != kind:
        raise ValueError(f"{path}: expected a {kind!r} file, got format {header.get('format')!r}")
    if header.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path}: format version {header['format_version']} is newer than this topicir "
            f"({TOPICIR_VERSION}, format {FORMAT_VERSION}); upgrade topicir to read it"
        )
    _check_manifest(path, header, arrays)
    return ModelFile(header, arrays)


def _check_manifest(path, header, arrays):
    """Every array the writer listed is there with its shape and dtype (files from before the
    list have none to check)."""
    for name, (shape, dtype) in header.get("arrays", {}).items():
        if name not in arrays:
            raise ValueError(f"{path}: damaged or incomplete file (missing array {name!r}); "
                             f"retrain or restore the file")
        a = arrays[name]
        if list(a.shape) != shape or a.dtype.str != dtype:
            raise ValueError(f"{path}: damaged file: array {name!r} has shape {a.shape} and dtype "
                             f"{a.dtype.str}, written as {tuple(shape)} {dtype}; retrain or restore the file")


def check_fingerprint(path, header, fingerprint, corpus_hash=None):
    """Refuse a file trained on another corpus/index, naming both fingerprints and the fix."""
    path = os.fspath(path)
    stored = header.get("fingerprint")
    if fingerprint is not None and stored != fingerprint:
        raise ValueError(
            f"{path} was trained on a corpus with fingerprint {stored!r}, but the corpus/index given "
            f"has fingerprint {fingerprint!r}. Use the model trained on this index, or retrain "
            f"(topicir train) against it."
        )
    if corpus_hash is not None and header.get("corpus_hash") not in (None, corpus_hash):
        raise ValueError(
            f"{path} was written for corpus content {header.get('corpus_hash')!r} but the corpus given "
            f"hashes to {corpus_hash!r} (fingerprint {fingerprint!r}): same index name, other tokens. "
            f"Delete the file or pass the corpus it was trained on."
        )
