"""Building and opening topicir indexes: a Lucene index plus a manifest and collection statistics.

An index directory holds the Lucene files Anserini writes (positions, document vectors and
the raw JSON of each document stored), ``topicir.json`` (the manifest: sources, counts,
analyzer, term-dictionary fingerprint) and ``topicir-stats/`` (see :mod:`retrieval.stats`).
Builds happen in a hidden sibling directory that is renamed into place when complete, so an
interrupted build never leaves anything that looks like an index. A build holds the advisory
lock of its output (``.NAME.lock``, there while it runs): a second build of the same index is
refused, and a build removes what killed builds (``kill -9``, power loss) left in the same
parent directory. A build that replaces an index (``--force``) keeps its ``models/`` folder.

A document whose text is only stopwords or punctuation keeps its row, as an empty document
(length 0, matched by no query), so that rows, DOCNOs and the documents of Lucene agree.

An index grows with :func:`add_documents` (``topicir index --add``): the new documents get the
rows after the old ones, so a model trained on the old index still describes the first rows,
and the manifest's ``parents`` lists the fingerprint and document count of every earlier state.
An append is built and swapped in the same way as a build, under the same lock.
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from array import array
from functools import cached_property
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from models.common.atomic import TMP_INFIX, remove_stale, target_lock
from models.common.base import launch_numba_threads

from .. import __version__
from .jvm import ANSERINI_VERSION, jcast, jclass, lucene_errors
from .readback import read_positions, read_stats
from .sources import iter_docs
from .stats import STATS_DIR, CollectionStats, DocTokens

log = logging.getLogger(__name__)

MANIFEST = "topicir.json"
SHARDS_MANIFEST = "topicir-shards.json"  # a sharded index's (retrieval.core.shards)
MODELS_DIR = "models"  # models trained on an index (topicir train's default place)
ANALYZER = {"name": "DefaultEnglishAnalyzer", "stemmer": "porter", "stopwords": "lucene-english"}
_SHARD_DOCS = 5_000  # Anserini gives each thread whole files: small ones keep every thread busy to the end


class _Origins:
    """The file and line of each document written, compactly (a source index and a line number)."""

    def __init__(self):
        self.sources: dict[str, int] = {}
        self.source_of, self.line_of = array("i"), array("q")

    def add(self, source: str, line: int) -> None:
        self.source_of.append(self.sources.setdefault(source, len(self.sources)))
        self.line_of.append(line)

    def __getitem__(self, row: int) -> str:
        return f"{list(self.sources)[self.source_of[row]]}:{self.line_of[row]}"


def _write_jsonl_shards(sources, staging: Path, existing: Index | None = None, docs: range | None = None):
    """Validate the documents and write them as Anserini JsonCollection shards (with ``docs``,
    only the documents at those positions of the sources' stream, counted from 0; the others
    are read and checked all the same).

    Returns the docnos in input order, their :class:`_Origins`, the number of documents left
    out for having no text (Anserini would skip them silently) and a few of their docnos. A
    document whose DOCNO ``existing`` (the index being added to) already holds is an error
    naming its file and line.
    """
    known = existing.stats.doc_index if existing is not None else {}
    docnos, empty, origins = [], [], _Origins()
    out, n_in_shard = None, 0
    try:
        for at, doc in enumerate(tqdm(iter_docs(sources), desc="reading documents", unit=" docs", mininterval=2)):
            if docs is not None and at not in docs:
                continue
            if doc.docno in known:
                raise ValueError(f"{doc.source}:{doc.line}: DOCNO {doc.docno!r} is already in the index "
                                 f"{existing.path}; an added document needs a new DOCNO")
            contents = doc.contents
            if not contents.strip():
                empty.append(f"{doc.docno} ({doc.source}:{doc.line})")
                continue
            if out is None or n_in_shard == _SHARD_DOCS:
                if out is not None:
                    out.close()
                out = open(staging / f"docs-{len(docnos) // _SHARD_DOCS:05d}.jsonl", "w", encoding="utf-8")
                n_in_shard = 0
            out.write(json.dumps({"id": doc.docno, "contents": contents, "title": doc.title}) + "\n")
            docnos.append(doc.docno)
            origins.add(str(doc.source), doc.line)
            n_in_shard += 1
    finally:
        if out is not None:
            out.close()
    if empty:
        warnings.warn(f"{len(empty)} documents have no text and are left out of the index "
                      f"(as Anserini does), e.g. {', '.join(empty[:3])}", stacklevel=3)
    if not docnos:
        raise ValueError(f"no documents with text in {', '.join(map(str, sources))}")
    return docnos, origins, len(empty), empty[:10]


_BUILD_PARTS = (".building-", ".jsonl-", ".old-")


def dead_builds(parent: Path, held: Path | None = None) -> list[Path]:
    """Hidden work directories of builds in ``parent`` whose index is not locked by a live build
    (``held``: an index whose lock this process holds, so its leftovers are all dead)."""
    out = []
    for p in sorted(Path(parent).glob(".*")):
        part = next((b for b in _BUILD_PARTS if b in p.name), None)
        if part is None or not p.is_dir():
            continue
        target = parent / p.name[1:p.name.index(part)]
        if part == ".old-" and not target.exists():  # killed mid-swap: the only copy; keep it
            log.warning("%s holds the previous index %s (a build was killed while replacing it); "
                        "move it back or delete it", p, target)
            continue
        if held is not None and target == held:
            out.append(p)
            continue
        try:
            with target_lock(target, what="index"):
                out.append(p)
        except (RuntimeError, OSError):  # a live build of that index, or a read-only parent
            continue
    return out


def build_index(sources, out, *, threads: int = 2, force: bool = False, docs: range | None = None) -> "Index":
    """Index ``sources`` (TREC SGML files/dirs, JSON lines, ``irds:`` ids) into directory ``out``
    (with ``docs``, only the documents at those positions of the sources, counted from 0: a
    shard, :mod:`retrieval.core.shards`).

    The build happens in a hidden temporary sibling of ``out`` and is renamed into place only
    when Lucene, the statistics and the manifest are all written.
    """
    sources = [str(s) for s in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    out = Path(out)
    with build_target(out, force):
        return _build_locked(sources, out, threads, docs=docs)


@contextlib.contextmanager
def build_target(out: Path, force: bool):
    """Hold ``out``'s advisory lock for a build that replaces it (an index, a sharded index),
    after checking that it may be replaced and removing the leftovers of killed builds."""
    if out.exists() and not force:
        raise FileExistsError(f"{out} already exists; pass --force to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    with target_lock(out, what="index"):
        # Checked again under the lock: another build may have finished meanwhile.
        if out.exists() and not force:
            raise FileExistsError(f"{out} already exists (built meanwhile by another process); "
                                  f"pass --force to replace it")
        removed = remove_stale(dead_builds(out.parent, held=out))
        if removed:
            log.warning("removed %d leftovers of killed index builds: %s", len(removed),
                        ", ".join(str(p) for p in removed))
        yield


def _build_locked(sources: list[str], out: Path, threads: int, existing: Index | None = None,
                  docs: range | None = None) -> "Index":
    """The build (or, with ``existing``, the append), with an OS error in its work directories
    (a full disk, a read-only parent) naming ``out``, the index asked for, not a temporary that
    is removed."""
    try:
        return _build_in_work_dirs(sources, out, threads, existing, docs)
    except OSError as e:
        work = os.fspath(out.parent / f".{out.name}.")
        if e.errno is None or not (e.filename is None or os.fspath(e.filename).startswith(work)):
            raise
        raise type(e)(e.errno, e.strerror, str(out)) from e


def _lucene_failure(out: Path, staging: Path) -> OSError:
    """Anserini returned without an index and without an error: a disk too full for the
    documents' text is reported as such, anything else as no index written."""
    free = shutil.disk_usage(out.parent).free
    text = sum(p.stat().st_size for p in staging.iterdir())
    if free < text:
        return OSError(errno.ENOSPC, f"No space left on device ({free} bytes free; the index needs "
                                     f"more than the {text} bytes of the documents' text)", str(out))
    return OSError(f"{out}: Anserini wrote no index")


def _index_shards(staging: Path, lucene_dir: Path, out: Path, threads: int) -> None:
    """Anserini's IndexCollection over the JSON shards: the one place an index's settings are given.
    Its failures (a full disk, ...) name ``out``, the index asked for."""
    with lucene_errors(out, reading=False):
        jclass("io.anserini.index.IndexCollection").main([
            "-collection", "JsonCollection", "-input", str(staging.resolve()), "-index", str(lucene_dir.resolve()),
            "-threads", str(threads), "-storePositions", "-storeDocvectors", "-storeRaw", "-quiet"])
    if not any(lucene_dir.glob("segments_*")):
        raise _lucene_failure(out, staging)


# What an append rewrites; everything else in an index directory (models, adapters' files) is
# carried over as hard links, which is safe because Lucene never rewrites a file and topicir's
# files are replaced by rename.
_REWRITTEN = ("write.lock", MANIFEST, STATS_DIR)


def _link(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _link_tree(src: Path, dst: Path) -> None:
    """``src`` into the new directory ``dst`` as hard links (copies where links fail), leaving
    out what an append rewrites."""
    shutil.copytree(src, dst, copy_function=_link, dirs_exist_ok=True,
                    ignore=lambda d, names: [n for n in names if Path(d) == src and n in _REWRITTEN])


def _carry_models(old: Path, new: Path) -> list[Path]:
    """The ``models/`` folder of the index ``old`` that a build replaces, into the build ``new``
    as hard links, without the locks and temporaries of trainings still running; the model
    files it holds. A model of other documents is refused when loaded, by its fingerprint."""
    if not (old / MODELS_DIR).is_dir():
        return []
    shutil.copytree(old / MODELS_DIR, new / MODELS_DIR, copy_function=_link,
                    ignore=lambda d, names: [n for n in names if n.endswith(".lock") or TMP_INFIX in n])
    return sorted((new / MODELS_DIR).rglob("*.npz"))


def _append_lucene(lucene_dir: Path, added: Path) -> None:
    """Add the segments of the Lucene index ``added`` to the one in ``lucene_dir`` (a copy of the
    old index): Lucene appends them as they are, without analysing the documents again."""
    fs, paths = jclass("org.apache.lucene.store.FSDirectory"), jclass("java.nio.file.Paths")
    config = jclass("org.apache.lucene.index.IndexWriterConfig")().setOpenMode(
        jclass("org.apache.lucene.index.IndexWriterConfig$OpenMode").APPEND)
    target = fs.open(paths.get(str(lucene_dir.resolve())))
    source = fs.open(paths.get(str(added.resolve())))
    try:
        writer = jclass("org.apache.lucene.index.IndexWriter")(target, config)
        try:
            writer.addIndexes(jcast("org.apache.lucene.store.Directory", source))
            writer.commit()
        finally:
            writer.close()
    finally:
        source.close()
        target.close()


def _merged_stats(old: CollectionStats, added: DocTokens, docnos: list[str]) -> CollectionStats:
    """Statistics of the old documents followed by the added ones, equal to those of a build of
    all of them at once (terms renumbered in sorted order, postings rebuilt)."""
    vocab = dict(old.term_index)
    remap = np.array([vocab.setdefault(term, len(vocab)) for term in added.terms], dtype=np.int32)
    new_ids = added.term_ids
    lens = np.concatenate([[0], old.doc_len, np.diff(added.doc_ptr)]).astype(np.int64)
    term_ids = np.concatenate([np.asarray(old.term_ids, dtype=np.int32), remap[new_ids] if len(new_ids) else new_ids])
    positions = np.concatenate([np.asarray(old.positions, dtype=np.int32), added.positions])
    return CollectionStats.from_arrays(old.docnos + docnos, vocab, lens, term_ids, positions)


def _build_in_work_dirs(sources: list[str], out: Path, threads: int, existing: Index | None,
                        docs: range | None = None) -> "Index":
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.jsonl-", dir=out.parent))
    added = None
    start = time.perf_counter()
    kept, old_fingerprint = [], None
    try:
        docnos, origins, n_empty, empty = _write_jsonl_shards(sources, staging, existing, docs)
        log.info("indexing %d documents with Anserini %s", len(docnos), ANSERINI_VERSION)
        if existing is None:
            _index_shards(staging, tmp, out, threads)
            with lucene_errors(out, reading=False):
                stats = read_stats(tmp, docnos)
        else:
            added = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
            _index_shards(staging, added, out, threads)
            with lucene_errors(out, reading=False):
                positions = read_positions(added, docnos)
                _link_tree(existing.path, tmp)
                _append_lucene(tmp, added)
            stats = _merged_stats(existing.stats, positions, docnos)
        _check_terms(stats, docnos, origins, sources, appended=existing is not None)
        stats.save(tmp)
        manifest = {
            "topicir_version": __version__, "anserini_version": ANSERINI_VERSION,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "sources": [s if s.startswith("irds:") else str(Path(s).resolve()) for s in sources],
            "n_docs": stats.n_docs, "n_terms": stats.n_terms, "n_tokens": stats.n_tokens,
            "n_empty_docs_skipped": n_empty, "empty_docs_skipped": empty,
            "analyzer": ANALYZER, "fingerprint": stats.fingerprint,
            "build_seconds": round(time.perf_counter() - start, 1),
        }
        if existing is not None:
            manifest = _appended_manifest(existing.manifest, manifest, len(docnos))
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700: an index is as shared as its parent
        if out.exists():
            if existing is None:
                kept, old_fingerprint = _carry_models(out, tmp), _fingerprint(out)
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
            os.replace(tmp, out)
            shutil.rmtree(old)
        else:
            os.replace(tmp, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
        if added is not None:
            shutil.rmtree(added, ignore_errors=True)
    log.info("index %s: %d docs, %d terms, %d tokens in %.1f s", out, manifest["n_docs"],
             manifest["n_terms"], manifest["n_tokens"], manifest["build_seconds"])
    if kept:
        _say_kept(out / MODELS_DIR, kept, same_documents=old_fingerprint == manifest["fingerprint"])
    return Index(out)


def _say_kept(models: Path, kept: list[Path], same_documents: bool) -> None:
    names = ", ".join(p.name for p in kept[:3]) + (", ..." if len(kept) > 3 else "")
    what = f"{len(kept)} model file{'s' * (len(kept) != 1)} of the replaced index in {models} ({names})"
    if same_documents:
        log.info("kept the %s: same documents, so they still match", what)
    else:
        log.warning("kept the %s; the documents changed, so a model trained on the replaced index is "
                    "refused when loaded on this one: retrain it", what)


def _fingerprint(index: Path) -> str | None:
    try:
        return json.loads((index / MANIFEST).read_text())["fingerprint"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _check_terms(stats: CollectionStats, docnos: list[str], origins: _Origins, sources: list[str],
                 appended: bool) -> None:
    """Documents of ``docnos`` (the last rows of ``stats``) without a term the analyzer keeps stay
    as empty rows, with a warning naming a few; a build where all of them are is refused."""
    lengths = np.asarray(stats.doc_len[stats.n_docs - len(docnos):])
    blank = np.flatnonzero(lengths == 0)
    if not appended and len(blank) == len(docnos):
        raise ValueError(f"no document in {', '.join(sources)} has a term to index: all {len(docnos)} "
                         f"are only stopwords or punctuation")
    if len(blank):
        warnings.warn(f"{len(blank)} documents have only stopwords or punctuation and are indexed as "
                      f"empty documents, which no query matches, e.g. "
                      + ", ".join(f"{docnos[i]} ({origins[i]})" for i in blank[:3]), stacklevel=5)


def _appended_manifest(old: dict, new: dict, n_added: int) -> dict:
    """The manifest after an append: every source so far, and the chain of earlier states."""
    parent = {"fingerprint": old["fingerprint"], "n_docs": old["n_docs"], "n_terms": old["n_terms"],
              "n_tokens": old["n_tokens"]}
    return new | {
        "created": old.get("created"), "added": new["created"],
        "sources": list(old.get("sources", [])) + new["sources"],
        "n_added_docs": n_added,
        "n_empty_docs_skipped": old.get("n_empty_docs_skipped", 0) + new["n_empty_docs_skipped"],
        "empty_docs_skipped": (list(old.get("empty_docs_skipped", [])) + new["empty_docs_skipped"])[:10],
        "parents": list(old.get("parents", [])) + [parent],
    }


def add_documents(sources, index, *, threads: int = 2) -> "Index":
    """Append the documents of ``sources`` to the index at ``index`` (``topicir index --add``).

    They are analysed as the index's own documents were and get the rows after them; a DOCNO the
    index already has is refused (file and line). The result has a new fingerprint, and its
    manifest's ``parents`` ends with the old fingerprint and document count, so that models of the
    old index can rank the new one (:mod:`retrieval.core.extension`). The old index stays in place,
    untouched, until the new one is complete.
    """
    sources = [str(s) for s in ([sources] if isinstance(sources, (str, os.PathLike)) else sources)]
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    out = Path(index)
    Index(out)  # not an index: say so before taking a lock beside it
    with target_lock(out, what="index"):
        existing = Index(out)  # read under the lock: another append may have finished meanwhile
        analyzer = existing.manifest.get("analyzer")
        if analyzer != ANALYZER:
            raise ValueError(f"{out}: built with analyzer {analyzer}, this topicir indexes with {ANALYZER}; "
                             f"rebuild the index with `topicir index` to add documents")
        removed = remove_stale(dead_builds(out.parent, held=out))
        if removed:
            log.warning("removed %d leftovers of killed index builds: %s", len(removed),
                        ", ".join(str(p) for p in removed))
        return _build_locked(sources, out, threads, existing)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Index:
    """An index built by :func:`build_index`: manifest, statistics, analyzer and stored documents."""

    def __init__(self, path):
        self.path = Path(path)
        manifest = self.path / MANIFEST
        if not manifest.is_file() and (self.path / SHARDS_MANIFEST).is_file():
            raise ValueError(f"{self.path}: a sharded index (topicir index --shards): `topicir run` ranks it "
                             f"(--ray on a Ray cluster); other commands need an index built without --shards")
        if not manifest.is_file():
            hint = " (an interrupted build?)" if self.path.name.startswith(".") else ""
            raise FileNotFoundError(f"{self.path}: not a topicir index{hint}: {MANIFEST} is missing; "
                                    f"build one with `topicir index SOURCE --out {self.path}`")
        try:
            self.manifest = json.loads(manifest.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{manifest}: not a readable index manifest ({exc}); rebuild the index with "
                             f"`topicir index SOURCE --out {self.path} --force`") from None
        launch_numba_threads()  # before any parallel kernel reads the index: idle threads sleep

    def __repr__(self) -> str:
        m = self.manifest
        return f"Index({str(self.path)!r}, n_docs={m['n_docs']}, n_terms={m['n_terms']})"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def fingerprint(self) -> str:
        return self.manifest["fingerprint"]

    @property
    def parents(self) -> list[dict]:
        """Earlier states of an index grown by :func:`add_documents`, oldest first, each with its
        ``fingerprint`` and ``n_docs``: the first ``n_docs`` rows here are that index's documents."""
        return list(self.manifest.get("parents", []))

    @cached_property
    def stats(self) -> CollectionStats:
        stats = CollectionStats.load(self.path)
        if stats.fingerprint != self.fingerprint:
            raise ValueError(f"{self.path}: statistics fingerprint {stats.fingerprint} does not match "
                             f"the manifest's {self.fingerprint}; rebuild the index")
        return stats

    @cached_property
    def _analyzer(self):
        return jclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()

    def analyze(self, text: str) -> list[str]:
        """Terms of ``text`` as the index's analyzer produces them (Porter stemming, Lucene stopwords)."""
        if not text.strip():
            return []
        joined = jclass("io.anserini.analysis.AnalyzerUtils").analyze(self._analyzer, text).toString()
        return joined[1:-1].split(", ") if len(joined) > 2 else []

    @cached_property
    def _reader(self):
        # absolute: the JVM keeps the working directory it started in, whatever os.chdir did since
        with lucene_errors(self.path):
            return jclass("io.anserini.index.IndexReaderUtils").getReader(str(self.path.resolve()))

    def document(self, docno: str) -> dict:
        """The stored document: ``{"id", "contents", "title"}``."""
        reader = self._reader
        with lucene_errors(self.path, printed=False):
            raw = jclass("io.anserini.index.IndexReaderUtils").documentRaw(reader, docno)
        if raw is None:
            raise KeyError(f"{docno!r} is not a document of {self.path}")
        return json.loads(raw)
