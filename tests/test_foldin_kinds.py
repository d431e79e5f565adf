"""Fold-in of new documents for PAM, tree-LDA and TCM (models.<kind>_foldin): every fast kernel
against its reference twin, and for every kind the properties the ranker and document
completion rely on (same seed, same result whatever the threads; distributions; folding in a
training document gives back its document model)."""
import numpy as np
import pytest

from models.common import foldin as common_foldin
from models.common.kernels.rng import seed_stream
from models.pam import foldin_kernels as PF
from models.tcm import foldin_kernels as CF
from models.tree_lda import foldin_kernels as TF
from models.common.heldout import document_completion
from models.pam.model import PAM
from models.tcm.model import TCM
from models.tree_lda.model import TreeLDA
from tests.reference import pam_foldin_reference as pam_ref
from tests.reference import tcm_foldin_reference as tcm_ref
from tests.reference import tree_lda_foldin_reference as tree_ref
from tests.test_foldin import K_PLANT, WORDS_PER, as_corpus, planted_docs

V = K_PLANT * WORDS_PER
TRAIN = planted_docs(100, 30, seed=0)


def fit_pam():
    return PAM(n_super=2, n_sub=4, alpha_root=0.5, alpha_sub=0.5, n_chains=2, n_iter=30, burn_in=20,
               sample_every=5, n_shards=1, seed=3).fit(as_corpus(TRAIN))


# word 2 has three paths (its own leaf and two synsets); one synset spans two planted topics
SYNSETS = [[0, 1, 2], [2, 3], [10, 11], [5, 25], [30, 31, 32, 33]]


def fit_tree():
    return TreeLDA(n_topics=K_PLANT, alpha=0.2, n_chains=2, n_iter=30, burn_in=20, sample_every=5,
                   seed=3).fit(as_corpus(TRAIN), synsets=SYNSETS)


def fit_tcm():
    return TCM(n_topics=K_PLANT, alpha=0.2, max_len=3, n_chains=2, n_iter=30, burn_in=20,
               sample_every=5, n_shards=1, seed=3).fit(as_corpus(TRAIN))


# each kind is trained once for the module: the per-kind fixtures below and ``trained`` share it
FITS = {"pam": "pam", "tree-lda": "tree", "tcm": "tcm"}


@pytest.fixture(scope="module", params=sorted(FITS))
def trained(request):
    return request.getfixturevalue(FITS[request.param])


@pytest.fixture(scope="module")
def pam():
    return fit_pam()


@pytest.fixture(scope="module")
def tree():
    return fit_tree()


@pytest.fixture(scope="module")
def tcm():
    return fit_tcm()


# -- every kind ----------------------------------------------------------------------------------


def test_same_seed_same_result_whatever_threads_and_batches(trained, monkeypatch):
    m = trained
    docs = planted_docs(5, 20, seed=11) + [np.zeros(0, dtype=np.int64)]
    a = m.fold_in(docs, seed=7, samples=None)
    m.n_jobs = 1
    try:
        b = m.fold_in(docs, seed=7, samples=None)
        monkeypatch.setattr(common_foldin, "_BATCH_ENTRIES", 30)  # several batches
        c = m.fold_in(docs, seed=7, samples=None)
    finally:
        m.n_jobs = None
    terms = np.arange(V)
    for x in (b, c):
        np.testing.assert_array_equal(x.doc_topics_, a.doc_topics_)
        np.testing.assert_array_equal(x.p_w_d(terms), a.p_w_d(terms))
    mixed = [np.random.default_rng(d).integers(0, V, size=20) for d in range(4)]  # uncertain topics
    assert not np.array_equal(m.fold_in(mixed, seed=8).doc_topics_, m.fold_in(mixed, seed=7).doc_topics_)


def test_distributions(trained):
    m = trained
    f = m.fold_in(planted_docs(4, 15, seed=12) + [np.zeros(0, dtype=np.int64)], n_iter=4, n_keep=2)
    assert f.doc_topics_.shape == (5, m.n_topics)
    np.testing.assert_allclose(f.doc_topics_.sum(1), 1.0, rtol=1e-12)
    if getattr(m, "p_w_d_sums_to_one", True):  # TCM's P(w|d) leaves mass to longer collocations
        np.testing.assert_allclose(f.p_w_d(np.arange(V)).sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(m.transform(planted_docs(2, 15, seed=12), n_iter=4, n_keep=2),
                               f.doc_topics_[:2])


def test_training_documents_fold_in_to_their_document_model(trained):
    """Folding in a training document's tokens gives a P_TM close to the model's own for it:
    much closer than the documents' models are to each other, and closer than the model's two
    chains are to each other for the document (L1 distances, mean over documents)."""
    m = trained
    terms = np.arange(V)
    own = m.p_w_d(terms)
    got = m.fold_in(TRAIN, samples=None, n_iter=20, n_keep=10).p_w_d(terms)
    per_chain = m.p_w_d_per_sample(terms).mean(1)
    gap = np.abs(got - own).sum(1).mean()
    spread = np.abs(own - own.mean(0)).sum(1).mean()
    chains = np.abs(per_chain[0] - per_chain[1]).sum(1).mean()
    assert gap < 0.15 * spread and gap < 0.5 * chains, (gap, spread, chains)


def test_document_completion_prefers_in_topic_documents(trained):
    m = trained
    rng = np.random.default_rng(5)
    held = planted_docs(20, 30, seed=21)
    shuffled = [rng.integers(0, V, size=30) for _ in held]  # tokens from no topic in particular
    good = document_completion(m, held, seed=1)
    bad = document_completion(m, shuffled, seed=1)
    assert np.isfinite(good.log_lik) and good.n_scored == 20 * 15
    assert good.log_lik > bad.log_lik + 0.3
    assert document_completion(m, held, seed=1) == good


def test_bad_input_is_refused(trained):
    with pytest.raises(ValueError, match="term id 40 is out of range"):
        trained.fold_in([np.array([0, 40])])
    with pytest.raises(ValueError, match="n_keep"):
        trained.fold_in([np.array([1])], n_iter=2, n_keep=3)
    with pytest.raises(ValueError, match="samples must be"):
        trained.fold_in([np.array([1])], samples=99)


# -- PAM -----------------------------------------------------------------------------------------


def pam_dense(m, cs):
    """(n_wj (V, n_sub), n_j, alpha) of kept sample cs, dense."""
    n_wj = np.zeros((m.n_terms_, m.n_sub), dtype=np.int64)
    for w in range(m.n_terms_):
        lo, hi = m.tw_ptr_[cs, w], m.tw_ptr_[cs, w + 1]
        n_wj[w, m.tw_sub_[lo:hi].astype(np.int64)] = m.tw_count_[lo:hi]
    return n_wj, m.n_j_samples_[cs], m.alpha_samples_[cs]


def pam_sample(m, cs):
    return PF.make_sample(cs, m.tw_ptr_, m.tw_sub_, m.tw_count_, m.n_j_samples_, m.alpha_samples_,
                          m._alpha_r(), float(m.beta))


def test_pam_fold_doc_matches_reference_draw_for_draw(pam):
    m = pam
    for cs in (0, m.n_samples_ * m.n_chains - 1):
        n_wj, n_j, alpha = pam_dense(m, cs)
        smp = pam_sample(m, cs)
        for d, terms in enumerate(planted_docs(3, 25, seed=13)):
            s_fast = np.empty(4, dtype=np.uint64)
            seed_stream(5, 100 * cs + d, s_fast)
            s_ref = s_fast.copy()
            st, words, uid = PF.new_doc_state(terms, m.n_super, m.n_sub, 3)
            for u, w in enumerate(words):
                PF.word_G(w, smp, st.G[u])
            anz = PF.fold_doc(terms, uid, smp, st, 6, 3, s_fast)
            z_ref, acc_ref = pam_ref.fold_doc(terms, n_wj, n_j, alpha, m._alpha_r(),
                                              float(m.beta), 6, 3, s_ref)
            np.testing.assert_array_equal(st.z, z_ref)
            np.testing.assert_array_equal(st.acc, acc_ref.ravel())
            assert anz == np.count_nonzero(acc_ref)
            np.testing.assert_array_equal(s_fast, s_ref)


def test_pam_conditionals_match_reference(pam):
    m = pam
    cs = 1
    n_wj, n_j, alpha = pam_dense(m, cs)
    smp = pam_sample(m, cs)
    rng = np.random.default_rng(0)
    G = np.empty(m.n_super)
    for _ in range(30):
        n_pair = rng.integers(0, 4, size=(m.n_super, m.n_sub)) * (rng.random((m.n_super, m.n_sub)) < 0.5)
        st, _, _ = PF.new_doc_state(np.zeros(20, dtype=np.int64), m.n_super, m.n_sub, 1)
        keys = np.flatnonzero(n_pair.ravel())
        st.n_pair[:] = n_pair.ravel()
        st.n_i[:] = n_pair.sum(1)
        st.plist[:len(keys)] = keys
        w = int(rng.integers(V))
        PF.word_G(w, smp, G)
        fast = PF.token_conditional(w, G, smp, st, len(keys))
        slow = pam_ref.conditional(w, st.n_i, n_pair, n_wj, n_j, alpha, m._alpha_r(),
                                   float(m.beta))
        np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=0)


def test_pam_p_w_d_matches_reference(pam):
    m = pam
    docs = planted_docs(4, 20, seed=14)
    f = m.fold_in(docs, n_iter=6, n_keep=3, samples=None, seed=2)
    got = f.p_w_d(np.arange(V))
    want = np.zeros_like(got)
    mix = np.zeros((len(docs), m.n_sub))
    for j, cs in enumerate(f.css_):
        n_wj, n_j, alpha = pam_dense(m, cs)
        for d in range(len(docs)):
            lo, hi = f.f_ptr_[j, d], f.f_ptr_[j, d + 1]
            summed = np.zeros(m.n_super * m.n_sub)
            summed[f.f_key_[lo:hi]] = f.f_count_[lo:hi]
            summed = summed.reshape(m.n_super, m.n_sub)
            assert summed.sum() == 3 * len(docs[d])
            want[d] += pam_ref.p_w_d(summed, 3, len(docs[d]), n_wj, n_j, alpha,
                                     m._alpha_r(), float(m.beta))
            if cs // m.n_samples_ == 0:  # doc_topics_ is over chain 0's sub-topics
                mix[d] += pam_ref.mixture(summed, 3, len(docs[d]), alpha, m._alpha_r())
    want /= len(f.css_)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(f.doc_topics_, mix / m.n_samples_, rtol=1e-12)
    ptr = np.array([0, 2, 2, 5, 6])
    toks = np.array([3, 7, 0, 39, 3, 12])
    doc = np.repeat(np.arange(4), np.diff(ptr))
    np.testing.assert_allclose(f.token_probs(ptr, toks), got[doc, toks], rtol=1e-12)


# -- tree-LDA ------------------------------------------------------------------------------------


def test_tree_conditionals_match_reference(tree):
    """The fast kernel's topic conditional is the reference's joint (topic, path) conditional
    summed over the word's paths."""
    m = tree
    rng = np.random.default_rng(1)
    for cs in (0, 3):
        n_e = m.edge_counts(cs)
        phi = m._phi_terms(cs, np.arange(m.n_terms_))
        alpha = m.alpha_samples_[cs]
        for w in (2, 3, 11, 25, 39):
            ndk = rng.integers(0, 5, size=m.n_topics)
            fast = TF.token_conditional(w, phi, alpha, ndk)
            np.testing.assert_allclose(fast, tree_ref.conditional(w, ndk, m.tree_, n_e, alpha),
                                       rtol=1e-10, atol=0)


def test_tree_fold_doc_matches_reference_draw_for_draw(tree):
    m = tree
    cs = 1
    alpha = m.alpha_samples_[cs]
    for d, terms in enumerate(planted_docs(3, 25, seed=13)):
        words, rows = np.unique(terms, return_inverse=True)
        phi = np.ascontiguousarray(m._phi_terms(cs, words))
        phi_ref = tree_ref.word_probs(m.tree_, m.edge_counts(cs), words)
        np.testing.assert_allclose(phi, phi_ref, rtol=1e-12)
        s_fast = np.empty(4, dtype=np.uint64)
        seed_stream(5, d, s_fast)
        s_ref = s_fast.copy()
        K = m.n_topics
        z, ndk, acc = np.empty(len(terms), np.int64), np.zeros(K, np.int64), np.zeros(K, np.int64)
        TF.fold_doc(rows.astype(np.int64), phi, alpha, 6, 3, s_fast, z, ndk, acc, np.empty(K))
        z_ref, acc_ref = tree_ref.fold_doc(rows, phi, alpha, 6, 3, s_ref)
        np.testing.assert_array_equal(z, z_ref)
        np.testing.assert_array_equal(acc, acc_ref)
        assert not ndk.any()


def test_tree_p_w_d_matches_reference(tree):
    m = tree
    docs = planted_docs(4, 20, seed=14)
    f = m.fold_in(docs, n_iter=6, n_keep=3, samples=None, seed=2)
    got = f.p_w_d(np.arange(V))
    want = np.zeros_like(got)
    for j, cs in enumerate(f.css_):
        phi = tree_ref.word_probs(m.tree_, m.edge_counts(cs), range(V))
        for d in range(len(docs)):
            lo, hi = f.f_ptr_[j, d], f.f_ptr_[j, d + 1]
            summed = np.zeros(m.n_topics)
            summed[f.f_topic_[lo:hi].astype(np.int64)] = f.f_count_[lo:hi]
            assert summed.sum() == 3 * len(docs[d])
            want[d] += tree_ref.p_w_d(summed, 3, len(docs[d]), phi, m.alpha_samples_[cs])
    np.testing.assert_allclose(got, want / len(f.css_), rtol=1e-10)


# -- TCM -----------------------------------------------------------------------------------------


def tcm_sample(m, cs):
    return CF.make_sample(cs, m.ct_ptr_, m.ct_type_, m.ct_topic_, m.ct_count_, m.n_k_samples_,
                          m.alpha0_samples_, m.p0_len_, float(m.alpha_), float(m.p_stop))


def tcm_spans(m, terms, split=None):
    span = np.empty((len(terms), m.max_len), dtype=np.int64)
    split = np.zeros(len(terms), dtype=np.uint8) if split is None else split
    CF.span_types(np.array([0, len(terms)]), terms, split, m.type_ptr_, m.type_terms_,
                  np.asarray(m._len_blocks(), dtype=np.int64), span)
    return span


def test_tcm_span_types_are_the_models_types(tcm):
    m = tcm
    terms = np.concatenate([m.collocation_terms(t) for t in m.top_collocations(3, min_len=2)[0]])
    span = tcm_spans(m, terms.astype(np.int64))
    for i in range(len(terms)):
        for n in range(1, m.max_len + 1):
            want = m.find_collocation(terms[i:i + n]) if i + n <= len(terms) else -1
            assert span[i, n - 1] == want
    assert (span[:, 1] >= 0).any()
    split = (np.arange(len(terms)) % 3 == 1).astype(np.uint8)
    cut = tcm_spans(m, terms.astype(np.int64), split)
    for i in range(len(terms)):
        for n in range(1, m.max_len + 1):
            crosses = i + n <= len(terms) and split[i:i + n - 1].any()
            assert cut[i, n - 1] == (CF.CROSSES if crosses else span[i, n - 1])


@pytest.mark.parametrize("with_splits", [False, True])
def test_tcm_position_conditionals_match_reference(tcm, with_splits):
    """The K + 1 weights of a position, from the documented formula, against the conditional
    of the joint probability of the document's collocations and topics; where a split follows
    the position (a stopword or punctuation), only its K topic weights."""
    m = tcm
    K = m.n_topics
    rng = np.random.default_rng(2)
    for cs in (0, 3):
        smp = tcm_sample(m, cs)
        for terms in planted_docs(3, 12, seed=15):
            split = (rng.random(len(terms)) < 0.3).astype(np.uint8) if with_splits else None
            span = tcm_spans(m, terms, split)
            for _ in range(6):
                b = np.where(rng.random(len(terms)) < 0.6, rng.integers(0, K, len(terms)), -1)
                b[-1] = rng.integers(K)
                if split is not None:  # a split is a boundary
                    b[(split == 1) & (b < 0)] = rng.integers(K)
                for i in range(len(b)):  # no collocation longer than max_len
                    if i >= m.max_len - 1 and (b[i - m.max_len + 1:i + 1] == -1).all():
                        b[i] = rng.integers(K)
                j = int(rng.integers(len(terms)))
                e = j if j == len(b) - 1 else j + 1 + int(np.argmax(b[j + 1:] >= 0))
                s = next((i + 1 for i in range(j - 1, -1, -1) if b[i] >= 0), 0)
                ndk = np.zeros(K, dtype=np.int64)
                N = 0
                for a, z, k in tcm_ref.collocations(b):  # all but L and R (or LR)
                    if z < s or a > e:
                        ndk[k] += 1
                        N += 1
                w = np.empty(K + 1)
                nw = CF.position_weights(j, span, smp, b, ndk, N, np.empty(K), w)
                fast = w[:nw] / w[:nw].sum()
                slow = tcm_ref.conditional(m, cs, terms, b, j, split)
                np.testing.assert_allclose(fast, slow[:nw], rtol=1e-9, atol=1e-15)
                assert np.all(slow[nw:] == 0)
                if split is not None and split[j] and j < len(b) - 1:
                    assert nw == K


def test_tcm_p_c_d_is_the_document_model_of_the_folded_counts(tcm):
    m = tcm
    docs = planted_docs(3, 20, seed=14)
    f = m.fold_in(docs, n_iter=6, n_keep=3, samples=None, seed=2)
    terms, seg = np.array([0, 1, 12, 13, 13]), np.array([0, 2, 3, 5])
    got = f.p_c_d(terms, seg)
    phi, _ = m._phi(terms, seg)
    want = np.zeros_like(got)
    for j, cs in enumerate(f.css_):
        for d in range(len(docs)):
            lo, hi = f.f_ptr_[j, d], f.f_ptr_[j, d + 1]
            n_dk = np.zeros(m.n_topics)
            n_dk[f.f_topic_[lo:hi].astype(np.int64)] = f.f_count_[lo:hi] / 3
            assert 0 < n_dk.sum() <= len(docs[d])
            want[d] += (n_dk + m.alpha_) @ phi[cs] / (n_dk.sum() + m.n_topics * m.alpha_)
    np.testing.assert_allclose(got, want / len(f.css_), rtol=1e-12)
    np.testing.assert_allclose(f.p_w_d([0, 12])[:, 0], f.p_c_d([0], [0, 1])[:, 0], rtol=1e-12)


def test_tcm_fold_in_keeps_collocations_within_splits(tcm):
    """With a split after every token each collocation is one token (n_keep * length of them per
    document and sample); without splits the planted collocations join tokens; bad flags are
    refused."""
    m = tcm
    docs = planted_docs(4, 16, seed=21)
    n_tokens = sum(len(d) for d in docs)

    def collocations_per_doc(f):
        return np.array([[f.f_count_[f.f_ptr_[j, d]:f.f_ptr_[j, d + 1]].sum() for d in range(len(docs))]
                         for j in range(f.f_ptr_.shape[0])])
    cut = m.fold_in(docs, n_iter=6, n_keep=3, samples=None, seed=4, split=np.ones(n_tokens, dtype=np.uint8))
    assert np.array_equal(collocations_per_doc(cut), np.tile([3 * len(d) for d in docs], (cut.f_ptr_.shape[0], 1)))
    free = m.fold_in(docs, n_iter=6, n_keep=3, samples=None, seed=4)
    assert (collocations_per_doc(free) < collocations_per_doc(cut)).any()
    with pytest.raises(ValueError, match="split must have shape"):
        m.fold_in(docs, split=np.ones(n_tokens - 1))
    with pytest.raises(TypeError, match="splits"):
        m.fold_in(docs, splits=np.ones(n_tokens))
