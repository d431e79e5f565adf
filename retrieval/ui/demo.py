"""The quick-start job (``make demo``): index Cranfield from ir_datasets, train a small LDA on it,
and print exact QL, the Lucene baselines and LDA smoothing side by side, each with its paired
t-test against QL, then where everything was written and the commands to go on with.

ir_datasets downloads Cranfield on first use (into $IR_DATASETS_HOME, default ~/.ir_datasets).
"""
from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path

from scipy import stats

from ..core.evaluate import aggregate, judged_topics, per_topic
from ..core.index import Index, build_index
from ..core.modelfiles import train_model
from ..core.ranking import DEPTH, run_topics
from ..core.runs import RUNS_DIR, Batch, Method
from ..core.scoring import MU
from ..core.sources import load_qrels, load_topics
from ..experiments.compare import LABELS, R_NOTE, compare, format_table

log = logging.getLogger(__name__)

DATASET = "irds:cranfield"
# what `make demo` copies into ir_datasets' folder on a machine without network
SHARED_COPY = "../shared/data/irds-cache/cranfield/cran.tar.gz"
MEASURES = ("AP", "P@10", "nDCG@10", "R@1000")
# Small enough to train in seconds on 2 cores, large enough to beat QL clearly on Cranfield:
# K = 100 with 2 chains averaged (5 samples each) is the README's cran row of `topicir iterations`.
DEMO_TRAIN = dict(n_topics=100, n_chains=2, n_iter=60, burn_in=20, sample_every=10, seed=0)
DEMO_LAM = 0.7


def _ensure_index(dataset: str, path: Path) -> Index:
    try:
        return Index(path)
    except FileNotFoundError:
        return build_index([dataset], path, force=path.exists())


def _p_value(ap: dict[str, float], base: dict[str, float]) -> float:
    qids = sorted(base)
    return float(stats.ttest_rel([ap[q] for q in qids], [base[q] for q in qids]).pvalue)


def run_demo(indexes: Path = Path("indexes"), dataset: str = DATASET, *, runs_dir: Path = RUNS_DIR,
             lam: float = DEMO_LAM, k: int | None = None, iterations: int | None = None) -> str:
    """Run the demo and return its report (tables, files written, next commands) as text.
    ``k`` and ``iterations`` override :data:`DEMO_TRAIN`'s LDA size and sweeps (a shorter run
    keeps burn-in at half the sweeps and a sample every quarter)."""
    train = dict(DEMO_TRAIN, **({"n_topics": k} if k else {}))
    if iterations:
        train.update(n_iter=iterations, burn_in=iterations // 2, sample_every=max(1, iterations // 4))
    start = time.perf_counter()
    name = dataset.removeprefix("irds:").replace("/", "-")
    index = _ensure_index(dataset, Path(indexes) / name)
    topics, qrels = load_topics(dataset), load_qrels(dataset)
    judged = judged_topics(qrels)
    batch = Batch(index, dataset, topics_name=name, out_dir=runs_dir)
    rows = compare(index, topics, qrels, methods=("ql", "bm25", "bm25+rm3"), topics_name=name,
                   measures=MEASURES, runs_dir=runs_dir)
    ql_path = batch.path(Method("ql"))
    base = per_topic(_read(ql_path), qrels, ["AP"])["AP"]

    t0 = time.perf_counter()
    model, model_path = train_model(index, "lda", None, checkpoint=False, **train)
    train_s = time.perf_counter() - t0
    lda_run = run_topics(index, topics, lam=lam, model=model, progress=False)
    lda_path = batch.write(Method(model_path.stem, lam=lam, model=model_path), lda_run)
    p = model.get_params()
    rows.append({"method": f"LDA smoothing (K={p['n_topics']}, lam={lam:g})", **aggregate(lda_run, qrels, MEASURES)})

    paths = {LABELS[m]: batch.path(Method(m, mu=None)) for m in ("bm25", "bm25+rm3")}
    paths[rows[-1]["method"]] = lda_path
    for row in rows:
        path = paths.get(row["method"])
        row["p vs QL (t-test)"] = "baseline" if path is None else f"{_p_value(per_topic(_read(path), qrels, ['AP'])['AP'], base):.2g}"

    q = shlex.quote
    lines = [format_table(rows, title=f"{dataset}: {index.manifest['n_docs']} documents, {len(topics)} topics "
                                      f"(title queries, depth {DEPTH}, mu {MU:g}); MAP etc. are means over the "
                                      f"{len(judged)} judged topics, p: paired t-test on AP against QL"),
             R_NOTE, "",
             f"index:  {index.path}",
             f"model:  {model_path} (LDA K={p['n_topics']}, {p['n_chains']} chains x {p['n_iter']} sweeps, "
             f"trained in {train_s:.0f} s)",
             f"runs:   {ql_path}", *(f"        {path}" for path in paths.values()),
             f"total:  {time.perf_counter() - start:.0f} s", "",
             "Next: query interactively (try '#1', then ':why 1'), and write an HTML report of the four runs:", "",
             f"    topicir console --index {q(str(index.path))} --model {q(str(model_path))} "
             f"--topics {dataset} --qrels {dataset}",
             f"    topicir report {' '.join(q(str(x)) for x in [ql_path, *paths.values()])} --qrels {dataset} "
             f"--baseline {q(str(ql_path))} --out reports/{name}"]
    return "\n".join(lines)


def _read(path):
    from ..core.trec import read_run

    return read_run(Path(path))
