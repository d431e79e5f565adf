"""A batch's P_TM tables exact where a ranking of its top documents reads them.

For a kind that bounds its document model (``p_w_d_bounds``, see
:mod:`models.common.bounds`), a query's documents are scored twice on the bounds: the
``depth``-th best score on the lower bounds is a threshold every document of the exact top
``depth`` reaches, so a document whose upper-bound score stays below it cannot enter the
ranking. Only the documents that can have their query terms' entries made exact; the others
keep their lower bounds, which score them below the threshold still. The top ``depth`` of
every query, scores included, are then those of the exact tables.
"""
from __future__ import annotations

import logging

import numpy as np

from .scoring import Scorer, kth_largest

log = logging.getLogger(__name__)

# Scores on the bounds and on the exact table are summed in different orders: a relative slack
# on the threshold keeps every document whose exact score could tie with the depth-th best.
SLACK = 1e-9


def bounded_table(stats, model, queries, union: np.ndarray, mu: float, lam: float, depth: int):
    """P_TM of the ``union`` of the ``queries``' terms, (n_docs, len(union)), exact at every
    query term of every document that can enter that query's top ``depth`` under (mu, lam), a
    lower bound elsewhere; None where the model offers no bounds for these terms."""
    n_docs = stats.n_docs
    if not 1 <= depth < n_docs:  # every document ranked: nothing to leave out
        return None
    bounds = model.p_w_d_bounds(union)
    if bounds is None:
        return None
    scorer = Scorer(stats, mu=mu, lam=lam, model=model)
    table = bounds.lower.T  # term-major: a query's terms are rows
    # the entries to make exact as keys document * len(union) + column, sorted: a few per cent
    # of a (terms, documents) mask, whose fault-in and scan cost more than sorting the keys
    need = [np.zeros(0, dtype=np.int64)]
    for query in queries:
        if len(query.term_ids) == 0:
            continue
        cols = np.searchsorted(union, query.term_ids)
        low, high = scorer.score_bounds(query, table, cols, bounds.doc_gap, bounds.term_gap[cols])
        threshold = kth_largest(low, depth)
        can = np.flatnonzero(high >= threshold - SLACK * (1.0 + abs(threshold)))
        need.append((can[:, None] * len(union) + cols[None, :]).ravel())
    doc_of, cols = np.divmod(np.unique(np.concatenate(need)), len(union))  # by document, then column
    docs, starts = np.unique(doc_of, return_index=True)
    ptr = np.append(starts, len(cols))
    log.debug("exact P_TM for %d of %d documents, %d entries of %d", len(docs), n_docs, len(cols),
              len(union) * n_docs)
    bounds.make_exact(docs, ptr, cols)
    return bounds.lower
