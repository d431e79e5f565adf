"""The Topical Collocation Model (Zhao, Du, Börschinger, Pate, Ciaramita, Steedman & Johnson,
ACL 2015): collocations and their topics learned jointly by point-wise Gibbs sampling over
boundary variables, and the TCM document model P_TCM(c | d) used for retrieval.

The numerical work lives in :mod:`models.tcm.kernels` (whose docstring gives the model and the
conditionals), the fit loop, checkpoints and model files in :mod:`models.common.gibbs`; this class
validates, allocates and sweeps.
"""
import hashlib
import math
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from . import files
from ..common.kernels.dirichlet import log_lik_docs
from ..common.kernels.rng import make_rng_states
from .kernels import Prior, Text, sweep
from .build_kernels import build_doc_lists, build_tables, build_tables_coded, init_random
from .restaurants import DocTopics
from .score_kernels import compact_doc_lists, compact_tables, entry_hist, log_lik_restaurants, resample_alpha0
from ..common.gibbs import GibbsModel, shard_docs, stack_ptrs
from .foldin import TCMFoldInMixin
from .infer import TCMDocumentModel
from .split import split_flags
from .stack import stack_restaurants

SAMPLERS = ("sparse", "exact")
INITS = ("random", "unigram")
# alpha0 ~ Exponential(rate): vague; the restaurants' counts dominate its posterior.
ALPHA0_PRIOR_RATE = 1e-3
ALPHA0_SLICE_STEPS = 5
# Default alpha0 gives every one-word collocation the prior mass alpha0 P0(w) = LDA's beta = 0.01.
# Resampling drives alpha0 far lower, and topics that sparse, with alpha = 1 / K, smooth documents
# badly as K grows (docs/models/tcm.md).
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


def _split_hash(split):
    return hashlib.sha1(np.ascontiguousarray(split, dtype=np.uint8).tobytes()).hexdigest()


class TCM(TCMFoldInMixin, TCMDocumentModel, GibbsModel):
    """Topical Collocation Model trained by point-wise Gibbs sampling with several chains, kept
    as a document model over collocations.

    Parameters
    ----------
    n_topics : int, default=100
        K, the number of topics.
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
        conditional (see :mod:`models.tcm.kernels`), in O(topics of the doc + topics of the
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
    executor : str, default="local"
        Where the sweeps run: "local" (this process, ``n_jobs`` threads), "ray" (Ray workers
        that own the shards; ``RAY_ADDRESS`` or a local Ray cluster), "ray:ADDRESS" or
        "ray://HOST:PORT" (that Ray cluster). Same seed and ``n_shards``: the same model
        whatever the executor and the number of threads or workers. Not written to model
        files; a checkpoint resumes under any executor. Needs ``pip install topicir[ray]``.

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
    quick_params = dict(n_topics=4, n_chains=2, n_iter=8, burn_in=4, sample_every=2, n_shards=2, seed=3)
    training_inputs = ("split",)
    # P_TCM(w|d) is the probability of the one-word collocation (w); multi-word ones hold the rest
    p_w_d_sums_to_one = False

    # retrieval segments queries into collocations and scores them with p_c_d (retrieval.batch)
    segments_queries = True

    def __init__(self, *, n_topics=100, alpha=None, alpha0=None, p_stop=0.5, max_len=8,
                 resample_alpha0=False, n_chains=3, n_iter=100, burn_in=None, sample_every=None,
                 init="random", sampler="sparse", n_shards=4, seed=0, n_jobs=None, log_lik_every=10,
                 callback_every=1, checkpoint_every=10, executor="local"):
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
        self.executor = executor

    # -- parameters ---------------------------------------------------------------------------

    _STATE = ("b", "alpha0")
    # alpha0 of every chain after every sweep (alpha0_trace_), kept in checkpoints and model files
    _TRACES = {"alpha0_trace": "_alpha0_rows"}

    def _check_params(self, corpus):
        self._check_shared_params("n_topics", "max_len")
        self._check_uint16("n_topics")
        self._check_priors()  # alpha None: 50 / n_topics; alpha0 None: beta-equivalent
        if not 0.0 < float(self.p_stop) <= 1.0:
            raise ValueError(f"p_stop must be in (0, 1], got {self.p_stop!r}")
        self._check_choice("init", INITS)
        self._check_choice("sampler", SAMPLERS)
        self._check_corpus(corpus)
        # log P0 of the longest collocation, before any table of max_len entries is allocated
        p, m = float(self.p_stop), int(self.max_len)
        z = 1.0 - (1.0 - p) ** m
        tail = 0.0 if m == 1 else (m - 1) * math.log1p(-p) if p < 1 else -math.inf
        log_last = math.log(p) + tail - m * math.log(max(corpus.n_terms, 1)) - math.log(z)
        if not log_last > math.log(np.finfo(float).smallest_subnormal):
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
        self._set_priors(self._alpha(), corpus.n_terms)
        self._corpus = corpus
        cap = int(self._cap_ptr[-1])
        self.b_ = np.full((C, N), -1, dtype=np.int32)
        self.dt_topic_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_count_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_nnz_ = np.zeros((C, D), dtype=np.int32)
        self._tables = [None] * C
        # after a chain's sweep, what its merge reads of its stale restaurants (see _step)
        self._coded = [None] * C

    def _start(self, corpus):
        """Fresh chains: rng streams, initial alpha0, random boundaries and topics."""
        C, S = self.n_chains, self.n_shards
        # streams 0..S-1 sample the shards; stream S resamples alpha0
        self.rng_ = make_rng_states(self.seed, C, S + 1)
        self.alpha0_ = np.full(C, self._alpha0(self.p0_len_))
        self._init_chains(corpus)

    def _init_chains(self, corpus):
        """Random boundaries and topics of every chain from its streams (``rng_`` set). A chain's
        restaurants are built when its first sweep needs them (:meth:`_chain_tables`): a random
        segmentation makes far more collocation types than a sampled one, so the start tables of
        every chain side by side would be the training's peak memory."""
        C, S = self.n_chains, self.n_shards
        for c in range(C):
            init_random(self._shard_doc, corpus.doc_ptr, self._split, self.b_[c], self.n_topics,
                        float(self.p_stop if self.init == "random" else 1.0), self.max_len,
                        self.rng_[c, :S])
            build_doc_lists(corpus.doc_ptr, self.b_[c], *self._docs(c))
            self._tables[c] = self._coded[c] = None

    def _chain_tables(self, c):
        """The restaurants of chain c, built from b if they are not (a chain just started)."""
        if self._tables[c] is None:
            self._tables[c] = build_tables(self._corpus.term_ids, self.b_[c], self.n_topics)
        return self._tables[c]

    def _step(self, corpus, it):
        """Sweep ``it`` of every chain, then the merges, then alpha0's resampling of every chain
        (the chains share nothing, so this order gives what chain after chain would). A chain's
        restaurants are stale once it has swept, and freed then: the next chain's sweep does not
        hold them beside its own. All but the type of every collocation, which the sweep writes
        over their entries for the merge, and the types' hashes (``build_tables_coded``)."""
        for c in range(self.n_chains):
            t = self._chain_tables(c)
            self._sweep(c, merge=False, code=t.col_entry)
            self._coded[c] = (t.col_entry, t.ty_hash[:t.n_types])
            self._tables[c] = t = None
        self._after_sweeps(it)

    def _after_sweeps(self, it):
        """The merges of every chain's sweep, then alpha0's resampling."""
        self._merge(range(self.n_chains))
        if self.resample_alpha0:
            for c in range(self.n_chains):
                self._resample_alpha0(c)
        self._alpha0_rows.append(self.alpha0_.tolist())

    def _set_chain_state(self, corpus, c, b):
        self.b_[c] = b
        self._rebuild(c)

    def _rebuild(self, c):
        """Restaurants and doc lists of chain c from b (Mallet's buildInitialTypeTopicCounts)."""
        corpus = self._corpus
        self._tables[c] = build_tables(corpus.term_ids, self.b_[c], self.n_topics)
        self._coded[c] = None
        build_doc_lists(corpus.doc_ptr, self.b_[c], *self._docs(c))

    def _docs(self, c):
        """The topic lists of the documents in chain c (views, changed in place by the kernels)."""
        return DocTopics(self._cap_ptr, self.dt_topic_[c], self.dt_count_[c], self.dt_nnz_[c])

    def _sweep(self, c, record=None, merge=True, code=None):
        """One sweep of chain c (all shards), then (if ``merge``) the merge: the restaurants are
        rebuilt from b. ``code``: see :func:`models.tcm.kernels.sweep`."""
        corpus, S = self._corpus, self.n_shards
        if record is None:
            record = np.zeros((0, 0))
        sweep(self._shard_doc, Text(corpus.doc_ptr, corpus.term_ids, self._split), self.b_[c],
              self._docs(c), self._chain_tables(c),
              Prior(self.alpha_, float(self.alpha0_[c]), self.p0_len_, self.max_len),
              self.sampler == "sparse", self.rng_[c, :S], record, code)
        if merge:
            self._merge([c])

    def _ray_runner(self, executor):
        """The runner of a :class:`models.common.executors.ray.RayExecutor` (imports Ray)."""
        if getattr(executor, "state", "driver") == "workers":
            if self.n_shards > 1:
                from .ray_shards import shard_runner

                return shard_runner(executor, self)
            from .ray_state import chain_runner

            return chain_runner(executor, self)
        from .ray import runner

        return runner(executor, self)

    def _merge(self, chains):
        """The restaurants of ``chains`` rebuilt from b, side by side on the numba threads (a
        rebuild is serial; it releases the GIL): from the types the sweep wrote where it did."""
        term_ids, K = self._corpus.term_ids, self.n_topics
        chains = list(chains)
        coded = {}
        for c in chains:
            coded[c], self._coded[c] = self._coded[c], None

        def build(c):
            codes = coded.pop(c)  # freed as each chain is built
            if codes is None:
                return build_tables(term_ids, self.b_[c], K)
            return build_tables_coded(term_ids, self.b_[c], K, *codes)

        n = min(numba.get_num_threads(), len(chains))
        if n <= 1:
            for c in chains:
                self._tables[c] = build(c)
            return
        with ThreadPoolExecutor(n) as pool:
            built = list(pool.map(build, chains))
        for c, t in zip(chains, built):
            self._tables[c] = t

    def _hist(self, c):
        return entry_hist(self._tables[c], self.max_len)

    def _resample_alpha0(self, c):
        self.alpha0_[c] = self._alpha0_draw(float(self.alpha0_[c]), self._hist(c), self._tables[c].n_k,
                                            self.rng_[c, self.n_shards])

    def _alpha0_draw(self, alpha0, hist, n_k, rng):
        """alpha0 resampled from a chain's restaurants: their entries' histogram (length, count,
        multiplicity) and totals; ``rng``: the chain's alpha0 stream (changed in place)."""
        h_len, h_n, h_mult = hist
        return resample_alpha0(alpha0, h_len, h_n, h_mult, n_k, self.p0_len_, ALPHA0_PRIOR_RATE,
                               ALPHA0_SLICE_STEPS, rng)

    def _log_lik(self, c):
        """Collapsed log p(w, b) per word token of chain c."""
        h_len, h_n, h_mult = self._hist(c)
        ll = log_lik_restaurants(h_len, h_n, h_mult, self._tables[c].n_k, self.p0_len_,
                                 float(self.alpha0_[c]))
        ll += log_lik_docs(*self._docs(c), self.alpha_, self.n_topics)
        return ll / max(self._corpus.n_tokens, 1)

    @property
    def alpha0_trace_(self):
        return np.array(self._alpha0_rows, dtype=np.float64).reshape(-1, self.n_chains)

    def _take_sample(self, c, it):
        t = self._tables[c]
        n_types, n_entries = int(t.n_types), int(t.n_entries)
        en_ptr = np.empty(n_types + 1, dtype=np.int64)
        en_topic = np.empty(n_entries, dtype=np.int32)
        en_count = np.empty(n_entries, dtype=np.int32)
        m = compact_tables(t, en_ptr, en_topic, en_count)
        nnz = self.dt_nnz_[c]
        dk_ptr = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
        dk_topic = np.empty(dk_ptr[-1], dtype=np.uint16)
        dk_count = np.empty(dk_ptr[-1], dtype=np.int32)
        compact_doc_lists(*self._docs(c), dk_ptr, dk_topic, dk_count)
        s = dict(chain=c, iter=it, ty_pos=t.ty_pos[:n_types].copy(),
                 ty_len=t.ty_len[:n_types].copy(),
                 en_ptr=en_ptr, en_topic=en_topic[:m].astype(np.uint16), en_count=en_count[:m].copy(),
                 dk_ptr=dk_ptr, dk_topic=dk_topic, dk_count=dk_count, n_k=t.n_k.copy(),
                 alpha0=float(self.alpha0_[c]))
        if self._keep_sample_state:
            s["b"] = self.b_[c].astype(self._b_file_dtype())
        return s

    def _b_file_dtype(self):
        """int16 where every topic id fits: half the bytes of the boundaries a checkpoint and
        its kept samples write."""
        return np.int16 if self.n_topics <= np.iinfo(np.int16).max else np.int32

    def _checkpoint_assignments(self):
        """``b_`` in :meth:`_b_file_dtype`, chain by chain (no narrowed copy of every chain)."""
        dtype = self._b_file_dtype()
        return self.b_.shape, dtype, (b.astype(dtype) for b in self.b_)

    def _finalize(self, corpus):
        """Stack the kept samples as cs = c * n_samples + s over one vocabulary of collocation types."""
        samples = self._sorted_samples()
        for name, value in stack_restaurants(samples, corpus.term_ids, self.max_len).items():
            setattr(self, name + "_", value)
        self.dk_ptr_, self.dk_topic_ = stack_ptrs([s["dk_ptr"] for s in samples],
                                                  [s["dk_topic"] for s in samples])
        self.dk_count_ = np.concatenate([s["dk_count"] for s in samples])
        self.n_k_samples_ = np.stack([s["n_k"] for s in samples]).astype(np.int64)
        self.alpha0_samples_ = np.array([s["alpha0"] for s in samples], dtype=np.float64)
        self._corpus = None

    # -- model files --------------------------------------------------------------------------

    _INFERENCE_ARRAYS = ("type_ptr", "type_terms", "ct_ptr", "ct_type", "ct_topic", "ct_count",
                         "dk_ptr", "dk_topic", "dk_count", "n_k_samples", "alpha0_samples")
    _FILE_SPEC = files.SPEC  # what a model file and a checkpoint must hold

    def _header(self):
        # alpha=None has meant 1 / K and now means 50 / K: the file says which was used
        return dict(super()._header(), alpha_used=float(self.alpha_))

    def _after_load(self, header):
        # files written before alpha_used was stored had alpha=None meaning 1 / n_topics
        self._set_priors(float(header.get("alpha_used", 1.0 / self.n_topics if self.alpha is None
                                          else self.alpha)), self.n_terms_)

    def _set_priors(self, alpha, n_terms):
        """``alpha_`` and P0's table ``p0_len_`` for a vocabulary of ``n_terms``."""
        self.alpha_ = alpha
        self.p0_len_ = p0_table(float(self.p_stop), n_terms, self.max_len)


def joint_log_lik(corpus, b, n_topics, alpha, alpha0, p_stop=0.5, max_len=8):
    """Collapsed log p(w, b) per word token of any boundary assignment (the formula behind
    ``TCM.log_lik_``). ``b``: ndarray of shape (n_tokens,), int (see ``TCM.b_``)."""
    b = np.ascontiguousarray(b, dtype=np.int32)
    t = build_tables(corpus.term_ids, b, n_topics)
    p0 = p0_table(float(p_stop), corpus.n_terms, max_len)
    h_len, h_n, h_mult = entry_hist(t, max_len)
    ll = log_lik_restaurants(h_len, h_n, h_mult, t.n_k, p0, float(alpha0))
    doc_len = np.diff(corpus.doc_ptr)
    cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(doc_len, n_topics))]).astype(np.int64)
    docs = DocTopics(cap_ptr, np.zeros(cap_ptr[-1], dtype=np.int32),
                     np.zeros(cap_ptr[-1], dtype=np.int32), np.zeros(corpus.n_docs, dtype=np.int32))
    build_doc_lists(corpus.doc_ptr, b, *docs)
    ll += log_lik_docs(*docs, float(alpha), n_topics)
    return ll / max(corpus.n_tokens, 1)
