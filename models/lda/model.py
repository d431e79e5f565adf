"""Latent Dirichlet allocation by exact sparse collapsed Gibbs sampling, and the LDA-based
document model of Wei & Croft (2006): P_LDA(w | d) averaged over kept samples and chains.

The numerical work lives in :mod:`models.lda.doc_kernels` (the sweep) and
:mod:`models.lda.kernels` (the rest), the fit loop, checkpoints and model files in
:mod:`models.common.gibbs`; this class validates, allocates and sweeps.
"""
import numpy as np

from . import kernels as K_
from . import doc_kernels as lda_doc
from ..common.kernels.dirichlet import topic_word_log_lik
from ..common.kernels.rng import make_rng_states
from . import files
from ..common.gibbs import SweepOrderModel, rows_csr, shard_docs, stack_ptrs
from .foldin import LDAFoldInMixin
from .infer import LDADocumentModel
from .layout import cap_ptrs, count_shift, sweep_order, term_groups, term_packing

INITS = ("online", "random", "sparse")


def _next_pow2(k):
    p = 1
    while p < k:
        p *= 2
    return p


class LDA(LDAFoldInMixin, LDADocumentModel, SweepOrderModel):
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
    burn_in : int or None, default=None
        Sweeps before the first kept sample; None: ``n_iter // 2`` (samples over the last half).
    sample_every : int or None, default=None
        Sweeps between kept samples (the lag L); None: ``max(1, (n_iter - burn_in) // 5)``.
        Samples are taken after sweep ``i`` for ``i = burn_in + sample_every, burn_in + 2 *
        sample_every, ... <= n_iter``, so with 100 sweeps the defaults keep S = 5 samples per
        chain (iterations 60, 70, 80, 90, 100) and with 40 sweeps iterations 24, 28, ..., 40.
    init : {"online", "random", "sparse"}, default="online"
        "online": one sequential pass in document order draws every token from the conditional
        given the tokens drawn before it (the document-order kernel on one thread; in the
        parallel blocks, shards would give unrelated documents the same topics, and each block
        sees only part of a document). Its topics are concentrated from the start, so the chains
        start nearer the posterior than from "random", and the first sweeps are shorter. "random":
        every token gets a uniform topic. "sparse": the initialisation of the PAM paper
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
        S: documents are split into S fixed shards and terms into S groups, and a sweep takes S
        sub-steps in which shard s samples its tokens of term group (s + j) mod S, in parallel
        (the partition scheme of Yan et al. 2009, tomotopy's PARTITION). n_kw is always exact;
        only n_k is merged after each sub-step. Results depend on ``n_shards`` and ``seed``,
        never on ``n_jobs`` (the thread count). ``n_shards=1`` is the sequential sampler.
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads (``numba.set_num_threads``; restored afterwards). None: all numba threads.
    log_lik_every : int, default=10
        Record the log-likelihood per token of every chain every this many sweeps (and at the end).
    callback_every : int, default=1
        ``callback(model, iteration, n_iter)`` runs after every this many sweeps (where a
        stop request, the first Ctrl-C of ``topicir train``, takes effect).
    checkpoint_every : int, default=10
        With ``fit(..., checkpoint=path)``, write the checkpoint every this many sweeps.
    executor : str, default="local"
        Where the sweeps run: "local" (this process, ``n_jobs`` threads), "ray" (Ray workers
        that own the shards; ``RAY_ADDRESS`` or a local Ray cluster), "ray:ADDRESS" or
        "ray://HOST:PORT" (that Ray cluster). Same seed and ``n_shards``: the same model
        whatever the executor and the number of threads or workers. Not written to model
        files; a checkpoint resumes under any executor. Needs ``pip install topicir[ray]``.

    Attributes
    ----------
    z_ : ndarray of shape (n_chains, n_tokens), int32
        Current topic of every token (document order) in every chain.
    n_kw_ : ndarray of shape (n_chains, n_terms, n_topics), int32
        Current topic-word counts (term-major); rebuilt from the term lists when read after a
        sweep.
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

    kind = "lda"
    quick_params = dict(n_topics=4, n_chains=2, n_iter=8, burn_in=4, sample_every=2, n_shards=2, seed=3)

    # Retired when the sampler went to document order: "parallel" chose between the partition
    # scheme and AD-LDA (which would need a private copy of every term list per shard),
    # "sampler" between visiting orders (word by word has the longer sparse bucket, see
    # models.lda.doc_kernels).
    _RETIRED_PARAMS = ("parallel", "sampler")

    def __init__(self, *, n_topics=800, alpha=None, beta=0.01, n_chains=3, n_iter=100, burn_in=None,
                 sample_every=None, init="online", sparse_init_frac=1 / 16, sparse_init_every=2,
                 optimize_alpha=False, optimize_every=10, n_shards=4, seed=0, n_jobs=None,
                 log_lik_every=10, callback_every=1, checkpoint_every=10, executor="local"):
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
        self.seed = seed
        self.n_jobs = n_jobs
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every
        self.executor = executor

    # -- parameters ---------------------------------------------------------------------------

    def _check_params(self, corpus):
        self._check_shared_params("n_topics", "sparse_init_every", "optimize_every")
        self._check_uint16("n_topics")
        self._check_priors()  # alpha None: 50 / n_topics
        self._check_choice("init", INITS)
        self._check_corpus(corpus)

    def _alpha0(self):
        return 50.0 / self.n_topics if self.alpha is None else float(self.alpha)

    # -- layout -------------------------------------------------------------------------------

    def _build_layout(self, corpus):
        """Shards (contiguous doc ranges balanced by tokens), term groups, and the sweep order:
        shard, term group, document, position."""
        V, S = corpus.n_terms, self.n_shards
        shard_doc = shard_docs(corpus, S)
        doc_len = np.diff(corpus.doc_ptr)
        cf = np.bincount(corpus.term_ids, minlength=V)
        group = term_groups(cf, S)
        self._lay = dict(
            sweep_order(corpus.doc_ptr, corpus.term_ids, group, shard_doc, S), doc_len=doc_len,
            shard_doc=shard_doc, cap_ptr=cap_ptrs(doc_len, self.n_topics),
            **term_packing(self.n_topics, cf, doc_len.max()), group=group)

    def _alloc_chain_state(self, corpus):
        C, Kt, V, N, D = self.n_chains, self.n_topics, corpus.n_terms, corpus.n_tokens, corpus.n_docs
        lay = self._lay
        self.z_ord_ = np.full((C, N), -1, dtype=np.int32)
        self._n_kw = np.zeros((C, V, Kt), dtype=np.int32)
        self._n_kw_stale = set()  # chains whose _n_kw lags behind their term lists
        self.n_k_ = np.zeros((C, Kt), dtype=np.int64)
        self.dt_ = np.zeros((C, int(lay["cap_ptr"][-1])), dtype=np.int32)
        self.dt_nnz_ = np.zeros((C, D), dtype=np.int32)
        self.wl_ = np.zeros((C, int(lay["wcap_ptr"][-1])), dtype=lay["wdtype"])
        self.wl_nnz_ = np.zeros((C, V), dtype=np.int32)
        S = self.n_shards
        self._local_n_k = np.zeros((S, Kt), dtype=np.int64)
        self._trees = np.zeros((S, 2 * _next_pow2(Kt)))
        self._invs = np.zeros((S, Kt))
        self._pbufs = np.zeros((S, Kt))
        self._ndks = np.zeros((S, Kt), dtype=np.int32)
        self._listeds = np.zeros((S, Kt), dtype=np.uint8)
        self._topics = np.zeros((S, Kt), dtype=np.int32)
        self._active = np.ones((C, D), dtype=np.uint8)
        self._doc_perm = [np.random.default_rng([self.seed, c, 7]).permutation(D) for c in range(C)]

    @property
    def n_kw_(self):
        """The dense n_kw of every chain, brought up to date with the term lists first (the
        sweeps update only the lists)."""
        lay = self._lay
        for c in sorted(self._n_kw_stale):
            lda_doc.word_lists_to_dense(lay["wcap_ptr"], self.wl_[c], lay["wshift"],
                                        self.wl_nnz_[c], self._n_kw[c])
        self._n_kw_stale.clear()
        return self._n_kw

    @n_kw_.setter
    def n_kw_(self, value):
        # kinds that keep their own dense counts (gLDA's chain state) set them directly
        self._n_kw, self._n_kw_stale = value, set()

    def _rebuild_counts(self, corpus, c):
        """n_kw, n_k, doc and term lists of chain c from z (Mallet's buildInitialTypeTopicCounts)."""
        z_doc = self._z_doc(c)
        lay = self._lay
        self._n_kw_stale.discard(c)
        K_._build_n_kw(corpus.term_ids, z_doc, self._n_kw[c], self.n_k_[c])
        K_._build_doc_lists(corpus.doc_ptr, z_doc, lay["cap_ptr"], lay["cshift"], self.dt_[c],
                            self.dt_nnz_[c])
        lda_doc.build_word_lists(self._n_kw[c], lay["wcap_ptr"], lay["wshift"], self.wl_[c],
                                 self.wl_nnz_[c])

    # -- training -----------------------------------------------------------------------------

    def _start(self, corpus):
        """Fresh chains: rng streams, initial alpha, and the initial topics of the active docs."""
        C, Kt = self.n_chains, self.n_topics
        self.rng_ = make_rng_states(self.seed, C, self.n_shards)
        self.alpha_ = np.full((C, Kt), self._alpha0())
        self._set_active(0, corpus.n_docs)
        lay = self._lay
        if self.init == "online":
            # the pass leaves n_k and the doc and term lists as a rebuild from z would (the doc
            # lists in another order, which no draw depends on); n_kw follows from the lists
            self._init_online(corpus)
            self._n_kw_stale.update(range(C))
        else:
            for c in range(C):
                K_._init_random(lay["shard_tok_ptr"], lay["ord_doc"], self._active[c],
                                self.z_ord_[c], Kt, self.rng_[c])
            for c in range(C):
                self._rebuild_counts(corpus, c)

    def _init_online(self, corpus):
        """z of every chain drawn token by token in document order, each given those before it
        (the chains in parallel, each on shard 0's rng stream)."""
        C, Kt, V, D = self.n_chains, self.n_topics, corpus.n_terms, corpus.n_docs
        lay = self._lay
        z = np.full((C, corpus.n_tokens), -1, dtype=np.int32)
        self.n_k_.fill(0)
        self.dt_nnz_.fill(0)
        self.wl_nnz_.fill(0)
        lda_doc.online_pass(corpus.doc_ptr, np.arange(D, dtype=np.int32), corpus.term_ids, z,
                            self.n_k_, lay["wcap_ptr"], self.wl_, lay["wshift"], self.wl_nnz_,
                            lay["cap_ptr"], self.dt_, lay["cshift"], self.dt_nnz_, self._active,
                            self.alpha_, float(self.beta), V * float(self.beta),
                            np.zeros((C, self._trees.shape[1])), np.zeros((C, Kt)),
                            np.zeros((C, Kt), np.int32), np.zeros((C, Kt), np.uint8),
                            np.zeros((C, Kt), np.int32), np.zeros((C, Kt)), self.rng_)
        for c in range(C):
            self.z_ord_[c] = z[c][lay["ord_pos"]]

    def _step(self, corpus, it):
        """Sweep ``it`` (0-based) of every chain, then alpha's optimisation when due."""
        self._set_active(it, corpus.n_docs)
        for c in range(self.n_chains):
            self._sweep(c)
        self._after_sweeps(it)

    def _alpha_due(self, it):
        return self.optimize_alpha and (it + 1) % self.optimize_every == 0

    def _after_sweeps(self, it):
        """Alpha's optimisation after sweep ``it`` when due (it reads the doc-topic counts)."""
        C, lay = self.n_chains, self._lay
        if self._alpha_due(it):
            max_len = int(lay["doc_len"].max())
            for c in range(C):
                K_._optimize_alpha(self.alpha_[c], lay["cap_ptr"], self.dt_[c], lay["cshift"],
                                   self.dt_nnz_[c], self._active[c],
                                   max_len, 200, 1.001, 1.0)

    def _sweep(self, c):
        """One sweep of chain c (all shards)."""
        lay = self._lay
        self._n_kw_stale.add(c)
        lda_doc.sweep(lay["block_visit_ptr"], lay["visit_ptr"], lay["visit_doc"], lay["ord_word"],
                      self.z_ord_[c], self.n_k_[c], lay["wcap_ptr"], self.wl_[c],
                      lay["wshift"], self.wl_nnz_[c], lay["cap_ptr"], self.dt_[c], lay["cshift"],
                      self.dt_nnz_[c], self._active[c], self.alpha_[c], float(self.beta),
                      self._local_n_k, self._trees, self._invs, self._ndks, self._listeds,
                      self._topics, self._pbufs, self.rng_[c])

    def _log_lik(self, c):
        active = self._active[c]
        n = int(self.n_k_[c].sum())
        ll = topic_word_log_lik(self.n_kw_[c], self.n_k_[c], float(self.beta))
        ll += K_._log_lik_docs(self._lay["cap_ptr"], self.dt_[c], self._lay["cshift"],
                               self.dt_nnz_[c], active, self.alpha_[c])
        return ll / max(n, 1)

    def _checkpoint_assignments(self):
        """z as uint16 (every topic id fits) once no token waits for its first topic (-1 under
        the sparse initialisation): half the bytes of the live state a checkpoint rewrites."""
        z = self.z_
        return z.astype(np.uint16) if z.size and z.min() >= 0 else z

    def _take_sample(self, c, it):
        """Sparse copies of chain c's counts: topic-major doc postings and term-major n_kw."""
        lay = self._lay
        Kt = self.n_topics
        nnz = int(self.dt_nnz_[c].sum())
        kd_ptr = np.zeros(Kt + 1, dtype=np.int64)
        kd_doc = np.empty(nnz, dtype=np.int32)
        kd_count = np.empty(nnz, dtype=np.int32)
        K_._doc_lists_to_postings(lay["cap_ptr"], self.dt_[c], lay["cshift"],
                                  self.dt_nnz_[c], Kt, kd_ptr, kd_doc, kd_count)
        tw_ptr, tw_topic, tw_count = rows_csr(self.n_kw_[c])
        s = dict(chain=c, iter=it, kd_ptr=kd_ptr, kd_doc=kd_doc, kd_count=kd_count,
                 tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count,
                 n_k=self.n_k_[c].copy(), alpha=self.alpha_[c].copy())
        if self._keep_sample_state:
            s["z"] = self._z_doc(c).astype(np.uint16)
        return s

    def _finalize(self, corpus):
        samples = self._sorted_samples()
        self.doc_len_ = self._lay["doc_len"].astype(np.int64)
        self._set_inference_arrays(
            kd_ptrs=[s["kd_ptr"] for s in samples], kd_docs=[s["kd_doc"] for s in samples],
            kd_counts=[s["kd_count"] for s in samples], tw_ptrs=[s["tw_ptr"] for s in samples],
            tw_topics=[s["tw_topic"] for s in samples], tw_counts=[s["tw_count"] for s in samples],
            n_k=np.stack([s["n_k"] for s in samples]), alpha=np.stack([s["alpha"] for s in samples]))

    def _set_inference_arrays(self, kd_ptrs, kd_docs, kd_counts, tw_ptrs, tw_topics, tw_counts,
                              n_k, alpha):
        self.kd_ptr_, self.kd_doc_ = stack_ptrs(kd_ptrs, kd_docs)
        self.kd_count_ = np.concatenate(kd_counts)
        self.tw_ptr_, self.tw_topic_ = stack_ptrs(tw_ptrs, tw_topics)
        self.tw_count_ = np.concatenate(tw_counts)
        self.n_k_samples_ = n_k.astype(np.int64)
        self.alpha_samples_ = alpha.astype(np.float64)
        self._doc_consts = None

    # -- document model -----------------------------------------------------------------------

    _INFERENCE_ARRAYS = ("kd_ptr", "kd_doc", "kd_count", "tw_ptr", "tw_topic", "tw_count",
                         "n_k_samples", "alpha_samples", "doc_len")
    _FILE_SPEC = files.SPEC  # what a model file and a checkpoint must hold

    def _ray_runner(self, executor):
        """The runner of a :class:`models.common.executors.ray.RayExecutor` (imports Ray)."""
        from .ray import runner, sharded_runner

        return (sharded_runner if getattr(executor, "state", "driver") == "workers" else runner)(executor, self)


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
    cshift = count_shift(n_topics, doc_len.max(initial=0))
    dt = np.zeros(cap_ptr[-1], dtype=np.int32)
    dt_nnz = np.zeros(corpus.n_docs, dtype=np.int32)
    K_._build_doc_lists(corpus.doc_ptr, z, cap_ptr, cshift, dt, dt_nnz)
    active = np.ones(corpus.n_docs, dtype=np.uint8)
    ll = topic_word_log_lik(n_kw, n_k, float(beta))
    ll += K_._log_lik_docs(cap_ptr, dt, cshift, dt_nnz, active, alpha)
    return ll / max(int(n_k.sum()), 1)
