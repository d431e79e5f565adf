"""Sharded indexes: one collection as several topicir indexes, each a contiguous slice of it.

``topicir index SOURCES --out DIR --shards N`` (:func:`build_shards`) builds ``DIR/shard-000``,
``DIR/shard-001``, ...: each a whole topicir index (Lucene files, ``topicir-stats/``, manifest)
of a contiguous run of the documents, in the order the sources give them, and
``DIR/topicir-shards.json``, the manifest that ties them together: each shard's first row in the
whole collection, its document count and fingerprint, and the fingerprint of the whole
collection. The shards' rows, one after another, are the rows a single index of the same
sources has (``topicir index`` without ``--shards``), and the whole collection's fingerprint is
that index's: a model trained on it ranks the shards (:mod:`retrieval.core.sharded_ranking`).

The collection statistics are combined from the shards when they are read
(:func:`combine`): the union of their sorted vocabularies and the integer sums of their term
counts, checked against the fingerprint the manifest recorded when the shards were built.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from array import array
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import __version__
from .index import ANALYZER, MANIFEST, SHARDS_MANIFEST, Index, _umask, build_index, build_target
from .jvm import ANSERINI_VERSION
from .sources import iter_docs
from .stats import CollectionStats, fingerprint

log = logging.getLogger(__name__)

FORMAT = 1


def shard_name(shard: int) -> str:
    return f"shard-{shard:03d}"


def is_sharded(path) -> bool:
    """Whether ``path`` is a sharded index (holds a shard manifest, not an index manifest)."""
    path = Path(path)
    return (path / SHARDS_MANIFEST).is_file() and not (path / MANIFEST).is_file()


class Shard(NamedTuple):
    """One shard as the manifest records it."""
    path: Path          # its index directory
    first_doc: int      # its first row in the whole collection
    n_docs: int
    fingerprint: str    # of the shard's own index


class ShardedIndex:
    """A sharded index built by :func:`build_shards`: its manifest, read and checked.

    Attributes
    ----------
    path : Path
    manifest : dict, ``topicir-shards.json``
    shards : list of :class:`Shard`, in row order
    fingerprint : str, of the whole collection (a single index of the same sources has it)
    n_docs : int
    """

    def __init__(self, path):
        self.path = Path(path)
        file = self.path / SHARDS_MANIFEST
        if not file.is_file():
            raise FileNotFoundError(f"{self.path}: not a sharded index: {SHARDS_MANIFEST} is missing; build one "
                                    f"with `topicir index SOURCE --out {self.path} --shards N`")
        fix = f"rebuild it with `topicir index SOURCE --out {self.path} --shards N --force`"
        try:
            self.manifest = json.loads(file.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{file}: not a readable shard manifest ({exc}); {fix}") from None
        self.shards = _check_manifest(file, self.manifest, fix)

    def __repr__(self) -> str:
        return f"ShardedIndex({str(self.path)!r}, n_shards={len(self.shards)}, n_docs={self.n_docs})"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def fingerprint(self) -> str:
        return self.manifest["fingerprint"]

    @property
    def n_docs(self) -> int:
        return self.manifest["n_docs"]

    @cached_property
    def _first(self) -> Index:
        return Index(self.shards[0].path)

    def analyze(self, text: str) -> list[str]:
        """Terms of ``text`` as every shard's analyzer produces them (they share one)."""
        return self._first.analyze(text)


def _check_manifest(file: Path, m, fix: str) -> list[Shard]:
    """The shards a manifest lists, after checking every field: a fault is one line naming ``file``."""
    def bad(what):
        return ValueError(f"{file}: {what}; {fix}")

    def count(value, what, minimum=0):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise bad(f"{what} must be an int >= {minimum}, got {value!r}")
        return value

    if not isinstance(m, dict):
        raise bad(f"expected a JSON object, got {type(m).__name__}")
    if m.get("format") != FORMAT:
        raise bad(f"shard manifest format {m.get('format')!r}, this topicir reads {FORMAT}")
    for key in ("fingerprint",):
        if not isinstance(m.get(key), str) or not m[key]:
            raise bad(f"{key!r} is missing or not a string")
    n_docs = count(m.get("n_docs"), "n_docs", 1)
    shards = m.get("shards")
    if not isinstance(shards, list) or not shards:
        raise bad("'shards' must be a non-empty list")
    out, row = [], 0
    for i, s in enumerate(shards):
        if not isinstance(s, dict):
            raise bad(f"shard {i} is not an object")
        name = s.get("path")
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or os.sep in name:
            raise bad(f"shard {i}: 'path' must name a folder beside the manifest, got {name!r}")
        first = count(s.get("first_doc"), f"shard {i}: first_doc")
        if first != row:
            raise bad(f"shard {i}: first_doc {first}, but the shards before it end at row {row}")
        size = count(s.get("n_docs"), f"shard {i}: n_docs", 1)
        if not isinstance(s.get("fingerprint"), str):
            raise bad(f"shard {i}: 'fingerprint' is missing")
        out.append(Shard(file.parent / name, first, size, s["fingerprint"]))
        row += size
    if row != n_docs:
        raise bad(f"the shards hold {row} documents, the manifest says n_docs {n_docs}")
    return out


# -- the whole collection's statistics, combined from the shards -------------------------------


class ShardTerms(NamedTuple):
    """What a shard contributes to the collection statistics."""
    terms: list          # its sorted vocabulary
    cf: np.ndarray       # collection frequency of each, int64
    n_docs: int
    n_tokens: int


def shard_terms(stats: CollectionStats) -> ShardTerms:
    return ShardTerms(stats.terms, np.asarray(stats.cf, dtype=np.int64), stats.n_docs, stats.n_tokens)


class CollectionModel:
    """P(w|C) of a whole collection (its counts summed over shards), with the parts of
    :class:`~retrieval.core.stats.CollectionStats` that the scorer and the query analysis read
    (``p_c``, ``term_index``, ``n_docs``, ``zeros_scratch``); ``terms`` may be None where
    only P(w|C) is needed (a shard's worker, given the terms' ids)."""

    zeros_scratch = CollectionStats.zeros_scratch

    def __init__(self, terms: list | None, cf: np.ndarray, n_docs: int, n_tokens: int):
        self.terms, self.cf, self.n_docs, self.n_tokens = terms, cf, int(n_docs), int(n_tokens)
        # the formula of CollectionStats.p_c on the same integers: the same floats
        self.p_c = self.cf / max(self.n_tokens, 1)

    @property
    def n_terms(self) -> int:
        return len(self.cf)

    @cached_property
    def term_index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.n_docs, self.terms, self.cf)


def combine(parts: list[ShardTerms]) -> tuple[CollectionModel, list[np.ndarray]]:
    """The collection statistics of the shards ``parts`` together (sorted union of the
    vocabularies, integer sums of the counts: exactly those of one index of all their
    documents), and each shard's term ids in it (int64, one per term of the shard)."""
    terms = sorted(set().union(*(p.terms for p in parts)))
    index = {t: i for i, t in enumerate(terms)}
    cf = np.zeros(len(terms), dtype=np.int64)
    ids = []
    for p in parts:
        at = np.fromiter(map(index.__getitem__, p.terms), dtype=np.int64, count=len(p.terms))
        cf[at] += p.cf  # a shard's terms are distinct
        ids.append(at)
    return (CollectionModel(terms, cf, sum(p.n_docs for p in parts), sum(p.n_tokens for p in parts)), ids)


def check_combined(sharded: ShardedIndex, collection: CollectionModel) -> None:
    """The combined statistics must be those the manifest recorded when the shards were built."""
    if collection.fingerprint != sharded.fingerprint:
        raise ValueError(f"{sharded.path / SHARDS_MANIFEST}: the shards' statistics combine to fingerprint "
                         f"{collection.fingerprint}, not the manifest's {sharded.fingerprint} (a shard was "
                         f"replaced?); rebuild the sharded index with `topicir index ... --shards N --force`")


def open_shard(shard: Shard) -> Index:
    """The shard's index, checked to be the one the manifest lists."""
    index = Index(shard.path)
    if index.fingerprint != shard.fingerprint or index.manifest.get("n_docs") != shard.n_docs:
        raise ValueError(f"{shard.path}: fingerprint {index.fingerprint} with {index.manifest.get('n_docs')} "
                         f"documents, but {shard.path.parent / SHARDS_MANIFEST} lists it with "
                         f"{shard.fingerprint} and {shard.n_docs}; rebuild the sharded index")
    return index


# -- building -----------------------------------------------------------------------------------


def _split(sources: list[str], n_shards: int) -> list[range]:
    """Positions (in the sources' stream of documents, from 0) of each shard's documents: the
    documents with text split into ``n_shards`` contiguous runs as even as can be; a document
    without text (left out of any index) goes with the shard of the documents around it."""
    texts = array("q", (i for i, doc in enumerate(iter_docs(sources)) if doc.contents.strip()))
    if len(texts) < n_shards:
        raise ValueError(f"--shards {n_shards}: only {len(texts)} documents of {', '.join(sources)} have text; "
                         f"give at most {len(texts)} shards")
    firsts = [len(part) for part in np.array_split(np.arange(len(texts)), n_shards)]
    starts = np.concatenate([[0], np.cumsum(firsts)[:-1]])
    bounds = [0] + [texts[s] for s in starts[1:]] + [1 << 62]
    return [range(bounds[s], bounds[s + 1]) for s in range(n_shards)]


def build_shards(sources, out, n_shards: int, *, threads: int = 2, force: bool = False) -> ShardedIndex:
    """Index ``sources`` as ``n_shards`` indexes of contiguous slices of their documents, under
    ``out`` with the manifest ``topicir-shards.json`` (``topicir index --shards``).

    The whole sharded index is built in a hidden sibling of ``out`` and renamed into place when
    complete, under ``out``'s advisory lock, as :func:`~retrieval.core.index.build_index` builds one.
    """
    sources = [str(s) for s in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
    if isinstance(n_shards, bool) or not isinstance(n_shards, int) or n_shards < 1:
        raise ValueError(f"n_shards must be an int >= 1, got {n_shards!r}")
    out = Path(out)
    with build_target(out, force):
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
        try:
            _build_in(tmp, sources, n_shards, threads, start)
            os.chmod(tmp, 0o777 & ~_umask())
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
                os.replace(out, old / out.name)
                os.replace(tmp, out)
                shutil.rmtree(old)
            else:
                os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    sharded = ShardedIndex(out)
    log.info("sharded index %s: %d shards, %d docs in %.1f s", out, n_shards, sharded.n_docs,
             sharded.manifest["build_seconds"])
    return sharded


def _build_in(tmp: Path, sources: list[str], n_shards: int, threads: int, start: float) -> None:
    docs = _split(sources, n_shards)
    entries, parts, row = [], [], 0
    for s, positions in enumerate(docs):
        log.info("building shard %d of %d", s + 1, n_shards)
        index = build_index(sources, tmp / shard_name(s), threads=threads, docs=positions)
        stats = index.stats
        entries.append({"path": shard_name(s), "first_doc": row, "n_docs": stats.n_docs,
                        "n_tokens": stats.n_tokens, "fingerprint": index.fingerprint})
        parts.append(shard_terms(stats))
        row += stats.n_docs
    whole = combine(parts)[0]
    manifest = {
        "format": FORMAT, "topicir_version": __version__, "anserini_version": ANSERINI_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "sources": [s if s.startswith("irds:") else str(Path(s).resolve()) for s in sources],
        "n_shards": n_shards, "n_docs": whole.n_docs, "n_terms": whole.n_terms, "n_tokens": whole.n_tokens,
        "analyzer": ANALYZER, "fingerprint": whole.fingerprint, "shards": entries,
        "build_seconds": round(time.perf_counter() - start, 1),
    }
    (tmp / SHARDS_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
