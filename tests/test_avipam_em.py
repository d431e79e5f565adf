"""aviPAM with topics from the closed-form M-step (``topic_update="em"``): it learns a known
4-PAM, its topics are Dirichlet-smoothed expected counts, and it keeps every guarantee of the
gradient-trained model (seed, checkpoints, files)."""
import numpy as np
import pytest

from models.avipam.model import AVIPAM
from tests.helpers import resume_after_kill
from tests.test_avipam import KW, corpus_beta, matched_cosines  # noqa: F401 (fixture)

EM = dict(KW, topic_update="em", lr=1e-2)


@pytest.fixture(scope="module")
def em_fitted(corpus_beta):  # noqa: F811
    return AVIPAM(epochs=40, **EM).fit(corpus_beta[0])


def test_em_topics_match_the_true_ones_and_the_elbo_rises(em_fitted, corpus_beta):  # noqa: F811
    ll = em_fitted.log_lik_[:, 0]
    assert ll[-1] > ll[0] + 0.3
    cos = matched_cosines(em_fitted.topic_word_, corpus_beta[1])
    assert cos.min() > 0.9, cos
    np.testing.assert_allclose(em_fitted.topic_word_.sum(1), 1.0, atol=1e-9)


def test_em_topics_are_smoothed_expected_counts(em_fitted, corpus_beta):  # noqa: F811
    """The network holds log phi as a buffer (Adam never moves it): every word of every topic
    gets at least eta / (n_k + V eta), and the topics are not a parameter of the optimiser."""
    net = em_fitted.net_
    assert "beta" not in dict(net.named_parameters()) and "beta" in dict(net.named_buffers())
    V = corpus_beta[0].n_terms
    n_tokens = corpus_beta[0].n_tokens
    assert em_fitted.topic_word_.min() >= 0.01 / (n_tokens + V * 0.01) * (1 - 1e-6)


def test_em_same_seed_same_model_and_checkpoints_resume_bit_identically(corpus_beta, tmp_path):  # noqa: F811
    corpus = corpus_beta[0]
    kw = dict(EM, epochs=6, checkpoint_every=2)
    want = AVIPAM(**kw).fit(corpus)
    again = AVIPAM(**kw).fit(corpus)
    np.testing.assert_array_equal(again.topic_word_, want.topic_word_)
    other = AVIPAM(**dict(kw, seed=1)).fit(corpus)
    assert not np.array_equal(other.topic_word_, want.topic_word_)
    got = resume_after_kill(AVIPAM, kw, corpus, tmp_path / "em.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    with pytest.raises(ValueError, match="other parameters"):
        AVIPAM(**dict(kw, topic_update="gradient")).fit(corpus, checkpoint=tmp_path / "em.ckpt")


def test_em_model_files_round_trip(em_fitted, corpus_beta, tmp_path):  # noqa: F811
    path = tmp_path / "em.npz"
    em_fitted.save(path)
    got = AVIPAM.load(path, fingerprint=corpus_beta[0].fingerprint)
    assert got.topic_update == "em" and got.eta == 0.01
    np.testing.assert_array_equal(got.topic_word_, em_fitted.topic_word_)
    np.testing.assert_array_equal(got.transform(corpus_beta[0]), em_fitted.transform(corpus_beta[0]))


def test_em_needs_the_mixture_decoder_and_a_positive_eta(corpus_beta):  # noqa: F811
    corpus = corpus_beta[0]
    with pytest.raises(ValueError, match="decoder='mixture'"):
        AVIPAM(**dict(EM, decoder="product", epochs=1)).fit(corpus)
    with pytest.raises(ValueError, match="eta"):
        AVIPAM(**dict(EM, eta=0.0, epochs=1)).fit(corpus)
    with pytest.raises(ValueError, match="topic_update"):
        AVIPAM(**dict(EM, topic_update="counts", epochs=1)).fit(corpus)


def test_completion_split_halves_every_document(corpus_beta):  # noqa: F811
    from retrieval.bench.avipam import completion_split

    corpus = corpus_beta[0]
    observed, (doc, term) = completion_split(corpus, seed=2)
    lens = np.diff(corpus.doc_ptr)
    np.testing.assert_array_equal(np.diff(observed.doc_ptr), lens - lens // 2)
    np.testing.assert_array_equal(np.bincount(doc, minlength=corpus.n_docs), lens // 2)
    for d in (0, 7, 399):  # the two halves are the document's tokens
        both = np.concatenate([observed.term_ids[observed.doc_ptr[d]:observed.doc_ptr[d + 1]], term[doc == d]])
        np.testing.assert_array_equal(np.sort(both), np.sort(corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]))
    again = completion_split(corpus, seed=2)
    np.testing.assert_array_equal(again[0].term_ids, observed.term_ids)
    assert not np.array_equal(completion_split(corpus, seed=3)[1][1], term)


def test_heldout_fit_scores_held_out_tokens_under_their_documents_model(corpus_beta):  # noqa: F811
    """The unigram figure by hand; both aviPAM topic updates predict the held-out halves of the
    known 4-PAM's documents better than the unigram model, the M-step one the better."""
    from retrieval.bench.avipam import completion_split, heldout_fit

    corpus = corpus_beta[0]
    observed, (_, term) = completion_split(corpus)
    n = np.bincount(observed.term_ids, minlength=corpus.n_terms) + 0.5
    uni = heldout_fit(None, corpus)
    assert np.isclose(uni, np.log(n[term] / n.sum()).mean())
    em = heldout_fit(lambda: AVIPAM(epochs=40, **EM), corpus, chunk=7)
    grad = heldout_fit(lambda: AVIPAM(epochs=40, **KW), corpus)
    assert em > grad > uni + 0.2, (uni, em, grad)


def test_defaults_train_m_step_topics_with_a_small_alpha(corpus_beta):  # noqa: F811
    """topic_update="auto" is the M-step for the mixture decoder and the gradient for the
    product decoder; the defaults (alpha 0.01) learn the known topics and give every
    document a sharper mixture than the paper's alpha 1 with gradient topics."""
    corpus = corpus_beta[0]
    d = AVIPAM()
    assert (d.topic_update, d.alpha, d.lr, d.eta) == ("auto", 0.01, 1e-3, 0.01)
    assert d._topic_update() == "em"
    assert AVIPAM(decoder="product")._topic_update() == "gradient"
    assert AVIPAM(topic_update="gradient")._topic_update() == "gradient"
    assert d.n_chains == 3 and d.arch == "4pam:12,100"
    base = dict(arch="4pam:2,6", hidden=50, batch_size=50, n_jobs=1, epochs=40, n_chains=1)
    m = AVIPAM(**base).fit(corpus)
    assert "beta" in dict(m.net_.named_buffers())  # M-step topics
    cos = matched_cosines(m.topic_word_, corpus_beta[1])
    assert cos.min() > 0.85 and cos.mean() > 0.95, cos
    paper = AVIPAM(**dict(base, alpha=1.0, alpha_root=1.0, topic_update="gradient", lr=1e-3)).fit(corpus)
    from retrieval.bench.avipam import mixture_spread

    sharp, flat = mixture_spread(m.doc_mix_)[1], mixture_spread(paper.doc_mix_)[1]
    assert sharp < flat - 0.5, (sharp, flat)
    p = AVIPAM(**dict(base, decoder="product", epochs=2)).fit(corpus)
    assert "beta" in dict(p.net_.named_parameters())  # gradient topics


def test_auto_topic_update_round_trips_and_old_files_read_as_gradient(corpus_beta, tmp_path):  # noqa: F811
    from models.common import checkpoint as ck

    corpus = corpus_beta[0]
    m = AVIPAM(arch="4pam:2,6", hidden=16, batch_size=50, n_jobs=1, epochs=3, n_chains=1).fit(corpus)
    m.save(tmp_path / "auto.npz")
    got = AVIPAM.load(tmp_path / "auto.npz", fingerprint=corpus.fingerprint)
    assert got.topic_update == "auto" and got._topic_update() == "em"
    np.testing.assert_array_equal(got.transform(corpus), m.transform(corpus))
    # A file from before topic_update existed: its topics were learned by gradient.
    old = AVIPAM(arch="4pam:2,6", hidden=16, batch_size=50, n_jobs=1, epochs=3,
                 topic_update="gradient").fit(corpus)
    old.save(tmp_path / "old.npz")
    f = ck.read_model_file(tmp_path / "old.npz")
    h = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    h["params"] = {k: v for k, v in h["params"].items() if k != "topic_update"}
    ck.write_model_file(tmp_path / "old2.npz", h, dict(f.arrays))
    got = AVIPAM.load(tmp_path / "old2.npz", fingerprint=corpus.fingerprint)
    assert got._topic_update() == "gradient"
    np.testing.assert_array_equal(got.transform(corpus), old.transform(corpus))
