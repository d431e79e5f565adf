"""What the console reads and writes as text: query words found in a document, highlighted, cut
into snippets and wrapped (prompt_toolkit fragments: lists of (style, text) pairs); settings
typed as ``lam=0.7,mu=2000``; a ranked query's result."""
from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np

from ..core.scoring import Query
from ..core.trec import ScoredDoc

SNIPPET_TOKENS = 28
_WORD = re.compile(r"\w+(?:[.,'\u2019&-]\w+)*")
_SPACE = re.compile(r"\s+")

Fragments = list  # of (style, text) pairs: prompt_toolkit formatted text


class ConsoleError(ValueError):
    """A user mistake; the console shows the message and carries on."""



def match_words(text: str, terms, analyze) -> list[tuple[int, int, bool]]:
    """Spans ``(start, end, matches)`` of the words of ``text``; a word matches when one of the
    terms ``analyze(word)`` gives is in ``terms``.

    Porter stemming only rewrites a word's ending, so a word can only match a term whose first
    two letters it contains: other words are not analysed (each analysis is a JVM call).
    """
    prefixes = {t[:2] for t in terms}
    spans = []
    for m in _WORD.finditer(text):
        word = m.group(0).lower()
        hit = bool(terms) and any(p in word for p in prefixes) and any(t in terms for t in analyze(word))
        spans.append((m.start(), m.end(), hit))
    return spans


def highlight(text: str, spans, style: str = "class:hl", plain: str = "") -> Fragments:
    """``text`` as fragments, the matching spans in ``style``."""
    out, pos = [], 0
    for start, end, hit in spans:
        if hit:
            if start > pos:
                out.append((plain, text[pos:start]))
            out.append((style, text[start:end]))
            pos = end
    if pos < len(text):
        out.append((plain, text[pos:]))
    return out


def snippet_window(spans, width: int = SNIPPET_TOKENS) -> tuple[int, int]:
    """Word range ``[lo, hi)`` of at most ``width`` words holding the most distinct matches
    (then the most matches), starting a little before its first match."""
    n = len(spans)
    if n <= width:
        return 0, n
    hits = [i for i, s in enumerate(spans) if s[2]]
    if not hits:
        return 0, width
    best, best_key = 0, None
    for i in hits:
        lo = max(0, min(i - 3, n - width))
        inside = [j for j in hits if lo <= j < lo + width]
        key = (len(inside), -lo)
        if best_key is None or key > best_key:
            best, best_key = lo, key
    return best, best + width


def snippet(text: str, spans, width: int = SNIPPET_TOKENS) -> Fragments:
    """About ``width`` words of ``text`` around its densest cluster of matches, on one line."""
    if not spans:
        return []
    lo, hi = snippet_window(spans, width)
    frags = [("", "\u2026 ")] if lo > 0 else []
    pos = spans[lo][0]
    for start, end, hit in spans[lo:hi]:
        frags.append(("", _SPACE.sub(" ", text[pos:start])))
        frags.append(("class:hl" if hit else "", text[start:end]))
        pos = end
    if hi < len(spans):
        frags.append(("", " \u2026"))
    return [f for f in frags if f[1]]


def wrap(frags: Fragments, width: int, indent: str) -> Fragments:
    """Styled fragments as lines of at most ``width`` columns, each starting with ``indent``,
    broken at spaces only (the terminal's own wrap would break words and lose the indent)."""
    words: list[list[tuple[str, str]]] = [[]]  # runs of styled pieces between spaces
    for style, text in frags:
        for i, piece in enumerate(text.split(" ")):
            if i:
                words.append([])
            if piece:
                words[-1].append((style, piece))
    out: Fragments = [("", indent)]
    col = len(indent)
    for word in words:
        n = sum(len(t) for _, t in word)
        if not n:
            continue
        if col > len(indent) and col + 1 + n > width:
            out += [("", "\n" + indent)]
            col = len(indent)
        elif col > len(indent):
            out.append(("", " "))
            col += 1
        out += word
        col += n
    return out + [("", "\n")]


def to_plain(frags: Fragments, mark: bool = True) -> str:
    """Fragments as plain text; with ``mark``, highlighted words as ``*word*``."""
    return "".join(f"*{t}*" if mark and s == "class:hl" else t for s, t in frags)


# -- results and settings --------------------------------------------------------------


class Result(NamedTuple):
    """One ranked query."""
    qid: str
    text: str
    query: Query
    mu: float
    lam: float              # as used: 1 without a model
    model_name: str | None  # None when lam is 1
    model: object           # the topic model scored with, or None
    docs: np.ndarray        # rows of the top DEPTH docs, best first, int64
    scores: np.ndarray      # their scores, float64
    seconds: float
    expansion: object = None  # retrieval.core.feedback.Expansion of a feedback ranking

    def run(self, docnos) -> list[ScoredDoc]:
        return [ScoredDoc(self.qid, docnos[d], float(s)) for d, s in zip(self.docs, self.scores)]


def settings_label(mu: float, lam: float, model_name: str | None) -> str:
    return f"mu={mu:g} lam={lam:g} {model_name}" if model_name and lam < 1 else f"mu={mu:g} QL"


def _parse_float(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConsoleError(f"{name} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise ConsoleError(f"{name} must be finite, got {text!r}")
    return value


def check_lam(text: str) -> float:
    lam = _parse_float(text, "lam")
    if not 0.0 <= lam <= 1.0:
        raise ConsoleError(f"lam must be in [0, 1] (the weight of QL against the topic model), got {text!r}")
    return lam


def check_mu(text: str) -> float:
    mu = _parse_float(text, "mu")
    if not mu > 0:
        raise ConsoleError(f"mu must be > 0 (the Dirichlet prior; the papers use 1000), got {text!r}")
    return mu


def parse_settings(spec: str) -> dict[str, float]:
    """``"lam=0.7,mu=2000"`` -> ``{"lam": 0.7, "mu": 2000.0}``."""
    out = {}
    for part in filter(None, spec.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in ("lam", "mu"):
            raise ConsoleError(f"expected settings like lam=0.7 or mu=2000,lam=0.5, got {spec!r}")
        out[key] = check_lam(value) if key == "lam" else check_mu(value)
    if not out:
        raise ConsoleError(f"expected settings like lam=0.7 or mu=2000,lam=0.5, got {spec!r}")
    return out
