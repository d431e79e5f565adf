"""The only reader/writer of model and checkpoint files.

A file is an uncompressed ``.npz`` archive whose entry ``__header__`` holds a UTF-8 JSON header::

    {"format": "topicir-model" | "topicir-checkpoint", "format_version": 1 | 2,
     "topicir_version": "0.1.0", "model": "LDA", "params": {...constructor parameters...},
     "fingerprint": "...", "corpus_hash": "...", ...}

and every other entry is a plain numpy array (no pickles). Files are written to a temporary of
their own next to ``path`` and moved into place with ``os.replace`` (:mod:`models.common.atomic`), so a
killed writer never leaves a half-written file and two writers never share a temporary. A file
that is truncated or corrupt anyway (copied partly, damaged disk) is refused with a ValueError
naming it and what is wrong.

A model file's integer and floating-point members of at least :data:`MAP_BYTES` (the count
tables, pointers and indices that make up nearly all of a Gibbs model; aviPAM's topics,
document mixtures and network) are memory-mapped, not read: loading costs
what is touched, and a document model reads a query's rows of a topic-word table, not the
table. Such arrays are views of one private (copy-on-write) mapping of the file, writable like
read ones (numba runs the kernels compiled for those; read-only arrays would be compiled
apart), yet a loaded model's arrays are not written: passes over them drop the pages they have
read (:func:`release`). An integer member's zip CRC is not checked (that would read every
byte); what guards the kernels is the kind's declared checks, under which a damaged count,
index or pointer breaks a bound, an order or a total across arrays. A floating-point member,
which no total cross-checks, has its CRC checked as it is mapped, a piece at a time (each
piece's pages released after it); small members are read whole, their CRC checked. A file replaced while
mapped (``os.replace``, as writers here do) leaves the mapping on the old one; one rewritten in
place while mapped would reach the kernels unchecked, so model files are never written so.
"""
import json
import mmap
import os
import shutil
import zipfile
import zlib
from typing import NamedTuple

import numpy as np

from .._version import __version__
from .atomic import atomic_open

# What numpy raises for a truncated or damaged .npz (besides OSError and ValueError).
_CORRUPT = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error, UnicodeDecodeError)

TOPICIR_VERSION = __version__
MODEL_FORMAT = "topicir-model"
CHECKPOINT_FORMAT = "topicir-checkpoint"
# Checkpoints are format 2 since they list their kept samples' files instead of holding them;
# format 1 checkpoints (samples inline) still resume.
FORMAT_VERSIONS = {MODEL_FORMAT: 1, CHECKPOINT_FORMAT: 2}


# Integer members of model files at least this big are memory-mapped (module docstring).
MAP_BYTES = 1 << 20
_LOCAL_HEADER = 30  # bytes of a zip local file header before the member's name and extra field


def id_dtype(n_ids):
    """The dtype a file stores ids in [0, n_ids) in: uint16 where they fit (half the bytes of
    int32), else int32."""
    return np.uint16 if n_ids <= 1 << 16 else np.int32


class ModelFile(NamedTuple):
    header: dict
    arrays: dict


def write_model_file(path, header, arrays, kind=MODEL_FORMAT):
    """Write ``header`` (JSON-serialisable dict) and ``arrays`` (name -> ndarray) atomically;
    returns the number of bytes written.

    ``format``, ``format_version`` and ``topicir_version`` are added to the header.
    """
    path = os.fspath(path)
    header = dict(header, format=kind, format_version=FORMAT_VERSIONS[kind], topicir_version=TOPICIR_VERSION,
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


def write_model_file_streamed(path, header, members, kind=MODEL_FORMAT):
    """:func:`write_model_file` of arrays given piece by piece: ``members`` lists (name, shape,
    dtype, pieces), ``pieces`` an iterable of arrays whose bytes, in turn, are the member's (C
    order). The file holds no more than one piece in memory at a time; it is read back as one
    written whole. Returns the number of bytes written."""
    path = os.fspath(path)
    header = dict(header, format=kind, format_version=FORMAT_VERSIONS[kind], topicir_version=TOPICIR_VERSION,
                  arrays={name: [list(shape), np.dtype(dtype).str] for name, shape, dtype, _ in members})
    blob = np.frombuffer(json.dumps(header, sort_keys=True).encode("utf-8"), dtype=np.uint8)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with atomic_open(path, "wb") as f:
        with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, shape, dtype, pieces in [("__header__", blob.shape, blob.dtype, [blob])] + list(members):
                dtype = np.dtype(dtype)
                want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                with zf.open(name + ".npy", "w", force_zip64=True) as out:
                    np.lib.format.write_array_header_2_0(
                        out, dict(descr=np.lib.format.dtype_to_descr(dtype), fortran_order=False,
                                  shape=tuple(int(n) for n in shape)))
                    got = 0
                    for piece in pieces:
                        piece = np.ascontiguousarray(piece, dtype=dtype)
                        out.write(memoryview(piece).cast("B"))
                        got += piece.nbytes
                if got != want:
                    raise ValueError(f"{path}: array {name!r} got {got} bytes, {want} expected")
        size = f.seek(0, os.SEEK_END)
    return size


def copy_model_file(source, path):
    """Copy a model file, atomically, without reading it into memory."""
    path = os.fspath(path)
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(source, "rb") as src, atomic_open(path, "wb") as f:
        shutil.copyfileobj(src, f, 1 << 22)


def read_member_range(fh, layout, name, lo, hi):
    """Elements lo:hi of the (flat) array ``name`` of an archive open as ``fh``, whose
    :func:`member_layouts` are ``layout``: read from the file, not mapped."""
    offset, dtype = layout[name]
    fh.seek(offset + lo * dtype.itemsize)
    return np.fromfile(fh, dtype=dtype, count=hi - lo)


def member_layouts(fh):
    """``{name: (offset, dtype)}`` of the uncompressed members of the archive open as ``fh``."""
    size = os.fstat(fh.fileno()).st_size
    out = {}
    with zipfile.ZipFile(fh) as zf:
        for info in zf.infolist():
            where = member_data(fh, info, size) if info.compress_type == zipfile.ZIP_STORED else None
            if where is not None:
                out[info.filename[:-len(".npy")]] = (where[0], where[3])
    return out


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
                mapped = _Mapping(fh) if kind == MODEL_FORMAT else None
                for name in npz.files:  # read lazily: a truncated file fails on its first damaged entry
                    if name != "__header__":
                        a = mapped.member(npz.zip.getinfo(name + ".npy")) if mapped else None
                        arrays[name] = npz[name] if a is None else a
        except _CORRUPT as e:
            if str(e).startswith(f"{path}: "):
                raise
            where = f": entry {name!r} cannot be read" if name != "__header__" else ""
            fix = "delete it to train afresh" if kind == CHECKPOINT_FORMAT else "retrain or restore the file"
            raise ValueError(f"{path}: not a topicir model file, or truncated/corrupt{where} "
                             f"({type(e).__name__}: {e}); {fix}") from e
    if header.get("format") != kind:
        raise ValueError(f"{path}: expected a {kind!r} file, got format {header.get('format')!r}")
    if header.get("format_version", 0) > FORMAT_VERSIONS[kind]:
        raise ValueError(
            f"{path}: format version {header['format_version']} is newer than this topicir "
            f"({TOPICIR_VERSION}, format {FORMAT_VERSIONS[kind]}); upgrade topicir to read it"
        )
    _check_manifest(path, header, arrays)
    return ModelFile(header, arrays)


class _Mapping:
    """The private mapping of a model file (made on its first mapped member) and the members
    it holds: :meth:`member` is an uncompressed integer or floating-point member of at least
    MAP_BYTES as a view of it (a floating-point one once its CRC is checked, a piece at a
    time), or None for one read whole."""

    def __init__(self, fh):
        self.fh, self.size, self.bytes = fh, os.fstat(fh.fileno()).st_size, None

    def member(self, info):
        if info.compress_type != zipfile.ZIP_STORED or info.file_size < MAP_BYTES:
            return None
        where = member_data(self.fh, info, self.size)
        if where is None or where[3].kind not in "iuf":
            return None
        offset, shape, fortran, dtype = where
        if self.bytes is None:
            self.bytes = np.frombuffer(mmap.mmap(self.fh.fileno(), 0, access=mmap.ACCESS_COPY), dtype=np.uint8)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if dtype.kind == "f":  # no total cross-checks floats: their CRC does
            crc = 0
            for piece, in pieces(self.bytes[offset + nbytes - info.file_size:offset + nbytes]):
                crc = zlib.crc32(piece, crc)
            if crc != info.CRC:
                raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
        flat = self.bytes[offset:offset + nbytes].view(dtype)
        return flat.reshape(shape, order="F" if fortran else "C")


def member_data(fh, info, size):
    """(offset, shape, fortran, dtype) of the array an uncompressed member ``info`` of the
    open archive ``fh`` (of ``size`` bytes) holds, or None for a .npy version numpy may
    write but this does not map; ValueError where the member's bytes do not fit."""
    fh.seek(info.header_offset)
    local = fh.read(_LOCAL_HEADER)
    if len(local) < _LOCAL_HEADER or local[:4] != b"PK\x03\x04":
        raise ValueError("no zip entry where the archive's directory points")
    start = info.header_offset + _LOCAL_HEADER + int.from_bytes(local[26:28], "little") \
        + int.from_bytes(local[28:30], "little")
    fh.seek(start)
    version = np.lib.format.read_magic(fh)
    if version not in ((1, 0), (2, 0)):
        return None
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(fh)
    offset = fh.tell()
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if offset - start + nbytes != info.file_size or offset + nbytes > size:
        raise ValueError(f"the entry's array ({nbytes} bytes at {offset}) does not fit its "
                         f"{info.file_size} bytes or the file's {size}")
    return offset, shape, fortran, dtype


class AnonymousMap(mmap.mmap):
    """A mapping with no file behind it (``mmap.mmap(-1, n, ...)``): :func:`release` leaves its
    pages alone, since dropping them would zero them rather than read them again."""


def is_mapped(a):
    """Whether ``a`` is (a view of) a memory-mapped member of a model file."""
    while isinstance(a, np.ndarray):
        a = a.base
    return isinstance(a, memoryview) and isinstance(a.obj, mmap.mmap) and not isinstance(a.obj, AnonymousMap)


def release(a, lo, hi):
    """Drop the pages of ``a[lo:hi]`` (1-d, contiguous) from the process when ``a`` is mapped
    (:func:`is_mapped`): they are read again from the file, through the page cache, when next
    touched. For passes over a loaded model's arrays, which nothing writes (a written page of
    a private mapping would return to the file's bytes); other arrays are left as they are."""
    base = a
    while isinstance(base, np.ndarray) and isinstance(base.base, np.ndarray):
        base = base.base
    if not is_mapped(a) or hi <= lo:
        return
    start = a.__array_interface__["data"][0] + lo * a.itemsize - base.__array_interface__["data"][0]
    stop = start + (hi - lo) * a.itemsize
    start = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages inside the range only
    stop -= stop % mmap.PAGESIZE
    if stop > start:
        base.base.obj.madvise(mmap.MADV_DONTNEED, start, stop - start)


# The entries one pass over a mapped table holds at a time (:func:`row_chunks`).
PASS_BYTES = 1 << 26


def row_chunks(starts, stops, entry_bytes, min_rows=1):
    """Consecutive row ranges ``(r0, r1)`` of a table whose row r holds the entries
    ``starts[r]:stops[r]`` (each row starting where the last ends), each about PASS_BYTES of
    entries of ``entry_bytes`` bytes and at least ``min_rows`` rows (a parallel pass's
    threads): the chunks of a pass that releases each chunk's pages after it (:func:`release`)."""
    starts, stops = np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64)
    out, r0 = [], 0
    while r0 < len(starts):
        r1 = int(np.searchsorted(stops, starts[r0] + max(1, PASS_BYTES // entry_bytes), side="right"))
        r1 = min(len(starts), max(r1, r0 + min_rows))
        out.append((r0, r1))
        r0 = r1
    return out


def doc_ranges(ptr, arrays, min_docs=1):
    """Consecutive document ranges ``(d0, d1)`` of a table of every kept sample's document rows
    (``ptr`` (n_samples, n_docs + 1) into the flat ``arrays``), each about PASS_BYTES of the
    samples' entries together and at least ``min_docs`` documents; after each range the pages
    of its entries are released (:func:`release`), so that a pass over a mapped table, document
    range after range, holds a range of it at a time, not the table."""
    ptr = np.asarray(ptr)
    entry = sum(a.itemsize for a in arrays)
    upto = (ptr - ptr[:, :1]).sum(axis=0)  # the samples' entries of the documents before d
    for d0, d1 in row_chunks(upto[:-1], upto[1:], entry, min_docs):
        yield d0, d1
        for cs in range(ptr.shape[0]):
            for a in arrays:
                release(a, ptr[cs, d0], ptr[cs, d1])


def pieces(*arrays):
    """Consecutive pieces of the equally long ``arrays`` (along their first axis, C-contiguous),
    together about PASS_BYTES a piece, each piece's pages released after its turn
    (:func:`release`): a pass over every value of mapped arrays holds a piece of them at a time."""
    n = len(arrays[0])
    step = max(1, PASS_BYTES // max(sum(a[:1].nbytes for a in arrays), 1))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        yield tuple(a[lo:hi] for a in arrays)
        for a in arrays:
            per = a[:1].size
            release(a.reshape(-1), lo * per, hi * per)


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
