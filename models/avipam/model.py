"""aviPAM: amortized variational inference for pachinko allocation machines (Srivastava &
Sutton 2019), any layered PAM or mixture of LDAs from one description of its DAG, kept as a
document model P_AVI(w | d) = mix_d . beta like the Gibbs-sampled models.

The network lives in :mod:`models.avipam.nets.pam_net`, the training loop, checkpoints and model
files in :mod:`models.common.variational`, the architectures in :mod:`models.avipam.arch`; this module
serves the document model. torch is imported only when an AVIPAM is built or loaded.
"""
import copy

import numpy as np

from . import files
from .arch import laplace_prior, parse_arch
from .executor import check_executor, on_ray
from .foldin import _ONE_PASS, AVIFoldInMixin, chain_block
from .nets.net_files import term_major
from ..common.checkpoint import pieces
from ..common.variational import VariationalModel


def _root_as_written(params):
    """Files and checkpoints written before ``alpha_root`` existed had ``alpha`` at the root too."""
    return {"alpha_root": params.get("alpha", 0.01)}


class AVIPAM(AVIFoldInMixin, VariationalModel):
    """A PAM (or mixture of LDAs) trained by amortized variational inference, kept as a
    document model: P_AVI(w | d) = sum_k mix_dk beta_kw with mix_d the sub-topic mixture of
    document d: the encoder's posterior refined on that document's ELBO (semi-amortized VI) and
    averaged over posterior draws; with several chains, averaged over the chains' networks.

    In retrieval: with these defaults it is significantly below exact QL on no shared collection
    and above it on average (docs/results/effectiveness.md), but no architecture tried, these
    defaults included, beats exact QL on every shared collection; at lam 0.7 it adds nothing to
    QL on npl or scifact (docs/results/smoothing-avipam.md).

    Parameters
    ----------
    arch : str, default="4pam:12,100"
        The DAG (see :func:`parse_arch`): "3pam:K" (LDA), "4pam:S,K", "5pam:T,S,K", "molda:K1:K2",
        "ctm:K" (correlated topic model: full covariances, learned prior). The paper's tables use
        "4pam:50,100".
    alpha : float, default=0.01
        Symmetric Dirichlet prior of every internal node below the root (Gibbs PAM's sub-topic
        prior; AVITM's is 1), approximated by a logistic normal (Laplace approximation in the
        softmax basis). "3pam:K" and "ctm:K" have no such node.
    alpha_root : float or None, default=None
        Symmetric Dirichlet prior of the root's distribution over its children (a 4-PAM's
        super-topics, the topics of "3pam:K" and "ctm:K", a MoLDA's components); None means
        50 / (its number of children), as Gibbs PAM's alpha_r and LDA's alpha. A CTM's prior
        starts there and is then learned.
    hidden : int, default=100
        Width of the two softplus layers of every level's encoder.
    norm : {"batch", "l2", "none"}, default="batch"
        Section 4.1's fix for slow learning and component collapse: batch normalisation of the
        encoders' mean and log-variance outputs and of beta before its softmax ("batch", with
        the topics as beta's batch), their l2-norm variant without batch statistics ("l2"), or
        nothing ("none", the ablation).
    dropout : float, default=0.2
        Dropout rate on the encoders' last hidden layer.
    theta_dropout : float, default=0.0
        Dropout rate on each document's sampled sub-topic mixture before the decoder, at training
        only (AVITM's ProdLDA drops it with keep 0.4, i.e. 0.6).
    decoder : {"mixture", "product"}, default="mixture"
        "mixture": PAM's generative model, p(w | d) = mix_d . softmax(norm(beta)). "product":
        ProdLDA's product of experts, p(w | d) = softmax(norm(mix_d . beta)), with the norm on
        the decoder logits (batch statistics at training, running ones afterwards). Its topics
        (``topic_words``) are what the decoder gives a document made of one topic,
        softmax(norm(beta_k)), not ProdLDA's softmax(beta_k).
    topic_update : {"auto", "gradient", "em"}, default="auto"
        How training moves the sub-topics; "auto" is "em" for the mixture decoder and
        "gradient" for the product decoder. "gradient": beta is a network parameter that Adam
        moves on the ELBO, the paper's variational EM. "em": the closed-form variational M-step
        of LDA: after every epoch, phi_kw = (n_kw + eta) / (n_k + V eta), with n_kw the
        topic-word counts that the epoch's posterior draws expect (each token of document d
        shared among the topics as mix_dk phi_kw); the topics start at the collection's unigram
        model times log-normal noise and carry word frequencies, as LDA's do; the encoder is
        trained on the ELBO as before, and ``norm`` applies to it alone. Mixture decoder only.
    eta : float, default=0.01
        Symmetric Dirichlet prior of the topics of ``topic_update="em"`` (LDA's beta).
    epochs : int, default=100
    batch_size : int, default=200
    lr : float, default=1e-3
        Adam's learning rate.
    kl_warmup : int, default=0
        Epochs over which the weight of the KL terms in the training loss rises linearly from
        1 / kl_warmup to 1; 0 trains on the ELBO from the start, as the paper. KL annealing as
        in Bowman et al. (2016); ``log_lik_`` is the full ELBO either way.
    beta1 : float, default=0.99
        Adam's first-moment decay (AVITM uses 0.99).
    n_chains : int, default=3
        Independent networks trained side by side on the same mini-batches (each from its own
        initial weights and topics, drawing its own noise); P_AVI(w | d) is the mean of theirs,
        as the Gibbs kinds average their chains. Mixture decoder only.
    refine_steps : int, default=30
        After training, and for every document :meth:`transform` or ``fold_in`` infers: Adam
        steps on each document's own ELBO, started from the encoder's variational parameters,
        with the decoder fixed (semi-amortized VI as in Kim, Wiseman, Miller, Sontag and Rush
        2018); 0 keeps the encoder's posterior. Does not change training.
    doc_samples : int, default=16
        The document mixture mix_d is the posterior mean of the mixture, averaged over this many
        draws from the (refined) posterior, as the Gibbs kinds average samples; 0 takes the
        mixture at every node's mean logits. Model files written before these two parameters
        existed load with ``refine_steps=0, doc_samples=0``, what they were written with.
    seed : int, default=0
        Seeds training and, apart, the draws of the refinement and the averaging: the same seed
        gives the same mixtures, and a document's mixture does not depend on the documents
        after it in the input.
    device : str, default="cpu"
        torch device: "cpu" or "cuda" (a model per seed on each; see models.common.variational).
    n_jobs : int or None, default=None
        Threads of Adam's step and of the documents' posteriors (None: torch's thread count).
        CPU training runs the network on one thread, so that a seed gives the same model
        whatever ``n_jobs`` (torch splits its reductions by thread count); documents' posteriors
        are refined ``n_jobs`` batches side by side, each on one thread. On a GPU, training uses
        ``n_jobs`` CPU threads.
    log_lik_every : int, default=10
        Every this many epochs (and after the last), record ``dc_log_lik_``: the log-likelihood
        per token of a sample of the training documents by document completion
        (:func:`models.common.heldout.training_completion`), every document inferred by one encoder
        pass at the posterior means. Does not change training.
    callback_every : int, default=1
        ``callback(model, epoch, epochs)`` after every this many epochs (where a stop request,
        the first Ctrl-C of ``topicir train``, takes effect).
    checkpoint_every : int, default=10
        With ``fit(..., checkpoint=path)``, write the checkpoint every this many epochs.
    executor : str, default="local"
        Where training runs: "local" (this process), "ray" (data-parallel on Ray Train workers:
        ``RAY_ADDRESS`` or a local Ray cluster), "ray:ADDRESS" or "ray://HOST:PORT" (that Ray
        cluster). On Ray every worker takes its share of each mini-batch's documents (gloo on
        CPUs, NCCL with ``device="cuda"``, a GPU per worker) and the ELBO trace matches the local
        one to float rounding (:mod:`models.avipam.distributed`). Not written to model files; a
        checkpoint resumes under either executor. Needs ``pip install topicir[ray]``.
    n_workers : int or None, default=None
        Ray workers of ``executor="ray"`` (None: one per CPU of the cluster, or per GPU with
        ``device="cuda"``, at most the documents of the smallest mini-batch).
    adam_state : {"replicated", "partitioned"}, default="replicated"
        Where Adam's state lives on Ray: whole on every worker, or partitioned: each worker keeps
        Adam's moments of its range of the parameters alone (1/W of them) and updates that range,
        for an exchange of the parameters every step (models/avipam/zero.py). The same model
        either way. Not written to model files.

    Attributes
    ----------
    topic_word_ : ndarray of shape (n_chains * n_sub, n_terms), float64
        The sub-topics softmax(norm(beta)), chain after chain.
    doc_mix_ : ndarray of shape (n_docs, n_chains * n_sub), float64
        Sub-topic mixture of every training document (see ``refine_steps``, ``doc_samples``),
        every chain's side by side, each chain's summing to 1 / n_chains, so that
        ``doc_mix_ @ topic_word_`` is the document model averaged over chains.
    log_lik_ : ndarray of shape (epochs, n_chains)
        Training ELBO per token of every epoch and chain (a bound dominated by the KL terms at a
        small ``alpha``; ``elbo_per_token`` on a progress bar).
    dc_log_lik_ : ndarray of shape (n_records,)
        The document-completion log-likelihood per token of the training sample (see
        ``log_lik_every``) after the epochs ``dc_log_lik_iter_``; ``dc_ll_per_token`` on a
        progress bar.
    executor_stats_ : dict
        After a fit on Ray: ``epochs``, ``workers`` and, under ``allreduce``, what rank 0's
        all-reduces carried so far by purpose ("gradients": one a step, "batch norm": the
        batch statistics' sums and their gradients, "epoch sums": the M-step counts and the
        ELBO), each as ``calls``, ``bytes`` and ``seconds`` (waiting for the other workers
        included).
    """

    kind = "avipam"
    quick_params = dict(arch="4pam:2,4", hidden=16, epochs=4, batch_size=16, n_chains=1, seed=3)

    # dec_*, doc_div, doc_lse: the product decoder's p(w | d) = exp(z_dw - doc_lse_d) with
    # z_dw = (mix_d . beta_w - dec_shift_w) * dec_scale_w / doc_div_d (empty for "mixture").
    _INFERENCE_ARRAYS = ("topic_word", "doc_mix", "beta", "dec_shift", "dec_scale", "doc_div",
                         "doc_lse")
    _FILE_SPEC = files.SPEC  # what a model file must hold (and the network, its arch)

    def __init__(self, *, arch="4pam:12,100", alpha=0.01, alpha_root=None, hidden=100, norm="batch", dropout=0.2,
                 theta_dropout=0.0, decoder="mixture", topic_update="auto", eta=0.01,
                 epochs=100, batch_size=200, lr=1e-3,
                 kl_warmup=0, beta1=0.99, n_chains=3, refine_steps=30, doc_samples=16, seed=0, device="cpu",
                 n_jobs=None, log_lik_every=10, callback_every=1, checkpoint_every=10, executor="local",
                 n_workers=None, adam_state="replicated"):
        self.arch = arch
        self.alpha = alpha
        self.alpha_root = alpha_root
        self.hidden = hidden
        self.norm = norm
        self.dropout = dropout
        self.theta_dropout = theta_dropout
        self.decoder = decoder
        self.topic_update = topic_update
        self.eta = eta
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.kl_warmup = kl_warmup
        self.beta1 = beta1
        self.n_chains = n_chains
        self.refine_steps = refine_steps
        self.doc_samples = doc_samples
        self.seed = seed
        self.device = device
        self.n_jobs = n_jobs
        self.log_lik_every = log_lik_every
        self.callback_every = callback_every
        self.checkpoint_every = checkpoint_every
        self.executor = executor
        self.n_workers = n_workers
        self.adam_state = adam_state

    # -- parameters ---------------------------------------------------------------------------

    def _check_params(self, corpus=None):
        parse_arch(self.arch)  # refuses a description it cannot read
        self._check_priors()  # alpha_root None: 50 / the root's children
        self._pos_int("hidden")
        self._check_choice("norm", ("batch", "l2", "none"))
        self._check_choice("decoder", ("mixture", "product"))
        self._check_choice("topic_update", ("auto", "gradient", "em"))
        if self.topic_update == "em" and self.decoder != "mixture":
            raise ValueError("topic_update='em' needs decoder='mixture' (the M-step reads topics "
                             "from counts; the product decoder has none)")
        for name in ("dropout", "theta_dropout"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v < 1):
                raise ValueError(f"{name} must be in [0, 1), got {v!r}")
        if not (isinstance(self.beta1, (int, float)) and 0 <= self.beta1 < 1):
            raise ValueError(f"beta1 must be in [0, 1), got {self.beta1!r}")
        self._pos_int("n_chains")
        if self.n_chains > 1 and self.decoder != "mixture":
            raise ValueError("decoder='product' trains one network: set n_chains=1 (chains are averaged "
                             "as mixtures, which a product of experts is not)")
        self._pos_int("refine_steps", 0)
        self._pos_int("doc_samples", 0)
        self._check_shared_params()
        check_executor(self)
        self._check_choice("adam_state", ("replicated", "partitioned"))
        if self.adam_state == "partitioned" and not on_ray(self):
            raise ValueError("adam_state='partitioned' splits Adam's state among Ray workers: train on Ray "
                             "(executor='ray', --ray)")
        if corpus is not None and self.norm == "batch" and corpus.n_docs < 2:
            raise ValueError("norm='batch' needs at least 2 documents")

    @classmethod
    def _from_params(cls, params):
        # Files written before refinement existed hold one-pass mixtures: read them as such;
        # those written before topic_update existed learned their topics by gradient.
        old = {**_ONE_PASS, "topic_update": "gradient", **_root_as_written(params)}
        return super()._from_params({**old, **params})

    def _check_resume_params(self, path, saved, free):
        super()._check_resume_params(path, {**_root_as_written(saved), **saved}, free)

    @classmethod
    def _upgrade_net_arrays(cls, arrays, param_names=()):
        # the encoders' first layers of earlier files, written as nn.Linear, moved term-major
        term_major(arrays, param_names)

    @classmethod
    def size_params(cls, k):
        """A 4-PAM of K sub-topics under K / 8 super-topics, as :class:`models.pam.model.PAM`."""
        return {"arch": f"4pam:{max(2, k // 8)},{k}"}

    def _topic_update(self):
        """``topic_update`` resolved: "auto" is "em" for the mixture decoder, else "gradient"."""
        if self.topic_update != "auto":
            return self.topic_update
        return "em" if self.decoder == "mixture" else "gradient"

    @property
    def n_topics(self):
        """The sub-topics: what ``topic_words`` indexes and the document model mixes."""
        return parse_arch(self.arch).levels[-1]

    @property
    def topic_groups(self):
        """Sub-topic ranges [start, stop) of the mixture components (one for a layered PAM)."""
        return parse_arch(self.arch).groups

    def _alphas(self, arch):
        """The Dirichlet prior of every level's nodes, root first."""
        n_root = arch.masks[0].shape[1]
        root = 50.0 / n_root if self.alpha_root is None else float(self.alpha_root)
        return [root] + [float(self.alpha)] * (len(arch.masks) - 1)

    def _net_buffers(self):
        """The network's fixed buffers the parameters give, by name: every level's mask and the
        Laplace variances of its prior (a file's must equal them)."""
        arch = parse_arch(self.arch)
        out = {}
        for level, (mask, alpha) in enumerate(zip(arch.masks, self._alphas(arch))):
            _, var = laplace_prior(np.float32(alpha), mask.sum(1, keepdims=True).astype(np.float32))
            out[f"mask{level}"], out[f"prior_var{level}"] = mask, np.broadcast_to(var, mask.shape)
        return out

    def _build_net(self, n_terms):
        """The network, or with ``n_chains`` > 1 the chains' networks, built one after another
        (chain 0 is the network of ``n_chains=1``)."""
        import torch

        from .nets.chain_nets import ChainNets
        from .nets.pam_net import PAMNet

        arch = parse_arch(self.arch)
        masks = [torch.from_numpy(m) for m in arch.masks]
        em = float(self.eta) if self._topic_update() == "em" else 0.0
        log_freq = getattr(self, "_log_freq", None)  # set while fitting; a loaded net reads its own
        nets = []
        for _ in range(int(self.n_chains)):
            net = PAMNet(n_terms, masks, self._alphas(arch), hidden=self.hidden,
                         norm=self.norm, dropout=float(self.dropout), decoder=self.decoder,
                         theta_dropout=float(self.theta_dropout), full_cov=arch.full_cov, topic_em=em)
            if em and log_freq is not None:
                net.start_topics(torch.from_numpy(log_freq))
            nets.append(net)
        return nets[0] if len(nets) == 1 else ChainNets(nets)

    @staticmethod
    def _batch_input(rows, device):
        """The batch's rows of the count matrix as their nonzero counts
        (:class:`models.avipam.nets.docs.Docs`): no step of the network costs documents x
        vocabulary."""
        from .nets.docs import Docs

        return Docs.from_csr(rows, device, by_term=True)

    def _fit(self, corpus, callback, checkpoint, step_threads, share=None):
        if share is None and hasattr(self, "executor_stats_"):  # from an earlier fit on Ray
            del self.executor_stats_
        if share is None and on_ray(self):
            from .distributed import fit_on_ray  # imports Ray

            return fit_on_ray(self, corpus, callback, checkpoint, step_threads)
        # a Ray worker holds its documents only: the driver counted the collection's terms
        n = (np.bincount(corpus.term_ids, minlength=corpus.n_terms) if share is None
             else share.term_counts).astype(np.float64)
        eta = float(self.eta)
        self._log_freq = np.log((n + eta) / (n.sum() + eta * corpus.n_terms)).astype(np.float32)
        try:
            return super()._fit(corpus, callback, checkpoint, step_threads, share)
        finally:
            del self._log_freq

    def topic_correlations(self, chain=0):
        """A CTM's learned topic correlations (K, K) (of chain ``chain``): the correlation matrix of its prior's
        logits after centring them, c = eta - mean(eta). Only log-ratios of the logits reach
        theta = softmax(eta), so the data leave the prior's variance along (1, ..., 1) free and
        the raw correlations would all share that term; the centred ones are identified."""
        self._check_fitted()
        if not parse_arch(self.arch).full_cov:
            raise ValueError(f"arch {self.arch!r} has independent topics; topic correlations are "
                             f"learned by a CTM ('ctm:K')")
        if self.net_ is None:
            raise RuntimeError("this model file holds no network; refit to read the prior")
        import torch

        from .nets.chain_nets import chain_list

        self._check_chain(chain)
        with torch.no_grad():
            cov = chain_list(self.net_)[chain].prior_cov().cpu().numpy().astype(np.float64)
        centre = np.eye(len(cov)) - 1.0 / len(cov)
        cov = centre @ cov @ centre
        sd = np.sqrt(np.diag(cov))
        return cov / np.outer(sd, sd)

    def _finalize(self, net, X, threads, stage=None, doc_mix=None):
        self._decoder_tables(net)
        self.doc_mix_ = self._encode(X, threads, stage) if doc_mix is None else doc_mix
        self.doc_div_ = self.doc_lse_ = np.zeros(0, dtype=np.float32)
        if self.decoder == "product":
            self._product_doc_tables()

    def _encoder_model(self, net):
        """A shallow copy of this model that infers documents by one pass of ``net`` as it stands
        (``refine_steps=0, doc_samples=0``), for the completion trace of training: its
        ``fold_in`` works, what reads the training documents' mixtures does not."""
        view = copy.copy(self)
        view.refine_steps = view.doc_samples = 0
        view.net_ = net
        view._decoder_tables(net)
        return view

    def _decoder_tables(self, net):
        """What the decoder needs besides a document's mixture, from ``net`` in eval mode: the
        topics and, for the product decoder, its per-word numbers."""
        import torch

        from .nets.chain_nets import chain_list

        net.eval()
        with torch.no_grad():  # the chains' topics stacked, (n_chains * K, V)
            tw = np.concatenate([n.topics().cpu().numpy().astype(np.float64) for n in chain_list(net)])
        # rows renormalised in float64, so every document model sums to 1 (float32 rows miss by 1e-7)
        self.topic_word_ = tw / tw.sum(axis=1, keepdims=True)
        self.beta_ = self.dec_shift_ = self.dec_scale_ = np.zeros(0, dtype=np.float32)
        if self.decoder == "product":
            self._product_word_tables(net)

    def _product_word_tables(self, net):
        """The product decoder's beta and per-word shift and scale (its normalisation's)."""
        import torch

        V = self.n_terms_
        with torch.no_grad():
            self.beta_ = net.beta.cpu().numpy().astype(np.float32)
            shift, scale = np.zeros(V), np.ones(V)
            if self.norm == "batch":
                bn = net.dec_norm
                shift = bn.running_mean.cpu().numpy().astype(np.float64)
                scale = 1.0 / np.sqrt(bn.running_var.cpu().numpy().astype(np.float64) + bn.eps)
            elif self.norm == "l2":
                scale = net.dec_norm.gain.cpu().numpy().astype(np.float64)
        self.dec_shift_, self.dec_scale_ = shift, scale

    def _product_doc_tables(self):
        """The per-document numbers that give the product decoder's p(w | d) of the training
        documents for any term ids without the full (n_docs, n_terms) table."""
        shift, scale = self.dec_shift_, self.dec_scale_
        D = self.doc_mix_.shape[0]
        div, lse = np.ones(D), np.empty(D)
        for lo in range(0, D, 2000):
            logits = self.doc_mix_[lo:lo + 2000].astype(np.float64) @ self.beta_.astype(np.float64)
            if self.norm == "l2":
                div[lo:lo + 2000] = np.linalg.norm(logits, axis=1) + 1e-8
            z = (logits - shift) * scale / div[lo:lo + 2000, None]
            m = z.max(1)
            lse[lo:lo + 2000] = m + np.log(np.exp(z - m[:, None]).sum(1))
        self.doc_div_, self.doc_lse_ = div, lse

    # -- the document model -------------------------------------------------------------------

    def p_w_d(self, term_ids):
        """P_AVI(w | d) of every training document: mix_d . beta_w (mixture decoder) or
        softmax(norm(mix_d . beta))_w (product decoder).

        Parameters
        ----------
        term_ids : array-like of int, shape (n_query_terms,)

        Returns
        -------
        ndarray of shape (n_docs, n_query_terms), float64
        """
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        mix = np.asarray(self.doc_mix_, dtype=np.float64)  # no copy: float64 already
        if self.decoder == "product":
            logits = mix @ self.beta_[:, term_ids].astype(np.float64)
            z = (logits - self.dec_shift_[term_ids]) * self.dec_scale_[term_ids] / self.doc_div_[:, None]
            return np.exp(z - self.doc_lse_[:, None])
        # term-major, as the other kinds: a query's terms are rows of the underlying array;
        # the topics' columns and the documents' mixtures a piece at a time, each piece's pages
        # of a mapped file released after it (pieces); each piece's product is written straight
        # into its columns (BLAS takes the row stride), not through a temporary copied in
        tw = np.concatenate([p[:, term_ids] for p, in pieces(self.topic_word_)]).T.astype(np.float64)
        out, lo = np.empty((len(term_ids), len(mix))), 0
        for piece, in pieces(mix):
            np.matmul(tw, piece.T, out=out[:, lo:lo + len(piece)])
            lo += len(piece)
        return out.T

    def p_w_d_per_sample(self, term_ids):
        """P_AVI(w | d) of every chain's model: shape (n_chains, 1, n_docs, n_query_terms)."""
        if self.n_chains == 1:
            return self.p_w_d(term_ids)[None, None]
        self._check_fitted()
        term_ids = self._check_term_ids(term_ids)
        C, K = self.n_chains, self.n_topics
        return np.stack([chain_block(self.doc_mix_, C, c) @ self.topic_word_[c * K:(c + 1) * K, term_ids]
                         for c in range(C)])[:, None]

    def _check_chain(self, chain):
        if isinstance(chain, bool) or not isinstance(chain, (int, np.integer)) or not 0 <= chain < self.n_chains:
            raise ValueError(f"chain must be in [0, {self.n_chains}), got {chain!r}")

    def doc_topics(self, doc, top=10, chain=0):
        """Most probable sub-topics of document ``doc`` under chain ``chain`` (ids int64,
        probabilities float64)."""
        self._check_fitted()
        self._check_chain(chain)
        D = self.doc_mix_.shape[0]
        if not 0 <= doc < D:
            raise ValueError(f"doc must be in [0, {D}), got {doc!r}")
        mix = np.asarray(chain_block(self.doc_mix_[doc], self.n_chains, chain), dtype=np.float64)
        ids = np.argsort(-mix, kind="stable")[:top]
        return ids.astype(np.int64), mix[ids]

    def topic_words(self, topic, top=10, chain=0, terms=None):
        """Most probable terms of sub-topic ``topic`` of chain ``chain`` (term ids int64,
        probabilities float64), or (term, probability) pairs with a vocabulary ``terms``."""
        self._check_fitted()
        self._check_chain(chain)
        K = self.topic_word_.shape[0] // self.n_chains
        if not 0 <= topic < K:
            raise ValueError(f"topic must be in [0, {K}), got {topic!r}")
        phi = self.topic_word_[chain * K + topic].astype(np.float64)
        ids = np.argsort(-phi, kind="stable")[:top]
        return self._with_terms(ids.astype(np.int64), phi[ids], terms)
