"""Bounds on a document model's P_TM(w|d), for rankings that need only their top documents.

A kind whose P_TM(w|d) splits into a cheap part and a costly one of known sign offers
``p_w_d_bounds(term_ids) -> DocumentBounds | None``: the cheap part for every document, a
rank-one gap to an upper bound, and the exact entries on demand. A ranking that keeps only
its top ``depth`` documents scores the bounds first and asks for the exact entries of the
documents that can still reach them (``retrieval.core.pruning``).
"""
from typing import Callable

import numpy as np


class DocumentBounds:
    """``lower <= P_TM(w|d) <= lower + doc_gap[d] * term_gap[w]`` for every document and term.

    Parameters
    ----------
    lower : ndarray of shape (n_docs, n_terms), float64 (a view of a term-major array)
    doc_gap : ndarray of shape (n_docs,), float64, >= 0
    term_gap : ndarray of shape (n_terms,), float64, >= 0
    exact : callable ``exact(docs, ptr, cols)`` that turns ``lower[docs[k], c]`` into P_TM's
        exact value (as ``p_w_d`` computes it, bit for bit) for the columns c in
        ``cols[ptr[k]:ptr[k + 1]]`` (each once) of each document ``docs[k]``; it may add the
        missing part to the bound, so it is called once
    """

    def __init__(self, lower: np.ndarray, doc_gap: np.ndarray, term_gap: np.ndarray, exact: Callable):
        self.lower, self.doc_gap, self.term_gap, self._exact = lower, doc_gap, term_gap, exact
        self.exact = False  # whether make_exact has run

    def make_exact(self, docs: np.ndarray, ptr: np.ndarray, cols: np.ndarray) -> None:
        """Make ``lower`` exact where asked, once: documents ascending, each document's
        columns ascending (see the class)."""
        if self.exact:
            raise RuntimeError("make_exact has already run on these bounds")
        docs = np.ascontiguousarray(docs, dtype=np.int64)
        ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        if len(ptr) != len(docs) + 1 or ptr[0] != 0 or ptr[-1] != len(cols) or np.any(np.diff(ptr) < 0):
            raise ValueError("ptr must run from 0 to len(cols), one step per document")
        if len(docs) and (docs.min() < 0 or docs.max() >= self.lower.shape[0]):
            raise ValueError(f"documents must be in [0, {self.lower.shape[0]})")
        if len(cols) and (cols.min() < 0 or cols.max() >= self.lower.shape[1]):
            raise ValueError(f"columns must be in [0, {self.lower.shape[1]})")
        if np.any(np.diff(docs) <= 0):
            raise ValueError("documents must be ascending, each once")
        step = np.diff(cols) > 0
        inner = ptr[1:-1]
        step[inner[(inner > 0) & (inner < len(cols))] - 1] = True  # a document's first column follows another's
        if not np.all(step):
            raise ValueError("a document's columns must be ascending, each once")
        self._exact(docs, ptr, cols)
        self.exact = True
