"""PyTerrier transformers over a topicir index (optional extra: ``pip install topicir[pyterrier]``).

    import pyterrier as pt
    from retrieval.pyterrier import LuceneRetriever, TopicIRRetriever

    ql = TopicIRRetriever("indexes/cranfield")                                  # exact QL, every doc
    lda = TopicIRRetriever("indexes/cranfield", model="indexes/cranfield/models/lda-k100-c1-i40-s0.npz", lam=0.7)
    bm25 = LuceneRetriever("indexes/cranfield", "bm25")                         # Anserini, as topicir run --baseline
    pt.Experiment([bm25, ql, lda], topics, qrels, eval_metrics=["map"], baseline=1)

Both map a query frame (``qid``, ``query``) to a result frame (``qid, query, docno, score, rank``;
rank from 0, as PyTerrier's retrievers number it). ``TopicIRRetriever`` calls the same ranking
function as ``topicir run`` (:func:`retrieval.core.ranking.run_topics`), so its results, and the
MAP ``pt.Experiment`` computes from them, are those of ``topicir run`` + ``topicir eval``.
Terrier's JVM is never started: only Anserini's, and only by ``LuceneRetriever``.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyterrier as pt

from .core.baselines import BASELINES, run_baseline
from .core.index import Index
from .core.ranking import DEPTH, run_topics
from .core.scoring import LAM, MU
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
    """

    def __init__(self, index, model=None, *, lam: float = LAM, mu: float = MU, depth: int = DEPTH):
        self.index = _index(index)
        if isinstance(model, (str, Path)):
            from .core.modelfiles import load_model

            model = load_model(model, self.index)
        if not 0.0 <= lam <= 1.0:
            raise ValueError(f"lam must be in [0, 1], got {lam!r}")
        if mu <= 0:
            raise ValueError(f"mu must be positive, got {mu!r}")
        self.model, self.lam, self.mu, self.depth = model, float(lam) if model is not None else 1.0, float(mu), depth

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(inp, extra_columns=["query"], context=self)
        run = run_topics(self.index, _topics(inp), mu=self.mu, lam=self.lam, model=self.model,
                         depth=self.depth, progress=False)
        return _results(inp, run)

    def schematic(self, *, input_columns=None) -> dict:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()}"
        return _schematic(f"TopicIR {what}", index=self.index.name, lam=self.lam, mu=self.mu, depth=self.depth)

    def __repr__(self) -> str:
        what = "QL" if self.model is None else f"{getattr(self.model, 'kind', 'model').upper()} lam={self.lam:g}"
        return f"TopicIR({what})"


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
