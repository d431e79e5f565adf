"""Benchmark: topicir against tomotopy on an AP-size index, LDA and PAM, as ratios in one run.

    topicir bench peers --index build/bench-full/index

The corpus is an index's own (the term ids ``topicir train`` samples), by default the one
``topicir bench full`` builds from the synthetic AP collection. Each sampler is run exactly as
in ``topicir bench lda`` and ``topicir bench pam`` (same tokens, K, priors, 2 threads, one
chain; :func:`retrieval.bench.lda.run_topicir` and friends), one after the other in this
process, so the ratios compare runs under the same conditions. LDA: tokens x sweeps / wall
seconds over the whole ``fit`` for topicir (initialisation included) against tomotopy's sweeps
after its own initialisation. PAM: the mean seconds of a sweep after the first (topicir) against
tomotopy's mean sweep. A PAM size can be run on every k-th document (``--pam-every``), both
samplers alike: tomotopy's sweep costs every (super, sub) pair per token, which at 100,800 on the
whole collection is hours per sweep.
"""
import logging
import time

from ..core.tables import Table, fixed
from . import lda as lda_bench
from . import pam as pam_bench

log = logging.getLogger(__name__)


def _corpus(index):
    from ..core.index import Index
    from ..core.modelfiles import index_corpus

    return index_corpus(Index(index))


def _shape(corpus):
    return f"{corpus.n_docs:,} docs, {corpus.n_tokens:,} tokens"


def lda_rows(corpus, ks, iters, tomotopy_iters, shards, threads, seed):
    rows = []
    for k in ks:
        ours = lda_bench.run_topicir(corpus, k, iters, shards, threads, seed)
        log.info("LDA K=%d topicir: %.2f M tokens/s", k, ours["tps"] / 1e6)
        theirs = lda_bench.run_tomotopy(corpus, k, tomotopy_iters, threads, seed)
        log.info("LDA K=%d tomotopy: %.2f M tokens/s", k, theirs["tps"] / 1e6)
        rows.append({"model": "LDA", "size": f"K={k}", "documents": _shape(corpus),
                     "sweeps topicir / tomotopy": f"{iters} / {tomotopy_iters}",
                     "topicir s/sweep": fixed(corpus.n_tokens / ours["tps"], 1),
                     "tomotopy s/sweep": fixed(theirs["n_tokens"] / theirs["tps"], 1),
                     "topicir / tomotopy speed": fixed(ours["tps"] / theirs["tps"], 2),
                     "ll/token topicir": ours["ll"], "ll/token tomotopy": theirs["ll"],
                     "cpu-s per sweep topicir": fixed(ours["cpu"] / iters, 1),
                     "cpu-s per sweep tomotopy": fixed(theirs["cpu"] / tomotopy_iters, 1),
                     "peak GiB": fixed(lda_bench._peak_rss_gib(), 2)})
    return rows


def pam_rows(corpus, sizes, everies, iters, tomotopy_iters, shards, threads, seed):
    rows = []
    for (s, s2), every in zip(sizes, everies):
        part = pam_bench._every(corpus, every) if every > 1 else corpus
        ours = pam_bench.run_topicir(part, s, s2, iters, "exact", shards, threads, seed, prune_start=iters)
        log.info("PAM %d,%d topicir: %.2f s/sweep", s, s2, ours["per_iter"].mean())
        theirs = pam_bench.run_tomotopy(part, s, s2, tomotopy_iters, threads, seed)
        log.info("PAM %d,%d tomotopy: %.2f s/sweep", s, s2, theirs["per_iter"].mean())
        rows.append({"model": "PAM", "size": f"{s},{s2}",
                     "documents": _shape(part) + (f" (every {every}-th document)" if every > 1 else ""),
                     "sweeps topicir / tomotopy": f"{iters} / {tomotopy_iters}",
                     "topicir s/sweep": fixed(ours["per_iter"].mean(), 1),
                     "tomotopy s/sweep": fixed(theirs["per_iter"].mean(), 1),
                     "topicir / tomotopy speed": fixed(theirs["per_iter"].mean() / ours["per_iter"].mean(), 2),
                     "ll/token topicir": ours["ll"], "ll/token tomotopy": theirs["ll"],
                     "peak GiB": fixed(pam_bench._peak_rss_gib(), 2)})
    return rows


def run(*, index: str = "build/bench-full/index", kinds=("lda", "pam"), k=(100, 800), iters: int = 10,
        tomotopy_iters: int = 10, pam_sizes=((50, 100), (100, 800)), pam_every=(1, 25), pam_iters: int = 5,
        pam_tomotopy_iters: int = 1, threads: int = 2, shards: int = 4, seed: int = 0) -> list[Table]:
    """Time topicir's and tomotopy's LDA (each K in ``k``) and PAM (each size in ``pam_sizes``, on
    every ``pam_every``-th document) on the index's corpus, one after the other."""
    if len(pam_every) != len(pam_sizes):
        raise ValueError(f"--pam-every needs one value per --pam-sizes pair ({len(pam_sizes)}), "
                         f"got {len(pam_every)}")
    t = time.perf_counter()
    corpus = _corpus(index)
    log.info("corpus of %s: %s, %d terms (%.1f s)", index, _shape(corpus), corpus.n_terms,
             time.perf_counter() - t)
    t = time.perf_counter()
    lda_bench.warm_up(shards)
    pam_bench.warm_up(shards)
    log.info("numba warm-up/compilation: %.1f s (not counted)", time.perf_counter() - t)
    rows = []
    if "lda" in kinds:
        rows += lda_rows(corpus, k, iters, tomotopy_iters, shards, threads, seed)
    if "pam" in kinds:
        rows += pam_rows(corpus, pam_sizes, pam_every, pam_iters, pam_tomotopy_iters, shards, threads, seed)
    note = (f"Index {index}: {_shape(corpus)}, {corpus.n_terms:,} terms; threads={threads}, topicir "
            f"n_shards={shards}, one chain, seed={seed}. LDA: alpha = 50/K, beta = 0.01, topicir's whole fit "
            "(initialisation included) against tomotopy's sweeps after train(0). PAM: alpha = 0.01, "
            "beta = 0.01, topicir's exact sampler, the mean sweep after the first against tomotopy's mean "
            "sweep (tomotopy re-estimates its sub-topic alphas). ll/token: the collapsed joint "
            "log-likelihood of each sampler's final state by the same formula.")
    return [Table("topicir against tomotopy on an AP-size collection", rows, notes=[note])]
