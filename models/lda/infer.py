"""The LDA document model of Wei & Croft (2006) from the kept samples of a fitted LDA:
P_LDA(w | d) averaged over samples and chains, per sample, for a few documents, and the topic
views (``doc_topics``, ``topic_words``). Kernels: :mod:`models.lda.score_kernels`.
"""
import numba
import numpy as np

from . import kernels as K_
from . import score_kernels as S_
from ..common.checkpoint import release, row_chunks
from ..common.generate import log_dirichlet, over_kept_samples
from ..common.gibbs import concat_ranges


class LDADocumentModel:
    """The document-model half of :class:`models.lda.model.LDA` (and of the kinds built on it), read
    from the inference arrays ``_set_inference_arrays`` sets."""

    # p_w_d: the most bytes of a term's row one document range holds (at most 8 << 16, so that
    # a posting's offset in its range fits uint16); an eighth of a 1 MiB L2, so that the row stays
    # cached beside the postings streaming through and whatever else shares the core
    ROW_BYTES = 1 << 17

    def _constants(self):
        """Per-document constants of the kept samples, computed once per model: inv_len and
        smooth (n_samples, n_docs) of :func:`~models.lda.score_kernels.doc_constants`, their mean
        product, each document's row among the distinct document lengths, and whether every
        sample has the same inv_len (alpha not optimised: equal sums)."""
        if getattr(self, "_doc_consts", None) is None:
            self._sample_pass(None)
        return self._doc_consts

    def _n_blocks(self):
        return max(1, min(len(self.doc_len_), 4 * numba.get_num_threads()))

    def _mean_postings(self):
        """(bounds, off, cnt) for :meth:`p_w_d` (cached per block count): the
        :func:`~models.lda.score_kernels.posting_bounds` of a whole number of document ranges
        per thread, each range's row of a term at most ROW_BYTES (so that it stays in cache
        while every sample's postings add to it; more, shorter ranges cost more than they save),
        and the postings relative to their range (:func:`~models.lda.score_kernels.range_postings`)."""
        threads, D = numba.get_num_threads(), len(self.doc_len_)
        per_thread = -(-8 * D // (threads * min(self.ROW_BYTES, 8 << 16)))
        n_blocks = max(1, min(D, threads * per_thread))
        if getattr(self, "_doc_consts", None) is None or n_blocks not in self._doc_consts[-1]:
            self._sample_pass(n_blocks)
        return self._doc_consts[-1][n_blocks]

    def _kd_chunks(self):
        """The kept samples a pass over the document postings takes at a time (:func:`row_chunks`)."""
        entry = self.kd_doc_.itemsize + self.kd_count_.itemsize
        return row_chunks(self.kd_ptr_[:, 0], self.kd_ptr_[:, -1], entry, numba.get_num_threads())

    def _sample_pass(self, n_blocks):
        """One pass over the document postings of the kept samples, a few samples at a time,
        computing what :meth:`_constants` holds (when not yet computed) and, unless
        ``n_blocks`` is None, :meth:`_mean_postings`'s arrays for ``n_blocks`` (counts uint16, or
        int32 from the first chunk with a count past uint16), the constants then from the same
        read of the postings (:func:`~models.lda.score_kernels.range_postings`); a memory-mapped
        file's pages of each chunk are released after it
        (:func:`~models.common.checkpoint.release`), so the pass holds a chunk, not the table."""
        n_cs, D = self.kd_ptr_.shape[0], len(self.doc_len_)
        K = self.kd_ptr_.shape[1] - 1
        consts = getattr(self, "_doc_consts", None) is None
        beta = float(self.beta)
        smooth = np.empty((n_cs if consts else 0, D))
        if n_blocks is not None:
            bounds = np.empty((n_cs, K, n_blocks + 1), dtype=np.int64)
            off = np.empty(len(self.kd_doc_), dtype=np.uint16)
            cnt = np.empty(len(self.kd_count_), dtype=np.uint16)
        for c0, c1 in self._kd_chunks():
            ptr = self.kd_ptr_[c0:c1]
            if n_blocks is None:
                S_.doc_constants(ptr, self.kd_doc_, self.kd_count_, self.n_k_samples_[c0:c1], beta,
                                 self.n_terms_, smooth[c0:c1])
            else:
                bounds[c0:c1] = S_.posting_bounds(ptr, self.kd_doc_, D, n_blocks)
                args = (bounds[c0:c1], self.kd_doc_, self.kd_count_, D, self.n_k_samples_[c0:c1], beta,
                        self.n_terms_, off)
                if S_.range_postings(*args, cnt, smooth[c0:c1]) > np.iinfo(cnt.dtype).max:
                    cnt = cnt.astype(np.int32)  # the counts of the chunks before fit either
                    S_.range_postings(*args, cnt, smooth[c0:c1])
            for a in (self.kd_doc_, self.kd_count_):
                release(a, ptr[0, 0], ptr[-1, -1])
        if consts:
            inv_len, base = np.empty((n_cs, D)), np.empty(D)
            S_.inv_lengths(self.alpha_samples_, self.doc_len_, inv_len)
            S_.mean_constants(inv_len, smooth, base)
            lengths, len_slot = np.unique(self.doc_len_, return_inverse=True)
            shared = bool((inv_len == inv_len[:1]).all())
            self._doc_consts = (inv_len, smooth, base, lengths, len_slot.astype(np.int64), shared,
                                {})
        if n_blocks is not None:
            self._doc_consts[-1][n_blocks] = (bounds, off, cnt)

    def _alpha_phi(self, term_ids, rows=None):
        """:func:`~models.lda.score_kernels.alpha_phi` of ``term_ids``, from the whole table or
        from :meth:`_term_rows` of them (``rows``)."""
        ptr, topic, count = rows or (self.tw_ptr_, self.tw_topic_, self.tw_count_)
        return S_.alpha_phi(ptr, topic, count, self.n_k_samples_, self.alpha_samples_, float(self.beta),
                            self.n_terms_, np.arange(len(term_ids)) if rows else term_ids)

    def _term_rows(self, term_ids):
        """The topic-word rows of ``term_ids`` in every kept sample as a table of their own:
        ptr (n_samples, n_query_terms + 1) int64 into topics and counts, copied a sample at a
        time, the pages of each sample's rows of a memory-mapped file released after it
        (:func:`~models.common.checkpoint.release`): touching a row maps the pages around it
        too, so a batch holds its terms' rows, not the table."""
        n_cs, T = self.tw_ptr_.shape[0], len(term_ids)
        starts = self.tw_ptr_[:, term_ids]
        lens = self.tw_ptr_[:, term_ids + 1] - starts
        ends = np.concatenate([[0], np.cumsum(lens.ravel())])
        ptr = ends[np.arange(n_cs)[:, None] * T + np.arange(T + 1)]
        topic = np.empty(ends[-1], dtype=self.tw_topic_.dtype)
        count = np.empty(ends[-1], dtype=self.tw_count_.dtype)
        for cs in range(n_cs):
            at = concat_ranges(starts[cs], lens[cs])
            topic[ptr[cs, 0]:ptr[cs, T]] = self.tw_topic_[at]
            count[ptr[cs, 0]:ptr[cs, T]] = self.tw_count_[at]
            for a in (self.tw_topic_, self.tw_count_):
                release(a, self.tw_ptr_[cs, 0], self.tw_ptr_[cs, -1])
        return ptr, topic, count

    def _per_sample(self, term_ids):
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        inv_len, smooth = self._constants()[:2]
        out = np.empty((self.kd_ptr_.shape[0], len(self.doc_len_), len(term_ids)))
        S_.p_w_d_per_sample(self.kd_ptr_, self.kd_doc_, self.kd_count_, self.tw_ptr_, self.tw_topic_,
                            self.tw_count_, self.n_k_samples_, float(self.beta), inv_len, smooth,
                            self._alpha_phi(term_ids), term_ids, self._n_blocks(), out)
        return out

    def p_w_d(self, term_ids):
        """P_LDA(w | d) for every document, averaged over all kept samples of all chains.

        ``P_LDA(w | d) = sum_k (n_dk + alpha_k) / (n_d + sum(alpha)) * (n_kw + beta) / (n_k + V beta)``
        (Wei & Croft 2006, eq. 3), per sample. A term costs the length of the postings of the
        topics it occurs in, summed straight into the mean (:mod:`models.lda.score_kernels`); the
        first call also computes the per-document constants of every sample.

        Parameters
        ----------
        term_ids : array-like of int, shape (n_query_terms,)

        Returns
        -------
        ndarray of shape (n_docs, n_query_terms), float64
        """
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        postings = self._mean_postings()  # first: one pass computes the constants too
        inv_len, _, base, lengths, len_slot, shared, _ = self._constants()
        rows = self._term_rows(term_ids)
        ap = self._alpha_phi(term_ids, rows)
        # mean over samples of ap / (n_d + A): a function of the document's length alone
        by_len = np.empty((len(term_ids), len(lengths)))
        S_.len_means(ap, self.alpha_samples_.sum(axis=1), lengths, by_len)
        out = np.empty((len(term_ids), len(self.doc_len_)))
        S_.p_w_d_mean(*postings, *rows, self.n_k_samples_, float(self.beta), self.n_terms_, inv_len,
                      base, len_slot, by_len, np.arange(len(term_ids)), shared, out)
        return out.T

    def p_w_d_rows(self, term_ids, docs):
        """:meth:`p_w_d` of the documents ``docs`` only, (len(docs), len(term_ids)): per kept
        sample theta of those documents times the terms' phi columns, so the cost is theirs, not
        the collection's (equal to ``p_w_d(term_ids)[docs]`` up to rounding); it reads every
        sample's document postings, one sample at a time."""
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        uniq, back = np.unique(self._check_docs(docs, len(self.doc_len_)), return_inverse=True)
        V, K, b = self.n_terms_, self.n_topics, float(self.beta)
        row = np.full(len(self.doc_len_), -1, dtype=np.int64)
        row[uniq] = np.arange(len(uniq))
        n_cs, T = self.kd_ptr_.shape[0], len(term_ids)
        out = np.zeros((len(uniq), T))
        for cs in range(n_cs):
            lo, hi = self.kd_ptr_[cs, 0], self.kd_ptr_[cs, K]
            r = row[self.kd_doc_[lo:hi]]
            keep = np.flatnonzero(r >= 0)
            topic = np.searchsorted(self.kd_ptr_[cs], lo + keep, side="right") - 1
            n_dk = np.bincount(r[keep] * K + topic, weights=self.kd_count_[lo:hi][keep],
                               minlength=len(uniq) * K).reshape(len(uniq), K)
            alpha = self.alpha_samples_[cs]
            theta = (n_dk + alpha) / (self.doc_len_[uniq] + alpha.sum())[:, None]
            # theta phi = theta (b / (n_k + V b)) + the sum over the terms' topic postings
            norm = 1.0 / (self.n_k_samples_[cs] + V * b)
            out += (theta @ (b * norm))[:, None]
            a, z = self.tw_ptr_[cs, term_ids], self.tw_ptr_[cs, term_ids + 1]
            n = z - a
            at = concat_ranges(a, n)
            k = self.tw_topic_[at].astype(np.int64)
            cols = np.repeat(np.arange(T), n)
            for i in range(len(uniq)):
                out[i] += np.bincount(cols, weights=theta[i, k] * self.tw_count_[at] * norm[k], minlength=T)
            # a sample at a time: a mapped file's pages of this one are not needed again
            for arr, ptr in ((self.kd_doc_, self.kd_ptr_), (self.kd_count_, self.kd_ptr_),
                             (self.tw_topic_, self.tw_ptr_), (self.tw_count_, self.tw_ptr_)):
                release(arr, ptr[cs, 0], ptr[cs, -1])
        return (out / n_cs)[back]

    def p_w_d_per_sample(self, term_ids):
        """P_LDA(w | d) of every kept sample: ndarray of shape (n_chains, n_samples, n_docs, n_terms)."""
        per = self._per_sample(term_ids)
        return per.reshape(self.n_chains, per.shape[0] // self.n_chains, *per.shape[1:])

    def phi_matrix(self, cs):
        """Dense phi (n_topics, n_terms) of kept sample ``cs`` (= chain * n_samples + sample)."""
        self._check_fitted()
        V = self.tw_ptr_.shape[1] - 1
        lo, hi = self.tw_ptr_[cs, 0], self.tw_ptr_[cs, V]
        cnt = np.zeros((self.n_topics, V))
        words = np.repeat(np.arange(V), np.diff(self.tw_ptr_[cs]))
        cnt[self.tw_topic_[lo:hi].astype(np.int64), words] = self.tw_count_[lo:hi]
        b = float(self.beta)
        return (cnt + b) / (self.n_k_samples_[cs][:, None] + V * b)

    def sample_word_probs(self, n_docs, seed=0):
        """theta ~ Dir(alpha of the kept sample), p = theta phi (see :class:`TopicModel`)."""
        self._check_fitted()
        rng = np.random.default_rng(seed)
        return over_kept_samples(self.alpha_samples_.shape[0], n_docs, lambda cs, m: np.exp(
            log_dirichlet(rng, self.alpha_samples_[cs], m)) @ self.phi_matrix(cs))

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
            K_._add_doc_counts(self.kd_ptr_[cs], self.kd_doc_, self.kd_count_, doc, t)
            theta += t / (self.doc_len_[doc] + a.sum())
        theta /= len(css)
        ids = np.argsort(-theta, kind="stable")[:top]
        return ids.astype(np.int64), theta[ids]

    def topic_words(self, topic, top=10, chain=0, terms=None):
        """Most probable terms of ``topic``: phi averaged over the kept samples of ``chain``.
        Returns (term ids int64, probabilities float64), or (term, probability) pairs with a
        vocabulary ``terms``."""
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
        return self._with_terms(ids.astype(np.int64), phi[ids], terms)
