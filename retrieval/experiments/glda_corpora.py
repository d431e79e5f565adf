"""The corpora of the gLDA experiment, "stemmed" and "raw" as in Bart (2011), cached as .npz.

* stemmed: the index's analyzer (Anserini's DefaultEnglishAnalyzer: Porter stemming, Lucene
  stopwords). Shared collections: the index's own token stream; 20 Newsgroups (no index): the
  same analyzer applied to every post's body.
* raw: lower-cased words ``[a-z][a-z0-9]+`` with nothing removed (no stemming, no stopwords).

Every corpus keeps the terms of document frequency >= 2 (as ``topicir bench lda``); 20
Newsgroups is a seeded random subset of ``n_docs`` posts of the bydate tarball (train + test).
A corpus is built once (the stemmed ones need the JVM) and read from ``cache`` afterwards, so the
sampling runs can go to a machine without Java.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from models.common.corpus import make_corpus

RAW_RE = re.compile(r"[a-z][a-z0-9]+")
NEWSGROUPS = "20news/20news-bydate.tar.gz"


def _to_corpus(docs, fingerprint, min_df=2):
    """Token lists -> (Corpus, vocab) with the terms of df >= min_df, ids by first occurrence."""
    df = {}
    for toks in docs:
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    ids, vocab, lens, flat = {}, [], [], []
    for toks in docs:
        kept = [t for t in toks if df[t] >= min_df]
        for t in kept:
            if t not in ids:
                ids[t] = len(vocab)
                vocab.append(t)
            flat.append(ids[t])
        lens.append(len(kept))
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    return make_corpus(doc_ptr, np.array(flat, dtype=np.int32), n_terms=len(vocab),
                       fingerprint=fingerprint), vocab


def _newsgroups_texts(data: Path, n_docs: int | None, seed: int = 0):
    from ..datasets.newsgroups import read_newsgroups

    texts = [p.text for p in read_newsgroups(data / NEWSGROUPS)]
    if n_docs is not None and n_docs < len(texts):
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), n_docs, replace=False))
        texts = [texts[i] for i in keep]
    return texts


def _collection_texts(data: Path, name: str):
    from ..core.sources import iter_docs

    return [f"{d.title}\n{d.text}" for d in iter_docs([data / name / "docs"])]


def _analyzed(texts):
    from ..core.jvm import jclass

    analyzer = jclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance()
    utils = jclass("io.anserini.analysis.AnalyzerUtils")
    out = []
    for text in texts:  # as Index.analyze: the Java list's "[a, b]" form
        joined = utils.analyze(analyzer, text).toString() if text.strip() else "[]"
        out.append(joined[1:-1].split(", ") if len(joined) > 2 else [])
    return out


def build(data: Path, name: str, variant: str, n_docs: int | None = None):
    """(Corpus, vocab) of ``name`` ("20news" or a shared collection) in ``variant``."""
    if variant not in ("stemmed", "raw"):
        raise ValueError(f"variant must be 'stemmed' or 'raw', got {variant!r}")
    tag = f"{name}-{variant}" + (f"-{n_docs}" if name == "20news" and n_docs else "")
    if name == "20news":
        texts = _newsgroups_texts(data, n_docs)
        docs = _analyzed(texts) if variant == "stemmed" else [RAW_RE.findall(t.lower()) for t in texts]
        return _to_corpus(docs, tag)
    if variant == "raw":
        return _to_corpus([RAW_RE.findall(t.lower()) for t in _collection_texts(data, name)], tag)
    from ..core.modelfiles import index_corpus
    from .regressions import ensure_index

    index = ensure_index(data, name, Path("indexes"))
    corpus = index_corpus(index)
    terms = index.stats.terms
    docs = [[terms[t] for t in corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]]
            for d in range(corpus.n_docs)]
    return _to_corpus(docs, tag)


def load(data: Path, name: str, variant: str, cache: Path, n_docs: int | None = None):
    """The cached corpus (built on first use): (Corpus, vocab list)."""
    tag = f"{name}-{variant}" + (f"-{n_docs}" if name == "20news" and n_docs else "")
    path = Path(cache) / f"{tag}.npz"
    if not path.exists():
        corpus, vocab = build(Path(data), name, variant, n_docs)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, doc_ptr=corpus.doc_ptr, term_ids=corpus.term_ids,
                            vocab=np.array(vocab, dtype=object).astype(str))
    f = np.load(path)
    vocab = [str(v) for v in f["vocab"]]
    return make_corpus(f["doc_ptr"], f["term_ids"], n_terms=len(vocab), fingerprint=tag), vocab
