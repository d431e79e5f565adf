"""Tree-based LDA (Hu & Boyd-Graber 2012) with a synset prior tree, trained by collapsed Gibbs
sampling of every token's (topic, path) with the samplers of :mod:`models.tree_lda.kernels`,
and kept as a document model: P_TREE(w | d) = sum_k theta_dk P(w | k), where P(w | k) sums over
the paths ending at w the product of the posterior edge probabilities, averaged over the kept
samples of all chains.

The prior tree comes from synsets of term ids (``fit(corpus, synsets=...)``; retrieval reads
them from WordNet through the index's analyzer, see ``retrieval/adapters/tree_lda.py``) and is
built by :func:`models.tree_lda.tree.build_tree`; with no synsets the model is LDA with beta = beta_root.
"""
import hashlib

import numba
import numpy as np

from . import kernels as T
from . import state as S_
from . import score_kernels as R_
from . import files
from ..common.checkpoint import doc_ranges, pieces, release
from ..common.kernels.rng import make_rng_states
from ..common.kernels.sparse import DOC_CHUNK, pad_columns
from ..common.gibbs import GibbsModel, concat_ranges, rows_csr, stack_ptrs
from .tree import build_tree, synset_arrays
from .foldin import TreeFoldInMixin
from .shards import chain_work, sweep_chains, tree_shards


class TreeLDA(TreeFoldInMixin, GibbsModel):
    """Tree-based LDA with a synset (WordNet) prior, trained by collapsed Gibbs sampling with
    several chains and kept as a document model.

    Parameters
    ----------
    n_topics : int, default=100
        K, the number of topics.
    alpha : float or None, default=None
        Symmetric document-topic prior per topic; None means ``50 / n_topics`` (as for LDA).
    beta_root : float, default=0.01
        Prior of the root's edge to a word's own leaf (a synset node's edge gets beta_root times
        its number of words), the weak prior: with no synsets the model is LDA with this beta.
    beta_synset : float, default=100.0
        Prior of every edge inside a synset subtree, the strong prior that makes a topic give its
        synset words similar mass (per-edge convention, see :mod:`models.tree_lda.tree`).
    merge : bool, default=False
        Join synsets that share a word into one subtree (tree-TM's default) instead of one
        subtree per synset (the paper's tree).
    sampler : {"naive", "fast", "fast-rb", "fast-rb-sd", "fast-rb-sw", "fast-rb-sdw"}, default="fast-rb-sdw"
        The exact sampler of the joint (topic, path) conditional (section 4 of the paper); all
        draw from the same distribution, they differ in speed only.
    wordnet : str or None, default=None
        Directory of the WordNet 3.0 ``data.*`` files retrieval reads the synsets from when it
        trains on an index. None: $WORDNET_DIR, else /usr/share/wordnet.
    n_chains : int, default=3
        Independent Markov chains, each with its own seed stream, swept in parallel.
    n_shards : int, default=1
        S: fixed document shards and word groups (whole synset components) sampled in parallel,
        S sub-steps a sweep, each shard with its own rng stream and a private copy of the root's
        counts merged after every sub-step (see :mod:`models.tree_lda.shards`). Results depend on
        ``n_shards`` and ``seed``, never on ``n_jobs``; 1 is the exact sequential sampler.
    n_iter : int, default=100
        Total Gibbs sweeps per chain (burn-in included).
    burn_in : int or None, default=None
        Sweeps before the first kept sample; None: ``n_iter // 2``.
    sample_every : int or None, default=None
        Sweeps between kept samples; None: ``max(1, (n_iter - burn_in) // 5)``.
    seed : int, default=0
    n_jobs : int or None, default=None
        Threads for the (chain, shard) tasks of a sweep, laid end to end over them (3 chains on
        2 threads take 1.5 chain sweeps: one chain's sweep is cut in two at a document boundary,
        its parts swept in turn on two threads); results never depend on it. None: all numba
        threads.
    log_lik_every : int, default=10
        Record log p(w, z, paths) per token of every chain every this many sweeps (and at the end).
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
    tree_ : models.tree_lda.tree.Tree
        The prior tree; ``tree_.synsets`` are the kept (possibly merged) synsets.
    z_, zp_ : ndarray of shape (n_chains, n_tokens), int32
        Topic and path (index into the tree's paths) of every token, after fit (a checkpoint
        holds them narrower, see :meth:`_zzp_file_dtype`).
    log_lik_ : ndarray of shape (n_records, n_chains), float64
        The joint log p(w, z, paths) per token (theta and the node distributions integrated
        out); ``log_lik_iter_`` gives the sweep of every row.
    sample_iter_, n_iter_, fingerprint_
        As for :class:`models.lda.model.LDA`.
    """

    kind = "tree-lda"
    training_inputs = ("synsets",)
    quick_params = dict(n_topics=4, n_chains=2, n_iter=8, burn_in=4, sample_every=2, seed=3)
    _STATE = ("zzp", "alpha")
    _INFERENCE_ARRAYS = ("ne_ptr", "ne_topic", "ne_count", "dk_ptr", "dk_topic", "dk_count",
                         "alpha_samples", "doc_len", "syn_ptr", "syn_terms")
    _FILE_SPEC = files.SPEC  # what a model file and a checkpoint must hold
    def __init__(self, *, n_topics=100, alpha=None, beta_root=0.01, beta_synset=100.0, merge=False,
                 sampler="fast-rb-sdw", wordnet=None, n_chains=3, n_shards=1, n_iter=100,
                 burn_in=None, sample_every=None, seed=0, n_jobs=None, log_lik_every=10,
                 callback_every=1, checkpoint_every=10, executor="local"):
        self.n_topics = n_topics
        self.alpha = alpha
        self.beta_root = beta_root
        self.beta_synset = beta_synset
        self.merge = merge
        self.sampler = sampler
        self.wordnet = wordnet
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
        self._check_bool("merge")
        self._check_choice("sampler", T.SAMPLERS)
        if self.wordnet is not None and not isinstance(self.wordnet, str):
            raise ValueError(f"wordnet must be a directory name or None, got {self.wordnet!r}")
        self._check_corpus(corpus)

    def _alpha0(self):
        return 50.0 / self.n_topics if self.alpha is None else float(self.alpha)

    # -- training -----------------------------------------------------------------------------

    def fit(self, corpus, callback=None, checkpoint=None, synsets=()):
        """Train all chains on ``corpus`` with the prior tree of ``synsets``.

        Parameters
        ----------
        corpus : Corpus
        callback : callable or None
            ``callback(model, iteration, n_iter)`` after every ``callback_every`` sweeps.
        checkpoint : str or PathLike or None
            Checkpoint file to resume from and rewrite (see :meth:`GibbsModel.fit`); it is tied
            to the corpus and the synsets.
        synsets : iterable of iterables of int
            Term-id synsets; those with fewer than two distinct terms are dropped.

        Returns
        -------
        self
        """
        self._check_params(corpus)
        try:
            synsets = [[int(t) for t in s] for s in synsets]
        except (TypeError, ValueError):
            raise ValueError("synsets must be an iterable of iterables of term ids") from None
        self.tree_ = build_tree(synsets, corpus.n_terms, float(self.beta_root),
                                float(self.beta_synset), bool(self.merge))
        if self.tree_.n_paths > np.iinfo(np.int32).max:  # zp_ holds path ids as int32
            raise ValueError(f"the prior tree has {self.tree_.n_paths} paths, more than int32 holds")
        self.n_synsets_in_ = self.tree_.n_synsets_in
        return self._fit_with_threads(corpus, callback, checkpoint)

    def _corpus_hash(self, corpus):
        # a checkpoint holds paths of one tree: tie it to the synsets as well as the tokens
        h = hashlib.sha256(super()._corpus_hash(corpus).encode())
        for a in synset_arrays(self.tree_.synsets):
            h.update(a.tobytes())
        return h.hexdigest()[:16]

    def _build_layout(self, corpus):
        tree = self.tree_
        self._corpus = corpus
        self._path_prior = tree.path_prior()
        self.doc_len_ = np.diff(corpus.doc_ptr).astype(np.int64)
        self._s_bound = None
        self._work = None
        self._shards = tree_shards(corpus, tree, self.n_shards)
        self._cache = {}

    def _alloc_chain_state(self, corpus):
        C, K, N, D = self.n_chains, self.n_topics, corpus.n_tokens, corpus.n_docs
        M = self.tree_.n_nodes
        self.z_ = np.zeros((C, N), dtype=np.int32)
        self.zp_ = np.zeros((C, N), dtype=np.int32)
        self.n_e_ = np.zeros((C, M, K), dtype=np.int32)
        self.n_i_ = np.zeros((C, M, K), dtype=np.int32)
        self.n_dk_ = np.zeros((C, D, K), dtype=np.int32)
        self.inv_ = np.zeros((C, M, K))

    def _rebuild_counts(self, corpus, c, zeroed=False):
        t = self.tree_
        S_.build_counts(corpus.doc_ptr, self.z_[c], self.zp_[c], t.path_edges, t.path_len,
                        t.parent, t.beta_sum, self.n_e_[c], self.n_i_[c], self.n_dk_[c],
                        self.inv_[c], zeroed)

    def _start(self, corpus):
        C, K = self.n_chains, self.n_topics
        # stream [c, 0] starts chain c: with one shard, the streams of the sequential sampler
        self.rng_ = make_rng_states(self.seed, C, self.n_shards)
        self.alpha_ = np.full((C, K), self._alpha0())
        for c in range(C):
            S_.init_random(corpus.term_ids, self.tree_.word_path_ptr, K, self.z_[c], self.zp_[c],
                           self.rng_[c, 0])
            # the arrays are fresh zeros: leaves' rows of n_i and inv are never touched
            self._rebuild_counts(corpus, c, zeroed=True)

    def _bounds(self):
        """Every chain's s_bound (eq. 6) of every word, (C, V), computed once for a fit."""
        if getattr(self, "_s_bound", None) is None:
            self._s_bound = np.stack([T.path_bound(self.tree_, a) for a in self.alpha_])
            self._work = None
        return self._s_bound

    def _step(self, corpus, it):
        t = self.tree_
        self._bounds()
        if getattr(self, "_work", None) is None and self.sampler != "naive":
            # the sparse sweeps' tables and lists, kept from sweep to sweep
            self._work = chain_work(t.word_path_ptr, t.path_edges, t.path_len, t.parent, t.beta,
                                    t.beta_sum, self._path_prior, self._s_bound, self.n_topics)
        sweep_chains(T.SAMPLERS.index(self.sampler), self._shards, self.z_, self.zp_,
                     t.word_path_ptr, t.path_edges, t.path_len, t.beta, t.beta_sum,
                     self._path_prior, self._s_bound, self.n_e_, self.n_i_, self.n_dk_, self.inv_,
                     self.alpha_, self.rng_.reshape(self.n_chains, self.n_shards, 4),
                     work=self._work)

    def _ray_runner(self, executor):
        """The runner of a :class:`models.common.executors.ray.RayExecutor` (imports Ray)."""
        if getattr(executor, "state", "driver") == "workers":
            from .ray_state import sharded_runner

            return sharded_runner(executor, self)
        from .ray import runner

        return runner(executor, self)

    def _log_lik(self, c):
        t = self.tree_
        ll = S_.log_lik(t.parent, t.beta, t.beta_sum, self.n_e_[c], self.n_i_[c], self.n_dk_[c],
                        self._corpus.doc_ptr, self.alpha_[c])
        return ll / max(self._corpus.n_tokens, 1)

    @property
    def zzp_(self):
        """Every chain's state as one row: topics of the tokens, then their paths (path ids), int32."""
        if not hasattr(self, "z_"):
            if hasattr(self, "_zzp_full"):  # loaded from save(full=True)
                return self._zzp_full
            raise AttributeError("zzp_ is only available after fit or for models saved with full=True")
        return np.concatenate([self.z_, self.zp_], axis=1)

    def _zzp_file_dtype(self):
        """uint16 where every topic and every word's path count fit: a checkpoint and its kept
        samples then hold each token's path as its rank among its word's paths
        (:func:`files.stored_paths`), 4 bytes a token instead of int32's 8; the dtype says which
        form a file holds."""
        return files.path_dtype(self.tree_.word_path_ptr, self.n_topics)

    def _zzp_pieces(self, c, dtype):
        """Chain c's row of :attr:`zzp_` as a file holds it in ``dtype``, in pieces."""
        ptr, terms, N = self.tree_.word_path_ptr, self._corpus.term_ids, self.z_.shape[1]
        yield self.z_[c].astype(dtype)
        for lo in range(0, N, files.STEP):
            yield files.stored_paths(self.zp_[c, lo:lo + files.STEP], terms[lo:lo + files.STEP], ptr, dtype)

    def _checkpoint_assignments(self):
        """``zzp_`` chain by chain (z, then zp, of each) in :meth:`_zzp_file_dtype`: a checkpoint
        never joins them."""
        C, N = self.z_.shape
        dtype = self._zzp_file_dtype()
        return (C, 2 * N), dtype, (p for c in range(C) for p in self._zzp_pieces(c, dtype))

    def _set_saved_assignments(self, zzp):
        self._zzp_full = zzp

    def _set_chain_state(self, corpus, c, zzp):
        N = corpus.n_tokens
        self.z_[c] = zzp[:N]
        files.path_ids(zzp[N:], corpus.term_ids, self.tree_.word_path_ptr, self.zp_[c])
        self._rebuild_counts(corpus, c)

    def _take_sample(self, c, it):
        ne_ptr, ne_topic, ne_count = rows_csr(self.n_e_[c])
        dk_ptr, dk_topic, dk_count = rows_csr(self.n_dk_[c])
        s = dict(chain=c, iter=it, ne_ptr=ne_ptr, ne_topic=ne_topic, ne_count=ne_count,
                 dk_ptr=dk_ptr, dk_topic=dk_topic, dk_count=dk_count, alpha=self.alpha_[c].copy())
        if self._keep_sample_state:
            s["zzp"] = np.concatenate(list(self._zzp_pieces(c, self._zzp_file_dtype())))
        return s

    def _finalize(self, corpus):
        samples = self._sorted_samples()
        self.ne_ptr_, self.ne_topic_ = stack_ptrs([s["ne_ptr"] for s in samples],
                                                  [s["ne_topic"] for s in samples])
        self.ne_count_ = np.concatenate([s["ne_count"] for s in samples])
        self.dk_ptr_, self.dk_topic_ = stack_ptrs([s["dk_ptr"] for s in samples],
                                                  [s["dk_topic"] for s in samples])
        self.dk_count_ = np.concatenate([s["dk_count"] for s in samples])
        self.alpha_samples_ = np.stack([s["alpha"] for s in samples]).astype(np.float64)
        self.syn_ptr_, self.syn_terms_ = synset_arrays(self.tree_.synsets)
        self._s_bound = None
        self._work = None
        self._cache = {}

    def _after_load(self, header):
        syn = [self.syn_terms_[a:b].tolist() for a, b in zip(self.syn_ptr_[:-1], self.syn_ptr_[1:])]
        # the stored synsets are the kept (merged) ones: rebuilding gives the same tree
        self.tree_ = build_tree(syn, self.n_terms_, float(self.beta_root), float(self.beta_synset),
                                bool(self.merge))
        self._cache = {}

    # -- kept samples -------------------------------------------------------------------------

    def _dense(self, cs, which):
        """Dense counts of kept sample cs: "ne" (n_nodes, K) edge counts or "dk" (D, K)."""
        ptr, cols, cnt = (getattr(self, f"{which}_{x}_") for x in ("ptr", "topic", "count"))
        rows = self.tree_.n_nodes if which == "ne" else len(self.doc_len_)
        lo, hi = ptr[cs, 0], ptr[cs, rows]
        out = np.zeros((rows, self.n_topics))
        r = np.repeat(np.arange(rows), np.diff(ptr[cs]))
        out[r, cols[lo:hi].astype(np.int64)] = cnt[lo:hi]
        return out

    def edge_counts(self, cs):
        """Edge counts (n_nodes, K) of kept sample cs = chain * n_samples + s."""
        self._check_fitted()
        return self._dense(cs, "ne")

    def _rows(self, cs, which, rows):
        """Dense counts (len(rows), K) of some rows of kept sample cs ("ne": nodes, "dk":
        documents), read from their sparse rows."""
        ptr, cols, cnt = (getattr(self, f"{which}_{x}_") for x in ("ptr", "topic", "count"))
        rows = np.asarray(rows, dtype=np.int64)
        lo, n = ptr[cs, rows], ptr[cs, rows + 1] - ptr[cs, rows]
        at = concat_ranges(lo, n)
        out = np.zeros((len(rows), self.n_topics))
        out[np.repeat(np.arange(len(rows)), n), cols[at].astype(np.int64)] = cnt[at]
        return out

    def _column(self, cs, which, topic):
        """Counts of ``topic`` in every row of kept sample cs, (n_rows,)."""
        ptr, cols, cnt = (getattr(self, f"{which}_{x}_") for x in ("ptr", "topic", "count"))
        lo, hi = ptr[cs, 0], ptr[cs, -1]
        sel = np.flatnonzero(cols[lo:hi] == topic) + lo
        out = np.zeros(ptr.shape[1] - 1)
        out[np.searchsorted(ptr[cs], sel, side="right") - 1] = cnt[sel]
        return out

    def _topic_totals(self, cs):
        """Tokens of every topic in kept sample cs, (K,)."""
        key = ("n_k", cs)
        if key not in self._cache:
            lo, hi = self.dk_ptr_[cs, 0], self.dk_ptr_[cs, -1]
            n_k = np.zeros(self.n_topics)
            for topic, count in pieces(self.dk_topic_[lo:hi], self.dk_count_[lo:hi]):
                n_k += np.bincount(topic, weights=count, minlength=self.n_topics)
            self._cache[key] = n_k
        return self._cache[key]

    def _phi_terms(self, cs, words):
        """P(w | k) of the terms ``words`` under kept sample cs, (len(words), K): over each
        term's paths, the product of the posterior probabilities of their edges (what
        ``edge_word_probs`` gives for every term), from the count rows of those edges and of
        their parents only."""
        tree, K = self.tree_, self.n_topics
        words = np.asarray(words, dtype=np.int64)
        first, n_paths = tree.word_path_ptr[words], np.diff(tree.word_path_ptr)[words]
        paths = concat_ranges(first, n_paths)
        edges = tree.path_edges[paths]
        nodes = np.unique(edges[edges >= 0])
        parents = tree.parent[nodes]
        need = np.union1d(nodes, parents[parents > 0])
        counts = self._rows(cs, "ne", need)
        # tokens through a node are those of its own edge; through the root, all of the topic's
        at_parent = counts[np.minimum(np.searchsorted(need, parents), len(need) - 1)]
        through = np.where((parents > 0)[:, None], at_parent, self._topic_totals(cs)[None, :])
        edge_p = (tree.beta[nodes, None] + counts[np.searchsorted(need, nodes)]) / (
            tree.beta_sum[parents, None] + through)
        path_p = np.ones((len(paths), K))
        for j in range(edges.shape[1]):
            e = edges[:, j]
            ok = e >= 0
            path_p[ok] *= edge_p[np.searchsorted(nodes, e[ok])]
        # a word's paths are consecutive rows (every word has one): added path after path, in
        # the order of a sum into zeros, a vector operation per path rank instead of per row
        first = np.cumsum(n_paths) - n_paths
        out = path_p[first]
        for j in range(1, int(n_paths.max(initial=1))):
            more = np.flatnonzero(n_paths > j)
            out[more] += path_p[first[more] + j]
        for a in (self.ne_topic_, self.ne_count_):  # a mapped file's pages of the sample's rows
            release(a, self.ne_ptr_[cs, 0], self.ne_ptr_[cs, -1])
        return out

    def _theta_doc(self, cs, doc):
        """theta of one document under kept sample cs: (n_dk + alpha_k) / (n_d + sum alpha)."""
        a = self.alpha_samples_[cs]
        return (self._rows(cs, "dk", [doc])[0] + a) / (self.doc_len_[doc] + a.sum())

    def topic_mass(self, cs):
        """sum over documents of theta_dk under kept sample cs, (K,): the topics' sizes."""
        a = self.alpha_samples_[cs]
        inv = 1.0 / (self.doc_len_ + a.sum())
        lo, hi = self.dk_ptr_[cs, 0], self.dk_ptr_[cs, -1]
        docs = np.repeat(np.arange(len(self.doc_len_)), np.diff(self.dk_ptr_[cs]))
        return np.bincount(self.dk_topic_[lo:hi], weights=self.dk_count_[lo:hi] * inv[docs],
                           minlength=self.n_topics) + a * inv.sum()

    # -- document model -----------------------------------------------------------------------

    def _query_tables(self, term_ids):
        """phi (n_cs, K, T) of the terms, float32 (the kernels' precision), and sum_k a_k phi_kw
        (n_cs, T), float64, per kept sample."""
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        phi = np.stack([self._phi_terms(cs, term_ids).T for cs in range(self.ne_ptr_.shape[0])])
        ap = np.ascontiguousarray(np.einsum("ck,ckt->ct", self.alpha_samples_, phi))
        return np.ascontiguousarray(phi, dtype=np.float32), ap

    def p_w_d_per_sample(self, term_ids):
        """P_TREE(w | d) of every kept sample: ndarray (n_chains, n_samples, n_docs, n_terms)."""
        phi, ap = self._query_tables(term_ids)
        out = np.empty((phi.shape[0], len(self.doc_len_), phi.shape[2]))
        R_.p_w_d_per_sample(self.dk_ptr_, self.dk_topic_, self.dk_count_, self.doc_len_,
                            self.alpha_samples_.sum(1), phi, ap, out)
        return out.reshape(self.n_chains, out.shape[0] // self.n_chains, *out.shape[1:])

    def p_w_d(self, term_ids):
        """P_TREE(w | d) = sum_k theta_dk P(w | k) for every document, averaged over all kept
        samples of all chains: ndarray of shape (n_docs, len(term_ids)), float64. A query costs
        the documents' sparse topic rows of every sample (:mod:`models.tree_lda.score_kernels`)."""
        phi, ap = self._query_tables(term_ids)
        out = np.empty((phi.shape[2], len(self.doc_len_)))
        phi, ap = pad_columns(phi), pad_columns(ap)
        rows = (self.dk_topic_, self.dk_count_)  # a document range at a time (doc_ranges)
        for d0, d1 in doc_ranges(self.dk_ptr_, rows, DOC_CHUNK * numba.get_num_threads()):
            R_.p_w_d_mean(np.ascontiguousarray(self.dk_ptr_[:, d0:d1 + 1]), *rows, self.doc_len_[d0:d1],
                          self.alpha_samples_.sum(1), phi, ap, out, d0)
        return out.T

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable topics of ``doc``: theta averaged over the kept samples of ``chain``.
        Returns (topic ids int64, probabilities float64)."""
        self._check_fitted()
        D = len(self.doc_len_)
        if not 0 <= doc < D:
            raise ValueError(f"doc must be in [0, {D}), got {doc!r}")
        css = self._cs_of_chain(chain)
        theta = np.mean([self._theta_doc(cs, doc) for cs in css], axis=0)
        ids = np.argsort(-theta, kind="stable")[:top]
        return ids.astype(np.int64), theta[ids]

    def topic_words(self, topic, top=10, chain=0, terms=None):
        """Most probable terms of ``topic``: P(w | k) averaged over the kept samples of ``chain``.
        Returns (term ids int64, probabilities float64), or (term, probability) pairs with a
        vocabulary ``terms``."""
        self._check_fitted()
        if not 0 <= topic < self.n_topics:
            raise ValueError(f"topic must be in [0, {self.n_topics}), got {topic!r}")
        phi = np.mean([S_.edge_word_probs(self.tree_, self._column(cs, "ne", topic)[:, None])[:, 0]
                       for cs in self._cs_of_chain(chain)], axis=0)
        ids = np.argsort(-phi, kind="stable")[:top]
        return self._with_terms(ids.astype(np.int64), phi[ids], terms)

    def topic_synsets(self, topic, top=5, chain=0):
        """The synset subtrees ``topic`` uses most: (synset indices into ``tree_.synsets``, mean
        token count through the synset node over the kept samples of ``chain``), largest first,
        zero counts left out."""
        self._check_fitted()
        if not 0 <= topic < self.n_topics:
            raise ValueError(f"topic must be in [0, {self.n_topics}), got {topic!r}")
        G = len(self.tree_.synsets)
        first = 1 + self.n_terms_  # synset nodes follow the root and the words' own leaves
        n = np.mean([self._column(cs, "ne", topic)[first:first + G] for cs in self._cs_of_chain(chain)],
                    axis=0) if G else np.zeros(0)
        ids = np.argsort(-n, kind="stable")[:top]
        ids = ids[n[ids] > 0]
        return ids.astype(np.int64), n[ids]
