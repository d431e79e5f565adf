"""PyTerrier transformers over a topicir index (optional extra: ``pip install topicir[pyterrier]``).

    import pyterrier as pt
    from retrieval.pyterrier import LuceneRetriever, TopicIRRetriever

    ql = TopicIRRetriever("indexes/cranfield")                                  # exact QL, every doc
    lda = TopicIRRetriever("indexes/cranfield", model="indexes/cranfield/models/lda-k100-c1-i40-s0.npz", lam=0.7)
    bm25 = LuceneRetriever("indexes/cranfield", "bm25")                         # Anserini, as topicir run --baseline
    pt.Experiment([bm25, ql, lda], topics, qrels, eval_metrics=["map"], baseline=1)

Both map a query frame (``qid``, ``query``) to a result frame (``qid, query, docno, score, rank``;
rank from 0, as PyTerrier's retrievers number it). ``TopicIRReranker`` re-scores the candidates of
a result frame (another system's, or documents given as ``text``) with the same score:

    pipeline = bm25 % 100 >> TopicIRReranker("indexes/cranfield", model=..., lam=0.7)

``TopicIRRetriever`` calls the same ranking function as ``topicir run``
(:func:`retrieval.core.runs.rank_settings`, with ``feedback=FeedbackSettings(...)`` as ``topicir
run --feedback``), so its results, and
the MAP ``pt.Experiment`` computes from them, are those of ``topicir run`` + ``topicir eval``.
Terrier's JVM is never started: only Anserini's, and only by ``LuceneRetriever``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt

from .core.baselines import BASELINES, run_baseline
from .core.extension import FOLD_PARAMS
from .core.feedback import Settings as FeedbackSettings
from .core.index import Index
from .core.ranking import DEPTH, prepare
from .core.runs import rank_settings
from .core.scoring import LAM, MU, Scorer
from .core.trec import ScoredDoc, Topic

RESULT_COLUMNS = ["qid", "query", "docno", "score", "rank"]


def _index(index) -> Index:
    return index if isinstance(index, Index) else Index(index)


def _topics(frame: pd.DataFrame) -> list[Topic]:
    return [Topic(str(qid), str(query), "", "") for qid, query in zip(frame["qid"], frame["query"])]


def _results(frame: pd.DataFrame, run: list[ScoredDoc]) -> pd.DataFrame:
    """``run`` as a PyTerrier result frame, each topic best first; the input's other
    columns (e.g. ``query_0`` of a rewriting stage) are carried over per qid."""
    res = pd.DataFrame(run, columns=["qid", "docno", "score"])
    # descending score, ties by ascending docno: the order topicir's run files use
    res = res.sort_values(["qid", "score", "docno"], ascending=[True, False, True], kind="stable")
    res["rank"] = res.groupby("qid", sort=False).cumcount()
    inputs = frame.assign(qid=frame["qid"].astype(str)).drop_duplicates("qid")
    res = inputs.merge(res, on="qid", how="inner")
    return res[RESULT_COLUMNS + [c for c in res.columns if c not in RESULT_COLUMNS]].reset_index(drop=True)


def _schematic(label: str, **settings) -> dict:
    # help_url given: PyTerrier would otherwise download its documentation index to look one up
    return {"label": label, "help_url": None, "settings": settings}


class TopicIRRetriever(pt.Transformer):
    """Exact query likelihood over every document, optionally smoothed with a topic model.

    Parameters
    ----------
    index : str, path or :class:`retrieval.core.index.Index`
        A topicir index (``topicir index ... --out DIR``).
    model : str, path, fitted topic model or None
        A model file of this index (``topicir train``) or a loaded model; None ranks by QL.
    lam : float
        Weight of QL against the model's P(w|d) (``topicir run --lam``); forced to 1 without a model.
    mu : float
        Dirichlet prior of QL.
    depth : int
        Documents returned per query.
    feedback : FeedbackSettings or None
        Pseudo-relevance feedback (``topicir run --feedback``): ``FeedbackSettings("rm3", ...)``
        (exact QL+RM3 without a model) or ``FeedbackSettings("topics", ...)`` (needs a model).
        Each transform keeps its queries' expansions in ``expansions_`` (qid -> Expansion).
    """

    def __init__(self, index, model=None, *, lam: float = LAM, mu: float = MU, depth: int = DEPTH,
                 feedback: FeedbackSettings | None = None):
        self.index = _index(index)
        if isinstance(model, (str, Path)):
            from .core.modelfiles import load_model

            model = load_model(model, self.index)
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {lam!r}")
        if mu <= 0:
            raise ValueError(f"mu must be positive, got {mu!r}")
        if feedback is not None and not isinstance(feedback, FeedbackSettings):
            raise ValueError(f"feedback must be a retrieval.FeedbackSettings or None, got {feedback!r}")
        if feedback is not None and feedback.method == "topics" and model is None:
            raise ValueError("topic feedback expands queries with a topic model's topics: give model=...")
        self.model, self.lam, self.mu, self.depth = model, float(lam) if model is not None else 1.0, float(mu), depth
        self.feedback, self.expansions_ = feedback, {}

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, extra_columns=["query"], context=self)
        setting = (self.mu, self.lam)
        run, expansions = rank_settings(self.index, _topics(inp), [setting], model=self.model, feedback=self.feedback,
                                        depth=self.depth, progress=False)[setting]
        self.expansions_ = expansions or {}
        return _results(inp, run)

    def schematic(self, *, input_columns=None) -> dict:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()}"
        fb = {} if self.feedback is None else {"feedback": f"{self.feedback.method} {self.feedback.label()}"}
        return _schematic(f"TopicIR {what}", index=self.index.name, lam=self.lam, mu=self.mu, depth=self.depth, **fb)

    def __repr__(self) -> str:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()} lam={self.lam:g}"
        fb = "" if self.feedback is None else f" +{self.feedback.method} {self.feedback.label()}"
        return f"TopicIR({what}{fb})"


class LuceneRetriever(pt.Transformer):
    """A Lucene baseline of ``topicir run --baseline`` (BM25, QLD, BM25+RM3 through Anserini, its
    default parameters unless given) over the same index. Only matching documents are returned."""

    def __init__(self, index, method: str = "bm25", *, depth: int = DEPTH, **params):
        if method not in BASELINES:
            raise ValueError(f"unknown baseline {method!r}; choose from {', '.join(BASELINES)}")
        self.index, self.method, self.depth, self.params = _index(index), method, depth, params

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, extra_columns=["query"], context=self)
        topics = [t for t in _topics(inp) if t.title.strip()]
        run = run_baseline(self.index, topics, self.method, depth=self.depth, progress=False,
                           **self.params) if topics else []
        return _results(inp, run)

    def schematic(self, *, input_columns=None) -> dict:
        return _schematic(f"Lucene {self.method}", index=self.index.name, depth=self.depth, **self.params)

    def __repr__(self) -> str:
        return f"Lucene({self.method})"


class TopicIRReranker(pt.Transformer):
    """Re-scores the candidate documents of a result frame (``qid, query, docno``, optionally
    ``text``) with the topic-smoothed query likelihood of ``topicir run``.

    A candidate that is a document of the index gets exactly its ``topicir run`` score (the
    index's statistics and the model's document model, with fold-in on a grown index). A
    candidate that is not is scored from its ``text`` column: analysed as the index analyses
    documents, its P_TM(w|d) from ``model.fold_in`` of its tokens (all such texts of a frame
    folded in together, seeded), under the index's collection model P(w|C).

    Parameters
    ----------
    index, model, lam, mu : as :class:`TopicIRRetriever`
    fold_params : dict, optional
        Settings of ``model.fold_in`` (default: seed 0, every kept sample, as for documents added
        to an index).
    """

    def __init__(self, index, model=None, *, lam: float = LAM, mu: float = MU, fold_params: dict | None = None):
        retriever = TopicIRRetriever(index, model, lam=lam, mu=mu)
        self.index, self.model, self.lam, self.mu = retriever.index, retriever.model, retriever.lam, retriever.mu
        self.fold_params = FOLD_PARAMS | dict(fold_params or {})

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.result_frame(inp, extra_columns=["query"], context=self)
        out = inp.assign(qid=inp["qid"].astype(str), docno=inp["docno"].astype(str))
        doc_index = self.index.stats.doc_index
        outside = sorted(set(out["docno"]) - set(doc_index))
        if outside and "text" not in out.columns:
            raise ValueError(f"{len(outside)} candidates are not documents of {self.index.path} (e.g. "
                             f"{outside[0]!r}) and the frame has no text column to score them from")
        texts = _Texts(self, out[out["docno"].isin(outside)].drop_duplicates("docno")) if outside else None
        scores = np.empty(len(out))
        for qid, rows in out.groupby("qid", sort=False).indices.items():
            prepared = prepare(self.index, str(out["query"].iat[rows[0]]), self.model, qid=qid, warn=False)
            docnos = out["docno"].to_numpy()[rows]
            inside = np.array([d in doc_index for d in docnos], dtype=bool)
            if inside.any():
                all_scores = prepared.scores(self.mu, self.lam)
                scores[rows[inside]] = all_scores[[doc_index[d] for d in docnos[inside]]]
            if not inside.all():
                text_scores = texts.scores(prepared)
                scores[rows[~inside]] = text_scores[[texts.row[d] for d in docnos[~inside]]]
        out["score"] = scores
        out = out.sort_values(["qid", "score", "docno"], ascending=[True, False, True], kind="stable")
        out["rank"] = out.groupby("qid", sort=False).cumcount()
        return out.reset_index(drop=True)

    def schematic(self, *, input_columns=None) -> dict:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()}"
        return _schematic(f"TopicIR re-rank {what}", index=self.index.name, lam=self.lam, mu=self.mu)

    def __repr__(self) -> str:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()} lam={self.lam:g}"
        return f"TopicIRReranker({what})"


class _Texts:
    """Candidates given as text: analysed once, folded in once, scored per query."""

    def __init__(self, reranker: TopicIRReranker, frame: pd.DataFrame):
        from .core.extension import ExtendedModel, document_model

        index = reranker.index
        self.reranker, self.row = reranker, {d: i for i, d in enumerate(frame["docno"])}
        term_index = index.stats.term_index
        analysed = [index.analyze(str(t)) for t in frame["text"].fillna("")]
        self.doc_len = np.array([len(terms) for terms in analysed], dtype=np.int64)
        self.ids = [np.array([term_index[t] for t in terms if t in term_index], dtype=np.int64) for terms in analysed]
        self.model = document_model(reranker.model, index)
        self.folded = None
        if self.model is not None and reranker.lam < 1.0:
            # the model's term ids: its own index's, which a grown index renumbers
            if isinstance(self.model, ExtendedModel):
                self.to_model, model = self.model.to_model, self.model.model
            else:
                self.to_model, model = np.arange(index.stats.n_terms, dtype=np.int64), self.model
            docs = [self.to_model[a][self.to_model[a] >= 0] for a in self.ids]
            self.folded = model.fold_in(docs, **reranker.fold_params)

    def scores(self, prepared) -> np.ndarray:
        """The query's score of every text, as :meth:`retrieval.core.scoring.Scorer.score` scores rows."""
        r, query = self.reranker, prepared.query
        post_doc, post_tf, lo, hi = [], [], [], []
        for w in query.term_ids:
            tf = np.array([np.count_nonzero(a == w) for a in self.ids], dtype=np.int32)
            docs = np.flatnonzero(tf)
            lo.append(sum(map(len, post_doc)))
            post_doc.append(docs.astype(np.int32))
            post_tf.append(tf[docs])
            hi.append(lo[-1] + len(docs))
        p_tm = None
        if self.folded is not None:
            mapped = self.to_model[query.term_ids]
            p_tm = np.zeros((len(self.doc_len), len(mapped)))
            p_tm[:, mapped >= 0] = self.folded.p_w_d(mapped[mapped >= 0])
        scorer = Scorer(r.index.stats, mu=r.mu, lam=r.lam if self.folded is not None else 1.0,
                        model=self.model)
        cat = (lambda parts, dtype: np.concatenate(parts).astype(dtype)) if post_doc else (lambda p, dt: np.zeros(0, dt))
        return scorer.score_docs(query, self.doc_len, cat(post_doc, np.int32), cat(post_tf, np.int32),
                                 np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), p_tm)
