"""Tree-based LDA end to end: the estimator on synthetic data with a hand-made synset list
(counts, log-likelihood and document model against independent formulas), determinism, resume,
model files, the flat-LDA limit, the WordNet adapter through the analyzer, and the CLI."""
import math
from pathlib import Path

import numpy as np
import pytest

from models import corpus_from_docs, registry
from models.tree_lda.state import edge_word_probs
from models.tree_lda.tree import build_tree, leaf_probs
from models.tree_lda.model import TreeLDA
from tests.helpers import Killed, resume_after_kill, write_wordnet
from tests.reference import tree_lda_reference as ref

DATA = Path(__file__).parent / "data"
SYN = [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7], [8, 8]]
FAST = dict(n_topics=3, n_chains=2, n_iter=6, burn_in=2, sample_every=2, seed=5, log_lik_every=2)


def corpus(n_docs=30, V=12, seed=0):
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, V, size=rng.integers(5, 20)) for _ in range(n_docs)]
    return corpus_from_docs(docs, n_terms=V, fingerprint="synthetic")


def joint_log_lik(tree, doc_ptr, term_ids, z, zp, K, alpha):
    """log p(w, z, paths) from scratch: a Dirichlet-multinomial per (topic, internal node) and
    per document (independent of the kernel's loop order)."""
    n_e, n_i, n_dk = ref.counts(tree, doc_ptr, term_ids, z, zp, K)
    lg = math.lgamma
    ll = 0.0
    for k in range(K):
        for i in range(tree.n_nodes):
            kids = np.flatnonzero(tree.parent == i)
            if len(kids) == 0:
                continue
            ll += lg(tree.beta[kids].sum()) - lg(tree.beta[kids].sum() + n_e[kids, k].sum())
            ll += sum(lg(tree.beta[j] + n_e[j, k]) - lg(tree.beta[j]) for j in kids)
    for d in range(len(doc_ptr) - 1):
        ll += lg(K * alpha) - lg(doc_ptr[d + 1] - doc_ptr[d] + K * alpha)
        ll += sum(lg(alpha + n_dk[d, k]) - lg(alpha) for k in range(K))
    return ll / len(term_ids)


@pytest.fixture(scope="module")
def fitted():
    c = corpus()
    return c, TreeLDA(**FAST).fit(c, synsets=SYN)


def test_counts_log_lik_and_document_model_match_independent_formulas(fitted):
    c, m = fitted
    K, tree = m.n_topics, m.tree_
    assert tree.synsets == [[0, 1, 2], [1, 3], [4, 5], [2, 6, 7]] and m.n_synsets_in_ == 5
    for ch in range(m.n_chains):
        z, zp = m.z_[ch], m.zp_[ch]
        assert (tree.path_word[zp] == c.term_ids).all()
        n_e, n_i, n_dk = ref.counts(tree, c.doc_ptr, c.term_ids, z, zp, K)
        np.testing.assert_array_equal(m.n_e_[ch], n_e)
        np.testing.assert_array_equal(m.n_dk_[ch], n_dk)
        want = joint_log_lik(tree, c.doc_ptr, c.term_ids, z, zp, K, 50.0 / K)
        assert m.log_lik_[-1, ch] == pytest.approx(want, rel=1e-12)
        # the last kept sample is the final state: P(w|d) = theta_d . P(w|k) of its counts
        theta = (n_dk + 50.0 / K) / (np.diff(c.doc_ptr)[:, None] + 50.0)
        phi = np.stack([leaf_probs(tree, n_e[:, k]) for k in range(K)], axis=1)
        got = m.p_w_d_per_sample(np.arange(c.n_terms))[ch, -1]
        np.testing.assert_allclose(got, theta @ phi.T, rtol=1e-6)  # float32 sums over the topics
    assert m.log_lik_iter_.tolist() == [2, 4, 6] and np.isfinite(m.log_lik_).all()
    p = m.p_w_d(np.arange(c.n_terms))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(p, m.p_w_d_per_sample(np.arange(c.n_terms)).mean(axis=(0, 1)), rtol=1e-12)


def test_query_terms_phi_and_topic_sizes_read_from_sparse_rows_match_the_dense_tables(fitted):
    c, m = fitted
    words = np.array([7, 0, 7, 11, 2])  # repeated, and on several paths
    for cs in range(m.ne_ptr_.shape[0]):
        dense = edge_word_probs(m.tree_, m.edge_counts(cs))
        np.testing.assert_allclose(m._phi_terms(cs, words), dense[words], rtol=1e-13)
        a = m.alpha_samples_[cs]
        theta = (m._rows(cs, "dk", np.arange(c.n_docs)) + a) / (np.diff(c.doc_ptr)[:, None] + a.sum())
        np.testing.assert_allclose(m.topic_mass(cs), theta.sum(axis=0), rtol=1e-12)
        np.testing.assert_array_equal(m._column(cs, "ne", 1), m.edge_counts(cs)[:, 1])


def test_topic_views(fitted):
    c, m = fitted
    ids, probs = m.doc_topics(0, top=2)
    assert len(ids) == 2 and probs[0] >= probs[1]
    words, wp = m.topic_words(int(ids[0]), top=4)
    assert len(words) == 4 and (np.diff(wp) <= 0).all()
    for k in range(m.n_topics):
        syn, counts = m.topic_synsets(k, top=10)
        first = 1 + c.n_terms
        want = np.mean([m.edge_counts(cs)[first:first + 4, k] for cs in m._cs_of_chain(0)], axis=0)
        assert counts.tolist() == sorted(counts.tolist(), reverse=True)
        np.testing.assert_array_equal(counts, want[syn])
        assert set(syn.tolist()) == set(np.flatnonzero(want).tolist())


def test_no_synsets_is_flat_lda():
    """With no synsets every word has one path (its own leaf): P(w|k) is LDA's
    (n_kw + beta) / (n_k + V beta) and the tree log-likelihood LDA's closed form."""
    from models.lda.model import joint_log_lik as lda_log_lik

    c = corpus(seed=2)
    m = TreeLDA(**dict(FAST, beta_root=0.05)).fit(c, synsets=[])
    tree = m.tree_
    assert tree.n_paths == c.n_terms
    n_kw = np.zeros((c.n_terms, m.n_topics))
    np.add.at(n_kw, (c.term_ids, m.z_[0]), 1)
    n_e = ref.counts(tree, c.doc_ptr, c.term_ids, m.z_[0], m.zp_[0], m.n_topics)[0]
    np.testing.assert_allclose(edge_word_probs(tree, n_e), (n_kw + 0.05) / (n_kw.sum(0) + c.n_terms * 0.05),
                               rtol=1e-12)
    want = lda_log_lik(c, m.z_[0], m.n_topics, 50.0 / m.n_topics, 0.05)
    assert m.log_lik_[-1, 0] == pytest.approx(want, rel=1e-12)


def test_edge_word_probs_is_leaf_probs_per_topic():
    tree = build_tree(SYN, 12, beta_root=0.2, beta_synset=3.0, merge=True)
    n_e = np.random.default_rng(1).integers(0, 5, size=(tree.n_nodes, 4))
    n_e[0] = 0
    got = edge_word_probs(tree, n_e)
    for k in range(4):
        np.testing.assert_allclose(got[:, k], leaf_probs(tree, n_e[:, k]), rtol=1e-14)


@pytest.mark.parametrize("sampler", ["naive", "fast-rb-sdw"])
def test_same_model_for_one_and_two_threads(sampler):
    c = corpus(seed=4)
    one = TreeLDA(**dict(FAST, sampler=sampler, n_jobs=1)).fit(c, synsets=SYN)
    two = TreeLDA(**dict(FAST, sampler=sampler, n_jobs=2)).fit(c, synsets=SYN)
    np.testing.assert_array_equal(one.zzp_, two.zzp_)
    np.testing.assert_array_equal(one.p_w_d(np.arange(12)), two.p_w_d(np.arange(12)))
    assert (one.z_[0] != one.z_[1]).any()  # chains have their own streams


def test_resume_is_bit_identical_and_checkpoint_tied_to_synsets(tmp_path):
    c = corpus(seed=6)
    kw = dict(FAST, n_iter=8, checkpoint_every=2)
    full = TreeLDA(**kw).fit(c, synsets=SYN)
    ckpt = tmp_path / "t.ckpt"
    resumed = resume_after_kill(TreeLDA, kw, c, ckpt, kill_at=5, synsets=SYN)
    np.testing.assert_array_equal(resumed.zzp_, full.zzp_)
    np.testing.assert_array_equal(resumed.p_w_d(np.arange(12)), full.p_w_d(np.arange(12)))
    np.testing.assert_array_equal(resumed.log_lik_, full.log_lik_)
    with pytest.raises(Killed):
        TreeLDA(**kw).fit(c, checkpoint=tmp_path / "u.ckpt", synsets=SYN,
                          callback=lambda m, it, n: (_ for _ in ()).throw(Killed()) if it == 3 else None)
    with pytest.raises(ValueError, match="corpus content"):
        TreeLDA(**kw).fit(c, checkpoint=tmp_path / "u.ckpt", synsets=SYN[:2])


def test_checkpoint_holds_every_chains_topics_then_paths_never_joined_in_memory(tmp_path, monkeypatch):
    from models.common import checkpoint as ck

    c = corpus(seed=6)
    m = TreeLDA(**dict(FAST, n_iter=4, checkpoint_every=2))
    seen = []

    def at_checkpoint(model, it, n):
        if it == 2:
            monkeypatch.setattr(np, "concatenate", lambda *a, **k: pytest.fail("assignments joined"))
            model._write_checkpoint(tmp_path / "t.ckpt")
            monkeypatch.undo()
            seen.append((model.z_.copy(), model.zp_.copy()))

    m.fit(c, synsets=SYN, callback=at_checkpoint)
    f = ck.read_model_file(tmp_path / "t.ckpt", kind=ck.CHECKPOINT_FORMAT)
    z, zp = seen[0]
    # the paths as ranks among their words' paths, uint16 as the topics
    assert f.arrays["zzp"].dtype == np.uint16 and f.arrays["zzp"].shape == (FAST["n_chains"], 2 * c.n_tokens)
    rank = zp - m.tree_.word_path_ptr[c.term_ids]
    np.testing.assert_array_equal(f.arrays["zzp"], np.concatenate([z, rank], axis=1))


def test_model_file_round_trip(fitted, tmp_path):
    c, m = fitted
    m.save(tmp_path / "m.npz", full=True)
    back = registry.load(tmp_path / "m.npz", fingerprint="synthetic")
    assert isinstance(back, TreeLDA) and back.tree_.synsets == m.tree_.synsets
    np.testing.assert_array_equal(back.p_w_d(np.arange(12)), m.p_w_d(np.arange(12)))
    np.testing.assert_array_equal(back.topic_synsets(1)[1], m.topic_synsets(1)[1])
    np.testing.assert_array_equal(back.zzp_, m.zzp_)
    with pytest.raises(ValueError, match="fingerprint"):
        registry.load(tmp_path / "m.npz", fingerprint="other")


def test_bad_input():
    c = corpus()
    with pytest.raises(ValueError, match="sampler"):
        TreeLDA(**dict(FAST, sampler="fastest")).fit(c, synsets=SYN)
    with pytest.raises(ValueError, match="outside"):
        TreeLDA(**FAST).fit(c, synsets=[[0, 99]])
    with pytest.raises(ValueError, match="synsets"):
        TreeLDA(**FAST).fit(c, synsets=[3])
    with pytest.raises(ValueError, match="beta_synset"):
        TreeLDA(**dict(FAST, beta_synset=0)).fit(c, synsets=SYN)


# -- retrieval: the WordNet adapter and the CLI ---------------------------------------------

TEXTS = ["the hormone levels and hormones of patients", "a car is an automobile with a motor",
         "physician and doctor treat illness", "the river stream flows past the bank"]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory):
    from retrieval.core.index import build_index

    root = tmp_path_factory.mktemp("tree-index")
    docs = "".join(f"<DOC>\n<DOCNO> T{d} </DOCNO>\n<TEXT>\n{t}.\n</TEXT>\n</DOC>\n" for d, t in enumerate(TEXTS))
    (root / "docs.trec").write_text(docs)
    return build_index([root / "docs.trec"], root / "index")


def test_adapter_maps_lemmas_through_the_analyzer(small_index, tmp_path):
    from retrieval.adapters.tree_lda import index_synsets, lemma_terms

    vocab = small_index.stats.term_index
    got = lemma_terms(small_index, ["hormone", "hormones", "the", "car", "zebra", "motor_vehicle",
                                    "x-ray", "Doctor"] * 700)  # several chunks
    assert got["hormone"] == got["hormones"] == vocab["hormon"]
    assert got["car"] == vocab["car"] and "the" not in got and "zebra" not in got
    assert "motor_vehicle" not in got and "x-ray" not in got
    wn = write_wordnet(tmp_path / "wn", [["car", "automobile", "motor_vehicle"], ["hormone", "hormones"],
                                         ["doctor", "physician", "doc"], ["river", "zebra"]])
    syn = index_synsets(small_index, str(wn))
    assert syn == [tuple(sorted((vocab["car"], vocab["automobil"]))),
                   tuple(sorted((vocab["doctor"], vocab["physician"])))]


def test_adapter_on_real_wordnet(small_index):
    from retrieval.adapters.tree_lda import index_synsets
    from retrieval.datasets.wordnet import wordnet_dir

    if wordnet_dir() is None:
        pytest.skip("WordNet 3.0 not installed (/usr/share/wordnet; make wordnet)")
    vocab = small_index.stats.term_index
    syn = set(index_synsets(small_index))
    assert tuple(sorted((vocab["car"], vocab["automobil"]))) in syn
    assert tuple(sorted((vocab["doctor"], vocab["physician"]))) in syn


def test_cli_train_run_console_report(small_index, tmp_path, capsys, monkeypatch):
    import io

    from retrieval.core.trec import read_run
    from retrieval.ui.cli import main

    # --sampler: the option end to end, with the sampler every index-trained tree-LDA model of the
    # suite compiles (each sampler's sweep on an index's read-only arrays is a kernel of its own,
    # some 40 s to compile in a fresh checkout); FAST's sweeps: test_tree_lda_kernels, test_tree_shards
    wn = write_wordnet(tmp_path / "wn", [["car", "automobile"], ["doctor", "physician"],
                                         ["river", "stream"]])
    model = tmp_path / "tree.npz"
    assert main(["-q", "train", "tree-lda", "--index", str(small_index.path), "--out", str(model),
                 "--topics", "2", "--chains", "1", "--iterations", "4", "--burn-in", "2",
                 "--sample-every", "1", "--wordnet", str(wn), "--sampler", "fast-rb-sdw"]) == 0
    m = registry.load(model, fingerprint=small_index.fingerprint)
    assert m.kind == "tree-lda" and len(m.tree_.synsets) == 3 and m.wordnet == str(wn)
    topics = tmp_path / "topics.trec"
    topics.write_text("<top>\n<num> Number: 1\n<title> automobile\n</top>\n")
    run = tmp_path / "run.txt"
    assert main(["-q", "run", "--index", str(small_index.path), "--topics", str(topics),
                 "--model", str(model), "--lam", "0.5", "--out", str(run)]) == 0
    ranked = [r.docno for r in read_run(run)]
    assert ranked[0] == "T1" and len(ranked) == 4  # every document gets P_TREE(w|d) > 0
    capsys.readouterr()
    monkeypatch.setattr("sys.stdin", io.StringIO("automobile\n:why 1\n:topic 0\n"))
    assert main(["-q", "console", "--index", str(small_index.path), "--model", str(model)]) == 0
    out = capsys.readouterr().out
    assert "P_TM" in out and "top topics of T1" in out
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 T1 1\n")
    assert main(["-q", "report", str(run), "--qrels", str(qrels), "--model", str(model),
                 "--index", str(small_index.path), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "Topics and the synsets they use" in md and "synset subtrees in the prior tree" in md
