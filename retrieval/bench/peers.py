"""Benchmark: topicir against tomotopy on an AP-size index, LDA and PAM, as ratios in one run.

    topicir bench peers --index build/bench-full/index

The corpus is an index's own (the term ids ``topicir train`` samples), by default the one
``topicir bench full`` builds from the synthetic AP collection. Each sampler is run exactly as
in ``topicir bench lda`` and ``topicir bench pam`` (same tokens, K, priors, 2 threads, one
chain; :func:`retrieval.bench.lda.run_topicir` and friends), one after the other in this
process, so the ratios compare runs under the same conditions. LDA: the mean sweep after the
first of each sampler, and the whole run (the start, its initialisation included, and every
sweep) of each. PAM: the mean seconds of a sweep after the first (topicir) against
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
                     "topicir s/sweep": fixed(ours["later_s"], 1),
                     "tomotopy s/sweep": fixed(theirs["later_s"], 1),
                     "topicir / tomotopy speed": fixed(theirs["later_s"] / ours["later_s"], 2),
                     "start + first sweep s topicir / tomotopy": f"{ours['first_s']:.3g} / {theirs['first_s']:.3g}",
                     "speed, whole run": fixed(_whole(theirs, iters) / _whole(ours, iters), 2),
                     "ll/token topicir": ours["ll"], "ll/token tomotopy": theirs["ll"],
                     "cpu-s per sweep topicir": fixed(ours["cpu"] / iters, 1),
                     "cpu-s per sweep tomotopy": fixed(theirs["cpu"] / tomotopy_iters, 1),
                     "peak GiB": fixed(lda_bench._peak_rss_gib(), 2)})
    return rows


def _whole(run, iters):
    """Seconds of a run's start and ``iters`` sweeps at its measured pace (the two samplers may
    run different sweep counts: both are taken to topicir's)."""
    return run["first_s"] + (iters - 1) * run["later_s"]


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
    if "lda" in kinds and min(iters, tomotopy_iters) < 2:
        raise ValueError(f"LDA is timed by its sweeps after the first: --iters and --tomotopy-iters must be "
                         f">= 2, got {iters} and {tomotopy_iters}")
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
            f"n_shards={shards}, one chain, seed={seed}. LDA: alpha = 50/K, beta = 0.01; s/sweep and speed: "
            "the mean sweep after the first of each sampler; start + first sweep: topicir's fit up to the end "
            "of its first sweep (the sweep layout and the initialising pass included), tomotopy's train(0) "
            "and train(1); speed, whole run: both samplers' start and first sweep plus the later sweeps, "
            "each for the sweeps topicir ran. PAM: alpha = 0.01, "
            "beta = 0.01, topicir's exact sampler, the mean sweep after the first against tomotopy's mean "
            "sweep (tomotopy re-estimates its sub-topic alphas). ll/token: the collapsed joint "
            "log-likelihood of each sampler's final state by the same formula.")
    return [Table("topicir against tomotopy on an AP-size collection", rows, notes=[note])]
