"""Benchmark: LDA training throughput of topicir vs tomotopy, and an AP-scale synthetic run.

    topicir bench lda                          # 20 Newsgroups, K = 100 and 800, 50 sweeps
    topicir bench lda --k 800 --iters 100
    topicir bench lda --synthetic           # 250,000 docs, ~60 M tokens, K = 800, 3 chains

20 Newsgroups: every post of the bydate tarball (train + test), tokenised as described in
``retrieval/newsgroups.py`` (lowercase ``[a-z][a-z0-9]+``, NLTK stopwords out, doc freq >= 2).
Both samplers get the same integer tokens (tomotopy as strings of term ids, ``tw=ONE``, no
``min_cf``/``rm_top``), the same K, alpha = 50/K, beta = 0.01, the same number of sweeps, and 2
threads (``train(workers=2)``; tomotopy's alpha optimisation is switched off). One chain each.
topicir runs with its defaults (``init="online"``: one sequential pass draws every token given
those before it). Reported throughput = tokens x sweeps / wall seconds of training (numba
compilation is done by a warm-up run first and not counted; tomotopy's one-off initialisation
``train(0)`` neither; for topicir everything inside ``fit`` counts, including building the sweep
layout and the initialising pass). Both runners also return ``first_s``, the initialisation and
the first sweep, and ``later_s``, the mean sweep after the first (``topicir bench peers`` sets
them side by side).
``cpu-s`` is the process CPU time (all threads) of each training run: on a shared machine, wall
time depends on the other load, CPU seconds much less so.

Log-likelihood per token: ``ll/token`` is the collapsed joint log p(w, z) / n_tokens
(Griffiths & Steyvers 2004, eq. 2-3) computed with ``models.lda.model.joint_log_lik`` from each
sampler's final assignments (same formula for both); tomotopy's own ``ll_per_word`` is shown
next to it. Peak memory is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the whole process
after each row (it only grows).

Synthetic: a seeded Zipf corpus of AP's size (``models.common.corpus.synthetic_corpus``), K = 800, 3
chains; seconds per iteration (all chains), then 100 three-term queries ranked over every
document exactly as ``topicir run`` scores them (Dirichlet QL mixed with P_LDA averaged over the
15 samples, mu = 1000, lam = 0.7, top 1000), with the time of each query.
"""
import logging
import resource
import time
from types import SimpleNamespace

import numpy as np

from models.common.corpus import make_corpus, synthetic_corpus
from models.lda.model import LDA, joint_log_lik

from ..core.scoring import Query, Scorer, top_k
from ..core.stats import CollectionStats
from ..core.tables import Table, fixed
from . import import_tomotopy

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


def _peak_rss_gib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _cpu_seconds():
    """User + system CPU time of this process, all threads (tomotopy's workers included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def warm_up(n_shards):
    """Compile (or load from cache) every kernel the timed runs use."""
    c = synthetic_corpus(200, 500, 30, seed=0, n_latent=5)
    for shards in (n_shards, 1):
        LDA(n_topics=8, n_chains=1, n_iter=2, burn_in=1, sample_every=1, n_shards=shards,
            log_lik_every=1).fit(c)
    joint_log_lik(c, np.zeros(c.n_tokens, dtype=np.int32), 8, 0.1, 0.01)


def run_topicir(corpus, k, iters, n_shards, threads, seed):
    m = LDA(n_topics=k, n_chains=1, n_iter=iters, burn_in=iters - 1, sample_every=1,
            n_shards=n_shards, n_jobs=threads, seed=seed, log_lik_every=iters)
    ticks = []  # the end of every sweep
    t, cpu = time.perf_counter(), _cpu_seconds()
    m.fit(corpus, callback=lambda *_: ticks.append(time.perf_counter()))
    secs, cpu = time.perf_counter() - t, _cpu_seconds() - cpu
    return dict(secs=secs, cpu=cpu, tps=corpus.n_tokens * iters / secs,
                ll=float(m.log_lik_[-1, 0]), first_s=ticks[0] - t, later_s=_later(ticks, iters))


def _later(ticks, iters):
    """Mean seconds of the sweeps after the first, from the sweeps' end times (None for one)."""
    return (ticks[-1] - ticks[0]) / (iters - 1) if iters > 1 else None


def run_tomotopy(corpus, k, iters, threads, seed):
    tp = import_tomotopy()

    mdl = tp.LDAModel(tw=tp.TermWeight.ONE, k=k, alpha=50.0 / k, eta=0.01, seed=seed)
    mdl.optim_interval = 0
    kept = []
    for d in range(corpus.n_docs):
        toks = corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]]
        if len(toks):
            mdl.add_doc([str(t) for t in toks])
            kept.append(d)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "may differ even with fixed seed if workers != 1"
        t0 = time.perf_counter()
        mdl.train(0, workers=threads)  # the initialisation alone
        t, cpu = time.perf_counter(), _cpu_seconds()
        mdl.train(1, workers=threads)
        ticks = [time.perf_counter()]
        if iters > 1:
            mdl.train(iters - 1, workers=threads)
            ticks.append(time.perf_counter())
        secs, cpu = ticks[-1] - t, _cpu_seconds() - cpu
    # tomotopy's final state, re-indexed to our term ids, scored with our formula
    vocab = np.array([int(v) for v in mdl.used_vocabs], dtype=np.int32)
    lens, words, topics = [], [], []
    for doc in mdl.docs:
        w = np.asarray(doc.words, dtype=np.int64)
        lens.append(len(w))
        words.append(vocab[w])
        topics.append(np.asarray(doc.topics, dtype=np.int32))
    tcorpus = make_corpus(np.concatenate([[0], np.cumsum(lens)]), np.concatenate(words),
                          n_terms=corpus.n_terms, fingerprint="tomotopy")
    ll = joint_log_lik(tcorpus, np.concatenate(topics), k, 50.0 / k, 0.01)
    n = int(sum(lens))
    return dict(secs=secs, cpu=cpu, tps=n * iters / secs, ll=ll, ll_tp=float(mdl.ll_per_word), n_tokens=n,
                first_s=ticks[0] - t0, later_s=_later(ticks, iters))


def bench_newsgroups(args, out):
    from ..datasets.newsgroups import newsgroups_corpus

    t = time.perf_counter()
    corpus = first_docs(newsgroups_corpus(args.data)[0], args.docs)
    out(f"20news-bydate: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms "
        f"(read+tokenised in {time.perf_counter() - t:.1f} s); sweeps={args.iters}, "
        f"threads={args.threads}, topicir n_shards={args.shards}, seed={args.seed}")
    nan = float("nan")
    rows = []
    for k in args.k:
        ours = run_topicir(corpus, k, args.iters, args.shards, args.threads, args.seed)
        theirs = run_tomotopy(corpus, k, args.iters, args.threads, args.seed) if not args.no_tomotopy else None
        rows.append({"corpus": "20news", "K": k, "iters": args.iters,
                     "topicir M tok/s": fixed(ours["tps"] / 1e6, 2),
                     "tomotopy M tok/s": fixed(theirs["tps"] / 1e6, 2) if theirs else nan,
                     "ratio": fixed(ours["tps"] / theirs["tps"], 2) if theirs else nan,
                     "ll/token topicir": ours["ll"], "ll/token tomotopy": theirs["ll"] if theirs else nan,
                     "(tomotopy ll_per_word)": theirs["ll_tp"] if theirs else nan,
                     "cpu-s topicir": fixed(ours["cpu"], 1), "cpu-s tomotopy": fixed(theirs["cpu"], 1) if theirs else nan,
                     "peak GiB": fixed(_peak_rss_gib(), 2)})
        log.info("K=%d: topicir %.2f M tokens/s", k, ours["tps"] / 1e6)
    return rows


def bench_synthetic(args, out):
    t = time.perf_counter()
    corpus = synthetic_corpus(args.syn_docs, args.syn_terms, args.syn_len, seed=args.seed)
    out(f"synthetic: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms, "
        f"{corpus.fingerprint} (built in {time.perf_counter() - t:.1f} s)")
    k, chains = 800, 3
    n_samples = min(args.syn_samples, args.syn_iters)
    m = LDA(n_topics=k, n_chains=chains, n_iter=args.syn_iters,
            burn_in=args.syn_iters - n_samples, sample_every=1, n_shards=args.shards, n_jobs=args.threads, seed=args.seed,
            log_lik_every=args.syn_iters)
    times = []

    def cb(model, it, n_iter):
        times.append(time.perf_counter())

    t0, cpu = time.perf_counter(), _cpu_seconds()
    m.fit(corpus, callback=cb)
    total, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu
    per_iter = np.diff([t0] + times)
    out(f"K={k} chains={chains} sweeps={args.syn_iters} samples/chain={n_samples} "
        f"n_shards={args.shards} threads={args.threads}: seconds/iteration (all chains) "
        f"{' '.join(f'{x:.1f}' for x in per_iter)}; "
        f"{corpus.n_tokens * chains * args.syn_iters / total / 1e6:.2f} M tokens/s incl. setup "
        f"({total:.0f} s wall, {cpu:.0f} s CPU); "
        f"ll/token {m.log_lik_[-1].round(4).tolist()}; peak {_peak_rss_gib():.2f} GiB")
    # retrieval-side cost: 100 three-term queries ranked over every document, as `topicir run`
    # does it (exact Dirichlet QL mixed with P_LDA, lam = 0.7, mu = 1000, top 1000)
    t = time.perf_counter()
    stats = synthetic_stats(corpus)
    out(f"collection statistics of the synthetic corpus: {time.perf_counter() - t:.1f} s "
        f"(not counted below)")
    scorer = Scorer(stats, mu=1000.0, lam=0.7, model=m)
    rng = np.random.default_rng(args.seed)
    pool = np.flatnonzero((stats.df >= 10) & (stats.cf <= 0.05 * corpus.n_tokens))
    per_query = []
    t, cpu = time.perf_counter(), _cpu_seconds()
    for _ in range(100):
        t1 = time.perf_counter()
        ids = np.sort(rng.choice(pool, size=3, replace=False))
        top_k(scorer.score(Query("", [], ids, np.ones(3), [])), 1000)
        per_query.append(time.perf_counter() - t1)
    out(f"ranking: 100 queries x 3 terms over {corpus.n_docs} docs, {m.kd_ptr_.shape[0]} samples, "
        f"{len(m.kd_doc_)} stored (doc, topic) counts: {time.perf_counter() - t:.1f} s wall, "
        f"{_cpu_seconds() - cpu:.1f} s CPU; per query median {np.median(per_query):.3f} s, "
        f"first {per_query[0]:.2f} s (computes the per-document constants once); "
        f"peak {_peak_rss_gib():.2f} GiB")


def synthetic_stats(corpus):
    """CollectionStats of a Corpus (term i is named t<i>, zero-padded so that ids keep their order)."""
    n = corpus.n_tokens
    lens = np.diff(corpus.doc_ptr)
    doc_of = np.repeat(np.arange(corpus.n_docs, dtype=np.int64), lens)
    keys, tf = np.unique(corpus.term_ids.astype(np.int64) * corpus.n_docs + doc_of, return_counts=True)
    post_ptr = np.zeros(corpus.n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // corpus.n_docs, minlength=corpus.n_terms), out=post_ptr[1:])
    width = len(str(corpus.n_terms))
    arrays = dict(doc_ptr=corpus.doc_ptr.astype(np.int64), term_ids=corpus.term_ids,
                  positions=(np.arange(n) - np.repeat(corpus.doc_ptr[:-1], lens)).astype(np.int32),
                  post_ptr=post_ptr, post_doc=(keys % corpus.n_docs).astype(np.int32),
                  post_tf=tf.astype(np.int32))
    return CollectionStats([f"SYN-{d}" for d in range(corpus.n_docs)],
                           [f"t{i:0{width}d}" for i in range(corpus.n_terms)], arrays)


def first_docs(corpus, n_docs):
    """The corpus cut to its first ``n_docs`` documents (same term ids)."""
    if n_docs is None or n_docs >= corpus.n_docs:
        return corpus
    end = corpus.doc_ptr[n_docs]
    return make_corpus(corpus.doc_ptr[:n_docs + 1], corpus.term_ids[:end], n_terms=corpus.n_terms,
                       fingerprint=f"{corpus.fingerprint}:first{n_docs}")



def run(*, data: str = DEFAULT_20NEWS, k=(100, 800), iters: int = 50, docs: int | None = None,
        threads: int = 2, shards: int = 4, seed: int = 0, no_tomotopy: bool = False, synthetic: bool = False,
        syn_docs: int = 250_000, syn_terms: int = 200_000, syn_len: float = 240.0, syn_iters: int = 5,
        syn_samples: int = 5) -> list[Table]:
    """LDA training throughput on 20 Newsgroups (its first ``docs`` posts; all by default) against
    tomotopy, or with ``synthetic`` the AP-scale synthetic training and ranking run."""
    args = SimpleNamespace(**locals())
    t = time.perf_counter()
    warm_up(shards)
    log.info("numba warm-up/compilation: %.1f s (not counted)", time.perf_counter() - t)
    lines = []

    def out(line):
        log.info("%s", line)
        lines.append(line)

    if synthetic:
        bench_synthetic(args, out)
        return [Table("LDA at AP scale (synthetic corpus): training, then ranking with LDA smoothing", [],
                      notes=lines)]
    rows = bench_newsgroups(args, out)
    return [Table("LDA training throughput: topicir against tomotopy", rows, notes=lines)]
