"""Safe file writes shared by model files, checkpoints, runs and indexes.

Every writer gets its own temporary in the target's directory (``mkstemp``), so two processes
writing the same path never share or delete each other's temporary; the finished file moves
into place with ``os.replace`` (atomic on one file system), and a failed write (full disk,
exception, Ctrl-C) removes its temporary. Writers of the same long-lived target (a model and
its checkpoint) also take an advisory lock (:func:`target_lock`, from the ``filelock``
package), so a second training of the same model is refused with a message, not interleaved.

Temporaries are named ``.<name>.tmp-<random>`` and locks ``.<name>.lock``: :func:`stale_temporaries`
finds the temporaries of dead writers so the next writer into the directory can remove them. A
lock file exists only while its lock is held (and after a ``kill -9``, until the next writer of
the same target takes and removes it).
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import time
from pathlib import Path

import filelock

TMP_INFIX = ".tmp-"


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}{TMP_INFIX}"


@contextlib.contextmanager
def atomic_path(path, *, mode: int = 0o644):
    """Yield a unique temporary path next to ``path``; on a clean exit it replaces ``path``.

    The temporary (and nothing else) is removed when the block raises. ``mode`` is applied
    before the move, since ``mkstemp`` creates files readable by their owner only.
    """
    path = Path(os.fspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path), dir=path.parent if str(path.parent) else ".")
    except OSError as e:  # a read-only or full directory: name the target, not a random name
        _raise_naming(e, path, (e.filename,))
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        if isinstance(e, OSError):
            _raise_naming(e, path, (tmp, Path(tmp), None))
        raise


def _raise_naming(e: OSError, path: Path, temporaries):
    """Raise ``e`` naming ``path`` when it names one of ``temporaries`` (None: no file, as a
    full disk reports a failed ``write``): the user asked for ``path``; the temporary is gone."""
    if e.errno is None or e.filename not in temporaries:
        raise e
    raise type(e)(e.errno, e.strerror, os.fspath(path)) from e


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", **kwargs):
    """``open`` a unique temporary next to ``path``; flushed, fsynced and moved onto ``path``
    when the block ends without an exception, removed otherwise."""
    with atomic_path(path) as tmp:
        with open(tmp, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


def check_writable(directory) -> None:
    """Fail before the work, not at its first write: a file where a directory (or one of its
    parents) should be, or a directory this process cannot create files in, named."""
    directory = Path(os.fspath(directory))
    for d in (directory, *directory.parents):
        if d.exists():
            if not d.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "is a file, not a directory", str(d))
            break
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:  # named after the directory, not the random name of the probe
        _raise_naming(e, directory, (e.filename,))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class LockedError(RuntimeError):
    """Another process holds the lock of a target path."""


def lock_path(path) -> Path:
    path = Path(os.fspath(path))
    return path.with_name(f".{path.name}.lock")


class _Replaced(Exception):
    """The lock file was removed (by the holder before us) between our open and our lock."""


_LOCK_ATTEMPTS = 10


@contextlib.contextmanager
def target_lock(path, *, what: str = "file", timeout: float = 0):
    """Hold the advisory lock of ``path`` for the block; with ``timeout`` 0 (the default) a
    lock held by another process is refused at once with :class:`LockedError` naming the path.

    The lock is an ``flock`` on ``.<name>.lock`` (``filelock``), released by the OS when the
    holder dies, so a ``kill -9`` never leaves a stale lock behind. The holder removes the file
    before it unlocks, so nothing is left beside the target once the block ends. That is safe
    because only a holder removes it and every taker checks, once locked, that the file it
    locked is still the one at that name (a taker that opened the file just before the holder
    removed it locks a nameless file, and takes the lock again on a new one).
    """
    name = lock_path(path)
    held: list[os.stat_result] = []

    def still_named(fd: int) -> None:
        st = os.fstat(fd)
        try:
            same = os.path.samestat(st, os.lstat(name))
        except FileNotFoundError:
            same = False
        if not same:
            raise _Replaced
        held.append(st)

    for _ in range(_LOCK_ATTEMPTS):
        lock = filelock.FileLock(os.fspath(name), timeout=timeout, on_acquired=still_named)
        try:
            lock.acquire()
            break
        except _Replaced:
            continue
        except filelock.Timeout:  # before OSError, of which it is one (a TimeoutError)
            break
        except OSError as e:  # a read-only directory: name the target, not its lock file
            _raise_naming(e, Path(os.fspath(path)), (lock.lock_file, name))
    if not held:  # held by another process, or taken and removed by others on every attempt
        raise LockedError(f"{os.fspath(path)}: another process is writing this {what} (lock "
                          f"{name} held); wait for it to finish, or write elsewhere")
    try:
        yield
    finally:
        try:
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.lstat(name), held[0]):
                    os.unlink(name)
        finally:
            lock.release()


def stale_temporaries(directory, name: str | None = None, min_age: float = 0.0) -> list[Path]:
    """Temporaries of :func:`atomic_path` left in ``directory`` (for target ``name``, or any):
    those of writers that were killed (a live writer's temporary is younger than ``min_age``
    seconds, or its target is locked)."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    pattern = f".{name}{TMP_INFIX}*" if name else f".*{TMP_INFIX}*"
    now = time.time()
    out = []
    for p in directory.glob(pattern):
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime >= min_age:
                out.append(p)
    return sorted(out)


def remove_stale(paths) -> list[Path]:
    """Remove ``paths`` (files or directories) that still exist; returns those removed."""
    import shutil

    removed = []
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
    return removed
