"""Document posteriors and fold-in for aviPAM: a document's posterior is the encoder's, refined
on the document's ELBO (semi-amortized VI) and averaged over draws as the model's
``refine_steps`` and ``doc_samples`` say, and P_TM(w | d) the decoder's for that mixture, for
training and new documents alike."""
import numpy as np

from .foldin import FoldedDocs, as_corpus, check_fold_params

# Semi-amortized refinement: Adam's step on the per-document variational parameters, and the
# documents refined together.
_REFINE_LR = 0.05
_REFINE_BATCH = 500
# What a batch's draws are for: a refinement step, the averaged mixture, an ELBO estimate.
_REFINE, _AVERAGE, _ESTIMATE = 0, 1, 2
# What models written before ``refine_steps`` and ``doc_samples`` existed did: one encoder pass,
# the mixture at the posterior means.
_ONE_PASS = dict(refine_steps=0, doc_samples=0)


def batch_draws(seed, batch_no, device, n_levels):
    """``draws(purpose, call)``: one torch generator per level, seeded from (seed, batch number,
    purpose, call, level) alone, so that a document's draws depend on its place in the input and
    not on the documents after it (nor on how many steps came before)."""
    import torch

    def draws(purpose, call):
        keys = np.random.SeedSequence([seed, batch_no, purpose, call]).spawn(n_levels)
        return [torch.Generator(device=device).manual_seed(int(k.generate_state(1, np.uint64)[0] >> 1))
                for k in keys]
    return draws


def refine_posteriors(net, docs, tw, draws, steps):
    """The encoder's variational parameters of the documents ``docs`` (:class:`Docs`, ``tw``
    the topics at their entries: ``net.pair_topics``), then ``steps`` Adam steps
    on the sum of their ELBOs with the decoder fixed (semi-amortized VI, Kim et al. 2018),
    one fresh draw per step: every document's parameters move on its own ELBO alone (Adam
    is elementwise)."""
    import torch

    with torch.no_grad():
        params = net.posterior_params(docs)
    if not steps:
        return params
    params = [p.detach().clone().requires_grad_(True) for p in params]
    opt = torch.optim.Adam(params, lr=_REFINE_LR)
    prev = torch.get_num_threads()
    # One thread, as training: the mixtures do not depend on n_jobs (torch splits reductions
    # by thread count), and these small ops gain nothing from threads on a busy machine.
    torch.set_num_threads(1)
    try:
        with torch.enable_grad():
            for step in range(steps):
                eps = net.noise(params, 1, draws(_REFINE, step), _REFINE_BATCH)
                mix, kl = net.mix_kl(params, eps)
                loss = (kl - net.expected_log_lik(docs, mix, tw)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
    finally:
        torch.set_num_threads(prev)
    return [p.detach() for p in params]


# Pairs (or documents x terms) scored per block, bounding the memory of a block.
_BLOCK = 1 << 16


class AVIFoldIn(FoldedDocs):
    """New documents encoded by an aviPAM model (see :class:`FoldedDocs`); ``doc_topics_`` are
    the sub-topic mixtures."""

    def __init__(self, model, doc_len, mix, params):
        self.model = model
        self.doc_len_ = doc_len
        self.doc_topics_ = mix
        self.params_ = params

    def _product_rows(self, mix):
        """log p(w | d) over the whole vocabulary for the mixtures ``mix`` (product decoder),
        normalised as :meth:`models.avipam.AVIPAM._product_tables` normalises training docs."""
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
            out[sel] = np.einsum("ik,ki->i", self.doc_topics_[doc[sel]], tw[:, pair_term[sel]])
        return out


class AVIFoldInMixin:
    """``fold_in`` for aviPAM; its ``transform`` gives the mixtures alone."""

    def fold_in(self, docs, n_iter=1, n_keep=1, samples=None, seed=0, chain=0):
        """Posterior of new documents (term-id arrays of the model's vocabulary, or a Corpus)
        inferred as :meth:`transform` infers them (its draws seeded by the model's ``seed``).
        The result does not depend on the Gibbs settings ``n_iter``, ``n_keep``, ``samples``
        and ``seed`` nor ``chain`` (one model); they are checked and accepted as every kind's
        ``fold_in`` accepts them. Returns :class:`AVIFoldIn`."""
        self._check_fitted()
        check_fold_params(n_iter, n_keep, seed)
        if samples not in (None, 1):
            raise ValueError(f"samples must be None (all) or 1 for a model with one kept sample, got {samples!r}")
        if chain != 0:
            raise ValueError(f"chain must be 0 for a model without chains, got {chain!r}")
        corpus = as_corpus(docs, self.n_terms_)
        return AVIFoldIn(self, np.diff(corpus.doc_ptr), self.transform(corpus), dict(seed=seed))
