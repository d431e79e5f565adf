"""Benchmark: PAM training speed of topicir (exact and pruned samplers) vs tomotopy's PAModel.

    topicir bench pam                                  # 20 Newsgroups, (50, 100) and (100, 800)
    topicir bench pam --sizes 100,800 --iters 40 --tomotopy-iters 3
    topicir bench pam --sizes 100,800 --every 10 # every 10th post: tomotopy's sweep is long

20 Newsgroups: every post of the bydate tarball, tokenised as ``retrieval/newsgroups.py`` does
(the corpus of ``topicir bench lda``). Both samplers get the same integer tokens (tomotopy as
strings of term ids, ``tw=ONE``), the same s and s', alpha_r = 0.01, initial alpha_ij = 0.01,
beta = 0.01, and 2 threads (``train(workers=2)``). tomotopy re-estimates its alpha_ij every
sweep (its PAModel default, Minka's fixed point); topicir by moment matching every sweep.
One chain each. Seconds per iteration are wall-clock times of whole sweeps (alpha update
included), after numba compilation (a warm-up run, not counted) and after tomotopy's
initialisation (``train(0)``, not counted); tomotopy runs ``--tomotopy-iters`` sweeps only,
since one of its sweeps evaluates all s * s' pairs for every token.

"terms/token" is what topicir's sampler evaluates per token: doc-bucket pairs + super-topic
terms of the prior bucket + sub-topics scanned when the prior bucket is drawn (tomotopy
evaluates s * s' pairs per token). ``ll/token`` is the collapsed log p(w, z, z') / n_tokens of
the final state under its own alpha, by ``models.pam.model.pam_log_lik`` for both samplers.
"""
import logging
import resource
import time
import warnings

import numpy as np

from models.common.corpus import make_corpus, synthetic_corpus
from models.pam.model import PAM, pam_log_lik

from ..core.tables import Table, fixed
from . import import_tomotopy

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


def _peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def warm_up(n_shards):
    """Compile (or load from cache) every kernel the timed runs use."""
    c = synthetic_corpus(200, 500, 30, seed=0, n_latent=5)
    for sampler in ("exact", "pruned"):
        PAM(n_super=3, n_sub=5, n_chains=1, n_iter=4, burn_in=3, sample_every=1, n_shards=n_shards,
            sampler=sampler, prune_start=1, log_lik_every=1).fit(c)


def run_topicir(corpus, s, s2, iters, sampler, n_shards, threads, seed, prune_start):
    m = PAM(n_super=s, n_sub=s2, alpha_root=0.01, n_chains=1, n_iter=iters, burn_in=iters - 1,
            sample_every=1, sampler=sampler, prune_start=prune_start, n_shards=n_shards, n_jobs=threads, seed=seed,
            log_lik_every=iters)
    stamps = []
    t0 = time.perf_counter()
    m.fit(corpus, callback=lambda model, it, n: stamps.append(time.perf_counter()))
    # the first stamp includes allocation and initialisation: time it from its own sweep start
    per_iter = np.diff(stamps)
    return dict(model=m, per_iter=per_iter, first=stamps[0] - t0, ll=float(m.log_lik_[-1, 0]),
                terms=m.terms_per_token())


def run_tomotopy(corpus, s, s2, iters, threads, seed):
    tp = import_tomotopy()

    mdl = tp.PAModel(tw=tp.TermWeight.ONE, k1=s, k2=s2, alpha=0.01, subalpha=0.01, eta=0.01, seed=seed)
    kept = []
    for d in range(corpus.n_docs):
        toks = corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]
        if len(toks):
            mdl.add_doc([str(t) for t in toks])
            kept.append(d)
    per_iter = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "may differ even with fixed seed if workers != 1"
        mdl.train(0, workers=threads)
        for _ in range(iters):
            t = time.perf_counter()
            mdl.train(1, workers=threads)
            per_iter.append(time.perf_counter() - t)
    vocab = np.array([int(v) for v in mdl.used_vocabs], dtype=np.int32)
    lens, words, sup, sub = [], [], [], []
    for doc in mdl.docs:
        w = np.asarray(doc.words, dtype=np.int64)
        lens.append(len(w))
        words.append(vocab[w])
        sup.append(np.asarray(doc.topics, dtype=np.int64))
        sub.append(np.asarray(doc.subtopics, dtype=np.int64))
    tcorpus = make_corpus(np.concatenate([[0], np.cumsum(lens)]), np.concatenate(words),
                          n_terms=corpus.n_terms, fingerprint="tomotopy")
    alpha = np.asarray(mdl.subalpha, dtype=np.float64).reshape(s, s2)
    ll = pam_log_lik(tcorpus, np.concatenate(sup), np.concatenate(sub), s, s2, 0.01, alpha, 0.01)
    return dict(per_iter=np.array(per_iter), ll=ll, ll_tp=float(mdl.ll_per_word))


def _every(corpus, k):
    """Posts 0, k, 2k, ... of the corpus (same term ids)."""
    keep = np.arange(0, corpus.n_docs, k)
    parts = [corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]] for d in keep]
    lens = np.array([len(x) for x in parts], dtype=np.int64)
    return make_corpus(np.concatenate([[0], np.cumsum(lens)]), np.concatenate(parts),
                       n_terms=corpus.n_terms, fingerprint=f"{corpus.fingerprint}:every{k}")


def run(*, data: str = DEFAULT_20NEWS, sizes=((50, 100), (100, 800)), iters: int = 40,
        tomotopy_iters: int = 3, samplers=("exact", "pruned"), prune_start: int = 10, threads: int = 2,
        shards: int = 4, seed: int = 0, no_tomotopy: bool = False, every: int = 1) -> list[Table]:
    """Time PAM training per (s, s') size in ``sizes``: tomotopy's PAModel, then each of topicir's
    ``samplers``; ``every`` > 1 keeps every k-th post only. Returns the speed table and the
    terms evaluated per token along each run."""
    t = time.perf_counter()
    warm_up(shards)
    log.info("numba warm-up/compilation: %.1f s (not counted)", time.perf_counter() - t)
    from ..datasets.newsgroups import newsgroups_corpus

    corpus, _, _ = newsgroups_corpus(data)
    if every > 1:
        corpus = _every(corpus, every)
    rows, traces = [], []
    for s, s2 in sizes:
        theirs = None
        if not no_tomotopy:
            theirs = run_tomotopy(corpus, s, s2, tomotopy_iters, threads, seed)
            rows.append({"s,s'": f"{s},{s2}", "sampler": "tomotopy", "iters": len(theirs["per_iter"]),
                         "s/iter mean": fixed(theirs["per_iter"].mean(), 2),
                         "s/iter last10": fixed(theirs["per_iter"][-10:].mean(), 2), "speed-up": "1.0x",
                         "ll/token": theirs["ll"], "terms/token (last)": s * s2,
                         "peak GiB": fixed(_peak_rss_gib(), 2)})
            log.info("%s,%s tomotopy: %.2f s/iter (tomotopy ll_per_word %.4f)", s, s2,
                     theirs["per_iter"].mean(), theirs["ll_tp"])
        for sampler in samplers:
            ours = run_topicir(corpus, s, s2, iters, sampler, shards, threads, seed, prune_start)
            # conservative: tomotopy's cost per sweep is flat, ours falls as documents get sparse
            ratio = theirs["per_iter"].mean() / ours["per_iter"].mean() if theirs is not None else float("nan")
            rows.append({"s,s'": f"{s},{s2}", "sampler": sampler, "iters": iters,
                         "s/iter mean": fixed(ours["per_iter"].mean(), 2),
                         "s/iter last10": fixed(ours["per_iter"][-10:].mean(), 2), "speed-up": f"{ratio:.1f}x",
                         "ll/token": ours["ll"], "terms/token (last)": fixed(float(ours["terms"][-1, 5]), 1),
                         "peak GiB": fixed(_peak_rss_gib(), 2)})
            log.info("%s,%s %s: %.2f s/iter", s, s2, sampler, ours["per_iter"].mean())
            tt = ours["terms"]
            for i in [i for i in (0, 1, 2, 4, 9, 19, 29, 39, 59, 79, 99) if i < len(tt)]:
                traces.append({"s,s'": f"{s},{s2}", "sampler": sampler,
                               "sweep": f"{int(tt[i, 0])}{' (pruned)' if tt[i, 1] else ''}",
                               "terms/token": round(float(tt[i, 5])), "doc pairs": round(float(tt[i, 2])),
                               "super": round(float(tt[i, 3])), "sub": round(float(tt[i, 4]))})
    setting = (f"20news-bydate{f' (every {every}th post)' if every > 1 else ''}: {corpus.n_docs} docs, "
               f"{corpus.n_tokens} tokens, {corpus.n_terms} terms; threads={threads}, topicir n_shards="
               f"{shards}, seed={seed}, pruned sweeps alternate from sweep {prune_start}")
    return [Table("PAM training speed: topicir against tomotopy's PAModel", rows, notes=[setting]),
            Table("Terms evaluated per token along each topicir run", traces, digits=0)]
