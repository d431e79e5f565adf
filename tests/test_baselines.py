"""The Lucene baselines: the same runs as Anserini's SearchCollection writes, whichever way topics
are ranked (one thread, a batch), with every score as Java's ``%f`` prints it."""
from pathlib import Path

import numpy as np
import pytest

from retrieval.core.baselines import BASELINES, as_written, run_baseline
from retrieval.core.index import Index, build_index
from retrieval.core.jvm import jclass
from retrieval.core.sources import load_topics
from retrieval.core.trec import read_run, topic_query, write_run

DATA = Path(__file__).parent / "data"


def _java_percent_f(x: float) -> float:
    string, boxed, locale = jclass("java.lang.String"), jclass("java.lang.Float"), jclass("java.util.Locale")
    return float(string.format(locale.US, "%f", boxed(float(x))))


def test_scores_are_written_as_javas_percent_f():
    rng = np.random.default_rng(7)
    values = [
        rng.uniform(0, 40, 400),
        rng.integers(0, 2**14, 400) / 128,             # 7-decimal midpoints (x.0078125): Java rounds up
        np.round(rng.uniform(0, 40, 400), 4) - 1e-6 * rng.integers(0, 4, 400),  # Anserini's tie-broken scores
        [3.0078125, 100.0234375, 25000.0234375, 0.0000005, -0.0078125, 0.0, 12.3457],
    ]
    x = np.concatenate(values).astype(np.float32).astype(np.float64)
    expected = np.array([_java_percent_f(v) for v in x])
    assert np.array_equal(as_written(x), expected)
    # rounding the binary value instead would get the midpoints wrong
    assert sum(float(f"{v:.6f}") != e for v, e in zip(x, expected)) > 50


def _searchcollection_run(index: Index, topics, method: str, out: Path) -> list:
    """The run Anserini's SearchCollection writes for ``topics`` (title queries as topicir sends them)."""
    tsv = out.with_suffix(".tsv")
    tsv.write_text("".join(f"{t.qid}\t{' '.join(topic_query(t, 'title').split())}\n" for t in topics), encoding="utf-8")
    args = ["-qld", "-qld.mu", "1000.0"] if method == "qld" else ["-bm25", "-bm25.k1", "0.9", "-bm25.b", "0.4"]
    if method == "bm25+rm3":
        args += ["-rm3", "-rm3.fbDocs", "10", "-rm3.fbTerms", "10", "-rm3.originalQueryWeight", "0.5"]
    jclass("io.anserini.search.SearchCollection").main(
        ["-index", str(index.path.resolve()), "-topics", str(tsv), "-topicReader", "TsvString", "-output", str(out),
         "-hits", "1000", "-threads", "2", *args])
    return read_run(out)


@pytest.mark.parametrize("method", BASELINES)
def test_runs_are_searchcollections_run_files(med_index, shared_data, tmp_path, method):
    """Ranked in a batch or one topic at a time, a baseline writes the run file SearchCollection wrote."""
    topics = load_topics(shared_data / "med" / "topics.trec")
    reference = _searchcollection_run(med_index, topics, method, tmp_path / "anserini.txt")
    assert len(reference) > 20 * len(topics)
    write_run(tmp_path / "anserini-rewritten.txt", reference, tag="t")
    for threads in (1, 2):
        run = run_baseline(med_index, topics, method, progress=False, threads=threads)
        write_run(tmp_path / f"topicir{threads}.txt", run, tag="t")
        assert (tmp_path / f"topicir{threads}.txt").read_bytes() == (tmp_path / "anserini-rewritten.txt").read_bytes()


@pytest.fixture(scope="module")
def astral_index(tmp_path_factory) -> Index:
    src = tmp_path_factory.mktemp("astral") / "docs.trec"
    src.write_text("<DOC>\n<DOCNO> D1 </DOCNO>\n<TEXT>\n\U0001d400\U0001d401\U0001d402 rockets fly\n</TEXT>\n</DOC>\n"
                   "<DOC>\n<DOCNO> D2 </DOCNO>\n<TEXT>\nrockets land\n</TEXT>\n</DOC>\n", encoding="utf-8")
    return build_index([str(src)], src.parent / "index")


@pytest.mark.parametrize("threads", [1, 2])
def test_query_words_beyond_the_basic_plane_reach_lucene(astral_index, threads):
    """A query word of mathematical letters (beyond U+FFFF) finds the one document that has it."""
    from retrieval.core.trec import Topic

    topics = [Topic("1", "\U0001d400\U0001d401\U0001d402", "", ""), Topic("2", "rockets", "", "")]
    run = run_baseline(astral_index, topics, "bm25", progress=False, threads=threads)
    assert [r.docno for r in run if r.qid == "1"] == ["D1"]
    assert sorted(r.docno for r in run if r.qid == "2") == ["D1", "D2"]


@pytest.fixture(scope="module")
def mini_index(tmp_path_factory) -> Index:
    return build_index([str(DATA / "docs.trec")], tmp_path_factory.mktemp("mini") / "mini")


def test_depth_and_empty_queries(mini_index):
    topics = load_topics(DATA / "topics.trec")
    full = run_baseline(mini_index, topics, "bm25", progress=False)
    top2 = run_baseline(mini_index, topics, "bm25", progress=False, depth=2)
    for t in topics:
        ranked = [r for r in full if r.qid == t.qid]
        assert [r for r in top2 if r.qid == t.qid] == ranked[:2]
    from retrieval.core.trec import Topic

    with pytest.warns(UserWarning, match="topic 9: empty title query"):
        assert run_baseline(mini_index, [Topic("9", "  ", "", "")], "qld", progress=False) == []


def test_bench_times_each_baseline_against_pyserini(mini_index, monkeypatch):
    """bench ql's baselines table: a row per baseline, pyserini's batch search returning the same hits."""
    import os

    from retrieval.bench.ql import baseline_table

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    table = baseline_table(str(mini_index.path), str(DATA / "topics.trec"), repeats=1)
    assert [r["method"] for r in table.rows] == list(BASELINES)
    for row in table.rows:  # seconds to two decimals: a tiny index ranks in less than 0.005 s
        assert float(row["topicir s"]) >= 0 and float(row["pyserini s"]) >= 0 and row["hits"] > 0
    from retrieval.bench.lucene import compare
    from retrieval.core.sources import load_topics

    for row in compare(mini_index, load_topics(str(DATA / "topics.trec")), repeats=1):
        assert row["topicir s"] > 0 and row["pyserini s"] > 0 and row["ratio"] > 0 and row["hits"] > 0
    assert "OPENAI_API_KEY" not in os.environ  # the placeholder for pyserini's import is gone again
