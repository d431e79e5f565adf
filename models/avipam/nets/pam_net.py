"""The aviPAM network (Srivastava & Sutton 2019): one encoder MLP per level of a layered PAM DAG,
logistic-normal posteriors of every internal node, mixtures multiplied down the levels, and the
decoder ``mix @ softmax(norm(beta))``.

A DAG is a list of levels; level l joins its P_l parent nodes to its C_l children through a
boolean mask (P_l, C_l): every parent has a distribution over its allowed children. Layered
PAMs have full masks; a mixture of LDAs has a block mask (component m reaches only its topics).
The correlated topic model (Blei & Lafferty 2006) is one level whose root has a full-covariance
logistic normal: its prior's mean and Cholesky factor are learned (variational EM, like beta) and
the encoder gives every document a full-covariance posterior through its Cholesky factor, as the
paper's section 3 suggests.

Documents come in as :class:`Docs`, the nonzero entries of their count matrix, so that no step
costs documents x vocabulary: every encoder's first layer is a sum over a document's words, and the
mixture decoder's likelihood is read at the (document, word) pairs present (the topics' softmax
stays over the whole vocabulary, so the gradient is the dense one). A dense (B, V) count tensor
is accepted everywhere too: the slow, obvious twin that the tests compare with.

Randomness (the reparameterisation noise, dropout) comes only from the ``torch.Generator``
passed in (or a :class:`models.avipam.nets.draws.RowShare` of it), so that a checkpoint holding
its state resumes the same stream.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

from ..arch import laplace_prior
from .docs import Docs, as_docs, batch_size, doc_sums
from .draws import normal, uniform
from .pair_decoder import pair_log_lik
from .term_layer import TermLayer


class RowL2Norm(nn.Module):
    """The l2 variant of section 4.1: every row divided by its own l2 norm and scaled by a learned
    gain (no centring, no shift, no batch statistics). The gain starts at sqrt(width) so that
    entries start with unit root-mean-square, as after batch normalisation."""

    def __init__(self, width):
        super().__init__()
        self.gain = nn.Parameter(torch.full((width,), math.sqrt(width)))

    def forward(self, u):
        return self.gain * u / (u.norm(dim=-1, keepdim=True) + 1e-8)


def make_norm(kind, width):
    if kind == "batch":
        # No learned scale or shift, as AVITM's batch normalisation.
        return nn.BatchNorm1d(width, affine=False)
    if kind == "l2":
        return RowL2Norm(width)
    return nn.Identity()


def column_standardise(beta, eps=1e-5):
    """Batch normalisation of the topic matrix with the topics as the batch: every word's logits
    are centred and scaled across topics (so no word can dominate every topic)."""
    mean = beta.mean(0, keepdim=True)
    var = beta.var(0, unbiased=False, keepdim=True)
    return (beta - mean) / torch.sqrt(var + eps)


def dropout(h, rate, gen):
    """Inverted dropout drawing its mask from ``gen`` (torch's own uses the global stream; a
    :class:`models.avipam.nets.draws.RowShare` too)."""
    if rate <= 0:
        return h
    keep = (uniform(h.shape, gen, h.device) >= rate).to(h.dtype)
    return h * keep / (1.0 - rate)


class LevelEncoder(nn.Module):
    """The MLP of one level: document counts -> mean and log-variance of every parent's
    logistic normal over its children, (B, P, C) each."""

    def __init__(self, n_terms, hidden, n_parents, n_children, norm):
        super().__init__()
        self.shape = (n_parents, n_children)
        width = n_parents * n_children
        self.fc1 = TermLayer(n_terms, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.mu = nn.Linear(hidden, width)
        self.logvar = nn.Linear(hidden, width)
        self.norm_mu = make_norm(norm, width)
        self.norm_logvar = make_norm(norm, width)

    def hidden(self, x, rate, gen):
        """The last hidden layer (B, hidden) of the documents ``x`` (:class:`Docs` or (B, V))."""
        h = F.softplus(self.fc2(F.softplus(self.fc1(x))))
        return dropout(h, rate, gen) if self.training else h

    def forward(self, x, rate, gen):
        h = self.hidden(x, rate, gen)
        mu = self.norm_mu(self.mu(h)).view(-1, *self.shape)
        logvar = self.norm_logvar(self.logvar(h)).view(-1, *self.shape)
        return mu, logvar


def lower_triangular(log_diag, off, tril):
    """Cholesky factors (..., K, K) from their log-diagonals (..., K) and strictly lower entries
    (..., K(K-1)/2) at the positions ``tril`` (2, K(K-1)/2)."""
    L = torch.diag_embed(torch.exp(log_diag))
    L[..., tril[0], tril[1]] = off
    return L


class FullCovEncoder(LevelEncoder):
    """The CTM root's MLP: the mean and log-variance of the PAM levels (normalised alike; the
    log-variances are twice the log-diagonal of the posterior's Cholesky factor) and the factor's
    strictly lower triangle, a linear head started at zero, so that training starts from the
    diagonal posterior."""

    def __init__(self, n_terms, hidden, n_children, norm):
        super().__init__(n_terms, hidden, 1, n_children, norm)
        K = n_children
        self.register_buffer("tril", torch.tril_indices(K, K, -1))
        self.off = nn.Linear(hidden, K * (K - 1) // 2)
        nn.init.zeros_(self.off.weight)
        nn.init.zeros_(self.off.bias)

    def forward(self, x, rate, gen):
        h = self.hidden(x, rate, gen)
        mu = self.norm_mu(self.mu(h))
        logvar = self.norm_logvar(self.logvar(h))
        return mu, logvar, lower_triangular(0.5 * logvar, self.off(h), self.tril)


def kl_full_cov(mu, logvar, L, mu0, L0, log_diag0):
    """KL(N(mu, L L^T) || N(mu0, L0 L0^T)) of every row (B,), with logvar = 2 log diag(L):
    0.5 [ |L0^-1 L|_F^2 + |L0^-1 (mu - mu0)|^2 - K + log|S0| - log|S| ]."""
    K = mu.shape[-1]
    A = torch.linalg.solve_triangular(L0, L, upper=False)
    b = torch.linalg.solve_triangular(L0, (mu - mu0).unsqueeze(-1), upper=False).squeeze(-1)
    return 0.5 * ((A * A).sum((1, 2)) + (b * b).sum(1) - K + 2.0 * log_diag0.sum() - logvar.sum(1))


class PAMNet(nn.Module):
    """Encoders of all levels and the sub-topic matrix beta (a parameter: variational EM).

    Parameters
    ----------
    n_terms : int
    masks : list of bool tensors (P_l, C_l)
        The DAG, root level first (P_0 = 1); C_l = P_{l+1}; the last C is the number of sub-topics.
    alphas : list of float
        Symmetric Dirichlet prior of the nodes of every level.
    hidden : int
    norm : {"batch", "l2", "none"}
        Normalisation of the encoder outputs and of beta before its softmax (section 4.1).
    dropout : float
        Dropout rate on the encoders' last hidden layer.
    theta_dropout : float
        Dropout rate on each document's sampled sub-topic mixture before the decoder, at training
        only (AVITM drops the topic proportions too, keep 0.4); the mixture decoder renormalises
        the dropped mixture.
    decoder : {"mixture", "product"}
        "mixture": PAM's own p(w | d) = mix . softmax(norm(beta)). "product": ProdLDA's product
        of experts, p(w | d) = softmax(norm(mix . beta)), the norm over the batch of documents.
    full_cov : bool
        The correlated topic model: one level (root -> K topics) whose prior N(mu0, L0 L0^T) is
        learned, started at the Laplace approximation of Dirichlet(alpha), and whose posteriors
        have full covariances.
    topic_em : float
        0: beta is a parameter (gradient steps on the ELBO). > 0: the topics come from the
        closed-form M-step (:meth:`end_epoch`) with this Dirichlet prior eta, beta holds their
        logarithms as a buffer, and :meth:`loss` gathers the expected counts while training
        (start them with :meth:`start_topics`). Mixture decoder only.
    """

    def __init__(self, n_terms, masks, alphas, hidden=100, norm="batch", dropout=0.2,
                 decoder="mixture", theta_dropout=0.0, full_cov=False, topic_em=0.0):
        super().__init__()
        if full_cov and len(masks) != 1:
            raise ValueError("a full-covariance root (CTM) needs a single level: root -> topics")
        self.full_cov = bool(full_cov)
        self.norm = norm
        self.decoder = decoder
        self.rate = float(dropout)
        self.theta_rate = float(theta_dropout)
        if self.full_cov:
            self.encoders = nn.ModuleList([FullCovEncoder(n_terms, hidden, masks[0].shape[1], norm)])
        else:
            self.encoders = nn.ModuleList(
                LevelEncoder(n_terms, hidden, m.shape[0], m.shape[1], norm) for m in masks)
        for l, (m, a) in enumerate(zip(masks, alphas)):
            kids = m.sum(1, keepdim=True).to(torch.float32)
            _, var = laplace_prior(a, kids)
            self.register_buffer(f"mask{l}", m.clone())
            self.register_buffer(f"prior_var{l}", var.expand(m.shape).clone())
        if self.full_cov:
            K = masks[0].shape[1]
            self.prior_mu = nn.Parameter(torch.zeros(K))
            self.prior_log_diag = nn.Parameter(0.5 * torch.log(self.prior_var0[0].clone()))
            self.prior_off = nn.Parameter(torch.zeros(K * (K - 1) // 2))
        self.n_levels = len(masks)
        K = masks[-1].shape[1]
        self.topic_em = float(topic_em)
        if self.topic_em > 0:
            if decoder != "mixture":
                raise ValueError("topics by the M-step (topic_em > 0) need the mixture decoder")
            # Topics by the closed-form M-step: beta holds log phi (K, V), a buffer that Adam does
            # not move, and em_counts the expected topic-word counts of the epoch so far, term-major
            # (V, K) so that a batch adds to rows; zero between epochs, so not saved.
            self.register_buffer("beta", torch.randn(K, n_terms))
            self.register_buffer("em_counts", torch.zeros(n_terms, K), persistent=False)
            self._topic_rows, self._beta_version = None, None
        else:
            self.beta = nn.Parameter(torch.empty(K, n_terms))
            nn.init.xavier_uniform_(self.beta)
        self.beta_norm = RowL2Norm(n_terms) if norm == "l2" and decoder == "mixture" else None
        self.dec_norm = make_norm(norm, n_terms) if decoder == "product" else None

    def topics(self):
        """The sub-topic word distributions (K, V). Product decoder: what the decoder gives a
        document made of that one topic, softmax(norm(beta_k)) with the normalisation's
        running statistics (call in eval mode); ProdLDA reads softmax(beta_k) instead, which
        ignores the per-word scale and shift the decoder's normalisation applies."""
        b = self.beta
        if self.topic_em > 0:
            return torch.exp(b)
        if self.decoder == "product":
            return torch.softmax(self.dec_norm(b), dim=1)
        if self.norm == "batch":
            b = column_standardise(b)
        elif self.norm == "l2":
            b = self.beta_norm(b)
        return torch.softmax(b, dim=1)

    def _level(self, l):
        return getattr(self, f"mask{l}"), getattr(self, f"prior_var{l}")

    def _level_step(self, l, z, mu, logvar):
        """Level ``l`` at the logits ``z``: every parent's distribution over its allowed children,
        and the KL(N(mu, diag exp(logvar)) || N(0, diag pvar)) of the posteriors summed over them,
        (B,) for (B, P, C) mu and logvar; the terms that depend on the document are weighed by
        mask / pvar and the constant sum of log pvar - 1 is added once. A full mask (read from the
        buffer, so a loaded file's mask counts) needs no masking."""
        mask, pvar = self._level(l)
        full = bool(mask.all())
        theta = torch.softmax(z if full else z.masked_fill(~mask, float("-inf")), dim=-1)
        const = (mask * (torch.log(pvar) - 1.0)).sum()
        quad = ((torch.exp(logvar) + mu * mu) * (mask / pvar)).sum((1, 2))
        lv = logvar.sum((1, 2)) if full else (logvar * mask).sum((1, 2))
        return theta, 0.5 * (quad - lv + const)

    def prior_chol(self):
        """The CTM prior's Cholesky factor L0 (K, K)."""
        return lower_triangular(self.prior_log_diag, self.prior_off, self.encoders[0].tril)

    def prior_cov(self):
        """The CTM prior's learned covariance L0 L0^T (K, K)."""
        L0 = self.prior_chol()
        return L0 @ L0.T

    def _full_cov_root(self, x, gen, sample):
        """The CTM root: (theta (B, 1, K), KL (B,))."""
        mu, logvar, L = self.encoders[0](x, self.rate, gen)
        z = mu
        if sample:
            eps = normal(mu.shape, gen, mu.device, mu.dtype)
            z = mu + torch.bmm(L, eps.unsqueeze(-1)).squeeze(-1)
        kl = kl_full_cov(mu, logvar, L, self.prior_mu, self.prior_chol(), self.prior_log_diag)
        return torch.softmax(z, dim=-1).unsqueeze(1), kl

    def _diag_levels(self, x, gen, sample):
        """The PAM levels, diagonal posteriors: (mixture (B, 1, K), KL (B,))."""
        B, ref = batch_size(x)
        mix = ref.new_ones(B, 1, 1)
        kl = ref.new_zeros(B)
        for l, enc in enumerate(self.encoders):
            mu, logvar = enc(x, self.rate, gen)
            z = mu
            if sample:
                eps = normal(mu.shape, gen, mu.device, mu.dtype)
                z = mu + torch.exp(0.5 * logvar) * eps
            theta, kl_l = self._level_step(l, z, mu, logvar)
            mix = torch.bmm(mix, theta)
            kl = kl + kl_l
        return mix, kl

    def forward(self, x, gen, sample=True):
        """(mixture over sub-topics (B, K), KL of every document summed over all nodes (B,)).

        ``sample=False`` takes every node's posterior mean logits (the amortized document
        mixture used after training); its KL is still the posterior's."""
        if self.full_cov:
            mix, kl = self._full_cov_root(x, gen, sample)
        else:
            mix, kl = self._diag_levels(x, gen, sample)
        mix = mix[:, 0, :]
        if self.training and sample and self.theta_rate > 0:
            dropped = dropout(mix, self.theta_rate, gen)
            if self.decoder == "mixture":
                # PAM's decoder needs a distribution: renormalise, keep a row that lost every topic
                tot = dropped.sum(1, keepdim=True)
                dropped = torch.where(tot > 0, dropped / tot.clamp_min(1e-30), mix)
            mix = dropped
        return mix, kl

    def skip_draws(self, n_docs, gen):
        """Advance ``gen`` past the draws that a training :meth:`loss` of ``n_docs`` documents
        takes from it (dropout masks and the levels' noise, in the order and shapes
        :meth:`forward` draws them), so that independent networks sharing one stream can each
        start from their own state."""
        dev, dtype = self.beta.device, next(self.parameters()).dtype
        for enc in self.encoders:
            if self.rate > 0:
                torch.rand((n_docs, enc.fc2.out_features), generator=gen, device=dev)
            shape = (n_docs, enc.shape[1]) if self.full_cov else (n_docs, *enc.shape)
            torch.randn(shape, generator=gen, device=dev, dtype=dtype)
        if self.theta_rate > 0:
            torch.rand((n_docs, self.beta.shape[0]), generator=gen, device=dev)

    # -- per-document posteriors (semi-amortized inference) ------------------------------------

    def posterior_params(self, x):
        """The encoders' variational parameters of the documents ``x`` (:class:`Docs` or
        (B, V)), without dropout (call in eval mode): diagonal levels [mu_0, logvar_0, mu_1,
        logvar_1, ...], each (B, P_l, C_l); a CTM root [mu, logvar, off], (B, K), (B, K) and (B, K(K-1)/2) with
        ``off`` the strictly lower triangle of the posterior's Cholesky factor."""
        if self.full_cov:
            enc = self.encoders[0]
            h = enc.hidden(x, 0.0, None)
            return [enc.norm_mu(enc.mu(h)), enc.norm_logvar(enc.logvar(h)), enc.off(h)]
        out = []
        for enc in self.encoders:
            out += list(enc(x, 0.0, None))
        return out

    def noise(self, params, n_samples, gens, rows=0):
        """``n_samples`` standard normal draws for every level of ``params``, (S, *mean shape),
        level l's from ``gens[l]``. They are drawn document-major for max(``rows``, B)
        documents and cut to the B of the batch, so that a document's draws do not depend on
        how many documents follow it (torch draws the last values of a tensor, and small
        tensors, differently)."""
        mus = params[:1] if self.full_cov else params[0::2]
        return [torch.randn((max(rows, m.shape[0]), n_samples, *m.shape[1:]), generator=g,
                            device=m.device, dtype=m.dtype)[:m.shape[0]].transpose(0, 1)
                for m, g in zip(mus, gens)]

    def mix_kl(self, params, eps=None):
        """Sub-topic mixtures (S, B, K) of the posteriors ``params`` (see
        :meth:`posterior_params`) at the draws ``eps`` (see :meth:`noise`), or at every node's
        mean logits when ``eps`` is None (S = 1); and the KL of every posterior to the prior (B,)."""
        if self.full_cov:
            mu, logvar, off = params
            L = lower_triangular(0.5 * logvar, off, self.encoders[0].tril)
            z = mu[None] if eps is None else mu + (L @ eps[0].unsqueeze(-1)).squeeze(-1)
            kl = kl_full_cov(mu, logvar, L, self.prior_mu, self.prior_chol(), self.prior_log_diag)
            return torch.softmax(z, dim=-1), kl
        B = params[0].shape[0]
        S = 1 if eps is None else eps[0].shape[0]
        mix = params[0].new_ones(S * B, 1, 1)
        kl = params[0].new_zeros(B)
        for l in range(self.n_levels):
            mu, logvar = params[2 * l], params[2 * l + 1]
            z = mu.expand(S, *mu.shape) if eps is None else mu + torch.exp(0.5 * logvar) * eps[l]
            theta, kl_l = self._level_step(l, z, mu, logvar)
            mix = torch.bmm(mix, theta.reshape(S * B, *mu.shape[1:]))
            kl = kl + kl_l
        return mix.view(S, B, -1), kl

    def pair_topics(self, x, topics=None):
        """The topics' columns at the batch's entries, (nnz, K) in the order of ``as_docs(x)``,
        for the mixture decoder's likelihood (None for the product decoder, which needs every
        word); ``topics``: :meth:`topics`, when the caller holds them already."""
        if self.decoder == "product":
            return None
        cols = as_docs(x).cols
        # embedding, not index_select: its gradient is summed without atomics on a GPU too
        if topics is None and self.topic_em > 0:
            return F.embedding(cols, self.topic_rows())  # no (K, V) pass
        return F.embedding(cols, (self.topics() if topics is None else topics).T)

    def topic_rows(self):
        """M-step topics: phi term-major (V, K), exp(``beta``) made again whenever beta changes
        (an epoch's M-step, a loaded state), so that a batch's words read rows."""
        if self._topic_rows is None or self._beta_version != self.beta._version \
                or self._topic_rows.device != self.beta.device:
            self._topic_rows = torch.exp(self.beta.T.contiguous())
            self._beta_version = self.beta._version
        return self._topic_rows

    def expected_log_lik(self, x, mix, tw=None):
        """The decoder's log-likelihood of the documents ``x`` (:class:`Docs` or (B, V)) under
        each of the mixtures ``mix`` (S, B, K), averaged over S: (B,), summed over the entries
        present, sum_w x_dw log p(w | d). Mixture decoder: ``tw`` is :meth:`pair_topics` of
        ``x``, passed so that a loop over steps gathers it once; the product decoder's softmax
        runs over the whole vocabulary."""
        docs = as_docs(x)
        S, B, K = mix.shape
        if self.decoder == "product":
            lp = self.log_p_words(mix.reshape(S * B, K)).view(S, B, -1)[:, docs.rows, docs.cols]
        else:
            tw = self.pair_topics(docs) if tw is None else tw
            lp = torch.log((mix[:, docs.rows, :] * tw).sum(-1) + 1e-10)       # (S, nnz)
        return doc_sums(docs, (docs.counts * lp).mean(0))

    def loss(self, x, gen):
        """Negative ELBO of every document of the batch ``x`` (:class:`Docs` or (B, V)) (B,),
        and its KL part (B,)."""
        mix, kl = self(x, gen)
        docs = as_docs(x)
        if not (self.topic_em > 0 and self.training):
            return kl - self.expected_log_lik(docs, mix[None]), kl
        if isinstance(x, Docs) and docs.counts.device.type == "cpu":
            # one numba pass; a dense x (the slow twin) and a GPU take the operations below
            return kl - pair_log_lik(mix, docs, self.topic_rows(), self.em_counts), kl
        # the pairs' products mix_dk phi_kw, formed once for the likelihood and the E-step
        joint = mix[docs.rows] * self.pair_topics(docs)                         # (nnz, K)
        p = joint.sum(-1)
        # E-step: every token's topic responsibilities mix_dk phi_kw / p(w | d) at this draw,
        # summed into the epoch's expected counts (index_put_ accumulates without atomics on a GPU)
        with torch.no_grad():
            r = joint * (docs.counts / (p + 1e-10))[:, None]
            self.em_counts.index_put_((docs.cols,), r, accumulate=True)
        return kl - doc_sums(docs, docs.counts * torch.log(p + 1e-10)), kl

    def dense_grads(self):
        """Before the optimizer's step: the encoders' first layers' sparse gradients as dense ones
        (:meth:`TermLayer.dense_grad`)."""
        for enc in self.encoders:
            enc.fc1.dense_grad()

    def start_topics(self, log_freq):
        """M-step topics: start every topic at the collection's unigram model ``log_freq`` (V,)
        times the standard log-normal noise drawn at construction, log phi_k =
        log_softmax(log_freq + noise_k), as a Gibbs sampler's random assignments start every
        topic near the unigram model."""
        if self.topic_em > 0:
            self.beta.copy_(torch.log_softmax(log_freq.to(self.beta) + self.beta, dim=1))

    def end_epoch(self):
        """M-step topics: phi_kw = (n_kw + eta) / (n_k + V eta), n_kw the topic-word counts that
        the epoch's posterior draws expect, eta = ``topic_em``: the mean of the topics' posterior
        Dirichlet(eta + n_k), as LDA's variational EM (and a Gibbs sampler's phi estimate) reads
        topics from counts."""
        if self.topic_em > 0:
            c = (self.em_counts.T + self.topic_em).contiguous()
            self.beta.copy_(torch.log(c / c.sum(1, keepdim=True)))
            self.em_counts.zero_()

    def log_p_words(self, mix):
        """log p(w | d) of every word (B, V) given the documents' sub-topic mixtures."""
        if self.decoder == "product":
            return torch.log_softmax(self.dec_norm(mix.to(self.beta.dtype) @ self.beta), dim=1)
        return torch.log(mix @ self.topics() + 1e-10)
