"""Topics of new text through the Python API (retrieval.infer: the index's analyzer, then the
model's fold-in) and topic words with their terms (topic_words(..., terms=...))."""
import numpy as np
import pytest

from models import registry
from models.common.corpus import synthetic_corpus

THEMES = [
    "car automobile engine motor vehicle driver road wheel traffic speed",
    "doctor physician medicine hospital patient nurse illness disease treatment health",
    "river stream water bank flood lake rain shore boat fish",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """An index of 60 one-theme documents."""
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("infer")
    rng = np.random.default_rng(0)
    docs = []
    for d in range(60):
        words = THEMES[d % 3].split()
        text = " ".join(rng.choice(words, size=30))
        docs.append(f"<DOC>\n<DOCNO> I{d:03d} </DOCNO>\n<TEXT>\n{text}.\n</TEXT>\n</DOC>\n")
    (root / "docs.trec").write_text("".join(docs))
    return build_index([root / "docs.trec"], root / "index")


@pytest.fixture(scope="module")
def model(index):
    from models import LDA
    from retrieval.core.modelfiles import index_corpus

    return LDA(n_topics=3, alpha=0.1, n_chains=2, n_iter=40, n_shards=1, init="random",
               seed=0).fit(index_corpus(index))


def test_infer_gives_the_theme_of_new_text(index, model):
    import retrieval as tir

    texts = ["The doctors treated patients in the hospital.",
             "Boats on the flooded river, fishing by the lake shore.",
             "Drivers of automobiles and their engines on the road"]
    mix = tir.infer(model, texts, index=index, seed=1)
    assert mix.shape == (3, 3)
    np.testing.assert_allclose(mix.sum(1), 1.0)
    terms = index.stats.terms
    for t, theme in enumerate([1, 2, 0]):
        k = int(np.argmax(mix[t]))
        assert mix[t, k] > 0.8
        top = [w for w, _ in model.topic_words(k, top=10, terms=terms)]
        assert set(top) == set(index.analyze(THEMES[theme]))
    np.testing.assert_array_equal(tir.infer(model, texts, index=index, seed=1), mix)
    # analysed as the index analyses: stemmed, stopwords and unknown words out
    ids = tir.text_term_ids(index, ["The doctors and the zebras"])[0]
    assert [terms[i] for i in ids] == ["doctor"]


def test_infer_refuses_another_index_and_bad_texts(index, model):
    import retrieval as tir
    from models import LDA

    other = LDA(n_topics=2, n_chains=1, n_iter=4, n_shards=1).fit(
        synthetic_corpus(20, index.stats.n_terms, 10, seed=0))
    with pytest.raises(ValueError, match="trained on the index with fingerprint"):
        tir.infer(other, ["doctor"], index=index)
    with pytest.raises(TypeError, match="list of strings"):
        tir.infer(model, "doctor", index=index)
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        tir.infer(model, ["doctor", 3], index=index)


def test_folded_texts_give_the_ranker_p_w_d(index, model):
    import retrieval as tir

    f = tir.fold_in_texts(model, ["hospital nurse", ""], index=index, seed=0)
    p = f.p_w_d(np.arange(index.stats.n_terms))
    np.testing.assert_allclose(p.sum(1), 1.0)
    nurse = index.stats.term_index["nurs"]
    road = index.stats.term_index["road"]
    assert p[0, nurse] > 10 * p[0, road]


@pytest.mark.parametrize("kind", registry.kinds())
def test_topic_words_with_terms(kind):
    cls = registry.model_class(kind)
    corpus = synthetic_corpus(30, 50, 20, seed=1)
    m = cls(**cls.quick_params).fit(corpus)
    vocab = [f"w{i}" for i in range(corpus.n_terms)]
    ids, probs = m.topic_words(0, top=5)
    named = m.topic_words(0, top=5, terms=vocab)
    assert named == [(f"w{i}", float(p)) for i, p in zip(ids, probs)]
    assert all(isinstance(w, str) and isinstance(p, float) for w, p in named)
    with pytest.raises(ValueError, match="terms has 3 entries"):
        m.topic_words(0, top=5, terms=vocab[:3])
