"""The TCM document model P_TCM(c | d) for retrieval, and the views of a fitted TCM (topics,
collocations, segmentation): the part of :class:`models.tcm.model.TCM` that reads only the kept samples.
"""
import numba
import numpy as np

from ..common.checkpoint import doc_ranges, release
from ..common.kernels.sparse import DOC_CHUNK, pad_columns
from .score_kernels import phi_table, score_p_c_d, score_p_c_d_per_sample


class TCMDocumentModel:
    """Mixin of :class:`models.tcm.model.TCM`: everything computed from the fitted arrays (``type_*``,
    ``ct_*``, ``dk_*``, ``n_k_samples_``, ``alpha0_samples_``, ``alpha_``, ``p0_len_``)."""

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
        p0, ct = self.p0_len_[lens], (self.ct_type_, self.ct_topic_, self.ct_count_)
        for cs in range(n_cs):  # a sample at a time, the pages of its entries released after it
            phi_table(self.ct_ptr_[cs:cs + 2], *ct, self.n_k_samples_[cs:cs + 1],
                      self.alpha0_samples_[cs:cs + 1], p0, types, self.alpha_, phi[cs:cs + 1],
                      apart[cs:cs + 1])
            for a in ct:
                release(a, self.ct_ptr_[cs], self.ct_ptr_[cs + 1])
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
        out = np.empty((phi.shape[2], self.dk_ptr_.shape[1] - 1))
        phi32, apart = pad_columns(phi.astype(np.float32)), pad_columns(apart)
        rows = (self.dk_topic_, self.dk_count_)  # a document range at a time (doc_ranges)
        for d0, d1 in doc_ranges(self.dk_ptr_, rows, DOC_CHUNK * numba.get_num_threads()):
            score_p_c_d(np.ascontiguousarray(self.dk_ptr_[:, d0:d1 + 1]), *rows, self.alpha_, phi32, apart,
                        out, d0)
        return out.T

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
        score_p_c_d_per_sample(self.dk_ptr_, self.dk_topic_, self.dk_count_, self.alpha_,
                               phi.astype(np.float32), apart, out)
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

    def topic_words(self, topic, top=10, chain=0, terms=None):
        """Most probable terms of ``topic`` as one-word collocations, ``P((w) | t)`` as
        :meth:`p_w_d` uses them, averaged over the kept samples of ``chain``; terms never seated
        alone in the topic's restaurant are left out. Returns (term ids int64, probabilities),
        or (term, probability) pairs with a vocabulary ``terms``."""
        types, score, _ = self.topic_collocations(topic, top=self.n_types_, chain=chain, by="p_c_t")
        one = np.diff(self.type_ptr_)[types] == 1
        types, score = types[one][:top], score[one][:top]
        return self._with_terms(self.type_terms_[self.type_ptr_[types]].astype(np.int64), score, terms)

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
