"""aviPAM: architectures, learning a known 4-PAM, amortized document model, checkpoints, files."""
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from models.avipam.model import AVIPAM, parse_arch
from models.common.corpus import make_corpus
from models.common.variational import count_matrix
from tests.helpers import Killed, block_topics, checkpoint_before, resume_after_kill


def pam4_corpus(n_docs=400, n_super=2, n_sub=6, words_per=10, doc_len=60, seed=0):
    """Documents drawn from a known 4-PAM: root -> n_super -> n_sub -> words, every sub-topic
    putting almost all its mass on its own block of ``words_per`` words. Returns (corpus, beta)."""
    rng = np.random.default_rng(seed)
    V = n_sub * words_per
    beta = block_topics(n_sub, words_per)
    toks = []
    for _ in range(n_docs):
        theta_r = rng.dirichlet(np.full(n_super, 0.5))
        theta_s = rng.dirichlet(np.full(n_sub, 0.3), size=n_super)
        sup = rng.choice(n_super, size=doc_len, p=theta_r)
        sub = np.array([rng.choice(n_sub, p=theta_s[s]) for s in sup])
        toks.append(np.array([rng.choice(V, p=beta[k]) for k in sub]))
    ptr = np.arange(n_docs + 1) * doc_len
    return make_corpus(ptr, np.concatenate(toks), n_terms=V, fingerprint="synthetic-4pam"), beta


@pytest.fixture(scope="module")
def corpus_beta():
    return pam4_corpus()


# The paper's method (topics by gradient, AVITM's alpha 1), which most tests here check.
KW = dict(arch="4pam:2,6", hidden=50, batch_size=50, lr=3e-3, n_jobs=1, alpha=1.0, alpha_root=1.0, topic_update="gradient", n_chains=1)


@pytest.fixture(scope="module")
def fitted(corpus_beta):
    return AVIPAM(epochs=40, **KW).fit(corpus_beta[0])


def matched_cosines(topic_word, beta):
    a = topic_word / np.linalg.norm(topic_word, axis=1, keepdims=True)
    b = beta / np.linalg.norm(beta, axis=1, keepdims=True)
    cos = a @ b.T
    rows, cols = linear_sum_assignment(-cos)
    return cos[rows, cols]


def test_elbo_rises_and_sub_topics_match_the_true_ones(fitted, corpus_beta):
    ll = fitted.log_lik_[:, 0]
    assert ll.shape == (40,) and np.isfinite(ll).all()
    assert ll[-1] > ll[0] + 0.3 and ll[-5:].mean() > ll[:5].mean()
    np.testing.assert_array_equal(fitted.log_lik_iter_, np.arange(1, 41))
    cos = matched_cosines(fitted.topic_word_, corpus_beta[1])
    assert cos.min() > 0.9, cos


def test_document_model_a_piece_of_documents_at_a_time(fitted, monkeypatch):
    """p_w_d writes each piece of documents' product into its columns of the term-major table:
    every piece, the last short one and a single term's included, is the mixture times the topics."""
    from models.common import checkpoint as ck

    mix = fitted.doc_mix_.astype(np.float64)
    monkeypatch.setattr(ck, "PASS_BYTES", 7 * mix[:1].nbytes)  # pieces of 7 documents
    assert len(mix) % 7
    for terms in ([4], [9, 0, 4], np.arange(fitted.n_terms_)):
        p = fitted.p_w_d(terms)
        assert p.shape == (len(mix), len(terms)) and p.base.flags.c_contiguous  # term-major
        np.testing.assert_allclose(p, mix @ fitted.topic_word_[:, terms], rtol=1e-12)


def test_without_normalisation_the_topics_collapse(corpus_beta):
    """Section 4.1: the same run without normalisation learns blurred, mixed topics."""
    m = AVIPAM(epochs=40, norm="none", **KW).fit(corpus_beta[0])
    assert matched_cosines(m.topic_word_, corpus_beta[1]).mean() < 0.7


def test_document_model_is_the_amortized_mixture_times_beta(fitted, corpus_beta):
    corpus = corpus_beta[0]
    V = corpus.n_terms
    p = fitted.p_w_d(np.arange(V))
    assert p.shape == (corpus.n_docs, V) and p.dtype == np.float64
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(fitted.doc_mix_.sum(1), 1.0, atol=1e-5)
    np.testing.assert_allclose(p, fitted.doc_mix_.astype(np.float64) @ fitted.topic_word_, rtol=1e-6)
    assert fitted.p_w_d_per_sample([3, 7]).shape == (1, 1, corpus.n_docs, 2)
    np.testing.assert_array_equal(fitted.sample_iter_, [40])
    # One encoder pass gives the stored mixture back; a document's own block ranks first.
    np.testing.assert_array_equal(fitted.transform(corpus), fitted.doc_mix_)
    ids, probs = fitted.topic_words(0, top=10)
    assert len(set(ids // 10)) == 1 and (np.diff(probs) <= 0).all()
    top, pr = fitted.doc_topics(5, top=3)
    assert top.shape == (3,) and (np.diff(pr) <= 0).all()
    with pytest.raises(ValueError, match="out of range"):
        fitted.p_w_d([V])
    with pytest.raises(ValueError, match="topic must be in"):
        fitted.topic_words(6)


def test_same_seed_same_model_other_seed_other_model(corpus_beta):
    corpus = corpus_beta[0]
    a = AVIPAM(epochs=3, **KW).fit(corpus)
    b = AVIPAM(epochs=3, **KW).fit(corpus)
    c = AVIPAM(epochs=3, **dict(KW, seed=1)).fit(corpus)
    np.testing.assert_array_equal(a.topic_word_, b.topic_word_)
    np.testing.assert_array_equal(a.log_lik_, b.log_lik_)
    assert not np.array_equal(a.topic_word_, c.topic_word_)


def test_same_model_whatever_the_thread_count(corpus_beta):
    # training reductions run on one thread; Adam's elementwise step on n_jobs threads
    corpus = corpus_beta[0]
    one = AVIPAM(epochs=2, **KW).fit(corpus)
    two = AVIPAM(epochs=2, **dict(KW, n_jobs=2)).fit(corpus)
    np.testing.assert_array_equal(one.topic_word_, two.topic_word_)
    np.testing.assert_array_equal(one.log_lik_, two.log_lik_)


def test_checkpoint_resumes_bit_identically(corpus_beta, tmp_path):
    corpus = corpus_beta[0]
    kw = dict(KW, epochs=6, checkpoint_every=2)
    want = AVIPAM(**kw).fit(corpus)
    path = tmp_path / "avi.ckpt"
    got = resume_after_kill(AVIPAM, kw, corpus, path, kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_", "sample_iter_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    with pytest.raises(ValueError, match="other parameters"):
        AVIPAM(**dict(kw, lr=1e-2)).fit(corpus, checkpoint=path)


def test_kl_warmup_weights_the_kl_in_the_gradient_only(corpus_beta, tmp_path):
    """KL annealing changes the updates, not the logged ELBO, and resumes mid-warm-up."""
    import torch

    corpus = corpus_beta[0]
    kw = dict(KW, epochs=3)
    plain = AVIPAM(**kw).fit(corpus)
    one = AVIPAM(kl_warmup=1, **kw).fit(corpus)  # weight 1 from the first epoch: the same run
    np.testing.assert_array_equal(one.topic_word_, plain.topic_word_)
    warm = AVIPAM(kl_warmup=3, **kw).fit(corpus)
    assert not np.array_equal(warm.topic_word_, plain.topic_word_)
    # With a vanishing step both runs see the same forward passes: the logged ELBOs agree,
    # while a logged KL-weighted loss would differ by 0.9 of the KL.
    still = dict(KW, lr=1e-12, epochs=1)
    a = AVIPAM(**still).fit(corpus)
    b = AVIPAM(kl_warmup=10, **still).fit(corpus)
    np.testing.assert_allclose(b.log_lik_, a.log_lik_, rtol=1e-6)
    a.net_.train()
    with torch.no_grad():
        x = torch.from_numpy(count_matrix(corpus).toarray())
        _, kl = a.net_.loss(x, torch.Generator().manual_seed(0))
    assert 0.9 * float(kl.sum()) / corpus.n_tokens > 100 * 1e-6 * abs(a.log_lik_[0, 0])
    kw = dict(KW, epochs=6, checkpoint_every=2, kl_warmup=4)
    want = AVIPAM(**kw).fit(corpus)
    got = resume_after_kill(AVIPAM, kw, corpus, tmp_path / "warm.ckpt", kill_at=3)
    for name in ("topic_word_", "doc_mix_", "log_lik_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)


def test_checkpoint_from_before_a_new_parameter_resumes_with_its_default(corpus_beta, tmp_path):
    corpus = corpus_beta[0]
    kw = dict(KW, epochs=4, checkpoint_every=2)
    want = AVIPAM(**kw).fit(corpus)
    path = tmp_path / "old.ckpt"
    checkpoint_before(AVIPAM, kw, corpus, path, 2, ("kl_warmup",))
    got = AVIPAM(**kw).fit(corpus, checkpoint=path)
    np.testing.assert_array_equal(got.topic_word_, want.topic_word_)
    with pytest.raises(ValueError, match="kl_warmup"):
        AVIPAM(**dict(kw, kl_warmup=3)).fit(corpus, checkpoint=path)


def test_save_and_load(fitted, corpus_beta, tmp_path):
    corpus = corpus_beta[0]
    path = tmp_path / "avi.npz"
    fitted.save(path)
    back = AVIPAM.load(path, fingerprint=corpus.fingerprint)
    assert back.get_params() == fitted.get_params()
    terms = np.arange(corpus.n_terms)
    np.testing.assert_array_equal(back.p_w_d(terms), fitted.p_w_d(terms))
    np.testing.assert_array_equal(back.log_lik_, fitted.log_lik_)
    assert back._net is None  # ranking built no network: it is built when first needed
    np.testing.assert_array_equal(back.transform(corpus), fitted.doc_mix_)
    assert back._net is not None and back._net_state is None
    for (k, got), want in zip(back.net_.state_dict().items(), fitted.net_.state_dict().values()):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=k)
    from models import registry

    assert type(registry.load(path)) is AVIPAM
    with pytest.raises(ValueError, match="fingerprint"):
        AVIPAM.load(path, fingerprint="other")


def test_ranking_with_a_model_file_starts_no_torch_and_a_damaged_network_is_refused_when_built(fitted, corpus_beta, tmp_path):
    """A run loads the file's checked arrays and ranks without torch (seconds of a command's
    start); the network's state, which only inference reads, is checked when first built."""
    from models.common import checkpoint as ck

    path = tmp_path / "avi.npz"
    fitted.save(path)
    code = ("import sys\nfrom models import registry\nm = registry.load(sys.argv[1])\nm.p_w_d([1, 9])\n"
            "print('torch' in sys.modules)\ntry:\n    m.net_\nexcept ValueError as e:\n    print(e)\n"
            "else:\n    print('built')\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout == "False\nbuilt\n", out.stderr
    f = ck.read_model_file(path)
    name = next(k for k in f.arrays if k.startswith("net.") and f.arrays[k].dtype.kind == "f")
    bad = f.arrays[name].copy()
    bad.flat[0] = np.nan
    header = {k: v for k, v in f.header.items() if k not in ("format", "format_version", "arrays")}
    ck.write_model_file(tmp_path / "bad.npz", header, dict(f.arrays, **{name: bad}))
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "bad.npz")], capture_output=True, text=True, check=True)
    assert out.stdout == f"False\n{tmp_path / 'bad.npz'}: {name} holds a value that is not finite\n", out.stderr


def test_files_without_n_docs_in_the_header_still_load(fitted, corpus_beta, tmp_path):
    """Files written before the header recorded n_docs take it from their arrays."""
    from models.common import checkpoint as ck

    path = tmp_path / "avi.npz"
    fitted.save(path)
    f = ck.read_model_file(path)
    header = {k: v for k, v in f.header.items() if k not in ("n_docs", "format", "format_version", "arrays")}
    ck.write_model_file(tmp_path / "old.npz", header, dict(f.arrays))
    assert "n_docs" not in ck.read_header(tmp_path / "old.npz")
    back = AVIPAM.load(tmp_path / "old.npz", fingerprint=corpus_beta[0].fingerprint)
    assert back.n_docs_ == fitted.n_docs_ == corpus_beta[0].n_docs
    back.save(tmp_path / "again.npz")
    assert ck.read_header(tmp_path / "again.npz")["n_docs"] == corpus_beta[0].n_docs


@pytest.mark.parametrize("arch, levels, groups", [
    ("3pam:5", [5], [(0, 5)]),
    ("5pam:2,3,4", [2, 3, 4], [(0, 4)]),
    ("molda:3:4", [2, 7], [(0, 3), (3, 7)]),
])
def test_other_architectures_train_and_mix(arch, levels, groups):
    a = parse_arch(arch)
    assert a.levels == levels and a.groups == groups
    assert [m.shape for m in a.masks][0][0] == 1
    rng = np.random.default_rng(1)
    corpus = make_corpus(np.arange(41) * 20, rng.integers(0, 30, 800), n_terms=30)
    m = AVIPAM(arch=arch, epochs=2, batch_size=10, hidden=8, n_jobs=1, n_chains=1).fit(corpus)
    assert m.n_topics == levels[-1] == m.topic_word_.shape[0]
    np.testing.assert_allclose(m.doc_mix_.sum(1), 1.0, atol=1e-5)
    if arch.startswith("molda"):
        # Every component's topics take exactly the root's share of that component.
        assert a.masks[1][0, :3].all() and not a.masks[1][0, 3:].any()


@pytest.mark.parametrize("bad, msg", [
    ("4pam:50", "needs 2 level sizes"), ("pam:3", "cannot parse"), ("molda:10", ">= 2 components"),
    ("3pam:1", "at least 2"), (7, "must be a string"),
])
def test_bad_architectures_are_refused(bad, msg):
    with pytest.raises(ValueError, match=msg):
        parse_arch(bad)


def test_bad_parameters_are_refused(corpus_beta):
    corpus = corpus_beta[0]
    for kw, msg in [(dict(norm="layer"), "norm"), (dict(lr=0), "lr"), (dict(dropout=1.0), "dropout"),
                    (dict(theta_dropout=-0.1), "theta_dropout"), (dict(epochs=0), "epochs"),
                    (dict(kl_warmup=-1), "kl_warmup"), (dict(kl_warmup=2.5), "kl_warmup")]:
        with pytest.raises(ValueError, match=msg):
            AVIPAM(**kw).fit(corpus)


def test_import_models_does_not_import_torch():
    code = "import sys, models; models.model_class('lda'); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_killed_run_leaves_no_half_written_checkpoint(corpus_beta, tmp_path):
    path = tmp_path / "k.ckpt"

    def kill(model, epoch, n):
        raise Killed

    with pytest.raises(Killed):
        AVIPAM(epochs=2, checkpoint_every=1, **KW).fit(corpus_beta[0], callback=kill, checkpoint=path)
    assert path.exists() and not (tmp_path / "k.ckpt.tmp").exists()


def test_l2_variant_trains_without_batch_statistics(corpus_beta):
    """Section 4.1's l2 normalisation: the ELBO rises and every document's mixture is its own
    (a batch of one document gives the same mixture as the whole batch)."""
    corpus = corpus_beta[0]
    m = AVIPAM(epochs=10, norm="l2", **KW).fit(corpus)
    ll = m.log_lik_[:, 0]
    assert np.isfinite(ll).all() and ll[-1] > ll[0]
    from models.common.corpus import make_corpus as mk

    one = mk(corpus.doc_ptr[:2] - corpus.doc_ptr[0], corpus.term_ids[corpus.doc_ptr[0]:corpus.doc_ptr[1]],
             n_terms=corpus.n_terms)
    np.testing.assert_allclose(m.transform(one)[0], m.doc_mix_[0], rtol=1e-5)


def test_collapse_counts_of_a_learned_model(fitted):
    from retrieval.bench.avipam import collapse_counts

    assert collapse_counts(fitted) == (0, 0)


def test_mixture_spread_of_uniform_peaked_and_learned_mixtures(fitted):
    from retrieval.bench.avipam import mixture_spread

    np.testing.assert_allclose(mixture_spread(np.full((3, 4), 0.25)), (0.25, 4.0))
    np.testing.assert_allclose(mixture_spread([[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 2.0]]), (0.75, 1.5))
    top, eff = mixture_spread(fitted.doc_mix_)  # the synthetic documents use few of 6 sub-topics
    assert top > 0.3 and 1.0 < eff < 5.0


def test_doc_model_fit_and_effective_topics(fitted, corpus_beta):
    from retrieval.bench.avipam import doc_model_fit, effective_topics, mixture_spread

    corpus = corpus_beta[0]
    X = count_matrix(corpus).toarray().astype(np.float64)
    want = (X * np.log(fitted.doc_mix_ @ fitted.topic_word_)).sum() / corpus.n_tokens
    assert np.isclose(doc_model_fit(fitted, corpus, chunk=7), want)
    n_w = X.sum(0)
    unigram = (n_w[n_w > 0] * np.log(n_w[n_w > 0] / n_w.sum())).sum() / corpus.n_tokens
    assert np.isclose(doc_model_fit(None, corpus), unigram)
    assert doc_model_fit(fitted, corpus) > unigram + 0.3  # the documents use few sub-topics
    assert np.isclose(effective_topics(fitted, corpus.n_docs), mixture_spread(fitted.doc_mix_)[1])


def test_distinct_topics_keep_the_best_of_each_duplicate_group():
    from retrieval.bench.avipam import distinct_topics

    tops = [[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 9], [6, 7, 8, 9, 10, 11], [0, 1, 2, 3, 20, 21]]
    # 0 and 1 share 5 words (one group); 3 shares only 4 with either, 2 stands alone
    np.testing.assert_array_equal(distinct_topics(tops, [0.1, 0.3, 0.2, 0.0]), [1, 2, 3])
    np.testing.assert_array_equal(distinct_topics(tops, [0.3, 0.1, 0.2, 0.0]), [0, 2, 3])
    np.testing.assert_array_equal(distinct_topics(tops, [0.3, 0.1, 0.2, 0.0], overlap=4), [0, 2])


@pytest.mark.parametrize("decoder", ["mixture", "product"])
def test_theta_dropout_changes_training_only(corpus_beta, decoder):
    """Dropout on the document mixture (AVITM's keep 0.4 on theta): a mixture decoder still gets
    a distribution (renormalised), training draws other numbers, and the amortized mixtures of
    the fitted model carry no dropout (eval mode is deterministic)."""
    import torch

    corpus = corpus_beta[0]
    a = AVIPAM(epochs=3, decoder=decoder, **KW).fit(corpus)
    b = AVIPAM(epochs=3, decoder=decoder, theta_dropout=0.6, **KW).fit(corpus)
    assert np.isfinite(b.log_lik_).all()
    assert not np.array_equal(a.log_lik_, b.log_lik_)
    np.testing.assert_allclose(b.doc_mix_.sum(1), 1.0, atol=1e-9)
    np.testing.assert_array_equal(b.transform(corpus), b.transform(corpus))
    net = b.net_
    net.train()
    x = torch.from_numpy(np.ones((4, corpus.n_terms), dtype=np.float32))
    mix, _ = net(x, torch.Generator().manual_seed(0))
    if decoder == "mixture":
        np.testing.assert_allclose(mix.sum(1).detach().numpy(), 1.0, rtol=1e-5)
    else:  # inverted dropout: zeros and entries scaled by 1 / 0.4
        assert (mix == 0).any()
    net.eval()


@pytest.mark.parametrize("norm", ["batch", "l2", "none"])
def test_product_decoder_document_model(corpus_beta, norm, tmp_path):
    """ProdLDA's decoder: the ELBO rises, and p_w_d from the stored per-word and per-document
    numbers equals the network's own softmax over the whole vocabulary (eval mode)."""
    import torch

    corpus = corpus_beta[0]
    m = AVIPAM(epochs=8, norm=norm, decoder="product", **KW).fit(corpus)
    ll = m.log_lik_[:, 0]
    assert ll[-1] > ll[0]
    V = corpus.n_terms
    p = m.p_w_d(np.arange(V))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-9)
    with torch.no_grad():
        want = torch.exp(m.net_.log_p_words(torch.from_numpy(m.doc_mix_))).numpy()
    np.testing.assert_allclose(p, want, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(m.p_w_d([5, 2]), p[:, [5, 2]], rtol=1e-12)
    # its topics: the decoder's p(w | d) for a document made of that one topic
    with torch.no_grad():
        one = torch.exp(m.net_.log_p_words(torch.eye(m.n_topics, dtype=torch.float64))).numpy()
    np.testing.assert_allclose(m.topic_word_, one, rtol=1e-4, atol=1e-7)
    if norm == "batch":  # not ProdLDA's softmax(beta_k): the per-word scale and shift count
        assert not np.allclose(m.topic_word_, torch.softmax(m.net_.beta.detach(), 1).numpy(), rtol=0.1)
    m.save(tmp_path / "p.npz")
    np.testing.assert_array_equal(AVIPAM.load(tmp_path / "p.npz").p_w_d([1, 9]), m.p_w_d([1, 9]))


def test_prepared_corpus_file_round_trips_and_bad_files_are_refused(corpus_beta, tmp_path):
    """The bench's --corpus-npz file gives back the same tokens, vocabulary and fingerprint
    (so models trained from it are tied to the same corpus) and a rows file of saved topics."""
    import json

    from retrieval.bench.avipam import load_corpus_npz, save_corpus_npz, save_row

    corpus = corpus_beta[0]
    vocab = [f"w{i}" for i in range(corpus.n_terms)]
    save_corpus_npz(corpus, vocab, tmp_path / "sub" / "c.npz")
    back, vocab2 = load_corpus_npz(tmp_path / "sub" / "c.npz")
    np.testing.assert_array_equal(back.term_ids, corpus.term_ids)
    np.testing.assert_array_equal(back.doc_ptr, corpus.doc_ptr)
    assert vocab2 == vocab and back.fingerprint == corpus.fingerprint
    np.savez(tmp_path / "bad.npz", doc_ptr=corpus.doc_ptr)
    with pytest.raises(ValueError, match="not a prepared corpus"):
        load_corpus_npz(tmp_path / "bad.npz")
    m = AVIPAM(epochs=2, **KW).fit(corpus)
    save_row(tmp_path / "rows", "aviPAM 4pam:2,6", m, dict(model="x", npmi_doc=np.float64(0.5)))
    assert AVIPAM.load(tmp_path / "rows" / "aviPAM_4pam_2_6.model.npz").n_topics == 6
    z = np.load(tmp_path / "rows" / "aviPAM_4pam_2_6.npz")
    assert z["top20"].shape == (6, 20) and z["topic_word"].shape == (6, corpus.n_terms)
    np.testing.assert_array_equal(z["top20"][3], m.topic_words(3, top=20)[0])
    row = json.loads((tmp_path / "rows" / "rows.jsonl").read_text())
    assert row == {"model": "x", "npmi_doc": 0.5}


def test_bench_schedules_tables_product_decoder_others_the_estimators():
    from retrieval.bench.avipam import OTHER_SCHEDULE, TABLE_SCHEDULE, settings

    a = settings(TABLE_SCHEDULE)
    assert (a.decoder, a.lr, a.epochs) == ("product", 2e-3, 200)
    a = settings(OTHER_SCHEDULE)
    assert (a.decoder, a.lr, a.epochs) == ("mixture", 1e-3, 100)
    a = settings(TABLE_SCHEDULE, decoder="mixture", lr=1e-3, epochs=7)
    assert (a.decoder, a.lr, a.epochs) == ("mixture", 1e-3, 7)
    with pytest.raises(TypeError, match="unknown options"):
        settings(TABLE_SCHEDULE, epoch=7)


def test_bench_dmfvi_row_is_sklearn_variational_lda(corpus_beta):
    """The paper's LDA DMFVI row: scikit-learn's batch variational LDA behind topic_words."""
    from retrieval.bench.avipam import SklearnLDA, collapse_counts

    corpus, beta = corpus_beta
    m = SklearnLDA(6, max_iter=30, seed=0, n_jobs=1).fit(corpus)
    np.testing.assert_allclose(m.topic_word_.sum(1), 1.0)
    assert matched_cosines(m.topic_word_, beta).min() > 0.9
    ids, p = m.topic_words(2, top=10)
    assert ids.dtype == np.int64 and (np.diff(p) <= 0).all() and len(set(ids // 10)) == 1
    assert collapse_counts(m) == (0, 0)
    online = SklearnLDA(6, max_iter=30, seed=0, n_jobs=1, method="online").fit(corpus)
    assert matched_cosines(online.topic_word_, beta).min() > 0.9
    assert not np.allclose(online.topic_word_, m.topic_word_)


@pytest.mark.parametrize("arch, decoder, topic_update", [
    ("4pam:2,6", "mixture", "gradient"), ("4pam:2,6", "product", "gradient"),
    ("4pam:2,6", "mixture", "em"), ("ctm:6", "mixture", "gradient"), ("molda:2:3", "product", "gradient"),
])
def test_sparse_batches_give_the_dense_loss_and_gradients(corpus_beta, arch, decoder, topic_update):
    """Training reads a batch's nonzero counts alone (Docs: encoders as sums over a document's
    words, the mixture decoder's likelihood at the pairs present); the dense (B, V) counts
    through the same network, its slow twin, give the same ELBO, gradients and M-step counts to
    float32 rounding (only the order of the sums differs), an empty document among them."""
    import torch
    from scipy import sparse

    from models.avipam.nets.docs import Docs, as_docs

    corpus = corpus_beta[0]
    X = count_matrix(corpus)
    X = sparse.vstack([X[:20], sparse.csr_matrix((1, X.shape[1]), dtype=X.dtype), X[20:40]]).tocsr()
    kw = dict(KW, arch=arch, decoder=decoder, topic_update=topic_update, epochs=1, refine_steps=0)
    m = AVIPAM(**kw).fit(corpus)
    net = m.net_.train()
    dense = torch.from_numpy(X.toarray())
    docs = Docs.from_csr(X)
    # a training batch on the CPU (by_term): the first layers' gradients summed term by term
    train = Docs.from_csr(X, by_term=True)
    for a, b, c in zip(as_docs(dense), docs, train[:4]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
        torch.testing.assert_close(a, c, rtol=0, atol=0)
    assert docs.by_term is None and train.by_term[0].tolist() == np.unique(X.indices).tolist()
    got = {}
    for name, x in (("dense", dense), ("docs", docs), ("train", train)):
        net.zero_grad()
        if topic_update == "em":
            net.em_counts.zero_()
        neg_elbo, kl = net.loss(x, torch.Generator().manual_seed(4))
        neg_elbo.sum().backward()
        net.dense_grads()  # as training does: the first layers' sparse gradients, dense
        grads = {k: p.grad.clone() for k, p in net.named_parameters()}
        counts = net.em_counts.clone() if topic_update == "em" else None
        got[name] = (neg_elbo.detach(), kl.detach(), grads, counts)
    e1, k1, g1, c1 = got["dense"]
    for name in ("docs", "train"):
        e2, k2, g2, c2 = got[name]
        torch.testing.assert_close(e2, e1, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(k2, k1, rtol=1e-5, atol=1e-5)
        # float32 sums in another order: agreement to 1e-5 of the largest gradient entry (the
        # biases before a batch normalisation have a zero gradient, rounding noise on both sides)
        scale = max(float(g.abs().max()) for g in g1.values())
        for k in g1:
            torch.testing.assert_close(g2[k], g1[k], rtol=1e-4, atol=1e-5 * scale, msg=f"{name} {k}")
        if topic_update == "em":
            assert c1.sum() > 0
            torch.testing.assert_close(c2, c1, rtol=1e-5, atol=1e-5)
    net.eval()
    # the decoder's likelihood at the pairs is the dense sum_w x_dw log p(w | d)
    with torch.no_grad():
        mix, _ = net(docs, None, sample=False)
        want = (dense * net.log_p_words(mix)).sum(1)
        torch.testing.assert_close(net.expected_log_lik(docs, mix[None]), want, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(net.expected_log_lik(dense, mix[None]), want, rtol=1e-5, atol=1e-4)
