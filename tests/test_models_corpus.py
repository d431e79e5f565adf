import numpy as np
import pytest

from models import corpus_from_docs, make_corpus, synthetic_corpus


def test_make_corpus_validates():
    c = make_corpus([0, 2, 2, 5], [1, 0, 3, 3, 2])
    assert c.n_docs == 3 and c.n_tokens == 5 and c.n_terms == 4
    assert c.doc_ptr.dtype == np.int64 and c.term_ids.dtype == np.int32
    assert c.fingerprint.startswith("sha1:")
    with pytest.raises(ValueError, match="end at len"):
        make_corpus([0, 2, 4], [1, 2, 3])
    with pytest.raises(ValueError, match="non-decreasing"):
        make_corpus([0, 3, 2, 3], [1, 2, 3])
    with pytest.raises(ValueError, match="out of range"):
        make_corpus([0, 3], [1, 2, 7], n_terms=5)
    with pytest.raises(ValueError, match=">= 0"):
        make_corpus([0, 2], [1, -1])
    with pytest.raises(TypeError):
        make_corpus([0, 2], [1.5, 2.0])


def test_corpus_from_docs_and_fingerprint():
    a = corpus_from_docs([[1, 2], [], [0]])
    b = corpus_from_docs([[1, 2], [0], []])
    assert list(a.doc_ptr) == [0, 2, 2, 3] and a.fingerprint != b.fingerprint
    assert corpus_from_docs([[1]], fingerprint="idx:x").fingerprint == "idx:x"


def test_synthetic_corpus_is_seeded_and_zipfian():
    a = synthetic_corpus(300, 1000, 50, seed=1)
    b = synthetic_corpus(300, 1000, 50, seed=1)
    c = synthetic_corpus(300, 1000, 50, seed=2)
    np.testing.assert_array_equal(a.term_ids, b.term_ids)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert abs(a.n_tokens / a.n_docs - 50) < 8
    f = np.sort(np.bincount(a.term_ids, minlength=1000))[::-1]
    assert f[0] > 10 * f[100] > 0
    assert a.term_ids.max() < 1000 and a.doc_ptr[-1] == a.n_tokens
