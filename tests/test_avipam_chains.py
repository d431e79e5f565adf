"""aviPAM chains: independent networks trained side by side, their document models averaged as
the Gibbs kinds average their chains."""
import numpy as np
import pytest

from models.avipam.model import AVIPAM
from models.common.corpus import make_corpus
from tests.helpers import resume_after_kill

KW = dict(arch="4pam:2,6", hidden=16, batch_size=40, n_jobs=1, epochs=4, refine_steps=3, doc_samples=4)


@pytest.fixture(scope="module")
def corpus():
    rng = np.random.default_rng(1)
    lens = rng.integers(3, 40, 120)
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    terms = (rng.zipf(1.4, ptr[-1]) % 60).astype(np.int64)
    return make_corpus(ptr, terms, n_terms=60, fingerprint="avipam-chains")


@pytest.fixture(scope="module")
def fitted(corpus):
    return AVIPAM(n_chains=3, **KW).fit(corpus)


def test_chains_keep_side_by_side_mixtures_and_average_their_document_models(fitted, corpus):
    C, K, D, V = 3, 6, corpus.n_docs, corpus.n_terms
    assert fitted.topic_word_.shape == (C * K, V) and fitted.doc_mix_.shape == (D, C * K)
    assert fitted.log_lik_.shape == (KW["epochs"], C)
    blocks = fitted.doc_mix_.reshape(D, C, K)
    np.testing.assert_allclose(blocks.sum(2), 1.0 / C)
    per = fitted.p_w_d_per_sample(np.arange(V))
    assert per.shape == (C, 1, D, V)
    for c in range(C):
        want = C * blocks[:, c] @ fitted.topic_word_[c * K:(c + 1) * K]
        np.testing.assert_allclose(per[c, 0], want, rtol=1e-12)
    np.testing.assert_allclose(per.mean((0, 1)), fitted.p_w_d(np.arange(V)), rtol=1e-12)
    np.testing.assert_allclose(fitted.p_w_d(np.arange(V)).sum(1), 1.0)
    # the chains are different models: their own topics and mixtures
    assert not np.allclose(per[0, 0], per[1, 0])
    _, p = fitted.doc_topics(5, top=K, chain=2)
    np.testing.assert_allclose(np.sort(p)[::-1], np.sort(C * blocks[5, 2])[::-1])
    _, p = fitted.topic_words(1, top=V, chain=1)
    np.testing.assert_allclose(np.sort(p), np.sort(fitted.topic_word_[K + 1]))
    with pytest.raises(ValueError, match="chain"):
        fitted.doc_topics(0, chain=3)
    with pytest.raises(ValueError, match="chain"):
        fitted.topic_words(0, chain=-1)


def test_chain_zero_is_the_single_network_at_its_start(corpus):
    """Chains are built one after another from the seed: chain 0 starts as n_chains=1 does,
    and a one-chain model is the model written before chains existed."""
    one = AVIPAM(**dict(KW, epochs=1, n_chains=1)).fit(corpus)
    three = AVIPAM(n_chains=3, **dict(KW, epochs=1))
    net0, net3 = one._make_net(corpus.n_terms), three._make_net(corpus.n_terms)
    sd3 = net3.chains[0].state_dict()
    for k, v in net0.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd3[k].numpy(), err_msg=k)
    assert not np.array_equal(net3.chains[0].encoders[0].fc1.rows.detach().numpy(),
                              net3.chains[1].encoders[0].fc1.rows.detach().numpy())


def test_same_seed_same_chains_and_transform_gives_the_training_mixtures(fitted, corpus):
    again = AVIPAM(n_chains=3, **KW).fit(corpus)
    np.testing.assert_array_equal(again.doc_mix_, fitted.doc_mix_)
    np.testing.assert_array_equal(fitted.transform(corpus), fitted.doc_mix_)
    two = AVIPAM(n_chains=3, **dict(KW, n_jobs=2)).fit(corpus)
    np.testing.assert_array_equal(two.doc_mix_, fitted.doc_mix_)


@pytest.mark.parametrize("extra", [dict(theta_dropout=0.3, kl_warmup=2, topic_update="gradient"),
                                   dict(arch="ctm:6", theta_dropout=0.2),
                                   dict(dropout=0.0, norm="l2", topic_update="gradient")])
def test_chains_stepped_side_by_side_draw_what_they_draw_in_turn(corpus, extra):
    """With threads to spare the networks' steps run side by side, each from the generator
    state the one-after-another loop reaches: every draw (dropout masks, the levels' or the CTM's
    noise, the mixtures' dropout) is skipped in its place, so any thread count gives the model
    of one thread, bit for bit."""
    kw = dict(KW, n_chains=3, epochs=3, **extra)
    one = AVIPAM(**kw).fit(corpus)
    for n_jobs in (2, 3):
        other = AVIPAM(**dict(kw, n_jobs=n_jobs)).fit(corpus)
        for name in ("topic_word_", "doc_mix_", "log_lik_"):
            np.testing.assert_array_equal(getattr(other, name), getattr(one, name), err_msg=name)


def test_checkpoints_resume_bit_identically_with_chains(fitted, corpus, tmp_path):
    kw = dict(KW, n_chains=3, checkpoint_every=2)
    got = resume_after_kill(AVIPAM, kw, corpus, tmp_path / "chains.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(fitted, name), err_msg=name)
    with pytest.raises(ValueError, match="other parameters"):
        AVIPAM(**dict(kw, n_chains=2)).fit(corpus, checkpoint=tmp_path / "chains.ckpt")


def test_files_round_trip_and_fold_in_averages_the_chains(fitted, corpus, tmp_path):
    path = tmp_path / "chains.npz"
    fitted.save(path)
    back = AVIPAM.load(path)
    assert back.n_chains == 3
    V = np.arange(corpus.n_terms)
    np.testing.assert_array_equal(back.p_w_d(V), fitted.p_w_d(V))
    # the training documents folded in again, in their order: the same draws, the same mixtures
    docs = [corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] for d in range(corpus.n_docs)]
    folded = back.fold_in(docs, chain=1)
    np.testing.assert_allclose(folded.p_w_d(V), fitted.p_w_d(V), rtol=1e-12)
    np.testing.assert_allclose(folded.doc_topics_, 3 * fitted.doc_mix_[:, 6:12], rtol=1e-12)
    with pytest.raises(ValueError, match="chain"):
        back.fold_in(docs, chain=3)
    # the averaged ELBO is the mean of every chain's
    e = back.elbo(corpus, refine_steps=0, n_samples=8)
    assert e.shape == (corpus.n_docs,) and np.isfinite(e).all()


def test_file_with_the_wrong_number_of_chains_is_refused(fitted, tmp_path):
    from models.common import checkpoint as ckpt

    path = tmp_path / "chains.npz"
    fitted.save(path)
    f = ckpt.read_model_file(path)
    header = dict(f.header, params=dict(f.header["params"], n_chains=2))
    ckpt.write_model_file(tmp_path / "bad.npz", header, dict(f.arrays))
    with pytest.raises(ValueError):
        AVIPAM.load(tmp_path / "bad.npz")


def test_chains_need_the_mixture_decoder(corpus):
    with pytest.raises(ValueError, match="mixture"):
        AVIPAM(n_chains=2, decoder="product", **KW).fit(corpus)
    with pytest.raises(ValueError, match="n_chains"):
        AVIPAM(n_chains=0, **KW).fit(corpus)
