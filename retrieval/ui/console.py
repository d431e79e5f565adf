"""Interactive query console: ``topicir console --index DIR [--model DIR]``.

Type a query and every document of the index is ranked through the one ranking path
``topicir run`` uses (:mod:`retrieval.core.ranking`); ``#51`` runs topic 51 of ``--topics``. Lines starting with ``:`` or ``/``
are commands (``:help`` lists them). All logic lives in :class:`Session`, whose commands return
formatted text (a list of ``(style, text)`` fragments) and are tested without a terminal; the
prompt_toolkit loop in :func:`run_console` only reads lines and prints what comes back.
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from models.common.atomic import atomic_open

from ..core.ranking import DEPTH, prepare
from ..core.scoring import LAM, MU, top_k
from ..core.stats import CollectionStats
from ..core.runs import save_run
from ..core.trec import TOPIC_FIELDS, Qrel, Topic, topic_query
from .console_text import (ConsoleError, Fragments, Result, check_lam, check_mu, match_words, settings_label,
                           snippet, wrap)
from .console_feedback import FeedbackViews
from .console_views import ModelViews

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
  :feedback rm3|topics|off   pseudo-relevance feedback (topics needs a model); :why N lists the expansion
  :fb docs=20 terms=30 weight=0.5 topics=3 maxdf=0.1 length=8   its feedback documents, terms, original-query
                    weight, topics, expansion terms' largest document share, query length the expansion weighs less above
  :field F          field of #QID queries: title, desc, narr, title+desc
  :topics FILE      load topics;   :qrels FILE   mark relevant hits, show AP of #QID queries
  :hits N           hits shown (each result keeps 1000 for :write)
  :compare A B [QUERY]   two settings side by side, e.g. :compare lam=0.7 lam=1 airbus subsidies
                         (A, B: lam=X and/or mu=X joined by commas; no QUERY: the last query)
  :write FILE       the session's results as a TREC run (latest result per query id),
                    the queries beside it as FILE.queries.tsv (topicir run --topics reads it)
  :history  :set  :help  :quit       Ctrl-C cancels a query, Ctrl-D leaves."""

COMMANDS = ("why", "doc", "topic", "lam", "mu", "model", "feedback", "fb", "field", "topics", "qrels", "hits",
            "compare", "write", "history", "set", "help", "quit")
_ALIASES = {"q": "quit", "exit": "quit", "h": "help", "?": "help", "settings": "set", "k": "hits"}
_PATH_ARGS = ("model", "topics", "qrels", "write")




# -- the per-term score breakdown (the slow, obvious twin of Scorer.score for one doc) -------


# -- the session -------------------------------------------------------------------------------


def _load_model(path: str, index):
    from ..core.modelfiles import load_model

    if not Path(path).exists():
        raise ConsoleError(f"{path}: no such model; train one with `topicir train`")
    return load_model(path, index)


class Session(ModelViews, FeedbackViews):
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
        self.depth = depth
        self.cmd_hits(str(hits))
        self.results: list[Result] = []
        self.last: Result | None = None
        self.done = False
        self._n_free = 0
        self._stems: dict[str, list[str]] = {}
        self.feedback = None     # feedback Settings (console_feedback), None: off
        self.fb_values: dict = {}

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
        return s + self.feedback_label()

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
        topic_fb = self.feedback is not None and self.feedback.method == "topics"
        prepared = prepare(self.index, text, self.model if lam < 1 or topic_fb else None, warn=False)
        query = prepared.query
        if len(query.term_ids) == 0:
            if not query.terms:
                raise ConsoleError(f"{text!r} has no indexable words (only stopwords or punctuation)")
            raise ConsoleError(f"no term of {text!r} is in {self.index.name} "
                               f"(analysed: {' '.join(query.terms)})")
        expansion = None
        if self.feedback is not None:  # the expanded query is what :why breaks down
            query, expansion, scores = self.feedback_query(prepared, text, mu, lam)
        else:
            scores = prepared.scores(mu, lam)
        docs = top_k(scores, self.depth)
        mixed = lam < 1
        return Result(qid, text, query, mu, lam, self.model_name if mixed else None,
                      self.model if mixed else None, docs, scores[docs], time.perf_counter() - start, expansion)

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
        if result.expansion is not None:
            e = result.expansion
            settings += f" +{e.method} {e.settings.label()}"
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
        # A session mixes settings: <run>.json records each query's, as `topicir run` records a batch's.
        per_query = {r.qid: {"mu": r.mu, "lam": r.lam, "model": r.model_name} for r in latest.values()}
        save_run(run, path, tag=RUN_TAG, depth=self.depth, params={"source": "console", "queries": per_query})
        queries = Path(f"{path}.queries.tsv")
        # TSV topics (qid<TAB>query), as trec.read_topics reads them.
        with atomic_open(queries, "w", encoding="utf-8") as out:
            out.write("".join(f"{r.qid}\t{' '.join(r.text.split())}\n" for r in latest.values()))
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
                 f"feedback {self.feedback_label().strip() or 'off'}",
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
        if command == "feedback":
            return ["rm3", "topics", "off"]
        if command == "fb":
            return ["docs=", "terms=", "weight=", "topics="]
        return []
