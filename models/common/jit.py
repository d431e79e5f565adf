"""numba's ``njit`` for this project's kernels, with their on-disk cache tied to the whole source.

numba checks a cached kernel against its own file only, so after an edit or a ``git pull`` in
an editable install, a kernel whose file did not change but whose callee in another file did
still runs the old callee's machine code: old results, or a crash where old and new code
disagree. Here every cached kernel of ``models`` and ``retrieval`` is checked against a
digest of all the source files of both packages as well, so any change recompiles them all,
each on first use.

Kernel modules take ``njit`` from here (``from ..common.jit import njit``): importing this
module puts the locators in place before their decorators run. A cache placed with
``NUMBA_CACHE_DIR`` is keyed the same way; ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces numba's
locators, these included.
"""
import hashlib
from pathlib import Path

from numba import njit
from numba.core import caching

__all__ = ["njit", "install", "source_digest"]

# the two packages of the distribution, side by side (models never imports retrieval)
ROOTS = tuple(Path(__file__).resolve().parents[2] / name for name in ("models", "retrieval"))

_digest = None


def source_digest():
    """SHA-256 of every ``*.py`` file under :data:`ROOTS` (names and contents), once a process."""
    global _digest
    if _digest is None:
        h = hashlib.sha256()
        for root in ROOTS:
            for path in sorted(root.rglob("*.py")):
                h.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
                h.update(path.read_bytes())
        _digest = h.hexdigest()
    return _digest


def _in_roots(py_file):
    path = Path(py_file).resolve()
    return any(path.is_relative_to(root) for root in ROOTS)


class _SourceDigest:
    """A numba cache locator for the files under :data:`ROOTS`, whose stamp adds the
    :func:`source_digest` to the file's own."""

    @classmethod
    def from_function(cls, py_func, py_file):
        if not _in_roots(py_file):
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self):
        return (super().get_source_stamp(), source_digest())


def _numba_class(name):
    # public from numba 0.61 on, private before
    return getattr(caching, name, None) or getattr(caching, "_" + name)


class UserProvidedLocator(_SourceDigest, _numba_class("UserProvidedCacheLocator")):
    """numba's cache under ``NUMBA_CACHE_DIR``, keyed by the source digest."""


class InTreeLocator(_SourceDigest, _numba_class("InTreeCacheLocator")):
    """numba's cache in the source's ``__pycache__``, keyed by the source digest."""


class UserWideLocator(_SourceDigest, _numba_class("UserWideCacheLocator")):
    """numba's per-user cache (a read-only install), keyed by the source digest."""


def install():
    """Put the locators above first in numba's list (once)."""
    impl = caching.CacheImpl
    if not any(issubclass(c, _SourceDigest) for c in impl._locator_classes):
        impl._locator_classes = [UserProvidedLocator, InTreeLocator, UserWideLocator,
                                 *impl._locator_classes]


install()
