"""Regressions on the shared test collections: build each index, run QL and the baselines, and
compare MAP with the checked-in expected values (Anserini's regression pages do the same).

    topicir reproduce regressions --data ../shared/data
"""
from __future__ import annotations

import logging
from pathlib import Path

from .compare import METHODS, compare
from ..core.index import Index, build_index
from ..core.sources import load_qrels, load_topics

log = logging.getLogger(__name__)

COLLECTIONS = ("med", "cran", "cisi", "cacm", "npl", "scifact")
# MAP of exact Dirichlet QL (mu=1000, title, depth 1000, judged topics), computed independently
# over an Anserini index with the default analyzer, and Lucene QLD where it was given.
EXPECTED_QL = {"med": 0.4955, "cran": 0.2802, "cisi": 0.2153, "cacm": 0.3680, "npl": 0.2177, "scifact": 0.6329}
EXPECTED_QLD = {"med": 0.4800, "cisi": 0.1917}
TOLERANCE = 0.005


def ensure_index(data: Path, name: str, indexes: Path) -> Index:
    """The index of shared collection ``name``, built on first use."""
    path = indexes / name
    try:
        return Index(path)
    except FileNotFoundError:
        return build_index([data / name / "docs"], path, force=path.exists())


def run_collection(data: Path, name: str, indexes: Path = Path("indexes"), methods=METHODS,
                   measures=("AP", "P@10")) -> list[dict]:
    index = ensure_index(Path(data), name, Path(indexes))
    topics = load_topics(Path(data) / name / "topics.trec")
    qrels = load_qrels(Path(data) / name / "qrels.txt")
    rows = compare(index, topics, qrels, methods=methods, measures=measures, topics_name=name)
    expected = {"QL (exact Dirichlet)": EXPECTED_QL.get(name), "Lucene QLD": EXPECTED_QLD.get(name)}
    return [{"collection": name, **row, "expected MAP": expected.get(row["method"]) or ""} for row in rows]


def check(rows: list[dict]) -> list[str]:
    """Rows whose MAP misses its expected value by more than TOLERANCE."""
    return [f"{r['collection']} {r['method']}: MAP {r['AP']:.4f}, expected {r['expected MAP']:.4f}"
            for r in rows if r["expected MAP"] != "" and abs(r["AP"] - r["expected MAP"]) > TOLERANCE]
