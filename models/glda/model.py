"""Grouped LDA (gLDA, Bart 2011): every document's tokens are split into groups, each group has
one topic drawn from theta_d, and a Gibbs sweep alternates every token's group (eq. 2, then the
paper's most-instances refinement) and every group's topic jointly with its tokens (eq. 3).

After sampling, a token's topic is its group's, so the kept samples are LDA's (token-level doc
and topic counts) and the document model, model files and every LDA tool work unchanged: this
class derives from :class:`models.lda.model.LDA` and only replaces the chain state and the sweep.
``restricted=True`` is the paper's negative control, restricted LDA: the groups are fixed to
the (document, term) runs, so all instances of a term in a document share one topic.
"""
import numba
import numpy as np

from . import kernels as G_
from . import sweep_kernels as SW_
from ..lda import kernels as K_
from ..common.kernels.dirichlet import topic_word_log_lik
from ..common.kernels.rng import make_rng_states
from . import files
from ..common.base import TopicModel
from ..common.checkpoint import id_dtype
from ..common.gibbs import key_runs, rows_csr, shard_docs
from ..lda.layout import count_shift
from ..lda.model import LDA

INITS = ("online", "random")  # how a chain starts (see GroupedLDA's init)


def doc_runs(corpus):
    """The (doc, term) runs: run_ptr (n_runs + 1), run_tok (tokens sorted by doc, term,
    position), tok_run (run of every token) and run_doc_first (first run of every doc)."""
    D = corpus.n_docs
    tok_doc = np.repeat(np.arange(D, dtype=np.int64), np.diff(corpus.doc_ptr))
    key = tok_doc * corpus.n_terms + corpus.term_ids
    run_tok = np.argsort(key, kind="stable").astype(np.int64)
    run_ptr, run_key = key_runs(key[run_tok])
    if len(run_tok) == 0:
        run_ptr, run_key = np.zeros(1, np.int64), key[:0]
    tok_run = np.empty(len(run_tok), dtype=np.int64)
    tok_run[run_tok] = np.repeat(np.arange(len(run_key), dtype=np.int64), np.diff(run_ptr))
    run_doc_first = np.searchsorted(run_key // max(corpus.n_terms, 1), np.arange(D + 1)).astype(np.int64)
    return run_ptr, run_tok, tok_run, run_doc_first


class GroupedLDA(LDA):
    """Grouped LDA trained by collapsed Gibbs sampling with several chains, kept as an LDA
    document model (the token-level counts z_i = z_{d, g_i} of every kept sample).

    Parameters
    ----------
    n_topics : int, default=800
        K, the number of topics.
    alpha : float or None, default=None
        Symmetric prior of theta_d, which draws the topics of the document's groups; None means
        ``50 / n_topics`` (Steyvers & Griffiths, as for LDA).
    beta : float, default=0.01
        Symmetric topic-word prior.
    group_size : float, default=4.0
        Tokens per group on average: a document of N tokens has ceil(N / group_size) groups
        (the paper uses 4).
    doc_counts : {"groups", "tokens"}, default="groups"
        What the doc factor of eq. 3 counts. "groups": alpha + M_dk, the groups of the document
        with topic k (theta draws the groups' topics, Figure 4b). "tokens": alpha + N_dk, the
        document's tokens with topic k (eq. 3 read with LDA's counts); both exclude the group
        being sampled.
    restricted : bool, default=False
        Restricted LDA (the paper's negative control) instead of gLDA: groups are the fixed
        (document, term) runs and theta draws tokens, so a group's topic is drawn from LDA's
        exact block conditional; ``group_size`` is then unused.
    init : {"online", "random"}, default="online"
        How the chains start: uniform groups, then their topics drawn in one pass in document
        order, each from its conditional given the groups drawn before it ("online"), or uniform
        topics ("random", the paper's start). Online topics concentrate from the first sweep, so the
        early sweeps are faster and the chains end higher in log p(W, Z).
    n_chains : int, default=3
        Independent Markov chains, each on its own seed stream, sampled in parallel.
    n_shards : int, default=1
        Document shards of a chain (contiguous ranges of about equal tokens), each on its own
        stream. 1: every chain is sampled sequentially in document order, the paper's sampler.
        More: a sweep samples every shard against the chain's counts as the sweep started plus
        the shard's own changes, then adds every shard's changes (approximate distributed
        Gibbs, AD-LDA, Newman et al. 2009), so the shards of a chain can run on different Ray
        workers that each hold only their documents' state. Results depend on ``n_shards``
        and ``seed``, never on ``n_jobs`` or the workers.
    n_iter : int, default=100
        Gibbs sweeps per chain (burn-in included).
    burn_in : int or None, default=None
        Sweeps before the first kept sample; None: half of ``n_iter``.
    sample_every : int or None, default=None
        Sweeps between kept samples; None: ``max(1, (n_iter - burn_in) // 5)``. Samples are
        kept after sweeps burn_in + sample_every, burn_in + 2 sample_every, ... <= n_iter
        (the schedule of :class:`models.lda.model.LDA`).
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads (one chain per thread; results never depend on it). None: all numba threads.
    log_lik_every : int, default=10
        Record log p(W, Z) per token of the token-level assignments every this many sweeps.
    callback_every : int, default=1
    checkpoint_every : int, default=10
    executor : str, default="local"
        Where the sweeps run: "local" (this process, ``n_jobs`` threads), "ray" (Ray workers
        that own whole chains, or with ``RayExecutor(state="workers")`` and ``n_shards`` > 1
        the shards of every chain; ``RAY_ADDRESS`` or a local Ray cluster), "ray:ADDRESS" or
        "ray://HOST:PORT" (that Ray cluster). Same seed: the same model whatever the executor
        and the number of threads or workers. Not written to model files; a checkpoint resumes
        under any executor. Needs ``pip install topicir[ray]``.

    Attributes
    ----------
    g_ : ndarray of shape (n_chains, n_tokens), int32
        Group of every token (document order), numbered within its document.
    zg_ : ndarray of shape (n_chains, n_groups), int32
        Topic of every group; the groups of doc d are ``group_ptr_[d]:group_ptr_[d + 1]``.
    z_ : ndarray of shape (n_chains, n_tokens), int32
        Token-level topics z_i = zg_[g_i].
    n_kw_, n_k_, alpha_, log_lik_, sample_iter_, n_iter_, fingerprint_
        As for :class:`models.lda.model.LDA`.
    """

    kind = "glda"
    quick_params = dict(n_topics=4, n_chains=2, n_iter=8, burn_in=4, sample_every=2, seed=3)
    _STATE = ("gz", "alpha")
    _FILE_SPEC = files.SPEC
    _RETIRED_PARAMS = ()
    _ADDED_PARAMS = {"n_shards": 1}

    def _gz_file_dtype(self):
        """uint16 where every group index (within its document) and every topic fits: half the
        bytes of the state a checkpoint and its kept samples write."""
        return id_dtype(max(self.n_topics, int(np.diff(self._lay["grp_ptr"]).max(initial=0))))

    def _checkpoint_assignments(self):
        """Every chain's groups, then its groups' topics (:attr:`gz_`), chain by chain in
        :meth:`_gz_file_dtype`: a checkpoint never joins them."""
        C, N = self.g_.shape
        dtype = self._gz_file_dtype()
        return ((C, N + self.zg_.shape[1]), dtype,
                (a.astype(dtype) for c in range(C) for a in (self.g_[c], self.zg_[c])))

    def __init__(self, *, n_topics=800, alpha=None, beta=0.01, group_size=4.0, doc_counts="groups",
                 restricted=False, init="online",
                 n_chains=3, n_shards=1, n_iter=100, burn_in=None, sample_every=None, seed=0, n_jobs=None,
                 log_lik_every=10, callback_every=1, checkpoint_every=10, executor="local"):
        self.n_topics = n_topics
        self.alpha = alpha
        self.beta = beta
        self.group_size = group_size
        self.doc_counts = doc_counts
        self.restricted = restricted
        self.init = init
        self.n_chains = n_chains
        self.n_shards = n_shards
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.sample_every = sample_every
        self.seed = seed
        self.n_jobs = n_jobs
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every
        self.executor = executor

    # -- parameters ---------------------------------------------------------------------------

    def _check_params(self, corpus):
        self._check_shared_params("n_topics")
        self._check_uint16("n_topics")
        self._check_priors()
        self._pos_float("group_size")
        self._check_choice("doc_counts", ("groups", "tokens"))
        self._check_bool("restricted")
        self._check_choice("init", INITS)
        TopicModel._check_corpus(self, corpus)

    @classmethod
    def _from_params(cls, params):
        # files written before init existed started their chains at random
        return super()._from_params({"init": "random", **params})

    # -- layout -------------------------------------------------------------------------------

    def _build_layout(self, corpus):
        doc_len = np.diff(corpus.doc_ptr)
        run_ptr, _, tok_run, run_doc_first = doc_runs(corpus)
        if self.restricted:
            n_groups = np.diff(run_doc_first)
        else:
            n_groups = np.ceil(doc_len / float(self.group_size)).astype(np.int64)
        grp_ptr = np.concatenate([[0], np.cumsum(n_groups)]).astype(np.int64)
        self._corpus = corpus
        self._lay = dict(
            doc_len=doc_len, grp_ptr=grp_ptr, run_ptr=run_ptr, tok_run=tok_run,
            run_doc_first=run_doc_first, max_groups=int(n_groups.max(initial=0)),
            max_len=int(doc_len.max(initial=0)),
            cshift=count_shift(self.n_topics, doc_len.max(initial=0)),
            cap_ptr=np.concatenate([[0], np.cumsum(np.minimum(doc_len, self.n_topics))]).astype(np.int64))
        self.group_ptr_ = grp_ptr
        self._shard_doc = shard_docs(corpus, self.n_shards)

    def _alloc_chain_state(self, corpus):
        C, Kt, V, N = self.n_chains, self.n_topics, corpus.n_terms, corpus.n_tokens
        self.g_ = np.zeros((C, N), dtype=np.int32)
        self.zg_ = np.zeros((C, int(self._lay["grp_ptr"][-1])), dtype=np.int32)
        self.n_kw_ = np.zeros((C, V, Kt), dtype=np.int32)
        self.n_k_ = np.zeros((C, Kt), dtype=np.int64)
        self._wbits = None

    def _z_doc(self, c):
        z = np.empty(self.g_.shape[1], dtype=np.int32)
        G_.token_topics(self._corpus.doc_ptr, self._lay["grp_ptr"], self.g_[c], self.zg_[c], z)
        return z

    def _rebuild_counts(self, corpus, c):
        K_._build_n_kw(corpus.term_ids, self._z_doc(c), self.n_kw_[c], self.n_k_[c])
        self._wbits = None  # the sweeps' word bitsets follow the counts: built again from them

    def _doc_lists(self, c):
        """Token-level doc-topic lists of chain c (LDA's packed layout)."""
        lay = self._lay
        dt = np.zeros(int(lay["cap_ptr"][-1]), dtype=np.int32)
        dt_nnz = np.zeros(len(lay["doc_len"]), dtype=np.int32)
        K_._build_doc_lists(self._corpus.doc_ptr, self._z_doc(c), lay["cap_ptr"], lay["cshift"],
                            dt, dt_nnz)
        return dt, dt_nnz

    def _open_checkpoint(self, path, corpus, free):
        f = super()._open_checkpoint(path, corpus, free)
        rng = f.arrays.get("rng")
        if rng is not None and rng.ndim == 2 and "n_shards" not in f.header["params"]:
            f.arrays["rng"] = rng[:, None]  # written before shards existed: one stream a chain
        return f

    # -- chain state (checkpoints keep g and zg of a chain as one row) ------------------------

    @property
    def gz_(self):
        """Every chain's state as one row: groups of the tokens, then topics of the groups."""
        if not hasattr(self, "g_"):
            if hasattr(self, "_gz_full"):  # loaded from save(full=True)
                return self._gz_full
            raise AttributeError("gz_ is only available after fit or for models saved with full=True")
        return np.concatenate([self.g_, self.zg_], axis=1)

    def _set_chain_state(self, corpus, c, gz):
        gz = np.asarray(gz, dtype=np.int32)
        N = corpus.n_tokens
        self.g_[c] = gz[:N]
        self.zg_[c] = gz[N:]
        self._rebuild_counts(corpus, c)

    def _set_saved_assignments(self, gz):
        self._gz_full = gz

    @property
    def z_(self):
        if not hasattr(self, "g_"):
            raise AttributeError("z_ is only available after fit")
        return np.stack([self._z_doc(c) for c in range(self.n_chains)])

    # -- training -----------------------------------------------------------------------------

    def _start(self, corpus):
        C, Kt = self.n_chains, self.n_topics
        self.rng_ = make_rng_states(self.seed, C, self.n_shards)
        self.alpha_ = np.full((C, Kt), self._alpha0())
        self._init_chains(corpus)

    def _init_chains(self, corpus):
        """Every chain's start from its stream ``rng_[c]`` (a Ray worker starts the chains it
        owns so, from their streams of the local start)."""
        Kt, lay = self.n_topics, self._lay
        online = self.init == "online"
        shard_doc = self._shard_doc
        for c in range(len(self.rng_)):
            for s in range(len(shard_doc) - 1):
                G_.init_random(corpus.doc_ptr, lay["grp_ptr"], lay["tok_run"], lay["run_doc_first"],
                               not self.restricted, self.g_[c], self.zg_[c], 0 if online else Kt,
                               self.rng_[c, s], shard_doc[s], shard_doc[s + 1])
            if not online:
                self._rebuild_counts(corpus, c)
        if online:
            # the group-topic step alone over groups not drawn yet (topic -1), on the counts
            # _alloc_chain_state leaves empty: each group's topic given the groups drawn before it
            self._sweep_chains(corpus, resample_groups=False)

    def _step(self, corpus, it):
        self._sweep_chains(corpus, resample_groups=not self.restricted)

    def _ray_runner(self, executor):
        """The runner of a :class:`models.common.executors.ray.RayExecutor` (imports Ray)."""
        if getattr(executor, "state", "driver") == "workers":
            if self.n_shards > 1:
                from .ray_shards import shard_runner

                return shard_runner(executor, self)
            from .ray_state import chain_runner

            return chain_runner(executor, self)
        if self.n_shards > 1:
            raise ValueError("gLDA's document shards (n_shards > 1) run on Ray with their state on the "
                             "workers: RayExecutor(state='workers') (topicir train: --ray-state workers)")
        from .ray import runner

        return runner(executor, self)

    def _sweep_chains(self, corpus, resample_groups):
        lay = self._lay
        if self._wbits is None:
            self._wbits = G_.word_bits(self.n_kw_)
        if self.n_shards == 1:
            SW_.sweep_chains(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], lay["run_ptr"],
                            lay["tok_run"], self.g_, self.zg_, self.n_kw_, self.n_k_,
                            self.alpha_, float(self.beta), self._unit(), resample_groups,
                            self.rng_[:, 0], lay["max_groups"], lay["max_len"],
                            numba.get_num_threads(), self._wbits, self._vocabulary(corpus))
            return
        for c in range(self.n_chains):
            self._sweep_shards(corpus, c, resample_groups)
        self._wbits = None  # the merged counts' bitsets: built again from them

    def _sweep_shards(self, corpus, c, resample_groups):
        """Chain c's sweep over its shards side by side, each from a copy of the counts."""
        lay, S = self._lay, self.n_shards
        n_kw = np.repeat(self.n_kw_[c][None], S, axis=0)
        n_k = np.repeat(self.n_k_[c][None], S, axis=0)
        wbits = np.repeat(self._wbits[c][None], S, axis=0)
        SW_.sweep_shards(corpus.doc_ptr, corpus.term_ids, lay["grp_ptr"], lay["run_ptr"],
                        lay["tok_run"], self._shard_doc, self.g_[c], self.zg_[c], n_kw, n_k,
                        self.alpha_[c], float(self.beta), self._unit(), resample_groups,
                        self.rng_[c], lay["max_groups"], lay["max_len"], wbits, self._vocabulary(corpus))
        SW_.add_shard_changes(n_kw, n_k, self.n_kw_[c], self.n_k_[c], self.n_kw_[c], self.n_k_[c])

    # The model's vocabulary size where the corpus numbers only some of its terms (a Ray worker's
    # shards: their documents' terms); None: the corpus's.
    _n_terms = None

    def _vocabulary(self, corpus):
        return corpus.n_terms if self._n_terms is None else self._n_terms

    def _finalize(self, corpus):
        self._wbits = None
        super()._finalize(corpus)

    def _unit(self):
        """The kernel's doc-factor code (see :mod:`models.glda.kernels`)."""
        return 1 if self.restricted else (2 if self.doc_counts == "tokens" else 0)

    def _log_lik(self, c):
        """log p(W, Z) per token of the token-level assignments (the LDA closed form)."""
        dt, dt_nnz = self._doc_lists(c)
        lay = self._lay
        ll = topic_word_log_lik(self.n_kw_[c], self.n_k_[c], float(self.beta))
        ll += K_._log_lik_docs(lay["cap_ptr"], dt, lay["cshift"], dt_nnz,
                               np.ones(len(dt_nnz), dtype=np.uint8), self.alpha_[c])
        return ll / max(int(self.n_k_[c].sum()), 1)

    def _take_sample(self, c, it):
        lay = self._lay
        Kt = self.n_topics
        dt, dt_nnz = self._doc_lists(c)
        nnz = int(dt_nnz.sum())
        kd_ptr = np.zeros(Kt + 1, dtype=np.int64)
        kd_doc = np.empty(nnz, dtype=np.int32)
        kd_count = np.empty(nnz, dtype=np.int32)
        K_._doc_lists_to_postings(lay["cap_ptr"], dt, lay["cshift"], dt_nnz, Kt, kd_ptr, kd_doc,
                                  kd_count)
        tw_ptr, tw_topic, tw_count = rows_csr(self.n_kw_[c])
        s = dict(chain=c, iter=it, kd_ptr=kd_ptr, kd_doc=kd_doc, kd_count=kd_count,
                 tw_ptr=tw_ptr, tw_topic=tw_topic, tw_count=tw_count,
                 n_k=self.n_k_[c].copy(), alpha=self.alpha_[c].copy())
        if self._keep_sample_state:
            s["gz"] = np.concatenate([self.g_[c], self.zg_[c]]).astype(self._gz_file_dtype())
        return s
