"""The PAM paper's two model-quality measurements, for any kind that draws documents
(:meth:`models.common.base.TopicModel.sample_word_probs`: LDA, PAM and gLDA here):

    topicir reproduce heldout         # held-out likelihood by the empirical-likelihood estimator
    topicir reproduce comp5           # 20 Newsgroups comp5 classification (Table 6)

Li & McCallum, "Pachinko Allocation: Scalable Mixture Models of Topic Correlations".

Empirical likelihood (section 4.1.3, after Diggle & Gratton 1984): draw M = 1,000 documents'
word distributions from the trained model (LDA: theta ~ Dir(alpha), p = theta phi; PAM:
theta_r ~ Dir(alpha_r), theta_i ~ Dir(alpha_i) for every super-topic i, p = sum_i theta_ri
theta_i phi), each from a kept Gibbs sample chosen in turn, and estimate
p(d) = (1/M) sum_m prod_{w in d} p_m(w). Reported: bits per word = -sum_d log2 p(d) / sum_d |d|.

comp5 (Table 6): the posts of comp.graphics, comp.os.ms-windows.misc, comp.sys.ibm.pc.hardware,
comp.sys.mac.hardware and comp.windows.x from the bydate tarball (train and test pooled), split
75/25 per class by a seeded shuffle; one model per class trained on its 75 %; a test document
gets the class whose model gives it the highest empirical likelihood. Tokens as in
``retrieval/newsgroups.py``; the vocabulary is every term with document frequency >= 2 in the
training posts (test tokens outside it are dropped), shared by the five models.
"""
from __future__ import annotations

import logging
import time
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from models.common.corpus import make_corpus
from models.registry import model_class

from ..datasets.newsgroups import read_newsgroups, tokenize

log = logging.getLogger(__name__)

COMP5 = ("comp.graphics", "comp.os.ms-windows.misc", "comp.sys.ibm.pc.hardware",
         "comp.sys.mac.hardware", "comp.windows.x")
# Table 6 of the paper: overall accuracy (%), LDA 50 topics; PAM 50 super-topics, 100 sub-topics.
PAPER_COMP5 = {"lda": 84.70, "pam": 87.34}
N_DOCS_EL = 1000


class Split(NamedTuple):
    vocab: list          # term of every id
    train: list          # (group, term-id array) per training post
    test: list           # (group, term-id array) per test post


def comp5_split(path, groups=COMP5, train_frac=0.75, seed=0, min_df=2) -> Split:
    """Posts of ``groups`` split ``train_frac`` / rest per group by a seeded shuffle."""
    by_group = {g: [] for g in groups}
    for post in read_newsgroups(path):
        if post.group in by_group:
            by_group[post.group].append(tokenize(post.text))
    missing = [g for g, docs in by_group.items() if not docs]
    if missing:
        raise ValueError(f"{path}: no posts for group(s) {', '.join(missing)}; is this the 20news-bydate tarball?")
    rng = np.random.default_rng(seed)
    train_tok, test_tok = [], []
    for g in groups:
        docs = by_group[g]
        order = rng.permutation(len(docs))
        n_train = int(round(train_frac * len(docs)))
        train_tok += [(g, docs[i]) for i in order[:n_train]]
        test_tok += [(g, docs[i]) for i in order[n_train:]]
    df = {}
    for _, toks in train_tok:
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    vocab = sorted(t for t, n in df.items() if n >= min_df)
    ids = {t: i for i, t in enumerate(vocab)}

    def encode(pairs):
        return [(g, np.array([ids[t] for t in toks if t in ids], dtype=np.int32)) for g, toks in pairs]

    return Split(vocab, encode(train_tok), encode(test_tok))


def _corpus(docs, n_terms, name):
    lens = [len(d) for d in docs]
    doc_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    flat = np.concatenate(docs) if docs else np.zeros(0, np.int32)
    return make_corpus(doc_ptr, flat, n_terms=n_terms, fingerprint=name)


def _count_matrix(docs, n_terms):
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    cols = np.concatenate(docs) if docs else np.zeros(0, np.int32)
    return sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(docs), n_terms))


# -- sampled documents -------------------------------------------------------------------------


def sampled_log_p(model, n_docs=N_DOCS_EL, seed=0) -> np.ndarray:
    """log p_m(w) of ``n_docs`` documents drawn from the trained model (any kind that draws
    documents: :meth:`models.common.base.TopicModel.sample_word_probs`): (n_docs, V) float64."""
    return np.log(model.sample_word_probs(n_docs, seed))


def empirical_log_lik(model, docs, n_terms, n_docs=N_DOCS_EL, seed=0) -> np.ndarray:
    """log p(d) of every document (list of term-id arrays) by the empirical likelihood."""
    X = _count_matrix(docs, n_terms)
    log_p = sampled_log_p(model, n_docs, seed)
    return logsumexp(np.asarray(X @ log_p.T), axis=1) - np.log(log_p.shape[0])


# -- training ----------------------------------------------------------------------------------

SCHEDULE = dict(n_chains=1, n_iter=1000, burn_in=900, sample_every=20, seed=0)
PAPER_PARAMS = {"lda": dict(n_topics=50, **SCHEDULE), "pam": dict(n_super=50, n_sub=100, alpha_root=0.01, **SCHEDULE),
                "glda": dict(n_topics=50, **SCHEDULE)}  # gLDA at LDA's settings


def kind_params(kind: str, params: dict | None) -> dict:
    """The settings of ``kind``: given ones, else the paper's (LDA and PAM only)."""
    p = (params or {}).get(kind) or PAPER_PARAMS.get(kind)
    if p is None:
        raise ValueError(f"no settings for {kind!r}: the paper gives them for "
                         f"{', '.join(PAPER_PARAMS)}; pass params={{{kind!r}: {{...}}}}")
    return p


def train(kind: str, corpus, params: dict, n_jobs=None):
    """A model of any registered kind; kinds that take a log-likelihood interval log ten times."""
    cls = model_class(kind)
    extra = {"log_lik_every": max(1, params["n_iter"] // 10)} if "log_lik_every" in cls._param_names() else {}
    return cls(**dict(params, n_jobs=n_jobs, **extra)).fit(corpus)


def comp5_accuracy(path, kinds=("lda", "pam"), params=None, seed=0, n_docs=N_DOCS_EL, n_jobs=None):
    """Train one model per comp5 class and kind; classify the held-out 25 %.

    Returns ``{kind: {"overall": %, group: %, ..., "seconds": training time}}``."""
    params = params or {}
    split = comp5_split(path, seed=seed)
    V = len(split.vocab)
    log.info("comp5: %d train / %d test posts, %d terms", len(split.train), len(split.test), V)
    test_docs = [d for _, d in split.test]
    truth = np.array([COMP5.index(g) for g, _ in split.test])
    results = {}
    for kind in kinds:
        p = kind_params(kind, params)
        scores = np.empty((len(test_docs), len(COMP5)))
        t = time.perf_counter()
        for c, group in enumerate(COMP5):
            docs = [d for g, d in split.train if g == group]
            model = train(kind, _corpus(docs, V, f"comp5:{group}"), p, n_jobs)
            scores[:, c] = empirical_log_lik(model, test_docs, V, n_docs, seed=seed + c)
            log.info("%s %s: %d docs, ll/token %.4f", kind, group, len(docs), model.log_lik_[-1].mean())
        pred = scores.argmax(1)
        row = {"overall": 100.0 * float((pred == truth).mean())}
        for c, group in enumerate(COMP5):
            row[group] = 100.0 * float((pred[truth == c] == c).mean())
        row["seconds"] = time.perf_counter() - t
        results[kind] = row
    return results


def heldout(path, kinds=("lda", "pam"), params=None, seed=0, n_docs=N_DOCS_EL, n_jobs=None):
    """Train on the 75 % of the comp5 posts, score the 25 % by empirical likelihood.

    Returns ``{kind: {"bits/word": ..., "log-lik": total nats, "test tokens": n}}``."""
    params = params or {}
    split = comp5_split(path, seed=seed)
    V = len(split.vocab)
    train_docs = [d for _, d in split.train]
    test_docs = [d for _, d in split.test]
    n_test = int(sum(len(d) for d in test_docs))
    results = {}
    for kind in kinds:
        p = kind_params(kind, params)
        t = time.perf_counter()
        model = train(kind, _corpus(train_docs, V, "comp5:train"), p, n_jobs)
        ll = empirical_log_lik(model, test_docs, V, n_docs, seed=seed)
        results[kind] = {"bits/word": float(-ll.sum() / np.log(2) / n_test), "log-lik": float(ll.sum()),
                         "test tokens": n_test, "seconds": time.perf_counter() - t}
    return results
