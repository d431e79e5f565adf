"""The kept samples of a Gibbs checkpoint: one file each, written once.

A kept sample never changes once taken, so a checkpoint does not rewrite it: the chain state a
sample was taken from (its assignments and prior, from which a resumed run rebuilds the
sample's counts) goes to a file of its own when the sample is taken, and every checkpoint
after that only lists it. Checkpoint ``P`` keeps them in the directory ``P.kept``, as
``chain<c>.sweep<i>.npz``: files of the checkpoint format (:mod:`models.common.checkpoint`)
whose header says ``part: "kept-sample"`` and names the model, corpus fingerprint, chain and
sweep, with the arrays ``sample_<assignments>`` and ``sample_<prior>`` (one row each). The
checkpoint's header lists every kept sample's chain, sweep and the SHA-256 of its arrays
(``sample_sha256``).

A resume reads each listed file as untrusted input: it must be there, of this model and
corpus, of the listed chain and sweep, hold exactly the listed arrays (their hash) and pass the
kind's checks of kept chain state (``sample_*`` in its file spec); otherwise it is refused in
one line naming the file. Checkpoints written before kept samples had files of their own hold
them as arrays (``sample_<assignments>``, stacked) and still resume.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np

from . import checkpoint as ckpt
from . import validate_files
from .atomic import TMP_INFIX

PART = "kept-sample"
SUFFIX = ".kept"
PARTS = ".parts"  # the parts a Ray fit whose chain state stayed on its workers writes


def kept_dir(checkpoint) -> Path:
    """The directory of the kept samples of ``checkpoint``."""
    checkpoint = Path(os.fspath(checkpoint))
    return checkpoint.with_name(checkpoint.name + SUFFIX)


def kept_path(checkpoint, chain: int, sweep: int) -> Path:
    return kept_dir(checkpoint) / f"chain{int(chain)}.sweep{int(sweep)}.npz"


def digest(arrays) -> str:
    """SHA-256 of ``arrays`` (name -> ndarray): names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()


def _arrays(model, sample):
    return {"sample_" + name: np.stack([np.asarray(sample[name])]) for name in model._STATE}


def write(model, checkpoint, sample) -> int:
    """Write the chain state of ``sample`` (a dict of ``model._take_sample``) to its file, drop
    its assignments from the dict (the prior stays: the model keeps it) and record the file's
    hash there (``sha256``); returns the bytes written."""
    arrays = _arrays(model, sample)
    header = dict(model._file_header(), part=PART, chain=int(sample["chain"]), sweep=int(sample["iter"]))
    size = ckpt.write_model_file(kept_path(checkpoint, sample["chain"], sample["iter"]), header, arrays,
                                 kind=ckpt.CHECKPOINT_FORMAT)
    sample["sha256"] = digest(arrays)
    del sample[model._STATE[0]]
    return size


def states(model, path, f, corpus):
    """The chain state of every kept sample a (validated) checkpoint lists, in its order:
    (chain, sweep, sha256 or None, assignments, prior), each file read and checked only when
    its turn comes."""
    h, a = f.header, f.arrays
    assign, prior = model._STATE
    hashes = h.get("sample_sha256")
    for j, (c, sweep) in enumerate(zip(h["sample_chain"], h["sample_iter"])):
        if hashes is None:  # a checkpoint of the earlier layout: the arrays inline
            yield c, sweep, None, a["sample_" + assign][j], a["sample_" + prior][j]
            continue
        arrays = read(model, path, corpus, c, sweep, hashes[j])
        yield c, sweep, hashes[j], arrays["sample_" + assign][0], arrays["sample_" + prior][0]


def read(model, checkpoint, corpus, chain, sweep, sha256):
    """The arrays of the kept sample (chain, sweep) of ``checkpoint``, refused in one line
    naming the file unless it is the one the checkpoint lists, sound for ``model`` on ``corpus``."""
    p = kept_path(checkpoint, chain, sweep)
    fix = f"delete {os.fspath(checkpoint)} to start afresh"
    if not p.is_file():
        raise ValueError(f"{os.fspath(checkpoint)}: lists a kept sample {p} that is missing (a "
                         f"checkpoint moves with its directory {kept_dir(checkpoint).name}); {fix}")
    f = ckpt.read_model_file(p, kind=ckpt.CHECKPOINT_FORMAT)
    h = f.header
    if h.get("part") != PART:
        raise ValueError(f"{p}: not a kept sample of a checkpoint; {fix}")
    if h.get("model") != type(model).__name__:
        raise ValueError(f"{p}: a kept sample of a {h.get('model')!r} checkpoint, not "
                         f"{type(model).__name__}; {fix}")
    ckpt.check_fingerprint(p, h, corpus.fingerprint, model.corpus_hash_)
    if (h.get("chain"), h.get("sweep")) != (chain, sweep):
        raise ValueError(f"{p}: holds chain {h.get('chain')!r} at sweep {h.get('sweep')!r}, not "
                         f"chain {chain} at sweep {sweep}; {fix}")
    got = digest(f.arrays)
    if got != sha256:
        raise ValueError(f"{p}: not the kept sample checkpoint {os.fspath(checkpoint)} lists (its arrays "
                         f"hash to {got[:16]}, the checkpoint lists {str(sha256)[:16]}); {fix}")
    validate_files.gibbs_kept_sample(model, p, f, corpus)
    return f.arrays


def remove(checkpoint) -> None:
    """Remove the kept samples of ``checkpoint`` (their files and the temporaries of killed
    writers), and their directory once empty; other files are left alone."""
    d = kept_dir(checkpoint)
    if not d.is_dir():
        return
    for p in list(d.glob("chain*.sweep*.npz")) + list(d.glob(f".chain*.sweep*.npz{TMP_INFIX}*")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    with contextlib.suppress(OSError):  # not empty: files of someone else's
        d.rmdir()


def parts_dir(checkpoint) -> Path:
    """The directory of the parts of ``checkpoint`` (:mod:`models.common.executors.sharded`)."""
    checkpoint = Path(os.fspath(checkpoint))
    return checkpoint.with_name(checkpoint.name + PARTS)


def remove_checkpoint(checkpoint) -> None:
    """Remove ``checkpoint``, its kept samples and its parts directory (once the model it
    trained is saved)."""
    Path(os.fspath(checkpoint)).unlink(missing_ok=True)
    remove(checkpoint)
    shutil.rmtree(parts_dir(checkpoint), ignore_errors=True)
