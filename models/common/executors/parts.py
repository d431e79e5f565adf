"""The kept samples' parts that Ray workers wrote (:mod:`models.common.executors.sharded`), read
back a piece at a time into a model file: the driver never holds a token- or document-sized
array whole."""
from pathlib import Path

import numpy as np

from .. import checkpoint as ckpt
from ..corpus import read_piece

PIECE = 1 << 20  # elements of a part's array read at a time into a model file


def doc_len_pieces(corpus):
    """The documents' lengths (int64), PIECE documents at a time: a model file's ``doc_len``."""
    D = corpus.n_docs
    for lo in range(0, D, PIECE):
        yield np.diff(read_piece(corpus.doc_ptr, lo, min(D, lo + PIECE) + 1)).astype(np.int64)


class DocParts:
    """The kept samples' shard parts of per-document lists (``samples``: the manifest's, sorted
    as the model file stacks them), read back PIECE elements at a time into a model file: a
    part holds an array of every document's entry count and arrays of the entries, whose length
    the manifest records (:attr:`ShardWorker.SAMPLE_ENTRIES`)."""

    def __init__(self, directory, samples, shard_doc):
        self.directory, self.samples, self.shard_doc = Path(directory), samples, shard_doc
        self.layouts = {}
        for s in samples:
            for _, name, *_ in s["shards"]:
                with open(self.directory / name, "rb") as fh:
                    self.layouts[name] = ckpt.member_layouts(fh)
        entries = [sum(p[3] for p in s["shards"]) for s in samples]
        self.off = np.concatenate([[0], np.cumsum(entries)]).astype(np.int64)
        self.total = int(self.off[-1])

    def dtype(self, name):
        """The dtype that holds array ``name`` of every part."""
        return np.result_type(*[lay[name][1] for lay in self.layouts.values()])

    def _pieces(self, sample, name, per_doc):
        """Array ``name`` of the sample's shard parts in turn (one entry per document if
        ``per_doc``, else per listed entry), PIECE elements at a time."""
        for s, part, *rest in sample["shards"]:
            n = int(self.shard_doc[s + 1] - self.shard_doc[s]) if per_doc else int(rest[1])
            with open(self.directory / part, "rb") as fh:
                for lo in range(0, n, PIECE):
                    yield ckpt.read_member_range(fh, self.layouts[part], name, lo, min(n, lo + PIECE))

    def ptr(self, nnz):
        """The (samples, documents + 1) pointer rows of the stacked lists, from the parts'
        entry counts ``nnz``, row after row."""
        for sample, o in zip(self.samples, self.off[:-1]):
            at = int(o)
            yield np.array([at], np.int64)
            for n in self._pieces(sample, nnz, True):
                ptr = at + np.cumsum(n, dtype=np.int64)
                at = int(ptr[-1]) if len(ptr) else at
                yield ptr

    def entries(self, name):
        """Array ``name`` of every sample's parts, concatenated."""
        return (p for sample in self.samples for p in self._pieces(sample, name, False))
