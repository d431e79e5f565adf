"""Cost model of Gibbs training on a Ray cluster, from parts measured on one machine.

A training on W workers is projected as its parts (seconds):

- setup: the driver's initialisation (serial, per token), the workers' start, and the state
  shipped to them (every worker's share of the chains once, plus what each worker takes whole);
- compute: C chains x N tokens / (workers used x the per-core sampling rate), every sweep;
- transfer: the bytes of the busiest link per sweep / bandwidth (:func:`sweep_bytes`);
- latency: rounds per sweep x the measured round latency (rounds are barriers: not overlapped);
- driver: the driver's own work after every sweep (serial, per token) and what it pulls then;
- syncs: every sweep whose log-likelihood or sample the driver computes pulls the chains' state
  back and computes there (serial, per token).

With the chain state on the workers (``Parts.on_workers``, ``--ray-state workers``) the workers
initialise, sum their documents' log-likelihood terms and write their parts of samples and
checkpoints themselves, in parallel: setup's and a sync's per-token work divide by W, nothing
token-sized crosses to the driver, and every sync adds W round latencies (the running sum of the
log-likelihood passes from worker to worker).

What a kind moves per sweep follows from what its runner sends (n_shards = W):

- partition rounds (LDA, PAM, tree-LDA): the topic-word state travels as S term-group slices,
  each worker receives and sends one slice per round, S rounds a chain: every worker's link
  carries the whole state L once per chain and sweep; the totals' deltas (8 bytes an entry) go
  to a merge task and the sum back to every worker and the driver, every round;
- TCM (AD-LDA shards): the driver hands every worker the chain's restaurants, sized by the
  collocations (so by the tokens), and takes back the boundaries (4 bytes a token);
- gLDA with the state on the driver (whole chains): nothing; a worker sweeps whole chains, so
  at most C workers are used;
- TCM with the state on the workers (AD-LDA shards, the restaurants owned by the workers in
  hash partitions): worker to worker, every worker is sent the types of its route keys (L, the
  whole restaurants as one worker is sent them, measured per token; a worker's N / W tokens
  hold L W^-beta of them, as its terms by Heaps' law) and sends the restaurants of its
  documents to their owners (measured per token of the collection); a worker's link carries
  that once as a worker and about as much again as an owner, (W - 1)/W of it to other workers,
  in two rounds (the sweep, the owners' merge);
- gLDA with the state on the workers (AD-LDA shards, the count rows owned by the workers in
  term ranges): worker to worker, every worker is sent the rows of its documents' terms as the
  sweep starts (4 K bytes a row, dense: an upper bound, as a piece of rows travels as its
  nonzeros where those take fewer bytes; a worker's N / W tokens hold V W^-beta terms by
  Heaps' law) and sends its shards' changed entries to their owners (12 bytes each: flat index
  and change; measured per token of the collection); a worker's link carries that once as a
  worker and about as much again as an owner, (W - 1)/W of it to other workers, in two rounds.

L per chain: LDA's sparse term lists (4 bytes a term for its length, an entry per nonzero
n_kw, at most min(cf_w, K) of term w, packed in 4 or 8 bytes); PAM's dense n_wj (4 V s'
bytes); tree-LDA's node rows (n_e int32 of every node, n_i int32 of the internal ones; inv is
recomputed from n_i: 4 K bytes a node and 4 K more an internal node).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

PARTITION = ("lda", "pam", "tree-lda")
BOUNDARY_BYTES = 4  # TCM's boundaries: int32 a token
TOTAL_BYTES = 8     # the totals' entries: int64


class Collection(NamedTuple):
    name: str
    docs: float
    tokens: float
    terms: float


AP = Collection("AP", 250_000, 70.5e6, 200_000)


def grown(base: Collection, factor: float, heaps_beta: float) -> Collection:
    """``base`` with ``factor`` times the documents and tokens, its vocabulary by Heaps' law."""
    return Collection(f"{factor:g}x{base.name}", base.docs * factor, base.tokens * factor,
                      base.terms * factor ** heaps_beta)


def zipf_frequencies(tokens: float, terms: float, exponent: float = 1.0) -> np.ndarray:
    """Term frequencies of ``tokens`` over ``terms`` ranked terms with Zipf's law."""
    w = np.arange(1, int(terms) + 1, dtype=np.float64) ** -exponent
    return tokens * w / w.sum()


def lda_list_bytes(cf, k: int) -> float:
    """Upper bound of the bytes of LDA's sparse term lists given term frequencies ``cf``: 4 a
    term (its length) plus min(cf_w, K) entries, packed as the trainer packs them."""
    from models.lda.layout import word_list_packing

    cf = np.asarray(cf, dtype=np.float64)
    _, dtype = word_list_packing(k, int(cf.max(initial=0)))
    return 4.0 * len(cf) + np.dtype(dtype).itemsize * float(np.minimum(cf, k).sum())


class Sizes(NamedTuple):
    """A kind's topic counts and schedule: ``k`` topics (PAM: ``k`` sub-topics), the length of
    the totals, chains, sweeps, and the sweeps whose state the driver pulls (``events``)."""

    k: int
    n_totals: int
    chains: int
    sweeps: int
    events: int


class Parts(NamedTuple):
    """What the benchmark measured of a kind (per core, per token, per round)."""

    rate: float                 # tokens / s of one worker
    latency: float              # s per round
    setup_s_per_token: float    # the driver's initialisation
    start_s: float              # starting the workers (fixed)
    driver_s_per_token: float   # the driver's work after every sweep
    event_s_per_token: float    # a sync's work on the driver, per chain
    state_bytes_per_token: float   # chain state shipped at the start, per chain
    layout_bytes_per_token: float  # the workers' layouts shipped at the start
    worker_bytes_per_token: float  # what every worker takes whole (TCM's corpus)
    driver_bytes_per_token: float  # pulled after every sweep, per chain
    sync_bytes_per_token: float    # pulled at a sync, per chain
    restaurant_bytes_per_token: float = 0.0  # TCM: the restaurants a worker is sent whole
    changed_bytes_per_token: float = 0.0     # gLDA's shards: the changed counts sent back, per chain
    nodes_per_term: float = 0.0              # tree-LDA
    inner_per_term: float = 0.0              # tree-LDA: internal nodes
    on_workers: bool = False                 # the chain state stays on the workers


def state_bytes(kind: str, coll: Collection, sizes: Sizes, parts: Parts, zipf: float = 1.0) -> float:
    """L: the bytes of one chain's state that a sweep hands on (see the module docstring)."""
    if kind == "lda":
        return lda_list_bytes(zipf_frequencies(coll.tokens, coll.terms, zipf), sizes.k)
    if kind == "pam":
        return 4.0 * coll.terms * sizes.k
    if kind == "tree-lda":
        return 4.0 * sizes.k * (parts.nodes_per_term + parts.inner_per_term) * coll.terms
    if kind == "tcm":
        return parts.restaurant_bytes_per_token * coll.tokens
    return 0.0


def whole_chains(kind: str, on_workers: bool = False) -> bool:
    """Whether a worker sweeps whole chains: gLDA's with the state on the driver."""
    return kind == "glda" and not on_workers


def workers_used(kind: str, workers: int, sizes: Sizes, on_workers: bool = False) -> int:
    return min(workers, sizes.chains) if whole_chains(kind, on_workers) else workers


def rounds_per_sweep(kind: str, workers: int, sizes: Sizes, on_workers: bool = False) -> int:
    """Partition kinds: S = W rounds a chain; TCM and gLDA with the state on the workers: two
    (the sweep, the owners' sums); the others: one round (all chains at once)."""
    if kind in PARTITION:
        return sizes.chains * workers
    return 2 if kind in ("tcm", "glda") and on_workers else 1


def sweep_bytes(kind: str, workers: int, coll: Collection, sizes: Sizes, L: float,
                on_workers: bool = False, changed_bytes_per_token: float = 0.0, heaps_beta: float = 0.5) -> float:
    """Bytes over the busiest link in one sweep of every chain (n_shards = workers)."""
    C, W = sizes.chains, workers
    if whole_chains(kind, on_workers):
        return 0.0
    if kind == "tcm" and not on_workers:  # through the driver's link: W copies of the restaurants, the boundaries back
        return C * (W * L + BOUNDARY_BYTES * coll.tokens)
    if kind in ("glda", "tcm"):  # worker to worker: its part of the rows (restaurants) in, its
        # changes out; as owner about as much again
        whole = 4.0 * sizes.k * coll.terms if kind == "glda" else L
        return 2 * C * (whole * W ** -heaps_beta + changed_bytes_per_token * coll.tokens / W) * (W - 1) / W
    if kind in PARTITION:
        if W == 1:
            return 0.0  # the slices stay on the one worker
        return C * L + C * W * (2 * W + 1) * TOTAL_BYTES * sizes.n_totals
    return 0.0


def project(kind: str, coll: Collection, workers: int, sizes: Sizes, parts: Parts, gbps: float,
            zipf: float = 1.0, heaps_beta: float = 0.5) -> dict:
    """Projected seconds of a training, by part (the module docstring), and their total."""
    bw = gbps * 1e9 / 8
    N, C, W = coll.tokens, sizes.chains, workers
    used = workers_used(kind, W, sizes, parts.on_workers)
    L = state_bytes(kind, coll, sizes, parts, zipf)
    moved = sweep_bytes(kind, W, coll, sizes, L, parts.on_workers, parts.changed_bytes_per_token, heaps_beta)
    whole = whole_chains(kind, parts.on_workers)
    per_sweep = dict(
        compute=math.ceil(C / used) * N / parts.rate if whole else C * N / (used * parts.rate),
        transfer=moved / bw,
        latency=rounds_per_sweep(kind, W, sizes, parts.on_workers) * parts.latency,
        driver=N * parts.driver_s_per_token + C * N * parts.driver_bytes_per_token / bw)
    out = {key: sizes.sweeps * v for key, v in per_sweep.items()}
    ship = N * (C * parts.state_bytes_per_token + parts.layout_bytes_per_token + W * parts.worker_bytes_per_token)
    spread = used if parts.on_workers else 1  # per-token work of setup and syncs, side by side
    out["setup"] = N * parts.setup_s_per_token / spread + parts.start_s + ship / bw
    out["syncs"] = sizes.events * C * (N * (parts.event_s_per_token / spread + parts.sync_bytes_per_token / bw)
                                       + (used * parts.latency if parts.on_workers else 0.0))
    out["total"] = sum(out.values())
    out.update(workers_used=used, state_bytes=L, sweep_bytes=moved)
    return out
