"""The quick-start job: index Cranfield from ir_datasets, run its 225 topics, print a MAP table.

ir_datasets downloads Cranfield on first use (into $IR_DATASETS_HOME, default ~/.ir_datasets).
"""
from __future__ import annotations

from pathlib import Path

from ..experiments.compare import compare, format_table
from ..core.index import Index, build_index
from ..core.sources import load_qrels, load_topics

DATASET = "irds:cranfield"


def run_demo(indexes: Path = Path("indexes"), dataset: str = DATASET) -> str:
    name = dataset.removeprefix("irds:").replace("/", "-")
    path = Path(indexes) / name
    try:
        index = Index(path)
    except FileNotFoundError:
        index = build_index([dataset], path, force=path.exists())
    topics, qrels = load_topics(dataset), load_qrels(dataset)
    rows = compare(index, topics, qrels, topics_name=name, measures=("AP", "P@10", "nDCG@10", "R@1000"))
    title = (f"{dataset}: {index.manifest['n_docs']} documents, {len(topics)} topics "
             f"(title queries, depth 1000, mu 1000)")
    return format_table(rows, title=title)
