"""Collection statistics: the exact term counts of a Lucene index as numpy arrays.

Built once from the index's term positions and cached beside it as ``.npy`` files that are
memory-mapped on load, so ranking and training never go back to Lucene for counts.
Rows follow the order in which documents were given to ``topicir index``.
"""
from __future__ import annotations

import hashlib
import json
from array import array
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from models.common.jit import njit

STATS_DIR = "topicir-stats"
FORMAT_VERSION = 1
_ARRAYS = ("doc_ptr", "term_ids", "positions", "post_ptr", "post_doc", "post_tf")


def _pack_strings(strings) -> np.ndarray:
    # Newline-joined UTF-8: compact for 10^5-10^6 short strings, unlike fixed-width numpy unicode.
    return np.frombuffer("\n".join(strings).encode("utf-8"), dtype=np.uint8)


def _unpack_strings(buf: np.ndarray) -> list[str]:
    return bytes(buf).decode("utf-8").split("\n") if len(buf) else []


def fingerprint(n_docs: int, terms, cf) -> str:
    """An index's fingerprint: SHA-256 of its document count and its term dictionary (sorted
    terms and their collection frequencies ``cf``), whichever files hold them."""
    h = hashlib.sha256()
    h.update(f"{n_docs}\n".encode())
    h.update(_pack_strings(terms).tobytes())
    h.update(np.ascontiguousarray(cf, dtype="<i8").tobytes())
    return h.hexdigest()[:16]


def parse_term_positions(text: str) -> list[tuple[str, list[int]]]:
    """Parse Java's ``Map<String, List<Integer>>.toString()``: ``{term=[0, 5], 3,000=[2]}``.

    Analysed terms never contain ``]`` or ``=[`` (StandardTokenizer drops brackets), but may
    contain commas ("3,000"), so entries are split on ``], ``.
    """
    body = text[1:-1]
    if not body:
        return []
    out = []
    for entry in body[:-1].split("], "):
        term, pos = entry.rsplit("=[", 1)
        out.append((term, [int(p) for p in pos.split(", ")]))
    return out


class StatsBuilder:
    """Accumulates documents' terms and positions compactly (array.array, not Python lists)."""

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.term_ids = array("i")
        self.positions = array("i")
        self.lens = [0]

    def add(self, entries) -> None:
        vocab, n = self.vocab, 0
        for term, pos in entries:
            tid = vocab.setdefault(term, len(vocab))
            self.term_ids.extend([tid] * len(pos))
            self.positions.extend(pos)
            n += len(pos)
        self.lens.append(n)

    def finish(self, docnos) -> "CollectionStats":
        if len(docnos) != len(self.lens) - 1:
            raise ValueError(f"{len(docnos)} docnos for {len(self.lens) - 1} documents")
        return CollectionStats.from_arrays(
            docnos, self.vocab, np.asarray(self.lens, dtype=np.int64),
            np.frombuffer(self.term_ids, dtype=np.int32), np.frombuffer(self.positions, dtype=np.int32))


class DocTokens(NamedTuple):
    """Tokens of documents read from an index, in position order within each document.

    ``term_ids`` index ``terms`` (any order); the tokens of doc d are ``[doc_ptr[d]:doc_ptr[d + 1]]``.
    """
    terms: list[str]
    doc_ptr: np.ndarray  # int64, n_docs + 1
    term_ids: np.ndarray  # int32
    positions: np.ndarray  # int32

    def stats(self, docnos) -> "CollectionStats":
        if len(docnos) != len(self.doc_ptr) - 1:
            raise ValueError(f"{len(docnos)} docnos for {len(self.doc_ptr) - 1} documents")
        lens = np.concatenate([[0], np.diff(self.doc_ptr)]).astype(np.int64)
        return CollectionStats.from_arrays(docnos, {t: i for i, t in enumerate(self.terms)}, lens,
                                           self.term_ids, self.positions)


class CollectionStats:
    """Counts of one index.

    Attributes
    ----------
    docnos : list of str, length n_docs
    terms : list of str, length n_terms, sorted
    doc_ptr : ndarray of shape (n_docs + 1,), int64
        Tokens of doc d are ``term_ids[doc_ptr[d]:doc_ptr[d + 1]]``, in position order.
    term_ids, positions : ndarray of shape (n_tokens,), int32
        Term of each token and its Lucene position; a gap of more than 1 between consecutive
        positions marks removed stopwords.
    post_ptr : ndarray of shape (n_terms + 1,), int64
        Postings of term w are ``post_doc[post_ptr[w]:post_ptr[w + 1]]`` (ascending) with
        frequencies ``post_tf[...]``: the term-document matrix in CSC form.
    """

    def __init__(self, docnos, terms, arrays: dict[str, np.ndarray]):
        self.docnos = list(docnos)
        self.terms = list(terms)
        for name in _ARRAYS:
            setattr(self, name, arrays[name])

    @property
    def n_docs(self) -> int:
        return len(self.docnos)

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def n_tokens(self) -> int:
        return int(self.doc_ptr[-1])

    @cached_property
    def doc_len(self) -> np.ndarray:
        return np.diff(self.doc_ptr)

    def log_doc_norm(self, mu: float) -> np.ndarray:
        """log(|d| + mu) of every document: exact QL's per-document part, kept for the last few mu."""
        cache = self.__dict__.setdefault("_log_doc_norm", {})
        if mu not in cache:
            if len(cache) >= 8:
                cache.clear()
            cache[mu] = np.log(self.doc_len + mu)
        return cache[mu]

    def zeros_scratch(self, n: int) -> np.ndarray:
        """At least n int32 zeros, kept between queries for the scorer's mixture kernel, which
        leaves them zero: allocating and zeroing a fresh table for every query is a sizeable part
        of the scoring."""
        scratch = self.__dict__.get("_zeros_scratch")
        if scratch is None or len(scratch) < n:
            scratch = self.__dict__["_zeros_scratch"] = np.zeros(n, dtype=np.int32)
        return scratch

    @cached_property
    def cf(self) -> np.ndarray:
        """Collection frequency of each term, int64."""
        return _term_totals(self.post_ptr, self.post_tf)

    @cached_property
    def df(self) -> np.ndarray:
        return np.diff(self.post_ptr)

    @cached_property
    def p_c(self) -> np.ndarray:
        """P(w|C) = cf(w) / n_tokens, float64."""
        return self.cf / max(self.n_tokens, 1)

    @cached_property
    def term_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    @cached_property
    def doc_index(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.docnos)}

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the term dictionary (terms and their collection frequencies) and the doc count."""
        return fingerprint(self.n_docs, self.terms, self.cf)

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.post_ptr[term], self.post_ptr[term + 1]
        return self.post_doc[lo:hi], self.post_tf[lo:hi]

    # -- construction and storage ------------------------------------------------------------

    @classmethod
    def from_token_lists(cls, docnos, doc_terms) -> "CollectionStats":
        """Build from per-document ``[(term, [positions])]`` lists (as parsed from Lucene)."""
        builder = StatsBuilder()
        for entries in doc_terms:
            builder.add(entries)
        return builder.finish(docnos)

    @classmethod
    def from_arrays(cls, docnos, vocab, lens, term_ids, positions) -> "CollectionStats":
        """Build from flat arrays: ``lens`` (n_docs + 1, leading 0) and tokens whose ids index ``vocab``
        (``{term: id}``); ids are renumbered so that terms are sorted. Tokens of a document may come
        in any order; they are put in position order (ties keep their given order)."""
        n_docs = len(docnos)
        terms = sorted(vocab)
        remap = np.empty(len(vocab), dtype=np.int32)
        remap[[vocab[t] for t in terms]] = np.arange(len(terms), dtype=np.int32)
        doc_ptr = np.cumsum(lens)
        if not doc_ptr[-1] == len(term_ids) == len(positions):
            raise ValueError(f"document lengths add up to {doc_ptr[-1]} tokens, given {len(term_ids)} term ids "
                             f"and {len(positions)} positions")
        term_ids = remap[term_ids] if len(term_ids) else term_ids
        if not _in_position_order(doc_ptr, positions):
            # Lucene's per-document maps hand tokens out term by term; readers in position order skip this.
            doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(doc_ptr))
            order = np.lexsort((positions, doc_of))
            term_ids, positions = term_ids[order], positions[order]
        post_ptr, post_doc, post_tf = _postings(doc_ptr, term_ids, len(terms))
        arrays = dict(doc_ptr=doc_ptr, term_ids=term_ids, positions=positions, post_ptr=post_ptr,
                      post_doc=post_doc, post_tf=post_tf)
        return cls(docnos, terms, arrays)

    def save(self, index_dir: Path) -> None:
        out = Path(index_dir) / STATS_DIR
        out.mkdir(parents=True, exist_ok=True)
        for name in _ARRAYS:
            np.save(out / f"{name}.npy", getattr(self, name))
        np.save(out / "docnos.npy", _pack_strings(self.docnos))
        np.save(out / "terms.npy", _pack_strings(self.terms))
        meta = dict(format=FORMAT_VERSION, n_docs=self.n_docs, n_terms=self.n_terms,
                    n_tokens=self.n_tokens, fingerprint=self.fingerprint)
        (out / "meta.json").write_text(json.dumps(meta, indent=1))

    @classmethod
    def load(cls, index_dir: Path) -> "CollectionStats":
        src = Path(index_dir) / STATS_DIR
        meta_path = src / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{src}: no collection statistics; rebuild the index with `topicir index`")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{meta_path}: statistics format {meta.get('format')}, this topicir reads "
                             f"{FORMAT_VERSION}; rebuild the index with `topicir index`")
        arrays = {name: np.load(src / f"{name}.npy", mmap_mode="r") for name in _ARRAYS}
        stats = cls(_unpack_strings(np.load(src / "docnos.npy")), _unpack_strings(np.load(src / "terms.npy")), arrays)
        return stats


# -- kernels -----------------------------------------------------------------------------------
# Linear passes over the tokens, instead of sorts of all of them (lexsort, np.unique of term-document
# keys): an AP-sized collection has tens of millions.

@njit(cache=True)
def _in_position_order(doc_ptr, positions) -> bool:
    """Whether positions never decrease within a document."""
    for d in range(len(doc_ptr) - 1):
        for i in range(doc_ptr[d] + 1, doc_ptr[d + 1]):
            if positions[i] < positions[i - 1]:
                return False
    return True


@njit(cache=True)
def _postings(doc_ptr, term_ids, n_terms):
    """Term-major postings of doc-major tokens: the (term, doc) pairs in term then doc order, each
    with its count (what ``np.unique`` of ``term * n_docs + doc`` gives, without the sort)."""
    last = np.full(n_terms, -1, np.int64)
    post_ptr = np.zeros(n_terms + 1, np.int64)
    for d in range(len(doc_ptr) - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            t = term_ids[i]
            if last[t] != d:
                last[t] = d
                post_ptr[t + 1] += 1
    for t in range(n_terms):
        post_ptr[t + 1] += post_ptr[t]
    post_doc = np.empty(post_ptr[n_terms], np.int32)
    post_tf = np.empty(post_ptr[n_terms], np.int32)
    fill = post_ptr[:-1].copy()
    count = np.zeros(n_terms, np.int32)
    for d in range(len(doc_ptr) - 1):  # ascending docs: each term's postings come out sorted
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            count[term_ids[i]] += 1
        # one write per (term, doc) pair, not per token: the postings are scattered across memory
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            t = term_ids[i]
            if count[t]:
                post_doc[fill[t]] = d
                post_tf[fill[t]] = count[t]
                fill[t] += 1
                count[t] = 0
    return post_ptr, post_doc, post_tf


@njit(cache=True, parallel=True)
def _term_totals(post_ptr, post_tf):
    """Every term's postings' tf summed, int64: read once from the (mapped) postings, with no
    int64 copy of them, which at AP size is hundreds of MB of fresh memory to fault in."""
    n_terms = len(post_ptr) - 1
    out = np.zeros(n_terms, np.int64)
    for t in numba.prange(n_terms):
        tot = np.int64(0)
        for j in range(post_ptr[t], post_ptr[t + 1]):
            tot += post_tf[j]
        out[t] = tot
    return out


@njit(cache=True)
def doc_major(df, post_row, post_tf, positions, n_docs):
    """Doc-major tokens from term-major postings (as a Lucene index stores them).

    Term ``t`` has the ``df[t]`` postings after those of terms ``< t``; posting ``j`` is document
    ``post_row[j]`` with ``post_tf[j]`` positions, which follow those of the postings before it in
    ``positions``. Returns ``doc_ptr`` (n_docs + 1, int64) and the tokens' term ids and positions
    (int32), in position order within each document; tokens at the same position (no analyzer of
    ours makes them) come in term order.
    """
    doc_ptr = np.zeros(n_docs + 1, np.int64)
    for j in range(len(post_row)):
        doc_ptr[post_row[j] + 1] += post_tf[j]
    for d in range(n_docs):
        doc_ptr[d + 1] += doc_ptr[d]
    n = doc_ptr[n_docs]
    term_ids = np.empty(n, np.int32)
    pos = np.empty(n, np.int32)
    fill = doc_ptr[:-1].copy()
    j = 0
    src = 0
    for t in range(len(df)):
        for _ in range(df[t]):
            d = post_row[j]
            for _ in range(post_tf[j]):
                term_ids[fill[d]] = t
                pos[fill[d]] = positions[src]
                fill[d] += 1
                src += 1
            j += 1
    for d in range(n_docs):
        lo, hi = doc_ptr[d], doc_ptr[d + 1]
        order = np.argsort(pos[lo:hi], kind="mergesort")
        term_ids[lo:hi] = term_ids[lo:hi][order]
        pos[lo:hi] = pos[lo:hi][order]
    return doc_ptr, term_ids, pos
