"""Benchmark: fold-in of new documents (``model.fold_in``) under a K = 800 LDA model.

A seeded Zipf corpus with latent topics (``models.common.corpus.synthetic_corpus``, AP-like document
lengths around 250 tokens) is cut in two: the first ``train_docs`` documents train an LDA model
(3 chains), the last ``new_docs`` are folded in, timed per fold-in setting (numba compilation
is done first and not counted). ``cpu-s`` is the process CPU time of the fold-in (all threads):
on a shared machine it depends less on the other load than wall time. ``held-out ll`` is the
document-completion log-likelihood per token of the new documents (``models.common.heldout``: even
positions folded in, odd positions scored) with the same settings. ``target``: 1,000 documents
at K = 800 within 2 s on 2 cores (met or missed by the wall seconds).
"""
import resource
import time

import numpy as np

from models.common.corpus import make_corpus, synthetic_corpus
from models.common.heldout import document_completion
from models.lda.model import LDA

from ..core.tables import Table, fixed

# The target: 1,000 new documents at K = 800 folded in within 2 s on 2 cores
TARGET_S = 2.0

# (label, fold_in settings): the defaults, and every kept sample with longer chains
SETTINGS = (("defaults (last kept sample of each chain, 10 sweeps, 5 kept)", {}),
            ("all kept samples, 20 sweeps, 10 kept", dict(samples=None, n_iter=20, n_keep=10)))


def _cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def split_corpus(train_docs, new_docs, terms, mean_len, seed):
    """(training Corpus, new documents as term-id arrays) from one synthetic corpus."""
    c = synthetic_corpus(train_docs + new_docs, terms, mean_len, seed=seed)
    D = train_docs
    train = make_corpus(c.doc_ptr[:D + 1], c.term_ids[:c.doc_ptr[D]], n_terms=c.n_terms,
                        fingerprint=f"{c.fingerprint},first={D}")
    new = [c.term_ids[c.doc_ptr[d]:c.doc_ptr[d + 1]] for d in range(D, D + new_docs)]
    return train, new


def time_fold_in(model, docs, **settings):
    """(wall seconds, CPU seconds) of ``model.fold_in(docs, **settings)``, compiled first."""
    model.fold_in(docs[:2], **settings)
    wall, cpu = time.perf_counter(), _cpu_seconds()
    model.fold_in(docs, **settings)
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def fold_in_rows(model, docs, threads):
    """One row per fold-in setting of :data:`SETTINGS`."""
    rows = []
    n_tokens = sum(len(d) for d in docs)
    prev = model.n_jobs
    model.n_jobs = threads
    try:
        for label, settings in SETTINGS:
            wall, cpu = time_fold_in(model, docs, **settings)
            ll = document_completion(model, docs, **settings).log_lik
            rows.append({"setting": label, "docs": len(docs), "tokens": n_tokens,
                         "seconds": fixed(wall, 2), "target": f"<= {TARGET_S:g} s",
                         "": "met" if wall <= TARGET_S else "missed", "cpu-s": fixed(cpu, 2),
                         "docs/s": fixed(len(docs) / wall, 0), "held-out ll": fixed(ll, 4)})
    finally:
        model.n_jobs = prev
    return rows


def run(*, train_docs: int = 20_000, new_docs: int = 1000, terms: int = 50_000,
        mean_len: float = 250.0, k: int = 800, iters: int = 40, threads: int = 2,
        seed: int = 0) -> list[Table]:
    """Train LDA (K = ``k``, 3 chains, ``iters`` sweeps) on ``train_docs`` synthetic documents and
    time the fold-in of ``new_docs`` more with ``threads`` threads."""
    train, new = split_corpus(train_docs, new_docs, terms, mean_len, seed)
    start = time.perf_counter()
    model = LDA(n_topics=k, n_chains=3, n_iter=iters, seed=seed, n_jobs=threads).fit(train)
    trained = time.perf_counter() - start
    nnz = np.diff(model.tw_ptr_[0])
    cf = np.bincount(train.term_ids, minlength=train.n_terms)
    return [Table(f"Fold-in of {new_docs:,} new documents, LDA K = {k}, {threads} threads",
                  fold_in_rows(model, new, threads),
                  notes=[f"training: {train.n_docs:,} synthetic documents, {train.n_tokens / 1e6:.1f} M "
                         f"tokens, {iters} sweeps, 3 chains ({trained:.0f} s); a token's word is in "
                         f"{(nnz * cf).sum() / max(cf.sum(), 1):.0f} topics on average"],
                  digits=2)]
