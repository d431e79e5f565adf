"""Benchmark: PAM training speed of topicir (exact and pruned samplers) vs tomotopy's PAModel.

    topicir bench pam                                  # 20 Newsgroups, (50, 100) and (100, 800)
    topicir bench pam -- --sizes 100,800 --iters 40 --tomotopy-iters 3
    topicir bench pam -- --sizes 100,800 --every 10 # every 10th post: tomotopy's sweep is long

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
the final state under its own alpha, by ``models.pam.pam_log_lik`` for both samplers.
"""
import argparse
import resource
import time
import warnings

import numpy as np

from models.corpus import make_corpus, synthetic_corpus
from models.pam import PAM, pam_log_lik

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
    m = PAM(n_super=s, n_sub=s2, n_chains=1, n_iter=iters, burn_in=iters - 1, sample_every=1,
            sampler=sampler, prune_start=prune_start, n_shards=n_shards, n_jobs=threads, seed=seed,
            log_lik_every=iters)
    stamps = []
    t0 = time.perf_counter()
    m.fit(corpus, callback=lambda model, it, n: stamps.append(time.perf_counter()))
    # the first stamp includes allocation and initialisation: time it from its own sweep start
    per_iter = np.diff(stamps)
    return dict(model=m, per_iter=per_iter, first=stamps[0] - t0, ll=float(m.log_lik_[-1, 0]),
                terms=m.terms_per_token())


def run_tomotopy(corpus, s, s2, iters, threads, seed):
    import tomotopy as tp

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


def main(argv=None):
    p = argparse.ArgumentParser(prog="topicir bench pam", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--sizes", nargs="+", default=["50,100", "100,800"], help="s,s' pairs")
    p.add_argument("--iters", type=int, default=40, help="topicir sweeps per run")
    p.add_argument("--tomotopy-iters", type=int, default=3, help="tomotopy sweeps timed per size")
    p.add_argument("--samplers", nargs="+", default=["exact", "pruned"], choices=("exact", "pruned"))
    p.add_argument("--prune-start", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shards", type=int, default=4, help="topicir document shards")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tomotopy", action="store_true")
    p.add_argument("--every", type=int, default=1,
                   help="keep every k-th post only (both samplers), e.g. 10 to time tomotopy at 100,800")
    args = p.parse_args(argv)
    sizes = [tuple(int(x) for x in z.split(",")) for z in args.sizes]
    t = time.perf_counter()
    warm_up(args.shards)
    print(f"# numba warm-up/compilation: {time.perf_counter() - t:.1f} s (not counted)", flush=True)
    from ..datasets.newsgroups import newsgroups_corpus

    t = time.perf_counter()
    corpus, _, _ = newsgroups_corpus(args.data)
    if args.every > 1:
        corpus = _every(corpus, args.every)
    print(f"# 20news-bydate{f' (every {args.every}th post)' if args.every > 1 else ''}: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms "
          f"(read in {time.perf_counter() - t:.1f} s); threads={args.threads}, topicir n_shards="
          f"{args.shards}, seed={args.seed}, pruned sweeps alternate from sweep {args.prune_start}", flush=True)
    header = (f"{'s,s_':>8} {'sampler':>9} {'iters':>5} {'s/iter mean':>11} {'s/iter last10':>13} "
              f"{'speed-up':>11} {'ll/token':>9} {'terms/token (last)':>19} {'peak GiB':>8}")
    rows = []
    for s, s2 in sizes:
        theirs = None
        if not args.no_tomotopy:
            theirs = run_tomotopy(corpus, s, s2, args.tomotopy_iters, args.threads, args.seed)
        print(header, flush=True)
        if theirs is not None:
            print(f"{f'{s},{s2}':>8} {'tomotopy':>9} {len(theirs['per_iter']):>5} "
                  f"{theirs['per_iter'].mean():>11.2f} {theirs['per_iter'][-10:].mean():>13.2f} "
                  f"{1.0:>11.2f} {theirs['ll']:>9.4f} {s * s2:>19d} {_peak_rss_gib():>8.2f}"
                  f"   (tomotopy ll_per_word {theirs['ll_tp']:.4f})", flush=True)
        for sampler in args.samplers:
            ours = run_topicir(corpus, s, s2, args.iters, sampler, args.shards, args.threads, args.seed,
                               args.prune_start)
            last = ours["per_iter"][-10:].mean()
            # conservative: tomotopy's cost per sweep is flat, ours falls as documents get sparse
            ratio = theirs["per_iter"].mean() / ours["per_iter"].mean() if theirs is not None else float("nan")
            print(f"{f'{s},{s2}':>8} {sampler:>9} {args.iters:>5} {ours['per_iter'].mean():>11.2f} "
                  f"{last:>13.2f} {ratio:>10.1f}x {ours['ll']:>9.4f} {ours['terms'][-1, 5]:>19.1f} "
                  f"{_peak_rss_gib():>8.2f}", flush=True)
            rows.append(dict(size=(s, s2), sampler=sampler, ours=ours, tomotopy=theirs))
        for r in [r for r in rows if r["size"] == (s, s2)]:
            tt = r["ours"]["terms"]
            pick = [i for i in (0, 1, 2, 4, 9, 19, 29, 39, 59, 79, 99) if i < len(tt)]
            print(f"# terms/token, {s},{s2} {r['sampler']}: " + "  ".join(
                f"it{int(tt[i, 0])}{'p' if tt[i, 1] else ''}={tt[i, 5]:.0f} "
                f"(doc {tt[i, 2]:.0f} + sup {tt[i, 3]:.0f} + sub {tt[i, 4]:.0f})" for i in pick), flush=True)
    return rows


if __name__ == "__main__":
    main()
