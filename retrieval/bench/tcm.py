"""Benchmark: TCM training speed, seconds per Gibbs iteration (the paper's Table 5).

    topicir bench tcm                              # 2,000-doc subset and all of 20 Newsgroups
    topicir bench tcm -- --k 100 --threads 2 --samplers sparse --subsets 2000

Corpus: 20 Newsgroups (bydate, train + test) tokenised as in ``retrieval/newsgroups.py``
(lowercase ``[a-z][a-z0-9]+``, NLTK stopwords out, document frequency >= 2), keeping text order;
a collocation may not continue across punctuation (``.,;:!?()[]{}"``), a stopword or a dropped
rare word (the paper splits at punctuation and stopwords). The 2,000-document subset is a seeded
random sample of the posts (Zhao et al. time a 2,000-document subset too; their Table 5: sparse
TCM 0.14-0.35 s, non-sparse 6.6-233 s per iteration for 100-800 topics).

Every row: one chain, ``--shards`` fixed document shards (results do not depend on the thread
count, only the speed does), alpha0 resampled, seconds per iteration = median wall time of the
``--iters`` timed sweeps (after ``--warm`` untimed ones; each includes the AD-LDA merge, i.e.
rebuilding the restaurants from b, and the alpha0 update). Numba compilation happens in a
warm-up on a small corpus first and is not counted.
"""
import argparse
import re
import time

import numpy as np

from models.corpus import make_corpus
from models.tcm import TCM

from ..datasets.newsgroups import STOPWORDS, read_newsgroups

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"
TOKEN_OR_PUNCT = re.compile(r"[a-z][a-z0-9]+|[.,;:!?()\[\]{}\"]")


def text_sequence(text):
    """Terms of ``text`` in order and where a split follows: [(term, split_before)]."""
    out, pending = [], False
    for tok in TOKEN_OR_PUNCT.findall(text.lower()):
        if len(tok) == 1 or tok in STOPWORDS:  # punctuation or stopword
            pending = True
            continue
        out.append((tok, pending))
        pending = False
    return out


def newsgroups_sequences(path=DEFAULT_20NEWS, min_df=2):
    """20 Newsgroups as a Corpus in text order plus split flags (n_tokens,) uint8."""
    posts = list(read_newsgroups(path))
    seqs = [text_sequence(p.text) for p in posts]
    df = {}
    for seq in seqs:
        for t in {t for t, _ in seq}:
            df[t] = df.get(t, 0) + 1
    ids, lens, flat, split = {}, [], [], []
    for seq in seqs:
        n, gap = 0, False
        for t, before in seq:
            if df[t] < min_df:  # a dropped word also separates its neighbours
                gap = True
                continue
            if (before or gap) and n:
                split[-1] = 1
            flat.append(ids.setdefault(t, len(ids)))
            split.append(0)
            n += 1
            gap = False
        if n:
            split[-1] = 1
        lens.append(n)
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    corpus = make_corpus(doc_ptr, np.array(flat, dtype=np.int32), n_terms=len(ids),
                         fingerprint=f"20news-bydate-sequences:min_df={min_df}")
    return corpus, np.array(split, dtype=np.uint8)


def subset(corpus, split, n_docs, seed=0):
    """A seeded random sample of ``n_docs`` documents (in their original order)."""
    docs = np.sort(np.random.default_rng(seed).choice(corpus.n_docs, size=n_docs, replace=False))
    parts = [np.arange(corpus.doc_ptr[d], corpus.doc_ptr[d + 1]) for d in docs]
    idx = np.concatenate(parts)
    doc_ptr = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    sub = make_corpus(doc_ptr, corpus.term_ids[idx], n_terms=corpus.n_terms,
                      fingerprint=f"{corpus.fingerprint}:subset={n_docs},seed={seed}")
    return sub, split[idx]


def time_tcm(corpus, split, k, sampler, threads, iters, warm, shards, seed):
    times = []
    m = TCM(n_topics=k, n_chains=1, n_iter=warm + iters, burn_in=warm + iters - 1, sample_every=1,
            sampler=sampler, n_shards=shards, n_jobs=threads, seed=seed, log_lik_every=warm + iters)
    m.fit(corpus, split=split, callback=lambda model, it, n: times.append(time.perf_counter()))
    per_iter = np.diff(times)[max(warm - 1, 0):]
    return dict(secs=float(np.median(per_iter)), mean=float(per_iter.mean()),
                ll=float(m.log_lik_[-1, 0]), alpha0=float(m.alpha0_[0]),
                multi=float((np.diff(m.type_ptr_) > 1).mean()))


def warm_up(shards):
    """Compile (or load from cache) every kernel the timed runs use."""
    from models.corpus import synthetic_corpus

    c = synthetic_corpus(100, 200, 20, seed=0, n_latent=3)
    sp = (np.random.default_rng(0).random(c.n_tokens) < 0.2).astype(np.uint8)
    for sampler in ("sparse", "exact"):
        TCM(n_topics=4, n_chains=1, n_iter=2, burn_in=1, sample_every=1, sampler=sampler,
            n_shards=shards, log_lik_every=1).fit(c, split=sp)


def main(argv=None):
    p = argparse.ArgumentParser(prog="topicir bench tcm", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--subsets", type=int, nargs="+", default=[2000, 0],
                   help="document counts of the corpora timed; 0 = all of 20 Newsgroups")
    p.add_argument("--k", type=int, nargs="+", default=[100, 800], help="topic counts")
    p.add_argument("--samplers", nargs="+", default=["sparse", "exact"], choices=("sparse", "exact"))
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--iters", type=int, default=5, help="timed sweeps per row")
    p.add_argument("--warm", type=int, default=2, help="untimed sweeps before them")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t = time.perf_counter()
    warm_up(args.shards)
    print(f"# numba warm-up/compilation: {time.perf_counter() - t:.1f} s (not counted)", flush=True)
    t = time.perf_counter()
    full, full_split = newsgroups_sequences(args.data)
    print(f"# 20news-bydate: {full.n_docs} docs, {full.n_tokens} tokens, {full.n_terms} terms, "
          f"{int(full_split.sum())} splits (read+tokenised in {time.perf_counter() - t:.1f} s); "
          f"shards={args.shards}, seed={args.seed}, {args.warm} untimed + {args.iters} timed sweeps",
          flush=True)
    print(f"{'corpus':<12} {'tokens':>9} {'K':>4} {'sampler':>7} {'threads':>7} {'s/iter':>8} "
          f"{'(mean)':>8} {'M tok/s':>8} {'ll/token':>9} {'alpha0':>7} {'multi%':>6}", flush=True)
    for n_docs in args.subsets:
        corpus, split = (full, full_split) if n_docs == 0 else subset(full, full_split, n_docs, args.seed)
        name = "20news" if n_docs == 0 else f"20news-{n_docs}"
        for k in args.k:
            for sampler in args.samplers:
                for threads in args.threads:
                    r = time_tcm(corpus, split, k, sampler, threads, args.iters, args.warm, args.shards,
                                 args.seed)
                    print(f"{name:<12} {corpus.n_tokens:>9} {k:>4} {sampler:>7} {threads:>7} "
                          f"{r['secs']:>8.3f} {r['mean']:>8.3f} {corpus.n_tokens / r['secs'] / 1e6:>8.2f} "
                          f"{r['ll']:>9.4f} {r['alpha0']:>7.1f} {100 * r['multi']:>6.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
