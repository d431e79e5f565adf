"""The mixture kernel's two loops (retrieval.core.scoring._score_mixture): the products of a
contiguous table's rows, taken where every weight is a small integer, score every document
bit for bit as the general loop over each document's terms does."""
from __future__ import annotations

import numpy as np
import pytest

from retrieval.core.scoring import _BLOCK, _score_mixture


def _case(rng, n_docs, weights, tiny_term=None):
    """Postings, P(w|C) and a P_TM table (n_terms + 2 rows, of which ``rows`` are the query's)
    for ``weights``; with ``tiny_term``, that term has a P(w|C) and P_TM of 0 in most documents
    so small that their factor falls below the kernel's _TINY."""
    n_q = len(weights)
    doc_len = rng.integers(1, 400, n_docs).astype(np.int64)
    docs, tfs, lo, hi = [], [], [], []
    for _ in range(n_q):
        d = np.sort(rng.choice(n_docs, rng.integers(1, n_docs // 3), replace=False)).astype(np.int32)
        lo.append(sum(len(x) for x in docs))
        docs.append(d)
        tfs.append(rng.integers(1, 6, len(d)).astype(np.int32))
        hi.append(lo[-1] + len(d))
    p_c = rng.uniform(1e-6, 1e-3, n_q)
    table = rng.uniform(0, 1e-2, (n_q + 2, n_docs))
    rows = rng.permutation(n_q + 2)[:n_q].astype(np.int64)
    if tiny_term is not None:
        p_c[tiny_term] = 1e-40
        table[rows[tiny_term], rng.random(n_docs) < 0.7] = 0.0
    return (doc_len, np.concatenate(docs), np.concatenate(tfs), np.array(lo, np.int64), np.array(hi, np.int64), p_c,
            np.asarray(weights, np.float64), 1000.0, 0.7, table, rows)


def _score(case, table, by_rows, gaps=None):
    n_docs, n_q = len(case[0]), len(case[6])
    out = np.full(n_docs, 0.25)
    out_gap = np.full(n_docs if gaps else 0, -0.5)
    doc_gap, term_gap = gaps if gaps else (np.zeros(0), np.zeros(0))
    scratch = np.zeros(n_docs * n_q, np.int32)
    _score_mixture(*case[:9], table, case[10], doc_gap, term_gap, by_rows, scratch, out, out_gap)
    assert not scratch.any()  # zeros again for the next query
    return out, out_gap


@pytest.mark.parametrize("weights, tiny_term", [
    ([1.0], None), ([1.0, 1.0, 1.0], None), ([2.0, 1.0, 3.0], None),  # six factors: the products
    ([1.0, 1.0, 1.0], 1), ([2.0, 1.0], 0),  # factors below _TINY: those documents summed term by term
    ([1.0] * 7, None), ([0.5, 1.0], None), ([9.0], None),  # too many factors, or other weights: general
])
@pytest.mark.parametrize("gapped", [False, True])
def test_the_row_products_score_as_the_general_loop_bit_for_bit(weights, tiny_term, gapped):
    rng = np.random.default_rng(len(weights) * 10 + (tiny_term or 0))
    n_docs = 2 * _BLOCK + 37  # blocks of threads, the last one short
    case = _case(rng, n_docs, weights, tiny_term)
    table = case[9]
    gaps = (rng.uniform(0, 1e-3, n_docs) * (rng.random(n_docs) < 0.8), rng.uniform(0, 2, len(weights))) \
        if gapped else None
    fast = _score(case, table, True, gaps)
    general = _score(case, np.asfortranarray(table), False, gaps)  # a documents-major table's loop
    assert np.array_equal(fast[0], general[0]) and np.array_equal(fast[1], general[1])
    assert np.isfinite(fast[0]).all() and np.isfinite(fast[1]).all()
    # the sum it is: every term's log, weighted, added to what out held
    doc_len, docs, tfs, lo, hi, p_c, w, mu, lam, _, rows = case
    tf = np.zeros((len(w), n_docs))
    for j in range(len(w)):
        tf[j, docs[lo[j]:hi[j]]] = tfs[lo[j]:hi[j]]
    p_tm = table[rows]

    def expect(start, p):
        return start + (w[:, None] * np.log(lam * (tf + mu * p_c[:, None]) / (doc_len + mu) + (1 - lam) * p)).sum(0)

    np.testing.assert_allclose(fast[0], expect(0.25, p_tm), rtol=1e-12)
    if gapped:
        np.testing.assert_allclose(fast[1], expect(-0.5, p_tm + np.multiply.outer(gaps[1], gaps[0])), rtol=1e-12)
