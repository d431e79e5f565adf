"""Document posteriors and fold-in for aviPAM: a document's posterior is the encoder's, refined
on the document's ELBO (semi-amortized VI) and averaged over draws as the model's
``refine_steps`` and ``doc_samples`` say, and P_TM(w | d) the decoder's for that mixture averaged
over the chains (independent networks), for training and new documents alike.

With C chains of K sub-topics each, a document's mixtures are kept side by side, (C * K,), chain
c's in columns [c K, (c + 1) K), each chain's summing to 1 / C: the document model averaged over
chains is then one product with the chains' topics stacked (C * K, V)."""
import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..common.foldin import FoldedDocs, as_corpus, check_fold_params
from ..common.variational import count_matrix

# Semi-amortized refinement: Adam's step on the per-document variational parameters, and the
# documents refined together.
_REFINE_LR = 0.05
REFINE_BATCH = 500
# Draws whose mixtures are formed together (a batch's memory).
_DRAW_CHUNK = 4
# What a batch's draws are for: a refinement step, the averaged mixture, an ELBO estimate.
_REFINE, _AVERAGE, _ESTIMATE = 0, 1, 2
# What models written before ``refine_steps`` and ``doc_samples`` existed did: one encoder pass,
# the mixture at the posterior means.
_ONE_PASS = dict(refine_steps=0, doc_samples=0)


def batch_draws(seed, batch_no, device, n_levels, chain=0):
    """``draws(purpose, call)``: one torch generator per level, seeded from (seed, batch number,
    purpose, call, chain, level) alone, so that a document's draws depend on its place in the
    input and not on the documents after it (nor on how many steps came before)."""
    import torch

    key = [seed, batch_no] if chain == 0 else [seed, batch_no, chain]

    def draws(purpose, call):
        keys = np.random.SeedSequence(key[:2] + [purpose, call] + key[2:]).spawn(n_levels)
        return [torch.Generator(device=device).manual_seed(int(k.generate_state(1, np.uint64)[0] >> 1))
                for k in keys]
    return draws


def refine_posteriors(net, docs, tw, draws, steps):
    """The encoder's variational parameters of the documents ``docs`` (:class:`Docs`, ``tw``
    the topics at their entries: ``net.pair_topics``), then ``steps`` Adam steps
    on the sum of their ELBOs with the decoder fixed (semi-amortized VI, Kim et al. 2018),
    one fresh draw per step: every document's parameters move on its own ELBO alone (Adam
    is elementwise). Call it with torch at one thread (:meth:`AVIFoldInMixin._map_batches`)."""
    import torch

    with torch.no_grad():
        params = net.posterior_params(docs)
    if not steps:
        return params
    params = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.Adam(params, lr=_REFINE_LR)
    with torch.enable_grad():
        for step in range(steps):
            eps = net.noise(params, 1, draws(_REFINE, step), REFINE_BATCH)
            mix, kl = net.mix_kl(params, eps)
            loss = (kl - net.expected_log_lik(docs, mix, tw)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [p.detach() for p in params]


# Pairs (or documents x terms) scored per block, bounding the memory of a block.
_BLOCK = 1 << 16


def chain_block(mix, n_chains, chain):
    """Chain ``chain``'s mixtures (rows sum to 1) of side-by-side mixtures ``mix`` (.., C * K)."""
    K = mix.shape[-1] // n_chains
    block = mix[..., chain * K:(chain + 1) * K]
    return block * n_chains if n_chains > 1 else block


class AVIFoldIn(FoldedDocs):
    """New documents encoded by an aviPAM model (see :class:`FoldedDocs`); ``doc_topics_`` are
    the sub-topic mixtures of chain ``chain``, ``chain_mix_`` those of every chain side by side."""

    def __init__(self, model, doc_len, mix, params, chain=0):
        self.model = model
        self.doc_len_ = doc_len
        self.chain_mix_ = mix
        self.doc_topics_ = chain_block(mix, model.n_chains, chain)
        self.params_ = params

    def _product_rows(self, mix):
        """log p(w | d) over the whole vocabulary for the mixtures ``mix`` (product decoder),
        normalised as :meth:`models.avipam.model.AVIPAM._product_doc_tables` normalises training docs."""
        m = self.model
        logits = mix @ m.beta_.astype(np.float64)
        div = np.linalg.norm(logits, axis=1) + 1e-8 if m.norm == "l2" else np.ones(len(mix))
        z = (logits - m.dec_shift_) * m.dec_scale_ / div[:, None]
        top = z.max(1, keepdims=True)
        return z - (top + np.log(np.exp(z - top).sum(1, keepdims=True)))

    def _p_pairs(self, pair_ptr, pair_term):
        m = self.model
        doc = np.repeat(np.arange(self.n_docs), np.diff(pair_ptr))
        out = np.empty(len(pair_term))
        if m.decoder == "product":
            V = m.n_terms_
            step = max(1, _BLOCK // max(V, 1))
            for lo in range(0, self.n_docs, step):
                hi = min(self.n_docs, lo + step)
                rows = self._product_rows(self.doc_topics_[lo:hi])
                sel = slice(pair_ptr[lo], pair_ptr[hi])
                out[sel] = np.exp(rows[doc[sel] - lo, pair_term[sel]])
            return out
        tw = m.topic_word_.astype(np.float64)
        for lo in range(0, len(pair_term), _BLOCK):
            sel = slice(lo, lo + _BLOCK)
            out[sel] = np.einsum("ik,ki->i", self.chain_mix_[doc[sel]], tw[:, pair_term[sel]])
        return out


def normalise_chains(mix, n_chains):
    """Every chain's mixtures of ``mix`` (n_docs, C * K) scaled in place to sum to 1 / C."""
    K = mix.shape[1] // n_chains
    for c in range(n_chains):
        block = mix[:, c * K:(c + 1) * K]
        block /= block.sum(axis=1, keepdims=True) * n_chains if n_chains > 1 else block.sum(axis=1, keepdims=True)
    return mix


class AVIFoldInMixin:
    """Document posteriors of aviPAM: ``transform``, ``fold_in``, ``elbo``."""

    def _encode(self, X, threads, stage=None, first_batch=0, normalise=True):
        """Sub-topic mixtures of the rows of the count matrix ``X``, every chain's side by side:
        the encoder's posteriors, refined by ``refine_steps`` steps on each document's ELBO, then
        the posterior mean of the mixture over ``doc_samples`` draws (or the mixture at every
        node's mean logits when ``doc_samples`` is 0). Draws come from streams seeded by ``seed``;
        ``threads`` batches are refined side by side. ``stage(what, done, total)``, if given,
        hears of every batch done. A part of a larger matrix encoded apart: ``first_batch``, the
        number of the batch its first row starts (its rows get that matrix's draws), and
        ``normalise=False``, the mixtures left for :func:`normalise_chains` of the whole."""
        import torch

        def mean_mix(lo, net, _, params, draws):
            with torch.no_grad():
                if not self.doc_samples:
                    return net.mix_kl(params)[0].mean(0).cpu().numpy()
                eps = net.noise(params, self.doc_samples, draws(_AVERAGE, 0), REFINE_BATCH)
                # the draws' mixtures a few at a time: a level's (S, B, P, C) logits stay small
                mix = torch.cat([net.mix_kl(params, [e[s:s + _DRAW_CHUNK] for e in eps])[0]
                                 for s in range(0, self.doc_samples, _DRAW_CHUNK)])
                return mix.mean(0).cpu().numpy()

        C, K = self.n_chains, self.n_topics
        out = np.empty((X.shape[0], C * K), dtype=np.float64)
        n = -(-X.shape[0] // REFINE_BATCH)
        done = itertools.count(1)

        def advance():
            stage("document posteriors", next(done), C * n)

        for c in range(C):
            block = out[:, c * K:(c + 1) * K]
            lo = 0
            for mix in self._map_batches(X, self.refine_steps, self.seed, c, mean_mix, threads,
                                         advance if stage is not None else None, first_batch=first_batch):
                block[lo:lo + len(mix)] = mix
                lo += len(mix)
        return normalise_chains(out, C) if normalise else out

    def _map_batches(self, X, steps, seed, chain, fn, threads, advance=None, batch=REFINE_BATCH,
                     first_batch=0):
        """``fn(first row, network, (documents as :class:`Docs`, the topics at their entries),
        variational parameters, draws)`` of every batch of rows of ``X`` under chain ``chain``'s
        network, in order: the encoder's posteriors refined by ``steps`` steps, ``draws(purpose,
        call)`` the batch's generators (one per level; batches numbered from ``first_batch``). A
        batch depends on nothing but its rows and its number, so ``threads`` batches run side by
        side (on the CPU), each with torch at one thread (torch splits its reductions by thread
        count): the same mixtures whatever the thread count. ``advance()``, if given, is called
        as each batch is taken in order."""
        import torch

        from .nets.chain_nets import chain_list
        from .nets.docs import Docs

        if self.net_ is None:
            raise RuntimeError("this model file holds no encoder; refit to infer new documents")
        net = chain_list(self.net_)[chain]
        net.eval()
        dev = next(net.parameters()).device
        with torch.no_grad():
            # (K, V) whose transpose is contiguous: a batch's words read rows of it
            topics = None if net.decoder == "product" else net.topics().T.contiguous().T

        def one(b):
            lo = b * batch
            docs = Docs.from_csr(X[lo:lo + batch], dev)
            tw = None if topics is None else net.pair_topics(docs, topics)
            draws = batch_draws(seed, first_batch + b, dev, net.n_levels, chain)
            return fn(lo, net, (docs, tw), refine_posteriors(net, docs, tw, draws, steps), draws)

        def taken(results):
            out = []
            for r in results:
                out.append(r)
                if advance is not None:
                    advance()
            return out

        n = -(-X.shape[0] // batch)
        prev = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            if dev.type != "cpu" or threads is None or threads <= 1 or n <= 1:
                return taken(one(b) for b in range(n))
            with ThreadPoolExecutor(min(threads, n)) as pool:
                return taken(pool.map(one, range(n)))
        finally:
            torch.set_num_threads(prev)

    def elbo(self, corpus, refine_steps=None, n_samples=64, seed=None):
        """Per-document ELBO (n_docs,) of the posteriors that :meth:`transform` reaches with
        ``refine_steps`` (default: the model's) refinement steps, estimated with ``n_samples``
        draws: E_q[log p(w_d | mix)] - KL(q || prior), averaged over the chains. Its rise from
        ``refine_steps=0`` is the amortization gap of the encoder. ``seed``: of the draws
        (default: the model's)."""
        import torch

        self._check_fitted()
        steps = self.refine_steps if refine_steps is None else refine_steps
        for name, v, low in (("refine_steps", steps, 0), ("n_samples", n_samples, 1),
                             ("seed", self.seed if seed is None else seed, 0)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        X = count_matrix(as_corpus(corpus, self.n_terms_))
        out = np.zeros(X.shape[0])
        seed = self.seed if seed is None else seed

        def batch_elbo(lo, net, pair, params, draws):
            docs, tw = pair
            with torch.no_grad():
                _, kl = net.mix_kl(params)
                ll = 0.0
                for s in range(0, n_samples, 8):  # draws in chunks: (S, nnz, K) stays small
                    k = min(8, n_samples - s)
                    eps = net.noise(params, k, draws(_ESTIMATE, s), REFINE_BATCH)
                    mix, _ = net.mix_kl(params, eps)
                    ll = ll + k * net.expected_log_lik(docs, mix, tw)
                return (ll / n_samples - kl).cpu().numpy()

        for c in range(self.n_chains):
            lo = 0
            for e in self._map_batches(X, int(steps), int(seed), c, batch_elbo, self._threads()):
                out[lo:lo + len(e)] += e
                lo += len(e)
        return out / self.n_chains if self.n_chains > 1 else out

    def transform(self, corpus):
        """Sub-topic mixtures of the documents of any ``corpus`` over the model's vocabulary (or
        a list of term-id arrays): one encoder pass each, refined and averaged as
        ``refine_steps`` and ``doc_samples`` say; (n_docs, n_topics), or with C chains
        (n_docs, C * n_topics), chain c's in columns [c K, (c + 1) K) summing to 1 / C."""
        self._check_fitted()
        corpus = as_corpus(corpus, self.n_terms_)
        return self._encode(count_matrix(corpus), self._threads())

    def _threads(self):
        """Batches refined side by side: ``n_jobs``, or torch's thread count."""
        import torch

        return self.n_jobs or torch.get_num_threads()

    def fold_in(self, docs, n_iter=1, n_keep=1, samples=None, seed=0, chain=0):
        """Posterior of new documents (term-id arrays of the model's vocabulary, or a Corpus)
        inferred as :meth:`transform` infers them (its draws seeded by the model's ``seed``);
        P_TM(w | d) averaged over the chains, ``doc_topics_`` under chain ``chain``'s topics.
        The result does not depend on the Gibbs settings ``n_iter``, ``n_keep``, ``samples``
        and ``seed``; they are checked and accepted as every kind's ``fold_in`` accepts them.
        Returns :class:`AVIFoldIn`."""
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        if samples not in (None, 1):
            raise ValueError(f"samples must be None (all) or 1 for a model with one kept sample, got {samples!r}")
        if isinstance(chain, bool) or not isinstance(chain, (int, np.integer)) or not 0 <= chain < self.n_chains:
            raise ValueError(f"chain must be in [0, {self.n_chains}), got {chain!r}")
        corpus = as_corpus(docs, self.n_terms_)
        return AVIFoldIn(self, np.diff(corpus.doc_ptr), self.transform(corpus), dict(seed=seed), int(chain))
