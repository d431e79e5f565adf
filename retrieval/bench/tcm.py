"""Benchmark: TCM training speed, seconds per Gibbs iteration (the paper's Table 5).

    topicir bench tcm                              # 2,000-doc subset and all of 20 Newsgroups
    topicir bench tcm --k 100 --threads 2 --samplers sparse --subsets 2000

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
import logging
import re
import time

import numpy as np

from models.common.corpus import make_corpus
from models.tcm.model import TCM

from ..core.tables import Table, fixed
from ..datasets.newsgroups import STOPWORDS, read_newsgroups

log = logging.getLogger(__name__)

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
    from models.common.corpus import synthetic_corpus

    c = synthetic_corpus(100, 200, 20, seed=0, n_latent=3)
    sp = (np.random.default_rng(0).random(c.n_tokens) < 0.2).astype(np.uint8)
    for sampler in ("sparse", "exact"):
        TCM(n_topics=4, n_chains=1, n_iter=2, burn_in=1, sample_every=1, sampler=sampler,
            n_shards=shards, log_lik_every=1).fit(c, split=sp)


def run(*, data: str = DEFAULT_20NEWS, subsets=(2000, 0), k=(100, 800), samplers=("sparse", "exact"),
        threads=(1, 2), iters: int = 5, warm: int = 2, shards: int = 4, seed: int = 0) -> list[Table]:
    """Seconds per TCM Gibbs iteration for every corpus of ``subsets`` (a document count; 0: all
    of 20 Newsgroups), K, sampler and thread count."""
    t = time.perf_counter()
    warm_up(shards)
    log.info("numba warm-up/compilation: %.1f s (not counted)", time.perf_counter() - t)
    full, full_split = newsgroups_sequences(data)
    rows = []
    for n_docs in subsets:
        corpus, split = (full, full_split) if n_docs == 0 else subset(full, full_split, n_docs, seed)
        name = "20news" if n_docs == 0 else f"20news-{n_docs}"
        for n_topics in k:
            for sampler in samplers:
                for n_threads in threads:
                    r = time_tcm(corpus, split, n_topics, sampler, n_threads, iters, warm, shards, seed)
                    rows.append({"corpus": name, "tokens": corpus.n_tokens, "K": n_topics, "sampler": sampler,
                                 "threads": n_threads, "s/iter": fixed(r["secs"], 3), "(mean)": fixed(r["mean"], 3),
                                 "M tok/s": fixed(corpus.n_tokens / r["secs"] / 1e6, 2), "ll/token": r["ll"],
                                 "alpha0": fixed(r["alpha0"], 1), "multi%": fixed(100 * r["multi"], 1)})
                    log.info("%s K=%d %s %d threads: %.3f s/iter", name, n_topics, sampler, n_threads, r["secs"])
    return [Table("TCM training speed: seconds per Gibbs iteration (Zhao et al. Table 5)", rows,
                  notes=[f"20news-bydate: {full.n_docs} docs, {full.n_tokens} tokens, {full.n_terms} terms, "
                         f"{int(full_split.sum())} splits; shards={shards}, seed={seed}, {warm} untimed + "
                         f"{iters} timed sweeps"])]
