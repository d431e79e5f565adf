"""The PyTerrier re-ranker (retrieval.pyterrier.TopicIRReranker): candidates of the index scored
as `topicir run` scores them, candidates given as text folded in."""
import math

import numpy as np
import pandas as pd
import pytest

pt = pytest.importorskip("pyterrier")

from retrieval.core.index import add_documents, build_index  # noqa: E402
from retrieval.core.modelfiles import train_model  # noqa: E402
from retrieval.core.ranking import run_topics  # noqa: E402
from retrieval.core.trec import Topic  # noqa: E402
from retrieval.pyterrier import TopicIRReranker, TopicIRRetriever  # noqa: E402

from test_growing_index import make_docs, trec  # noqa: E402

QUERIES = pd.DataFrame({"qid": ["1", "2"], "query": ["violin melody", "engine gear apple"]})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("rerank")
    old, added = make_docs(24, 0, 3), make_docs(6, 24, 4, new_words=("zeppelin",))
    (root / "old.trec").write_text(trec(old))
    (root / "added.trec").write_text(trec(added))
    base = build_index([root / "old.trec"], root / "base")
    model, path = train_model(base, "lda", root / "lda.npz", n_topics=3, alpha=0.1, n_chains=1, n_iter=20,
                              burn_in=10, sample_every=5, seed=0, progress=False)
    build_index([root / "old.trec"], root / "grown")
    grown = add_documents([root / "added.trec"], root / "grown")
    return dict(base=base, grown=grown, model=model, path=path, added=added)


def _run_scores(index, model, lam=0.7):
    topics = [Topic(q, t, "", "") for q, t in zip(QUERIES["qid"], QUERIES["query"])]
    run = run_topics(index, topics, model=model, lam=lam, depth=index.stats.n_docs, progress=False)
    return {(h.qid, h.docno): h.score for h in run}


@pytest.mark.parametrize("which", ["base", "grown"])
def test_candidates_of_the_index_score_as_topicir_run(setup, which):
    index = setup[which]
    want = _run_scores(index, setup["model"])
    docnos = index.stats.docnos[::3]  # old and (on the grown index) added documents
    frame = pd.DataFrame([(q, t, d) for q, t in zip(QUERIES["qid"], QUERIES["query"]) for d in docnos],
                         columns=["qid", "query", "docno"])
    res = TopicIRReranker(index, model=setup["path"], lam=0.7)(frame)
    assert len(res) == len(frame)
    for row in res.itertuples():
        assert row.score == want[(row.qid, row.docno)]
    for _, group in res.groupby("qid"):
        assert group["rank"].tolist() == list(range(len(group)))
        assert (np.diff(group["score"].to_numpy()) <= 0).all()


def test_pipeline_of_ql_then_rerank_equals_the_model_retriever(setup):
    base = setup["base"]
    pipeline = TopicIRRetriever(base) >> TopicIRReranker(base, model=setup["model"], lam=0.7)
    got = pipeline(QUERIES)
    want = TopicIRRetriever(base, model=setup["model"], lam=0.7)(QUERIES)
    pd.testing.assert_frame_equal(got[["qid", "docno", "score", "rank"]], want[["qid", "docno", "score", "rank"]])


def test_texts_outside_the_index_are_folded_in(setup):
    base, model = setup["base"], setup["model"]
    texts = dict(setup["added"])  # documents the base index does not hold
    inside = base.stats.docnos[:4]
    frame = pd.DataFrame([("1", "violin melody zeppelin", d, "") for d in inside]
                         + [("1", "violin melody zeppelin", d, t) for d, t in texts.items()],
                         columns=["qid", "query", "docno", "text"])
    res = TopicIRReranker(base, model=model, lam=0.7, mu=1000)(frame).set_index("docno")["score"]
    # the term-by-term formula, with P_TM of the texts from one fold-in of all of them (seed 0, every kept sample)
    s = base.stats
    analysed = {d: base.analyze(t) for d, t in texts.items()}
    folded = model.fold_in([[s.term_index[w] for w in terms if w in s.term_index] for terms in analysed.values()],
                           seed=0, samples=None)
    q = [s.term_index[w] for w in ("violin", "melodi")]  # zeppelin: not in the index, not in the query
    p_tm = folded.p_w_d(q)
    for i, (docno, terms) in enumerate(analysed.items()):
        want = sum(math.log(0.7 * (terms.count(s.terms[w]) + 1000 * s.p_c[w]) / (len(terms) + 1000)
                            + 0.3 * p_tm[i, j]) for j, w in enumerate(q))
        assert res[docno] == pytest.approx(want, rel=1e-12)
    topics = [Topic("1", "violin melody zeppelin", "", "")]
    want_inside = {h.docno: h.score for h in run_topics(base, topics, model=model, lam=0.7, depth=24, progress=False)}
    for d in inside:
        assert res[d] == want_inside[d]


def test_candidates_without_text_outside_the_index_are_refused(setup):
    frame = pd.DataFrame([("1", "violin", "NOT-THERE")], columns=["qid", "query", "docno"])
    with pytest.raises(ValueError, match="'NOT-THERE'.*no text column"):
        TopicIRReranker(setup["base"], model=setup["model"])(frame)


def test_experiment_with_the_reranker(setup):
    base = setup["base"]
    qrels = pd.DataFrame({"qid": ["1", "1", "2"], "docno": ["D002", "D005", "D001"], "label": [1, 1, 1]})
    table = pt.Experiment([TopicIRRetriever(base) % 10 >> TopicIRReranker(base, model=setup["model"])],
                          QUERIES, qrels, eval_metrics=["map"], names=["QL>>LDA"])
    assert 0 < table["map"].iloc[0] <= 1
