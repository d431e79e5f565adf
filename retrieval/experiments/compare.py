"""Side-by-side comparisons: exact QL (ours) and the Lucene baselines on one topic set."""
from __future__ import annotations

import logging
from pathlib import Path

from ..core.baselines import BASELINES, run_baseline
from ..core.ranking import DEPTH, run_topics
from ..core.runs import RUNS_DIR, Batch, Method
from ..core.evaluate import DEFAULT_MEASURES, aggregate, check_topics
from ..core.index import Index
from ..core.scoring import MU
from ..core.tables import Table
from ..core.trec import Qrel, ScoredDoc, Topic

log = logging.getLogger(__name__)

METHODS = ("ql",) + BASELINES
R_NOTE = ("R@1000: exact QL and topic-smoothed runs rank every document, Lucene runs (QLD, BM25, BM25+RM3) only "
          "documents matching a query term; their recall at 1000 is not comparable.")


def recall_note(measures) -> str:
    """:data:`R_NOTE` plus a newline when ``measures`` include R@1000, else ""."""
    from ..core.evaluate import parse_measures

    return R_NOTE + "\n" if "R@1000" in {str(m) for m in parse_measures(measures)} else ""


LABELS = {"ql": "QL (exact Dirichlet)", "qld": "Lucene QLD", "bm25": "BM25", "bm25+rm3": "BM25+RM3"}


def produce_run(index: Index, topics: list[Topic], method: str, *, field: str = "title",
                mu: float = MU, depth: int = DEPTH) -> list[ScoredDoc]:
    if method == "ql":
        return run_topics(index, topics, field=field, mu=mu, lam=1.0, depth=depth, progress=False)
    params = {"mu": mu} if method == "qld" else {}
    return run_baseline(index, topics, method, field=field, depth=depth, **params)


def compare(index: Index, topics: list[Topic], qrels: list[Qrel], *, methods=METHODS,
            field: str = "title", mu: float = MU, depth: int = DEPTH, measures=DEFAULT_MEASURES,
            topics_name: str = "topics", runs_dir: Path | None = RUNS_DIR) -> list[dict]:
    """Run each method on every topic (as ``topicir run`` does), save the runs into ``runs_dir``
    (None: none saved), and return one row of measures per method; the means are over the judged
    topics (see :mod:`retrieval.core.evaluate`)."""
    check_topics(qrels, [t.qid for t in topics], topics_name)
    batch = None if runs_dir is None else Batch(index, topics_name, field=field, depth=depth,
                                                topics_name=topics_name, out_dir=runs_dir)
    rows = []
    for method in methods:
        run = produce_run(index, topics, method, field=field, mu=mu, depth=depth)
        if batch is not None:
            path = batch.write(Method(method, mu=mu if method in ("ql", "qld") else None), run)
            log.info("%s: wrote %s", method, path)
        rows.append({"method": LABELS[method], **aggregate(run, qrels, measures)})
    return rows


def format_table(rows: list[dict], title: str | None = None, digits: int = 4, means: bool = True) -> str:
    """A plain-text table; the first key of the rows is the label column; ``means``: the cells
    are means over topics (AP is headed MAP)."""
    return Table(title or "", rows, digits=digits, means=means).text() if rows else ""


def eval_report(runs, qrels_source, measures=DEFAULT_MEASURES, *, per_topic: bool = False) -> str:
    """``topicir eval``: a table of each run's means over the judged topics of the qrels, with how
    many topics those are and how many of them the run ranks (the rest count 0); per-topic
    tables first with ``per_topic``; the R@1000 note when R@1000 is measured."""
    from ..core.evaluate import judged_topics, per_topic as per_topic_table
    from ..core.sources import load_qrels
    from ..core.trec import read_run

    qrels = load_qrels(qrels_source)
    judged = judged_topics(qrels)
    out, rows = [], []
    for path in runs:
        run = read_run(Path(path))
        if per_topic:
            table = per_topic_table(run, qrels, measures)
            qids = sorted(next(iter(table.values())), key=lambda q: (len(q), q))
            out.append(format_table([{"topic": q, **{m: v[q] for m, v in table.items()}} for q in qids],
                                    title=str(path), means=False))
        rows.append({"run": Path(path).name, **aggregate(run, qrels, measures), "topics": len(judged),
                     "ranked": len(judged & {r.qid for r in run})})
    out.append(format_table(rows, title=f"qrels: {qrels_source}; means over the {len(judged)} judged topics (with a "
                                        f"relevant document); 'ranked': how many of them the run has (the rest count 0)"))
    return "\n".join(out) + ("\n" + recall_note(measures).rstrip("\n") if recall_note(measures) else "")
