"""Benchmark: seconds per Gibbs sweep of grouped LDA against LDA on 20 Newsgroups.

    topicir bench glda                    # K = 100 and 800, 20 sweeps, all posts
    topicir bench glda --k 100 --iters 10 --docs 4000

The corpus is ``topicir bench lda``'s (every post of the bydate tarball, lowercase
``[a-z][a-z0-9]+``, NLTK stopwords out, document frequency >= 2), or its first ``--docs`` posts.
Both models run one chain from a uniform random start with alpha = 50 / K, beta = 0.01: LDA with
its exact sequential sparse sampler (``n_shards=1``, ``init="random"``), gLDA (group size 4) and
restricted LDA sequential per chain by construction. Seconds per sweep = wall seconds of ``fit``
(layout and initialisation included, numba compilation excluded by a warm-up) / sweeps; ``cpu-s``
is the process CPU time, less sensitive to other load on a shared machine. ``ll/token`` is the
final log p(W, Z) per token of the token-level assignments, by the same formula for all three.
"""
import logging
import time

from models.common.corpus import synthetic_corpus
from models.glda.model import GroupedLDA
from models.lda.model import LDA

from ..core.tables import Table, fixed
from .lda import DEFAULT_20NEWS, _cpu_seconds, first_docs

log = logging.getLogger(__name__)


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


def run(*, data: str = DEFAULT_20NEWS, k=(100, 800), iters: int = 20, docs: int | None = None,
        group_size: float = 4.0, seed: int = 0) -> list[Table]:
    """Seconds per sweep of LDA, gLDA and restricted LDA at each K of ``k`` on the first ``docs``
    posts (all by default)."""
    from ..datasets.newsgroups import newsgroups_corpus

    t = time.perf_counter()
    warm_up()
    log.info("numba warm-up: %.1f s (not counted)", time.perf_counter() - t)
    corpus = first_docs(newsgroups_corpus(data)[0], docs)
    rows = []
    for n_topics in k:
        base = None
        for name, m in models(n_topics, iters, seed, group_size).items():
            t, cpu = time.perf_counter(), _cpu_seconds()
            m.fit(corpus)
            secs = (time.perf_counter() - t) / iters
            cpu = (_cpu_seconds() - cpu) / iters
            base = base or secs
            rows.append({"model": name, "K": n_topics, "s/sweep": fixed(secs, 3), "cpu-s/sweep": fixed(cpu, 3),
                         "vs LDA": f"{secs / base:.1f}x", "ll/token": float(m.log_lik_[-1, 0])})
            log.info("%s K=%d: %.3f s/sweep", name, n_topics, secs)
    return [Table("Grouped LDA against LDA: seconds per Gibbs sweep", rows,
                  notes=[f"20news-bydate: {corpus.n_docs} docs, {corpus.n_tokens} tokens, {corpus.n_terms} "
                         f"terms; {iters} sweeps, 1 chain, 1 thread, seed {seed}"])]
