"""Pseudo-relevance feedback over the one ranking path, with or without a topic model.

Three expansions of a query from the top documents of its first-pass ranking, each ranked
again with the same (topic-smoothed) query likelihood over every document:

``rm3`` without a model: exact QL + RM3. The relevance model (Lavrenko & Croft 2001)

    P(w|R) proportional to sum over the top fb_docs documents d of P(w|d) prod_q P(q|d)

over the terms of those documents, with prod_q P(q|d) the first-pass likelihood (uniform
document prior) and P(w|d) the maximum-likelihood tf / |d| (``fb_mu`` > 0: Dirichlet-smoothed,
which favours the collection's frequent words in short documents); RM3 keeps its fb_terms best terms and interpolates them with the query,
weight ``original_weight`` on the query (Anserini's defaults: 10 documents, 10 terms, 0.5).

``rm3`` with a model: the same from the topic-smoothed ranking, with the smoothed document
models P(w|d) = lam P_QL(w|d) + (1 - lam) P_TM(w|d) of Wei & Croft (2006) in both factors
(P_QL with prior ``fb_mu`` in the relevance model, the ranking's mu in the likelihood).

``topics``: topic-level feedback after Andrzejewski & Buttler (KDD 2011), with the user's
choice of topics replaced by the top documents: the query's topic distribution is the mean
of their topic mixtures, its fb_topics most probable topics give their top words, each weighted
P(k|Q) P(w|k), and the fb_terms heaviest words are interpolated with the query as in RM3.
Topics are not aligned across chains, so each chain's topics expand on their own and the
chains' word weights are averaged.

Models are reached only through the protocol of :mod:`models.common.base` (``p_w_d``,
``doc_topics``, ``topic_words``, ``n_topics``, ``n_chains``). Every expansion is returned as an
:class:`Expansion` that names its terms and weights, so a ranking can be explained.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from .expansion_terms import allowed as allowed_terms
from .index import Index
from .ranking import DEPTH, PreparedQuery, collecting_runs, prepare, prepare_topics, ranked
from .scoring import LAM, MU, Query, top_k
from .trec import ScoredDoc, Topic

METHODS = ("rm3", "topics")
FB_DOCS, FB_TERMS, ORIGINAL_WEIGHT, FB_TOPICS, FB_MAX_DF, FB_LENGTH = 20, 30, 0.5, 3, 0.1, 8
# P_TM of the candidate terms is computed this many (document, term) cells at a time
# (p_w_d returns every document's row), so memory stays bounded whatever the vocabulary.
CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class Settings:
    """One feedback setting: which expansion, from how many documents, how many terms (and
    topics), and the weight left on the original query (1 ranks as without feedback)."""
    method: str = "rm3"
    fb_docs: int = FB_DOCS
    fb_terms: int = FB_TERMS
    original_weight: float = ORIGINAL_WEIGHT
    fb_topics: int = FB_TOPICS   # topics only
    fb_mu: float | None = 0.0    # Dirichlet prior of P_QL(w|d) in the relevance model (0: tf / |d|, as
                                 # Anserini's RM3; None: the ranking's mu)
    fb_max_df: float = FB_MAX_DF  # expansion terms are in at most this fraction of the documents
    fb_length: int | None = FB_LENGTH  # queries longer than this many tokens: expansion weighs less (see query_weight)

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"feedback method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name in ("fb_docs", "fb_terms", "fb_topics"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if not 0.0 <= self.original_weight <= 1.0:
            raise ValueError(f"original_weight must be in [0, 1], got {self.original_weight!r}")
        if self.fb_mu is not None and not (self.fb_mu >= 0 and np.isfinite(self.fb_mu)):
            raise ValueError(f"fb_mu must be a finite number >= 0 or None, got {self.fb_mu!r}")
        if not 0.0 < self.fb_max_df <= 1.0:
            raise ValueError(f"fb_max_df must be in (0, 1], got {self.fb_max_df!r}")
        if self.fb_length is not None and (not isinstance(self.fb_length, (int, np.integer))
                                           or isinstance(self.fb_length, bool) or self.fb_length < 1):
            raise ValueError(f"fb_length must be an int >= 1 or None, got {self.fb_length!r}")

    def query_weight(self, length: float) -> float:
        """The weight of the original query of ``length`` tokens. Without ``fb_length`` it is
        ``original_weight``. With it, a query longer than fb_length tokens keeps more: the odds
        of the expansion against the query, (1 - w) / w, shrink by fb_length / length, so that
        an expansion term never weighs more against a long query's terms than against those of
        a query of fb_length tokens (RM3 spreads the query's weight over its terms: over
        hundreds of them, a few expansion terms would otherwise outweigh each one many times)."""
        w = self.original_weight
        if self.fb_length is None or length <= self.fb_length or w in (0.0, 1.0):
            return w
        odds = (1.0 - w) / w * self.fb_length / length
        return 1.0 / (1.0 + odds)

    def label(self) -> str:
        extra = f" topics{self.fb_topics}" if self.method == "topics" else ""
        mu = "" if self.method != "rm3" or self.fb_mu == 0.0 else \
            f" fbmu{'=mu' if self.fb_mu is None else format(self.fb_mu, 'g')}"
        df = "" if self.fb_max_df == FB_MAX_DF else f" maxdf{self.fb_max_df:g}"
        length = "" if self.fb_length == FB_LENGTH else f" len{self.fb_length or 'none'}"
        return f"docs{self.fb_docs} terms{self.fb_terms}{extra} w{self.original_weight:g}{length}{mu}{df}"

    def params(self) -> dict:
        """The setting as run-name parameters (:func:`retrieval.core.runs.run_name`), every
        field that changes the ranking: ``prf-rm3_fbdocs20_fbterms30_fbw0.5``."""
        out = {"prf-": self.method, "fbdocs": self.fb_docs, "fbterms": self.fb_terms}
        if self.method == "topics":
            out["fbtopics"] = self.fb_topics
        out["fbw"] = f"{self.original_weight:g}"
        if self.fb_length != FB_LENGTH:
            out["fblen"] = self.fb_length or "none"
        if self.method == "rm3" and self.fb_mu != 0.0:
            out["fbmu"] = "mu" if self.fb_mu is None else f"{self.fb_mu:g}"
        if self.fb_max_df != FB_MAX_DF:
            out["fbmaxdf"] = f"{self.fb_max_df:g}"
        return out

    def as_dict(self) -> dict:
        """The setting for a run's settings file."""
        return {"method": self.method, "fb_docs": self.fb_docs, "fb_terms": self.fb_terms,
                "original_weight": self.original_weight,
                "fb_topics": self.fb_topics if self.method == "topics" else None, "fb_mu": self.fb_mu,
                "fb_max_df": self.fb_max_df, "fb_length": self.fb_length}


@dataclass
class Expansion:
    """What feedback did to one query, for explanations and reports.

    ``feedback`` is the truncated feedback distribution (relevance model or topic words, summing
    to 1), ``terms`` the expanded query: ``original_weight`` * the query's term distribution +
    (1 - ``original_weight``) * ``feedback``, heaviest first (weights sum to 1; the scorer uses
    them times the query's length, so that with weight 1 the scores are the query's own).
    ``topics`` are (chain, topic, P(k|Q)) of the topics that expanded the query."""
    qid: str
    method: str
    settings: Settings
    docs: list[str]                                   # docnos of the feedback documents
    feedback: list[tuple[str, float]]
    terms: list[tuple[str, float]]
    topics: list[tuple[int, int, float]] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"qid": self.qid, "method": self.method, "settings": self.settings.label(),
                "docs": list(self.docs), "feedback": [[t, w] for t, w in self.feedback],
                "terms": [[t, w] for t, w in self.terms],
                "topics": [[c, k, w] for c, k, w in self.topics]}


# -- the feedback distributions ------------------------------------------------------------------


def doc_terms(stats, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct terms of ``docs`` (sorted int64) and their frequencies, (len(docs), n_terms)."""
    rows = [stats.term_ids[stats.doc_ptr[d]:stats.doc_ptr[d + 1]] for d in docs]
    terms = np.unique(np.concatenate(rows).astype(np.int64)) if rows else np.zeros(0, np.int64)
    tf = np.zeros((len(docs), len(terms)))
    for i, row in enumerate(rows):
        ids, counts = np.unique(np.searchsorted(terms, row), return_counts=True)
        tf[i, ids] = counts
    return terms, tf


def p_tm_rows(model, term_ids: np.ndarray, docs: np.ndarray, n_docs: int,
              chunk_cells: int = CHUNK_CELLS) -> np.ndarray:
    """P_TM(w|d) of ``term_ids`` for the documents ``docs`` only, (len(docs), len(term_ids)):
    the model's ``p_w_d_rows`` where it has one, else ``p_w_d`` (every one of the ``n_docs``
    documents' rows) a chunk of terms at a time, keeping the rows of ``docs``."""
    if hasattr(model, "p_w_d_rows"):
        return model.p_w_d_rows(term_ids, docs)
    out = np.empty((len(docs), len(term_ids)))
    step = max(1, chunk_cells // max(n_docs, 1))
    for lo in range(0, len(term_ids), step):
        out[:, lo:lo + step] = model.p_w_d(term_ids[lo:lo + step])[docs]
    return out


def relevance_model(stats, docs: np.ndarray, log_lik: np.ndarray, *, mu: float = MU, lam: float = 1.0,
                    model=None, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """P(w|R) over the terms of ``docs``: sum_d P(w|d) P(d|Q), P(d|Q) proportional to
    exp(``log_lik``) (the documents' query log-likelihoods), P(w|d) = lam P_QL + (1 - lam) P_TM
    with P_QL Dirichlet-smoothed with ``mu`` (0: the maximum-likelihood tf / |d|); with
    ``allowed`` (bool per term id) over those terms only.

    Returns (term ids int64, probabilities summing to 1), heaviest first (ties by term id)."""
    docs = np.asarray(docs, dtype=np.int64)
    terms, tf = doc_terms(stats, docs)
    if allowed is not None:
        keep = allowed[terms]
        terms, tf = terms[keep], tf[:, keep]
    if len(terms) == 0:
        return terms, np.zeros(0)
    length = np.asarray(stats.doc_len, dtype=np.float64)[docs][:, None]
    p = (tf + mu * stats.p_c[terms][None, :]) / np.maximum(length + mu, 1e-300)
    if model is not None and lam < 1.0:
        p = lam * p + (1.0 - lam) * p_tm_rows(model, terms, docs, stats.n_docs)
    log_lik = np.asarray(log_lik, dtype=np.float64)
    w = np.exp(log_lik - log_lik.max())
    rm = (w / w.sum()) @ p
    rm /= rm.sum()
    order = np.lexsort((terms, -rm))
    return terms[order], rm[order]


def query_topics(model, docs, chain: int = 0) -> np.ndarray:
    """The query's topic distribution in ``chain``: the mean of the documents' mixtures
    (``doc_topics(doc, top=n_topics)``), shape (n_topics,), summing to 1."""
    theta = np.zeros(model.n_topics)
    for d in docs:
        ids, p = model.doc_topics(int(d), top=model.n_topics, chain=chain)
        theta[ids] += np.asarray(p, dtype=np.float64) / max(float(np.sum(p)), 1e-300)
    return theta / max(theta.sum(), 1e-300)


def topic_words_model(model, docs, fb_topics: int, fb_terms: int, allowed: np.ndarray | None = None):
    """Topic-level feedback: per chain, the fb_topics most probable topics of the query (see
    :func:`query_topics`), their fb_terms top words weighted P(k|Q) P(w|k); averaged over chains.
    ``allowed`` (bool per term id): only those words count (:mod:`.expansion_terms`).

    Returns (term ids int64, weights summing to 1, heaviest first; [(chain, topic, P(k|Q))])."""
    n_chains = int(getattr(model, "n_chains", 1) or 1)
    # enough top words that fb_terms of them are allowed whatever the topic
    top = fb_terms if allowed is None else min(len(allowed), fb_terms + int(len(allowed) - allowed.sum()))
    weight: dict[int, float] = {}
    picked = []
    for chain in range(n_chains):
        theta = query_topics(model, docs, chain)
        for k in np.argsort(-theta, kind="stable")[:fb_topics]:
            picked.append((chain, int(k), float(theta[k])))
            ids, p = model.topic_words(int(k), top=top, chain=chain)
            ids, p = np.asarray(ids, dtype=np.int64), np.asarray(p, dtype=np.float64)
            if allowed is not None:
                keep = allowed[ids]
                ids, p = ids[keep][:fb_terms], p[keep][:fb_terms]
            for w, pw in zip(ids, p):
                weight[int(w)] = weight.get(int(w), 0.0) + theta[k] * pw / n_chains
    terms = np.fromiter(weight, dtype=np.int64, count=len(weight))
    p = np.fromiter(weight.values(), dtype=np.float64, count=len(weight))
    if len(p) and p.sum() > 0:
        p /= p.sum()
    order = np.lexsort((terms, -p))
    return terms[order], p[order], picked


def expand(query: Query, fb_ids: np.ndarray, fb_p: np.ndarray, fb_terms: int,
           original_weight: float) -> tuple[Query, np.ndarray, np.ndarray]:
    """RM3's interpolation: the fb_terms heaviest feedback terms, renormalised, mixed with the
    query's term distribution. Returns (the weighted query, the kept feedback ids, their
    renormalised weights); the query's weights sum to its length (its token count)."""
    keep_ids = np.asarray(fb_ids[:fb_terms], dtype=np.int64)
    keep_p = np.asarray(fb_p[:fb_terms], dtype=np.float64)
    keep_p = keep_p / keep_p.sum() if keep_p.sum() > 0 else keep_p
    n = float(query.weights.sum())
    dist: dict[int, float] = {}
    for w, c in zip(query.term_ids, query.weights):
        dist[int(w)] = original_weight * c / n
    if original_weight < 1.0:
        for w, p in zip(keep_ids, keep_p):
            dist[int(w)] = dist.get(int(w), 0.0) + (1.0 - original_weight) * p
    ids = np.array(sorted(w for w in dist if dist[w] > 0), dtype=np.int64)
    weights = np.array([dist[int(w)] * n for w in ids], dtype=np.float64)
    if original_weight == 1.0:  # exactly the query's own counts
        ids, weights = query.term_ids, query.weights
    return query._replace(term_ids=ids, weights=weights), keep_ids, keep_p


# -- one query -----------------------------------------------------------------------------------


class FeedbackQuery:
    """A query's first pass (QL, or topic-smoothed QL with ``model``) and its feedback runs
    under any number of :class:`Settings`; P_TM tables are computed once per query and reused.

    Parameters
    ----------
    index : Index
    text : str, the query
    model : topic model or None (exact QL)
    mu, lam : the ranking's Dirichlet prior and QL weight (lam is 1 without a model)
    qid : str, for warnings and the expansions
    prepared : PreparedQuery of ``text`` with ``model``, if the caller has it already (the console,
        a batch)
    """

    def __init__(self, index: Index, text: str, model=None, *, mu: float = MU, lam: float = LAM,
                 qid: str = "", prepared: PreparedQuery | None = None):
        self.prepared: PreparedQuery = prepared if prepared is not None else prepare(index, text, model, qid=qid)
        # the prepared query's model: on an index grown since it was trained, read with fold-in
        self.index, self.model, self.mu, self.qid = index, self.prepared.model, float(mu), qid
        self.lam = float(lam) if model is not None else 1.0
        self.first = self.prepared.scores(self.mu, self.lam)
        self._top = np.zeros(0, dtype=np.int64)
        self._rm: dict = {}
        self._p_tm: dict[int, np.ndarray] = {}

    @property
    def query(self) -> Query:
        return self.prepared.query

    def top_docs(self, n: int) -> np.ndarray:
        """Rows of the first pass's ``n`` best documents, best first."""
        if len(self._top) < n:
            self._top = top_k(self.first, n)
        return self._top[:n]

    def feedback(self, s: Settings):
        """(term ids, weights summing to 1, topics) of the feedback distribution of ``s``, before
        truncation to fb_terms (topics: the words of the picked topics), over the terms that may
        expand a query (:func:`retrieval.core.expansion_terms.allowed`)."""
        docs = self.top_docs(s.fb_docs)
        allowed = allowed_terms(self.index, s.fb_max_df)
        if s.method == "rm3":
            fb_mu = self.mu if s.fb_mu is None else float(s.fb_mu)
            key = ("rm3", s.fb_docs, fb_mu, s.fb_max_df)
            if key not in self._rm:
                ids, p = relevance_model(self.index.stats, docs, self.first[docs], mu=fb_mu,
                                         lam=self.lam, model=self.model, allowed=allowed)
                self._rm[key] = (ids, p, [])
            return self._rm[key]
        if self.model is None:
            raise ValueError("topic feedback needs a topic model")
        key = ("topics", s.fb_docs, s.fb_topics, s.fb_terms, s.fb_max_df)
        if key not in self._rm:
            self._rm[key] = topic_words_model(self.model, docs, s.fb_topics, s.fb_terms, allowed)
        return self._rm[key]

    def expansion(self, s: Settings) -> tuple[Query, Expansion]:
        """The expanded weighted query of ``s`` and its explanation."""
        terms = self.index.stats.terms
        if len(self.query.term_ids) == 0:  # nothing to feed back from: the query as it is
            return self.query, Expansion(self.qid, s.method, s, [], [], [])
        ids, p, topics = self.feedback(s)
        query, keep_ids, keep_p = expand(self.query, ids, p, s.fb_terms,
                                         s.query_weight(float(self.query.weights.sum())))
        total = float(query.weights.sum())
        order = np.lexsort((query.term_ids, -query.weights))
        docnos = self.index.stats.docnos
        return query, Expansion(
            self.qid, s.method, s, [docnos[d] for d in self.top_docs(s.fb_docs)],
            [(terms[w], float(x)) for w, x in zip(keep_ids, keep_p)],
            [(terms[query.term_ids[i]], float(query.weights[i] / total)) for i in order], list(topics))

    def _p_tm_columns(self, term_ids: np.ndarray) -> np.ndarray:
        missing = np.array([w for w in term_ids if int(w) not in self._p_tm], dtype=np.int64)
        if len(missing):
            cols = self.model.p_w_d(missing)
            for j, w in enumerate(missing):
                self._p_tm[int(w)] = np.ascontiguousarray(cols[:, j])
        return np.stack([self._p_tm[int(w)] for w in term_ids], axis=1)

    def scores(self, s: Settings) -> tuple[np.ndarray, Expansion]:
        """Every document's score under the expanded query of ``s``, and the expansion."""
        query, expansion = self.expansion(s)
        again = copy.copy(self.prepared)  # the query's own extras (TCM collocations) are kept
        again.query = query
        if self.model is not None and self.lam < 1.0 and len(query.term_ids):
            again.p_w = self._p_tm_columns(query.term_ids)
        return again.scores(self.mu, self.lam), expansion


# -- batches -------------------------------------------------------------------------------------


def sweep_feedback(index: Index, topics: list[Topic], settings: list[Settings], *, model=None,
                   mu: float = MU, lam: float = LAM, field: str = "title", depth: int = DEPTH,
                   progress: bool = True) -> dict[Settings, tuple[list[ScoredDoc], dict[str, Expansion]]]:
    """One feedback run per setting, each with every topic's :class:`Expansion`; a query's first
    pass and its model tables are shared by all settings."""
    from tqdm.auto import tqdm

    out = {s: ([], {}) for s in settings}
    prepared_topics = prepare_topics(index, topics, model, field=field, tables=lam < 1)
    with collecting_runs():
        for topic, prepared in tqdm(prepared_topics, total=len(topics), desc="feedback", unit=" topics",
                                    disable=not progress, mininterval=1):
            fq = FeedbackQuery(index, prepared.text, model, mu=mu, lam=lam, qid=topic.qid, prepared=prepared)
            for s in settings:
                scores, expansion = fq.scores(s)
                out[s][0].extend(ranked(index, topic.qid, scores, depth))
                out[s][1][topic.qid] = expansion
    return out


def run_feedback(index: Index, topics: list[Topic], settings: Settings = Settings(), *, model=None,
                 mu: float = MU, lam: float = LAM, field: str = "title", depth: int = DEPTH,
                 progress: bool = True) -> tuple[list[ScoredDoc], dict[str, Expansion]]:
    """Rank every topic with feedback ``settings`` (QL+RM3 without a model; RM3 over the
    topic-smoothed ranking, or topic feedback, with one). Returns the run and
    ``{qid: Expansion}``."""
    return sweep_feedback(index, topics, [settings], model=model, mu=mu, lam=lam, field=field,
                          depth=depth, progress=progress)[settings]
