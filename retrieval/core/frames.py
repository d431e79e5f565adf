"""Runs and per-topic results as pandas frames (PyTerrier's shape: ``qid, docno, score, rank``)."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from .evaluate import DEFAULT_MEASURES, per_topic
from .trec import Qrel, ScoredDoc


def run_frame(run: Sequence[ScoredDoc]) -> pd.DataFrame:
    """A run as a frame with PyTerrier's columns; ``rank`` counts from 0 within each query, in
    the run's order (best first)."""
    frame = pd.DataFrame(list(run), columns=["qid", "docno", "score"])
    frame["rank"] = frame.groupby("qid", sort=False).cumcount()
    return frame


def per_topic_frame(run: Sequence[ScoredDoc], qrels: Sequence[Qrel], measures=DEFAULT_MEASURES) -> pd.DataFrame:
    """One row per judged topic, one column per measure (as :func:`per_topic` computes them)."""
    table = per_topic(run, qrels, measures)
    frame = pd.DataFrame(table).rename_axis("qid")
    return frame.sort_index(key=lambda q: q.map(lambda x: (len(x), x)))
