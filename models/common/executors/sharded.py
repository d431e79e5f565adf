"""The Ray driver off the data path: training whose token-sized state never reaches the driver.

``RayExecutor(state="workers")`` runs a kind's fit through :class:`ShardedRunner` (LDA, PAM,
tree-LDA; its loop, :class:`WorkerStateLoop`, also runs whole chains:
:mod:`models.common.executors.chains`, and gLDA's and TCM's shards: :mod:`models.glda.ray_shards`,
:mod:`models.tcm.ray_shards`). Each worker reads its documents' tokens itself (from the corpus files when the corpus
arrays are memory mapped, else from one object-store copy of its range), builds its sweep order,
initialises, sweeps, and keeps its documents' assignments, document counts and rng streams
until the end. The driver holds what does not grow with the tokens: the parameters, the
shards' document ranges, the topic-word counts of every chain (V x K at most: the tables and
the object-store slices of the partition rounds), the topic totals, the priors, the rng states
(chains x shards) and the traces; hyperparameters are learnt from what the workers sum of
their documents (histograms of counts).

- Log-likelihood: the topic-word part on the driver, the documents' terms summed by the
  workers in turn, each continuing the previous one's float (the local trainer's sum).
- Kept samples: every worker writes its shards' postings (``chain<c>.sweep<i>.shard<s>.npz``),
  the driver the sample's topic-word part (``chain<c>.sweep<i>.words.npz``).
- Checkpoints: every worker writes its shards' state (``state.shard<s>.sweep<i>.npz``: topics
  in document order, rng streams), then the driver writes the checkpoint, atomically, as the
  manifest that lists every part with its SHA-256; a resume checks each part against it (on
  the worker that reads it) and refuses a damaged or foreign one in one line naming the file.
- The model: the driver streams the parts into a model file (one array piece in memory at a
  time: :mod:`models.common.executors.parts`) and loads it memory-mapped and validated like any
  model file.

Parts live in ``CHECKPOINT.parts`` (or a temporary directory without a checkpoint), which
every worker must reach at the same path.
"""
import os
import shutil
import tempfile
import weakref
from functools import partial
from pathlib import Path

import numpy as np
import ray
from ray.exceptions import RayTaskError

from .. import checkpoint as ckpt
from ..corpus import mapped_file, read_only
from ..gibbs import shard_docs
from ..kept import digest, parts_dir
from .ray import worker_env
from .rounds import PartitionRunner, merge_deltas
from ..stopping import stop_point

LAYOUT = "ray-shards"


def source(a, lo, hi):
    """How a worker gets ``a[lo:hi]``: from the file when ``a`` is memory mapped (an index's
    corpus), else through one object-store copy."""
    where = mapped_file(a)
    if where is not None:
        return ("file", where[0], where[1] + lo * a.itemsize, a.dtype.str, hi - lo)
    return ("ref", ray.put(np.ascontiguousarray(a[lo:hi])))


def shard_bounds(corpus, n_shards):
    """The documents' cuts into ``n_shards`` shards (``gibbs.shard_docs``), refused in one line
    when one would be empty (a runner whose workers own shards needs documents in each)."""
    shard_doc = shard_docs(corpus, n_shards)
    if (np.diff(shard_doc) == 0).any():
        raise ValueError(f"n_shards={n_shards} leaves a shard without documents ({corpus.n_docs} documents); "
                         f"use fewer shards")
    return shard_doc


def read_source(spec):
    if spec[0] == "file":
        _, name, offset, dtype, count = spec
        return np.fromfile(name, dtype=np.dtype(dtype), count=count, offset=offset)
    return np.array(ray.get(spec[1]))


class TokenReader:
    """A worker that reads its tokens from where the driver said (:func:`source`): ``lay``
    holds ``doc_src`` and ``tok_src``."""

    def read_tokens(self):
        """This worker's ``doc_ptr`` (from 0) and ``term_ids``, read from where the driver said;
        read-only as a corpus's are, so the kernels are those the local trainer compiled."""
        doc_ptr = read_source(self.lay.pop("doc_src")).astype(np.int64)
        self.doc_ptr = read_only(doc_ptr - doc_ptr[0])
        self.term_ids = read_only(read_source(self.lay.pop("tok_src")).astype(np.int32))


class ShardWorker(TokenReader):
    """What a worker of :class:`ShardedRunner` adds to its kind's partition worker: its
    documents' tokens, their active set, and the part files. The kind gives ``setup`` (which
    calls :meth:`read_tokens` and sets ``seed`` and ``n_labels``, the assignments' range),
    ``build`` (its sweep order, with ``lay["ord_pos"]``), ``set_chains(*assignments, rng,
    prior, n_active)`` (one list of every chain's arrays, in document order, per entry of
    ``ASSIGNMENTS``) and ``sample_part(c, s)``; ``SAMPLE_ENTRIES`` names the array of a sample
    part whose length the manifest records."""

    SAMPLE_ENTRIES = None
    # The per-token arrays of a chain's state (its keys in ``chain[c]``, sweep order) with the
    # dtype set_chains takes them in; a state part holds them in document order.
    ASSIGNMENTS = {"z": np.int32}

    def labels(self, key):
        """Assignment array ``key`` holds values in [-1, labels(key)) (-1: an inactive token)."""
        return self.n_labels

    def corpus_stats(self):
        """Its tokens' term frequencies and its longest document (the driver sums the layout)."""
        return (np.bincount(self.term_ids, minlength=self.lay["V"]).astype(np.int64),
                int(np.diff(self.doc_ptr).max(initial=0)))

    def active(self, c, n_active):
        """The active documents of chain c among this worker's (GibbsModel._set_active)."""
        lay = self.lay
        D, d0, d1 = lay["D"], lay["d0"], lay["d1"]
        if n_active >= D:
            return np.ones(d1 - d0, np.uint8)
        ranks = self.__dict__.setdefault("ranks", {})
        if c not in ranks:  # every document's place in the chain's seeded permutation
            rank = np.empty(D, np.int64)
            rank[np.random.default_rng([self.seed, c, 7]).permutation(D)] = np.arange(D)
            ranks[c] = rank[d0:d1]
        return (ranks[c] < n_active).astype(np.uint8)

    def update(self, c, params):
        params = dict(params)
        self.chain[c]["active"] = self.active(c, params.pop("n_active"))
        super().update(c, params)

    def set_rng0(self, c, state):
        """Chain c's stream of shard 0 as a start that ran over every worker's tokens left it."""
        self.chain[c]["rng"][0] = state

    def doc_order(self, c, key="z"):
        """Chain c's assignment array ``key`` in document order."""
        z = np.empty(len(self.lay["ord_pos"]), self.chain[c][key].dtype)
        z[self.lay["ord_pos"]] = self.chain[c][key]
        return z

    def shard_tokens(self, s):
        """The token range [lo, hi) of shard s among this worker's (document order)."""
        i = s - self.lay["s0"]
        return int(self.doc_ptr[self.lay["shard_doc"][i]]), int(self.doc_ptr[self.lay["shard_doc"][i + 1]])

    def state_part(self, s):
        """The state of shard s: its documents' assignments (document order) and rng streams;
        each array of assignments in the narrowest dtype that holds its values' range."""
        lo, hi = self.shard_tokens(s)
        out = {}
        for key in self.ASSIGNMENTS:
            z = np.stack([self.doc_order(c, key)[lo:hi] for c in range(len(self.chain))])
            n = self.labels(key)
            if n <= 1 << 16 and z.size and z.min() >= 0:
                z = z.astype(np.uint16)
            elif n <= 1 << 31 and z.dtype.itemsize > 4:
                z = z.astype(np.int32)
            out[key] = z
        out["rng"] = np.stack([self.chain[c]["rng"][s - self.lay["s0"]] for c in range(len(self.chain))])
        return out

    def check_state(self, path, s, arrays):
        """A state part's shapes and values, before any kernel reads them."""
        C = len(self.chain)
        lo, hi = self.shard_tokens(s)
        rng = arrays.get("rng")
        if rng is None or rng.shape != (C, 4):
            raise ValueError(f"{path}: damaged state part (shapes or arrays not those of shard {s}); "
                             f"delete the checkpoint to start afresh")
        for key in self.ASSIGNMENTS:
            z, n = arrays.get(key), self.labels(key)
            if z is None or z.shape != (C, hi - lo) or z.dtype.kind not in "iu":
                raise ValueError(f"{path}: damaged state part (shapes or arrays not those of shard {s}); "
                                 f"delete the checkpoint to start afresh")
            if z.size and (z.min() < -1 or z.max() >= n):
                raise ValueError(f"{path}: damaged state part ({key} outside -1..{n - 1}); "
                                 f"delete the checkpoint to start afresh")

    def load_totals(self, c, totals):
        self.totals[c] = totals

    def write_state(self, directory, base, sweep):
        out = []
        for s in range(self.lay["s0"], self.lay["s0"] + len(self.lay["shard_doc"]) - 1):
            arrays, name = self.state_part(s), f"state.shard{s}.sweep{sweep}.npz"
            ckpt.write_model_file(Path(directory) / name, dict(base, part="state", shard=s, sweep=sweep),
                                  arrays, kind=ckpt.CHECKPOINT_FORMAT)
            out.append([s, name, digest(arrays)])
        return out

    def write_sample(self, directory, base, c, sweep):
        out = []
        for s in range(self.lay["s0"], self.lay["s0"] + len(self.lay["shard_doc"]) - 1):
            arrays, name = self.sample_part(c, s), f"chain{c}.sweep{sweep}.shard{s}.npz"
            ckpt.write_model_file(Path(directory) / name,
                                  dict(base, part="sample", shard=s, chain=c, sweep=sweep),
                                  arrays, kind=ckpt.CHECKPOINT_FORMAT)
            out.append([s, name, digest(arrays), int(len(arrays[self.SAMPLE_ENTRIES]))])
        return out

    def check_parts(self, directory, checkpoint, base, listed):
        """Read and check the parts ``listed`` ([shard, name, sha256, ...]) of this worker's
        shards; returns their arrays by shard (state parts) after checking every one."""
        out = {}
        s0, s1 = self.lay["s0"], self.lay["s0"] + len(self.lay["shard_doc"]) - 1
        for s, name, sha, *_ in listed:
            if s0 <= s < s1:
                out[s] = read_part(Path(directory) / name, checkpoint, base, s, sha)
        return out

    def resume(self, directory, checkpoint, base, state, samples, prior, n_active):
        """Check this worker's kept-sample parts, then set its chains from its state parts
        (``prior``: the hook's ``worker_prior``)."""
        for listed in samples:
            self.check_parts(directory, checkpoint, base, listed)
        parts = self.check_parts(directory, checkpoint, base, state)
        C, shards = len(self.chain), sorted(parts)
        for s in shards:
            self.check_state(Path(directory) / f"state.shard{s}.sweep{base_sweep(state, s)}.npz", s, parts[s])
        assignments = [[np.concatenate([parts[s][key][c] for s in shards]).astype(dtype) for c in range(C)]
                       for key, dtype in self.ASSIGNMENTS.items()]
        rng = np.stack([np.stack([parts[s]["rng"][c] for s in shards]) for c in range(C)])
        return self.set_chains(*assignments, rng.astype(np.uint64), prior, n_active)


def base_sweep(state, s):
    """The sweep in the name of shard s's state part."""
    name = next(n for t, n, *_ in state if t == s)
    return int(name.rsplit(".sweep", 1)[1].split(".")[0])


def read_part(path, checkpoint, base, shard, sha256, unit="shard"):
    """The arrays of a part file, refused in one line naming it unless it is the part the
    checkpoint lists, of this model and corpus (``shard``: the number of its ``unit``)."""
    fix = f"delete {os.fspath(checkpoint)} to start afresh"
    if not path.is_file():
        raise ValueError(f"{os.fspath(checkpoint)}: lists a part {path} that is missing (a checkpoint "
                         f"moves with its directory {path.parent.name}); {fix}")
    f = ckpt.read_model_file(path, kind=ckpt.CHECKPOINT_FORMAT)
    h = f.header
    if (h.get("model"), h.get("fingerprint"), h.get("corpus_hash"), h.get(unit)) != (
            base["model"], base["fingerprint"], base.get("corpus_hash"), shard):
        raise ValueError(f"{path}: not a part of {unit} {shard} of this {base['model']} checkpoint "
                         f"and corpus; {fix}")
    got = digest(f.arrays)
    if got != sha256:
        raise ValueError(f"{path}: not the part checkpoint {os.fspath(checkpoint)} lists (its arrays "
                         f"hash to {got[:16]}, the checkpoint lists {str(sha256)[:16]}); {fix}")
    return f.arrays


class ShardHook:
    """What a kind's hook of :class:`ShardedRunner` gives besides its :class:`PartitionRunner`
    hook's: ``n_totals(model)``; ``layout(model, corpus, stats)`` (the driver's layout from
    the workers' ``corpus_stats``, returning what their ``build`` takes); ``alloc(model,
    corpus)`` (the driver's model-level arrays); ``start(model, corpus, runner)`` (fresh
    chains); ``counts_from(model, counts)`` (the driver's counts from the workers' summed
    topic-word counts); ``log_lik(model, c, runner)``; ``sample_words(model, c)`` (a kept
    sample's model-level part); ``write_model(model, corpus, samples, directory, path)``."""

    @staticmethod
    def prior_shape(model):
        """The shape of ``model.alpha_`` (every chain's prior), which a checkpoint holds."""
        return (model.n_chains, model.n_topics)

    @staticmethod
    def worker_prior(model):
        """What the workers' ``set_chains`` takes as the chains' prior."""
        return model.alpha_

    def before_sweeps(self, model, it):
        self.n_active = model._sparse_n_active(it, model._n_docs)

    @staticmethod
    def loaded(model):
        """What follows once the model's arrays are those of its file (caches dropped)."""


class WorkerStateLoop:
    """The fit loop of :meth:`models.common.gibbs.GibbsModel._fit` with the chain state on the
    workers (module docstring), shared by :class:`ShardedRunner` (shards of every chain) and
    :class:`models.common.executors.chains.ChainRunner` (whole chains). A runner gives
    ``_setup(model, corpus)`` (Ray up, its workers spawned and laid out), ``_start_fresh``,
    ``_load_chains``, ``_gather`` (what the driver reads before a log-likelihood or a kept
    sample), ``step``, ``_take_sample`` (or ``_take_samples``) and ``_resume_workers``;
    ``hook`` is the kind's. ``OWNED``: the workers own the model-level state too (a range or
    hash partition each: :class:`models.common.executors.owners.Owner`) and write its parts of
    every kept sample."""

    OWNED = False

    def _get(self, refs, what):
        try:
            return super()._get(refs, what)
        except RayTaskError as e:  # a part refused on a worker: its one line
            if isinstance(e.cause, ValueError):
                raise e.cause from None
            raise

    def fit(self, model, corpus, callback, checkpoint):
        model.fingerprint_ = corpus.fingerprint
        model.corpus_hash_ = model._corpus_hash(corpus)
        model.n_terms_ = corpus.n_terms
        model._n_docs = corpus.n_docs
        self.checkpoint = checkpoint
        self._setup(model, corpus)
        if checkpoint is None:
            self.dir = Path(tempfile.mkdtemp(prefix="topicir-ray-parts-"))
            weakref.finalize(model, shutil.rmtree, self.dir, True)
        else:
            self.dir = parts_dir(checkpoint)
            self.dir.mkdir(parents=True, exist_ok=True)
        self.base = {k: v for k, v in model._file_header().items() if k != "params"}
        model._samples = []
        sample_iters = set(model._sample_iters().tolist())
        model._ckpt_writes, model._ckpt_pending = [], 0
        if checkpoint is not None and os.path.exists(checkpoint):
            start = self._resume(model, corpus, checkpoint)
        else:
            model._log_lik_rows, model._log_lik_iters = [], []
            for attr in model._TRACES.values():
                setattr(model, attr, [])
            self._start_fresh(model, corpus)
            start = 0
        self._load_chains(model)
        self._counted = len(model._samples)  # kept samples whose parts a checkpoint counted
        for it in range(start, model.n_iter):
            self.step(model, corpus, it)
            done = it + 1
            model.n_iter_ = done
            log_due = done % model.log_lik_every == 0 or done == model.n_iter
            ckpt_due = checkpoint is not None and (done % model.checkpoint_every == 0 or done == model.n_iter)
            if log_due or done in sample_iters:
                self._gather(model)
            if log_due:
                model._log_lik_rows.append(self._log_liks(model))
                model._log_lik_iters.append(done)
            if done in sample_iters:
                model._samples.extend(self._take_samples(model, done))
            if ckpt_due:
                self._checkpointed(model, checkpoint, done)
            if callback is not None and (done % model.callback_every == 0 or done == model.n_iter):
                write = None if ckpt_due else partial(self._checkpointed, model, checkpoint, done)
                with stop_point(done, model.n_iter, checkpoint, write):
                    callback(model, done, model.n_iter)
        self._finalize(model, corpus)

    def _checkpointed(self, model, checkpoint, done):
        self._write_checkpoint(model, checkpoint)
        self.checkpointed(done)

    def _start_fresh(self, model, corpus):
        self.hook.start(model, corpus, self)

    def _log_liks(self, model):
        return [self.hook.log_lik(model, c, self) for c in range(self.C)]

    def _take_samples(self, model, sweep):
        return [self._take_sample(model, c, sweep) for c in range(self.C)]

    def _sample_words(self, model, c):
        """A kept sample's model-level part (the hook's, from the driver's counts)."""
        return self.hook.sample_words(model, c)

    def _take_sample(self, model, c, sweep):
        words = self._sample_words(model, c)
        name = f"chain{c}.sweep{sweep}.words.npz"
        ckpt.write_model_file(self.dir / name, dict(self.base, part="sample-words", shard=-1, chain=c, sweep=sweep),
                              words, kind=ckpt.CHECKPOINT_FORMAT)
        shards = [p for ps in self._get([w.write_sample.remote(os.fspath(self.dir), self.base, c, sweep)
                                         for w in self.workers], f"kept sample of sweep {sweep}") for p in ps]
        sample = dict(chain=c, iter=sweep, words=[-1, name, digest(words)], shards=shards)
        if self.OWNED:
            sample["owned"] = self._get([w.write_owned.remote(os.fspath(self.dir), self.base, c, sweep)
                                         for w in self.workers], f"kept sample of sweep {sweep}")
        return sample

    def _write_checkpoint(self, model, path):
        sweep = model.n_iter_
        state = [p for ps in self._get([w.write_state.remote(os.fspath(self.dir), self.base, sweep)
                                        for w in self.workers], f"checkpoint of sweep {sweep}") for p in ps]
        header = dict(model._header(), iteration=sweep, layout=LAYOUT, state_parts=state,
                      samples=model._samples)
        # the parts the workers (and the driver) wrote for it: its state, the samples kept since
        new, self._counted = model._samples[self._counted:], len(model._samples)
        parts = [p[1] for p in state] + [n for s in new for n in [s["words"][1]] + [
            p[1] for p in s["shards"] + s.get("owned", [])]]
        model._wrote(sum((self.dir / n).stat().st_size for n in parts))
        model._wrote(ckpt.write_model_file(path, header, self._manifest_arrays(model), kind=ckpt.CHECKPOINT_FORMAT),
                     sweep)
        keep = {p[1] for p in state}
        for old in self.dir.glob("state.*.sweep*.npz"):
            if old.name not in keep:
                old.unlink(missing_ok=True)

    def _manifest_arrays(self, model):
        """The arrays of a checkpoint's manifest (``self.manifest`` on a resume): the priors."""
        return {"alpha": model.alpha_}

    def _resume(self, model, corpus, path):
        f = model._open_checkpoint(path, corpus, ("n_jobs", "callback_every", "checkpoint_every",
                                                  "log_lik_every", "executor"))
        h = f.header
        if h.get("layout") != LAYOUT:
            raise ValueError(f"{os.fspath(path)}: a checkpoint of a trainer that keeps the chains' state "
                             f"in one process; resume it with executor='local' or the default Ray executor")
        alpha = np.asarray(f.arrays.get("alpha"), dtype=np.float64)
        if alpha.shape != self.hook.prior_shape(model) or not np.isfinite(alpha).all():
            raise ValueError(f"{os.fspath(path)}: damaged checkpoint (alpha of shape {alpha.shape}); "
                             f"delete it to start afresh")
        model.alpha_ = np.ascontiguousarray(alpha)
        self.manifest = f.arrays
        for s in h["samples"]:
            words = read_part(self.dir / s["words"][1], path, self.base, -1, s["words"][2])
            del words
        model._samples = [dict(s) for s in h["samples"]]
        model._log_lik_rows = [list(r) for r in h["log_lik"]]
        model._log_lik_iters = list(h["log_lik_iter"])
        for key, attr in model._TRACES.items():
            setattr(model, attr, [list(r) for r in h[key]])
        start = int(h["iteration"])
        self._resume_workers(model, corpus, path, h, start)
        model.n_iter_ = start
        return start

    def _finalize(self, model, corpus):
        samples = sorted(model._samples, key=lambda s: (s["chain"], s["iter"]))
        model.n_samples_ = len(samples) // model.n_chains
        model.sample_iter_ = np.array([s["iter"] for s in samples[:model.n_samples_]], dtype=np.int64)
        path = self.dir / "model.npz"
        self.hook.write_model(model, corpus, samples, self.dir, path)
        loaded = type(model).load(path, corpus.fingerprint)
        for name in model._INFERENCE_ARRAYS:
            setattr(model, name + "_", getattr(loaded, name + "_"))
        self.hook.loaded(model)
        model._model_file = path


class ShardedRunner(WorkerStateLoop, PartitionRunner):
    """:class:`WorkerStateLoop` over the partition rounds: every worker owns a contiguous
    range of the shards of every chain. ``hook`` is the kind's :class:`ShardHook`."""

    def _setup(self, model, corpus):
        hook, C = self.hook, model.n_chains
        self._start_ray(model, self.checkpoint)
        S = self.S
        self.shard_doc = shard_doc = shard_docs(corpus, S)
        self.ranges, args = [], []
        for a in range(self.W):
            s0, s1 = int(self.shard0[a]), int(self.shard0[a + 1])
            d0, d1 = int(shard_doc[s0]), int(shard_doc[s1])
            t0, t1 = int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])
            self.ranges.append((s0, s1, t0, t1, d0, d1))
            lay = dict(s0=s0, S=S, d0=d0, d1=d1, D=corpus.n_docs, V=corpus.n_terms,
                       shard_doc=shard_doc[s0:s1 + 1] - d0, doc_src=source(corpus.doc_ptr, d0, d1 + 1),
                       tok_src=source(corpus.term_ids, t0, t1))
            args.append((lay, C, hook.n_totals(model), *hook.worker_args(model, corpus)))
        self._spawn(hook.worker, args)
        stats = self._get([w.corpus_stats.remote() for w in self.workers], "reading the corpus")
        built = hook.layout(model, corpus, stats)
        self._get([w.build.remote(*built) for w in self.workers], "building the sweep order")
        hook.alloc(model, corpus)

    def _gather(self, model):
        for c in range(self.C):
            self._pull(model, c, docs=False, lists=True, assignments=False)

    def _resume_workers(self, model, corpus, path, h, start):
        n = model._sparse_n_active(start, corpus.n_docs)
        self.hook.counts_from(model, self._sum(
            [w.resume.remote(os.fspath(self.dir), os.fspath(path), self.base, h["state_parts"],
                             [s["shards"] for s in h["samples"]], self.hook.worker_prior(model), n)
             for w in self.workers], "resuming"))

    def _load_chains(self, model):
        """The partition rounds' object-store state: the totals on every worker, the slices."""
        hook = self.hook
        self.slices = [[None] * self.S for _ in range(self.C)]
        self.pending = [[] for _ in range(self.C)]
        group = hook.groups(model)
        self.terms = [np.flatnonzero(group == g) for g in range(self.S)]
        self.merge = ray.remote(num_cpus=0, max_retries=0)(merge_deltas).options(runtime_env=worker_env())
        for c in range(self.C):
            for w in self.workers:
                w.load_totals.remote(c, hook.totals(model)[c])
            for g, t in enumerate(self.terms):
                self.slices[c][g] = ray.put(hook.get_slice(model, c, t))
