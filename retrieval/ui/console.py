"""Interactive query console: ``topicir console --index DIR [--model DIR]``.

Type a query and every document of the index is ranked through the one ranking path
``topicir run`` uses (:mod:`retrieval.core.ranking`); ``#51`` runs topic 51 of ``--topics``. Lines starting with ``:`` or ``/``
are commands (``:help`` lists them). All logic lives in :class:`Session`, whose commands return
formatted text (a list of ``(style, text)`` fragments) and are tested without a terminal; the
prompt_toolkit loop in :func:`run_console` only reads lines and prints what comes back.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..core.plugins import hook
from ..core.ranking import DEPTH, prepare
from ..experiments.compare import format_table
from ..core.scoring import LAM, MU, Query, explain, top_k
from ..core.stats import CollectionStats
from ..core.trec import TOPIC_FIELDS, Qrel, ScoredDoc, Topic, topic_query, write_run

HITS = 10                 # hits shown per query; results keep DEPTH for :write
SNIPPET_TOKENS = 28
RUN_TAG = "topicir-console"

# A word of stored text: word characters, joined by the punctuation StandardTokenizer keeps
# inside tokens ("3,000", "U.S", "railway's", "non-normal"); each is analysed as a whole.
_WORD = re.compile(r"\w+(?:[.,'\u2019&-]\w+)*")
_SPACE = re.compile(r"\s+")

HELP = """\
Type a query to rank every document; #QID runs topic QID of --topics (in the current field).
  :why N            hit N's score per query term: QL part, topic-model part, log P(w|d)
  :doc N|DOCNO      a document in full, query terms highlighted (=N: the DOCNO N)
  :topic K          top words of topic K (needs a model)
  :lam X  :mu X     QL weight in [0, 1] / Dirichlet prior > 0
  :model DIR|off    load a topic model / go back to plain QL
  :field F          field of #QID queries: title, desc, narr, title+desc
  :topics FILE      load topics;   :qrels FILE   mark relevant hits, show AP of #QID queries
  :hits N           hits shown (each result keeps 1000 for :write)
  :compare A B [QUERY]   two settings side by side, e.g. :compare lam=0.7 lam=1 airbus subsidies
                         (A, B: lam=X and/or mu=X joined by commas; no QUERY: the last query)
  :write FILE       the session's results as a TREC run (latest result per query id),
                    the queries beside it as FILE.queries.tsv (topicir run --topics reads it)
  :history  :set  :help  :quit       Ctrl-C cancels a query, Ctrl-D leaves."""

COMMANDS = ("why", "doc", "topic", "lam", "mu", "model", "field", "topics", "qrels", "hits",
            "compare", "write", "history", "set", "help", "quit")
_ALIASES = {"q": "quit", "exit": "quit", "h": "help", "?": "help", "settings": "set", "k": "hits"}
_PATH_ARGS = ("model", "topics", "qrels", "write")

Fragments = list  # of (style, text) pairs: prompt_toolkit formatted text


class ConsoleError(ValueError):
    """A user mistake; the console shows the message and carries on."""


# -- the per-term score breakdown (the slow, obvious twin of Scorer.score for one doc) -------


# -- highlighting and snippets ---------------------------------------------------------------


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


# -- the session -------------------------------------------------------------------------------


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


def _load_model(path: str, index):
    from ..core.modelfiles import load_model

    if not Path(path).exists():
        raise ConsoleError(f"{path}: no such model; train one with `topicir train`")
    return load_model(path, index)


class Session:
    """State of a console session and one method per command.

    Parameters
    ----------
    index : Index, or anything with ``stats``, ``analyze(text)``, ``document(docno)`` and ``name``
    mu, lam : float, scoring settings (lam only matters with a model)
    model : topic model (``p_w_d``, ``doc_topics``, ``topic_words``, ``n_topics``) or None
    model_name : str, shown in settings; defaults to the model's class name
    field : str, the topic field that ``#QID`` queries use
    topics : list of Topic or None; qrels : list of Qrel or None
    hits : int, hits shown per query
    """

    def __init__(self, index, *, mu: float = MU, lam: float = LAM, model=None, model_name: str | None = None,
                 field: str = "title", topics: list[Topic] | None = None, qrels: list[Qrel] | None = None,
                 hits: int = HITS, depth: int = DEPTH):
        self.index = index
        self.stats: CollectionStats = index.stats
        self.mu = check_mu(str(mu))
        self.lam = check_lam(str(lam))
        self.model = model
        self.model_name = (model_name or type(model).__name__) if model is not None else None
        if field not in TOPIC_FIELDS:
            raise ConsoleError(f"field must be one of {', '.join(TOPIC_FIELDS)}, got {field!r}")
        self.field = field
        self.topics = {t.qid: t for t in topics or []}
        self.qrels = self._group_qrels(qrels or [])
        self.hits = hits
        self.depth = depth
        self.results: list[Result] = []
        self.last: Result | None = None
        self.done = False
        self._n_free = 0
        self._stems: dict[str, list[str]] = {}

    # -- helpers --------------------------------------------------------------------------

    @property
    def effective_lam(self) -> float:
        return self.lam if self.model is not None else 1.0

    def settings(self) -> str:
        s = settings_label(self.mu, self.effective_lam, self.model_name)
        if self.model is None and self.lam != 1.0:
            s += f" (lam={self.lam:g} waits for a model)"
        elif self.model is not None and self.lam == 1.0:
            s += f" (model {self.model_name} loaded, lam=1 ignores it)"
        return s

    def toolbar(self) -> str:
        t = f" {self.index.name}: {self.stats.n_docs:,} docs | {self.settings()} | hits {self.hits}"
        if self.topics:
            t += f" | #QID field {self.field}"
        return t + " | :help  Ctrl-D quits"

    @staticmethod
    def _group_qrels(qrels) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for q in qrels:
            out.setdefault(q.qid, {})[q.docno] = q.rel
        return out

    def analyze_word(self, word: str) -> list[str]:
        terms = self._stems.get(word)
        if terms is None:
            terms = self._stems[word] = self.index.analyze(word)
        return terms

    def _doc_row(self, arg: str) -> int:
        """A document by hit number N of the last query, else by DOCNO (``=N``: DOCNO N)."""
        if arg.isdigit() and self.last is not None and 1 <= int(arg) <= len(self.last.docs):
            return int(self.last.docs[int(arg) - 1])
        docno = arg[1:] if arg.startswith("=") else arg
        doc = self.stats.doc_index.get(docno)
        if doc is None:
            if arg.isdigit() and self.last is not None:
                raise ConsoleError(f"no hit {arg} (the last query has {len(self.last.docs)}) "
                                   f"and no document {arg!r} in {self.index.name}")
            lower = docno.lower()
            close = next((d for d in self.stats.docnos if d.lower() == lower), None)
            hint = f"; did you mean {close}?" if close else "; give a DOCNO or the number of a hit"
            raise ConsoleError(f"unknown document {docno!r} in {self.index.name}{hint}")
        return doc

    def _resolve(self, text: str) -> tuple[str | None, str]:
        """(qid, query text) of a typed query: ``#QID`` looks the topic up; free text has no qid yet."""
        text = text.strip()
        if not text:
            raise ConsoleError("empty query: type some words (or :help)")
        if not (text.startswith("#") and len(text.split()) == 1 and len(text) > 1):
            return None, text
        qid = text[1:]
        qid = str(int(qid)) if qid.isascii() and qid.isdigit() else qid  # as trec.read_topics does
        if not self.topics:
            raise ConsoleError(f"{text}: no topics loaded; start with --topics FILE or use :topics FILE")
        topic = self.topics.get(qid)
        if topic is None:
            ids = list(self.topics)
            raise ConsoleError(f"no topic {qid!r}; the {len(ids)} topics are {ids[0]} .. {ids[-1]}")
        query = topic_query(topic, self.field)
        if not query.strip():
            raise ConsoleError(f"topic {qid} has an empty {self.field} field; try :field title")
        return qid, query

    def _next_qid(self) -> str:
        """``q1``, ``q2``, ... for free-text queries, skipping ids of loaded topics."""
        while True:
            self._n_free += 1
            if f"q{self._n_free}" not in self.topics:
                return f"q{self._n_free}"

    def rank(self, text: str, qid: str = "", mu: float | None = None, lam: float | None = None) -> Result:
        """Score every document for ``text``; ConsoleError for a query without indexed terms."""
        mu = self.mu if mu is None else mu
        lam = self.lam if lam is None else lam
        start = time.perf_counter()
        lam = lam if self.model is not None else 1.0
        prepared = prepare(self.index, text, self.model if lam < 1 else None, warn=False)
        query = prepared.query
        if len(query.term_ids) == 0:
            if not query.terms:
                raise ConsoleError(f"{text!r} has no indexable words (only stopwords or punctuation)")
            raise ConsoleError(f"no term of {text!r} is in {self.index.name} "
                               f"(analysed: {' '.join(query.terms)})")
        scores = prepared.scores(mu, lam)
        docs = top_k(scores, self.depth)
        mixed = lam < 1
        return Result(qid, text, query, mu, lam, self.model_name if mixed else None,
                      self.model if mixed else None, docs, scores[docs], time.perf_counter() - start)

    def _judged(self, result: Result) -> dict[str, int] | None:
        judged = self.qrels.get(result.qid)
        return judged if judged and any(r > 0 for r in judged.values()) else None

    def _measures(self, result: Result) -> str:
        judged = self._judged(result)
        if judged is None:
            return ""
        from ..core.evaluate import per_topic

        qrels = [Qrel(result.qid, d, r) for d, r in judged.items()]
        values = per_topic(result.run(self.stats.docnos), qrels, ("AP", "P@10"))
        n_rel = sum(r > 0 for r in judged.values())
        return (f"AP {values['AP'][result.qid]:.4f}  P@10 {values['P@10'][result.qid]:.2f}"
                f"  ({n_rel} relevant)")

    def _headline(self, doc: dict) -> str:
        title = " ".join((doc.get("title") or "").split())
        if not title:
            title = " ".join((doc.get("contents") or "").strip().split("\n", 1)[0].split())
        return title if len(title) <= 100 else title[:99] + "\u2026"

    @staticmethod
    def _body(doc: dict) -> str:
        contents, title = doc.get("contents") or "", (doc.get("title") or "").strip()
        return contents[len(title):] if title and contents.startswith(title) else contents

    # -- commands -------------------------------------------------------------------------

    def execute(self, line: str) -> Fragments:
        """Run one input line (a query or a command) and return what to print."""
        line = line.strip()
        try:
            if line[:1] in (":", "/") and len(line) > 1 and not line[1:2].isspace():
                name, _, arg = line[1:].partition(" ")
                name = _ALIASES.get(name, name)
                if name not in COMMANDS:
                    near = [c for c in COMMANDS if c.startswith(name[:2])]
                    hint = f"did you mean :{near[0]}?" if near else ":help lists the commands"
                    raise ConsoleError(f"unknown command :{name}; {hint}")
                return getattr(self, f"cmd_{name}")(arg.strip())
            return self.search(line)
        except ConsoleError as exc:
            return [("class:error", f"{exc}\n")]
        except (ValueError, KeyError, OSError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            return [("class:error", f"error: {msg}\n")]

    def search(self, text: str) -> Fragments:
        qid, query_text = self._resolve(text)
        result = self.rank(query_text)
        result = result._replace(qid=qid or self._next_qid())
        self.results.append(result)
        self.last = result
        return self.format_result(result)

    def format_result(self, result: Result) -> Fragments:
        q = result.query
        terms = set(q.terms)
        settings = settings_label(result.mu, result.lam, result.model_name)
        out: Fragments = [("class:dim", f"{result.qid}: "), ("class:query", result.text),
                          ("class:dim", f"  [{' '.join(q.terms)}]  {settings}, {self.stats.n_docs:,} docs "
                                        f"in {1000 * result.seconds:.0f} ms\n")]
        if q.unknown:
            out.append(("class:warn", f"not in the index (left out): {' '.join(q.unknown)}\n"))
        measures = self._measures(result)
        if measures:
            out.append(("class:dim", measures + "\n"))
        judged = self._judged(result) or {}
        width = max((len(self.stats.docnos[d]) for d in result.docs[:self.hits]), default=8)
        for rank, (d, score) in enumerate(zip(result.docs[:self.hits], result.scores), 1):
            docno = self.stats.docnos[d]
            doc = self.index.document(docno)
            mark = ("class:rel", "R ") if judged.get(docno, 0) > 0 else ("", "  ")
            out += [("class:rank", f"{rank:3d} "), mark, ("class:docno", docno.ljust(width)),
                    ("class:score", f" {score:10.4f}  "), ("class:title", self._headline(doc)), ("", "\n")]
            body = self._body(doc)
            frags = snippet(body, match_words(body, terms, self.analyze_word))
            if frags:
                out += wrap(frags, shutil.get_terminal_size().columns, "      ")
        if len(result.docs) > self.hits:
            out.append(("class:dim", f"({len(result.docs)} kept for :write; :why N explains hit N, :doc N shows it)\n"))
        return out

    @staticmethod
    def _p_tm(result: Result, doc: int) -> np.ndarray | None:
        if result.model is None:
            return None
        return np.asarray(result.model.p_w_d(result.query.term_ids), dtype=np.float64)[doc]

    def cmd_why(self, arg: str) -> Fragments:
        if self.last is None:
            raise ConsoleError(":why needs a query first")
        if not arg:
            raise ConsoleError(":why N explains hit N of the last query (or :why DOCNO)")
        r = self.last
        doc = self._doc_row(arg)
        rows = explain(self.stats, r.query, doc, r.mu, r.lam, self._p_tm(r, doc))
        total = sum(row.score for row in rows)
        where = np.flatnonzero(r.docs == doc)
        rank = f"hit {where[0] + 1}" if len(where) else "not in the top " + str(len(r.docs))
        mixed = r.lam < 1
        table = []
        for row in rows:
            cells = {"term": row.term, "qtf": f"{row.weight:g}", "tf": str(row.tf), "P_QL": f"{row.p_ql:.4e}"}
            if mixed:
                share = r.lam * row.p_ql / row.p
                cells |= {"P_TM": f"{row.p_tm:.4e}", f"{r.lam:g}*P_QL": f"{r.lam * row.p_ql:.4e}",
                          f"{1 - r.lam:g}*P_TM": f"{(1 - r.lam) * row.p_tm:.4e}", "QL share": f"{100 * share:.0f}%",
                          "P(w|d)": f"{row.p:.4e}"}
            cells |= {"qtf*log P": f"{row.score:.4f}"}
            table.append(cells)
        sum_row = {k: "" for k in table[0]}
        sum_row["term"], sum_row["qtf*log P"] = "total", f"{total:.4f}"
        table.append(sum_row)
        docno = self.stats.docnos[doc]
        head = (f"{docno} ({rank}) for {r.qid} {r.text!r}: |d| = {int(self.stats.doc_len[doc])} tokens, "
                f"{settings_label(r.mu, r.lam, r.model_name)}\n")
        formula = ("P(w|d) = lam*P_QL + (1-lam)*P_TM,  P_QL = (tf + mu*P(w|C)) / (|d| + mu)\n" if mixed
                   else "P(w|d) = P_QL = (tf + mu*P(w|C)) / (|d| + mu)\n")
        out = [("class:title", head), ("class:dim", formula), ("", format_table(table) + "\n")]
        if len(where):
            ranked_score = float(r.scores[where[0]])
            out.append(("class:dim", f"score in the ranking: {ranked_score:.4f}\n"))
            if abs(ranked_score - total) > 1e-9 * max(1.0, abs(total)):
                out.append(("class:dim", f"(the model's extra query parts, e.g. collocations, add "
                                         f"{ranked_score - total:+.4f})\n"))
        if self.model is not None:
            out += self._doc_topics(doc)
        return out

    def _topic_text(self, k: int, words: int) -> str:
        lines = hook(self.model.kind, "topic_lines")  # e.g. TCM: a topic is a list of collocations
        if lines is not None:
            return " / ".join(lines(self.model, self.stats.terms, k, words))
        return " ".join(self.stats.terms[w] for w in self.model.topic_words(k, top=words)[0])

    def _doc_topics(self, doc: int, top: int = 3, words: int = 8) -> Fragments:
        topics, probs = self.model.doc_topics(doc, top=top)
        out = [("class:dim", f"top topics of {self.stats.docnos[doc]} ({self.model_name}):\n")]
        for k, p in zip(topics, probs):
            out.append(("", f"  topic {int(k):4d}  {p:.3f}  {self._topic_text(int(k), words)}\n"))
        return out

    def cmd_doc(self, arg: str) -> Fragments:
        if not arg:
            raise ConsoleError(":doc N shows hit N of the last query; :doc DOCNO any document")
        doc = self._doc_row(arg)
        docno = self.stats.docnos[doc]
        stored = self.index.document(docno)
        terms = set(self.last.query.terms) if self.last else set()
        body = stored.get("contents") or ""
        out = [("class:docno", docno), ("class:dim", f"  ({int(self.stats.doc_len[doc])} tokens indexed)\n")]
        title = (stored.get("title") or "").strip()
        if title:
            out += [("class:title", title), ("", "\n")]
            body = self._body(stored).lstrip("\n")
        out += highlight(body, match_words(body, terms, self.analyze_word))
        out.append(("", "\n"))
        if self.model is not None:
            out += self._doc_topics(doc)
        return out

    def cmd_topic(self, arg: str) -> Fragments:
        if self.model is None:
            raise ConsoleError(":topic needs a topic model; load one with :model DIR")
        n = int(self.model.n_topics)
        try:
            k = int(arg)
        except ValueError:
            raise ConsoleError(f":topic K takes a topic number in [0, {n}), got {arg!r}") from None
        if not 0 <= k < n:
            raise ConsoleError(f"topic must be in [0, {n}), got {k}")
        if hook(self.model.kind, "topic_lines") is not None:
            return [("class:title", f"topic {k} of {n} ({self.model_name})\n"), ("", self._topic_text(k, 20) + "\n")]
        term_ids, probs = self.model.topic_words(k, top=20)
        rows = [{"term": self.stats.terms[w], "P(w|topic)": f"{p:.4f}"} for w, p in zip(term_ids, probs)]
        return [("class:title", f"topic {k} of {n} ({self.model_name})\n"), ("", format_table(rows) + "\n")]

    def cmd_lam(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"lam = {self.lam:g}\n")]
        self.lam = check_lam(arg)
        note = "" if self.model is not None or self.lam == 1 else " (no model loaded: plain QL until :model DIR)"
        return [("", f"lam = {self.lam:g}{note}\n")]

    def cmd_mu(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"mu = {self.mu:g}\n")]
        self.mu = check_mu(arg)
        return [("", f"mu = {self.mu:g}\n")]

    def cmd_model(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"model: {self.model_name or 'none (plain QL)'}\n")]
        if arg.lower() in ("off", "none", "ql"):
            self.model, self.model_name = None, None
            return [("", "model off: plain QL\n")]
        start = time.perf_counter()
        model = _load_model(arg, self.index)
        self.model, self.model_name = model, Path(arg).stem  # as topicir run names runs
        return [("", f"model {self.model_name}: {int(self.model.n_topics)} topics, loaded in "
                     f"{time.perf_counter() - start:.1f} s; {self.settings()}\n")]

    def cmd_field(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"field = {self.field} (of #QID queries)\n")]
        if arg not in TOPIC_FIELDS:
            raise ConsoleError(f"field must be one of {', '.join(TOPIC_FIELDS)}, got {arg!r}")
        self.field = arg
        note = "" if self.topics else " (load topics with :topics FILE to use #QID)"
        return [("", f"field = {arg}{note}\n")]

    def cmd_topics(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"{len(self.topics)} topics loaded\n")]
        from ..core.sources import load_topics

        self.topics = {t.qid: t for t in load_topics(arg)}
        ids = list(self.topics)
        return [("", f"{len(ids)} topics from {arg} ({ids[0]} .. {ids[-1]}); #{ids[0]} runs the first\n")]

    def cmd_qrels(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"qrels for {len(self.qrels)} topics\n")]
        from ..core.sources import load_qrels

        self.qrels = self._group_qrels(load_qrels(arg))
        return [("", f"qrels for {len(self.qrels)} topics from {arg}\n")]

    def cmd_hits(self, arg: str) -> Fragments:
        if not arg:
            return [("", f"hits = {self.hits}\n")]
        if not arg.isdigit() or not 1 <= int(arg) <= self.depth:
            raise ConsoleError(f"hits must be a whole number in [1, {self.depth}], got {arg!r}")
        self.hits = int(arg)
        return [("", f"hits = {self.hits}\n")]

    def cmd_compare(self, arg: str) -> Fragments:
        parts = arg.split(None, 2)
        if len(parts) < 2 or "=" not in parts[0] or "=" not in parts[1]:
            raise ConsoleError("usage: :compare lam=0.7 lam=1 [QUERY]  (settings: lam=X and/or mu=X, joined by ',')")
        a, b = parse_settings(parts[0]), parse_settings(parts[1])
        if len(parts) == 3:
            qid, text = self._resolve(parts[2])
        elif self.last is not None:
            qid, text = self.last.qid, self.last.text
        else:
            raise ConsoleError(":compare needs a QUERY (or a query before it)")
        ra = self.rank(text, qid or "", a.get("mu", self.mu), a.get("lam", self.lam))
        rb = self.rank(text, qid or "", b.get("mu", self.mu), b.get("lam", self.lam))
        return self.format_compare(ra, rb)

    def format_compare(self, ra: Result, rb: Result) -> Fragments:
        docnos = self.stats.docnos
        n = self.hits
        rank_a = {int(d): i for i, d in enumerate(ra.docs)}
        judged = self._judged(ra) or {}
        la, lb = settings_label(ra.mu, ra.lam, ra.model_name), settings_label(rb.mu, rb.lam, rb.model_name)
        docw = max(len(docnos[d]) for d in np.concatenate([ra.docs[:n], rb.docs[:n]]))
        col = max(docw + 14, len(la) + 3)  # "R " + docno + score, or the header
        out: Fragments = [("class:query", ra.text), ("class:dim", f"  [{' '.join(ra.query.terms)}]\n")]
        if self.model is None and ra.mu == rb.mu:
            out.append(("class:warn", "no model loaded: lam has no effect, both sides are the same QL ranking\n"))
        out.append(("class:title", f"{'':5}{('A: ' + la).ljust(col)}   B: {lb}\n"))

        def cell(d: int, score: float) -> str:
            return f"{'R' if judged.get(docnos[d], 0) > 0 else ' '} {docnos[d].ljust(docw)} {score:10.4f}"

        for i in range(min(n, len(ra.docs))):
            da, db = int(ra.docs[i]), int(rb.docs[i])
            if db in rank_a:
                move = rank_a[db] - i
                delta = "=" if move == 0 else (f"\u2191{move}" if move > 0 else f"\u2193{-move}")
            else:
                delta = "new"
            out += [("class:rank", f"{i + 1:3d}  "), ("", cell(da, ra.scores[i]).ljust(col) + "   "),
                    ("class:docno" if delta == "=" else "class:changed", cell(db, rb.scores[i])),
                    ("class:dim", f"  {delta}\n")]
        overlap = len(set(ra.docs[:n].tolist()) & set(rb.docs[:n].tolist()))
        summary = f"top {n} overlap {overlap}/{min(n, len(ra.docs))}"
        ma, mb = self._measures(ra), self._measures(rb)
        if ma:
            summary += f";  A: {ma};  B: {mb}"
        out.append(("class:dim", summary + "  (B's arrows: move against A)\n"))
        return out

    def cmd_write(self, arg: str) -> Fragments:
        if not arg:
            raise ConsoleError(":write FILE writes the session's results as a TREC run")
        if not self.results:
            raise ConsoleError("nothing to write yet: run a query first")
        latest = {r.qid: r for r in self.results}  # a re-run query id keeps its latest result
        path = Path(arg).expanduser()
        if path.parent != Path() and not path.parent.is_dir():
            raise ConsoleError(f"{path.parent}: no such directory")
        run = [hit for r in latest.values() for hit in r.run(self.stats.docnos)]
        write_run(path, run, tag=RUN_TAG, depth=self.depth)
        queries = Path(f"{path}.queries.tsv")
        # TSV topics (qid<TAB>query), as trec.read_topics reads them.
        queries.write_text("".join(f"{r.qid}\t{' '.join(r.text.split())}\n" for r in latest.values()), encoding="utf-8")
        settings = sorted({settings_label(r.mu, r.lam, r.model_name) for r in latest.values()})
        dropped = len(self.results) - len(latest)
        note = f"; {dropped} earlier result(s) of re-run queries left out" if dropped else ""
        return [("", f"wrote {len(latest)} queries, {len(run)} lines to {path} and {queries.name} "
                     f"({'; '.join(settings)}){note}\n")]

    def cmd_history(self, arg: str) -> Fragments:
        if not self.results:
            return [("class:dim", "no queries yet\n")]
        rows = [(r.qid, settings_label(r.mu, r.lam, r.model_name), self.stats.docnos[r.docs[0]],
                 f"{1000 * r.seconds:.0f} ms", r.text) for r in self.results]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) if i != 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                 + "  " + row[4] for row in rows]
        return [("", "\n".join(lines) + "\n")]

    def cmd_set(self, arg: str) -> Fragments:
        lines = [f"index  {self.index.name} ({self.stats.n_docs:,} docs, {self.stats.n_terms:,} terms)",
                 f"mu     {self.mu:g}", f"lam    {self.lam:g}", f"model  {self.model_name or 'none (plain QL)'}",
                 f"field  {self.field} ({len(self.topics)} topics loaded)", f"qrels  {len(self.qrels)} topics",
                 f"hits   {self.hits} shown, {self.depth} kept", f"now    {self.settings()}"]
        return [("", "\n".join(lines) + "\n")]

    def cmd_help(self, arg: str) -> Fragments:
        return [("", HELP + "\n")]

    def cmd_quit(self, arg: str) -> Fragments:
        self.done = True
        return []

    def completions(self, command: str) -> list[str]:
        """Candidate arguments of ``command`` (besides file paths)."""
        if command == "field":
            return list(TOPIC_FIELDS)
        if command == "compare":
            return ["lam=", "mu="]
        if command in ("why", "doc") and self.last is not None:
            return [self.stats.docnos[d] for d in self.last.docs[:self.hits]]
        if command == "model":
            return ["off"]
        return []


# -- the terminal loop ---------------------------------------------------------------------

STYLE = {
    "hl": "bold fg:ansiyellow", "error": "fg:ansired bold", "warn": "fg:ansiyellow", "dim": "fg:ansibrightblack",
    "rank": "fg:ansibrightblack", "docno": "fg:ansicyan", "score": "", "title": "bold", "query": "bold",
    "rel": "fg:ansigreen bold", "changed": "fg:ansimagenta", "bottom-toolbar": "noreverse bg:ansiblack fg:ansiwhite",
}


def history_path() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "topicir" / "console_history"


def open_session(index_path, *, model=None, mu: float = MU, lam: float = LAM, field: str = "title",
                 topics=None, qrels=None, hits: int = HITS) -> Session:
    """Open the index, load the model and warm up the JVM and the scorer, so the first query is fast."""
    from ..core.index import Index

    index = Index(index_path)
    index.stats.doc_index  # built once here rather than during the first :doc
    index.stats.term_index
    model_obj = _load_model(model, index) if model else None
    loaded_topics = loaded_qrels = None
    if topics:
        from ..core.sources import load_topics

        loaded_topics = load_topics(topics)
    if qrels:
        from ..core.sources import load_qrels

        loaded_qrels = load_qrels(qrels)
    session = Session(index, mu=mu, lam=lam, model=model_obj, model_name=Path(model).stem if model else None,
                      field=field, topics=loaded_topics, qrels=loaded_qrels, hits=hits)
    index.analyze("warm up")  # starts the JVM
    if index.stats.n_docs:
        index.document(index.stats.docnos[0])  # opens the Lucene reader
    if model_obj is not None and index.stats.n_terms:
        # Loads the compiled mixture kernel from numba's cache.
        q = Query("", [], np.zeros(1, dtype=np.int64), np.ones(1), [])
        session._scorer(session.mu, min(session.lam, 0.5)).score(q)
    if threading.current_thread() is threading.main_thread():
        # The JVM installs its own SIGINT handler, which ends the process (exit 130) on Ctrl-C;
        # Python's handler turns Ctrl-C back into KeyboardInterrupt, which cancels the query.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return session


def _completer(session: Session):
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    paths = PathCompleter(expanduser=True)

    class ConsoleCompleter(Completer):
        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            if text[:1] in (":", "/"):
                name, sep, rest = text[1:].partition(" ")
                if not sep:
                    for c in COMMANDS:
                        if c.startswith(name):
                            yield Completion(c, start_position=-len(name))
                    return
                name = _ALIASES.get(name, name)
                word = rest.split(" ")[-1]
                if name in _PATH_ARGS and " " not in rest:
                    yield from paths.get_completions(Document(rest, len(rest)), complete_event)
                for c in session.completions(name):
                    if c.startswith(word) and c != word:
                        yield Completion(c, start_position=-len(word))
            elif text.startswith("#") and " " not in text:
                for qid in session.topics:
                    if qid.startswith(text[1:]):
                        yield Completion(qid, start_position=-(len(text) - 1))

    return ConsoleCompleter()


def repl(session: Session, *, input=None, output=None, history=None, write=None) -> int:
    """Read lines until :quit or Ctrl-D, run each through ``session.execute`` and print the reply.

    ``input``/``output`` are prompt_toolkit Input/Output objects (tests pass a pipe and a
    DummyOutput), ``history`` a prompt_toolkit History, ``write`` a callable taking fragments.
    """
    from prompt_toolkit import PromptSession, print_formatted_text
    from prompt_toolkit.formatted_text import FormattedText
    from prompt_toolkit.styles import Style

    style = Style.from_dict(STYLE)
    if write is None:
        def write(frags):
            print_formatted_text(FormattedText(frags), style=style, end="", output=output)
    prompt = PromptSession(history=history, completer=_completer(session), complete_while_typing=False,
                           bottom_toolbar=session.toolbar, style=style, input=input, output=output,
                           enable_history_search=True)
    while not session.done:
        try:
            line = prompt.prompt([("class:query", f"{session.index.name}> ")])
        except KeyboardInterrupt:
            continue  # Ctrl-C at the prompt clears the line
        except EOFError:
            break
        if not line.strip():
            continue
        try:
            reply = session.execute(line)
        except KeyboardInterrupt:
            reply = [("class:warn", "cancelled\n")]
        if reply:
            write(reply)
    return 0


def plain_loop(session: Session, lines, out=None) -> int:
    """The console without a terminal (input piped in): one reply per line, highlights as *word*."""
    out = out or sys.stdout
    for line in lines:
        if session.done:
            break
        if not line.strip():
            continue
        out.write(f"{session.index.name}> {line.rstrip()}\n")
        try:
            reply = session.execute(line)
        except KeyboardInterrupt:
            reply = [("", "cancelled\n")]
        out.write(to_plain(reply))
        out.flush()
    return 0


def run_console(index_path, *, model=None, mu: float = MU, lam: float = LAM, field: str = "title",
                topics=None, qrels=None, hits: int = HITS, history: str | Path | None = None) -> int:
    """``topicir console``: open the index and read queries until Ctrl-D."""
    start = time.perf_counter()
    session = open_session(index_path, model=model, mu=mu, lam=lam, field=field, topics=topics,
                           qrels=qrels, hits=hits)
    s = session.stats
    banner = (f"topicir console: {session.index.name} ({s.n_docs:,} docs, {s.n_terms:,} terms), "
              f"{session.settings()}; ready in {time.perf_counter() - start:.1f} s. "
              f":help lists the commands, Ctrl-D quits.\n")
    if not sys.stdin.isatty():
        sys.stdout.write(banner)
        return plain_loop(session, sys.stdin)
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    path = Path(history) if history else history_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        hist = FileHistory(str(path))
    except OSError as exc:
        banner += f"(history not saved: {exc})\n"
        hist = InMemoryHistory()
    sys.stdout.write(banner)
    return repl(session, history=hist)
