"""TCM over an index: token sequences with splits, query segmentation, collocation scoring, CLI."""
import json
import math
import weakref
from pathlib import Path

import numpy as np
import pytest

from retrieval.core.ranking import run_topics, sweep_topics
from retrieval.ui.cli import main
from retrieval.core.index import build_index
from retrieval.core.modelfiles import load_model, train_model
from retrieval.core.scoring import Scorer
from retrieval.adapters.tcm_sequences import (SPLITS_FILE, SPLITS_META, collocation_postings, index_splits,
                                 mark_punctuation, query_collocations, query_sequence, stopword_splits)
from retrieval.core.sources import load_topics
from retrieval.core.stats import STATS_DIR
from tests.helpers import med_map_of_default_model

DATA = Path(__file__).parent / "data"
DOCS = """<DOC>
<DOCNO> D1 </DOCNO>
<TEXT>The boundary layer, in simple shear flow. Heat transfer (rates) measured near the boundary layer</TEXT>
</DOC>
<DOC>
<DOCNO> D2 </DOCNO>
<TEXT>heat transfer in a boundary layer; shear flow past "plates" -- boundary layer heat transfer</TEXT>
</DOC>
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tcm")
    (root / "docs.trec").write_text(DOCS)
    return build_index([root / "docs.trec"], root / "tiny")


def doc_view(index, split, d):
    """Doc d as 'term term | term ...' with | at every split."""
    s = index.stats
    out = []
    for i in range(s.doc_ptr[d], s.doc_ptr[d + 1]):
        out.append(s.terms[s.term_ids[i]])
        if split[i]:
            out.append("|")
    return " ".join(out)


def test_punctuation_is_marked():
    assert mark_punctuation('flow. Heat (rates) "x", y -- z') == \
        'flow qqsplitqq  Heat  qqsplitqq rates qqsplitqq   qqsplitqq x qqsplitqq  qqsplitqq  y  qqsplitqq  z'
    assert mark_punctuation("U.S.A. 3,000 e.g. a/b") == "U.S.A qqsplitqq  3,000 e.g qqsplitqq  a/b"


def test_splits_from_stopwords_and_punctuation(tiny):
    split = index_splits(tiny, progress=False)
    assert split.dtype == np.uint8 and split.shape == (tiny.stats.n_tokens,)
    assert doc_view(tiny, split, 0) == "boundari layer | simpl shear flow | heat transfer | rate | measur near | boundari layer |"
    assert doc_view(tiny, split, 1) == "heat transfer | boundari layer | shear flow past | plate | boundari layer heat transfer |"
    # stopword gaps alone: positions in the index
    assert doc_view(tiny, stopword_splits(tiny.stats), 0) == \
        "boundari layer | simpl shear flow heat transfer rate measur near | boundari layer |"
    # cached beside the index and tied to its fingerprint
    folder = tiny.path / STATS_DIR
    meta = json.loads((folder / SPLITS_META).read_text())
    assert meta["fingerprint"] == tiny.fingerprint and meta["n_fallback"] == 0
    np.save(folder / SPLITS_FILE, np.zeros_like(split))  # a cache is trusted when its meta matches
    assert index_splits(tiny, progress=False).sum() == 0
    meta["fingerprint"] = "another-index"
    (folder / SPLITS_META).write_text(json.dumps(meta))  # ... and recomputed when it does not
    np.testing.assert_array_equal(index_splits(tiny, progress=False), split)


def test_computing_the_splits_hands_the_jvm_heap_back(tiny):
    # the heap that reading every stored document committed would stay beside the training
    from retrieval.core.jvm import jclass

    runtime = jclass("java.lang.Runtime").getRuntime()
    garbage = jclass("java.nio.ByteBuffer").allocate(256 * 2**20)  # the heap grown, as by a read
    assert runtime.totalMemory() >= 256 * 2**20
    del garbage
    for name in (SPLITS_FILE, SPLITS_META):
        (tiny.path / STATS_DIR / name).unlink(missing_ok=True)
    index_splits(tiny, progress=False)
    assert runtime.totalMemory() < 128 * 2**20


def test_query_sequence_and_collocation_postings(tiny):
    q = query_sequence(tiny, "Boundary layers in the heat-transfer of zebras, shear flow")
    assert q.terms == ["boundari", "layer", "heat", "transfer", "shear", "flow"]
    assert q.split.tolist() == [0, 1, 0, 1, 0, 0]  # stopwords, an unknown term and a comma split
    assert q.unknown == ["zebra"]
    s = tiny.stats
    split = index_splits(tiny, progress=False)
    bl = [s.term_index["boundari"], s.term_index["layer"]]
    docs, tf, cf = collocation_postings(s, split, bl)
    assert docs.tolist() == [0, 1] and tf.tolist() == [2, 2] and cf == 4
    # "layer heat" is adjacent in D2 only; in D1 a split (comma + stopword) lies between them
    lh = [s.term_index["layer"], s.term_index["heat"]]
    docs, tf, cf = collocation_postings(s, split, lh)
    assert docs.tolist() == [1] and cf == 1
    assert collocation_postings(s, split, [s.term_index["flow"], s.term_index["heat"]])[2] == 0


def _scan_postings(stats, split, c):
    """The reference: every token of the collection tried as the collocation's start."""
    tok, M = np.asarray(stats.term_ids), len(c)
    hits = [i for i in range(len(tok) - M + 1)
            if all(tok[i + j] == c[j] for j in range(M)) and not split[i:i + M - 1].any()]
    docs = np.searchsorted(np.asarray(stats.doc_ptr), hits, side="right") - 1
    u, tf = np.unique(docs, return_counts=True)
    return u.tolist(), tf.tolist(), len(hits)


def test_collocation_postings_read_the_documents_with_every_term_as_a_full_scan_does():
    from retrieval.core.stats import CollectionStats

    rng = np.random.default_rng(5)
    lens = np.concatenate([[0], rng.integers(0, 30, size=40)])
    ids = rng.integers(0, 6, size=int(lens.sum())).astype(np.int32)  # few terms: many repeats
    stats = CollectionStats.from_arrays([f"D{i}" for i in range(40)], {f"t{i}": i for i in range(6)},
                                        lens, ids, np.arange(len(ids), dtype=np.int32))
    split = (rng.random(len(ids)) < 0.2).astype(np.uint8)
    split[np.cumsum(lens)[1:][lens[1:] > 0] - 1] = 1  # a document's last token, as index_splits has it
    seen = 0
    for c in ([0, 1], [2, 2], [3, 3, 3], [1, 4, 0], [5, 0, 5, 0], [4]):
        docs, tf, cf = collocation_postings(stats, split, c)
        assert (docs.tolist(), tf.tolist(), cf) == _scan_postings(stats, split, c), c
        seen += cf
    assert seen > 50  # the collocations do occur, overlapping repeats ("t3 t3 t3") included
    with pytest.raises(ValueError, match="out of the index"):
        collocation_postings(stats, split, [0, 6])


def test_collocation_scores_match_hand_computation(tiny):
    s = tiny.stats
    scorer = Scorer(s, mu=10.0, lam=0.6, model=object())  # without a model, lam would be 1
    query = scorer.query("heat transfer", tiny.analyze("heat transfer"))
    p_w = np.array([[0.1, 0.2], [0.3, 0.05]])  # P_TM(w|d), query terms in id order
    p_tm = np.array([[0.02], [0.04]])           # P_TM(c|d) of the collocation "heat transfer"
    postings = [(np.array([0, 1], dtype=np.int32), np.array([1, 2], dtype=np.int32))]
    p_c = np.array([3 / s.n_tokens])
    got = scorer.score_collocations(query, p_w, postings, p_c, p_tm, omega=0.5)
    for d in range(2):
        want = 0.0
        for j, w in enumerate(query.term_ids):
            docs, tf = s.postings(w)
            tfd = dict(zip(docs.tolist(), tf.tolist())).get(d, 0)
            p_ql = (tfd + 10.0 * s.p_c[w]) / (s.doc_len[d] + 10.0)
            want += math.log(0.6 * p_ql + 0.4 * p_w[d, j])
        p_ql_c = ([1, 2][d] + 10.0 * p_c[0]) / (s.doc_len[d] + 10.0)
        want += 0.5 * math.log(0.6 * p_ql_c + 0.4 * p_tm[d, 0])
        assert got[d] == pytest.approx(want, rel=1e-12)
    # omega = 0 and lam = 1 fall back to the per-term scores
    np.testing.assert_array_equal(scorer.score_collocations(query, p_w, postings, p_c, p_tm, omega=0.0),
                                  Scorer(s, mu=10.0, lam=0.6, model=type("M", (), {"p_w_d": lambda self, t: p_w})()).score(query))
    ql = Scorer(s, mu=10.0, lam=1.0)
    np.testing.assert_array_equal(Scorer(s, mu=10.0, lam=1.0, model=object()).score_collocations(
        query, p_w, postings, p_c, p_tm), ql.score(query))


@pytest.fixture(scope="module")
def mini_tcm(tmp_path_factory):
    root = tmp_path_factory.mktemp("tcm-mini")
    index = build_index([DATA / "docs.trec"], root / "mini")
    model, path = train_model(index, "tcm", root / "tcm.npz", progress=False, n_topics=3, n_chains=2,
                              n_iter=12, burn_in=6, sample_every=3, seed=1)
    return index, model, path


def test_tcm_model_on_an_index(mini_tcm):
    index, model, path = mini_tcm
    loaded = load_model(path, index)
    assert type(loaded).__name__ == "TCM" and loaded.n_samples_ == 2
    p = loaded.p_w_d(np.arange(index.stats.n_terms))
    assert p.shape == (index.stats.n_docs, index.stats.n_terms) and (p > 0).all()
    topics = load_topics(DATA / "topics.trec")
    runs = sweep_topics(index, topics, [(1000.0, 0.7), (500.0, 1.0)], model=loaded, progress=False)
    for (mu, lam), run in runs.items():
        assert run == run_topics(index, topics, mu=mu, lam=lam, model=loaded, progress=False)
    assert runs[(500.0, 1.0)] == run_topics(index, topics, mu=500.0, lam=1.0, progress=False)
    col = query_collocations(index, loaded, "Airbus Subsidies")
    assert len(col.seg_ptr) == len(col.terms) + 1


@pytest.mark.filterwarnings("ignore:topic 6")  # the unknown word's query
@pytest.mark.parametrize("table_bytes", [1, 10**9])
def test_a_batch_computes_its_term_and_collocation_tables_together_and_ranks_as_one_query_at_a_time(
        mini_tcm, monkeypatch, table_bytes):
    """batch_tables: the terms and collocations of a group of queries (one query a group under a
    1-byte budget, all in one otherwise) in one pass of the model, each query's tables its own;
    a run ranks as each query alone (the console's path)."""
    from retrieval.adapters.tcm import phrase_rows
    from retrieval.core import ranking
    from retrieval.core.trec import Topic

    index, model, _ = mini_tcm
    texts = [t for t, _ in phrase_rows(model, index.stats.terms, top=6)] + ["zzzunknownzzz", "airbus"]
    texts[1] += " subsidies " + texts[2]  # two collocations in one query
    calls = []
    real = model.p_c_d
    monkeypatch.setattr(model, "p_c_d", lambda ids, ptr: calls.append(len(ptr) - 1) or real(ids, ptr))
    got = list(ranking.batch_tables(index, texts, model, table_bytes=table_bytes))
    assert got[-2] == (None, (None, None)) and got[-1][1] == (None, None)
    n_terms = [p_w.shape[1] for p_w, _ in got[:-2]] + [got[-1][0].shape[1]]
    n_parts = [len(e.postings) for _, (e, _) in got[:-2]]
    assert min(n_parts) >= 1 and n_parts[1] >= 2
    if table_bytes == 1:  # a group per query: its terms and its collocations in one call
        assert calls == [t + p for t, p in zip(n_terms, n_parts + [0])]
    else:
        union = {w for text in texts for w in ranking.prepare(index, text, warn=False).query.term_ids.tolist()}
        assert calls == [len(union) + sum(n_parts)]
    for text, (p_w, (extra, table)) in zip(texts, got):
        alone = ranking.prepare(index, text, model, warn=False)
        if alone.p_w is None:
            assert p_w is None
            continue
        np.testing.assert_allclose(p_w, alone.p_w, rtol=1e-13, atol=0)
        if alone.p_extra is None:
            assert extra is None and table is None
            continue
        assert extra.labels == alone.extra.labels and table.shape == alone.p_extra.shape
        np.testing.assert_allclose(table, alone.p_extra, rtol=1e-13, atol=0)
    topics = [Topic(str(i), t, "", "") for i, t in enumerate(texts)]
    monkeypatch.setattr(ranking, "TABLE_BYTES", table_bytes)
    run = run_topics(index, topics, model=model, progress=False)
    one_by_one = [d for t in topics for d in ranking.rank(index, t.qid, t.title, model=model)]
    assert [(d.qid, d.docno) for d in run] == [(d.qid, d.docno) for d in one_by_one]
    np.testing.assert_allclose([d.score for d in run], [d.score for d in one_by_one], rtol=1e-12)


def test_a_group_s_tables_are_freed_before_the_next_group_s_call(mini_tcm, monkeypatch):
    """While the model computes a group's tables, no earlier group's table is alive, though the
    consumer still holds the last query it was given (as a run's loop does): the queries' term and
    collocation tables are their own copies, so groups' tables never add up."""
    from retrieval.adapters.tcm import phrase_rows
    from retrieval.core import ranking

    index, model, _ = mini_tcm
    texts = [t for t, _ in phrase_rows(model, index.stats.terms, top=4)]
    tables, alive = [], []
    real = model.p_c_d

    def spy(ids, ptr):
        alive.append([t() is not None for t in tables])
        out = real(ids, ptr)
        tables.append(weakref.ref(out.base))
        return out
    monkeypatch.setattr(model, "p_c_d", spy)
    held = []
    for p_w, (extra, table) in ranking.batch_tables(index, texts, model, table_bytes=1):
        assert extra is not None and not any(np.shares_memory(table, t) for t in held)
        held = [p_w, table]
    assert alive == [[False] * i for i in range(len(texts))]


def test_smoothing_retrains_a_cached_model_of_other_defaults(tmp_path):
    """The cached file's name holds K, chains, sweeps and seed only: a TCM trained under the old
    defaults (alpha0 = 100, resampled) at that path is retrained, a current one reused."""
    from models.common.checkpoint import read_header
    from retrieval.core.modelfiles import default_model_path
    from retrieval.experiments.smoothing import _model

    index = build_index([DATA / "docs.trec"], tmp_path / "mini")
    train = dict(n_chains=1, n_iter=4, burn_in=2, sample_every=2, seed=0)
    path = default_model_path(index, "tcm", dict(train, n_topics=3))
    train_model(index, "tcm", path, progress=False, n_topics=3, alpha0=100.0, resample_alpha0=True,
                **train)
    model = _model(index, "tcm", 3, train)
    params = {k: v for k, v in model.get_params().items() if k != "executor"}  # not written to files
    assert params["alpha0"] is None and read_header(path)["params"] == params
    stamp = path.stat().st_mtime_ns
    assert _model(index, "tcm", 3, train).get_params() == model.get_params()
    assert path.stat().st_mtime_ns == stamp


def test_cli_train_view_and_run(tmp_path, capsys):
    idx = tmp_path / "ap-mini"
    assert main(["-q", "index", str(DATA / "docs.trec"), "--out", str(idx)]) == 0
    out = tmp_path / "tcm.npz"
    assert main(["-q", "train", "tcm", "--index", str(idx), "--out", str(out), "--topics", "3",
                 "--chains", "1", "--iterations", "6", "--burn-in", "3", "--sample-every", "3",
                 "--sampler", "exact", "--max-len", "4"]) == 0
    assert out.exists() and not Path(str(out) + ".ckpt").exists()
    capsys.readouterr()
    assert main(["-q", "tcm-view", "--index", str(idx), "--model", str(out), "--topics", "2", "--top", "3"]) == 0
    view = capsys.readouterr().out
    assert "by P(c|t):" in view and "by P(t|c):" in view and view.count("topic ") == 2
    assert main(["-q", "run", "--index", str(idx), "--topics", str(DATA / "topics.trec"), "--model", str(out),
                 "--lam", "0.8", "--out-dir", str(tmp_path / "runs")]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "run.ap-mini.topics.title.tcm.mu1000_lam0.8.txt", "run.ap-mini.topics.title.tcm.mu1000_lam0.8.txt.json"]
    assert main(["-q", "tcm-view", "--index", str(idx), "--model", str(tmp_path / "nope.npz")]) == 2


# MAP of TCM smoothing on med (K = 800, 3 chains x 100 sweeps, seed 0; mu = 1000, lam = 0.7,
# title queries, depth 1000), as `topicir reproduce smoothing --kind tcm` reports it; QL is 0.4955. Under
# the paper's priors (alpha = 1 / K, alpha0 resampled to ~18) it was 0.5467; LDA K = 800 gives 0.6229.
EXPECTED_TCM_MED = 0.6143


@pytest.mark.regression
@pytest.mark.long
def test_tcm_smoothing_on_med(shared_data, med_index):
    from retrieval.adapters.tcm import phrase_rows

    maps, index, model = med_map_of_default_model(shared_data, med_index, "tcm")
    assert maps[1.0] == pytest.approx(0.4955, abs=0.005)
    assert maps[0.7] == pytest.approx(EXPECTED_TCM_MED, abs=0.01) and maps[0.7] > 0.6
    phrases = [p for p, _ in phrase_rows(model, index.stats.terms, top=30)]
    assert {"guinea pig", "fatti acid", "septal defect", "amino acid"} <= set(phrases)


def test_console_iterations_and_run_score_a_tcm_model_alike(mini_tcm):
    """The one ranking path: `topicir run`, the console and `topicir iterations` all add the
    collocation term of a TCM model's query segmentation."""
    from retrieval.core.ranking import prepare
    from retrieval.experiments.iterations import iteration_table
    from retrieval.core.trec import read_qrels
    from retrieval.ui.console import Session

    index, _, path = mini_tcm
    model = load_model(path, index)
    topics = load_topics(DATA / "topics.trec")
    rail = next(t for t in topics if t.title == "Rail Strikes")
    assert query_collocations(index, model, rail.title).terms == ["rail strike"]
    run = run_topics(index, [rail], mu=1000.0, lam=0.7, model=model, progress=False)
    session = Session(index, mu=1000.0, lam=0.7, model=model)
    result = session.rank(rail.title, qid=rail.qid)
    assert [index.stats.docnos[d] for d in result.docs] == [r.docno for r in run]
    np.testing.assert_array_equal(result.scores, [r.score for r in run])
    # the collocation term is there: without it the scores differ
    plain = Scorer(index.stats, 1000.0, 0.7, model).score(result.query)
    assert not np.allclose(np.sort(plain)[::-1][:len(run)], result.scores)
    # iterations ranks per kept sample; averaging every sample's tables gives run's scores
    per = prepare(index, rail.title, model, per_sample=True)
    assert per.p_extra.shape[:2] == (model.n_chains, model.n_samples_)
    got = per.scores(1000.0, 0.7)
    want = np.array([r.score for r in run])
    np.testing.assert_allclose(got[[index.stats.doc_index[r.docno] for r in run]], want, rtol=1e-12)
    qrels = [q for q in read_qrels(DATA / "qrels.txt") if q.qid == rail.qid]
    rows = iteration_table(index, model, [rail], qrels, mu=1000.0, lam=0.7)
    assert [r["iteration"] for r in rows] == model.sample_iter_.tolist()
