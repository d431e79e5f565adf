"""Token sequences of an index, and of queries, with the splits a collocation may not cross.

The collocation model (TCM) needs every document's terms in text order, exactly as the index
analysed them (so that queries, analysed the same way, match), and a split wherever a stopword
or sentence punctuation separated two terms in the raw text (Zhao et al. 2015 split documents
at punctuation and stopwords before sampling).

- Stopwords: the index keeps Lucene positions; the stop filter leaves a gap, so a position gap
  > 1 between consecutive tokens is a split.
- Punctuation: every document's stored raw ``contents`` is analysed once, in ONE analyzer call,
  with sentence punctuation and brackets/quotes replaced by a marker token (:data:`SPLIT_MARK`).
  The markers are dropped and the remaining terms must equal the index's token sequence of the
  document; where they do not (tokenisation changed by the substitution), the document keeps
  its stopword splits only, and the count is reported.

The flags are cached beside the index in ``topicir-stats/tcm_splits.npy`` (with
``tcm_splits.json``: the index fingerprint, the punctuation pattern, the fallback count), so they
are computed once per index; a cache from another index or pattern is recomputed.
"""
from __future__ import annotations

import json
import logging
import re
import warnings
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from models.common.atomic import atomic_open
from models.common.jit import njit

from ..core.jvm import release_heap
from ..core.stats import STATS_DIR

log = logging.getLogger(__name__)

SPLIT_MARK = "qqsplitqq"
# sentence punctuation before whitespace/end, brackets and quotes, and free-standing dashes
PUNCT_RE = re.compile(r"[.,;:!?]+(?=\s|$)|[()\[\]{}\"]|(?<!\S)(?:-{1,3}|–|—)(?!\S)")
SPLITS_FILE = "tcm_splits.npy"
SPLITS_META = "tcm_splits.json"
FORMAT_VERSION = 1


class SplitReport(NamedTuple):
    """How the punctuation splits of an index were obtained."""
    n_docs: int
    n_fallback: int            # documents left with stopword splits only
    fallback_docnos: list      # the first few of them


class QuerySequence(NamedTuple):
    """A query's in-vocabulary terms in text order and where collocations must stop."""
    text: str
    terms: list                # analysed in-vocabulary terms, in order, repeats kept
    term_ids: np.ndarray       # their ids, int64
    split: np.ndarray          # uint8: 1 after term i if a stopword, punctuation or unknown term follows
    unknown: list              # analysed terms absent from the index


def mark_punctuation(text: str) -> str:
    """``text`` with sentence punctuation, brackets and quotes replaced by `` qqsplitqq ``."""
    return PUNCT_RE.sub(f" {SPLIT_MARK} ", text)


def stopword_splits(stats) -> np.ndarray:
    """Split flags from Lucene positions: 1 after token i if the next token of its document is
    more than one position further (a stopword was removed there) or i ends its document.

    Returns ndarray of shape (n_tokens,), uint8.
    """
    pos = np.asarray(stats.positions, dtype=np.int64)
    doc_ptr = np.asarray(stats.doc_ptr, dtype=np.int64)
    split = np.zeros(len(pos), dtype=np.uint8)
    if len(pos):
        split[:-1] = np.diff(pos) > 1
    ends = doc_ptr[1:][np.diff(doc_ptr) > 0] - 1
    split[ends] = 1
    return split


def marked_terms(index, text: str) -> tuple[list[str], list[int]]:
    """Analyse ``text`` once with punctuation marked: (terms, flags), ``flags[i] = 1`` if a
    marker followed term i."""
    terms, flags = [], []
    for t in index.analyze(mark_punctuation(text)):
        if t == SPLIT_MARK:
            if flags:
                flags[-1] = 1
        else:
            terms.append(t)
            flags.append(0)
    return terms, flags


def compute_splits(index, progress: bool = True) -> tuple[np.ndarray, SplitReport]:
    """Stopword and punctuation split flags of every token of ``index`` (see the module doc)."""
    s = index.stats
    if SPLIT_MARK in s.term_index:
        raise ValueError(f"{index.path}: the marker term {SPLIT_MARK!r} occurs in the documents, so "
                         f"punctuation splits cannot be told apart; change retrieval.adapters.tcm_sequences.SPLIT_MARK")
    split = stopword_splits(s)
    doc_ptr, term_ids, terms = np.asarray(s.doc_ptr), np.asarray(s.term_ids), s.terms
    fallback = []
    for d in tqdm(range(s.n_docs), desc="punctuation splits", unit=" docs", disable=not progress,
                  mininterval=2):
        lo, hi = int(doc_ptr[d]), int(doc_ptr[d + 1])
        if lo == hi:
            continue
        got, flags = marked_terms(index, index.document(s.docnos[d])["contents"])
        if got == [terms[t] for t in term_ids[lo:hi]]:
            split[lo:hi] |= np.asarray(flags, dtype=np.uint8)
        else:
            fallback.append(s.docnos[d])
    release_heap()
    report = SplitReport(s.n_docs, len(fallback), fallback[:10])
    if fallback:
        warnings.warn(f"{index.path}: {len(fallback)} of {s.n_docs} documents analyse differently with "
                      f"punctuation marked (e.g. {', '.join(fallback[:3])}); they keep stopword splits "
                      f"only", stacklevel=2)
    return split, report


def index_splits(index, progress: bool = True) -> np.ndarray:
    """Split flags of every token of ``index`` (n_tokens,), uint8: read from the cache in
    ``<index>/topicir-stats/`` if it belongs to this index, computed and cached otherwise."""
    folder = index.path / STATS_DIR
    path, meta_path = folder / SPLITS_FILE, folder / SPLITS_META
    want = {"format": FORMAT_VERSION, "fingerprint": index.fingerprint, "pattern": PUNCT_RE.pattern,
            "marker": SPLIT_MARK}
    if path.is_file() and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if all(meta.get(k) == v for k, v in want.items()):
            split = np.load(path)
            if split.shape == (index.stats.n_tokens,):
                return split
        log.info("%s: split cache is stale (other index or pattern); recomputing", path)
    split, report = compute_splits(index, progress=progress)
    with atomic_open(path, "wb") as f:  # a file object keeps numpy from appending ".npy"
        np.save(f, split)
    meta = dict(want, n_docs=report.n_docs, n_fallback=report.n_fallback,
                fallback_docnos=report.fallback_docnos, n_splits=int(split.sum()))
    with atomic_open(meta_path, "w", encoding="utf-8") as f:
        f.write(json.dumps(meta, indent=1) + "\n")
    log.info("%s: %d splits over %d tokens, %d documents without punctuation splits", path,
             int(split.sum()), len(split), report.n_fallback)
    return split


def query_sequence(index, text: str) -> QuerySequence:
    """Analyse a query into in-vocabulary terms in order, with a split after a term wherever a
    stopword, punctuation or an out-of-vocabulary term follows it.

    Every whitespace-separated chunk (after punctuation marking) is analysed on its own: a chunk
    that yields no term is a stopword. If the chunks' terms do not add up to the analysis of the
    whole text, the whole-text terms are used with splits at unknown terms only (and a warning).
    """
    vocab = index.stats.term_index
    chunks = mark_punctuation(text).split()
    analysed, flags = [], []
    for chunk in chunks:
        got = [] if chunk == SPLIT_MARK else index.analyze(chunk)
        if not got:
            if flags:
                flags[-1] = 1
            continue
        analysed += got
        flags += [0] * len(got)
    plain = index.analyze(text)
    if analysed != plain:
        warnings.warn(f"query {text!r}: word-by-word analysis {analysed} differs from {plain}; "
                      f"stopword and punctuation splits are ignored for it", stacklevel=2)
        analysed, flags = plain, [0] * len(plain)
    terms, ids, split, unknown = [], [], [], []
    for t, f in zip(analysed, flags):
        if t not in vocab:
            unknown.append(t)
            if split:
                split[-1] = 1
            continue
        terms.append(t)
        ids.append(vocab[t])
        split.append(f)
    return QuerySequence(text, terms, np.asarray(ids, dtype=np.int64), np.asarray(split, dtype=np.uint8),
                         unknown)


class QueryCollocations(NamedTuple):
    """The multi-word collocations of a query's segmentation, with what QL needs to score them."""
    terms: list            # each collocation as a string of analysed terms
    term_ids: np.ndarray   # their term ids, concatenated, int64
    seg_ptr: np.ndarray    # collocation i is term_ids[seg_ptr[i]:seg_ptr[i + 1]], int64
    postings: list         # per collocation: (docs int32, tf int32) of its exact occurrences
    p_c: np.ndarray        # per collocation: P(c|C), float64


_SPLIT_CACHE: dict = {}


def _cached_splits(index) -> np.ndarray:
    key = (str(index.path), index.fingerprint)
    if key not in _SPLIT_CACHE:
        _SPLIT_CACHE.clear()
        _SPLIT_CACHE[key] = index_splits(index, progress=False)
    return _SPLIT_CACHE[key]


def collocation_postings(stats, split: np.ndarray, term_ids) -> tuple[np.ndarray, np.ndarray, int]:
    """Documents where ``term_ids`` occur as adjacent tokens with no split inside, their counts,
    and the collection count: (docs int32 ascending, tf int32, cf int). Only the documents that
    hold every term are read (the intersection of the terms' postings, rarest first)."""
    c = np.asarray(term_ids, dtype=np.int64)
    if len(c) == 0 or c.min() < 0 or c.max() >= stats.n_terms:
        raise ValueError(f"collocation term ids {c.tolist()} out of the index's {stats.n_terms} terms")
    ptr, post = np.asarray(stats.post_ptr), np.asarray(stats.post_doc)
    docs = None
    for w in sorted(set(c.tolist()), key=lambda w: ptr[w + 1] - ptr[w]):
        have = post[ptr[w]:ptr[w + 1]]
        docs = have if docs is None else np.intersect1d(docs, have, assume_unique=True)
        if len(docs) == 0:
            break
    tf = _sequence_counts(np.asarray(stats.doc_ptr), np.asarray(stats.term_ids), split, c,
                          docs.astype(np.int64))
    found = tf > 0
    return docs[found].astype(np.int32), tf[found], int(tf.sum())


@njit(cache=True)
def _sequence_counts(doc_ptr, tokens, split, c, docs):
    """Occurrences of the sequence ``c`` with no split inside, in each of ``docs``, int32."""
    M = len(c)
    out = np.zeros(len(docs), np.int32)
    for k in range(len(docs)):
        d = docs[k]
        for i in range(doc_ptr[d], doc_ptr[d + 1] - M + 1):
            if tokens[i] != c[0]:
                continue
            j = 1
            while j < M and tokens[i + j] == c[j] and split[i + j - 1] == 0:
                j += 1
            if j == M:
                out[k] += 1
    return out


def segment_query(index, model, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The query's term ids in order and the model's segmentation of them into collocations
    (``seg_ptr``, see ``TCM.segment``). For a model of an earlier state of a grown index
    (:class:`retrieval.core.extension.ExtendedModel`) the terms it never saw are left out."""
    seq = query_sequence(index, text)
    to_model = getattr(model, "to_model", None)  # a model of an earlier state of a grown index
    if to_model is None:
        return seq.term_ids, model.segment(seq.term_ids, seq.split)
    # in the model's term ids; a term it never saw is left out, with a split in its place
    mapped = to_model[seq.term_ids]
    known = mapped >= 0
    return seq.term_ids[known], model.model.segment(mapped[known], known_splits(seq.split, known))


def known_splits(split, known) -> np.ndarray:
    """Split flags of the tokens the model knows (``known``), the others left out: a token keeps
    its flag and gains one where a left-out token follows it, so that no collocation joins the
    tokens on either side of a left-out one. uint8, one per known token."""
    out = np.asarray(split).astype(bool)
    out[:-1] |= ~known[1:]
    return out[known].astype(np.uint8)


def query_collocations(index, model, text: str) -> QueryCollocations:
    """The multi-word collocations of the model's segmentation of a query, with their exact
    occurrences in the index. P(c|C) = cf(c) / n_tokens; a collocation that never occurs backs
    off to the product of its terms' P(w|C)."""
    ids, seg_ptr = segment_query(index, model, text)
    s = index.stats
    split = _cached_splits(index)
    terms, flat, ptr, postings, p_c = [], [], [0], [], []
    for a, b in zip(seg_ptr[:-1], seg_ptr[1:]):
        if b - a < 2:
            continue
        c = ids[a:b]
        docs, tf, cf = collocation_postings(s, split, c)
        terms.append(" ".join(s.terms[w] for w in c))
        flat.extend(c.tolist())
        ptr.append(ptr[-1] + len(c))
        postings.append((docs, tf))
        p_c.append(cf / s.n_tokens if cf else float(np.prod(s.p_c[c])))
    return QueryCollocations(terms, np.asarray(flat, dtype=np.int64), np.asarray(ptr, dtype=np.int64),
                             postings, np.asarray(p_c, dtype=np.float64))
