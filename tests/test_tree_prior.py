"""Tree prior of tree-based LDA (models/tree_lda/tree.py) and the WordNet 3.0 reader."""
import numpy as np
import pytest

from models.tree_lda.tree import build_tree, leaf_probs
from retrieval.datasets import wordnet


SYNSETS = [[0, 1], [1, 2], [1, 0], [3], [4, 4], [2, 5, 5]]


def test_one_subtree_per_synset():
    t = build_tree(SYNSETS, n_terms=7, beta_root=0.5, beta_synset=10.0)
    # [0,1] and [1,0] are one synset; [3] and [4,4] have < 2 distinct terms
    assert t.synsets == [[0, 1], [1, 2], [2, 5]]
    assert (t.n_synsets_in, t.n_synsets_kept) == (6, 3)
    assert t.n_nodes == 1 + 7 + 3 + 6
    np.testing.assert_array_equal(np.diff(t.word_path_ptr), [2, 3, 3, 1, 1, 2, 1])
    # root: 7 own leaves at 0.5, three synset nodes at 0.5 * 2 leaves
    assert t.beta_sum[0] == pytest.approx(7 * 0.5 + 3 * 1.0)
    assert t.beta_sum[8] == 20.0 and t.beta_sum[1] == 0
    # word 1: own leaf, then through synsets 0 and 1
    paths = t.path_edges[t.word_path_ptr[1]:t.word_path_ptr[2]]
    assert paths[0].tolist() == [2, -1] and t.parent[paths[1][1]] == 8 and t.parent[paths[2][1]] == 9
    np.testing.assert_allclose(t.path_prior()[t.word_path_ptr[1]:t.word_path_ptr[2]],
                               [0.5, 1.0 * 10, 1.0 * 10])


def test_merge_joins_overlapping_synsets():
    t = build_tree(SYNSETS, n_terms=7, merge=True)
    assert t.synsets == [[0, 1, 2, 5]] and t.n_synsets_kept == 3
    assert np.diff(t.word_path_ptr).max() == 2


def test_no_synsets_is_lda_and_leaf_probs_sum_to_one():
    t = build_tree([], n_terms=4, beta_root=0.1)
    counts = np.zeros(t.n_nodes)
    counts[1:5] = [3, 0, 1, 0]
    np.testing.assert_allclose(leaf_probs(t, counts), (counts[1:5] + 0.1) / (4 + 0.4))
    t = build_tree(SYNSETS, n_terms=7)
    rng = np.random.default_rng(0)
    p = leaf_probs(t, rng.integers(0, 5, t.n_nodes))
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and (p > 0).all()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="outside"):
        build_tree([[0, 9]], n_terms=3)
    with pytest.raises(ValueError, match="beta_synset"):
        build_tree([[0, 1]], n_terms=3, beta_synset=0)


@pytest.mark.skipif(wordnet.wordnet_dir() is None, reason="WordNet 3.0 (wordnet-base) not installed")
def test_wordnet_reader_on_real_files():
    syn = wordnet.read_synsets()
    assert len(syn) == 117659  # WordNet 3.0's synset count
    assert any({"car", "auto", "automobile"} <= set(s) for s in syn)
    vocab = {w: i for i, w in enumerate(["car", "auto", "automobile", "banana"])}
    ids = wordnet.synsets_as_terms(syn, vocab.get)
    assert (0, 1, 2) in ids and all(len(s) >= 2 for s in ids)


def test_missing_wordnet_dir_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        wordnet.read_synsets(tmp_path)
