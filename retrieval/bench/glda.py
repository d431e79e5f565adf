"""Benchmark: seconds per Gibbs sweep of grouped LDA against LDA on 20 Newsgroups.

    python -m retrieval.bench.glda                    # K = 100 and 800, 20 sweeps, all posts
    python -m retrieval.bench.glda --k 100 --iters 10 --docs 4000

The corpus is ``topicir bench lda``'s (every post of the bydate tarball, lowercase
``[a-z][a-z0-9]+``, NLTK stopwords out, document frequency >= 2), or its first ``--docs`` posts.
Both models run one chain from a uniform random start with alpha = 50 / K, beta = 0.01: LDA with
its exact sequential sparse sampler (``n_shards=1``, ``init="random"``), gLDA (group size 4) and
restricted LDA sequential per chain by construction. Seconds per sweep = wall seconds of ``fit``
(layout and initialisation included, numba compilation excluded by a warm-up) / sweeps; ``cpu-s``
is the process CPU time, less sensitive to other load on a shared machine. ``ll/token`` is the
final log p(W, Z) per token of the token-level assignments, by the same formula for all three.
"""
import argparse
import time

from models.corpus import make_corpus, synthetic_corpus
from models.glda import GroupedLDA
from models.lda import LDA

from .lda import DEFAULT_20NEWS, _cpu_seconds


def first_docs(corpus, n_docs):
    """The corpus cut to its first ``n_docs`` documents (same term ids)."""
    if n_docs is None or n_docs >= corpus.n_docs:
        return corpus
    end = corpus.doc_ptr[n_docs]
    return make_corpus(corpus.doc_ptr[:n_docs + 1], corpus.term_ids[:end], n_terms=corpus.n_terms,
                       fingerprint=f"{corpus.fingerprint}:first{n_docs}")


def models(k, iters, seed, group_size):
    one = dict(n_topics=k, alpha=50.0 / k, beta=0.01, n_chains=1, n_iter=iters, burn_in=iters - 1,
               sample_every=1, seed=seed, log_lik_every=iters, n_jobs=1)
    return {"LDA": LDA(n_shards=1, init="random", **one),
            "gLDA": GroupedLDA(group_size=group_size, **one),
            "restricted LDA": GroupedLDA(restricted=True, **one)}


def warm_up():
    c = synthetic_corpus(100, 300, 30, seed=0, n_latent=5)
    for m in models(8, 2, 0, 4.0).values():
        m.fit(c)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m retrieval.bench.glda", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--k", type=int, nargs="+", default=[100, 800])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--docs", type=int, default=None, help="only the first DOCS posts")
    p.add_argument("--group-size", type=float, default=4.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from ..datasets.newsgroups import newsgroups_corpus

    t = time.perf_counter()
    warm_up()
    print(f"# numba warm-up: {time.perf_counter() - t:.1f} s (not counted)", flush=True)
    corpus = first_docs(newsgroups_corpus(args.data)[0], args.docs)
    print(f"# 20news-bydate: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} terms; "
          f"{args.iters} sweeps, 1 chain, 1 thread, seed {args.seed}", flush=True)
    print(f"{'model':<15} {'K':>4} {'s/sweep':>8} {'cpu-s/sweep':>11} {'vs LDA':>7} {'ll/token':>9}")
    for k in args.k:
        base = None
        for name, m in models(k, args.iters, args.seed, args.group_size).items():
            t, cpu = time.perf_counter(), _cpu_seconds()
            m.fit(corpus)
            secs = (time.perf_counter() - t) / args.iters
            cpu = (_cpu_seconds() - cpu) / args.iters
            base = base or secs
            print(f"{name:<15} {k:>4} {secs:>8.3f} {cpu:>11.3f} {secs / base:>6.1f}x "
                  f"{float(m.log_lik_[-1, 0]):>9.4f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
