"""gLDA against LDA by log p(W, Z) (Bart 2011, Table 1 and Figures 7-8), one command:

    topicir reproduce glda-table --data ../shared/data --out glda_out

For every corpus (20 Newsgroups subset and shared collections, "stemmed" and "raw": see
:mod:`retrieval.experiments.glda_corpora`) and seed, LDA (exact sequential sparse sampler,
``n_shards=1``), gLDA and restricted LDA run one chain each from a uniform random start with the
same K, alpha = 50 / K and beta = 0.01 (Steyvers & Griffiths), recording log p(W, Z) of the
token-level assignments (the Dirichlet-multinomial closed form, ``models.lda.model.joint_log_lik``)
every 20 sweeps. Improvement of a model = (final model - final LDA) / (final LDA - initial LDA)
per seed (the paper's figure; "initial" is log p(W, Z) of the seed's uniform random start), with
mean, sd and the paired t-test p-value of the finals over the seeds.

Writes ``table.md`` (the improvement table), ``fig7.png`` (log p(W, Z) against effective
iteration: a gLDA sweep counts as its CPU time over LDA's), ``topics.md`` (Figure 8: matched LDA
and gLDA topics of the raw corpora and the stopwords in every model's top 10 words) and
``results.json``. ``--jobs`` runs that many fits at once (one thread each).
"""
from __future__ import annotations

import json
import logging
import time
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from models.glda.model import GroupedLDA
from models.lda.model import LDA, joint_log_lik

from ..core.tables import Table
from . import glda_corpora

log = logging.getLogger(__name__)

MODELS = ("LDA", "gLDA", "restricted LDA")
STOPWORDS_NOTE = "NLTK's English list (179 words), as retrieval.datasets.newsgroups"


def make_model(name, k, iters, seed, group_size, record_every, doc_counts="groups"):
    kw = dict(n_topics=k, alpha=50.0 / k, beta=0.01, n_chains=1, n_iter=iters, burn_in=iters - 1,
              sample_every=1, seed=seed, n_jobs=1, log_lik_every=record_every)
    if name == "LDA":
        return LDA(n_shards=1, init="random", **kw)
    return GroupedLDA(group_size=group_size, restricted=name == "restricted LDA",
                      doc_counts=doc_counts, init="random", **kw)


def fit_one(task):
    """One (corpus, model, seed) run: its log p(W, Z) trace (totals), CPU seconds per sweep and,
    for seed 0, every topic's word counts (for the topics figure)."""
    a = task
    corpus, _ = glda_corpora.load(a["data"], a["name"], a["variant"], a["cache"], a["docs"])
    m = make_model(a["model"], a["k"], a["iters"], a["seed"], a["group_size"], a["record_every"],
                   a.get("doc_counts", "groups"))
    t = time.process_time()
    m.fit(corpus)
    cpu = (time.process_time() - t) / a["iters"]
    # the seed's uniform random start, scored by the same closed form
    z0 = np.random.default_rng([a["seed"], 11]).integers(0, a["k"], corpus.n_tokens).astype(np.int32)
    n = corpus.n_tokens
    out = dict(task, iters_rec=m.log_lik_iter_.tolist(), trace=(m.log_lik_[:, 0] * n).tolist(),
               initial=joint_log_lik(corpus, z0, a["k"], 50.0 / a["k"], 0.01) * n, cpu=cpu,
               n_tokens=n)
    if a["seed"] == 0:
        out["n_kw"] = m.n_kw_[0].astype(np.int32)
    return out


def _ttest_p(x, y):
    from scipy.stats import ttest_rel

    if len(x) < 2:
        return float("nan")
    return float(ttest_rel(x, y).pvalue)


def summarize(results):
    """Rows of the improvement table, one per (corpus, model)."""
    rows = []
    keys = sorted({(r["name"], r["variant"]) for r in results}, key=lambda k: (k[0], k[1] != "stemmed"))
    for key in keys:
        by = {(r["model"], r["seed"]): r for r in results if (r["name"], r["variant"]) == key}
        seeds = sorted({s for _, s in by})
        lda_final = np.array([by["LDA", s]["trace"][-1] for s in seeds])
        lda_init = np.array([by["LDA", s]["initial"] for s in seeds])
        lda_cpu = np.mean([by["LDA", s]["cpu"] for s in seeds])
        for model in MODELS:
            if (model, seeds[0]) not in by:
                continue
            final = np.array([by[model, s]["trace"][-1] for s in seeds])
            imp = 100 * (final - lda_final) / (lda_final - lda_init)
            rows.append(dict(corpus=f"{key[0]} {key[1]}", model=model, tokens=by[model, seeds[0]]["n_tokens"],
                             seeds=len(seeds), initial=float(lda_init.mean()), final=float(final.mean()),
                             final_sd=float(final.std(ddof=1)) if len(seeds) > 1 else 0.0,
                             improvement=float(imp.mean()),
                             improvement_sd=float(imp.std(ddof=1)) if len(seeds) > 1 else 0.0,
                             p=_ttest_p(final, lda_final) if model != "LDA" else float("nan"),
                             cost=float(np.mean([by[model, s]["cpu"] for s in seeds]) / lda_cpu)))
    return rows


def table_md(rows):
    lines = ["| corpus | tokens | model | initial log p(W,Z) | final (mean ± sd) | improvement % (mean ± sd) | p (paired t) | CPU per sweep vs LDA |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        imp = "" if r["model"] == "LDA" else f"{r['improvement']:+.1f} ± {r['improvement_sd']:.1f}"
        p = "" if r["model"] == "LDA" else f"{r['p']:.2g}"
        lines.append(f"| {r['corpus']} | {r['tokens']:,} | {r['model']} | {r['initial']:.4g} | "
                     f"{r['final']:.5g} ± {r['final_sd']:.2g} | {imp} | {p} | {r['cost']:.1f}x |")
    return "\n".join(lines)


def plot_fig7(results, rows, path):
    """log p(W, Z) (mean over seeds) against effective iteration, one panel per corpus."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted({(r["name"], r["variant"]) for r in results}, key=lambda k: (k[0], k[1] != "stemmed"))
    cost = {(r["corpus"], r["model"]): r["cost"] for r in rows}
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), squeeze=False)
    style = {"LDA": ("tab:blue", "--"), "gLDA": ("tab:green", "-"), "restricted LDA": ("tab:red", ":")}
    for ax, key in zip(axes[0], keys):
        label = f"{key[0]} {key[1]}"
        xmax, firsts, tops = 0.0, [], []
        for model in MODELS:
            runs = [r for r in results if (r["name"], r["variant"], r["model"]) == (*key, model)]
            if not runs:
                continue
            y = np.mean([[r["initial"]] + r["trace"] for r in runs], axis=0)
            x = np.array([0] + runs[0]["iters_rec"]) * cost[label, model]
            color, ls = style[model]
            ax.plot(x, y, ls, color=color, marker=".", label=model)
            xmax, firsts, tops = max(xmax, x[-1]), firsts + [y[1]], tops + [y.max()]
        ax.set_title(label)
        ax.set_xlabel("effective iteration (LDA sweeps of CPU time)")
        ax.set_ylabel("log p(W, Z)")
        ax.set_xlim(0, xmax)
        # from the first record on: the uniform start would flatten every curve
        span = max(tops) - min(firsts)
        ax.set_ylim(min(firsts) - 0.05 * span, max(tops) + 0.05 * span)
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def topics_md(results, vocabs, n_pairs=5):
    """Figure 8: LDA topics matched one to one with gLDA topics (Hungarian on the cosine of the
    topic-word counts), the best matched pairs' top 10 words, and stopwords in every model's top 10."""
    from scipy.optimize import linear_sum_assignment

    from ..datasets.newsgroups import STOPWORDS

    out = []
    for (name, variant), vocab in vocabs.items():
        if variant != "raw":
            continue
        fits = {r["model"]: r["n_kw"] for r in results
                if (r["name"], r["variant"], r["seed"]) == (name, variant, 0) and "n_kw" in r}
        if "LDA" not in fits or "gLDA" not in fits:
            continue
        top = {m: np.argsort(-n_kw, axis=0, kind="stable")[:10].T for m, n_kw in fits.items()}
        out.append(f"## {name} raw (seed 0)\n\nStopwords in the top 10 words, over all "
                   f"{fits['LDA'].shape[1]} topics ({STOPWORDS_NOTE}):\n")
        for m, t in top.items():
            n_stop = sum(vocab[w] in STOPWORDS for row in t for w in row)
            n_topics_with = sum(any(vocab[w] in STOPWORDS for w in row) for row in t)
            out.append(f"- {m}: {n_stop} of {t.size} top words; {n_topics_with} topics hold at least one")
        a, b = (fits[m].astype(np.float64) for m in ("LDA", "gLDA"))
        a /= np.linalg.norm(a, axis=0) + 1e-12
        b /= np.linalg.norm(b, axis=0) + 1e-12
        cos = a.T @ b
        ri, ci = linear_sum_assignment(-cos)
        best = np.argsort(-cos[ri, ci])[:n_pairs]
        out.append(f"\nThe {n_pairs} best matched topic pairs (cosine of their word counts):\n")
        out.append("| cosine | LDA top 10 | gLDA top 10 |\n|---|---|---|")
        for j in best:
            la, gl = ri[j], ci[j]
            out.append(f"| {cos[la, gl]:.2f} | {' '.join(vocab[w] for w in top['LDA'][la])} | "
                       f"{' '.join(vocab[w] for w in top['gLDA'][gl])} |")
        out.append("")
    return "\n".join(out)


def run(*, data="../shared/data", corpora=("20news", "scifact", "cacm"), variants=("stemmed", "raw"),
        models=MODELS, docs: int = 2000, seeds: int = 3, iters: int = 200, k: int = 100, group_size: float = 4.0,
        doc_counts: str = "groups", record_every: int = 20, jobs: int = 1, cache="build/glda_cache",
        out="build/glda_out", prepare: bool = False) -> list[Table]:
    """The improvement table of gLDA and restricted LDA over LDA (``docs``: 20 Newsgroups posts,
    0 for all); also writes table.md, fig7.png, topics.md and results.json into ``out``. With
    ``prepare``, only builds the cached corpora (and returns no table)."""
    if "LDA" not in models:
        raise ValueError("--models must include LDA (the improvement is relative to it)")
    data, cache, out = Path(data), Path(cache), Path(out)
    n_docs = docs or None
    vocabs = {}
    for name in corpora:
        for variant in variants:
            corpus, vocabs[name, variant] = glda_corpora.load(data, name, variant, cache, n_docs)
            log.info("%s %s: %d docs, %d tokens, %d terms", name, variant, corpus.n_docs, corpus.n_tokens,
                     corpus.n_terms)
    if prepare:
        return []
    tasks = [dict(data=str(data), name=n, variant=v, cache=str(cache), docs=n_docs, model=m, k=k, iters=iters,
                  seed=s, group_size=group_size, doc_counts=doc_counts, record_every=record_every)
             for n in corpora for v in variants for s in range(seeds) for m in models]
    # longest first (gLDA and restricted LDA cost more per sweep), so the pool ends together
    tasks.sort(key=lambda t: t["model"] == "LDA")
    t0 = time.perf_counter()
    with get_context("spawn").Pool(jobs) as pool:
        results = []
        for r in pool.imap_unordered(fit_one, tasks):
            results.append(r)
            log.info("%d/%d %s %s %s seed %d: final %.5g (%.0f s)", len(results), len(tasks), r["name"],
                     r["variant"], r["model"], r["seed"], r["trace"][-1], time.perf_counter() - t0)
    rows = summarize(results)
    out.mkdir(parents=True, exist_ok=True)
    head = (f"K = {k}, alpha = 50/K, beta = 0.01, {iters} sweeps, group size {group_size:g}, gLDA doc counts: "
            f"{doc_counts}, {seeds} seeds, 20news: {n_docs or 'all'} posts")
    (out / "table.md").write_text(head + "\n\n" + table_md(rows) + "\n")
    plot_fig7(results, rows, out / "fig7.png")
    (out / "topics.md").write_text(topics_md(results, vocabs))
    settings = dict(corpora=corpora, variants=variants, models=models, docs=docs, seeds=seeds, iters=iters, k=k,
                    group_size=group_size, doc_counts=doc_counts, record_every=record_every)
    (out / "results.json").write_text(json.dumps(
        dict(args={a: str(v) for a, v in settings.items()}, rows=rows,
             runs=[{a: v for a, v in r.items() if a != "n_kw"} for r in results]), indent=1))
    return [Table("gLDA against LDA: log p(W, Z) (Bart 2011, Table 1)", [table_row(r) for r in rows],
                  notes=[head, f"figure 7, topics (figure 8) and every run: {out}"])]


def table_row(r) -> dict:
    """A row of :func:`table_md`'s table, as :class:`Table` cells."""
    lda = r["model"] == "LDA"
    return {"corpus": r["corpus"], "tokens": f"{r['tokens']:,}", "model": r["model"],
            "initial log p(W,Z)": f"{r['initial']:.4g}", "final (mean ± sd)": f"{r['final']:.5g} ± {r['final_sd']:.2g}",
            "improvement % (mean ± sd)": "" if lda else f"{r['improvement']:+.1f} ± {r['improvement_sd']:.1f}",
            "p (paired t)": "" if lda else f"{r['p']:.2g}", "CPU per sweep vs LDA": f"{r['cost']:.1f}x"}
