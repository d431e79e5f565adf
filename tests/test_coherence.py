"""NPMI coherence: hand-computed values, and gensim's CoherenceModel (c_npmi) on the same topics
and texts, equal where the conventions match (document = one window per document)."""
import numpy as np
import pytest

from models.common.corpus import make_corpus
from retrieval.experiments.coherence import model_coherence, occurrences, report, topic_npmi


def random_corpus(n_docs=120, n_terms=40, seed=3, repeats=True):
    """Documents of 0-60 tokens (one empty, several shorter than a window of 20) with some
    topical structure, so that NPMI values spread; ``repeats=False``: no word twice in a
    document."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 60 if repeats else n_terms, n_docs)
    lens[7] = 0
    toks = []
    for n in lens:
        block = rng.integers(0, 4)
        p = np.full(n_terms, 0.2)
        p[block * 10:(block + 1) * 10] = 3.0
        toks.append(rng.choice(n_terms, size=n, p=p / p.sum(), replace=repeats))
    ptr = np.concatenate([[0], np.cumsum(lens)])
    return make_corpus(ptr, np.concatenate(toks), n_terms=n_terms)


TOPICS = [[0, 1, 2, 3, 4], [10, 11, 25, 30, 39], [5, 15, 20, 35, 2], [21, 22, 23, 24, 26]]


def test_document_counts_by_hand():
    # docs: {0,1}, {0,1,2}, {2}, {}
    corpus = make_corpus([0, 2, 6, 7, 7], [0, 1, 1, 2, 0, 0, 2], n_terms=3)
    occ, co, n = occurrences(corpus, [0, 1, 2])
    np.testing.assert_array_equal(occ, [2, 2, 2])
    assert n == 4 and co[0, 1] == 2 and co[0, 2] == 1 and co[1, 2] == 1
    # NPMI(0, 1) = log(0.5 / 0.25) / -log(0.5) = 1;  NPMI(0, 2) = log(0.25/0.25)/... = 0
    got = topic_npmi([[0, 1], [0, 2]], corpus)
    np.testing.assert_allclose(got, [1.0, 0.0], atol=1e-10)


def test_window_counts_by_hand():
    # one doc "0 1 x x 2" (x = 3), window 2: windows [0 1] [1 x] [x x] [x 2]
    corpus = make_corpus([0, 5], [0, 1, 3, 3, 2], n_terms=4)
    occ, co, n = occurrences(corpus, [0, 1, 2], window=2)
    assert n == 4
    np.testing.assert_array_equal(occ, [1, 2, 1])
    assert co[0, 1] == 1 and co[0, 2] == 0 and co[1, 2] == 0
    # A word stays in a window while any of its tokens is there: "0 0 1", window 2 -> 0 is in
    # both windows (gensim 4.4's accumulator drops it from the second: see the module notes).
    occ, co, n = occurrences(make_corpus([0, 3], [0, 0, 1], n_terms=2), [0, 1], window=2)
    np.testing.assert_array_equal(occ, [2, 1])
    assert n == 2 and co[0, 1] == 1


def _gensim(topics, corpus, window):
    gensim = pytest.importorskip("gensim")
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    texts = [[f"w{t}" for t in corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]]
             for d in range(corpus.n_docs)]
    dictionary = Dictionary(texts)
    cm = CoherenceModel(topics=[[f"w{t}" for t in topic] for topic in topics], texts=texts,
                        dictionary=dictionary, coherence="c_npmi", window_size=window,
                        topn=len(topics[0]), processes=1)
    assert gensim.__version__
    return np.array(cm.get_coherence_per_topic())


@pytest.mark.parametrize("window, repeats", [(None, True), (None, False), (20, False), (5, False)])
def test_equal_to_gensim_c_npmi(window, repeats):
    """Equal where the conventions match: documents (with repeated words), and sliding windows
    over texts without a word repeated in a document (where gensim's window count is exact)."""
    corpus = random_corpus(repeats=repeats)
    ours = topic_npmi(TOPICS, corpus, window)
    # gensim counts a document shorter than its window as one window: a window as long as the
    # longest document is the document convention.
    theirs = _gensim(TOPICS, corpus, window or int(np.diff(corpus.doc_ptr).max()))
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)
    assert ours.std() > 0.05  # the topics differ: the comparison is not vacuous


def test_conventions_give_different_figures():
    corpus = random_corpus()
    assert not np.allclose(topic_npmi(TOPICS, corpus), topic_npmi(TOPICS, corpus, 5))


def test_bad_topics_are_refused():
    corpus = random_corpus()
    with pytest.raises(ValueError, match="distinct"):
        topic_npmi([[1, 1, 2]], corpus)
    with pytest.raises(ValueError, match="out of range"):
        topic_npmi([[1, 40]], corpus)
    with pytest.raises(ValueError, match="window"):
        topic_npmi([[1, 2]], corpus, window=0)


@pytest.mark.parametrize("kind, params", [
    ("lda", dict(n_topics=4, n_chains=1, n_iter=6, burn_in=5, sample_every=1, n_shards=1)),
    ("avipam", dict(arch="molda:2:3", epochs=2, batch_size=30, hidden=8, n_jobs=1)),
])
def test_every_kind_through_topic_words(kind, params):
    from models import registry

    corpus = random_corpus()
    model = registry.model_class(kind)(**params).fit(corpus)
    c = model_coherence(model, corpus, "random", window=None, top_n=5)
    assert c.per_topic.shape == (model.n_topics,) and np.isfinite(c.per_topic).all()
    assert -1 <= c.mean <= 1
    assert "document co-occurrence" in c.line() and "top-5" in c.line() and "random" in c.line()
    lines = report(model, corpus, "random", window=20, top_n=5)
    assert "window 20" in lines[0]
    assert len(lines) == (3 if kind == "avipam" else 1)  # one line per MoLDA component
    with pytest.raises(ValueError, match="vocabulary"):
        model_coherence(model, make_corpus([0, 1], [0], n_terms=3), "tiny")
