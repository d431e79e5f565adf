"""The Topical Collocation Model (Zhao, Du, Börschinger, Pate, Ciaramita, Steedman & Johnson,
ACL 2015): collocations and their topics learned jointly by point-wise Gibbs sampling over
boundary variables, and the TCM document model P_TCM(c | d) used for retrieval.

The numerical work lives in :mod:`models._kernels.tcm` (whose docstring gives the model and the
conditionals), the fit loop, checkpoints and model files in :mod:`models.gibbs`; this class
validates, allocates and sweeps.
"""
import hashlib

import numpy as np

from ._kernels import tcm as K_
from ._kernels.rng import make_rng_states
from .gibbs import GibbsModel, shard_docs, stack_ptrs

SAMPLERS = ("sparse", "exact")
INITS = ("random", "unigram")
# alpha0 ~ Exponential(rate): vague; the restaurants' counts dominate its posterior.
ALPHA0_PRIOR_RATE = 1e-3
ALPHA0_SLICE_STEPS = 5
# Default alpha0 gives every one-word collocation the prior mass alpha0 P0(w) = LDA's beta = 0.01.
# Resampling drives alpha0 far lower (MED: ~85 at K = 100, ~18 at K = 800: 0.004 and 0.0009 per
# word); topics that sparse, with alpha = 1 / K, smooth documents badly as K grows (MED MAP at
# lam 0.7, K = 800: 0.547 with the paper's priors, 0.614 with these and alpha = 50 / K).
ONE_WORD_PRIOR = 0.01


def p0_table(p_stop, n_terms, max_len):
    """P0(c) by collocation length: ``p0[M] = p# (1 - p#)^(M-1) V^-M / Z`` for M = 1..max_len,
    with ``Z = 1 - (1 - p#)^max_len`` (the geometric length truncated at max_len); p0[0] = 0.

    Returns ndarray of shape (max_len + 1,), float64.
    """
    z = 1.0 - (1.0 - p_stop) ** max_len
    out = np.zeros(max_len + 1)
    for m in range(1, max_len + 1):
        out[m] = p_stop * (1.0 - p_stop) ** (m - 1) * float(n_terms) ** (-m) / z
    return out


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


def _split_hash(split):
    return hashlib.sha1(np.ascontiguousarray(split, dtype=np.uint8).tobytes()).hexdigest()


class TCM(GibbsModel):
    """Topical Collocation Model trained by point-wise Gibbs sampling with several chains, kept
    as a document model over collocations.

    Parameters
    ----------
    n_topics : int, default=100
        K.
    alpha : float or None, default=None
        Symmetric document-topic prior; None means ``50 / n_topics`` as for LDA. (The paper uses
        1 / n_topics; with it documents keep few topics and retrieval worsens as K grows.)
    alpha0 : float or None, default=None
        Concentration of every topic's DP (the paper starts at 100); None means
        ``ONE_WORD_PRIOR / P0(w)``, so that a word's prior mass in a topic is LDA's beta.
        Resampled after every sweep when ``resample_alpha0`` (slice sampling on log alpha0 under
        a vague Exponential(1e-3) prior; the likelihood is the DP's Dirichlet-multinomial marginal).
    p_stop : float, default=0.5
        p#, the stopping probability of the geometric length of the base distribution P0.
        With 0.5, P0 gives a two-word collocation the same mass as two one-word collocations.
    max_len : int, default=8
        Longest collocation (P0 is truncated there and renormalised).
    resample_alpha0 : bool, default=False
        Off by default: see :data:`ONE_WORD_PRIOR`.
    n_chains : int, default=3
    n_iter : int, default=100
        Total Gibbs sweeps per chain (burn-in included).
    burn_in : int or None, default=None
    sample_every : int or None, default=None
        Samples are kept after sweeps ``burn_in + sample_every, burn_in + 2 sample_every, ...``;
        None: ``burn_in = n_iter // 2``, ``sample_every = max(1, (n_iter - burn_in) // 5)``
        (100 sweeps: 50 and 10, samples at 60, 70, ..., 100).
    init : {"random", "unigram"}, default="random"
        "random": boundaries drawn as P0 draws collocation lengths (a collocation ends after a
        token with probability p#), uniform topics; every frequent phrase starts with some
        customers, which the point-wise sampler needs: merging two words into a collocation
        no restaurant has costs a factor ~ alpha0 P0(LR) / (P(L|k) P(R|k)), so from "unigram"
        (every token its own collocation) almost no phrase is ever found and TCM ends as LDA.
    sampler : {"sparse", "exact"}, default="sparse"
        "exact": the K + 1 weights of every position in a dense loop, O(K). "sparse": the
        bucket decomposition of the paper's eq. 8-12, which here draws from the very same
        conditional (see :mod:`models._kernels.tcm`), in O(topics of the doc + topics of the
        collocation + log K).
    n_shards : int, default=4
        Fixed document shards sampled in parallel (AD-LDA style: each against its own copy of
        the restaurants, merged after the sweep). Results depend on ``n_shards`` and ``seed``,
        never on ``n_jobs``. ``n_shards=1`` is the exact sequential sampler.
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads (``numba.set_num_threads``; restored afterwards). None: all numba threads.
    log_lik_every : int, default=10
        Record the collapsed log p(w, b) per word token of every chain every this many sweeps.
    callback_every : int, default=1
    checkpoint_every : int, default=10

    Attributes
    ----------
    b_ : ndarray of shape (n_chains, n_tokens), int32
        Boundary variables: -1 = the collocation continues into the next token (the paper's
        b = 0); k >= 0 = a collocation with topic k ends here (the paper's b = k + 1).
    alpha0_ : ndarray of shape (n_chains,), float64
    log_lik_ : ndarray of shape (n_records, n_chains), float64
    alpha0_trace_ : ndarray of shape (n_iter_, n_chains), float64
    sample_iter_ : ndarray of shape (n_samples,), int64
    n_iter_ : int
    fingerprint_ : str
    type_ptr_, type_terms_ : ndarray, int64 / int32
        Every collocation type seen in a kept sample: type t is
        ``type_terms_[type_ptr_[t]:type_ptr_[t + 1]]``; sorted by length, then term ids.
    ct_ptr_, ct_type_, ct_topic_, ct_count_ : ndarray
        Restaurant counts of kept sample cs: entries ``ct_ptr_[cs]:ct_ptr_[cs + 1]`` give
        (type, topic, n_kc), sorted by type then topic.
    dk_ptr_, dk_topic_, dk_count_ : ndarray
        Topic counts of the collocations of every doc in every kept sample (as in LDA).
    n_k_samples_ : ndarray of shape (n_chains * n_samples, n_topics), int64
    alpha0_samples_ : ndarray of shape (n_chains * n_samples,), float64
    """

    kind = "tcm"
    training_inputs = ("split",)

    # retrieval segments queries into collocations and scores them with p_c_d (retrieval.batch)
    segments_queries = True

    def __init__(self, n_topics=100, alpha=None, alpha0=None, p_stop=0.5, max_len=8,
                 resample_alpha0=False, n_chains=3, n_iter=100, burn_in=None, sample_every=None,
                 init="random", sampler="sparse", n_shards=4, seed=0, n_jobs=None, log_lik_every=10,
                 callback_every=1, checkpoint_every=10):
        self.n_topics = n_topics
        self.alpha = alpha
        self.alpha0 = alpha0
        self.p_stop = p_stop
        self.max_len = max_len
        self.resample_alpha0 = resample_alpha0
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.sample_every = sample_every
        self.init = init
        self.sampler = sampler
        self.n_shards = n_shards
        self.seed = seed
        self.n_jobs = n_jobs
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every

    # -- parameters ---------------------------------------------------------------------------

    _STATE = ("b", "alpha0")
    # alpha0 of every chain after every sweep (alpha0_trace_), kept in checkpoints and model files
    _TRACES = {"alpha0_trace": "_alpha0_rows"}

    def _check_params(self, corpus):
        self._check_shared_params("n_topics", "max_len")
        if self.n_topics > 65535:
            raise ValueError(f"n_topics must be <= 65535, got {self.n_topics!r}")
        if self.alpha is not None and not (float(self.alpha) > 0):
            raise ValueError(f"alpha must be > 0 or None (50 / n_topics), got {self.alpha!r}")
        if self.alpha0 is not None and not float(self.alpha0) > 0:
            raise ValueError(f"alpha0 must be > 0 or None (beta-equivalent), got {self.alpha0!r}")
        if not 0.0 < float(self.p_stop) <= 1.0:
            raise ValueError(f"p_stop must be in (0, 1], got {self.p_stop!r}")
        self._check_choice("init", INITS)
        self._check_choice("sampler", SAMPLERS)
        self._check_corpus(corpus)
        p0 = p0_table(float(self.p_stop), corpus.n_terms, self.max_len)
        if not p0[self.max_len] > 0:
            raise ValueError(f"max_len={self.max_len!r} is too long for n_terms={corpus.n_terms}: "
                             f"P0 of a collocation that long underflows to 0; lower max_len")

    def _alpha(self):
        return 50.0 / self.n_topics if self.alpha is None else float(self.alpha)

    def _alpha0(self, p0_len):
        return ONE_WORD_PRIOR / p0_len[1] if self.alpha0 is None else float(self.alpha0)

    # -- training -----------------------------------------------------------------------------

    def fit(self, corpus, callback=None, checkpoint=None, split=None):
        """Train all chains on ``corpus``.

        Parameters
        ----------
        corpus : Corpus
            Tokens in text order (a collocation is a run of adjacent tokens).
        callback : callable or None
            ``callback(model, iteration, n_iter)`` after every ``callback_every`` sweeps.
        checkpoint : str or PathLike or None
            Checkpoint file; an existing one is resumed (same corpus, splits and parameters),
            ending with the same model as an uninterrupted run.
        split : array-like of shape (n_tokens,) or None
            1 where a collocation may not continue into the next token (stopwords or
            punctuation removed there; see :func:`split_flags`).

        Returns
        -------
        self
        """
        self._check_params(corpus)
        self._split = split_flags(corpus, split)
        return self._fit_with_threads(corpus, callback, checkpoint)

    def _corpus_hash(self, corpus):
        # the splits are part of the training data: a checkpoint must not resume across them
        return hashlib.sha1((super()._corpus_hash(corpus) + _split_hash(self._split)).encode()
                            ).hexdigest()

    def _build_layout(self, corpus):
        self._shard_doc = shard_docs(corpus, self.n_shards)
        doc_len = np.diff(corpus.doc_ptr)
        self._cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(doc_len, self.n_topics))]).astype(np.int64)

    def _alloc_chain_state(self, corpus):
        C, D, N = self.n_chains, corpus.n_docs, corpus.n_tokens
        self.alpha_ = self._alpha()
        self.p0_len_ = p0_table(float(self.p_stop), corpus.n_terms, self.max_len)
        self._corpus = corpus
        cap = int(self._cap_ptr[-1])
        self.b_ = np.full((C, N), -1, dtype=np.int32)
        self.dt_topic_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_count_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_nnz_ = np.zeros((C, D), dtype=np.int32)
        self._tables = [None] * C

    def _start(self, corpus):
        """Fresh chains: rng streams, initial alpha0, random boundaries and topics."""
        C, S = self.n_chains, self.n_shards
        # streams 0..S-1 sample the shards; stream S resamples alpha0
        self.rng_ = make_rng_states(self.seed, C, S + 1)
        self.alpha0_ = np.full(C, self._alpha0(self.p0_len_))
        for c in range(C):
            K_._init_random(self._shard_doc, corpus.doc_ptr, self._split, self.b_[c], self.n_topics,
                            float(self.p_stop if self.init == "random" else 1.0), self.max_len,
                            self.rng_[c, :S])
            self._rebuild(c)

    def _step(self, corpus, it):
        """Sweep ``it`` of every chain, each followed by alpha0's resampling."""
        for c in range(self.n_chains):
            self._sweep(c)
            if self.resample_alpha0:
                self._resample_alpha0(c)
        self._alpha0_rows.append(self.alpha0_.tolist())

    def _set_chain_state(self, corpus, c, b):
        self.b_[c] = b
        self._rebuild(c)

    def _rebuild(self, c):
        """Restaurants and doc lists of chain c from b (Mallet's buildInitialTypeTopicCounts)."""
        corpus = self._corpus
        self._tables[c] = K_._build_tables(corpus.term_ids, self.b_[c], self.n_topics)
        K_._build_doc_lists(corpus.doc_ptr, self.b_[c], self._cap_ptr, self.dt_topic_[c],
                            self.dt_count_[c], self.dt_nnz_[c])

    def _sweep(self, c, record=None):
        """One sweep of chain c (all shards), then the merge: the restaurants are rebuilt from b."""
        corpus, S = self._corpus, self.n_shards
        if record is None:
            record = np.zeros((0, 0))
        K_._sweep(self._shard_doc, corpus.doc_ptr, corpus.term_ids, self._split, self.b_[c],
                  self._cap_ptr, self.dt_topic_[c], self.dt_count_[c], self.dt_nnz_[c],
                  *self._tables[c], self.alpha_, float(self.alpha0_[c]),
                  self.p0_len_, self.max_len, self.sampler == "sparse", self.rng_[c, :S], record)
        self._tables[c] = K_._build_tables(corpus.term_ids, self.b_[c], self.n_topics)

    def _hist(self, c):
        t = self._tables[c]
        return K_._entry_hist(t[2], t[4], t[9], t[10], t[5], self.max_len)

    def _resample_alpha0(self, c):
        h_len, h_n, h_mult = self._hist(c)
        self.alpha0_[c] = K_._resample_alpha0(float(self.alpha0_[c]), h_len, h_n, h_mult,
                                             self._tables[c][12], self.p0_len_, ALPHA0_PRIOR_RATE,
                                             ALPHA0_SLICE_STEPS, self.rng_[c, self.n_shards])

    def _log_lik(self, c):
        """Collapsed log p(w, b) per word token of chain c."""
        h_len, h_n, h_mult = self._hist(c)
        ll = K_._log_lik_restaurants(h_len, h_n, h_mult, self._tables[c][12], self.p0_len_,
                                     float(self.alpha0_[c]))
        ll += K_._log_lik_docs(self._cap_ptr, self.dt_topic_[c], self.dt_count_[c],
                               self.dt_nnz_[c], self.alpha_, self.n_topics)
        return ll / max(self._corpus.n_tokens, 1)

    @property
    def alpha0_trace_(self):
        return np.array(self._alpha0_rows, dtype=np.float64).reshape(-1, self.n_chains)

    def _take_sample(self, c, it):
        t = self._tables[c]
        n_types, n_entries = int(t[5]), int(t[11])
        en_ptr = np.empty(n_types + 1, dtype=np.int64)
        en_topic = np.empty(n_entries, dtype=np.int32)
        en_count = np.empty(n_entries, dtype=np.int32)
        m = K_._compact_tables(t[4], t[8], t[9], t[10], n_types, en_ptr, en_topic, en_count)
        nnz = self.dt_nnz_[c]
        dk_ptr = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
        dk_topic = np.empty(dk_ptr[-1], dtype=np.uint16)
        dk_count = np.empty(dk_ptr[-1], dtype=np.int32)
        K_._compact_doc_lists(self._cap_ptr, self.dt_topic_[c], self.dt_count_[c], nnz, dk_ptr,
                              dk_topic, dk_count)
        s = dict(chain=c, iter=it, ty_pos=t[3][:n_types].copy(), ty_len=t[2][:n_types].copy(),
                 en_ptr=en_ptr, en_topic=en_topic[:m].astype(np.uint16), en_count=en_count[:m].copy(),
                 dk_ptr=dk_ptr, dk_topic=dk_topic, dk_count=dk_count, n_k=t[12].copy(),
                 alpha0=float(self.alpha0_[c]))
        if self._keep_sample_state:
            s["b"] = self.b_[c].copy()
        return s

    def _finalize(self, corpus):
        """Stack the kept samples as cs = c * n_samples + s over one vocabulary of collocation types."""
        samples = self._sorted_samples()
        # one type vocabulary: occurrences (pos, len) -> padded term rows -> sorted unique rows
        pos = np.concatenate([s["ty_pos"] for s in samples])
        ln = np.concatenate([s["ty_len"] for s in samples]).astype(np.int64)
        key, inv_occ = np.unique(pos * (self.max_len + 1) + ln, return_inverse=True)
        upos, ulen = key // (self.max_len + 1), key % (self.max_len + 1)
        L = self.max_len
        cols = np.arange(L)
        idx = np.minimum(upos[:, None] + cols[None, :], corpus.n_tokens - 1)
        rows = np.where(cols[None, :] < ulen[:, None], corpus.term_ids[idx], -1).astype(np.int32)
        order = np.lexsort([rows[:, j] for j in range(L - 1, -1, -1)] + [ulen])
        rows_s, len_s = rows[order], ulen[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (np.diff(len_s) != 0) | (rows_s[1:] != rows_s[:-1]).any(axis=1)
        type_of_sorted = np.cumsum(new) - 1
        type_of_occ = np.empty(len(order), dtype=np.int64)
        type_of_occ[order] = type_of_sorted
        first = np.flatnonzero(new)
        lens = len_s[first]
        self.type_ptr_ = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self.type_terms_ = rows_s[first][cols[None, :] < lens[:, None]].astype(np.int32)
        union = type_of_occ[inv_occ]
        # restaurants of every sample, re-indexed by union type and sorted by (type, topic)
        ct_type, ct_topic, ct_count, ct_ptr = [], [], [], [0]
        off = 0
        for s in samples:
            n = len(s["ty_pos"])
            u = union[off:off + n]
            off += n
            cnt = np.diff(s["en_ptr"])
            o = np.argsort(u, kind="stable")
            starts = s["en_ptr"][:-1][o]
            lens_o = cnt[o]
            gather = np.repeat(starts - np.concatenate([[0], np.cumsum(lens_o)[:-1]]), lens_o) + \
                np.arange(lens_o.sum())
            ct_type.append(np.repeat(u[o], lens_o).astype(np.int32))
            ct_topic.append(s["en_topic"][gather])
            ct_count.append(s["en_count"][gather])
            ct_ptr.append(ct_ptr[-1] + int(lens_o.sum()))
        self.ct_ptr_ = np.array(ct_ptr, dtype=np.int64)
        self.ct_type_ = np.concatenate(ct_type)
        self.ct_topic_ = np.concatenate(ct_topic)
        self.ct_count_ = np.concatenate(ct_count)
        self.dk_ptr_, self.dk_topic_ = stack_ptrs([s["dk_ptr"] for s in samples],
                                                  [s["dk_topic"] for s in samples])
        self.dk_count_ = np.concatenate([s["dk_count"] for s in samples])
        self.n_k_samples_ = np.stack([s["n_k"] for s in samples]).astype(np.int64)
        self.alpha0_samples_ = np.array([s["alpha0"] for s in samples], dtype=np.float64)
        self._corpus = None

    # -- document model -----------------------------------------------------------------------

    @property
    def n_types_(self):
        return len(self.type_ptr_) - 1

    def collocation_terms(self, type_id):
        """Term ids of collocation type ``type_id``: ndarray, int32."""
        return self.type_terms_[self.type_ptr_[type_id]:self.type_ptr_[type_id + 1]]

    def _len_blocks(self):
        if not hasattr(self, "_blocks"):
            lens = np.diff(self.type_ptr_)
            self._blocks = np.searchsorted(lens, np.arange(self.max_len + 2), side="left")
        return self._blocks

    def find_collocation(self, term_ids):
        """Type id of the collocation ``term_ids`` (a sequence of term ids), or -1 if no kept
        sample has it."""
        term_ids = [int(t) for t in term_ids]
        n = len(term_ids)
        if not 1 <= n <= self.max_len:
            return -1
        blocks = self._len_blocks()
        lo, hi = int(blocks[n]), int(blocks[n + 1])
        rows = self.type_terms_[self.type_ptr_[lo]:self.type_ptr_[hi]].reshape(-1, n)
        target = tuple(term_ids)
        a, z = 0, len(rows)
        while a < z:  # lexicographic binary search
            mid = (a + z) // 2
            if tuple(rows[mid].tolist()) < target:
                a = mid + 1
            else:
                z = mid
        return lo + a if a < len(rows) and tuple(rows[a].tolist()) == target else -1

    def _lookup(self, term_ids, seg_ptr):
        """Type ids (-1: unseen) and lengths of the collocations term_ids[seg_ptr[s]:seg_ptr[s+1]]."""
        n_seg = len(seg_ptr) - 1
        lens = np.diff(seg_ptr).astype(np.int64)
        types = np.full(n_seg, -1, dtype=np.int64)
        one = lens == 1
        if one.any():
            blocks = self._len_blocks()
            lo, hi = int(blocks[1]), int(blocks[2])
            singles = self.type_terms_[self.type_ptr_[lo]:self.type_ptr_[hi]]
            w = term_ids[seg_ptr[:-1][one]]
            pos = np.searchsorted(singles, w)
            ok = (pos < len(singles)) & (singles[np.minimum(pos, len(singles) - 1)] == w)
            types[np.flatnonzero(one)[ok]] = lo + pos[ok]
        for s in np.flatnonzero(~one):
            types[s] = self.find_collocation(term_ids[seg_ptr[s]:seg_ptr[s + 1]])
        return types, lens

    def _phi(self, term_ids, seg_ptr):
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        seg_ptr = np.asarray(seg_ptr, dtype=np.int64).ravel()
        lens = np.diff(seg_ptr)
        if len(seg_ptr) < 1 or seg_ptr[0] != 0 or seg_ptr[-1] != len(term_ids) or (lens < 1).any():
            raise ValueError(f"seg_ptr must run from 0 to len(term_ids) = {len(term_ids)} in steps "
                             f">= 1, got {seg_ptr.tolist()!r}")
        if (lens > self.max_len).any():
            raise ValueError(f"collocations are at most max_len = {self.max_len} terms long, got "
                             f"one of {int(lens.max())}")
        types, lens = self._lookup(term_ids, seg_ptr)
        n_cs = len(self.alpha0_samples_)
        phi = np.empty((n_cs, self.n_topics, len(types)))
        apart = np.empty((n_cs, len(types)))
        K_._phi_table(self.ct_ptr_, self.ct_type_, self.ct_topic_, self.ct_count_,
                      self.n_k_samples_, self.alpha0_samples_, self.p0_len_[lens], types,
                      self.alpha_, phi, apart)
        return phi, apart

    def p_c_d(self, term_ids, seg_ptr):
        """P_TCM(c | d) of collocations for every document, averaged over all kept samples.

        ``P_TCM(c | d) = sum_k (n_dk + alpha) / (N_d + K alpha) * (n_kc + alpha0 P0(c)) / (n_k + alpha0)``
        per sample, where n_dk counts the collocations of doc d with topic k and n_kc the
        customers of collocation c in restaurant k.

        Parameters
        ----------
        term_ids : array-like of int, shape (n_query_terms,)
        seg_ptr : array-like of int, shape (n_collocations + 1,)
            Collocation s is ``term_ids[seg_ptr[s]:seg_ptr[s + 1]]``.

        Returns
        -------
        ndarray of shape (n_docs, n_collocations), float64
        """
        phi, apart = self._phi(term_ids, seg_ptr)
        out = np.empty((self.dk_ptr_.shape[1] - 1, phi.shape[2]))
        K_._score_p_c_d(self.dk_ptr_, self.dk_topic_, self.dk_count_, self.alpha_, phi, apart, out)
        return out

    def p_w_d(self, term_ids):
        """P_TCM(w | d): every term as a one-word collocation (see :meth:`p_c_d`).

        Returns ndarray of shape (n_docs, n_query_terms), float64.
        """
        term_ids = np.asarray(term_ids, dtype=np.int64).ravel()
        return self.p_c_d(term_ids, np.arange(len(term_ids) + 1))

    def p_c_d_per_sample(self, term_ids, seg_ptr):
        """:meth:`p_c_d` of every kept sample: ndarray of shape (n_chains, n_samples, n_docs,
        n_collocations)."""
        phi, apart = self._phi(term_ids, seg_ptr)
        n_cs = phi.shape[0]
        out = np.empty((n_cs, self.dk_ptr_.shape[1] - 1, phi.shape[2]))
        K_._score_p_c_d_per_sample(self.dk_ptr_, self.dk_topic_, self.dk_count_, self.alpha_, phi,
                                   apart, out)
        return out.reshape(self.n_chains, n_cs // self.n_chains, *out.shape[1:])

    def p_w_d_per_sample(self, term_ids):
        """:meth:`p_w_d` of every kept sample: (n_chains, n_samples, n_docs, n_query_terms)."""
        term_ids = np.asarray(term_ids, dtype=np.int64).ravel()
        return self.p_c_d_per_sample(term_ids, np.arange(len(term_ids) + 1))

    def p_c(self, term_ids, seg_ptr):
        """P(c) under the topics of the collection, averaged over kept samples:
        ``sum_k pi_k P(c | k)`` with ``pi_k = (n_k + alpha) / (sum_k n_k + K alpha)``.
        Returns ndarray of shape (n_collocations,), float64."""
        phi, _ = self._phi(term_ids, seg_ptr)
        n_k = self.n_k_samples_.astype(np.float64)
        pi = (n_k + self.alpha_) / (n_k.sum(1, keepdims=True) + self.n_topics * self.alpha_)
        return np.einsum("ck,cks->s", pi, phi) / len(pi)

    def segment(self, term_ids, split=None):
        """Most probable segmentation of a token sequence into collocations (Viterbi) under the
        topics of the collection (:meth:`p_c`); no collocation spans a split or exceeds max_len.
        Ties go to the segmentation with the shorter last collocation.

        Parameters
        ----------
        term_ids : array-like of int, shape (n,)
        split : array-like of 0/1, shape (n,), or None
            1 after token i: tokens i and i + 1 may not be in one collocation.

        Returns
        -------
        ndarray of shape (n_collocations + 1,), int64: collocation s is
        ``term_ids[seg_ptr[s]:seg_ptr[s + 1]]``.
        """
        term_ids = np.asarray(term_ids, dtype=np.int64).ravel()
        n = len(term_ids)
        if n == 0:
            return np.zeros(1, dtype=np.int64)
        split = np.zeros(n, dtype=np.uint8) if split is None else np.asarray(split, dtype=np.uint8)
        # candidate spans (start, length)
        starts, lens = [], []
        for i in range(n):
            for m in range(1, self.max_len + 1):
                if i + m > n:
                    break
                starts.append(i)
                lens.append(m)
                if split[i + m - 1]:
                    break
        flat = np.concatenate([term_ids[a:a + m] for a, m in zip(starts, lens)])
        ptr = np.concatenate([[0], np.cumsum(lens)])
        logp = np.log(self.p_c(flat, ptr))
        best = np.full(n + 1, -np.inf)
        best[0] = 0.0
        back = np.zeros(n + 1, dtype=np.int64)
        by_end = {}
        for j, (a, m) in enumerate(zip(starts, lens)):
            by_end.setdefault(a + m, []).append((m, a, j))
        for e in range(1, n + 1):
            for m, a, j in sorted(by_end.get(e, [])):
                v = best[a] + logp[j]
                if v > best[e]:
                    best[e], back[e] = v, a
        cuts = [n]
        while cuts[-1] > 0:
            cuts.append(int(back[cuts[-1]]))
        return np.array(cuts[::-1], dtype=np.int64)

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable topics of ``doc`` (theta over its collocations), averaged over the kept
        samples of ``chain``. Returns (topic ids int64, probabilities float64)."""
        self._check_fitted()
        D = self.dk_ptr_.shape[1] - 1
        if not 0 <= doc < D:
            raise ValueError(f"doc must be in [0, {D}), got {doc!r}")
        theta = np.zeros(self.n_topics)
        css = self._cs_of_chain(chain)
        for cs in css:
            t = np.full(self.n_topics, self.alpha_)
            lo, hi = self.dk_ptr_[cs, doc], self.dk_ptr_[cs, doc + 1]
            np.add.at(t, self.dk_topic_[lo:hi].astype(np.int64), self.dk_count_[lo:hi])
            theta += t / t.sum()
        theta /= len(css)
        ids = np.argsort(-theta, kind="stable")[:top]
        return ids.astype(np.int64), theta[ids]

    def topic_collocations(self, topic, top=10, chain=0, by="p_c_t", min_len=1, pseudo=5.0):
        """Top collocations of ``topic``, averaged over the kept samples of ``chain`` (topics are
        not aligned across chains), among the collocations seated in the topic's restaurant.

        by="p_c_t": ``P(c | t) = (n_tc + alpha0 P0(c)) / (n_t + alpha0)``.
        by="p_t_c": ``P(t | c) = (n_tc + pseudo P(t)) / (n_c + pseudo)`` with
        ``P(t) = n_t / sum_k n_k``: how exclusively c belongs to t, shrunk towards the topic's
        share for rare collocations (the paper's intrusion lists use a pseudo-count of 5).

        Returns (type ids int64, scores float64, mean counts n_tc float64).
        """
        self._check_fitted()
        if not 0 <= topic < self.n_topics:
            raise ValueError(f"topic must be in [0, {self.n_topics}), got {topic!r}")
        if by not in ("p_c_t", "p_t_c"):
            raise ValueError(f"by must be 'p_c_t' or 'p_t_c', got {by!r}")
        css = list(self._cs_of_chain(chain))
        lens_all = np.diff(self.type_ptr_)
        cand = []
        for cs in css:
            lo, hi = self.ct_ptr_[cs], self.ct_ptr_[cs + 1]
            sel = self.ct_topic_[lo:hi] == topic
            cand.append(self.ct_type_[lo:hi][sel])
        cand = np.unique(np.concatenate(cand)).astype(np.int64)
        cand = cand[lens_all[cand] >= min_len]
        score = np.zeros(len(cand))
        n_tc_mean = np.zeros(len(cand))
        for cs in css:
            lo, hi = self.ct_ptr_[cs], self.ct_ptr_[cs + 1]
            ty, tp, ct = self.ct_type_[lo:hi].astype(np.int64), self.ct_topic_[lo:hi], self.ct_count_[lo:hi]
            sel = tp == topic
            n_tc = np.zeros(len(cand))
            where = np.searchsorted(cand, ty[sel])
            ok = (where < len(cand)) & (cand[np.minimum(where, len(cand) - 1)] == ty[sel])
            n_tc[where[ok]] = ct[sel][ok]
            n_tc_mean += n_tc / len(css)
            n_k = self.n_k_samples_[cs]
            if by == "p_c_t":
                a0 = self.alpha0_samples_[cs]
                score += (n_tc + a0 * self.p0_len_[lens_all[cand]]) / (n_k[topic] + a0)
            else:
                n_c = np.bincount(ty, weights=ct, minlength=self.n_types_)[cand]
                p_t = n_k[topic] / max(n_k.sum(), 1)
                score += (n_tc + pseudo * p_t) / (n_c + pseudo)
        score /= len(css)
        order = np.lexsort((cand, -n_tc_mean, -score))[:top]
        return cand[order], score[order], n_tc_mean[order]

    def topic_words(self, topic, top=10, chain=0):
        """Most probable terms of ``topic`` as one-word collocations, ``P((w) | t)`` as
        :meth:`p_w_d` uses them, averaged over the kept samples of ``chain``; terms never seated
        alone in the topic's restaurant are left out. Returns (term ids int64, probabilities)."""
        types, score, _ = self.topic_collocations(topic, top=self.n_types_, chain=chain, by="p_c_t")
        one = np.diff(self.type_ptr_)[types] == 1
        types, score = types[one][:top], score[one][:top]
        return self.type_terms_[self.type_ptr_[types]].astype(np.int64), score

    def top_collocations(self, top=20, min_len=2, chain=0):
        """Most frequent collocations over all topics (mean count over the kept samples of
        ``chain``). Returns (type ids int64, mean counts float64)."""
        self._check_fitted()
        counts = np.zeros(self.n_types_)
        css = list(self._cs_of_chain(chain))
        for cs in css:
            lo, hi = self.ct_ptr_[cs], self.ct_ptr_[cs + 1]
            counts += np.bincount(self.ct_type_[lo:hi], weights=self.ct_count_[lo:hi],
                                  minlength=self.n_types_)
        counts /= len(css)
        keep = np.flatnonzero(np.diff(self.type_ptr_) >= min_len)
        order = keep[np.lexsort((keep, -counts[keep]))][:top]
        return order.astype(np.int64), counts[order]

    # -- model files --------------------------------------------------------------------------

    _INFERENCE_ARRAYS = ("type_ptr", "type_terms", "ct_ptr", "ct_type", "ct_topic", "ct_count",
                         "dk_ptr", "dk_topic", "dk_count", "n_k_samples", "alpha0_samples")

    def _header(self):
        # alpha=None has meant 1 / K and now means 50 / K: the file says which was used
        return dict(super()._header(), alpha_used=float(self.alpha_))

    def _after_load(self, header):
        # files written before alpha_used was stored had alpha=None meaning 1 / n_topics
        self.alpha_ = float(header.get("alpha_used", 1.0 / self.n_topics if self.alpha is None
                                       else self.alpha))
        self.p0_len_ = p0_table(float(self.p_stop), self.n_terms_, self.max_len)


def joint_log_lik(corpus, b, n_topics, alpha, alpha0, p_stop=0.5, max_len=8):
    """Collapsed log p(w, b) per word token of any boundary assignment (the formula behind
    ``TCM.log_lik_``). ``b``: ndarray of shape (n_tokens,), int (see ``TCM.b_``)."""
    b = np.ascontiguousarray(b, dtype=np.int32)
    t = K_._build_tables(corpus.term_ids, b, n_topics)
    p0 = p0_table(float(p_stop), corpus.n_terms, max_len)
    h_len, h_n, h_mult = K_._entry_hist(t[2], t[4], t[9], t[10], t[5], max_len)
    ll = K_._log_lik_restaurants(h_len, h_n, h_mult, t[12], p0, float(alpha0))
    doc_len = np.diff(corpus.doc_ptr)
    cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(doc_len, n_topics))]).astype(np.int64)
    dt_topic = np.zeros(cap_ptr[-1], dtype=np.int32)
    dt_count = np.zeros(cap_ptr[-1], dtype=np.int32)
    dt_nnz = np.zeros(corpus.n_docs, dtype=np.int32)
    K_._build_doc_lists(corpus.doc_ptr, b, cap_ptr, dt_topic, dt_count, dt_nnz)
    ll += K_._log_lik_docs(cap_ptr, dt_topic, dt_count, dt_nnz, float(alpha), n_topics)
    return ll / max(corpus.n_tokens, 1)
