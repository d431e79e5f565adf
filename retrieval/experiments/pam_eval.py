"""The PAM paper's two model-quality measurements, for LDA and PAM trained by topicir:

    topicir heldout                  # held-out likelihood by the empirical-likelihood estimator
    topicir comp5                    # 20 Newsgroups comp5 classification (Table 6)

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

from models.corpus import make_corpus
from models.lda import LDA
from models.pam import PAM

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


def _log_dirichlet(rng, alpha, size):
    """log of Dirichlet(alpha) draws, shape (size, len(alpha)), stable for tiny alpha:
    log Gamma(a) = log Gamma(a + 1) + log(U) / a (Marsaglia & Tsang's boost)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    g = np.log(rng.gamma(alpha + 1.0, size=(size, len(alpha)))) + np.log(rng.random((size, len(alpha)))) / alpha
    return g - logsumexp(g, axis=1, keepdims=True)


def lda_phi(model: LDA, cs: int) -> np.ndarray:
    """Dense phi (K, V) of kept sample ``cs`` of an LDA."""
    V = model.tw_ptr_.shape[1] - 1
    lo, hi = model.tw_ptr_[cs, 0], model.tw_ptr_[cs, V]
    cnt = np.zeros((model.n_topics, V))
    words = np.repeat(np.arange(V), np.diff(model.tw_ptr_[cs]))
    cnt[model.tw_topic_[lo:hi].astype(np.int64), words] = model.tw_count_[lo:hi]
    b = float(model.beta)
    return (cnt + b) / (model.n_k_samples_[cs][:, None] + V * b)


def sampled_log_p(model, n_docs=N_DOCS_EL, seed=0) -> np.ndarray:
    """log p_m(w) of ``n_docs`` documents drawn from the trained model: (n_docs, V) float64.

    Document m uses kept sample m mod n_samples (chains and samples in turn)."""
    rng = np.random.default_rng(seed)
    n_cs = model.alpha_samples_.shape[0]  # kept (chain, sample) pairs, for LDA and PAM alike
    out = []
    for cs in range(n_cs):
        m = len(range(cs, n_docs, n_cs))
        if m == 0:
            continue
        if isinstance(model, LDA):
            theta = np.exp(_log_dirichlet(rng, model.alpha_samples_[cs], m))
            p = theta @ lda_phi(model, cs)
        else:
            s, s2 = model.n_super, model.n_sub
            theta_r = np.exp(_log_dirichlet(rng, np.full(s, float(model.alpha_root)), m))
            mix = np.zeros((m, s2))
            for i in range(s):
                mix += theta_r[:, i:i + 1] * np.exp(_log_dirichlet(rng, model.alpha_samples_[cs, i], m))
            p = mix @ model.phi_matrix(cs)
        out.append(np.log(p))
    return np.vstack(out)


def empirical_log_lik(model, docs, n_terms, n_docs=N_DOCS_EL, seed=0) -> np.ndarray:
    """log p(d) of every document (list of term-id arrays) by the empirical likelihood."""
    X = _count_matrix(docs, n_terms)
    log_p = sampled_log_p(model, n_docs, seed)
    return logsumexp(np.asarray(X @ log_p.T), axis=1) - np.log(log_p.shape[0])


# -- training ----------------------------------------------------------------------------------

LDA_COMP5 = dict(n_topics=50, n_chains=1, n_iter=1000, burn_in=900, sample_every=20, seed=0)
PAM_COMP5 = dict(n_super=50, n_sub=100, n_chains=1, n_iter=1000, burn_in=900, sample_every=20, seed=0)


def train(kind: str, corpus, params: dict, n_jobs=None):
    cls = {"lda": LDA, "pam": PAM}[kind]
    return cls(**dict(params, n_jobs=n_jobs, log_lik_every=max(1, params["n_iter"] // 10))).fit(corpus)


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
        p = params.get(kind) or (LDA_COMP5 if kind == "lda" else PAM_COMP5)
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
        p = params.get(kind) or (LDA_COMP5 if kind == "lda" else PAM_COMP5)
        t = time.perf_counter()
        model = train(kind, _corpus(train_docs, V, "comp5:train"), p, n_jobs)
        ll = empirical_log_lik(model, test_docs, V, n_docs, seed=seed)
        results[kind] = {"bits/word": float(-ll.sum() / np.log(2) / n_test), "log-lik": float(ll.sum()),
                         "test tokens": n_test, "seconds": time.perf_counter() - t}
    return results
