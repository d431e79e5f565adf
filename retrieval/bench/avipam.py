"""Benchmark: aviPAM against the Gibbs samplers (the aviPAM paper's Tables 1 and 2), component
collapse with and without normalisation, and MAP of aviPAM document models.

    topicir reproduce avipam-tables              # Tables 1 and 2 on 20 Newsgroups
    topicir reproduce avipam-tables --table 1 --epochs 50 --gibbs-iters 100
    topicir bench avipam collapse               # norm batch / l2 / none, 4pam:2,50
    topicir bench avipam map --data ../shared/data --collections med cran
    topicir bench avipam prepare --out build/avipam_20news.npz   # corpus for a GPU box
    topicir reproduce avipam-tables --corpus-npz build/avipam_20news.npz --device cuda

``prepare`` writes the 20 Newsgroups corpus below (token ids in post order, the vocabulary, the
fingerprint) into one compressed file of a few MB; ``--corpus-npz`` reads it instead of the
tarball (a GPU machine without the shared data). ``--save DIR`` writes every row's top-20 word
ids (and aviPAM's topic-word matrix) and the rows as JSON, so NPMI can be recounted elsewhere.

20 Newsgroups: the training posts of the bydate tarball with the AVITM-style vocabulary (the
2,000 most frequent words after stopword removal; posts left empty dropped), see
``retrieval.datasets.newsgroups.newsgroups_top_words_corpus``. Coherence: NPMI of every topic's
top 10 words over those same posts, document co-occurrence (the tables' convention) and a
sliding window of 20, both printed with their convention (``retrieval.experiments.coherence``).
Times are wall-clock ``fit`` times (aviPAM: network built, all epochs, the document mixtures of
every training post encoded); Gibbs models run one chain on ``--threads`` numba threads, aviPAM
on ``--threads`` torch threads or ``--device cuda``.

Collapse: a topic counts as collapsed when its top 10 words share at least 5 with another
topic's top 10 (duplicates: every topic of such a group is counted) or its word distribution is
near uniform (entropy >= 0.95 log V).
"""
from __future__ import annotations

import copy
import logging
import re
import time
from types import SimpleNamespace

import numpy as np
from scipy import stats

from models.avipam.model import AVIPAM, parse_arch
from models.lda.model import LDA
from models.pam.model import PAM

from ..adapters.avipam import correlated_pairs, correlation_text
from ..core.tables import Table, fixed
from ..experiments.coherence import convention_name, model_coherence, model_topics, topic_npmi

log = logging.getLogger(__name__)

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"

# (label, constructor, params): the paper's Table 1 (50 sub-topics, 2 super-topics per level)
# and Table 2 (100 sub-topics, 50 super-topics, 10 super-duper topics).
TABLE1 = [
    ("LDA Gibbs K=50", "lda", dict(n_topics=50)),
    ("LDA DMFVI K=50", "dmfvi", dict(n_topics=50)),
    ("4-PAM Gibbs 2/50", "pam", dict(n_super=2, n_sub=50)),
    ("aviPAM 4pam:2,50", "avipam", dict(arch="4pam:2,50")),
    ("aviPAM 5pam:2,2,50", "avipam", dict(arch="5pam:2,2,50")),
    ("aviPAM ctm:50", "avipam", dict(arch="ctm:50")),
    ("aviPAM molda:10:50", "avipam", dict(arch="molda:10:50")),
]
TABLE2 = [
    ("4-PAM Gibbs 50/100", "pam", dict(n_super=50, n_sub=100)),
    ("aviPAM 4pam:50,100", "avipam", dict(arch="4pam:50,100")),
    ("aviPAM 5pam:10,50,100", "avipam", dict(arch="5pam:10,50,100")),
    ("aviPAM molda:50:100", "avipam", dict(arch="molda:50:100")),
]
# The tables and the collapse bench measure the paper's method (topics by gradient, AVITM's
# alpha 1 at every node); the MAP bench measures the document model at AVIPAM's defaults.
TABLE_SCHEDULE = dict(decoder="product", lr=2e-3, epochs=200, alpha=1.0, alpha_root=1.0, topic_update="gradient")
COLLAPSE_SCHEDULE = dict(decoder="mixture", lr=1e-3, epochs=100, alpha=1.0, alpha_root=1.0,
                         topic_update="gradient")
OTHER_SCHEDULE = dict(decoder="mixture", lr=1e-3, epochs=100)


class SklearnLDA:
    """The paper's LDA DMFVI row: scikit-learn's mean-field variational LDA (Blei et al. 2003;
    priors 1/K, its defaults) on the same counts, behind the few methods the bench reads.
    ``method`` "batch" (scikit-learn's default since 0.20) or "online" (Hoffman et al. 2010,
    the default before, with its mini-batches of 128)."""

    kind = "lda-dmfvi"

    def __init__(self, n_topics, max_iter, seed, n_jobs, method="batch"):
        self.n_topics, self.max_iter, self.seed, self.n_jobs = n_topics, max_iter, seed, n_jobs
        self.method = method

    def fit(self, corpus):
        from sklearn.decomposition import LatentDirichletAllocation

        from models.common.variational import count_matrix

        lda = LatentDirichletAllocation(n_components=self.n_topics, learning_method=self.method,
                                        max_iter=self.max_iter, random_state=self.seed,
                                        n_jobs=self.n_jobs)
        lda.fit(count_matrix(corpus))
        self.n_terms_ = corpus.n_terms
        comp = lda.components_.astype(np.float64)
        self.topic_word_ = comp / comp.sum(1, keepdims=True)
        return self

    def get_params(self):
        return dict(n_topics=self.n_topics, max_iter=self.max_iter, seed=self.seed,
                    method=self.method)

    def topic_words(self, topic, top=10, chain=0):
        phi = self.topic_word_[topic]
        ids = np.argsort(-phi, kind="stable")[:top]
        return ids.astype(np.int64), phi[ids]


def build(kind, params, args):
    """The estimator of one table row with the run's schedule."""
    if kind == "dmfvi":
        return SklearnLDA(params["n_topics"], args.dmfvi_iters, args.seed, args.threads,
                          args.dmfvi_method)
    if kind == "avipam":
        names = ("alpha", "alpha_root", "beta1", "dropout", "theta_dropout", "hidden", "kl_warmup",
                 "topic_update")
        extra = {k: getattr(args, k) for k in names if getattr(args, k, None) is not None}
        params = {"decoder": args.decoder, **extra, **params}
        return AVIPAM(**params, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                      seed=args.seed, device=args.device, n_jobs=args.threads)
    g = args.gibbs_iters
    sched = dict(n_chains=1, n_iter=g, burn_in=g - 1, sample_every=1, seed=args.seed,
                 n_jobs=args.threads, log_lik_every=g)
    return (LDA if kind == "lda" else PAM)(**params, **sched)


def collapse_counts(model, tops=None, overlap=5, entropy_frac=0.95):
    """(duplicated topics, near-uniform topics) of ``model`` (see the module notes); ``tops``:
    every topic's top-10 term ids when already at hand."""
    K, V = model.n_topics, model.n_terms_
    sets = [set(np.asarray(t).tolist()) for t in (model_topics(model) if tops is None else tops)]
    dup = sum(any(len(sets[k] & sets[j]) >= overlap for j in range(K) if j != k) for k in range(K))
    uniform = 0
    for k in range(K):
        p = model.topic_words(k, top=V)[1]
        p = p[p > 0] / p.sum()
        uniform += float(-(p * np.log(p)).sum()) >= entropy_frac * np.log(V)
    return dup, uniform


def distinct_topics(tops, per_topic, overlap=5):
    """One topic of every group of duplicates: topics by decreasing NPMI, each kept unless its
    top words share ``overlap`` or more with a kept topic's. Returns the kept indices. Averaging
    NPMI over them stops a model from scoring by repeating its best topic (the binary-post
    junk words co-occur in a few posts and score high)."""
    sets = [set(np.asarray(t).tolist()) for t in tops]
    keep = []
    for k in np.argsort(-np.asarray(per_topic), kind="stable"):
        if all(len(sets[k] & sets[j]) < overlap for j in keep):
            keep.append(int(k))
    return np.array(sorted(keep), dtype=np.int64)


def mixture_spread(mix):
    """(mean largest share, mean effective number of sub-topics exp(entropy)) of the documents'
    sub-topic mixtures (rows of ``mix``): how far the amortized mixtures are from uniform."""
    mix = np.asarray(mix, dtype=np.float64)
    mix = mix / mix.sum(1, keepdims=True)
    return float(mix.max(1).mean()), float(np.exp(stats.entropy(mix, axis=1)).mean())


def effective_topics(model, n_docs):
    """Mean effective number of sub-topics exp(entropy) of every training document's mixture,
    read through the protocol's ``doc_topics`` (so Gibbs and aviPAM models alike)."""
    K = model.n_topics
    return mixture_spread([model.doc_topics(d, top=K)[1] for d in range(n_docs)])[1]


def doc_model_fit(model, corpus, chunk=1024):
    """Log-likelihood per token of the training tokens under the document model P_TM(w | d)
    (``model`` None: the collection's unigram model): how much of each document the document
    model carries beyond P(w | C), which topic smoothing adds to QL. Terms in chunks, so the
    (n_docs, n_terms) table is never held."""
    from models.common.variational import count_matrix

    X = count_matrix(corpus).tocsc()
    if model is None:
        n_w = np.asarray(X.sum(0), dtype=np.float64).ravel()
        keep = n_w > 0
        return float((n_w[keep] * np.log(n_w[keep] / n_w.sum())).sum() / corpus.n_tokens)
    total = 0.0
    for lo in range(0, corpus.n_terms, chunk):
        part = X[:, lo:lo + chunk].tocoo()
        p = model.p_w_d(np.arange(lo, min(lo + chunk, corpus.n_terms), dtype=np.int64))
        total += float((part.data * np.log(p[part.row, part.col])).sum())
    return total / corpus.n_tokens


def completion_split(corpus, seed=0):
    """Document completion: every document's tokens shuffled by ``seed`` and halved; returns the
    corpus of the observed halves (the first ceil(n/2) tokens of each shuffled document) and
    the held-out halves as (document of every held-out token, its term)."""
    from models.common.corpus import make_corpus

    rng = np.random.default_rng(seed)
    lens = np.diff(corpus.doc_ptr)
    keep, held_doc, held_term = [], [], []
    for d in range(corpus.n_docs):
        toks = corpus.term_ids[corpus.doc_ptr[d]:corpus.doc_ptr[d + 1]].copy()
        rng.shuffle(toks)
        h = len(toks) // 2
        keep.append(toks[h:])
        held_doc.append(np.full(h, d, dtype=np.int64))
        held_term.append(toks[:h])
    ptr = np.concatenate([[0], np.cumsum(lens - lens // 2)]).astype(np.int64)
    observed = make_corpus(ptr, np.concatenate(keep), n_terms=corpus.n_terms,
                           fingerprint=f"{corpus.fingerprint}:observed-halves-{seed}")
    return observed, (np.concatenate(held_doc), np.concatenate(held_term).astype(np.int64))


def heldout_fit(make_model, corpus, seed=0, chunk=1024):
    """Document completion (Wallach et al. 2009): log-likelihood per held-out token of the
    document model P_TM(w | d) of ``make_model()`` (None: the unigram model) fitted on the
    observed halves of :func:`completion_split`, each held-out token scored under its own
    document's model; the unigram model is add-0.5 smoothed over the observed halves. How well
    a document model predicts words of a document it has not seen, which topic smoothing gives
    QL for query words a document lacks; the training fit (:func:`doc_model_fit`) rewards
    memorising the document instead."""
    observed, (doc, term) = completion_split(corpus, seed)
    if make_model is None:
        n = np.bincount(observed.term_ids, minlength=corpus.n_terms) + 0.5
        return float(np.log(n[term] / n.sum()).mean())
    model = make_model().fit(observed)
    total = 0.0
    for lo in range(0, corpus.n_terms, chunk):
        sel = (term >= lo) & (term < lo + chunk)
        if sel.any():
            p = model.p_w_d(np.arange(lo, min(lo + chunk, corpus.n_terms), dtype=np.int64))
            total += float(np.log(p[doc[sel], term[sel] - lo]).sum())
    return total / len(term)


def evaluate(label, model, seconds, corpus, ref, vocab):
    doc = model_coherence(model, corpus, ref, window=None)
    win = model_coherence(model, corpus, ref, window=20)
    tops = model_topics(model)
    dup, uni = collapse_counts(model, tops)
    keep = distinct_topics(tops, doc.per_topic)
    row = dict(model=label, npmi_doc=doc.mean, npmi_w20=win.mean, minutes=seconds / 60,
               duplicated=dup, uniform=uni, topics=model.n_topics,
               npmi_doc_distinct=float(doc.per_topic[keep].mean()), distinct=len(keep))
    groups = getattr(model, "topic_groups", None) or []
    if len(groups) > 1:
        row["components"] = [float(doc.per_topic[lo:hi].mean()) for lo, hi in groups]
    if getattr(model, "decoder", None) == "product":
        # ProdLDA's reading, softmax(beta_k), beside the decoder's own (the topics above)
        beta = np.asarray(model.beta_, dtype=np.float64)
        prod = [np.argsort(-beta[k], kind="stable")[:10] for k in range(len(beta))]
        row["npmi_doc_prodlda"] = float(topic_npmi(prod, corpus).mean())
    if getattr(model, "doc_mix_", None) is not None:  # chain 0's mixtures
        row["mix_max"], row["mix_eff"] = mixture_spread(model.doc_mix_[:, :model.n_topics])
    if isinstance(model, AVIPAM) and parse_arch(model.arch).full_cov:
        row["correlations"] = correlated_pairs(model, vocab, n=3)
    best = np.argsort(-doc.per_topic)[:2]
    row["examples"] = [" ".join(vocab[i] for i in tops[k]) for k in best]
    return row


def rows_table(title, rows, ref, device, threads) -> Table:
    """The NPMI table of ``rows``; each model's extra readings (ProdLDA's, the mixtures, example
    topics, CTM correlations) as notes under it."""
    out, notes = [], [f"NPMI of top-10 words, reference {ref}; 'doc' = {convention_name(None)} co-occurrence, "
                      f"'w20' = {convention_name(20)} co-occurrence; aviPAM on {device} ({threads} threads on "
                      f"CPU), Gibbs on {threads} threads",
                      "'distinct' = NPMI doc over one topic of every group sharing >= 5 top words (the "
                      "best-scoring), and how many topics that keeps"]
    for r in rows:
        out.append({"model": r["model"], "NPMI doc": r["npmi_doc"],
                    "distinct": f"{r['npmi_doc_distinct']:.4f} ({r['distinct']})", "NPMI w20": r["npmi_w20"],
                    "minutes": fixed(r["minutes"], 2), "dup": r["duplicated"],
                    "unif": "-" if r["uniform"] is None else r["uniform"],
                    "components": " / ".join(f"{c:.3f}" for c in r.get("components", []))})
        if "npmi_doc_prodlda" in r:
            notes.append(f"{r['model']}: NPMI doc of ProdLDA's reading softmax(beta_k): {r['npmi_doc_prodlda']:.4f}")
        if "mix_eff" in r:
            notes.append(f"{r['model']}: document mixtures: largest share {r['mix_max']:.3f} on average, "
                         f"{r['mix_eff']:.1f} effective sub-topics of {r['topics']}")
        notes += [f"{r['model']}: {ex}" for ex in r["examples"]]
        if r.get("correlations"):
            notes.append(f"{r['model']}: strongest topic correlations of the CTM prior (centred logits): "
                         + "; ".join(correlation_text(r["correlations"]).splitlines()))
    return Table(title, out, notes=notes)


def _newsgroups(path):
    from ..datasets.newsgroups import newsgroups_top_words_corpus

    corpus, vocab, _ = newsgroups_top_words_corpus(path, 2000, "train")
    return corpus, vocab


def save_corpus_npz(corpus, vocab, path):
    """The prepared corpus: token ids in post order (what both NPMI conventions count), the
    vocabulary and the fingerprint the models are tied to."""
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, doc_ptr=corpus.doc_ptr, term_ids=corpus.term_ids,
                        vocab=np.array(vocab), fingerprint=np.array(corpus.fingerprint))


def load_corpus_npz(path):
    from models.common.corpus import make_corpus

    with np.load(path, allow_pickle=False) as z:
        for key in ("doc_ptr", "term_ids", "vocab", "fingerprint"):
            if key not in z:
                raise ValueError(f"{path}: not a prepared corpus (no {key!r}); write one with "
                                 f"'topicir bench avipam prepare --out {path}'")
        vocab = [str(v) for v in z["vocab"]]
        corpus = make_corpus(z["doc_ptr"], z["term_ids"], n_terms=len(vocab),
                             fingerprint=str(z["fingerprint"]))
    return corpus, vocab


def _corpus(args):
    if args.corpus_npz:
        corpus, vocab = load_corpus_npz(args.corpus_npz)
    else:
        corpus, vocab = _newsgroups(args.newsgroups)
    ref = f"20 Newsgroups train ({corpus.n_docs} posts, top {len(vocab)} words)"
    return corpus, vocab, ref


def save_row(save, label, model, row):
    """Top-20 word ids of every topic (+ aviPAM's topic-word matrix) and the row as JSON."""
    import json
    from pathlib import Path

    d = Path(save)
    d.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9]+", "_", label).strip("_")
    tops = np.array([model.topic_words(k, top=20)[0] for k in range(model.n_topics)])
    arrays = {"top20": tops}
    if getattr(model, "topic_word_", None) is not None:
        arrays["topic_word"] = model.topic_word_.astype(np.float32)
    np.savez_compressed(d / f"{name}.npz", **arrays)
    if hasattr(model, "save"):  # the model itself, so other readings can be recounted
        model.save(d / f"{name}.model.npz")
    with open(d / "rows.jsonl", "a") as f:
        f.write(json.dumps(row, default=lambda o: o.item() if hasattr(o, "item") else str(o)) + "\n")


def run_rows(specs, args):
    corpus, vocab, ref = _corpus(args)
    log.info("corpus: %d posts, %d tokens, %d terms", corpus.n_docs, corpus.n_tokens, corpus.n_terms)
    rows = []
    for label, kind, params in specs:
        model = build(kind, params, args)
        t0 = time.perf_counter()
        model.fit(corpus)
        secs = time.perf_counter() - t0
        rows.append(evaluate(label, model, secs, corpus, ref, vocab))
        rows[-1]["params"] = {k: v for k, v in model.get_params().items()
                              if isinstance(v, (int, float, str))} if hasattr(model, "get_params") else {}
        if args.save:
            save_row(args.save, label, model, rows[-1])
        log.info("%s: NPMI doc %.4f (%.1f min)", label, rows[-1]["npmi_doc"], secs / 60)
    return rows, ref


# The options every command of this module takes (None: the command's schedule decides).
COMMON = dict(epochs=None, gibbs_iters=200, dmfvi_iters=100, dmfvi_method="batch", batch_size=200, lr=None,
              threads=2, device="cpu", decoder=None, seed=0, newsgroups=DEFAULT_20NEWS, corpus_npz=None,
              save=None, alpha=None, alpha_root=None, beta1=None, dropout=None, theta_dropout=None, hidden=None, kl_warmup=None,
              topic_update=None)


def settings(schedule: dict, **options) -> SimpleNamespace:
    """:data:`COMMON` overridden by ``options``; what is still None comes from ``schedule``.
    The tables' schedule: ProdLDA's decoder and AVITM's lr over 200 epochs (they lift NPMI of
    Table 1's 4-PAM), with the paper's gradient topics and alpha 1, as the collapse bench; the
    MAP bench keeps AVIPAM's defaults."""
    unknown = set(options) - set(COMMON)
    if unknown:
        raise TypeError(f"unknown options {sorted(unknown)}")
    args = SimpleNamespace(**{**COMMON, **options})
    for key, value in schedule.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def tables(*, table=(1, 2), only_avipam: bool = False, rows=None, **options) -> list[Table]:
    """The paper's Tables 1 and/or 2 (``table``): NPMI, time and collapse of every row, or of the
    aviPAM rows / the rows whose label contains one of ``rows``. ``options``: :data:`COMMON`."""
    args = settings(TABLE_SCHEDULE, **options)
    out = []
    for t in table:
        specs = TABLE1 if t == 1 else TABLE2
        if only_avipam:
            specs = [s for s in specs if s[1] == "avipam"]
        if rows:
            specs = [s for s in specs if any(r in s[0] for r in rows)]
        got, ref = run_rows(specs, args)
        out.append(rows_table(f"aviPAM paper Table {t}", got, ref, args.device, args.threads))
    return out


def collapse(*, arch: str = "4pam:2,50", **options) -> list[Table]:
    """Component collapse of aviPAM ``arch`` with batch, l2 and no normalisation."""
    args = settings(COLLAPSE_SCHEDULE, **options)
    specs = [(f"{arch} norm={norm}", "avipam", dict(arch=arch, norm=norm)) for norm in ("batch", "l2", "none")]
    rows, ref = run_rows(specs, args)
    return [rows_table(f"aviPAM {arch}: collapse with and without normalisation", rows, ref, args.device,
                       args.threads)]


def map_table(*, data: str = "../shared/data", indexes: str = "indexes", collections=("med",), k: int = 100,
              mu: float = 1000.0, lam: float = 0.7, avipam_arch=None, avipam_chains=(1, 3),
              **options) -> list[Table]:
    """MAP of QL mixed with LDA, 4-PAM and aviPAM (each of ``avipam_arch``, default 4pam:K/8,K, with
    each of ``avipam_chains`` chains) on
    the shared ``collections``, aviPAM with refined posteriors and from one encoder pass, with fit
    and inference times; in the notes, every document model's log-likelihood per training token
    beside the unigram model's and its effective sub-topics per document (:func:`doc_model_fit`,
    :func:`effective_topics`): what a document model carries that QL's P(w | C) does not; and
    per held-out token by document completion (:func:`heldout_fit`, every model trained again)."""
    from pathlib import Path

    from models.registry import model_class

    from ..core.evaluate import aggregate, judged_topics
    from ..core.modelfiles import index_corpus
    from ..core.ranking import sweep_topics
    from ..core.sources import load_qrels, load_topics
    from ..experiments.regressions import ensure_index

    args = settings(OTHER_SCHEDULE, **options)
    g = args.gibbs_iters
    gibbs = dict(n_chains=1, n_iter=g, burn_in=g - 1, sample_every=1, seed=args.seed, n_jobs=args.threads)
    archs = avipam_arch or [f"4pam:{max(2, k // 8)},{k}"]
    models = [("LDA Gibbs", "lda", dict(n_topics=k, **gibbs)),
              ("4-PAM Gibbs", "pam", dict(n_super=max(2, k // 8), n_sub=k, **gibbs))]
    models += [(f"aviPAM {a}" + (f" {c} chains" if c > 1 else ""), "avipam", dict(arch=a, n_chains=c))
               for a in archs for c in avipam_chains]
    rows, fits = [], []
    for name in collections:
        data_dir = Path(data)
        index = ensure_index(data_dir, name, Path(indexes))
        qrels = load_qrels(data_dir / name / "qrels.txt")
        judged = judged_topics(qrels)
        topics = [t for t in load_topics(data_dir / name / "topics.trec") if t.qid in judged]
        corpus = index_corpus(index)
        row = {"collection": name, "QL": aggregate(sweep_topics(index, topics, [(mu, 1.0)], progress=False)[(mu, 1.0)],
                                                   qrels, ["AP"])["AP"]}
        infer, fit_s = {}, {}
        fit = {"unigram P(w|C)": doc_model_fit(None, corpus)}
        held = {"unigram": heldout_fit(None, corpus)}
        for label, kind, params in models:
            def make(kind=kind, params=params):
                return build(kind, params, args) if kind == "avipam" else model_class(kind)(**params)
            est = make()
            t0 = time.perf_counter()
            model = est.fit(corpus)
            fit_s[label] = time.perf_counter() - t0
            if kind == "avipam":
                t0 = time.perf_counter()
                model.transform(corpus)
                infer[label] = time.perf_counter() - t0
                # The same network's document model from one encoder pass (the posterior-mean
                # mixtures, no refinement): what the refinement adds.
                one_pass = copy.copy(model)
                one_pass.refine_steps, one_pass.doc_samples = 0, 0
                one_pass.doc_mix_ = one_pass.transform(corpus)
                run = sweep_topics(index, topics, [(mu, lam)], model=one_pass, progress=False)
                row[f"{label} one pass"] = aggregate(run[(mu, lam)], qrels, ["AP"])["AP"]
            run = sweep_topics(index, topics, [(mu, lam)], model=model, progress=False)
            row[label] = aggregate(run[(mu, lam)], qrels, ["AP"])["AP"]
            fit[label] = (doc_model_fit(model, corpus), effective_topics(model, corpus.n_docs))
            held[label] = heldout_fit(make, corpus)
        row["times"] = (f"{corpus.n_docs} docs; fit s: " + ", ".join(f"{a} {v:.1f}" for a, v in fit_s.items())
                        + "; infer all docs s: " + ", ".join(f"{a} {v:.2f}" for a, v in infer.items()))
        rows.append(row)
        fits.append(f"{name}: document model log-likelihood per training token (effective sub-topics per "
                    f"document, exp entropy of its mixture): " + ", ".join(
                        f"{a} {v:.3f}" if isinstance(v, float) else f"{a} {v[0]:.3f} ({v[1]:.1f})"
                        for a, v in fit.items()))
        fits.append(f"{name}: document completion, log-likelihood per held-out token (every document's "
                    f"tokens halved at random, each model trained again on the other halves): "
                    + ", ".join(f"{a} {v:.3f}" for a, v in held.items()))
        log.info("%s: %s", name, row)
    ref = AVIPAM()
    return [Table(f"MAP (judged title topics, mu={mu:g}, lam={lam:g}); K={k} (PAM: K/8 super-topics); Gibbs {g} "
                  f"sweeps, aviPAM {args.epochs} epochs, {args.decoder} decoder, lr {args.lr:g}, on {args.device}",
                  rows, notes=[f"aviPAM: posteriors refined by {ref.refine_steps} steps on each document's ELBO, "
                               f"mixtures averaged over {ref.doc_samples} draws (the defaults); 'one pass': the "
                               f"same network's posterior-mean mixtures from one encoder pass", *fits])]


def prepare(*, newsgroups: str = DEFAULT_20NEWS, out: str = "build/avipam_20news.npz") -> str:
    """Write the 20 Newsgroups corpus into one .npz (for a machine without the shared data)."""
    corpus, vocab = _newsgroups(newsgroups)
    save_corpus_npz(corpus, vocab, out)
    return f"{out}: {corpus.n_docs} posts, {corpus.n_tokens} tokens, {len(vocab)} terms"
