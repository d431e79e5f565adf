"""Latent Dirichlet allocation by exact sparse collapsed Gibbs sampling, and the LDA-based
document model of Wei & Croft (2006): P_LDA(w | d) averaged over kept samples and chains.

The numerical work lives in :mod:`models._kernels.lda`; this class validates, allocates and loops.
"""
import math
import os
import warnings

import numba
import numpy as np

from . import checkpoint as ckpt
from ._kernels import lda as K_
from ._kernels.rng import make_rng_states
from .corpus import Corpus, content_hash

SAMPLERS = ("fplus",)
INITS = ("random", "sparse")
PARALLEL = ("partition", "adlda")
# Parameters that may differ between a checkpoint and the resuming estimator.
_RESUME_FREE = ("n_jobs", "callback_every", "checkpoint_every", "log_lik_every")


def _next_pow2(k):
    p = 1
    while p < k:
        p *= 2
    return p


class LDA:
    """LDA trained by collapsed Gibbs sampling with several chains, kept as a document model.

    Parameters
    ----------
    n_topics : int, default=800
        K. Wei & Croft (2006) use 800 on TREC collections.
    alpha : float or None, default=None
        Symmetric document-topic prior per topic; None means ``50 / n_topics`` (Griffiths &
        Steyvers 2004, as in Wei & Croft).
    beta : float, default=0.01
        Symmetric topic-word prior.
    n_chains : int, default=3
        Independent Markov chains, each with its own seed stream.
    n_iter : int, default=100
        Total Gibbs sweeps per chain (burn-in included).
    burn_in : int, default=50
        Sweeps before the first kept sample.
    sample_every : int, default=10
        Sweeps between kept samples (the lag L). Samples are taken after sweep ``i`` for
        ``i = burn_in + sample_every, burn_in + 2 * sample_every, ... <= n_iter``, so the defaults
        keep S = 5 samples per chain (iterations 60, 70, 80, 90, 100).
    init : {"random", "sparse"}, default="random"
        "random": every token gets a uniform topic. "sparse": the initialisation of the PAM paper
        (Li & McCallum 2006): start with a ``sparse_init_frac`` share of the documents (a seeded
        random subset per chain, initialised at random) and double the active set every
        ``sparse_init_every`` sweeps; a newly added document's tokens are first drawn from the
        conditional given the counts so far. All documents must be active by ``burn_in``.
    sparse_init_frac : float, default=1/16
    sparse_init_every : int, default=2
    optimize_alpha : bool, default=False
        Learn an asymmetric alpha per chain with Minka's fixed point (Wallach et al. 2009; as in
        Mallet, with a Gamma(1.001, 1) prior) every ``optimize_every`` sweeps.
    optimize_every : int, default=10
    n_shards : int, default=4
        Fixed document shards sampled in parallel, each with its own rng stream. Results depend
        on ``n_shards``, ``parallel`` and ``seed``, never on ``n_jobs`` (the thread count).
        ``n_shards=1`` is the exact sequential sampler.
    parallel : {"partition", "adlda"}, default="partition"
        How shards share n_kw. "adlda" (Newman et al. 2009): every shard samples a whole sweep
        against the n_kw of the previous sweep (plus its own changes) and the changes are
        merged after the sweep. "partition" (Yan et al. 2009; tomotopy's PARTITION): terms are
        also split into ``n_shards`` groups and a sweep takes ``n_shards`` sub-steps in which
        shard s samples only terms of group (s + j) mod n_shards; n_kw is then always exact and
        only n_k is merged after each sub-step. On 20 Newsgroups, K=100, 4 shards, "adlda"
        reaches after 20 sweeps the log-likelihood "partition" (and the sequential sampler)
        has after about 14, hence the default; "partition" also needs no copies of n_kw.
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads (``numba.set_num_threads``; restored afterwards). None: all numba threads.
    sampler : {"fplus"}, default="fplus"
        "fplus": SparseLDA bucket decomposition in word-by-word order with an F+ tree for the
        dense bucket (exact).
    log_lik_every : int, default=10
        Record the log-likelihood per token of every chain every this many sweeps (and at the end).
    callback_every : int, default=1
        ``callback(model, iteration, n_iter)`` runs after every this many sweeps.
    checkpoint_every : int, default=10
        With ``fit(..., checkpoint=path)``, write the checkpoint every this many sweeps.

    Attributes
    ----------
    z_ : ndarray of shape (n_chains, n_tokens), int32
        Current topic of every token (document order) in every chain.
    n_kw_ : ndarray of shape (n_chains, n_terms, n_topics), int32
        Current topic-word counts (term-major).
    n_k_ : ndarray of shape (n_chains, n_topics), int64
    alpha_ : ndarray of shape (n_chains, n_topics), float64
        Current (possibly optimised) alpha of every chain.
    log_lik_ : ndarray of shape (n_records, n_chains), float64
        Collapsed log p(w, z) per token; ``log_lik_iter_`` gives the sweep of every row.
    sample_iter_ : ndarray of shape (n_samples,), int64
    n_iter_ : int
        Sweeps done.
    fingerprint_ : str
        Fingerprint of the training corpus.
    """

    def __init__(self, n_topics=800, alpha=None, beta=0.01, n_chains=3, n_iter=100, burn_in=50,
                 sample_every=10, init="random", sparse_init_frac=1 / 16, sparse_init_every=2,
                 optimize_alpha=False, optimize_every=10, n_shards=4, parallel="partition",
                 seed=0, n_jobs=None, sampler="fplus", log_lik_every=10, callback_every=1,
                 checkpoint_every=10):
        self.n_topics = n_topics
        self.alpha = alpha
        self.beta = beta
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.sample_every = sample_every
        self.init = init
        self.sparse_init_frac = sparse_init_frac
        self.sparse_init_every = sparse_init_every
        self.optimize_alpha = optimize_alpha
        self.optimize_every = optimize_every
        self.n_shards = n_shards
        self.parallel = parallel
        self.seed = seed
        self.n_jobs = n_jobs
        self.sampler = sampler
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every

    # -- parameters ---------------------------------------------------------------------------

    def get_params(self):
        return {name: getattr(self, name) for name in (
            "n_topics", "alpha", "beta", "n_chains", "n_iter", "burn_in", "sample_every", "init",
            "sparse_init_frac", "sparse_init_every", "optimize_alpha", "optimize_every",
            "n_shards", "parallel", "seed", "n_jobs", "sampler", "log_lik_every", "callback_every",
            "checkpoint_every")}

    def _check_params(self, corpus):
        def pos_int(name, minimum=1):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")

        for name in ("n_topics", "n_chains", "n_iter", "sample_every", "sparse_init_every",
                     "optimize_every", "n_shards", "log_lik_every", "callback_every",
                     "checkpoint_every"):
            pos_int(name)
        pos_int("burn_in", 0)
        pos_int("seed", 0)
        if self.n_topics > 65535:
            raise ValueError(f"n_topics must be <= 65535, got {self.n_topics!r}")
        if self.alpha is not None and not (float(self.alpha) > 0):
            raise ValueError(f"alpha must be > 0 or None (50 / n_topics), got {self.alpha!r}")
        if not float(self.beta) > 0:
            raise ValueError(f"beta must be > 0, got {self.beta!r}")
        if self.burn_in >= self.n_iter:
            raise ValueError(
                f"burn_in ({self.burn_in!r}) must be < n_iter ({self.n_iter!r}) so that at least one "
                f"sample is kept; e.g. burn_in={self.n_iter - 1}, sample_every=1")
        if self.burn_in + self.sample_every > self.n_iter:
            raise ValueError(
                f"no sample is kept: the first is after sweep burn_in + sample_every = "
                f"{self.burn_in + self.sample_every} > n_iter = {self.n_iter}; lower sample_every")
        if self.init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {self.init!r}")
        if self.parallel not in PARALLEL:
            raise ValueError(f"parallel must be one of {PARALLEL}, got {self.parallel!r}")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        if not (0 < float(self.sparse_init_frac) <= 1):
            raise ValueError(f"sparse_init_frac must be in (0, 1], got {self.sparse_init_frac!r}")
        if self.n_jobs is not None:
            pos_int("n_jobs")
        if not isinstance(corpus, Corpus):
            raise TypeError(f"corpus must be a models.corpus.Corpus, got {type(corpus).__name__}")
        if corpus.n_tokens == 0:
            raise ValueError("corpus has no tokens")
        if self.init == "sparse":
            full = self._sparse_full_iter(corpus.n_docs)
            if full > self.burn_in:
                raise ValueError(
                    f"init='sparse' activates all {corpus.n_docs} documents only at sweep {full}, after "
                    f"burn_in={self.burn_in}; raise burn_in or sparse_init_frac, or lower sparse_init_every")

    def _alpha0(self):
        return 50.0 / self.n_topics if self.alpha is None else float(self.alpha)

    def _sparse_n_active(self, it, n_docs):
        """Documents active during sweep ``it`` (0-based) under the sparse initialisation."""
        if self.init != "sparse":
            return n_docs
        start = max(1, int(math.ceil(self.sparse_init_frac * n_docs)))
        return min(n_docs, start << min(60, it // self.sparse_init_every))

    def _sparse_full_iter(self, n_docs):
        it = 0
        while self._sparse_n_active(it, n_docs) < n_docs:
            it += self.sparse_init_every
        return it

    def _sample_iters(self):
        return np.arange(self.burn_in + self.sample_every, self.n_iter + 1, self.sample_every,
                         dtype=np.int64)

    # -- layout -------------------------------------------------------------------------------

    def _build_layout(self, corpus):
        """Shards (contiguous doc ranges balanced by tokens) and the word-major sweep order."""
        D, N, V = corpus.n_docs, corpus.n_tokens, corpus.n_terms
        doc_ptr = corpus.doc_ptr
        S = self.n_shards
        # Shard s holds docs shard_doc[s]:shard_doc[s+1]; cut at token quantiles.
        cuts = np.searchsorted(doc_ptr, np.arange(1, S) * (N / S), side="left")
        shard_doc = np.concatenate([[0], np.minimum(cuts, D), [D]]).astype(np.int64)
        shard_doc = np.maximum.accumulate(shard_doc)
        doc_len = np.diff(doc_ptr)
        tok_doc = np.repeat(np.arange(D, dtype=np.int32), doc_len)
        tok_shard = np.searchsorted(shard_doc, tok_doc, side="right") - 1
        # Term groups for the partition scheme: S groups of about equal token counts (greedy,
        # most frequent term first, ties to the lowest group), so the blocks of a sub-step match.
        cf = np.bincount(corpus.term_ids, minlength=V)
        group = np.zeros(V, dtype=np.int64)
        if S > 1:
            K_._greedy_groups(np.argsort(-cf, kind="stable"), cf, S, group)
        # sweep order: shard, term group, term, then position (stable sort keeps doc order)
        w_order = np.lexsort((np.arange(V), group))  # terms by (group, id)
        w_rank = np.empty(V, dtype=np.int64)
        w_rank[w_order] = np.arange(V)
        key = tok_shard.astype(np.int64) * V + w_rank[corpus.term_ids]
        ord_pos = np.empty(N, dtype=np.int64)
        K_._counting_sort(key, S * V, ord_pos)
        key_sorted = key[ord_pos]
        starts = np.flatnonzero(np.concatenate([[True], key_sorted[1:] != key_sorted[:-1]]))
        run_ptr = np.concatenate([starts, [N]]).astype(np.int64)
        run_key = key_sorted[starts]
        run_word = w_order[run_key % V].astype(np.int32)
        run_block = (run_key // V) * S + group[run_word]
        block_run_ptr = np.searchsorted(
            run_block, np.arange(S)[:, None] * S + np.arange(S + 1)[None, :], side="left"
        ).astype(np.int64)
        shard_run_ptr = np.concatenate([block_run_ptr[:, 0], [len(run_word)]]).astype(np.int64)
        cap = np.minimum(doc_len, self.n_topics)
        cap_ptr = np.concatenate([[0], np.cumsum(cap)]).astype(np.int64)
        self._lay = dict(
            ord_pos=ord_pos.astype(np.int64), ord_doc=tok_doc[ord_pos], run_ptr=run_ptr,
            run_word=run_word, shard_run_ptr=shard_run_ptr, block_run_ptr=block_run_ptr,
            cap_ptr=cap_ptr, doc_len=doc_len,
            shard_doc=shard_doc)

    def _alloc_chain_state(self, corpus):
        C, Kt, V, N, D = self.n_chains, self.n_topics, corpus.n_terms, corpus.n_tokens, corpus.n_docs
        cap = int(self._lay["cap_ptr"][-1])
        self.z_ord_ = np.full((C, N), -1, dtype=np.int32)
        self.n_kw_ = np.zeros((C, V, Kt), dtype=np.int32)
        self.n_k_ = np.zeros((C, Kt), dtype=np.int64)
        self.dt_topic_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_count_ = np.zeros((C, cap), dtype=np.int32)
        self.dt_nnz_ = np.zeros((C, D), dtype=np.int32)
        S = self.n_shards
        P = _next_pow2(Kt)
        self._local_n_k = np.zeros((S, Kt), dtype=np.int64)
        self._rows = np.zeros((S, Kt), dtype=np.int32)
        # A run of n tokens changes at most min(K, 2 n) entries of its term's row.
        run_len = np.diff(self._lay["run_ptr"]) if self.parallel == "adlda" else np.zeros(0, np.int64)
        self._log_ptr = np.concatenate([[0], np.cumsum(np.minimum(2 * run_len, Kt))]).astype(np.int64)
        self._log_topic = np.zeros(self._log_ptr[-1], dtype=np.uint16)
        self._log_delta = np.zeros(self._log_ptr[-1], dtype=np.int32)
        self._log_len = np.zeros(len(run_len), dtype=np.int64)
        self._trees = np.zeros((S, 2 * P))
        self._cs = np.zeros((S, Kt))
        self._pbufs = np.zeros((S, Kt))
        self._active = np.ones((C, D), dtype=np.uint8)
        self._doc_perm = [np.random.default_rng([self.seed, c, 7]).permutation(D) for c in range(C)]

    def _set_active(self, it, n_docs):
        n = self._sparse_n_active(it, n_docs)
        for c in range(self.n_chains):
            if n >= n_docs:
                self._active[c] = 1
            else:
                self._active[c] = 0
                self._active[c, self._doc_perm[c][:n]] = 1

    def _rebuild_counts(self, corpus, c):
        """n_kw, n_k and doc lists of chain c from z (Mallet's buildInitialTypeTopicCounts)."""
        z_doc = self._z_doc(c)
        lay = self._lay
        K_._build_n_kw_runs(lay["run_word"], lay["run_ptr"], self.z_ord_[c], self.n_kw_[c],
                            self.n_k_[c])
        K_._build_doc_lists(corpus.doc_ptr, z_doc, self._lay["cap_ptr"], self.dt_topic_[c],
                            self.dt_count_[c], self.dt_nnz_[c])

    def _z_doc(self, c, dtype=np.int32):
        out = np.empty(self.z_ord_.shape[1], dtype=np.int32)
        K_._z_to_doc_order(self.z_ord_[c], self._lay["ord_pos"], out)
        return out if dtype == np.int32 else out.astype(dtype)

    @property
    def z_(self):
        if not hasattr(self, "z_ord_"):
            if hasattr(self, "_z_full"):  # loaded with save(full=True)
                return self._z_full
            raise AttributeError("z_ is only available after fit or for models saved with full=True")
        return np.stack([self._z_doc(c) for c in range(self.n_chains)])

    # -- training -----------------------------------------------------------------------------

    def fit(self, corpus, callback=None, checkpoint=None):
        """Train all chains on ``corpus``.

        Parameters
        ----------
        corpus : Corpus
        callback : callable or None
            ``callback(model, iteration, n_iter)`` after every ``callback_every`` sweeps (and after
            the last); progress bars are callbacks (see :class:`models.progress.TqdmCallback`).
        checkpoint : str or PathLike or None
            Checkpoint file. If it exists, training resumes from it (it must come from the same
            corpus and parameters) and ends with the same model as an uninterrupted run. It is
            rewritten every ``checkpoint_every`` sweeps and after the last one.

        Returns
        -------
        self
        """
        self._check_params(corpus)
        prev_threads = numba.get_num_threads()
        if self.n_jobs is not None:
            numba.set_num_threads(min(self.n_jobs, numba.config.NUMBA_NUM_THREADS))
        try:
            self._fit(corpus, callback, checkpoint)
        finally:
            numba.set_num_threads(prev_threads)
        return self

    def _fit(self, corpus, callback, checkpoint):
        C, Kt, D, V = self.n_chains, self.n_topics, corpus.n_docs, corpus.n_terms
        self.fingerprint_ = corpus.fingerprint
        self.corpus_hash_ = content_hash(corpus.doc_ptr, corpus.term_ids, corpus.n_terms)
        self.n_terms_ = V
        self._build_layout(corpus)
        self._alloc_chain_state(corpus)
        self._samples = []  # per kept (chain, sample), in order of iteration then chain
        self._keep_z_samples = checkpoint is not None
        sample_iters = set(self._sample_iters().tolist())
        if checkpoint is not None and os.path.exists(checkpoint):
            start = self._resume(corpus, checkpoint)
        else:
            self.rng_ = make_rng_states(self.seed, C, self.n_shards)
            self.alpha_ = np.full((C, Kt), self._alpha0())
            self._set_active(0, D)
            lay = self._lay
            for c in range(C):
                K_._init_random(lay["shard_run_ptr"], lay["run_ptr"], lay["ord_doc"],
                                self._active[c], self.z_ord_[c], Kt, self.rng_[c])
                self._rebuild_counts(corpus, c)
            self._log_lik_rows, self._log_lik_iters = [], []
            start = 0
        lay = self._lay
        for it in range(start, self.n_iter):
            self._set_active(it, D)
            for c in range(C):
                self._sweep(c)
            done = it + 1
            self.n_iter_ = done
            if self.optimize_alpha and done % self.optimize_every == 0:
                max_len = int(lay["doc_len"].max())
                for c in range(C):
                    K_._optimize_alpha(self.alpha_[c], lay["cap_ptr"], self.dt_topic_[c],
                                       self.dt_count_[c], self.dt_nnz_[c], self._active[c],
                                       max_len, 200, 1.001, 1.0)
            if done % self.log_lik_every == 0 or done == self.n_iter:
                self._log_lik_rows.append([self._log_lik(c) for c in range(C)])
                self._log_lik_iters.append(done)
            if done in sample_iters:
                for c in range(C):
                    self._samples.append(self._take_sample(c, done))
            if checkpoint is not None and (done % self.checkpoint_every == 0 or done == self.n_iter):
                self._write_checkpoint(checkpoint)
            if callback is not None and (done % self.callback_every == 0 or done == self.n_iter):
                callback(self, done, self.n_iter)
        self._finalize(corpus)

    def _sweep(self, c):
        """One sweep of chain c (all shards)."""
        lay = self._lay
        if self.parallel == "partition":
            K_._sweep_lda_partition(
                lay["block_run_ptr"], lay["run_word"], lay["run_ptr"], lay["ord_doc"],
                self.z_ord_[c], self.n_kw_[c], self.n_k_[c], lay["cap_ptr"], self.dt_topic_[c],
                self.dt_count_[c], self.dt_nnz_[c], self._active[c], self.alpha_[c],
                float(self.beta), self._local_n_k, self._trees, self._cs, self._pbufs,
                self._rows, self.rng_[c])
            return
        K_._sweep_lda(lay["shard_run_ptr"], lay["run_word"], lay["run_ptr"], lay["ord_doc"],
                      self.z_ord_[c], self.n_kw_[c], self.n_k_[c], lay["cap_ptr"],
                      self.dt_topic_[c], self.dt_count_[c], self.dt_nnz_[c],
                      self._active[c], self.alpha_[c], float(self.beta), self._local_n_k,
                      self._trees, self._cs, self._pbufs, self._rows, self._log_ptr,
                      self._log_topic, self._log_delta, self._log_len, self.rng_[c])

    def _log_lik(self, c):
        active = self._active[c]
        n = int(self.n_k_[c].sum())
        ll = K_._log_lik_words(self.n_kw_[c], self.n_k_[c], float(self.beta))
        ll += K_._log_lik_docs(self._lay["cap_ptr"], self.dt_topic_[c], self.dt_count_[c],
                               self.dt_nnz_[c], active, self.alpha_[c])
        return ll / max(n, 1)

    @property
    def log_lik_(self):
        return np.array(self._log_lik_rows, dtype=np.float64).reshape(-1, self.n_chains)

    @property
    def log_lik_iter_(self):
        return np.array(self._log_lik_iters, dtype=np.int64)

    def _take_sample(self, c, it):
        """Sparse copies of chain c's counts: topic-major doc postings and term-major n_kw."""
        lay = self._lay
        Kt = self.n_topics
        nnz = int(self.dt_nnz_[c].sum())
        kd_ptr = np.zeros(Kt + 1, dtype=np.int64)
        kd_doc = np.empty(nnz, dtype=np.int32)
        kd_count = np.empty(nnz, dtype=np.int32)
        K_._doc_lists_to_postings(lay["cap_ptr"], self.dt_topic_[c], self.dt_count_[c],
                                  self.dt_nnz_[c], Kt, kd_ptr, kd_doc, kd_count)
        row = np.empty(self.n_kw_.shape[1], dtype=np.int64)
        K_._row_nnz(self.n_kw_[c], row)
        tw_ptr = np.concatenate([[0], np.cumsum(row)])
        tw_topic = np.empty(tw_ptr[-1], dtype=np.uint16)
        tw_count = np.empty(tw_ptr[-1], dtype=np.int32)
        K_._compact_n_kw(self.n_kw_[c], tw_ptr, tw_topic, tw_count)
        s = dict(chain=c, iter=it, kd_ptr=kd_ptr, kd_doc=kd_doc, kd_count=kd_count,
                 tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count,
                 n_k=self.n_k_[c].copy(), alpha=self.alpha_[c].copy())
        if self._keep_z_samples:
            s["z"] = self._z_doc(c).astype(np.uint16)
        return s

    def _finalize(self, corpus):
        """Stack the kept samples as (chain, sample) = cs = c * n_samples + s."""
        samples = sorted(self._samples, key=lambda s: (s["chain"], s["iter"]))
        C = self.n_chains
        S = len(samples) // C
        self.n_samples_ = S
        self.sample_iter_ = np.array([s["iter"] for s in samples[:S]], dtype=np.int64)
        self.doc_len_ = self._lay["doc_len"].astype(np.int64)
        self._set_inference_arrays(
            kd_ptrs=[s["kd_ptr"] for s in samples], kd_docs=[s["kd_doc"] for s in samples],
            kd_counts=[s["kd_count"] for s in samples], tw_ptrs=[s["tw_ptr"] for s in samples],
            tw_topics=[s["tw_topic"] for s in samples], tw_counts=[s["tw_count"] for s in samples],
            n_k=np.stack([s["n_k"] for s in samples]), alpha=np.stack([s["alpha"] for s in samples]))
        if not self._keep_z_samples:
            self._samples = []

    def _set_inference_arrays(self, kd_ptrs, kd_docs, kd_counts, tw_ptrs, tw_topics, tw_counts,
                              n_k, alpha):
        def stack(ptrs, parts):
            off = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
            return (np.stack([p + o for p, o in zip(ptrs, off[:-1])]).astype(np.int64),
                    np.concatenate(parts))

        self.kd_ptr_, self.kd_doc_ = stack(kd_ptrs, kd_docs)
        self.kd_count_ = np.concatenate(kd_counts)
        self.tw_ptr_, self.tw_topic_ = stack(tw_ptrs, tw_topics)
        self.tw_count_ = np.concatenate(tw_counts)
        self.n_k_samples_ = n_k.astype(np.int64)
        self.alpha_samples_ = alpha.astype(np.float64)
        self._doc_consts = None

    # -- checkpoints --------------------------------------------------------------------------

    def _write_checkpoint(self, path):
        header = dict(model=type(self).__name__, params=self.get_params(),
                      fingerprint=self.fingerprint_, corpus_hash=self.corpus_hash_,
                      iteration=self.n_iter_, log_lik=self._log_lik_rows,
                      log_lik_iter=self._log_lik_iters,
                      sample_chain=[s["chain"] for s in self._samples],
                      sample_iter=[s["iter"] for s in self._samples])
        arrays = dict(z=self.z_, rng=self.rng_, alpha=self.alpha_)
        if self._samples:
            arrays["sample_z"] = np.stack([s["z"] for s in self._samples])
            arrays["sample_alpha"] = np.stack([s["alpha"] for s in self._samples])
        ckpt.write_model_file(path, header, arrays, kind=ckpt.CHECKPOINT_FORMAT)

    def _resume(self, corpus, path):
        f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
        h, a = f.header, f.arrays
        ckpt.check_fingerprint(path, h, corpus.fingerprint, self.corpus_hash_)
        mine, theirs = self.get_params(), h["params"]
        diff = {k: (theirs.get(k), v) for k, v in mine.items()
                if k not in _RESUME_FREE and theirs.get(k) != v}
        if diff:
            listing = ", ".join(f"{k}: checkpoint {t!r} vs now {m!r}" for k, (t, m) in diff.items())
            raise ValueError(f"{path}: checkpoint was written with other parameters ({listing}); "
                             f"use the same parameters or delete the checkpoint to start afresh")
        C = self.n_chains
        self.rng_ = np.ascontiguousarray(a["rng"], dtype=np.uint64)
        self.alpha_ = np.ascontiguousarray(a["alpha"], dtype=np.float64)
        it = int(h["iteration"])
        self._set_active(max(it - 1, 0), corpus.n_docs)
        for c in range(C):
            K_._z_from_doc_order(np.ascontiguousarray(a["z"][c], dtype=np.int32),
                                 self._lay["ord_pos"], self.z_ord_[c])
            self._rebuild_counts(corpus, c)
        self._log_lik_rows = [list(r) for r in h["log_lik"]]
        self._log_lik_iters = list(h["log_lik_iter"])
        # Rebuild every kept sample from its assignments; the current state is swapped out and back.
        z_now = self.z_ord_.copy()
        for j, (c, sit) in enumerate(zip(h["sample_chain"], h["sample_iter"])):
            K_._z_from_doc_order(a["sample_z"][j].astype(np.int32), self._lay["ord_pos"],
                                 self.z_ord_[c])
            self._rebuild_counts(corpus, c)
            saved_alpha = self.alpha_[c].copy()
            self.alpha_[c] = a["sample_alpha"][j]
            self._samples.append(self._take_sample(c, int(sit)))
            self.alpha_[c] = saved_alpha
        self.z_ord_[:] = z_now
        for c in range(C):
            self._rebuild_counts(corpus, c)
        self.n_iter_ = it
        return it

    # -- document model -----------------------------------------------------------------------

    def _check_fitted(self):
        if not hasattr(self, "kd_ptr_"):
            raise RuntimeError("this LDA is not fitted; call fit(corpus) or LDA.load(path) first")

    def _per_sample(self, term_ids):
        self._check_fitted()
        term_ids = np.asarray(term_ids, dtype=np.int64).ravel()
        V = self.tw_ptr_.shape[1] - 1
        if term_ids.size and (term_ids.min() < 0 or term_ids.max() >= V):
            bad = term_ids[(term_ids < 0) | (term_ids >= V)][0]
            raise ValueError(f"term id {int(bad)!r} is out of range for a model with n_terms = {V}")
        n_cs, D = self.kd_ptr_.shape[0], len(self.doc_len_)
        if getattr(self, "_doc_consts", None) is None:
            inv_len = np.empty((n_cs, D))
            smooth = np.empty((n_cs, D))
            K_._doc_constants(self.kd_ptr_, self.kd_doc_, self.kd_count_, self.n_k_samples_,
                              self.alpha_samples_, float(self.beta), V, self.doc_len_, inv_len,
                              smooth)
            self._doc_consts = (inv_len, smooth)
        inv_len, smooth = self._doc_consts
        out = np.empty((n_cs, D, len(term_ids)))
        n_blocks = max(1, min(D, 8 * numba.get_num_threads()))
        K_._score_p_w_d_sparse(self.kd_ptr_, self.kd_doc_, self.kd_count_, self.tw_ptr_,
                               self.tw_topic_, self.tw_count_, self.n_k_samples_,
                               self.alpha_samples_, float(self.beta), inv_len, smooth, term_ids,
                               n_blocks, out)
        return out

    def p_w_d(self, term_ids):
        """P_LDA(w | d) for every document, averaged over all kept samples of all chains.

        ``P_LDA(w | d) = sum_k (n_dk + alpha_k) / (n_d + sum(alpha)) * (n_kw + beta) / (n_k + V beta)``
        (Wei & Croft 2006, eq. 3), per sample. A term costs the length of the postings of the
        topics it occurs in (see ``_score_p_w_d_sparse``); the first call also computes two
        (n_samples, n_docs) tables of per-document constants.

        Parameters
        ----------
        term_ids : array-like of int, shape (n_query_terms,)

        Returns
        -------
        ndarray of shape (n_docs, n_query_terms), float64
        """
        per = self._per_sample(term_ids)
        out = np.empty(per.shape[1:])
        K_._mean_over_samples(per, out)
        return out

    def p_w_d_per_sample(self, term_ids):
        """P_LDA(w | d) of every kept sample: ndarray of shape (n_chains, n_samples, n_docs, n_terms)."""
        per = self._per_sample(term_ids)
        return per.reshape(self.n_chains, per.shape[0] // self.n_chains, *per.shape[1:])

    def _cs_of_chain(self, chain):
        if not 0 <= chain < self.n_chains:
            raise ValueError(f"chain must be in [0, {self.n_chains}), got {chain!r}")
        S = self.kd_ptr_.shape[0] // self.n_chains
        return range(chain * S, (chain + 1) * S)

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable topics of ``doc``: theta averaged over the kept samples of ``chain``
        (topics are not aligned across chains). Returns (topic ids int64, probabilities float64)."""
        self._check_fitted()
        D = len(self.doc_len_)
        if not 0 <= doc < D:
            raise ValueError(f"doc must be in [0, {D}), got {doc!r}")
        theta = np.zeros(self.n_topics)
        css = self._cs_of_chain(chain)
        for cs in css:
            a = self.alpha_samples_[cs]
            t = a.copy()
            for k in range(self.n_topics):  # binary search doc in every topic's postings
                lo, hi = self.kd_ptr_[cs, k], self.kd_ptr_[cs, k + 1]
                j = lo + np.searchsorted(self.kd_doc_[lo:hi], doc)
                if j < hi and self.kd_doc_[j] == doc:
                    t[k] += self.kd_count_[j]
            theta += t / (self.doc_len_[doc] + a.sum())
        theta /= len(css)
        ids = np.argsort(-theta, kind="stable")[:top]
        return ids.astype(np.int64), theta[ids]

    def topic_words(self, topic, top=10, chain=0):
        """Most probable terms of ``topic``: phi averaged over the kept samples of ``chain``.
        Returns (term ids int64, probabilities float64)."""
        self._check_fitted()
        if not 0 <= topic < self.n_topics:
            raise ValueError(f"topic must be in [0, {self.n_topics}), got {topic!r}")
        V = self.tw_ptr_.shape[1] - 1
        b = float(self.beta)
        phi = np.zeros(V)
        css = self._cs_of_chain(chain)
        for cs in css:
            cnt = np.zeros(V)
            lo, hi = self.tw_ptr_[cs, 0], self.tw_ptr_[cs, V]
            sel = np.flatnonzero(self.tw_topic_[lo:hi] == topic) + lo
            words = np.searchsorted(self.tw_ptr_[cs], sel, side="right") - 1
            cnt[words] = self.tw_count_[sel]
            phi += (cnt + b) / (self.n_k_samples_[cs, topic] + V * b)
        phi /= len(css)
        ids = np.argsort(-phi, kind="stable")[:top]
        return ids.astype(np.int64), phi[ids]

    # -- model files --------------------------------------------------------------------------

    def save(self, path, full=False):
        """Write the model (atomically) with its parameters and corpus fingerprint.

        ``full=False`` keeps what inference needs: the kept samples' sparse doc-topic (topic-major
        postings) and topic-word counts, n_k and alpha. ``full=True`` adds the chains' current ``z_``,
        ``alpha_`` and rng state.
        """
        self._check_fitted()
        header = dict(model=type(self).__name__, params=self.get_params(),
                      fingerprint=self.fingerprint_, corpus_hash=self.corpus_hash_,
                      n_iter=int(self.n_iter_), n_samples=int(self.n_samples_),
                      sample_iter=self.sample_iter_.tolist(), log_lik=self._log_lik_rows,
                      log_lik_iter=self._log_lik_iters, n_terms=int(self.tw_ptr_.shape[1] - 1))
        arrays = dict(kd_ptr=self.kd_ptr_, kd_doc=self.kd_doc_, kd_count=self.kd_count_,
                      tw_ptr=self.tw_ptr_, tw_topic=self.tw_topic_, tw_count=self.tw_count_,
                      n_k_samples=self.n_k_samples_, alpha_samples=self.alpha_samples_,
                      doc_len=self.doc_len_)
        if full:
            arrays.update(z=self.z_, alpha=self.alpha_, rng=self.rng_)
        ckpt.write_model_file(path, header, arrays)

    @classmethod
    def load(cls, path, fingerprint=None):
        """Read a model written by :meth:`save`.

        Parameters
        ----------
        fingerprint : str or None
            Fingerprint of the corpus/index the model will be used with; a model trained on
            another one is refused with a ValueError naming both fingerprints.
        """
        f = ckpt.read_model_file(path)
        h, a = f.header, f.arrays
        if h.get("model") != cls.__name__:
            raise ValueError(f"{os.fspath(path)}: holds a {h.get('model')!r} model, not {cls.__name__}")
        ckpt.check_fingerprint(path, h, fingerprint)
        model = cls(**h["params"])
        model.fingerprint_ = h["fingerprint"]
        model.corpus_hash_ = h.get("corpus_hash")
        model.n_iter_ = h["n_iter"]
        model.n_samples_ = h["n_samples"]
        model.sample_iter_ = np.array(h["sample_iter"], dtype=np.int64)
        model._log_lik_rows = h["log_lik"]
        model._log_lik_iters = h["log_lik_iter"]
        for name in ("kd_ptr", "kd_doc", "kd_count", "tw_ptr", "tw_topic", "tw_count",
                     "n_k_samples", "alpha_samples", "doc_len"):
            setattr(model, name + "_", a[name])
        if "z" in a:
            model._z_full = a["z"]
            model.alpha_ = a["alpha"]
            model.rng_ = a["rng"]
        return model


def joint_log_lik(corpus, z, n_topics, alpha, beta):
    """Collapsed log p(w, z) per token (Griffiths & Steyvers 2004, eq. 2-3) of any assignment.

    Used to score another sampler's state (e.g. tomotopy's) with exactly the formula behind
    ``LDA.log_lik_``.

    Parameters
    ----------
    corpus : Corpus
    z : ndarray of shape (n_tokens,), int
        Topic of every token in document order (-1: unassigned, ignored).
    n_topics : int
    alpha : float or ndarray of shape (n_topics,)
    beta : float

    Returns
    -------
    float
    """
    z = np.ascontiguousarray(z, dtype=np.int32)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_topics,)).copy()
    n_kw = np.zeros((corpus.n_terms, n_topics), dtype=np.int32)
    n_k = np.zeros(n_topics, dtype=np.int64)
    K_._build_n_kw(corpus.term_ids, z, n_kw, n_k)
    doc_len = np.diff(corpus.doc_ptr)
    cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(doc_len, n_topics))]).astype(np.int64)
    dt_topic = np.zeros(cap_ptr[-1], dtype=np.int32)
    dt_count = np.zeros(cap_ptr[-1], dtype=np.int32)
    dt_nnz = np.zeros(corpus.n_docs, dtype=np.int32)
    K_._build_doc_lists(corpus.doc_ptr, z, cap_ptr, dt_topic, dt_count, dt_nnz)
    active = np.ones(corpus.n_docs, dtype=np.uint8)
    ll = K_._log_lik_words(n_kw, n_k, float(beta))
    ll += K_._log_lik_docs(cap_ptr, dt_topic, dt_count, dt_nnz, active, alpha)
    return ll / max(int(n_k.sum()), 1)
