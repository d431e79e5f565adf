"""The model protocol: what every topic model of topicir is to retrieval, whatever trains it.

Retrieval (``retrieval/``) talks to models only through :class:`TopicModel` and the registry
(:mod:`models.registry`). Gibbs samplers sit under :class:`models.common.gibbs.GibbsModel`, the torch
models under :class:`models.common.variational.VariationalModel`; both derive from this class.

A model is a document model: for any term ids it gives P_TM(w|d) of every document of the corpus
it was trained on, averaged over what the model keeps (the samples of all its chains for a
Gibbs model, one amortized posterior mean for a variational one), and per kept sample.
"""
from __future__ import annotations

import abc
import inspect
import os
from typing import ClassVar

import numba
import numpy as np

from . import checkpoint as ckpt
from .corpus import Corpus
from .validate import check_prior


def launch_numba_threads():
    """Start numba's threads, with GNU OpenMP's idle threads sleeping instead of spinning.

    A sweep is a few parallel sub-steps that end at a barrier. Where the cores are shared with
    other work, a thread that spins at the barrier holds a core the still-sampling thread needs;
    passive waiting costs a wake-up of microseconds per sub-step. libgomp reads OMP_WAIT_POLICY
    once, when numba's OpenMP layer loads it at the first launch, so the variable is set only
    around that launch (torch's own OpenMP, loaded later, keeps its default); a value the user
    set is left alone, and so are threads another library started first. Training calls it,
    and so does the ranker: between its parallel kernels the Python work of a query runs while
    the idle threads would otherwise spin.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        numba.get_num_threads()
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        numba.get_num_threads()  # loads the threading layer on the first call
    finally:
        del os.environ["OMP_WAIT_POLICY"]


class TopicModel(abc.ABC):
    """Base of every topic model (scikit-learn style: parameters verbatim in ``__init__``,
    ``fit`` sets attributes ending in ``_``).

    Class attributes
    ----------------
    kind : str
        The registry name (``topicir train KIND``), also written to model files.
    training_inputs : tuple of str
        Names of extra keyword inputs ``fit`` takes besides the corpus, which retrieval derives
        from an index through the model's adapter (TCM: ``"split"``, where collocations stop).
    quick_params : dict
        Settings for a run of seconds on a tiny corpus; ``tests/test_conformance.py`` trains
        every registered kind with them.
    n_topics : int
        Subclasses expose the number of topics ``topic_words`` and ``doc_topics`` index over
        (a constructor parameter or a property).

    Fitted attributes every model has: ``fingerprint_`` (of the training corpus), ``n_terms_``,
    ``n_chains`` (1 for a model without chains), ``sample_iter_`` (the iteration of every kept
    sample), ``log_lik_`` and ``log_lik_iter_`` (the training trace: log-likelihood per token,
    or the ELBO per token, of every chain at the recorded iterations), and after a ``fit`` with
    a checkpoint, ``checkpoint_writes_`` and ``checkpoint_bytes_`` (what it wrote to disk).
    """

    kind: ClassVar[str] = ""
    training_inputs: ClassVar[tuple[str, ...]] = ()
    # Small settings for a run of seconds on a corpus of tens of documents (conformance tests,
    # smoke checks); must include ``seed`` and at least two kept samples where the model keeps
    # samples.
    quick_params: ClassVar[dict] = {}
    # Whether p_w_d over the whole vocabulary sums to 1 for every document (TCM: no, the rest
    # of the mass is on multi-word collocations).
    p_w_d_sums_to_one: ClassVar[bool] = True

    # Parameters a later version retired: ignored (not refused) when older model files load.
    _RETIRED_PARAMS: ClassVar[tuple[str, ...]] = ()
    # Parameters a later version added, with the value that gives the models of before: settings
    # without one (an older file's, a measured table's) had that value.
    _ADDED_PARAMS: ClassVar[dict] = {}

    # -- parameters ---------------------------------------------------------------------------

    @classmethod
    def _param_names(cls):
        """Constructor parameters in signature order, found as scikit-learn finds them."""
        return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]

    def get_params(self):
        return {name: getattr(self, name) for name in self._param_names()}

    def _open_checkpoint(self, path, corpus, free):
        """The checkpoint at ``path``, checked to be one of this kind, of ``corpus`` and of
        this model's parameters but those in ``free``."""
        f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
        h = f.header
        if h.get("model") != type(self).__name__:
            raise ValueError(f"{os.fspath(path)}: is a {h.get('model')!r} checkpoint, not "
                             f"{type(self).__name__}; delete it or use another checkpoint path")
        ckpt.check_fingerprint(path, h, corpus.fingerprint, self.corpus_hash_)
        self._check_resume_params(path, h["params"], free)
        return f

    def _check_resume_params(self, path, saved, free):
        """Refuse a checkpoint whose parameters ``saved`` differ from this model's, except those
        in ``free``. A parameter added after the checkpoint was written reads as its default:
        the behaviour the checkpoint's run had."""
        sig = inspect.signature(type(self).__init__).parameters
        diff = {}
        for k, v in self.get_params().items():
            was = saved.get(k, sig[k].default)
            if k not in free and was != v:
                diff[k] = (was, v)
        if diff:
            listing = ", ".join(f"{k}: checkpoint {t!r} vs now {m!r}" for k, (t, m) in diff.items())
            raise ValueError(f"{path}: checkpoint was written with other parameters ({listing}); "
                             f"use the same parameters or delete the checkpoint to start afresh")

    @classmethod
    def size_params(cls, k):
        """The parameters that give a model of size ``k`` topics (what grids over K, such as
        ``topicir smoothing --k``, set)."""
        return {"n_topics": k}

    def _pos_int(self, name, minimum=1):
        v = getattr(self, name)
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < minimum:
            raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")

    def _pos_float(self, name, allow_none=False, minimum_exclusive=0.0):
        """A finite float > ``minimum_exclusive`` (None allowed when ``allow_none``)."""
        v = getattr(self, name)
        if v is None and allow_none:
            return
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = float("nan")
        if isinstance(v, bool) or not (np.isfinite(f) and f > minimum_exclusive):
            raise ValueError(f"{name} must be a finite number > {minimum_exclusive:g}"
                             f"{' or None' if allow_none else ''}, got {v!r}")

    def _check_priors(self):
        """The parameters the kind's file spec names as priors (:data:`models.common.validate.PRIOR_MIN`
        to ``PRIOR_MAX``: every kernel stays finite)."""
        for name, allow_none in type(self)._FILE_SPEC.priors:
            check_prior(name, getattr(self, name), allow_none)

    def _check_bool(self, name):
        v = getattr(self, name)
        if not isinstance(v, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {v!r}")

    def _check_uint16(self, name):
        """Topic ids are stored as uint16."""
        if getattr(self, name) > 65535:
            raise ValueError(f"{name} must be <= 65535, got {getattr(self, name)!r}")

    def _check_choice(self, name, choices):
        v = getattr(self, name)
        if v not in choices:
            raise ValueError(f"{name} must be one of {choices}, got {v!r}")

    def _check_corpus(self, corpus):
        if not isinstance(corpus, Corpus):
            raise TypeError(f"corpus must be a models.common.corpus.Corpus, got {type(corpus).__name__}")
        if corpus.n_tokens == 0:
            raise ValueError("corpus has no tokens")

    # -- training -----------------------------------------------------------------------------

    @abc.abstractmethod
    def fit(self, corpus, callback=None, checkpoint=None, **inputs):
        """Train on ``corpus`` (a :class:`models.common.corpus.Corpus`); ``inputs`` are the names in
        ``training_inputs``. ``callback(model, iteration, n_iter)`` reports progress;
        ``checkpoint`` is a file to resume from and rewrite as training goes. Returns self."""

    def _with_threads(self, fn, *args):
        """Run ``fn(*args)`` with numba limited to ``n_jobs`` threads (restored afterwards)."""
        launch_numba_threads()
        prev = numba.get_num_threads()
        n_jobs = getattr(self, "n_jobs", None)
        if n_jobs is not None:
            numba.set_num_threads(min(n_jobs, numba.config.NUMBA_NUM_THREADS))
        try:
            return fn(*args)
        finally:
            numba.set_num_threads(prev)

    # -- model files --------------------------------------------------------------------------

    @abc.abstractmethod
    def save(self, path, full=False):
        """Write the model atomically, with its parameters and the corpus fingerprint."""

    @classmethod
    @abc.abstractmethod
    def load(cls, path, fingerprint=None, doc_len=None):
        """Read a model written by :meth:`save`; refuse one trained on another ``fingerprint``,
        or whose documents disagree with ``doc_len`` (the token counts of the index's documents
        it describes)."""

    def _file_header(self):
        """Header fields every model file has (see :mod:`models.common.checkpoint`)."""
        return dict(model=type(self).__name__, kind=self.kind, params=self.get_params(),
                    fingerprint=self.fingerprint_, corpus_hash=getattr(self, "corpus_hash_", None),
                    n_terms=int(self.n_terms_))

    @classmethod
    def _read_file(cls, path, fingerprint=None):
        """The file's header and arrays once it is known to hold this class, for ``fingerprint``."""
        launch_numba_threads()  # before the checks' and the document model's parallel kernels
        f = ckpt.read_model_file(path)
        if f.header.get("model") != cls.__name__:
            raise ValueError(f"{os.fspath(path)}: holds a {f.header.get('model')!r} model, not {cls.__name__}")
        ckpt.check_fingerprint(path, f.header, fingerprint)
        return f

    @classmethod
    def _from_params(cls, params):
        return cls(**{k: v for k, v in params.items() if k not in cls._RETIRED_PARAMS})

    # -- the document model -------------------------------------------------------------------

    def _check_fitted(self):
        if not getattr(self, "fingerprint_", None) or not self._is_fitted():
            name = type(self).__name__
            raise RuntimeError(f"this {name} is not fitted; call fit(corpus) or {name}.load(path) first")

    @abc.abstractmethod
    def _is_fitted(self) -> bool:
        """Whether the arrays inference needs are there."""

    def _check_term_ids(self, term_ids):
        term_ids = np.asarray(term_ids, dtype=np.int64).ravel()
        V = self.n_terms_
        if term_ids.size and (term_ids.min() < 0 or term_ids.max() >= V):
            bad = term_ids[(term_ids < 0) | (term_ids >= V)][0]
            raise ValueError(f"term id {int(bad)!r} is out of range for a model with n_terms = {V}")
        return term_ids

    @abc.abstractmethod
    def p_w_d(self, term_ids):
        """P_TM(w | d) of every document for the given term ids, averaged over everything the
        model keeps: ndarray of shape (n_docs, len(term_ids)), float64."""

    def p_w_d_rows(self, term_ids, docs):
        """:meth:`p_w_d` of the documents ``docs`` only: ndarray (len(docs), len(term_ids)),
        float64. Kinds whose document model can be read per document override it, so that a few
        documents (pseudo-relevance feedback's) do not cost the whole collection."""
        p = self.p_w_d(term_ids)
        return p[self._check_docs(docs, len(p))]

    @staticmethod
    def _check_docs(docs, D):
        docs = np.asarray(docs, dtype=np.int64).ravel()
        if docs.size and (docs.min() < 0 or docs.max() >= D):
            bad = docs[(docs < 0) | (docs >= D)][0]
            raise ValueError(f"document {int(bad)!r} is out of range for a model of {D} documents")
        return docs

    @abc.abstractmethod
    def p_w_d_per_sample(self, term_ids):
        """P_TM(w | d) of every kept sample: ndarray (n_chains, n_samples, n_docs, len(term_ids))."""

    @abc.abstractmethod
    def doc_topics(self, doc, top=10, chain=0):
        """Most probable topics of document ``doc``: (topic ids int64, probabilities float64)."""

    @abc.abstractmethod
    def topic_words(self, topic, top=10, chain=0, terms=None):
        """Most probable terms of ``topic``: (term ids int64, probabilities float64), or with
        ``terms`` (the vocabulary: term id -> string, e.g. ``index.stats.terms``) a list of
        (term, probability) pairs, as tomotopy's ``get_topic_words``."""

    def _with_terms(self, ids, probs, terms):
        """``(ids, probs)``, or [(terms[id], prob), ...] when a vocabulary ``terms`` is given."""
        if terms is None:
            return ids, probs
        if len(terms) != self.n_terms_:
            raise ValueError(f"terms has {len(terms)} entries; the model has {self.n_terms_} terms "
                             f"(give the vocabulary of the index it was trained on)")
        return [(str(terms[i]), float(p)) for i, p in zip(ids, probs)]

    def sample_word_probs(self, n_docs, seed=0):
        """Word distributions of ``n_docs`` documents drawn from the model (document mixtures
        from their prior, the kept topics): ndarray (n_docs, n_terms), float64; for the
        empirical likelihood. Kinds without such a draw say so with NotImplementedError."""
        raise NotImplementedError(f"{self.kind} models do not draw documents (the empirical "
                                  f"likelihood needs it)")

    def _wrote(self, n_bytes, iteration=None):
        """Count ``n_bytes`` written to disk for checkpoints; with ``iteration``, the checkpoint
        after that sweep is complete, and with the files written since the one before (kept
        samples) makes one row of ``checkpoint_writes_``."""
        self._ckpt_pending += int(n_bytes)
        if iteration is not None:
            self._ckpt_writes.append((int(iteration), self._ckpt_pending))
            self._ckpt_pending = 0

    @property
    def checkpoint_writes_(self):
        """Every checkpoint the last ``fit`` wrote: ndarray of shape (n_checkpoints, 2), int64,
        the sweep (or epoch) after which it was written, and the bytes written to disk for it
        (the checkpoint file and the kept samples' files written since the checkpoint before)."""
        return np.array(getattr(self, "_ckpt_writes", []), dtype=np.int64).reshape(-1, 2)

    @property
    def checkpoint_bytes_(self):
        """The bytes the last ``fit`` wrote to disk for checkpoints, all told (0 without one):
        ``checkpoint_writes_``'s and those of kept samples taken after its last checkpoint."""
        return int(self.checkpoint_writes_[:, 1].sum()) + int(getattr(self, "_ckpt_pending", 0))

    @property
    def log_lik_(self):
        return np.array(self._log_lik_rows, dtype=np.float64).reshape(-1, self.n_chains)

    @property
    def log_lik_iter_(self):
        return np.array(self._log_lik_iters, dtype=np.int64)
