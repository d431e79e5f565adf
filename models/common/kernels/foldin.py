"""The fold-in loop of every Gibbs kind, with its random streams and its outputs.

A new document is folded in under one kept sample, whose counts stay fixed: an online pass (every
token, or position, drawn given those before it), then ``n_iter`` sweeps, the kind's counts of the
last ``n_keep`` summed. A kind builds its loop with :func:`fold_loop` from two kernels over its
document tuple ``doc`` (any tuple: the document, the sample, the buffers) and ``aux``, the
scalars they carry (e.g. LDA's (topics listed, r bucket)):

    pass_(doc, aux, state, resample) -> aux   a pass over the document: the online one
                                              (resample False) or a sweep (True)
    keep(doc, aux, n_kept) -> n_kept          the counts added to the kept sums

A kernel takes a whole pass, not one token: it unpacks the tuples once, and its token loop
runs on plain arrays (taking an array out of a tuple costs an atomic reference count, too much
to pay per token). The kernels are bound when the loop is built, not passed to it: a kernel
passed as an argument is a run-time value, and numba does not cache a function that holds one.

Each (sample cs, document doc) pair has its own random stream, :func:`doc_stream`: results do not
depend on the number of threads nor on how documents are split into batches.
"""
import numpy as np

from ..jit import njit
from .rng import seed_stream


def fold_loop(pass_, keep):
    """The fold-in loop over a kind's kernels (see the module docstring): an njit function
    ``loop(doc, aux, n_iter, n_keep, state)`` that folds in one document and returns (aux, the
    count ``keep`` returned last, 0 if none)."""

    @njit(cache=True)
    def loop(doc, aux, n_iter, n_keep, state):
        aux = pass_(doc, aux, state, False)
        n_kept = 0
        for it in range(n_iter):
            aux = pass_(doc, aux, state, True)
            if it >= n_iter - n_keep:
                n_kept = keep(doc, aux, n_kept)
        return aux, n_kept

    return loop


@njit(cache=True)
def doc_stream(seed, cs, doc):
    """The xoshiro256** state (uint64[4]) of document ``doc`` (its global index) under kept
    sample ``cs``: stream cs * 2**40 + doc of ``seed``."""
    state = np.empty(4, dtype=np.uint64)
    seed_stream(seed, np.int64(cs) * np.int64(1 << 40) + doc, state)
    return state


@njit(cache=True, inline="always")
def listed_add(count, lst, pos, n, k):
    """count[k] += 1, and k appended to the list ``lst[:n]`` (``pos[k]``: its place) if it was
    absent; returns the new length."""
    if count[k] == 0:
        lst[n] = k
        pos[k] = n
        n += 1
    count[k] += 1
    return n


@njit(cache=True, inline="always")
def listed_remove(count, lst, pos, n, k):
    """count[k] -= 1, and k taken off the list ``lst[:n]`` if that makes it 0 (the last listed
    key takes its place); returns the new length."""
    count[k] -= 1
    if count[k] == 0:
        last = lst[n - 1]
        lst[pos[k]] = last
        pos[last] = pos[k]
        n -= 1
    return n


@njit(cache=True, inline="always")
def keep_listed(count, lst, n, acc, alist, anz):
    """acc[k] += count[k] for the keys k of ``lst[:n]``; a key new to ``acc`` is appended to
    ``alist[:anz]``. Returns the new length of ``alist``."""
    for i in range(n):
        k = lst[i]
        if acc[k] == 0:
            alist[anz] = k
            anz += 1
        acc[k] += count[k]
    return anz


@njit(cache=True)
def keep_dense(doc, aux, n_kept):
    """The ``keep`` of a kind whose document tuple starts with its dense counts and their kept
    sums, (ndk, acc, ...): acc += ndk."""
    ndk, acc = doc[0], doc[1]
    for k in range(len(ndk)):
        acc[k] += ndk[k]
    return n_kept


@njit(cache=True, inline="always")
def write_listed(alist, anz, acc, out_key, out_count, o):
    """The kept keys ``alist[:anz]`` in ascending order with their sums ``acc`` at
    out_key/out_count[o:o + anz]."""
    keys = np.sort(alist[:anz])
    for i in range(anz):
        out_key[o + i] = keys[i]
        out_count[o + i] = acc[keys[i]]


@njit(cache=True, inline="always")
def write_dense(acc, out_key, out_count, o):
    """The nonzero entries of the dense sums ``acc`` (ascending keys) at out_key/out_count[o:];
    returns how many."""
    nz = 0
    for k in range(len(acc)):
        if acc[k] > 0:
            out_key[o + nz] = k
            out_count[o + nz] = acc[k]
            nz += 1
    return nz
