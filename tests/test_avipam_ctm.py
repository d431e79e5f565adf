"""aviPAM's correlated topic model (arch "ctm:K"): full-covariance posteriors through Cholesky
factors, a learned prior, and the topic correlations it recovers from a known CTM."""
import copy

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from models.avipam.model import AVIPAM, parse_arch
from models.common.corpus import make_corpus
from tests.helpers import block_topics, resume_after_kill

torch = pytest.importorskip("torch")


def ctm_corpus(n_docs=600, K=6, words_per=10, doc_len=60, rho=0.6, neg=-0.4, var=2.0, seed=0):
    """Documents from a known CTM: logits eta_d ~ N(0, var * C) with topics 0 and 1, and 2 and 3,
    correlated by ``rho`` and the two pairs by ``neg``; topic k puts almost all its mass on its
    own block of words. Returns (corpus, beta, C)."""
    rng = np.random.default_rng(seed)
    V = K * words_per
    beta = block_topics(K, words_per)
    C = np.eye(K)
    C[0, 1] = C[1, 0] = C[2, 3] = C[3, 2] = rho
    C[:2, 2:4] = C[2:4, :2] = neg
    eta = rng.multivariate_normal(np.zeros(K), var * C, size=n_docs)
    theta = np.exp(eta - eta.max(1, keepdims=True))
    theta /= theta.sum(1, keepdims=True)
    z = np.concatenate([rng.choice(K, size=doc_len, p=t) for t in theta])
    words = (rng.random(z.size)[:, None] > beta.cumsum(1)[z]).sum(1)
    ptr = np.arange(n_docs + 1) * doc_len
    return make_corpus(ptr, words, n_terms=V, fingerprint="synthetic-ctm"), beta, C


KW = dict(arch="ctm:6", hidden=50, batch_size=50, lr=3e-3, n_jobs=1, alpha=1.0, alpha_root=1.0, topic_update="gradient", n_chains=1)


@pytest.fixture(scope="module")
def corpus_beta():
    return ctm_corpus()


@pytest.fixture(scope="module")
def fitted(corpus_beta):
    return AVIPAM(epochs=40, **KW).fit(corpus_beta[0])


def test_arch_parses_and_bad_ones_are_refused():
    a = parse_arch("CTM:50")
    assert a.full_cov and a.levels == [50] and a.groups == [(0, 50)]
    assert a.masks[0].shape == (1, 50) and a.masks[0].all()
    assert not parse_arch("3pam:50").full_cov
    for bad in ("ctm:1", "ctm:", "ctm:5,6"):
        with pytest.raises(ValueError, match="ctm"):
            parse_arch(bad)


def test_kl_equals_torch_distributions_on_random_full_covariances():
    """The reference: torch.distributions' KL between two multivariate normals."""
    from torch.distributions import MultivariateNormal, kl_divergence

    from models.avipam.nets.pam_net import kl_full_cov, lower_triangular

    g = torch.Generator().manual_seed(0)
    B, K = 7, 5
    tril = torch.tril_indices(K, K, -1)
    logvar = torch.randn(B, K, generator=g, dtype=torch.float64)
    L = lower_triangular(0.5 * logvar, torch.randn(B, K * (K - 1) // 2, generator=g,
                                                   dtype=torch.float64), tril)
    mu = torch.randn(B, K, generator=g, dtype=torch.float64)
    log_diag0 = 0.3 * torch.randn(K, generator=g, dtype=torch.float64)
    L0 = lower_triangular(log_diag0, torch.randn(K * (K - 1) // 2, generator=g,
                                                 dtype=torch.float64), tril)
    mu0 = torch.randn(K, generator=g, dtype=torch.float64)
    got = kl_full_cov(mu, logvar, L, mu0, L0, log_diag0)
    want = kl_divergence(MultivariateNormal(mu, scale_tril=L), MultivariateNormal(mu0, scale_tril=L0))
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_a_fresh_ctm_is_the_diagonal_model_with_a_laplace_prior():
    """Before training the off-diagonal head is zero and the prior is Dirichlet(alpha)'s Laplace
    approximation, so the KL equals the diagonal levels' formula on the same posteriors."""
    from models.avipam.nets.pam_net import PAMNet, kl_full_cov

    K, V = 8, 30
    net = PAMNet(V, [torch.ones(1, K, dtype=torch.bool)], [0.5], hidden=16, full_cov=True).eval()
    x = torch.poisson(torch.full((5, V), 2.0), generator=torch.Generator().manual_seed(1))
    mu, logvar, L = net.encoders[0](x, 0.0, None)
    torch.testing.assert_close(L, torch.diag_embed(torch.exp(0.5 * logvar)))
    pvar = net.prior_var0[0]
    torch.testing.assert_close(torch.diag(net.prior_cov()), pvar)
    diag = 0.5 * (torch.exp(logvar) / pvar + mu * mu / pvar - 1 + torch.log(pvar) - logvar).sum(1)
    kl = kl_full_cov(mu, logvar, L, net.prior_mu, net.prior_chol(), net.prior_log_diag)
    torch.testing.assert_close(kl, diag, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="single level"):
        PAMNet(V, [torch.ones(1, 2, dtype=torch.bool), torch.ones(2, K, dtype=torch.bool)],
               [1.0, 1.0], full_cov=True)


def test_elbo_rises_topics_match_and_correlations_have_the_true_signs(fitted, corpus_beta):
    corpus, beta, C = corpus_beta
    ll = fitted.log_lik_[:, 0]
    assert np.isfinite(ll).all() and ll[-5:].mean() > ll[:5].mean() + 0.3
    a = fitted.topic_word_ / np.linalg.norm(fitted.topic_word_, axis=1, keepdims=True)
    b = beta / np.linalg.norm(beta, axis=1, keepdims=True)
    cos = a @ b.T
    rows, cols = linear_sum_assignment(-cos)
    assert cos[rows, cols].min() > 0.9, cos[rows, cols]
    R = fitted.topic_correlations()
    np.testing.assert_allclose(np.diag(R), 1.0)
    np.testing.assert_allclose(R, R.T, atol=1e-12)
    learned = np.empty(6, dtype=np.int64)
    learned[cols] = rows                      # true topic -> its learned topic
    R = R[np.ix_(learned, learned)]
    pos = [R[0, 1], R[2, 3]]
    neg = [R[i, j] for i in (0, 1) for j in (2, 3)]
    # the correlated pairs come out above every anti-correlated pair, by a margin
    assert min(pos) > max(neg) + 0.2, (pos, neg)
    # the posterior's off-diagonal Cholesky entries were learned
    assert fitted.net_.encoders[0].off.weight.abs().max() > 0


def test_topic_correlations_only_for_a_ctm(corpus_beta):
    m = AVIPAM(epochs=1, **dict(KW, arch="3pam:6")).fit(corpus_beta[0])
    with pytest.raises(ValueError, match="ctm"):
        m.topic_correlations()


def test_document_model_and_amortized_mixture(fitted, corpus_beta):
    corpus = corpus_beta[0]
    p = fitted.p_w_d(np.arange(corpus.n_terms))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(fitted.transform(corpus), fitted.doc_mix_)
    # one encoder pass (no refinement, no draws) gives softmax of the mean logits
    one = copy.copy(fitted)
    one.refine_steps, one.doc_samples = 0, 0
    net = fitted.net_.eval()
    from models.common.variational import count_matrix

    with torch.no_grad():
        x = torch.from_numpy(count_matrix(corpus)[:4].toarray())
        mu = net.encoders[0](x, 0.0, None)[0]
    np.testing.assert_allclose(one.transform(corpus)[:4], torch.softmax(mu, 1).numpy(), rtol=1e-5)


@pytest.mark.parametrize("decoder", ["mixture", "product"])
def test_same_seed_same_model_and_checkpoints_resume_bit_identically(corpus_beta, tmp_path, decoder):
    corpus = corpus_beta[0]
    kw = dict(KW, epochs=4, checkpoint_every=2, decoder=decoder)
    want = AVIPAM(**kw).fit(corpus)
    again = AVIPAM(**kw).fit(corpus)
    np.testing.assert_array_equal(want.topic_word_, again.topic_word_)
    got = resume_after_kill(AVIPAM, kw, corpus, tmp_path / "ctm.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    np.testing.assert_array_equal(got.topic_correlations(), want.topic_correlations())


def test_save_and_load_keep_the_learned_prior(fitted, corpus_beta, tmp_path):
    path = tmp_path / "ctm.npz"
    fitted.save(path)
    back = AVIPAM.load(path, fingerprint=corpus_beta[0].fingerprint)
    np.testing.assert_array_equal(back.topic_correlations(), fitted.topic_correlations())
    np.testing.assert_array_equal(back.transform(corpus_beta[0]), fitted.doc_mix_)


def test_report_section_lists_the_strongest_pairs(fitted, corpus_beta):
    from retrieval.adapters.avipam import correlated_pairs, report_section

    terms = [f"w{i}" for i in range(corpus_beta[0].n_terms)]
    pairs = correlated_pairs(fitted, terms, n=2, words=3)
    R = fitted.topic_correlations()
    off = R[np.triu_indices(6, 1)]
    assert [p[0] for p in pairs] == pytest.approx([*np.sort(off)[::-1][:2], *np.sort(off)[:2]])
    r, a, b, wa, wb = pairs[0]
    assert R[a, b] == pytest.approx(r) and len(wa.split()) == 3
    part = report_section(fitted, terms)
    assert "correlations" in part["title"] and f"{r:+.3f}" in part["text"]
    assert report_section(AVIPAM(epochs=1, **dict(KW, arch="3pam:6")).fit(corpus_beta[0]), terms) is None
