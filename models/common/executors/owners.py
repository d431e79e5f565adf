"""Workers that own the model-level state of a chain besides their shards' (gLDA's count rows
by term range, TCM's restaurant types by hash partition), so that it never gathers on the
driver: their parts of every kept sample, and a sample's model-level arrays joined from them."""
from pathlib import Path

import numpy as np

from .. import checkpoint as ckpt
from ..kept import digest
from .ray import RayRunner
from .sharded import WorkerStateLoop, base_sweep, read_part, shard_bounds, source


class Owner:
    """A worker that owns part ``lay["a"]`` of the model-level state of every chain (gLDA's
    count rows, TCM's restaurant types): it writes that part of every kept sample
    (``chain<c>.sweep<i>.owned<a>.npz``, its ``owned_part(c)``) and checks it on a resume."""

    def write_owned(self, directory, base, c, sweep):
        arrays, a = self.owned_part(c), self.lay["a"]
        name = f"chain{c}.sweep{sweep}.owned{a}.npz"
        ckpt.write_model_file(Path(directory) / name, dict(base, part="sample-owned", owner=a, chain=c, sweep=sweep),
                              arrays, kind=ckpt.CHECKPOINT_FORMAT)
        return [a, name, digest(arrays)]

    def resume_parts(self, directory, checkpoint, base, state, samples, owned):
        """A resume's checks of this worker's parts: its shards' of every kept sample, its own
        (as owner) of every kept sample's ``owned`` list, then every one of its shards' state
        part (``check_state``); returns the state parts' arrays by shard."""
        for listed in samples:
            self.check_parts(directory, checkpoint, base, listed)
        a = self.lay["a"]
        for listed in owned:
            for owner, name, sha in listed:
                if owner == a:
                    read_part(Path(directory) / name, checkpoint, base, a, sha, unit="owner")
        parts = self.check_parts(directory, checkpoint, base, state)
        s0 = self.lay["s0"]
        for s in range(s0, s0 + len(self.lay["shard_doc"]) - 1):
            if s not in parts:
                raise ValueError(f"{checkpoint}: lists no state part of shard {s}; delete it to start afresh")
            self.check_state(Path(directory) / f"state.shard{s}.sweep{base_sweep(state, s)}.npz", s, parts[s])
        return parts


def one_each(values):
    """A Ray method's answers for ``num_returns=len(values)``: one value is returned as itself."""
    return tuple(values) if len(values) > 1 else values[0]


def each_ref(refs, n):
    """The ``n`` references of a call made with ``num_returns=n``, as a list (one: a list of it)."""
    return list(refs) if n > 1 else [refs]


def sample_words(directory, sample, ptr):
    """A kept sample's model-level arrays: its words part, with its owners' parts joined in
    owner order (their CSR tables, pointer ``ptr``, as one; their other arrays concatenated)."""
    words = dict(ckpt.read_model_file(Path(directory) / sample["words"][1], kind=ckpt.CHECKPOINT_FORMAT).arrays)
    if "owned" not in sample:
        return words
    parts = [ckpt.read_model_file(Path(directory) / name, kind=ckpt.CHECKPOINT_FORMAT).arrays
             for _, name, _ in sample["owned"]]
    joined = np.zeros(sum(len(p[ptr]) - 1 for p in parts) + 1, np.int64)
    np.cumsum(np.concatenate([np.diff(p[ptr]) for p in parts]), out=joined[1:])
    words.update({k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != ptr})
    words[ptr] = joined
    return words


def moved_bytes(got, sent, a):
    """What owner ``a`` received from and sent to every worker (bytes by worker): the totals,
    and the part that changed worker."""
    return dict(received=sum(got), sent=sum(sent), cross=sum(got) + sum(sent) - got[a] - sent[a])


class OwnerShardRunner(WorkerStateLoop, RayRunner):
    """:class:`WorkerStateLoop` over document shards whose workers own the model-level state
    too (gLDA's, TCM's). ``HOOK``: the kind's hook class. Worker a owns shards ``ranges[a]`` of
    every chain and part a of W of the model-level state; nothing is handed over or pulled at a
    sync (the owners keep it current)."""

    OWNED = True
    HOOK = None

    def __init__(self, executor, model):
        super().__init__(executor, model)
        self.hook = self.HOOK()

    def _spawn_owners(self, model, corpus, worker, more=None, **lay_extra):
        """A ``worker`` actor for every worker (Ray up: ``_start_ray``): its layout ``lay``
        (owner a of W, its shards and documents, where its tokens are) with ``lay_extra``, the
        chains, the model's class and parameters, and ``more(t0, t1)`` (its tokens' range) if
        given."""
        S, W = self.S, self.W
        shard_doc = shard_bounds(corpus, S)
        params = {k: v for k, v in model.get_params().items() if k != "executor"}
        self.ranges, args = [], []
        for a in range(W):
            s0, s1 = int(self.shard0[a]), int(self.shard0[a + 1])
            d0, d1 = int(shard_doc[s0]), int(shard_doc[s1])
            t0, t1 = int(corpus.doc_ptr[d0]), int(corpus.doc_ptr[d1])
            self.ranges.append((s0, s1))
            lay = dict(lay_extra, a=a, W=W, s0=s0, S=S, d0=d0, d1=d1, t0=t0, D=corpus.n_docs, V=corpus.n_terms,
                       shard_doc=shard_doc[s0:s1 + 1] - d0, doc_src=source(corpus.doc_ptr, d0, d1 + 1),
                       tok_src=source(corpus.term_ids, t0, t1))
            args.append((lay, model.n_chains, type(model), params, *(more(t0, t1) if more else ())))
        self._spawn(worker, args)

    def _load_chains(self, model):
        """Nothing to hand over: the shards' state never leaves their workers."""

    def _gather(self, model):
        """Nothing to pull: the owners keep the model-level state current after every sweep."""

    def _swept(self, model, corpus, seconds, moved):
        """A sweep's statistics: two rounds, worker to worker (not through the driver): the
        workers' changes to their owners (``moved["received"]``, summed over the owners) and the
        owners' parts back to every worker (``"sent"``)."""
        self.stats.update(rounds=self.stats["rounds"] + 2, sweeps=self.stats["sweeps"] + 1, workers=self.W,
                          sweep_seconds=seconds, tokens_per_s=self.C * corpus.n_tokens / seconds,
                          slice_bytes_per_sweep=moved["received"] + moved["sent"],
                          cross_worker_bytes_per_sweep=moved["cross"], changed_bytes_per_sweep=moved["received"],
                          counts_bytes_per_sweep=moved["sent"], n_k_bytes_per_sweep=0)
        model.executor_stats_ = dict(self.stats)

    def _running_sum(self, method, c, what="log-likelihood"):
        """``method(c, total)`` of every worker in turn, from 0.0: a sum over ranges held by the
        workers, in the float of one pass."""
        total = 0.0
        for w in self.workers:
            total = self._get(getattr(w, method).remote(c, total), what)
        return total
