"""Four-level Pachinko Allocation (PAM) by exact sparse collapsed Gibbs sampling, sparse PAM
(edge pruning), and the PAM-based document model P_PAM(w | d) for retrieval.

Li & McCallum, "Pachinko Allocation: Scalable Mixture Models of Topic Correlations" (the
four-level model of section 2, sparse PAM of section 3.2). The numerical work lives in
:mod:`models.pam.kernels` and the fit loop, checkpoints and model files in :mod:`models.common.gibbs`;
this class validates, allocates and sweeps.

Two behaviours worth knowing (tests/test_pam.py shows both):

- With alpha_r = 0.01 a document's super-topic is settled during the first sweep, before
  sub-topics mean anything, and token-by-token Gibbs moves can hardly change it later
  (tomotopy's PAModel behaves the same). Planted super/sub structure is therefore a stable
  state of the sampler, but random starts need not find it on small corpora.
- The moment-matching precision S_i is a geometric mean over all s' sub-topics; sub-topics a
  super-topic never uses contribute m_ij ~ s' - 1 through the pseudo-document, so with many
  sub-topics (100/800 on small collections) S_i approaches s' and theta_i stays close to its
  mean, while with few sub-topics S_i can shrink well below 1. As a document model this
  ignores the document's own sub-topics; hence alpha is learnt by Minka's fixed point, the
  estimate of the alpha that the sampler's joint depends on (``alpha_estimator``).
"""
import numpy as np

from ..common.kernels.dirichlet import topic_word_log_lik
from .kernels import A_TABLE_ROWS, N_STATS, DocPairs, Edges, PamPrior, PamState, Scratch, SweepOrder, sweep
from .counts import (build_doc_lists, build_n_wj, build_n_wj_runs, compact_doc_lists, init_random,
                     log_lik_docs, ml_alpha, moment_match)
from ..lda.layout import cap_ptrs, term_groups
from ..common.kernels.rng import make_rng_states
from ..common.gibbs import SweepOrderModel, shard_docs
from .layout import sweep_order
from .foldin import PAMFoldInMixin
from .infer import PAMDocumentModel, anon_empty, count_csr, count_dtype, gather

SAMPLERS = ("exact", "pruned")
ALPHA_ESTIMATORS = ("minka", "moments")
INITS = ("random", "sparse")


class PAM(PAMFoldInMixin, PAMDocumentModel, SweepOrderModel):
    """Four-level PAM trained by collapsed Gibbs sampling with several chains, kept as a
    document model.

    Root -> ``n_super`` super-topics -> ``n_sub`` sub-topics -> words. Every document draws
    theta_r ~ Dir(alpha_r) over super-topics and theta_i ~ Dir(alpha_i) over sub-topics for
    every super-topic i; sub-topics phi_j ~ Dir(beta) are shared. A token draws (i, j) and
    then its word.

    Parameters
    ----------
    n_super : int, default=100
        s, the super-topics (Li & McCallum use 100 on AP with 800 sub-topics).
    n_sub : int, default=800
        s', the sub-topics (>= 2).
    alpha_root : float or None, default=None
        Fixed symmetric Dirichlet prior over super-topics (the paper's alpha_r); None means
        ``50 / n_super``, the total prior mass of LDA's ``50 / n_topics``. Short documents then
        keep the mean sub-topics of every super-topic in their document model, as LDA's keep
        every topic (0.01, the paper's value, leaves them little more than their own).
    alpha_sub : float, default=0.01
        Initial value of every alpha_ij (super-topic i -> sub-topic j).
    beta : float, default=0.01
        Symmetric sub-topic-word prior.
    learn_alpha : bool, default=True
        Re-estimate alpha_ij after every ``optimize_every`` sweeps.
    alpha_estimator : {"minka", "moments"}, default="minka"
        How alpha_ij is re-estimated: "minka", Minka's fixed point for the Dirichlet-multinomial
        of every super-topic's sub-topic counts with Mallet's Gamma(1.001, 1) prior on each
        alpha_ij; "moments", the paper's moment matching with one pseudo-document (section 2.4).
        See :func:`models.pam.counts.ml_alpha` and
        :func:`models.pam.counts.moment_match`; with many sub-topics the moment
        estimate's S_i grows towards s' (see above), and P_PAM(w | d) comes close to the mixture
        of the document's super-topics' mean sub-topic distributions.
    optimize_every : int, default=1
    n_chains : int, default=3
    n_iter : int, default=100
        Total Gibbs sweeps per chain (burn-in included).
    burn_in : int or None, default=None
    sample_every : int or None, default=None
        Samples are kept after sweeps ``burn_in + sample_every, burn_in + 2 sample_every, ...``;
        None: ``burn_in = n_iter // 2``, ``sample_every = max(1, (n_iter - burn_in) // 5)``
        (100 sweeps: 50 and 10, samples at 60, 70, ..., 100).
    init : {"random", "sparse"}, default="random"
        "random": every token gets a uniform super-topic and a uniform sub-topic. "sparse": the
        sparse initialisation of section 3.2.3 as ``models.lda.model.LDA`` does it: start with a
        ``sparse_init_frac`` share of the documents and double the active set every
        ``sparse_init_every`` sweeps; a newly added document's tokens are drawn from the
        conditional given the counts so far. All documents must be active by ``burn_in``.
    sparse_init_frac : float, default=1/16
    sparse_init_every : int, default=2
    sampler : {"exact", "pruned"}, default="exact"
        "exact": the bucket sampler of :mod:`models.pam.kernels`, which draws from the exact
        conditional while evaluating O(s + pairs of the document) terms per token (not
        s * s'). "pruned": sparse PAM's edge pruning (section 3.2.2): from sweep
        ``prune_start`` on, exact and pruned sweeps alternate; in a pruned sweep the prior part
        of the conditional only uses each super-topic's kept edges: the fewest sub-topics with
        the largest alpha_ij that hold ``prune_mass`` of sum_j alpha_ij, at most
        ``prune_max_edges`` of them (pairs already present in a document stay reachable).
        Edges are recomputed whenever alpha changes.
    prune_start : int, default=10
    prune_mass : float, default=0.9
    prune_max_edges : int, default=64
    n_shards : int, default=4
        Fixed document shards (and term groups) sampled in parallel, each with its own rng
        stream (partition scheme, see the kernel). Results depend on ``n_shards`` and
        ``seed``, never on ``n_jobs``. ``n_shards=1`` is the exact sequential sampler.
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads (``numba.set_num_threads``; restored afterwards). None: all numba threads.
    log_lik_every : int, default=10
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
    z_ : ndarray of shape (n_chains, n_tokens), int32
        Current pair key ``i * n_sub + j`` of every token (document order); ``z_super_`` and
        ``z_sub_`` split it.
    alpha_ : ndarray of shape (n_chains, n_super, n_sub), float64
        Current alpha_ij of every chain.
    log_lik_ : ndarray of shape (n_records, n_chains), float64
        Collapsed log p(w, z, z') per token; ``log_lik_iter_`` gives the sweep of every row.
    sweep_stats_ : ndarray of shape (n_iter_, 7), int64
        Per sweep (all chains): iteration, pruned (0/1), tokens, doc-bucket pairs, super-topic
        terms, sub-topic terms scanned, prior-bucket draws. ``terms_per_token()`` summarises it.
    sample_iter_ : ndarray of shape (n_samples,), int64
    n_iter_ : int
    fingerprint_ : str
    """

    kind = "pam"

    @classmethod
    def size_params(cls, k):
        """K sub-topics under K / 8 super-topics (Li & McCallum on AP: 100 super, 800 sub)."""
        return {"n_super": max(1, k // 8), "n_sub": k}
    quick_params = dict(n_super=2, n_sub=4, n_chains=2, n_iter=8, burn_in=4, sample_every=2, n_shards=2, seed=3)

    def __init__(self, *, n_super=100, n_sub=800, alpha_root=None, alpha_sub=0.01, beta=0.01,
                 learn_alpha=True, alpha_estimator="minka", optimize_every=1, n_chains=3,
                 n_iter=100, burn_in=None, sample_every=None, init="random",
                 sparse_init_frac=1 / 16, sparse_init_every=2,
                 sampler="exact", prune_start=10, prune_mass=0.9, prune_max_edges=64,
                 n_shards=4, seed=0, n_jobs=None, log_lik_every=10, callback_every=1,
                 checkpoint_every=10, executor="local"):
        self.n_super = n_super
        self.n_sub = n_sub
        self.alpha_root = alpha_root
        self.alpha_sub = alpha_sub
        self.beta = beta
        self.learn_alpha = learn_alpha
        self.alpha_estimator = alpha_estimator
        self.optimize_every = optimize_every
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.sample_every = sample_every
        self.init = init
        self.sparse_init_frac = sparse_init_frac
        self.sparse_init_every = sparse_init_every
        self.sampler = sampler
        self.prune_start = prune_start
        self.prune_mass = prune_mass
        self.prune_max_edges = prune_max_edges
        self.n_shards = n_shards
        self.seed = seed
        self.n_jobs = n_jobs
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every
        self.executor = executor

    # -- parameters ---------------------------------------------------------------------------

    # per-sweep sampler statistics (sweep_stats_), kept in checkpoints and model files
    _TRACES = {"stats": "_stat_rows"}

    def _check_params(self, corpus):
        self._check_shared_params("n_super", "sparse_init_every", "optimize_every",
                                  "prune_max_edges")
        self._pos_int("n_sub", 2)
        self._pos_int("prune_start", 0)
        if self.n_super * self.n_sub > 2**31 - 1:
            raise ValueError(f"n_super * n_sub must fit in int32, got {self.n_super} * {self.n_sub}")
        self._check_priors()  # alpha_root None: 50 / n_super
        self._check_bool("learn_alpha")
        self._check_choice("alpha_estimator", ALPHA_ESTIMATORS)
        self._check_choice("init", INITS)
        self._check_choice("sampler", SAMPLERS)
        if not (0 < float(self.prune_mass) <= 1):
            raise ValueError(f"prune_mass must be in (0, 1], got {self.prune_mass!r}")
        self._check_corpus(corpus)

    def _alpha_r(self):
        return 50.0 / self.n_super if self.alpha_root is None else float(self.alpha_root)

    def _is_pruned(self, it):
        """Whether sweep ``it`` (0-based) is a pruned one."""
        return (self.sampler == "pruned" and it >= self.prune_start
                and (it - self.prune_start) % 2 == 1)

    # -- layout -------------------------------------------------------------------------------

    def _build_layout(self, corpus):
        """Shards (contiguous doc ranges balanced by tokens), term groups, the sweep order."""
        S = self.n_shards
        shard_doc, doc_len = shard_docs(corpus, S), np.diff(corpus.doc_ptr)
        group = term_groups(np.bincount(corpus.term_ids, minlength=corpus.n_terms), S)
        self._lay = dict(sweep_order(corpus.doc_ptr, corpus.term_ids, group, shard_doc, S),
                         cap_ptr=cap_ptrs(doc_len, self.n_super * self.n_sub), doc_len=doc_len,
                         shard_doc=shard_doc, group=group)

    def _alloc_chain_state(self, corpus):
        C, s, s2 = self.n_chains, self.n_super, self.n_sub
        V, N, D = corpus.n_terms, corpus.n_tokens, corpus.n_docs
        cap = int(self._lay["cap_ptr"][-1])
        self.z_ord_ = np.full((C, N), -1, dtype=np.int32)
        self.n_wj_ = np.zeros((C, V, s2), dtype=np.int32)
        self.n_j_ = np.zeros((C, s2), dtype=np.int64)
        # a document's counts never exceed its length: uint16 for documents that fit
        doc_count = count_dtype(self._lay["doc_len"].max(initial=0))
        self.n_ds_ = np.zeros((C, D, s), dtype=doc_count)
        self.dp_key_ = np.zeros((C, cap), dtype=np.int32)
        self.dp_count_ = np.zeros((C, cap), dtype=doc_count)
        self.dp_nnz_ = np.zeros((C, D), dtype=np.int32)
        S = self.n_shards
        max_len = max(1, int(self._lay["doc_len"].max()))
        self._local_n_j = np.zeros((S, s2), dtype=np.int64)
        self._Es = np.zeros((S, s))
        self._Gs = np.zeros((S, s))
        self._qbufs = np.zeros((S, s))
        self._cs = np.zeros((S, s2))
        self._invs = np.zeros((S, s2))
        self._sbufs = np.zeros((S, s2))
        self._pbufs = np.zeros((S, min(max_len, s * s2)))
        self._stats = np.zeros((S, N_STATS), dtype=np.int64)
        # A_i for super-topic counts up to a bound (longer documents divide past it)
        A_tab = np.zeros((min(max_len + 1, A_TABLE_ROWS), s))
        self._scratch = Scratch(self._local_n_j, self._Es, self._Gs, self._cs, self._invs,
                                self._pbufs, self._qbufs, self._sbufs, self._stats, A_tab)
        self._active = np.ones((C, D), dtype=np.uint8)
        self._doc_perm = [np.random.default_rng([self.seed, c, 7]).permutation(D) for c in range(C)]
        self._edges = [None] * C

    def _rebuild_counts(self, corpus, c):
        """n_wj, n_j, n_ds and doc lists of chain c from z (Mallet's buildInitialTypeTopicCounts)."""
        lay = self._lay
        n_j = np.zeros((self.n_shards, self.n_sub), dtype=np.int64)
        build_n_wj_runs(lay["block_run_ptr"], lay["run_word"], lay["run_ptr"], self.z_ord_[c],
                        self.n_sub, self.n_wj_[c], n_j)
        self.n_j_[c] = n_j.sum(0)
        z_doc = self._z_doc(c)
        build_doc_lists(corpus.doc_ptr, z_doc, self.n_sub, self._lay["cap_ptr"],
                        self.dp_key_[c], self.dp_count_[c], self.dp_nnz_[c], self.n_ds_[c])

    @property
    def z_super_(self):
        z = self.z_
        return np.where(z >= 0, z // self.n_sub, -1).astype(np.int32)

    @property
    def z_sub_(self):
        z = self.z_
        return np.where(z >= 0, z % self.n_sub, -1).astype(np.int32)

    # -- edges (sparse PAM) -------------------------------------------------------------------

    def _make_edges(self, alpha):
        """Kept edges of every super-topic and their inverse lists (see ``sampler``)."""
        s, s2 = alpha.shape
        order = np.argsort(-alpha, axis=1, kind="stable")
        sorted_a = np.take_along_axis(alpha, order, axis=1)
        cum = np.cumsum(sorted_a, axis=1)
        need = float(self.prune_mass) * cum[:, -1:]
        n_keep = np.minimum((cum < need).sum(1) + 1, min(self.prune_max_edges, s2))
        subs = [np.sort(order[i, :n_keep[i]]) for i in range(s)]
        edge_ptr = np.concatenate([[0], np.cumsum(n_keep)]).astype(np.int64)
        edge_sub = np.concatenate(subs).astype(np.int32)
        edge_super = np.repeat(np.arange(s, dtype=np.int32), n_keep)
        edge_alpha = alpha[edge_super, edge_sub].copy()
        inv = np.lexsort((edge_super, edge_sub))
        sub_ptr = np.searchsorted(edge_sub[inv], np.arange(s2 + 1)).astype(np.int64)
        return Edges(edge_ptr, edge_sub, edge_alpha, sub_ptr, edge_super[inv].copy(),
                     edge_alpha[inv].copy())

    # -- training -----------------------------------------------------------------------------

    def _start(self, corpus):
        """Fresh chains: rng streams, initial alpha, random assignments of the active docs."""
        C = self.n_chains
        self.rng_ = make_rng_states(self.seed, C, self.n_shards)
        self.alpha_ = np.full((C, self.n_super, self.n_sub), float(self.alpha_sub))
        self._set_active(0, corpus.n_docs)
        lay = self._lay
        for c in range(C):
            init_random(lay["shard_tok_ptr"], lay["ord_doc"], self._active[c], self.z_ord_[c],
                        self.n_super, self.n_sub, self.rng_[c])
            self._rebuild_counts(corpus, c)

    def _step(self, corpus, it):
        """Sweep ``it`` (0-based) of every chain, its statistics, then alpha's update when due."""
        self._set_active(it, corpus.n_docs)
        pruned = self._is_pruned(it)
        self._stats[:] = 0
        for c in range(self.n_chains):
            self._sweep(c, pruned)
        self._after_sweeps(it, self._stats.sum(0))

    def _alpha_due(self, it):
        return self.learn_alpha and (it + 1) % self.optimize_every == 0

    def _after_sweeps(self, it, stats, update_alpha=None):
        """What follows sweep ``it`` of every chain (``stats``: its counters summed over the
        shards): the statistics row, then alpha's update when due (``update_alpha(c)``, by
        default :meth:`_update_alpha`; Ray workers that keep the documents give theirs)."""
        self._stat_rows.append([it + 1, int(self._is_pruned(it))] + stats.tolist())
        if self._alpha_due(it):
            for c in range(self.n_chains):
                (update_alpha or self._update_alpha)(c)

    # Minka's fixed point per update, warm-started from the last alpha (Mallet's prior)
    _FP_ITERS, _FP_SHAPE, _FP_SCALE = 20, 1.001, 1.0

    def _update_alpha(self, c):
        lay = self._lay
        args = (lay["cap_ptr"], self.dp_key_[c], self.dp_count_[c], self.dp_nnz_[c],
                self.n_ds_[c], self._active[c], self.alpha_[c])
        if self.alpha_estimator == "minka":
            ml_alpha(*args, self._FP_ITERS, self._FP_SHAPE, self._FP_SCALE)
        else:
            moment_match(*args)
        self._edges[c] = None

    def _sweep_prior(self, c, pruned):
        """Chain c's PamPrior and Edges for a sweep (exact: empty edges)."""
        alpha = self.alpha_[c]
        if pruned:
            if self._edges[c] is None:
                self._edges[c] = self._make_edges(alpha)
            edges = self._edges[c]
        else:
            z64, z32, zf = np.zeros(1, np.int64), np.zeros(1, np.int32), np.zeros(1)
            edges = Edges(z64, z32, zf, z64, z32, zf)
        prior = PamPrior(self._alpha_r(), alpha, np.ascontiguousarray(alpha.T), alpha.sum(1),
                         float(self.beta))
        return prior, edges

    def _sweep(self, c, pruned=False):
        """One sweep of chain c (all shards); exact or pruned."""
        lay = self._lay
        prior, edges = self._sweep_prior(c, pruned)
        sweep(SweepOrder(lay["block_run_ptr"], lay["run_word"], lay["run_ptr"], lay["ord_doc"]),
              PamState(self.z_ord_[c], self.n_wj_[c], self.n_j_[c], self.n_ds_[c]),
              DocPairs(lay["cap_ptr"], self.dp_key_[c], self.dp_count_[c], self.dp_nnz_[c]),
              self._active[c], bool(pruned), prior, edges, self._scratch, self.rng_[c])

    def _ray_runner(self, executor):
        """The runner of a :class:`models.common.executors.ray.RayExecutor` (imports Ray)."""
        if getattr(executor, "state", "driver") == "workers":
            from .ray_state import sharded_runner

            return sharded_runner(executor, self)
        from .ray import runner

        return runner(executor, self)

    def _log_lik(self, c):
        n = int(self.n_j_[c].sum())
        alpha = self.alpha_[c]
        ll = topic_word_log_lik(self.n_wj_[c], self.n_j_[c], float(self.beta))
        ll += log_lik_docs(self._lay["cap_ptr"], self.dp_key_[c], self.dp_count_[c],
                           self.dp_nnz_[c], self.n_ds_[c], self._active[c],
                           self._alpha_r(), alpha, alpha.sum(1))
        return ll / max(n, 1)

    @property
    def sweep_stats_(self):
        return np.array(self._stat_rows, dtype=np.int64).reshape(-1, 2 + N_STATS)

    def terms_per_token(self):
        """Per sweep: iteration, pruned, and the average per token of doc-bucket pairs,
        super-topic terms, sub-topic terms scanned, and all three summed ("pairs considered"),
        as an ndarray of shape (n_sweeps, 6), float64."""
        st = self.sweep_stats_.astype(np.float64)
        tok = np.maximum(st[:, 2], 1)
        per = st[:, 3:6] / tok[:, None]
        return np.column_stack([st[:, 0], st[:, 1], per, per.sum(1)])

    def _take_sample(self, c, it):
        lay = self._lay
        nnz = self.dp_nnz_[c]
        ptr = np.concatenate([[0], np.cumsum(nnz, dtype=np.int64)])
        dp_key = anon_empty(ptr[-1], np.int32)
        dp_count = anon_empty(ptr[-1], self.dp_count_.dtype)
        compact_doc_lists(lay["cap_ptr"], self.dp_key_[c], self.dp_count_[c], nnz, ptr,
                          dp_key, dp_count)
        tw_ptr, tw_sub, tw_count = count_csr(self.n_wj_[c])
        s = dict(chain=c, iter=it, dp_ptr=ptr, dp_key=dp_key, dp_count=dp_count, tw_ptr=tw_ptr,
                 tw_sub=tw_sub, tw_count=tw_count, n_j=self.n_j_[c].copy(),
                 alpha=self.alpha_[c].copy())
        if self._keep_sample_state:
            s["z"] = self._z_doc(c)
        return s

    def _finalize(self, corpus):
        samples = self._sorted_samples()
        self.dp_ptr_, self.dp_key_samples_, self.dp_count_samples_ = gather(
            samples, "dp_ptr", "dp_key", "dp_count")
        self.tw_ptr_, self.tw_sub_, self.tw_count_ = gather(samples, "tw_ptr", "tw_sub",
                                                            "tw_count")
        self.n_j_samples_ = np.stack([s["n_j"] for s in samples]).astype(np.int64, copy=False)
        self.alpha_samples_ = np.stack([s["alpha"] for s in samples]).astype(np.float64, copy=False)
        self.doc_len_ = self._lay["doc_len"].astype(np.int64)


def pam_log_lik(corpus, z_super, z_sub, n_super, n_sub, alpha_root, alpha, beta):
    """Collapsed log p(w, z, z') per token of any assignment (e.g. tomotopy's), with exactly the
    formula behind ``PAM.log_lik_``.

    Parameters
    ----------
    corpus : Corpus
    z_super, z_sub : ndarray of shape (n_tokens,), int
        Super- and sub-topic of every token in document order (-1: unassigned, ignored).
    n_super, n_sub : int
    alpha_root : float
    alpha : float or ndarray of shape (n_super, n_sub)
    beta : float

    Returns
    -------
    float
    """
    z_super = np.asarray(z_super, dtype=np.int64)
    z = np.where(z_super >= 0, z_super * n_sub + np.asarray(z_sub, dtype=np.int64), -1).astype(np.int32)
    # a writable copy, as a model's alpha_ is (a broadcast view is read-only): one compiled kernel
    alpha = np.array(np.broadcast_to(np.asarray(alpha, dtype=np.float64), (n_super, n_sub)))
    n_wj = np.zeros((corpus.n_terms, n_sub), dtype=np.int32)
    n_j = np.zeros(n_sub, dtype=np.int64)
    build_n_wj(corpus.term_ids, z, n_sub, n_wj, n_j)
    doc_len = np.diff(corpus.doc_ptr)
    cap_ptr = np.concatenate([[0], np.cumsum(np.minimum(doc_len, n_super * n_sub))]).astype(np.int64)
    dp_key = np.zeros(cap_ptr[-1], dtype=np.int32)
    dp_count = np.zeros(cap_ptr[-1], dtype=np.int32)
    dp_nnz = np.zeros(corpus.n_docs, dtype=np.int32)
    n_ds = np.zeros((corpus.n_docs, n_super), dtype=np.int32)
    build_doc_lists(corpus.doc_ptr, z, n_sub, cap_ptr, dp_key, dp_count, dp_nnz, n_ds)
    active = np.ones(corpus.n_docs, dtype=np.uint8)
    ll = topic_word_log_lik(n_wj, n_j, float(beta))
    ll += log_lik_docs(cap_ptr, dp_key, dp_count, dp_nnz, n_ds, active, float(alpha_root),
                       alpha, alpha.sum(1))
    return ll / max(int(n_j.sum()), 1)
