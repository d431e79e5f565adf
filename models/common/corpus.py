"""The corpus every topic model trains on: flat term ids plus document offsets."""
import hashlib
import mmap
import os
from typing import NamedTuple

import numpy as np


class Corpus(NamedTuple):
    """A bag-of-words collection in CSR form.

    Attributes
    ----------
    doc_ptr : ndarray of shape (n_docs + 1,), int64
        Tokens of doc ``d`` are ``term_ids[doc_ptr[d]:doc_ptr[d + 1]]``.
    term_ids : ndarray of shape (n_tokens,), int32
        Term of every token, in document order, values in ``[0, n_terms)``.
    n_terms : int
        Vocabulary size V.
    fingerprint : str
        Opaque identifier of the vocabulary/index the corpus came from; model files record it
        and refuse to load against another one.
    """

    doc_ptr: np.ndarray
    term_ids: np.ndarray
    n_terms: int
    fingerprint: str

    @property
    def n_docs(self):
        return len(self.doc_ptr) - 1

    @property
    def n_tokens(self):
        return len(self.term_ids)


def content_hash(doc_ptr, term_ids, n_terms):
    """sha1 over the exact arrays: a corpus with other tokens gets another hash."""
    h = hashlib.sha1()
    h.update(np.int64(n_terms).tobytes())
    for a, dtype in ((doc_ptr, np.int64), (term_ids, np.int32)):
        step = 1 << 22
        for lo in range(0, len(a), step):
            h.update(np.ascontiguousarray(read_piece(a, lo, min(len(a), lo + step)), dtype=dtype).data)
    return h.hexdigest()


def mapped_file(a):
    """(file name, byte offset) of a 1-d contiguous array that is a memory-mapped file's array
    (``np.load(..., mmap_mode="r")``) or a view into one, as an index's corpus is; else None."""
    if not isinstance(a, np.ndarray) or a.ndim != 1 or not a.flags.c_contiguous:
        return None
    root = a
    while isinstance(root, np.ndarray):
        if isinstance(root, np.memmap) and root.filename and isinstance(root.base, mmap.mmap):
            start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            return os.fspath(root.filename), int(root.offset) + start
        root = root.base
    return None


def read_piece(a, lo, hi):
    """``a[lo:hi]``; of a memory-mapped array (:func:`mapped_file`), read from its file, so
    that a pass over a large corpus leaves none of its pages in this process."""
    where = mapped_file(a)
    if where is not None:
        return np.fromfile(where[0], dtype=a.dtype, count=hi - lo, offset=where[1] + lo * a.itemsize)
    return a[lo:hi]


def _term_range(term_ids):
    """(min, argmin, max, argmax) of term_ids, read piece by piece (:func:`read_piece`)."""
    out, step = [0, 0, -1, 0], 1 << 22
    for lo in range(0, len(term_ids), step):
        piece = read_piece(term_ids, lo, min(len(term_ids), lo + step))
        i, j = int(np.argmin(piece)), int(np.argmax(piece))
        if lo == 0 or piece[i] < out[0]:
            out[:2] = int(piece[i]), lo + i
        if piece[j] > out[2]:
            out[2:] = int(piece[j]), lo + j
    return out


def make_corpus(doc_ptr, term_ids, n_terms=None, fingerprint=None):
    """Validate arrays and return a :class:`Corpus`.

    Parameters
    ----------
    doc_ptr : array-like of int, shape (n_docs + 1,)
        Non-decreasing offsets starting at 0 and ending at ``len(term_ids)``.
    term_ids : array-like of int, shape (n_tokens,)
    n_terms : int, optional
        Vocabulary size; defaults to ``max(term_ids) + 1``.
    fingerprint : str, optional
        Defaults to ``"sha1:" + content_hash(...)``.
    """
    doc_ptr = np.ascontiguousarray(doc_ptr, dtype=np.int64)
    term_ids = np.asarray(term_ids)
    if term_ids.size and not np.issubdtype(term_ids.dtype, np.integer):
        raise TypeError(f"term_ids must be integers, got dtype {term_ids.dtype!r}")
    term_ids = np.ascontiguousarray(term_ids, dtype=np.int32)
    if doc_ptr.ndim != 1 or len(doc_ptr) < 1:
        raise ValueError(f"doc_ptr must be a 1-d array of length n_docs + 1 >= 1, got shape {doc_ptr.shape!r}")
    if doc_ptr[0] != 0 or doc_ptr[-1] != len(term_ids):
        raise ValueError(
            f"doc_ptr must start at 0 and end at len(term_ids) = {len(term_ids)}, "
            f"got doc_ptr[0] = {int(doc_ptr[0])!r}, doc_ptr[-1] = {int(doc_ptr[-1])!r}"
        )
    bad = np.flatnonzero(np.diff(doc_ptr) < 0)
    if bad.size:
        d = int(bad[0])
        raise ValueError(f"doc_ptr must be non-decreasing, but doc_ptr[{d}] = {int(doc_ptr[d])} > doc_ptr[{d + 1}] = {int(doc_ptr[d + 1])}")
    low, i, high, j = _term_range(term_ids)
    if low < 0:
        raise ValueError(f"term_ids must be >= 0, got term_ids[{i}] = {low!r}")
    top = high + 1
    if n_terms is None:
        n_terms = top
    n_terms = int(n_terms)
    if top > n_terms:
        raise ValueError(f"term_ids[{j}] = {high} is out of range for n_terms = {n_terms}; pass n_terms >= {top}")
    if n_terms < 1:
        raise ValueError(f"n_terms must be >= 1, got {n_terms!r}")
    if fingerprint is None:
        fingerprint = "sha1:" + content_hash(doc_ptr, term_ids, n_terms)
    return Corpus(read_only(doc_ptr), read_only(term_ids), n_terms, str(fingerprint))


def read_only(a):
    """A read-only view (no copy): an index's corpus is memory-mapped read-only, and one array
    type for every corpus, wherever its arrays come from, means one compiled version of each
    kernel that reads them."""
    view = a.view()
    view.flags.writeable = False
    return view


def corpus_from_docs(docs, n_terms=None, fingerprint=None):
    """Build a :class:`Corpus` from an iterable of int sequences (one per document)."""
    docs = [np.asarray(d, dtype=np.int64).ravel() for d in docs]
    lens = np.array([len(d) for d in docs], dtype=np.int64)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    term_ids = np.concatenate(docs) if docs else np.zeros(0, dtype=np.int64)
    return make_corpus(doc_ptr, term_ids, n_terms=n_terms, fingerprint=fingerprint)


def synthetic_corpus(n_docs, n_terms, mean_len, seed=0, zipf_s=1.07, n_latent=100, background=0.5):
    """A seeded Zipfian corpus with latent topic structure, for benchmarks and tests.

    Document lengths come from a gamma-Poisson mixture around ``mean_len`` (skewed like news
    collections). Each document mixes 1-4 of ``n_latent`` latent topics. A token is drawn with
    probability ``background`` from a global Zipf law ``p(rank r) ~ r ** -zipf_s`` over
    ``n_terms`` terms, otherwise from its latent topic, which is the same Zipf law over its own
    random permutation of the vocabulary. ``n_latent=0`` gives plain i.i.d. Zipf text.

    Parameters
    ----------
    n_docs, n_terms : int
    mean_len : float
        Mean tokens per document.
    seed : int
    zipf_s : float
        Zipf exponent.
    n_latent : int
        Number of latent topics (0: none).
    background : float
        Share of tokens drawn from the global Zipf law.

    Returns
    -------
    Corpus
        ``fingerprint`` is ``"synthetic:..."`` listing every argument.
    """
    rng = np.random.default_rng(seed)
    shape = 2.0
    lam = rng.gamma(shape, mean_len / shape, size=n_docs)
    lens = 1 + rng.poisson(np.maximum(lam - 1.0, 0.0))
    doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lens, out=doc_ptr[1:])
    p = np.arange(1, n_terms + 1, dtype=np.float64) ** -zipf_s
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    n_tokens = int(doc_ptr[-1])
    ranks = np.empty(n_tokens, dtype=np.int32)
    chunk = 1 << 22
    for a in range(0, n_tokens, chunk):
        b = min(n_tokens, a + chunk)
        r = np.searchsorted(cdf, rng.random(b - a), side="right")
        np.minimum(r, n_terms - 1, out=r)
        ranks[a:b] = r
    term_ids = np.empty(n_tokens, dtype=np.int32)
    perm = rng.permutation(n_terms).astype(np.int32)
    if n_latent <= 0:
        term_ids[:] = perm[ranks]
    else:
        # Latent topic of each token: one of the doc's 1-4 topics, or -1 for the background.
        n_mix = rng.integers(1, 5, size=n_docs)
        doc_topics = rng.integers(0, n_latent, size=(n_docs, 4))
        doc_of = np.repeat(np.arange(n_docs), lens)
        pick = (rng.random(n_tokens) * n_mix[doc_of]).astype(np.int64)
        topic = doc_topics[doc_of, pick]
        topic[rng.random(n_tokens) < background] = -1
        del doc_of, pick
        order = np.argsort(topic, kind="stable")
        bounds = np.searchsorted(topic[order], np.arange(-1, n_latent + 1))
        for t in range(-1, n_latent):
            sel = order[bounds[t + 1]:bounds[t + 2]]
            tperm = perm if t < 0 else rng.permutation(n_terms).astype(np.int32)
            term_ids[sel] = tperm[ranks[sel]]
    fp = (f"synthetic:n_docs={n_docs},n_terms={n_terms},mean_len={mean_len},seed={seed},"
          f"zipf_s={zipf_s},n_latent={n_latent},background={background}")
    return Corpus(read_only(doc_ptr), read_only(term_ids), int(n_terms), fp)
