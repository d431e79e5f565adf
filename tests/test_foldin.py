"""Fold-in of new documents (models.common.foldin, models.lda.foldin) and document completion
(models.common.heldout): the fast kernel against its reference twin, determinism, planted topics."""
import numpy as np
import pytest

from models import LDA, make_corpus
from models.common import foldin as common_foldin
from models.lda import foldin_kernels as F_
from models.glda.model import GroupedLDA
from models.common.kernels.rng import seed_stream
from models.common.heldout import document_completion, split_alternate, training_completion, training_sample
from tests.helpers import block_topics
from tests.reference import lda_foldin_reference as ref

K_PLANT, WORDS_PER = 4, 10


def planted_docs(n_docs, length, seed, alpha=0.2, with_theta=False):
    """Documents drawn from LDA with the block topics of tests.helpers (K = 4, V = 40), and
    their mixtures when ``with_theta``."""
    phi = block_topics(K_PLANT, WORDS_PER)
    rng = np.random.default_rng(seed)
    docs, thetas = [], []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(K_PLANT, alpha))
        z = rng.choice(K_PLANT, size=length, p=theta)
        docs.append(np.array([rng.choice(phi.shape[1], p=phi[k]) for k in z], dtype=np.int64))
        thetas.append(theta)
    return (docs, np.array(thetas)) if with_theta else docs


def as_corpus(docs):
    ptr = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    return make_corpus(ptr, np.concatenate(docs), n_terms=K_PLANT * WORDS_PER, fingerprint="planted")


@pytest.fixture(scope="module")
def trained():
    # random initialisation: at K = 4 the online one can merge two planted topics for good
    corpus = as_corpus(planted_docs(200, 40, seed=0))
    return LDA(n_topics=K_PLANT, alpha=0.2, n_chains=2, n_iter=60, n_shards=1, init="random",
               seed=1).fit(corpus)


@pytest.fixture(scope="module")
def new_docs():
    return planted_docs(6, 30, seed=11)


def dense_sample(m, cs):
    """(n_kw (V, K), n_k, alpha) of kept sample cs, dense."""
    V = m.n_terms_
    n_kw = np.zeros((V, m.n_topics), dtype=np.int64)
    for w in range(V):
        lo, hi = m.tw_ptr_[cs, w], m.tw_ptr_[cs, w + 1]
        n_kw[w, m.tw_topic_[lo:hi].astype(np.int64)] = m.tw_count_[lo:hi]
    return n_kw, m.n_k_samples_[cs], m.alpha_samples_[cs]


def fast_tables(m, cs):
    K = m.n_topics
    inv, rb, s_cum = np.empty(K), np.empty(K), np.empty(K)
    F_.sample_tables(m.n_k_samples_[cs], m.alpha_samples_[cs], float(m.beta), m.n_terms_, inv, rb, s_cum)
    return inv, rb, s_cum


def test_fold_doc_matches_reference_draw_for_draw(trained, new_docs):
    m = trained
    for cs in (0, m.n_samples_ * m.n_chains - 1):
        n_kw, n_k, alpha = dense_sample(m, cs)
        inv, rb, s_cum = fast_tables(m, cs)
        K = m.n_topics
        for d, terms in enumerate(new_docs[:3]):
            s_fast = np.empty(4, dtype=np.uint64)
            seed_stream(5, 100 * cs + d, s_fast)
            s_ref = s_fast.copy()
            z = np.empty(len(terms), dtype=np.int64)
            ndk, dlist, dpos, acc, alist = (np.zeros(K, np.int64) for _ in range(5))
            smp = F_.LdaSample(m.tw_ptr_[cs], m.tw_topic_, m.tw_count_, alpha, np.stack([inv, rb, s_cum]))
            st = F_.DocState(terms, z, ndk, dlist, dpos, acc, alist, np.empty(K))
            anz = F_.fold_doc(smp, st, 6, 3, s_fast)
            z_ref, acc_ref = ref.fold_doc(terms, n_kw, n_k, alpha, float(m.beta), 6, 3, s_ref)
            np.testing.assert_array_equal(z, z_ref)
            np.testing.assert_array_equal(acc, acc_ref)
            assert anz == np.count_nonzero(acc_ref) and not ndk.any()
            np.testing.assert_array_equal(s_fast, s_ref)


def test_conditionals_match_reference(trained):
    m = trained
    cs = 1
    n_kw, n_k, alpha = dense_sample(m, cs)
    inv, rb, s_cum = fast_tables(m, cs)
    rng = np.random.default_rng(0)
    for _ in range(30):
        ndk = rng.integers(0, 4, size=m.n_topics) * (rng.random(m.n_topics) < 0.6)
        dlist = np.flatnonzero(ndk)
        w = int(rng.integers(m.n_terms_))
        smp = F_.LdaSample(m.tw_ptr_[cs], m.tw_topic_, m.tw_count_, alpha, np.stack([inv, rb, s_cum]))
        fast = F_.token_conditional(w, smp, ndk, dlist, len(dlist))
        slow = ref.conditional(w, ndk, n_kw, n_k, alpha, float(m.beta))
        np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=0)


def test_p_w_d_matches_reference(trained, new_docs):
    m = trained
    f = m.fold_in(new_docs, n_iter=8, n_keep=4, samples=None, seed=2)
    assert len(f.css_) == m.n_chains * m.n_samples_
    terms = np.arange(m.n_terms_)
    got = f.p_w_d(terms)
    want = np.zeros_like(got)
    for j, cs in enumerate(f.css_):
        n_kw, n_k, alpha = dense_sample(m, cs)
        for d in range(len(new_docs)):
            lo, hi = f.f_ptr_[j, d], f.f_ptr_[j, d + 1]
            summed = np.zeros(m.n_topics)
            summed[f.f_topic_[lo:hi].astype(np.int64)] = f.f_count_[lo:hi]
            assert summed.sum() == 4 * len(new_docs[d])
            want[d] += ref.p_w_d(summed, 4, n_kw, n_k, alpha, float(m.beta))
    want /= len(f.css_)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-12)
    # token_probs scores per-document token lists with the same numbers
    ptr = np.array([0, 2, 2, 5, 6, 6, 7])
    toks = np.array([3, 7, 0, 39, 3, 12, 20])
    doc = np.repeat(np.arange(6), np.diff(ptr))
    np.testing.assert_allclose(f.token_probs(ptr, toks), got[doc, toks], rtol=1e-12)


def test_same_seed_same_result_whatever_threads_and_batches(trained, new_docs, monkeypatch):
    m = trained
    a = m.fold_in(new_docs, seed=7)
    m.n_jobs = 1
    try:
        b = m.fold_in(new_docs, seed=7)
        monkeypatch.setattr(common_foldin, "_BATCH_ENTRIES", 60)  # several batches
        c = m.fold_in(new_docs, seed=7)
    finally:
        m.n_jobs = None
    for x in (b, c):
        np.testing.assert_array_equal(x.f_ptr_, a.f_ptr_)
        np.testing.assert_array_equal(x.f_topic_, a.f_topic_)
        np.testing.assert_array_equal(x.f_count_, a.f_count_)
        np.testing.assert_array_equal(x.doc_topics_, a.doc_topics_)
    other = m.fold_in(new_docs, seed=8)
    assert not np.array_equal(other.f_count_, a.f_count_)


def test_recovers_planted_mixtures(trained):
    """A document written mostly from one planted topic is folded into the trained topic that
    holds that topic's words."""
    m = trained
    rng = np.random.default_rng(3)
    docs = [rng.integers(k * WORDS_PER, (k + 1) * WORDS_PER, size=40) for k in range(K_PLANT)]
    mix = m.transform(docs)
    np.testing.assert_allclose(mix.sum(1), 1.0)
    top_of_block = [int(np.argmax(m.phi_matrix(0)[:, k * WORDS_PER:(k + 1) * WORDS_PER].sum(1)))
                    for k in range(K_PLANT)]
    assert sorted(top_of_block) == list(range(K_PLANT))
    for k in range(K_PLANT):
        assert mix[k, top_of_block[k]] > 0.9


def test_samples_and_empty_documents(trained):
    m = trained
    f = m.fold_in([np.array([1, 2, 3]), np.array([], dtype=np.int64)], samples=1, n_iter=3, n_keep=2)
    assert len(f.css_) == m.n_chains and list(f.css_ % m.n_samples_) == [m.n_samples_ - 1] * m.n_chains
    a = m.alpha_samples_[m.n_samples_ - 1]
    np.testing.assert_allclose(f.doc_topics_[1], a / a.sum())
    np.testing.assert_allclose(f.p_w_d(np.arange(m.n_terms_)).sum(1), 1.0)


@pytest.mark.parametrize("docs, kw, match", [
    ([np.array([0, 40])], {}, "term id 40 is out of range"),
    (["some text"], {}, "document 0 is text"),
    ([np.array([0.5])], {}, "must be integers"),
    ([np.array([1])], dict(n_keep=5, n_iter=3), "n_keep"),
    ([np.array([1])], dict(samples=99), "samples must be"),
    ([np.array([1])], dict(seed=-1), "seed"),
])
def test_bad_input_is_refused(trained, docs, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        trained.fold_in(docs, **kw)


def test_glda_folds_in_with_its_kept_samples():
    corpus = as_corpus(planted_docs(100, 40, seed=4))
    g = GroupedLDA(n_topics=K_PLANT, alpha=0.5, n_chains=1, n_iter=20, seed=0).fit(corpus)
    f = g.fold_in(planted_docs(3, 20, seed=5), seed=1)
    np.testing.assert_allclose(f.p_w_d(np.arange(corpus.n_terms)).sum(1), 1.0)
    assert f.doc_topics_.shape == (3, K_PLANT)


# -- document completion -----------------------------------------------------------------------


def test_split_alternate_keeps_every_token_once():
    ptr = np.array([0, 3, 3, 4, 8])
    terms = np.arange(8)
    op, ot, hp, ht = split_alternate(ptr, terms)
    assert list(op) == [0, 2, 2, 3, 5] and list(ot) == [0, 2, 3, 4, 6]
    assert list(hp) == [0, 1, 1, 1, 3] and list(ht) == [1, 5, 7]


def test_document_completion_beats_uniform_and_wrong_k():
    train = as_corpus(planted_docs(200, 40, seed=0))
    held, theta = planted_docs(40, 40, seed=21, with_theta=True)
    right = LDA(n_topics=K_PLANT, alpha=0.2, n_chains=2, n_iter=60, n_shards=1, init="random",
                seed=1).fit(train)
    one = LDA(n_topics=1, alpha=0.5, n_chains=1, n_iter=10, n_shards=1, seed=1).fit(train)
    got = document_completion(right, held, seed=4)
    assert got.n_scored == 40 * 20 and got.n_observed == 40 * 20 and got.n_docs == 40
    uniform = -np.log(train.n_terms)
    unigram = document_completion(one, held, seed=4).log_lik
    # the oracle knows every document's planted mixture and the planted topics
    phi = block_topics(K_PLANT, WORDS_PER)
    oracle = np.mean(np.concatenate([np.log(t @ phi[:, d[1::2]]) for t, d in zip(theta, held)]))
    assert unigram + 0.5 < got.log_lik < oracle + 0.05 and unigram > uniform - 0.05
    assert got.log_lik > oracle - 0.2
    assert document_completion(right, held, seed=4) == got
    assert document_completion(right, held, seed=5).log_lik != got.log_lik


def test_training_sample_is_seeded_and_holds_whole_documents_of_two_tokens_or_more():
    lens = np.array([1, 0] + [5, 2, 3, 9] * 100 + [2, 1])
    # every token of document d is term d: a sampled document names itself
    corpus = make_corpus(np.concatenate([[0], np.cumsum(lens)]), np.repeat(np.arange(len(lens)), lens),
                         len(lens), fingerprint="t")
    a = training_sample(corpus, 3)
    ids = np.array([d[0] for d in a])
    assert len(a) == 300 and all((d == d[0]).all() for d in a)
    assert (np.diff(ids) > 0).all() and (lens[ids] >= 2).all()
    np.testing.assert_array_equal([len(d) for d in a], lens[ids])
    np.testing.assert_array_equal([d[0] for d in training_sample(corpus, 3)], ids)
    assert not np.array_equal([d[0] for d in training_sample(corpus, 4)], ids)
    small = make_corpus(np.array([0, 1, 4, 6]), np.arange(6), 6, fingerprint="s")
    assert [d.tolist() for d in training_sample(small, 0)] == [[1, 2, 3], [4, 5]]
    ones = make_corpus(np.array([0, 1, 2]), np.array([0, 1]), 2, fingerprint="o")
    assert training_sample(ones, 0) == []
    assert training_completion(LDA(n_topics=2, n_iter=2, n_shards=1).fit(ones), ones) is None


def test_document_completion_needs_fold_in():
    class NoFold:
        pass
    with pytest.raises(TypeError, match="no fold_in"):
        document_completion(NoFold(), [np.array([1, 2])])


@pytest.mark.parametrize("decoder, norm", [("mixture", "batch"), ("product", "batch"), ("product", "l2")])
def test_avipam_fold_in_of_training_documents_gives_their_document_model(decoder, norm):
    from models.avipam.model import AVIPAM

    docs = planted_docs(40, 20, seed=6)
    corpus = as_corpus(docs)
    m = AVIPAM(arch="4pam:2,4", hidden=16, epochs=3, batch_size=16, decoder=decoder, norm=norm, n_chains=1,
               seed=3).fit(corpus)
    f = m.fold_in(docs)
    np.testing.assert_allclose(f.doc_topics_, m.doc_mix_, rtol=1e-6)
    terms = np.arange(corpus.n_terms)
    np.testing.assert_allclose(f.p_w_d(terms), m.p_w_d(terms), rtol=1e-6)
    np.testing.assert_allclose(f.p_w_d(terms).sum(1), 1.0, rtol=1e-9)
    np.testing.assert_allclose(m.transform(docs[:3]), f.doc_topics_[:3], rtol=1e-5)  # float32 batches
    got = document_completion(m, planted_docs(10, 20, seed=7))
    assert got.n_scored == 100 and np.isfinite(got.log_lik)
