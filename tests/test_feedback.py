"""Pseudo-relevance feedback (retrieval.core.feedback): the relevance model against a direct
numpy computation, RM3's behaviour with and without a topic model, topic-level feedback with
planted topics, and every registered kind through the model protocol."""
import numpy as np
import pytest

from models import registry
from retrieval.core.feedback import (FeedbackQuery, Settings, expand, p_tm_rows, query_topics,
                                     relevance_model, run_feedback, topic_words_model)
from retrieval.core.ranking import prepare
from retrieval.core.trec import Topic
from tests.test_conformance import collection, trained, wordnet_for_tree_lda  # noqa: F401 (fixtures)

CAR = "car automobile engine motor vehicle driver road wheel traffic speed".split()
DOCTOR = "doctor physician medicine hospital patient nurse illness disease treatment health".split()
RIVER = "river stream water bank flood lake rain shore boat fish".split()


@pytest.fixture(scope="module")
def themed(tmp_path_factory):
    """30 one-theme documents: car (0-9; 'engine' only in 0-4), doctor (10-19), river (20-29)."""
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("feedback")
    rng = np.random.default_rng(1)
    docs = []
    for d in range(30):
        words = [CAR, DOCTOR, RIVER][d // 10]
        if d < 10:
            words = [w for w in words if w != "engine"]
        text = list(rng.choice(words, size=int(rng.integers(20, 30))))
        if d < 5:
            text += ["engine"] * 3
        docs.append(f"<DOC>\n<DOCNO> F{d:03d} </DOCNO>\n<TEXT>\n{' '.join(text)}.\n</TEXT>\n</DOC>\n")
    (root / "docs.trec").write_text("".join(docs))
    return build_index([root / "docs.trec"], root / "index")


@pytest.fixture(scope="module")
def themed_lda(themed, tmp_path_factory):
    from retrieval.core.modelfiles import train_model

    params = dict(registry.model_class("lda").quick_params, n_topics=3, n_iter=300, burn_in=200,
                  sample_every=20)
    return train_model(themed, "lda", tmp_path_factory.mktemp("lda") / "lda.npz", progress=False,
                       **params)[0]


def analysed(index, words):
    return {index.analyze(w)[0] for w in words}


def dense_tf(stats):
    tf = np.zeros((stats.n_docs, stats.n_terms))
    for d in range(stats.n_docs):
        np.add.at(tf[d], stats.term_ids[stats.doc_ptr[d]:stats.doc_ptr[d + 1]], 1)
    return tf


def direct_rm(stats, docs, log_lik, mu, lam=1.0, p_tm=None):
    """P(w|R) written out over the whole vocabulary, then restricted to the documents' terms."""
    tf = dense_tf(stats)[docs]
    length = tf.sum(1, keepdims=True)
    p = (tf + mu * stats.p_c[None, :]) / (length + mu)
    if p_tm is not None:
        p = lam * p + (1 - lam) * p_tm[docs]
    w = np.exp(log_lik - np.max(log_lik))
    rm = (w / w.sum()) @ p
    present = tf.sum(0) > 0
    return {int(t): rm[t] / rm[present].sum() for t in np.flatnonzero(present)}


@pytest.mark.parametrize("mu", [0.0, 1000.0])
def test_relevance_model_matches_numpy(themed, themed_lda, mu):
    stats = themed.stats
    fq = FeedbackQuery(themed, "engine road", mu=1000.0)
    docs = fq.top_docs(4)
    ids, p = relevance_model(stats, docs, fq.first[docs], mu=mu)
    assert p.sum() == pytest.approx(1.0) and (np.diff(p) <= 0).all()
    want = direct_rm(stats, docs, fq.first[docs], mu)
    assert set(ids.tolist()) == set(want)
    np.testing.assert_allclose(p, [want[int(t)] for t in ids], rtol=1e-12)
    # with a topic model: the smoothed document models of the topic-smoothed ranking
    fq = FeedbackQuery(themed, "engine road", themed_lda, mu=1000.0, lam=0.7)
    docs = fq.top_docs(4)
    ids, p = relevance_model(stats, docs, fq.first[docs], mu=mu, lam=0.7, model=themed_lda)
    want = direct_rm(stats, docs, fq.first[docs], mu, 0.7, themed_lda.p_w_d(np.arange(stats.n_terms)))
    assert p.sum() == pytest.approx(1.0) and set(ids.tolist()) == set(want)
    np.testing.assert_allclose(p, [want[int(t)] for t in ids], rtol=1e-10)


def test_p_tm_rows_chunked_equals_full(themed, themed_lda):
    terms = np.arange(themed.stats.n_terms)
    docs = np.array([7, 2, 25])
    full = themed_lda.p_w_d(terms)[docs]

    class Whole:  # a document model with p_w_d only: read a chunk of terms at a time
        p_w_d = staticmethod(themed_lda.p_w_d)
    np.testing.assert_array_equal(p_tm_rows(Whole(), terms, docs, 30, chunk_cells=61), full)
    np.testing.assert_allclose(p_tm_rows(themed_lda, terms, docs, 30), full, rtol=1e-12)


def test_rm3_expands_from_the_relevant_top_documents(themed):
    """'engine' is in car documents 0-4 only; the five feedback documents are all relevant, the
    expansion holds car words only, and the expanded query ranks all ten car documents first
    (QL cannot: five of them lack the query's word)."""
    stats = themed.stats
    fq = FeedbackQuery(themed, "engine", mu=1000.0)
    s = Settings(fb_docs=5, fb_terms=6, original_weight=0.5, fb_max_df=1.0)  # a theme's words: in 1/3 of them
    scores, ex = fq.scores(s)
    assert sorted(ex.docs) == [f"F{d:03d}" for d in range(5)]
    assert {t for t, _ in ex.feedback} <= analysed(themed, CAR) and len(ex.feedback) == 6
    assert sum(w for _, w in ex.feedback) == pytest.approx(1.0)
    assert sum(w for _, w in ex.terms) == pytest.approx(1.0)
    weights = dict(ex.terms)
    assert weights["engin"] >= 0.5 and ex.terms[0][0] == "engin"
    # every feedback term occurs in a feedback document
    top_terms = {stats.terms[t] for d in fq.top_docs(5) for t in stats.term_ids[stats.doc_ptr[d]:stats.doc_ptr[d + 1]]}
    assert {t for t, _ in ex.feedback} <= top_terms
    car = set(range(10))
    assert set(np.argsort(-scores, kind="stable")[:10].tolist()) == car
    assert set(np.argsort(-fq.first, kind="stable")[:10].tolist()) != car


@pytest.mark.parametrize("with_model", [False, True])
def test_original_weight_one_ranks_as_without_feedback(themed, themed_lda, with_model):
    model = themed_lda if with_model else None
    fq = FeedbackQuery(themed, "engine water engine", model, mu=1000.0, lam=0.7)
    for method in ("rm3", "topics") if with_model else ("rm3",):
        scores, ex = fq.scores(Settings(method=method, original_weight=1.0))
        np.testing.assert_array_equal(scores, prepare(themed, "engine water engine", model).scores(1000.0, 0.7))
        assert dict(ex.terms) == pytest.approx({"engin": 2 / 3, "water": 1 / 3})


def test_expand_weights():
    from retrieval.core.scoring import Query

    q = Query("a b a", ["a", "b", "a"], np.array([3, 5]), np.array([2.0, 1.0]), [])
    out, ids, p = expand(q, np.array([9, 3, 7, 1]), np.array([0.4, 0.3, 0.2, 0.1]), 2, 0.25)
    assert ids.tolist() == [9, 3] and p == pytest.approx([4 / 7, 3 / 7])
    got = dict(zip(out.term_ids.tolist(), out.weights / 3))
    assert got == pytest.approx({3: 0.25 * 2 / 3 + 0.75 * 3 / 7, 5: 0.25 / 3, 9: 0.75 * 4 / 7})
    assert out.weights.sum() == pytest.approx(3.0)


class PlantedModel:
    """A protocol model with planted topics: topic k is the k-th theme's words; documents of
    theme k put 0.8 on topic k. Two chains, the second with its topics in reverse order."""
    n_topics, n_chains, kind = 3, 2, "planted"

    def __init__(self, index):
        stats = index.stats
        self.phi = np.full((3, stats.n_terms), 1e-3)
        for k, words in enumerate((CAR, DOCTOR, RIVER)):
            for i, w in enumerate(words):  # the theme's words in decreasing probability
                self.phi[k, stats.term_index[index.analyze(w)[0]]] = 1.0 + 0.01 * (10 - i)
        self.phi /= self.phi.sum(1, keepdims=True)
        self.theta = np.full((stats.n_docs, 3), 0.1)
        self.theta[np.arange(stats.n_docs), np.arange(stats.n_docs) // 10] = 0.8

    def _order(self, chain):
        return [0, 1, 2] if chain == 0 else [2, 1, 0]

    def p_w_d(self, term_ids):
        return self.theta @ self.phi[:, np.asarray(term_ids, dtype=np.int64)]

    def doc_topics(self, doc, top=10, chain=0):
        mix = self.theta[doc][self._order(chain)]  # chain 1 numbers the topics backwards
        ids = np.argsort(-mix, kind="stable")[:top]
        return ids, mix[ids]

    def topic_words(self, topic, top=10, chain=0):
        row = self.phi[self._order(chain)[topic]]
        ids = np.argsort(-row, kind="stable")[:top]
        return ids, row[ids]


def test_topic_feedback_picks_the_planted_topic(themed):
    model = PlantedModel(themed)
    docs = np.array([10, 12, 15])  # doctor documents
    theta = query_topics(model, docs, chain=0)
    np.testing.assert_allclose(theta, [0.1, 0.8, 0.1])
    np.testing.assert_allclose(query_topics(model, docs, chain=1), [0.1, 0.8, 0.1][::-1])
    ids, p, picked = topic_words_model(model, docs, fb_topics=1, fb_terms=5)
    assert picked == [(0, 1, pytest.approx(0.8)), (1, 1, pytest.approx(0.8))]
    terms = [themed.stats.terms[t] for t in ids]
    assert terms == [themed.analyze(w)[0] for w in DOCTOR[:5]]  # the planted topic's five heaviest
    assert p.sum() == pytest.approx(1.0)
    # two topics a chain: the doctor topic, then the first of the tied others (car in chain 0,
    # river in chain 1), each word weighted P(k|Q) P(w|k)
    ids, p, picked = topic_words_model(model, docs, fb_topics=2, fb_terms=3)
    assert [(c, k) for c, k, _ in picked] == [(0, 1), (0, 0), (1, 1), (1, 0)]
    assert len(ids) == 9 and p.sum() == pytest.approx(1.0)
    doctor = np.isin([themed.stats.terms[t] for t in ids], [themed.analyze(w)[0] for w in DOCTOR])
    assert doctor[:3].all() and doctor.sum() == 3
    assert p[doctor].min() > 7 * p[~doctor].max()


def test_topic_feedback_run_with_planted_model(themed):
    """A doctor query: the first pass's top documents are doctor documents, the expansion is
    the doctor topic's words, and all ten doctor documents rank first."""
    model = PlantedModel(themed)
    run, expansions = run_feedback(themed, [Topic("1", "physician hospital", "", "")],
                                   Settings(method="topics", fb_docs=3, fb_topics=1, fb_terms=8, fb_max_df=1.0),
                                   model=model, progress=False)
    ex = expansions["1"]
    assert ex.topics[0][1:] == (1, pytest.approx(0.8, abs=0.01)) and ex.method == "topics"
    assert {t for t, _ in ex.feedback} <= analysed(themed, DOCTOR) and len(ex.feedback) == 8
    assert {r.docno for r in run[:10]} == {f"F{d:03d}" for d in range(10, 20)}
    assert ex.as_dict()["terms"][0][1] == pytest.approx(max(w for _, w in ex.terms))


def test_lda_feedback_finds_the_theme(themed, themed_lda):
    """A trained LDA on three clean themes: both feedbacks from an 'engine' query expand with
    car words and rank the ten car documents first."""
    car = set(range(10))
    fq = FeedbackQuery(themed, "engine", themed_lda, mu=1000.0, lam=0.7)
    for s in (Settings(fb_docs=5, fb_terms=6, fb_max_df=1.0),
              Settings(method="topics", fb_docs=5, fb_topics=1, fb_terms=6, fb_max_df=1.0)):
        scores, ex = fq.scores(s)
        assert {t for t, _ in ex.feedback} <= analysed(themed, CAR), s
        assert set(np.argsort(-scores, kind="stable")[:10].tolist()) == car, s


def test_settings_are_checked():
    with pytest.raises(ValueError, match="feedback method"):
        Settings(method="rocchio")
    with pytest.raises(ValueError, match="fb_docs"):
        Settings(fb_docs=0)
    with pytest.raises(ValueError, match="original_weight"):
        Settings(original_weight=1.5)


def test_topic_feedback_needs_a_model(themed):
    with pytest.raises(ValueError, match="needs a topic model"):
        FeedbackQuery(themed, "engine").scores(Settings(method="topics"))


@pytest.mark.parametrize("kind", registry.kinds())
def test_every_kind_through_the_protocol(collection, trained, kind):  # noqa: F811
    """RM3 over the topic-smoothed ranking and topic feedback, for every registered kind: the
    relevance model matches the direct computation from p_w_d, expansions are distributions
    over terms of the collection, scores are finite, weight 1 ranks as smoothing does."""
    model, _ = trained(kind)
    stats = collection.stats
    text = "doctor hospital"
    fq = FeedbackQuery(collection, text, model, mu=1000.0, lam=0.7)
    docs = fq.top_docs(5)
    ids, p = relevance_model(stats, docs, fq.first[docs], mu=0.0, lam=0.7, model=model)
    want = direct_rm(stats, docs, fq.first[docs], 0.0, 0.7, model.p_w_d(np.arange(stats.n_terms)))
    np.testing.assert_allclose(p, [want[int(t)] for t in ids], rtol=1e-9)
    for method in ("rm3", "topics"):
        scores, ex = fq.scores(Settings(method=method, fb_docs=5, fb_terms=5, fb_topics=2, fb_max_df=1.0))
        assert np.isfinite(scores).all() and len(ex.feedback) >= 1
        assert sum(w for _, w in ex.terms) == pytest.approx(1.0)
        assert sum(w for _, w in ex.feedback) == pytest.approx(1.0)
        assert {t for t, _ in ex.terms} <= set(stats.terms)
        same, _ = fq.scores(Settings(method=method, original_weight=1.0))
        np.testing.assert_array_equal(same, fq.first)
    # the doctor theme's documents lead the topic-feedback run
    scores, ex = fq.scores(Settings(method="topics", fb_docs=5, fb_topics=1, fb_terms=10, fb_max_df=1.0))
    assert len({t for t, _ in ex.feedback} & analysed(collection, DOCTOR)) >= 3, ex.feedback


def test_p_tm_rows_of_every_kind_are_rows_of_p_w_d():
    """Feedback reads P_TM of its few documents through ``p_w_d_rows``: for every kind (LDA's
    own path, the protocol's default for the others), the rows of ``p_w_d``."""
    from models import synthetic_corpus
    from models.registry import model_class
    from retrieval.core.feedback import p_tm_rows

    corpus = synthetic_corpus(30, 40, 15, seed=3, n_latent=3)
    terms, docs = np.array([1, 4, 4, 9]), np.array([2, 0, 29, 2])
    for kind, params in [("lda", dict(n_topics=4)), ("pam", dict(n_super=2, n_sub=4)), ("glda", dict(n_topics=4))]:
        m = model_class(kind)(**params, n_chains=1, n_iter=6, burn_in=2, sample_every=2, seed=0).fit(corpus)
        np.testing.assert_allclose(p_tm_rows(m, terms, docs, corpus.n_docs), m.p_w_d(terms)[docs], rtol=1e-12)
