"""Split flags of the Topical Collocation Model: where no collocation may continue from one
token to the next (stopwords, punctuation, document ends), checked for training
(:mod:`models.tcm.model`) and fold-in (:mod:`models.tcm.foldin`) alike.
"""
import numpy as np


def split_flags(corpus, split=None):
    """Validated split flags: ``out[i] = 1`` if no collocation may continue from token i to
    token i + 1. The last token of every document is always a split.

    Parameters
    ----------
    corpus : Corpus
    split : array-like of shape (n_tokens,), bool or int, or None (no splits inside documents)

    Returns
    -------
    ndarray of shape (n_tokens,), uint8
    """
    N = corpus.n_tokens
    if split is None:
        out = np.zeros(N, dtype=np.uint8)
    else:
        split = np.asarray(split)
        if split.shape != (N,):
            raise ValueError(f"split must have shape (n_tokens,) = ({N},), got {split.shape!r}")
        if split.size and not np.isin(split, (0, 1)).all():
            bad = int(np.flatnonzero(~np.isin(split, (0, 1)))[0])
            raise ValueError(f"split must hold 0/1 flags, got split[{bad}] = {split[bad]!r}")
        out = split.astype(np.uint8, copy=True)
    ends = corpus.doc_ptr[1:][np.diff(corpus.doc_ptr) > 0] - 1
    out[ends] = 1
    return out
