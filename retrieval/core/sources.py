"""Where documents, topics and qrels come from: TREC files, JSON lines, or ir_datasets ids.

A source string ``irds:<dataset-id>`` (e.g. ``irds:cranfield``) names an ir_datasets dataset;
anything else is a path. Documents from every source come out as :class:`retrieval.core.trec.Doc`.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from .trec import GZIP_ERRORS, Doc, collection_files, Qrel, Topic, TrecFormatError, read_collection, read_qrels, read_topics

IRDS_PREFIX = "irds:"


def is_irds(source) -> bool:
    return isinstance(source, str) and source.startswith(IRDS_PREFIX)


def _irds_dataset(source: str):
    import ir_datasets

    name = source[len(IRDS_PREFIX):]
    try:
        return ir_datasets.load(name)
    except KeyError as exc:
        raise ValueError(f"{source!r}: unknown ir_datasets id {name!r}") from exc


def _is_jsonl(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith((".jsonl", ".jsonl.gz", ".json", ".json.gz"))


def read_jsonl_docs(path: Path) -> Iterator[Doc]:
    """Documents from JSON lines ``{"id": ..., "contents": ...}`` (an optional ``"title"`` is kept apart)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from _jsonl_docs(path, f)


def _jsonl_docs(path: Path, f) -> Iterator[Doc]:
    line_no = 0
    try:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                docno, contents = str(obj["id"]), obj["contents"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise TrecFormatError(
                    f"{path}:{line_no}: expected a JSON object with \"id\" and \"contents\", "
                    f"got {line[:80]!r} ({exc})", source=str(path), line=line_no) from None
            yield Doc(docno, str(obj.get("title", "")), str(contents), str(path), line_no)
    except GZIP_ERRORS as exc:
        raise TrecFormatError(f"truncated or corrupt gzip data after line {line_no} ({exc}). "
                              f"Download or copy the file again.", str(path)) from None


class DownloadError(OSError):
    """ir_datasets could not download a dataset's files (no network, a dead mirror)."""


def irds_home() -> str:
    """Where ir_datasets keeps its downloads ($IR_DATASETS_HOME, default ~/.ir_datasets)."""
    return os.environ.get("IR_DATASETS_HOME") or str(Path("~/.ir_datasets").expanduser())


@contextlib.contextmanager
def _downloads(source: str):
    """ir_datasets' download failures (a RuntimeError or a requests error holding the whole
    retry history) as one :class:`DownloadError` naming the dataset and ir_datasets' folder."""
    try:
        yield
    except DownloadError:
        raise
    except (RuntimeError, OSError) as exc:
        if "download" not in str(exc).lower() and "connection" not in type(exc).__name__.lower():
            raise
        raise DownloadError(f"{source}: ir_datasets could not download the collection (no network?); "
                            f"its files go under {irds_home()}") from None


def _irds_docs(source: str) -> Iterator[Doc]:
    dataset = _irds_dataset(source)
    if not dataset.has_docs():
        raise ValueError(f"{source!r} has no documents")
    with _downloads(source):
        for i, doc in enumerate(dataset.docs_iter(), 1):
            title = getattr(doc, "title", "") or ""
            text = getattr(doc, "text", None)
            if text is None:
                text = doc.default_text()
            yield Doc(doc.doc_id, title, text, source, i)


def iter_docs(sources: Iterable) -> Iterator[Doc]:
    """Documents from each source in turn: TREC SGML files/dirs (plain or .gz), JSON lines, irds ids.

    DOCNOs must be unique across all sources; a duplicate is an error naming both places.
    Documents without text are yielded; the indexer decides about them.
    """
    seen: dict[str, tuple[str, int]] = {}
    read: set[Path] = set()  # resolved files read so far: one given twice is an error
    for source in sources:
        if is_irds(source):
            docs = _irds_docs(source)
        else:
            path = Path(source)
            if not path.exists():
                raise FileNotFoundError(f"{path}: no such file or directory")
            _read_once(path, read)
            docs = read_jsonl_docs(path) if path.is_file() and _is_jsonl(path) else read_collection(path, warn_empty=False)
        for doc in docs:
            first = seen.setdefault(doc.docno, (doc.source, doc.line))
            if first != (doc.source, doc.line):
                raise TrecFormatError(
                    f"{doc.source}:{doc.line}: duplicate DOCNO {doc.docno!r}, first seen at "
                    f"{first[0]}:{first[1]}. DOCNOs must be unique across the collection.",
                    source=doc.source, line=doc.line)
            yield doc


def _read_once(path: Path, read: set[Path]) -> None:
    """Refuse a file given twice (also as part of a directory given): its DOCNOs would be
    indexed twice, each at the same file and line, which the DOCNO check cannot tell apart."""
    files = collection_files(path) if path.is_dir() else [path]
    for f in files:
        resolved = Path(f).resolve()
        if resolved in read:
            raise TrecFormatError("given twice (as a file, or inside a directory given); its documents "
                                  "would be indexed twice. Give each file once.",
                                  source=str(f))
        read.add(resolved)


def load_topics(source) -> list[Topic]:
    """Topics from a TREC topics file / TSV (see :func:`retrieval.core.trec.read_topics`) or an irds id."""
    if not is_irds(source):
        return read_topics(Path(source))
    dataset = _irds_dataset(source)
    if not dataset.has_queries():
        raise ValueError(f"{source!r} has no queries")
    topics = []
    with _downloads(source):
        for q in dataset.queries_iter():
            title = getattr(q, "title", None) or getattr(q, "text", None) or q.default_text()
            topics.append(Topic(q.query_id, title, getattr(q, "description", "") or "",
                                getattr(q, "narrative", "") or ""))
    return topics


def load_qrels(source) -> list[Qrel]:
    """Qrels from a TREC qrels file or an irds id."""
    if not is_irds(source):
        return read_qrels(Path(source))
    dataset = _irds_dataset(source)
    if not dataset.has_qrels():
        raise ValueError(f"{source!r} has no qrels")
    with _downloads(source):
        return [Qrel(q.query_id, q.doc_id, int(q.relevance)) for q in dataset.qrels_iter()]
