"""A batch of documents as the nonzero entries of their count matrix, and sums over them."""
from typing import NamedTuple

import numpy as np
import torch


class Docs(NamedTuple):
    """A batch of B documents as the nonzero entries of their count matrix (B, V), document by
    document: ``rows`` (the document), ``cols`` (the term), both (nnz,) int64, ``counts`` (nnz,)
    float32 and ``starts`` (B,) int64, where every document's entries begin. ``by_term``, for
    a training batch on the CPU, holds the same counts term by term: the batch's distinct terms
    (U,) int64 and a scipy CSR matrix (U, B), from which the first layers' gradients are summed
    row by row (:class:`models.avipam.nets.term_layer.TermLayer`)."""

    rows: torch.Tensor
    cols: torch.Tensor
    counts: torch.Tensor
    starts: torch.Tensor
    by_term: tuple | None = None

    @property
    def n_docs(self):
        return self.starts.shape[0]

    @classmethod
    def from_csr(cls, X, device="cpu", by_term=False):
        """The rows of a scipy CSR matrix ``X`` (n_docs, n_terms) on ``device``; ``by_term``:
        with their counts term by term too, on the CPU."""
        ptr = torch.from_numpy(X.indptr).to(device=device, dtype=torch.int64)
        cols = torch.from_numpy(X.indices).to(device=device, dtype=torch.int64)
        counts = torch.from_numpy(X.data).to(device=device, dtype=torch.float32)
        rows = torch.repeat_interleave(torch.arange(X.shape[0], device=device), ptr.diff())
        terms = None
        if by_term and torch.device(device).type == "cpu":
            T = X.T.tocsr()
            kept = np.flatnonzero(np.diff(T.indptr))
            terms = (torch.from_numpy(kept.astype(np.int64)), T[kept].astype(np.float32, copy=False))
        return cls(rows, cols, counts, ptr[:-1].contiguous(), terms)


def as_docs(x):
    """``x`` as :class:`Docs`: a dense count tensor (B, V) is read at its nonzero entries."""
    if isinstance(x, Docs):
        return x
    rows, cols = x.nonzero(as_tuple=True)
    starts = torch.searchsorted(rows, torch.arange(x.shape[0], device=x.device))
    return Docs(rows, cols, x[rows, cols], starts)


def batch_size(x):
    """B of a batch (:class:`Docs` or a dense (B, V) tensor) and a float tensor of its device
    and dtype, for new tensors."""
    if isinstance(x, Docs):
        return x.n_docs, x.counts
    return x.shape[0], x


def doc_sums(docs, values):
    """Every document's sum (B,) of ``values`` (nnz,) at its entries of ``docs``, added in entry
    order (a segmented sum: no atomics on a GPU either, so that a run repeats bit for bit)."""
    ends = torch.cat([docs.starts[1:], docs.starts.new_tensor([values.shape[0]])])
    return torch.segment_reduce(values, "sum", lengths=ends - docs.starts, unsafe=True)
