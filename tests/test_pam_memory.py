"""PAM's counts in the narrowest dtype that holds them (uint16, int32 beyond): the chains'
document counts and the kept samples' counts, gathered without a second copy, and model files
of either dtype (int32: the earlier layout)."""
import numpy as np
import pytest

from models import corpus_from_docs, synthetic_corpus
from models.pam.model import PAM
from models.pam.infer import anon_empty, gather
from tests.helpers import save_and_load


def _fit(corpus, **kw):
    params = dict(n_super=2, n_sub=3, n_chains=2, n_iter=6, burn_in=2, sample_every=2,
                  n_shards=2, seed=4)
    return PAM(**{**params, **kw}).fit(corpus)


def _counts_by_hand(m, cs):
    """Dense n_wj of kept sample cs, from its CSR rows."""
    V = m.n_terms_
    out = np.zeros((V, m.n_sub), dtype=np.int64)
    for w in range(V):
        lo, hi = m.tw_ptr_[cs, w], m.tw_ptr_[cs, w + 1]
        out[w, m.tw_sub_[lo:hi].astype(np.int64)] = m.tw_count_[lo:hi]
    return out


def test_kept_counts_are_uint16_and_int32_files_still_load(tmp_path):
    corpus = synthetic_corpus(40, 30, 20, seed=5, n_latent=3)
    m = _fit(corpus)
    assert m.dp_count_samples_.dtype == np.uint16 and m.tw_count_.dtype == np.uint16
    assert m.tw_sub_.dtype == np.uint16 and m.dp_key_samples_.dtype == np.int32
    assert m.n_ds_.dtype == np.uint16 and m.dp_count_.dtype == np.uint16  # the chains' too
    terms = np.arange(corpus.n_terms)
    want = m.p_w_d_per_sample(terms)
    # every sample's counts add up to its tokens
    for cs in range(m.dp_ptr_.shape[0]):
        np.testing.assert_array_equal(_counts_by_hand(m, cs).sum(0), m.n_j_samples_[cs])
    m2 = save_and_load(m, tmp_path / "narrow.npz", corpus.fingerprint)
    assert m2.tw_count_.dtype == np.uint16
    np.testing.assert_array_equal(m2.p_w_d_per_sample(terms), want)
    # the earlier layout: int32 counts
    m.dp_count_samples_ = m.dp_count_samples_.astype(np.int32)
    m.tw_count_ = m.tw_count_.astype(np.int32)
    m3 = save_and_load(m, tmp_path / "wide.npz", corpus.fingerprint)
    assert m3.tw_count_.dtype == np.int32
    np.testing.assert_array_equal(m3.p_w_d_per_sample(terms), want)
    # any other dtype is refused, naming the array
    m.tw_count_ = m.tw_count_.astype(np.int64)
    m.save(tmp_path / "int64.npz")
    with pytest.raises(ValueError, match="tw_count has dtype int64"):
        PAM.load(tmp_path / "int64.npz")


@pytest.mark.long  # compiles the sampler for int32 counts, which nothing else in the suite uses
def test_counts_beyond_uint16_are_kept_as_int32():
    n = 140_000  # one document of one term over 2 sub-topics: some count passes 65,535
    corpus = corpus_from_docs([np.zeros(n, dtype=np.int64), [1, 2, 1]], n_terms=3,
                              fingerprint="long")
    m = _fit(corpus, n_super=1, n_sub=2, n_iter=2, burn_in=0, sample_every=1)
    assert m.dp_count_samples_.dtype == np.int32 and m.tw_count_.dtype == np.int32
    assert m.n_ds_.dtype == np.int32 and m.dp_count_.dtype == np.int32
    for cs in range(m.dp_ptr_.shape[0]):
        dense = _counts_by_hand(m, cs)
        assert dense[0].sum() == n and dense.max() > 65_535
        lo, hi = m.dp_ptr_[cs, 0], m.dp_ptr_[cs, 1]
        assert m.dp_count_samples_[lo:hi].sum() == n


def test_gather_concatenates_in_sample_order_and_drops_each_sample():
    rng = np.random.default_rng(0)
    samples = []
    for k, size in enumerate([3, 0, 40_000, 5]):
        dtype = np.int32 if k == 2 else np.uint16
        samples.append(dict(ptr=np.array([0, size // 2, size], dtype=np.int64),
                            a=rng.integers(0, 60_000, size).astype(dtype),
                            b=anon_empty(size, np.int32)))
        samples[-1]["b"][:] = k
    want_a = np.concatenate([s["a"] for s in samples])
    want_b = np.concatenate([s["b"] for s in samples])
    ptrs, a, b = gather(samples, "ptr", "a", "b")
    assert a.dtype == np.int32 and b.dtype == np.int32
    np.testing.assert_array_equal(a, want_a)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(ptrs[:, 0], [0, 3, 3, 40_003])
    np.testing.assert_array_equal(ptrs[:, -1], [3, 3, 40_003, 40_008])
    assert all(set(s) == set() for s in samples)


def test_checkpoint_lists_every_kept_samples_assignments(tmp_path):
    from models.common import checkpoint as ckpt
    from models.common import kept

    corpus = synthetic_corpus(30, 30, 15, seed=6, n_latent=3)
    path = tmp_path / "pam.ckpt"
    m = PAM(n_super=2, n_sub=3, n_chains=2, n_iter=8, burn_in=4, sample_every=2, n_shards=2,
            seed=4, checkpoint_every=3).fit(corpus, checkpoint=path)
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    assert f.header["sample_chain"] == [0, 1, 0, 1] and "sample_z" not in f.arrays
    assert all("z" not in s for s in m._samples)  # on disk, not kept in memory
    # every kept sample's assignments, in its own file, are those its counts were taken from
    by_cs = sorted(zip(f.header["sample_chain"], f.header["sample_iter"]))
    for cs, (c, it) in enumerate(by_cs):
        z = ckpt.read_model_file(kept.kept_path(path, c, it), kind=ckpt.CHECKPOINT_FORMAT).arrays["sample_z"]
        assert z.shape == (1, corpus.n_tokens) and z.dtype == np.int32
        np.testing.assert_array_equal(np.bincount(z[0] % m.n_sub, minlength=m.n_sub),
                                      m.n_j_samples_[cs])
