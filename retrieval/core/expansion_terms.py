"""Which terms may expand a query in pseudo-relevance feedback.

Lucene's English analyzer removes only 33 stopwords, so the terms most of the top documents
share are function words ("from", "who", "hi" for "his"), and a relevance model of those
documents is led by them. As in Indri's and Anserini's practice, expansion terms are drawn only
from the rest of the vocabulary:

- not a word of a standard stop list: the Glasgow IR group's list (van Rijsbergen's, 318 words;
  scikit-learn ships it as ``ENGLISH_STOP_WORDS``), analysed as the index analyses text, so that
  "his" is excluded as the stem "hi" that documents hold;
- in at most ``max_df`` of the documents (Anserini's RM3 uses 10% on newswire): a word most
  documents hold says nothing about the query's topic;
- 2 to 20 letters or digits, as Anserini's RM3 requires.

The original query's terms are never removed by this: they keep their weight in the expanded
query whatever the filter says of them.
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

_WORD = re.compile(r"[a-z0-9]{2,20}")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """The stop list, unanalysed."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def _stop_ids(index) -> np.ndarray:
    """Term ids of the stop list's words as the index analyses them (sorted int64)."""
    analysed = set(index.analyze(" ".join(sorted(stop_words()))))
    known = index.stats.term_index
    return np.array(sorted(known[t] for t in analysed if t in known), dtype=np.int64)


def allowed(index, max_df: float) -> np.ndarray:
    """Which term ids may expand a query (read-only bool per term id): shaped as a word, not a
    stopword, in at most ``max_df`` of the documents (a fraction in (0, 1]; 1 keeps every
    frequency). Computed once per index and ``max_df``."""
    cache = index.__dict__.setdefault("_expansion_allowed", {})
    if max_df not in cache:
        stats = index.stats
        ok = np.fromiter((_WORD.fullmatch(t) is not None for t in stats.terms), dtype=bool, count=stats.n_terms)
        ok[_stop_ids(index)] = False
        if max_df < 1.0:
            ok &= np.asarray(stats.df) <= max_df * stats.n_docs
        ok.flags.writeable = False
        cache[max_df] = ok
    return cache[max_df]
