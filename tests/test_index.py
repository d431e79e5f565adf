"""Indexing through Anserini, collection statistics, atomic builds, exact QL scores."""
import gc
import json
import math

import numpy as np
import pytest

from retrieval.core.ranking import collecting_runs, rank, run_topics
from retrieval.core.index import Index, build_index
from retrieval.core.scoring import Scorer, _candidates, kth_largest, top_k
from retrieval.core.stats import CollectionStats, parse_term_positions
from retrieval.core.trec import Topic, TrecFormatError

TWO_DOCS = """<DOC>
<DOCNO> D1 </DOCNO>
<HEAD>Apples</HEAD>
<TEXT>apple banana apple</TEXT>
</DOC>
<DOC>
<DOCNO> D2 </DOCNO>
<TEXT>banana cherry, the cherry of cherries</TEXT>
</DOC>
"""


@pytest.fixture(scope="module")
def two_doc_index(tmp_path_factory) -> Index:
    root = tmp_path_factory.mktemp("idx")
    (root / "docs.trec").write_text(TWO_DOCS)
    return build_index([root / "docs.trec"], root / "two")


def test_parse_term_positions_handles_commas_in_terms():
    assert parse_term_positions("{3,000=[2], appl=[0, 5]}") == [("3,000", [2]), ("appl", [0, 5])]
    assert parse_term_positions("{}") == []


def test_stats_are_exact_counts_in_position_order(two_doc_index):
    s = two_doc_index.stats
    assert s.docnos == ["D1", "D2"]
    assert s.terms == ["appl", "banana", "cherri"]
    # D1: title "Apples" then text: appl appl banana appl; D2: banana cherri [the] cherri [of] cherri
    assert [s.terms[t] for t in s.term_ids[s.doc_ptr[0]:s.doc_ptr[1]]] == ["appl", "appl", "banana", "appl"]
    assert s.doc_len.tolist() == [4, 4]
    assert dict(zip(s.terms, s.cf.tolist())) == {"appl": 3, "banana": 2, "cherri": 3}
    assert s.df.tolist() == [1, 2, 1]
    # Stopwords leave gaps in positions (used later for collocations).
    d2 = s.positions[s.doc_ptr[1]:s.doc_ptr[2]].tolist()
    assert d2 == [0, 1, 3, 5]
    docs, tf = s.postings(s.term_index["banana"])
    assert docs.tolist() == [0, 1] and tf.tolist() == [1, 1]


def test_manifest_and_stored_documents(two_doc_index):
    m = two_doc_index.manifest
    assert m["n_docs"] == 2 and m["n_tokens"] == 8 and m["n_terms"] == 3
    assert m["analyzer"]["stemmer"] == "porter"
    assert m["fingerprint"] == two_doc_index.stats.fingerprint
    assert two_doc_index.document("D1")["title"] == "Apples"
    with pytest.raises(KeyError, match="NOPE"):
        two_doc_index.document("NOPE")


def test_ql_scores_match_hand_computation(two_doc_index):
    s = two_doc_index.stats
    scorer = Scorer(s, mu=1000.0, lam=1.0)
    scores = scorer.score(scorer.query("apples", two_doc_index.analyze("apples")))
    p_c = 3 / 8  # cf(appl) / tokens
    assert scores[0] == pytest.approx(math.log((3 + 1000 * p_c) / (4 + 1000)), rel=1e-12)
    assert scores[1] == pytest.approx(math.log((0 + 1000 * p_c) / (4 + 1000)), rel=1e-12)
    # Repeated query terms count twice; unknown terms are reported, not scored.
    q = scorer.query("apple apple zebra", two_doc_index.analyze("apple apple zebra"))
    assert q.weights.tolist() == [2.0] and q.unknown == ["zebra"]
    assert scorer.score(q)[0] == pytest.approx(2 * scores[0], rel=1e-12)


def test_mixture_with_a_topic_model(two_doc_index):
    s = two_doc_index.stats

    class Uniform:  # P_TM(w|d) = 1/3 for every term and doc
        def p_w_d(self, term_ids):
            return np.full((s.n_docs, len(term_ids)), 1 / 3)

    q = Scorer(s).query("cherry", ["cherri"])
    mixed = Scorer(s, mu=1000.0, lam=0.7, model=Uniform()).score(q)
    p_c = 3 / 8
    assert mixed[1] == pytest.approx(math.log(0.7 * (3 + 1000 * p_c) / 1004 + 0.3 / 3), rel=1e-12)
    # lam = 1 reproduces plain QL exactly.
    assert np.array_equal(Scorer(s, lam=1.0, model=Uniform()).score(q), Scorer(s, lam=1.0).score(q))
    # the frequencies' table the mixture kernel keeps between queries is left zero: a query after
    # another scores as alone
    assert not s.zeros_scratch(0).any()
    q2 = Scorer(s).query("apple banana", ["appl", "banana"])
    alone = Scorer(s, model=Uniform()).score(q2)
    s.__dict__.pop("_zeros_scratch")
    assert np.array_equal(Scorer(s, model=Uniform()).score(q2), alone)
    assert not s.zeros_scratch(0).any() and len(s.zeros_scratch(0)) == 2 * s.n_docs


def test_query_without_usable_terms_still_ranks(two_doc_index):
    with pytest.warns(UserWarning, match="topic 7: .*only stopwords"):
        hits = rank(two_doc_index, "7", "the of and")
    assert [h.docno for h in hits] == ["D1", "D2"] and all(h.score == 0.0 for h in hits)
    with pytest.warns(UserWarning, match="no indexed term"):
        run = run_topics(two_doc_index, [Topic("8", "zebra", "", "")], progress=False)
    assert len(run) == 2


def test_a_batch_pauses_the_cycle_collector_and_restores_it(two_doc_index, monkeypatch):
    """Run lines are made with the cyclic collector off (it would walk them all to find no
    cycle), which is on again afterwards, also after an error, and stays off if it was off."""
    seen = []
    real = Scorer.score
    monkeypatch.setattr(Scorer, "score", lambda self, *a, **k: seen.append(gc.isenabled()) or real(self, *a, **k))
    assert gc.isenabled()
    run_topics(two_doc_index, [Topic("1", "apple", "", ""), Topic("2", "cherry", "", "")], progress=False)
    assert seen == [False, False] and gc.isenabled()
    with pytest.raises(KeyError):
        with collecting_runs():
            raise KeyError("x")
    assert gc.isenabled()
    gc.disable()
    try:
        with collecting_runs():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_top_k_breaks_ties_by_doc_order():
    scores = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert top_k(scores, 2).tolist() == [1, 2]
    assert top_k(scores, 10).tolist() == [1, 2, 4, 3, 0]


@pytest.mark.parametrize("shape", ["normal", "ties", "ascending", "descending", "minus_inf"])
def test_top_k_is_the_head_of_the_full_sort(shape):
    """Against sorting everything by (-score, doc), and the k-th largest against the sorted
    scores; ascending scores take the selection's fallback (every score would enter its heap)."""
    rng = np.random.default_rng(7)
    for n in (1, 2, 50, 999, 5000, 50_000):
        scores = {"normal": rng.normal(size=n), "ties": rng.integers(0, 4, size=n).astype(float),
                  "ascending": np.sort(rng.normal(size=n)), "descending": -np.sort(rng.normal(size=n)),
                  "minus_inf": np.where(rng.random(n) < 0.5, -np.inf, rng.normal(size=n))}[shape]
        full = np.lexsort((np.arange(n), -scores))
        for k in (0, 1, 7, 1000, n // 2, n - 1, n, n + 3):
            assert top_k(scores, k).tolist() == full[:max(0, min(k, n))].tolist(), (n, k)
            if 1 <= k <= n:  # the pruned batch's threshold
                assert kth_largest(scores, k) == np.sort(scores)[n - k], (n, k)
    # a depth of 1000 among 50,000 scores goes through the sampled estimate
    assert _candidates(scores, 1000) is not None


def test_build_is_atomic_and_refuses_to_overwrite(tmp_path):
    (tmp_path / "bad.trec").write_text(TWO_DOCS + "<DOC>\n<DOCNO> D1 </DOCNO>\n<TEXT>again</TEXT>\n</DOC>\n")
    with pytest.raises(TrecFormatError, match=r"bad.trec:\d+: .*D1"):
        build_index([tmp_path / "bad.trec"], tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    # no temp dirs left behind, and no lock file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.trec"]
    (tmp_path / "good.trec").write_text(TWO_DOCS)
    first = build_index([tmp_path / "good.trec"], tmp_path / "idx")
    with pytest.raises(FileExistsError, match="--force"):
        build_index([tmp_path / "good.trec"], tmp_path / "idx")
    again = build_index([tmp_path / "good.trec"], tmp_path / "idx", force=True)
    assert again.fingerprint == first.fingerprint


def test_not_an_index(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a topicir index"):
        Index(tmp_path)


def test_empty_documents_are_left_out_with_a_warning(tmp_path):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "A", "contents": "alpha beta"}) + "\n"
                                      + json.dumps({"id": "B", "contents": "  "}) + "\n")
    with pytest.warns(UserWarning, match=r"1 documents have no text .*B \(.*d.jsonl:2\)"):
        index = build_index([tmp_path / "d.jsonl"], tmp_path / "idx")
    assert index.stats.docnos == ["A"]
    assert index.manifest["n_empty_docs_skipped"] == 1


def test_bad_jsonl_names_file_and_line(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"id": "A", "contents": "x"}\n{"id": "B"}\n')
    with pytest.raises(TrecFormatError, match=r"d.jsonl:2: expected a JSON object"):
        build_index([tmp_path / "d.jsonl"], tmp_path / "idx")


def test_stats_round_trip_through_memory_maps(two_doc_index, tmp_path):
    s = two_doc_index.stats
    s.save(tmp_path)
    t = CollectionStats.load(tmp_path)
    assert t.docnos == s.docnos and t.terms == s.terms and t.fingerprint == s.fingerprint
    assert np.array_equal(t.post_doc, s.post_doc) and np.array_equal(t.positions, s.positions)


def test_fast_scorer_agrees_with_the_term_by_term_twin(two_doc_index):
    from retrieval.core.scoring import explain

    s = two_doc_index.stats
    rng = np.random.default_rng(0)
    p_tm = rng.dirichlet(np.ones(s.n_terms), size=s.n_docs)

    class Dense:
        def p_w_d(self, term_ids):
            return p_tm[:, term_ids]

    q = Scorer(s).query("apple cherry apple banana", ["appl", "cherri", "appl", "banana"])
    for lam, model in ((1.0, None), (0.6, Dense())):
        scores = Scorer(s, mu=50.0, lam=lam, model=model).score(q)
        for d in range(s.n_docs):
            slow = explain(s, q, d, 50.0, lam, None if model is None else p_tm[d, q.term_ids])
            assert sum(t.score for t in slow) == pytest.approx(scores[d], abs=1e-12)


def test_relative_paths_after_the_jvm_started_and_the_cwd_changed(tmp_path, monkeypatch):
    """The JVM keeps the working directory it started in: paths handed to it must be absolute."""
    from retrieval.core.jvm import jclass

    jclass("java.lang.String")  # the JVM runs, started in the current directory
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.trec").write_text("<DOC>\n<DOCNO> X1 </DOCNO>\n<TEXT>airbus subsidies</TEXT>\n</DOC>\n")
    index = build_index(["d.trec"], "rel/idx")
    assert index.manifest["n_docs"] == 1 and index.document("X1")
    assert Index("rel/idx").stats.n_docs == 1
