"""The dense-row document models' kernels (tree-LDA's and TCM's P_TM(w | d) of every document)
against the obvious float64 formula: document chunks, ranges written into the whole table, and
the float32 sum over a document's topics."""
import numpy as np
import pytest
from numba import njit

from models.common.kernels.sparse import COLUMN_PAD, DOC_CHUNK, add_count_rows32, pad_columns, sum_rows32
from models.tcm.score_kernels import score_p_c_d
from models.tree_lda.score_kernels import p_w_d_mean

N_CS, K, T = 3, 7, 5
N_DOCS = 3 * DOC_CHUNK + 5  # three whole chunks and a part


@njit
def _sum_zeroed(s, table, rows, counts, lo, hi):
    s[:] = 0.0
    add_count_rows32(s, table, rows, counts, lo, hi)


@pytest.mark.parametrize("n", range(10))
def test_sum_rows32_equals_the_sum_into_zeros_bit_for_bit(n):
    rng = np.random.default_rng(n)
    table = rng.random((K, 37)).astype(np.float32)
    rows = rng.integers(0, K, n).astype(np.uint16)
    counts = rng.integers(1, 50, n).astype(np.int32)
    got, want = np.full(37, np.nan, np.float32), np.full(37, np.nan, np.float32)
    sum_rows32(got, table, rows, counts, 0, n)
    _sum_zeroed(want, table, rows, counts, 0, n)
    np.testing.assert_array_equal(got, want)
    dense = (counts[:, None].astype(np.float64) * table[rows]).sum(axis=0)
    np.testing.assert_allclose(got, dense, rtol=1e-6)


def doc_rows(seed):
    """Every sample's sparse topic rows of N_DOCS documents (a few empty), as the models keep
    them, and the same counts dense (N_CS, N_DOCS, K)."""
    rng = np.random.default_rng(seed)
    n_dk = rng.integers(0, 6, (N_CS, N_DOCS, K)) * (rng.random((N_CS, N_DOCS, K)) < 0.4)
    n_dk[:, 5] = 0
    nnz = (n_dk > 0).sum(axis=2)
    ptr = np.concatenate([[0], np.cumsum(nnz.ravel())])
    dk_ptr = np.stack([ptr[cs * N_DOCS:(cs + 1) * N_DOCS + 1] for cs in range(N_CS)]).astype(np.int64)
    cs_i, d_i, k_i = np.nonzero(n_dk > 0)
    return dk_ptr, k_i.astype(np.uint16), n_dk[cs_i, d_i, k_i].astype(np.int32), n_dk


def in_ranges(kernel, dk_ptr, per_doc, cuts, *args):
    """``kernel``'s table of every document, one call per document range [cuts[i], cuts[i + 1])
    written into the whole table (``per_doc``: the document arrays sliced to the range)."""
    out = np.full((T, N_DOCS), np.nan)
    for d0, d1 in zip(cuts[:-1], cuts[1:]):
        kernel(np.ascontiguousarray(dk_ptr[:, d0:d1 + 1]), *args[:2], *(a[d0:d1] for a in per_doc),
               *args[2:], out, d0)
    return out


def test_tree_lda_mean_matches_the_dense_formula_in_any_document_ranges():
    dk_ptr, dk_topic, dk_count, n_dk = doc_rows(0)
    rng = np.random.default_rng(1)
    alpha = rng.random((N_CS, K))
    phi = rng.random((N_CS, K, T))
    phi /= phi.sum(axis=2, keepdims=True)
    ap = np.einsum("ck,ckt->ct", alpha, phi)
    doc_len = n_dk[0].sum(axis=1) + rng.integers(0, 3, N_DOCS)  # any length the sample's rows allow
    want = np.mean([(n_dk[cs] @ phi[cs] + ap[cs]) / (doc_len + alpha[cs].sum())[:, None]
                    for cs in range(N_CS)], axis=0).T
    args = (dk_topic, dk_count, alpha.sum(axis=1), phi.astype(np.float32), ap)
    whole = in_ranges(p_w_d_mean, dk_ptr, [doc_len], [0, N_DOCS], *args)
    np.testing.assert_allclose(whole, want, rtol=1e-6)
    for cuts in ([0, 20, N_DOCS], [0, 1, DOC_CHUNK + 3, DOC_CHUNK + 4, N_DOCS]):
        np.testing.assert_array_equal(in_ranges(p_w_d_mean, dk_ptr, [doc_len], cuts, *args), whole)


def test_tcm_mean_matches_the_dense_formula_in_any_document_ranges():
    dk_ptr, dk_topic, dk_count, n_dk = doc_rows(2)
    rng = np.random.default_rng(3)
    alpha = 0.3
    phi = rng.random((N_CS, K, T))
    phi /= phi.sum(axis=2, keepdims=True)
    apart = alpha * phi.sum(axis=1)
    want = np.mean([(n_dk[cs] + alpha) @ phi[cs] / (n_dk[cs].sum(axis=1) + K * alpha)[:, None]
                    for cs in range(N_CS)], axis=0).T
    args = (dk_topic, dk_count, alpha, phi.astype(np.float32), apart)
    whole = in_ranges(score_p_c_d, dk_ptr, [], [0, N_DOCS], *args)
    np.testing.assert_allclose(whole, want, rtol=1e-6)
    for cuts in ([0, 20, N_DOCS], [0, 1, DOC_CHUNK + 3, DOC_CHUNK + 4, N_DOCS]):
        np.testing.assert_array_equal(in_ranges(score_p_c_d, dk_ptr, [], cuts, *args), whole)


@pytest.mark.parametrize("n_cols", [T, COLUMN_PAD, 2 * COLUMN_PAD + 3])
def test_tcm_columns_padded_to_whole_vectors_give_the_same_table_bit_for_bit(n_cols):
    dk_ptr, dk_topic, dk_count, _ = doc_rows(4)
    rng = np.random.default_rng(5)
    phi = rng.random((N_CS, K, n_cols)).astype(np.float32)
    apart = 0.3 * phi.sum(axis=1, dtype=np.float64)
    want = np.full((n_cols, N_DOCS), np.nan)
    score_p_c_d(dk_ptr, dk_topic, dk_count, 0.3, phi, apart, want, 0)
    padded, apart_padded = pad_columns(phi), pad_columns(apart)
    assert padded.shape[2] % COLUMN_PAD == 0 and padded.shape[2] - n_cols < COLUMN_PAD
    assert (padded[:, :, n_cols:] == 0).all() and (padded[:, :, :n_cols] == phi).all()
    got = np.full((n_cols + 1, N_DOCS), np.nan)  # a row past the table's stays untouched
    score_p_c_d(dk_ptr, dk_topic, dk_count, 0.3, padded, apart_padded, got[:n_cols], 0)
    np.testing.assert_array_equal(got[:n_cols], want)
    assert np.isnan(got[n_cols]).all()


@pytest.mark.parametrize("n_cols", [T, COLUMN_PAD, 2 * COLUMN_PAD + 3])
def test_tree_lda_columns_padded_to_whole_vectors_give_the_same_table_bit_for_bit(n_cols):
    dk_ptr, dk_topic, dk_count, n_dk = doc_rows(6)
    rng = np.random.default_rng(7)
    alpha_sum = rng.random(N_CS) * K
    phi = rng.random((N_CS, K, n_cols)).astype(np.float32)
    ap = 0.3 * phi.sum(axis=1, dtype=np.float64)
    doc_len = n_dk[0].sum(axis=1) + 1
    want = np.full((n_cols, N_DOCS), np.nan)
    p_w_d_mean(dk_ptr, dk_topic, dk_count, doc_len, alpha_sum, phi, ap, want, 0)
    got = np.full((n_cols + 1, N_DOCS), np.nan)  # a row past the table's stays untouched
    p_w_d_mean(dk_ptr, dk_topic, dk_count, doc_len, alpha_sum, pad_columns(phi), pad_columns(ap),
               got[:n_cols], 0)
    np.testing.assert_array_equal(got[:n_cols], want)
    assert np.isnan(got[n_cols]).all()
