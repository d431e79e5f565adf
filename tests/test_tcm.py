"""TCM trainer: fast vs slow, invariants, reproducibility, resume, model files, planted phrases."""
import numpy as np
import pytest

from models.common.corpus import corpus_from_docs, synthetic_corpus
from models.tcm.model import TCM, joint_log_lik, split_flags
from models.tcm.build_kernels import init_random
from models.common.kernels.rng import make_rng_states
from tests.helpers import assert_doc_lists, assert_same_fit, resume_after_kill, save_and_load
from tests.reference import tcm_reference as ref


def small_corpus(n_docs=40, seed=2):
    corpus = synthetic_corpus(n_docs, 30, 14, seed=seed, n_latent=3)
    rng = np.random.default_rng(seed)
    return corpus, (rng.random(corpus.n_tokens) < 0.25).astype(np.uint8)


def prepared(model, corpus, split, alpha0=None):
    """A model with allocated, initialised chains, before any sweep (the first part of fit)."""
    model._check_params(corpus)
    model.fingerprint_ = corpus.fingerprint
    model.n_terms_ = corpus.n_terms
    model._split = split_flags(corpus, split)
    model._build_layout(corpus)
    model._alloc_chain_state(corpus)
    C = model.n_chains
    model.rng_ = make_rng_states(model.seed, C, model.n_shards + 1)
    model.alpha0_ = np.full(C, float(model.alpha0 if alpha0 is None else alpha0))
    for c in range(C):
        init_random(model._shard_doc, corpus.doc_ptr, model._split, model.b_[c], model.n_topics,
                    1.0, model.max_len, model.rng_[c, :model.n_shards])
        model._rebuild(c)
    return model


def check_invariants(model, corpus, c=0):
    """Restaurant and doc counts equal those rebuilt from b; no collocation spans a split or
    exceeds max_len; every document ends with a boundary."""
    b = model.b_[c]
    split = model._split
    assert (b[split == 1] >= 0).all(), "a split position without a boundary"
    ends = corpus.doc_ptr[1:][np.diff(corpus.doc_ptr) > 0] - 1
    assert (b[ends] >= 0).all()
    cols = ref.collocations(corpus.doc_ptr, corpus.term_ids, b)
    assert sum(e - s + 1 for _, s, e, _ in cols) == corpus.n_tokens
    for _, s, e, _ in cols:
        assert e - s + 1 <= model.max_len
        assert not split[s:e].any(), "a collocation spans a split"
    n_dk, n_kc, n_k = ref.counts_from_b(corpus.doc_ptr, corpus.term_ids, b, model.n_topics)
    t = model._tables[c]
    n_types = t[5]
    np.testing.assert_array_equal(t[12], n_k)
    got = {}
    for ty in range(n_types):
        terms = tuple(int(w) for w in corpus.term_ids[t[3][ty]:t[3][ty] + t[2][ty]])
        e = t[4][ty]
        prev = -1
        while e >= 0:
            assert t[8][e] > prev  # lists sorted by topic
            prev = t[8][e]
            if t[9][e]:
                got[(terms, int(t[8][e]))] = int(t[9][e])
            assert t[9][e] >= 0
            e = t[10][e]
    assert got == {k: v for k, v in n_kc.items() if v}
    # col_entry: the entry of the collocation that ends at every boundary
    for _, s, e, k in cols:
        en = t.col_entry[e]
        ty = t.en_type[en]
        assert t.en_topic[en] == k and t.ty_len[ty] == e - s + 1
        np.testing.assert_array_equal(corpus.term_ids[t.ty_pos[ty]:t.ty_pos[ty] + e - s + 1],
                                      corpus.term_ids[s:e + 1])
    assert_doc_lists(model.dt_topic_[c], model.dt_count_[c], model.dt_nnz_[c], model._cap_ptr, n_dk)


@pytest.mark.parametrize("sampler", ["exact", "sparse"])
def test_sweeps_match_reference_sampler(sampler):
    corpus, split = small_corpus()
    m = prepared(TCM(n_topics=4, max_len=4, n_chains=1, n_iter=2, burn_in=1, sample_every=1,
                     n_shards=1, seed=3, sampler=sampler), corpus, split, alpha0=3.0)
    p0 = ref.p0_table(m.p_stop, corpus.n_terms, m.max_len)
    N = corpus.n_tokens
    for _ in range(4):
        b0 = m.b_[0].copy()
        rng = m.rng_[0, 0].copy()
        rec_ref = np.zeros((N, 5))
        b_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, m._split, b0, 4, m.alpha_, 3.0, p0,
                          m.max_len, rng, sparse=sampler == "sparse", record=rec_ref)
        rec = np.zeros((N, 5))
        m._sweep(0, record=rec)
        np.testing.assert_array_equal(m.b_[0], b_ref)
        np.testing.assert_array_equal(m.rng_[0, 0], rng)
        # the conditional every draw came from, per token, to 1e-12
        np.testing.assert_allclose(rec, rec_ref, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(rec.sum(1), 1.0, rtol=1e-12)
        check_invariants(m, corpus)
    assert (m.b_[0] < 0).any() and (m.b_[0] >= 0).any()  # both merges and boundaries occur


@pytest.mark.parametrize("sampler", ["exact", "sparse"])
def test_sweep_matches_reference_from_a_hand_state(sampler):
    """Larger K, longer docs, and a start with many merges (not the all-unigram init)."""
    corpus = synthetic_corpus(40, 60, 25, seed=5, n_latent=4)
    split = (np.random.default_rng(1).random(corpus.n_tokens) < 0.2).astype(np.uint8)
    m = prepared(TCM(n_topics=9, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=1,
                     seed=8, sampler=sampler), corpus, split, alpha0=20.0)
    N = corpus.n_tokens
    b = (np.arange(N) % 9).astype(np.int32)
    b[(np.arange(N) % 3 == 1) & (m._split == 0)] = -1
    m.b_[0] = b
    m._rebuild(0)
    check_invariants(m, corpus)
    rng = m.rng_[0, 0].copy()
    rec_ref = np.zeros((N, 10))
    b_ref = ref.sweep(corpus.doc_ptr, corpus.term_ids, m._split, b, 9, m.alpha_, 20.0,
                      ref.p0_table(m.p_stop, corpus.n_terms, m.max_len), m.max_len, rng,
                      sparse=sampler == "sparse", record=rec_ref)
    rec = np.zeros((N, 10))
    m._sweep(0, record=rec)
    np.testing.assert_array_equal(m.b_[0], b_ref)
    np.testing.assert_allclose(rec, rec_ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("sampler,n_shards", [("sparse", 1), ("sparse", 3), ("exact", 2)])
def test_invariants_after_every_sweep(sampler, n_shards):
    corpus, split = small_corpus(60, seed=4)
    seen = []

    def cb(model, it, n_iter):
        check_invariants(model, corpus, 0)
        check_invariants(model, corpus, 1)
        seen.append(it)

    model = TCM(n_topics=5, n_chains=2, n_iter=6, burn_in=4, sample_every=1, max_len=3,
                n_shards=n_shards, seed=5, sampler=sampler)
    model.fit(corpus, split=split, callback=cb)
    assert seen == list(range(1, 7))


def test_log_lik_matches_reference():
    corpus, split = small_corpus()
    m = TCM(n_topics=4, n_chains=1, n_iter=3, burn_in=2, sample_every=1, log_lik_every=1,
            n_shards=2).fit(corpus, split=split)
    want = ref.log_lik(corpus.doc_ptr, corpus.term_ids, m.b_[0], 4, m.alpha_, m.alpha0_[0],
                       ref.p0_table(m.p_stop, corpus.n_terms, m.max_len))
    assert m.log_lik_.shape == (3, 1)
    np.testing.assert_allclose(m.log_lik_[-1, 0], want, rtol=1e-10)
    np.testing.assert_allclose(joint_log_lik(corpus, m.b_[0], 4, m.alpha_, m.alpha0_[0]), want, rtol=1e-10)


def test_alpha0_is_resampled_towards_its_posterior():
    corpus, split = small_corpus(80)
    m = TCM(n_topics=4, n_chains=1, n_iter=15, burn_in=14, sample_every=1, alpha0=1000.0,
            resample_alpha0=True, n_shards=2).fit(corpus, split=split)
    trace = m.alpha0_trace_[:, 0]
    assert len(trace) == 15 and trace[-1] < 300  # 1000 is far too large for ~1,000 tokens
    fixed = TCM(n_topics=4, n_chains=1, n_iter=3, burn_in=2, sample_every=1, alpha0=50.0,
                resample_alpha0=False).fit(corpus, split=split)
    assert (fixed.alpha0_trace_ == 50.0).all()


@pytest.mark.parametrize("sampler", ["sparse", "exact"])
def test_same_seed_same_b_whatever_the_thread_count(sampler):
    corpus, split = small_corpus(120)
    kw = dict(n_topics=6, n_chains=2, n_iter=5, burn_in=3, sample_every=1, n_shards=4, seed=9,
              sampler=sampler)
    m1 = TCM(n_jobs=1, **kw).fit(corpus, split=split)
    m2 = TCM(n_jobs=2, **kw).fit(corpus, split=split)
    np.testing.assert_array_equal(m1.b_, m2.b_)
    np.testing.assert_array_equal(m1.alpha0_, m2.alpha0_)
    assert m1.b_.dtype == np.int32 and m1.b_.shape == (2, corpus.n_tokens)
    assert (m1.b_[0] != m1.b_[1]).mean() > 0.3  # chains differ
    m3 = TCM(n_jobs=1, **dict(kw, seed=10)).fit(corpus, split=split)
    assert (m1.b_[0] != m3.b_[0]).mean() > 0.3


def test_a_chain_s_start_restaurants_are_built_for_its_first_sweep_alone():
    """A random segmentation's restaurants are the largest a training holds (at AP's size, the
    three chains' side by side were its peak): each chain's are built when its first sweep
    starts and dropped after it, and the chains are those of restaurants built all at once."""
    corpus, split = small_corpus(60)
    kw = dict(n_topics=5, n_chains=3, n_iter=3, burn_in=1, sample_every=1, n_shards=2, seed=4)
    built = []

    class Watched(TCM):
        def _sweep(self, c, record=None, merge=True, code=None):
            built.append([t is not None for t in self._tables])
            return super()._sweep(c, record, merge, code)

    class AllAtOnce(TCM):
        def _init_chains(self, corpus):
            super()._init_chains(corpus)
            self._merge(range(self.n_chains))

    lazy = Watched(**kw).fit(corpus, split=split)
    no, yes = False, True
    # the first sweeps: the chain's own just built, the others' not yet or no longer held
    assert built[:6] == [[yes, no, no], [no, yes, no], [no, no, yes],
                         [yes, yes, yes], [no, yes, yes], [no, no, yes]]
    eager = AllAtOnce(**kw).fit(corpus, split=split)
    np.testing.assert_array_equal(lazy.b_, eager.b_)
    np.testing.assert_array_equal(lazy.alpha0_trace_, eager.alpha0_trace_)
    np.testing.assert_array_equal(lazy.log_lik_, eager.log_lik_)


def test_resume_from_checkpoint_equals_uninterrupted(tmp_path):
    corpus, split = small_corpus(80)
    kw = dict(n_topics=5, n_chains=2, n_iter=12, burn_in=4, sample_every=2, n_shards=3, seed=3,
              checkpoint_every=3, log_lik_every=2)
    full = TCM(**kw).fit(corpus, split=split)
    path = tmp_path / "run.ckpt.npz"
    resumed = resume_after_kill(TCM, kw, corpus, path, kill_at=8, split=split)
    assert_same_fit(resumed, full, "b_", "alpha0_", "alpha0_trace_")
    # the checkpoint refuses other splits (same tokens) and other parameters
    with pytest.raises(ValueError, match="corpus content"):
        TCM(**kw).fit(corpus, split=1 - split, checkpoint=path)
    with pytest.raises(ValueError, match="n_topics"):
        TCM(**dict(kw, n_topics=6)).fit(corpus, split=split, checkpoint=path)


def test_save_load_and_fingerprint_refusal(tmp_path):
    corpus, split = small_corpus()
    m = TCM(n_topics=4, n_chains=2, n_iter=6, burn_in=2, sample_every=2, seed=1).fit(corpus, split=split)
    path = tmp_path / "tcm.npz"
    back = save_and_load(m, path, corpus.fingerprint)
    seg = np.array([0, 2, 3, 6])
    ids = corpus.term_ids[:6]
    np.testing.assert_array_equal(back.p_c_d(ids, seg), m.p_c_d(ids, seg))
    assert back.n_samples_ == 2
    with pytest.raises(ValueError, match="fingerprint") as e:
        TCM.load(path, fingerprint="other-index")
    assert corpus.fingerprint in str(e.value) and "other-index" in str(e.value)
    m.save(tmp_path / "full.npz", full=True)
    np.testing.assert_array_equal(TCM.load(tmp_path / "full.npz").b_, m.b_)


def test_default_priors_and_their_model_files(tmp_path):
    """alpha = 50 / K and a fixed alpha0 with alpha0 P0(w) = 0.01 (LDA's beta); a file keeps the
    alpha it was trained with, and a file from before alpha_used had alpha=None mean 1 / K."""
    from models.common import checkpoint as ckpt

    corpus, split = small_corpus()
    m = TCM(n_topics=4, n_chains=2, n_iter=6, burn_in=2, sample_every=2, seed=1).fit(corpus, split=split)
    assert m.alpha_ == 50.0 / 4
    assert m.alpha0_ * m.p0_len_[1] == pytest.approx([0.01, 0.01], rel=1e-12)
    assert (m.alpha0_trace_ == m.alpha0_[0]).all() and (m.alpha0_samples_ == m.alpha0_[0]).all()
    assert TCM(n_topics=4, alpha0=7.0, n_chains=1, n_iter=2, burn_in=1, sample_every=1).fit(
        corpus, split=split).alpha0_samples_.tolist() == [7.0]
    m.save(tmp_path / "tcm.npz")
    assert TCM.load(tmp_path / "tcm.npz").alpha_ == 50.0 / 4
    f = ckpt.read_model_file(tmp_path / "tcm.npz")
    del f.header["alpha_used"]
    ckpt.write_model_file(tmp_path / "old.npz", f.header, f.arrays)
    old = TCM.load(tmp_path / "old.npz")
    assert old.alpha_ == 1.0 / 4
    ids = np.arange(corpus.n_terms)
    assert not np.allclose(old.p_w_d(ids), m.p_w_d(ids))


def test_document_model_matches_counts():
    """P_TCM(c | d) from the stored samples equals the formula evaluated on counts rebuilt from b."""
    corpus, split = small_corpus()
    m = TCM(n_topics=3, n_chains=1, n_iter=3, burn_in=2, sample_every=1, seed=2)
    m.fit(corpus, split=split)
    b = m.b_[0]
    n_dk, n_kc, n_k = ref.counts_from_b(corpus.doc_ptr, corpus.term_ids, b, 3)
    a0, alpha, p0 = m.alpha0_[0], m.alpha_, m.p0_len_
    # the most frequent collocation of the sample, and one never seen
    colloc = max(n_kc, key=lambda key: (len(key[0]), n_kc[key]))[0]
    unseen = next(c for c in ((w, w, w) for w in range(corpus.n_terms))
                  if all(key[0] != c for key in n_kc))
    for c in (colloc, unseen, (int(corpus.term_ids[0]),)):
        ids = np.array(c)
        got = m.p_c_d(ids, np.array([0, len(c)]))[:, 0]
        phi = np.array([(n_kc.get((c, k), 0) + a0 * p0[len(c)]) / (n_k[k] + a0) for k in range(3)])
        theta = (n_dk + alpha) / (n_dk.sum(1, keepdims=True) + 3 * alpha)
        np.testing.assert_allclose(got, theta @ phi, rtol=1e-6)  # float32 sums over the topics (tcm_score)
    assert m.find_collocation(colloc) >= 0 and m.find_collocation(unseen) == -1
    ids = np.array(colloc + unseen)
    seg = np.array([0, len(colloc), len(colloc) + len(unseen)])
    per = m.p_c_d_per_sample(ids, seg)
    assert per.shape == (1, 1, corpus.n_docs, 2)
    np.testing.assert_allclose(per.mean(axis=(0, 1)), m.p_c_d(ids, seg), rtol=1e-12)


def planted_corpus(n_docs=120, n_words=40, seed=0):
    """Two topics of ``n_words`` words each plus planted phrases (a a+1), (a+2 a+3) in topic A
    and (a+4 a+5), (a+6 a+7) in topic B, a = 2 n_words. Each doc is 12 segments (split after
    each) of the form [topic word, phrase, topic word] or [topic word, topic word]; phrase words
    occur only in their phrase, next to varying neighbours."""
    rng = np.random.default_rng(seed)
    a = 2 * n_words
    phrases = {0: [(a, a + 1), (a + 2, a + 3)], 1: [(a + 4, a + 5), (a + 6, a + 7)]}
    docs, splits = [], []
    for d in range(n_docs):
        t = d % 2
        toks, sp = [], []
        for _ in range(12):
            seg = [n_words * t + int(rng.integers(n_words))]
            if rng.random() < 0.6:
                seg += list(phrases[t][int(rng.integers(2))])
            seg.append(n_words * t + int(rng.integers(n_words)))
            toks += seg
            sp += [0] * (len(seg) - 1) + [1]
        docs.append(toks)
        splits += sp
    return corpus_from_docs(docs, n_terms=a + 8, fingerprint="planted"), np.array(splits, dtype=np.uint8), phrases


def test_planted_phrases_are_found():
    corpus, split, phrases = planted_corpus()
    # the paper's priors (alpha = 1 / K, alpha0 resampled): the retrieval defaults, 50 / K = 25,
    # would blur two topics over 24-collocation documents
    m = TCM(n_topics=2, alpha=0.5, alpha0=100.0, resample_alpha0=True, n_chains=1, n_iter=60, burn_in=50, sample_every=5, n_shards=2,
            seed=0, max_len=4).fit(corpus, split=split)
    cols = ref.collocations(corpus.doc_ptr, corpus.term_ids, m.b_[0])
    found = {}
    for _, s, e, _ in cols:
        c = tuple(int(w) for w in corpus.term_ids[s:e + 1])
        found[c] = found.get(c, 0) + 1
    for t, ps in phrases.items():
        for p in ps:
            starts = [i for i in range(corpus.n_tokens - 1) if tuple(corpus.term_ids[i:i + 2]) == p]
            # found as exactly this collocation most of the time (else mostly as the phrase plus
            # a neighbour: the DP memorises frequent n-grams), and rarely cut in the middle
            assert found.get(p, 0) > 0.5 * len(starts), (p, found.get(p, 0), len(starts))
            assert (m.b_[0][starts] < 0).mean() > 0.8
            assert found.get(p, 0) == max(found.get(c, 0) for c in found if len(c) > 1 and set(p) & set(c))
    # the phrases top their topic's multi-word collocations, and topics separate A from B
    tops = []
    for k in range(2):
        ids, scores, counts = m.topic_collocations(k, top=2, min_len=2)
        tops.append({tuple(m.collocation_terms(i).tolist()) for i in ids})
    assert sorted(tops, key=lambda s: min(s)) == [set(phrases[0]), set(phrases[1])]
    # query segmentation: topic-B words around a topic-A phrase -> [b1] [p1 p2] [b2], and a
    # split between p1 and p2 is obeyed
    (p1, p2), b1, b2 = phrases[0][0], 43, 45
    q = np.array([b1, p1, p2, b2])
    np.testing.assert_array_equal(m.segment(q), [0, 1, 3, 4])
    np.testing.assert_array_equal(m.segment(q, split=[0, 1, 0, 1]), [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(m.segment(np.array(phrases[1][1] + phrases[0][1])), [0, 2, 4])
    # and the phrase is far more probable in topic-A documents than in topic-B ones
    p = m.p_c_d(np.array([p1, p2]), np.array([0, 2]))[:, 0]
    assert p[0::2].min() > 5 * p[1::2].max() and p[0::2].mean() > 20 * p[1::2].mean()


def test_split_flags_and_params_are_validated():
    corpus = corpus_from_docs([[0, 1, 2], [], [3, 4]], n_terms=5, fingerprint="x")
    np.testing.assert_array_equal(split_flags(corpus), [0, 0, 1, 0, 1])
    np.testing.assert_array_equal(split_flags(corpus, [1, 0, 0, 0, 0]), [1, 0, 1, 0, 1])
    with pytest.raises(ValueError, match="shape"):
        split_flags(corpus, [0, 1])
    with pytest.raises(ValueError, match="0/1"):
        split_flags(corpus, [0, 2, 0, 0, 0])
    with pytest.raises(ValueError, match="burn_in"):
        TCM(n_iter=10, burn_in=10).fit(corpus)
    with pytest.raises(ValueError, match="sampler"):
        TCM(n_topics=2, n_iter=10, burn_in=5, sample_every=5, sampler="fast").fit(corpus)
    with pytest.raises(ValueError, match="max_len"):
        TCM(n_topics=2, n_iter=10, burn_in=5, sample_every=5, max_len=0).fit(corpus)
    m = TCM(n_topics=3)
    assert m.alpha is None and m.get_params()["n_topics"] == 3  # __init__ stores unchanged
    with pytest.raises(RuntimeError, match="not fitted"):
        m.p_w_d([0])


def test_models_tcm_imports_neither_retrieval_nor_the_jvm():
    import subprocess
    import sys

    code = ("import sys, models.tcm.model, models.tcm.kernels;"
            "bad = [m for m in ('retrieval', 'jnius', 'pyserini') if m in sys.modules];"
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
