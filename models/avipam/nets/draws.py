"""The network's random draws, from a ``torch.Generator`` or from a :class:`RowShare` of one:
a process that holds rows [lo, lo + B) of a global batch of ``n_docs`` documents draws what the
whole batch would and keeps its rows, so that every document gets the noise and dropout masks
of one process training on the whole batch (torch's draws of a tensor depend on its shape, so
drawing B rows alone would not give them)."""
from typing import NamedTuple

import torch


class RowShare(NamedTuple):
    """Draws of rows [lo, lo + B) of a global batch of ``n_docs`` documents from ``gen``."""

    gen: torch.Generator
    n_docs: int
    lo: int

    @property
    def device(self):
        return self.gen.device


def _draw(fn, shape, gen, **kw):
    if isinstance(gen, RowShare):
        return fn((gen.n_docs, *shape[1:]), generator=gen.gen, **kw)[gen.lo:gen.lo + shape[0]]
    return fn(shape, generator=gen, **kw)


def uniform(shape, gen, device):
    """U[0, 1) draws of ``shape`` (documents first)."""
    return _draw(torch.rand, shape, gen, device=device)


def normal(shape, gen, device, dtype):
    """Standard normal draws of ``shape`` (documents first)."""
    return _draw(torch.randn, shape, gen, device=device, dtype=dtype)
