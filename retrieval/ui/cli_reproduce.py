"""``topicir reproduce NAME``: the tables of the papers and of the shared collections, one NAME
per table (docs/results/NAME.md). Options here, experiments in :mod:`retrieval.experiments`."""
from __future__ import annotations

import sys
from pathlib import Path

from models.registry import kinds

from ..core.tables import Table
from .cli_bench import DEFAULT_20NEWS, add_avipam_common, add_tree_lda, QUICK_TREE
from .cli_tables import Command, TableCommand, add_table_commands
from .guard import finite, floats
from .source_values import constant

REGRESSIONS = "retrieval.experiments.regressions"
SCORING = "retrieval.core.scoring"

QUICK_TRAIN = dict(chains=1, iterations=4, burn_in=2, sample_every=1)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def add_collections(p, default):
    p.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    p.add_argument("--indexes", default="indexes", help="where the collections' indexes are built")
    p.add_argument("--collections", nargs="+", default=list(default), choices=constant(REGRESSIONS, "COLLECTIONS"))


def add_schedule(p, chains=3, iterations=100, burn_in=50, sample_every=10):
    p.add_argument("--chains", type=int, default=chains)
    p.add_argument("--iterations", type=int, default=iterations, help="Gibbs sweeps")
    p.add_argument("--burn-in", type=int, default=burn_in)
    p.add_argument("--sample-every", type=int, default=sample_every)


# -- regressions ---------------------------------------------------------------------------------

def add_regressions(p):
    add_collections(p, constant(REGRESSIONS, "COLLECTIONS"))


def regressions(*, data, indexes, collections) -> list[Table]:
    from ..experiments.regressions import TOLERANCE, run_collection

    rows = [row for name in collections for row in run_collection(Path(data), name, Path(indexes))]
    return [Table("Shared collections: title queries, mu=1000, depth 1000, judged topics", rows,
                  notes=[f"expected MAP: computed independently; a regression is a miss by more than {TOLERANCE}"])]


def regression_status(tables) -> int:
    from ..experiments.regressions import check

    misses = check(tables[0].rows)
    for miss in misses:
        print(f"REGRESSION: {miss}", file=sys.stderr)
    return 1 if misses else 0


# -- smoothing -----------------------------------------------------------------------------------

def add_smoothing(p):
    p.add_argument("--kind", choices=kinds(), default="lda", help="the model kind; another kind than lda is shown beside LDA")
    add_collections(p, constant(REGRESSIONS, "COLLECTIONS"))
    p.add_argument("--k", type=_ints, default=[100, 200, 400, 800], help="topic counts, comma-separated")
    p.add_argument("--lam", type=floats, default=[0.5, 0.6, 0.7, 0.8, 0.9], help="lam values, comma-separated")
    p.add_argument("--mu", type=finite, default=constant(SCORING, "MU"))
    add_schedule(p)


def smoothing(*, kind, data, indexes, collections, k, lam, mu, chains, iterations, burn_in, sample_every):
    from ..experiments.smoothing import REFERENCE_KIND, TRAIN, comparison_table, settings_note

    train = dict(TRAIN, n_chains=chains, n_iter=iterations, burn_in=burn_in, sample_every=sample_every)
    shown = list(dict.fromkeys([REFERENCE_KIND, kind]))  # a new kind is shown beside LDA
    rows = comparison_table(Path(data), collections, Path(indexes), shown, ks=k, lams=lam, mu=mu, train=train)
    return [Table(f"MAP: QL vs {' vs '.join(x.upper() for x in shown)} smoothing (title queries, mu={mu:g}, "
                  f"{chains} chains, {iterations} sweeps); LOCO = K and lam chosen on the other collections", rows,
                  notes=[settings_note(x, k[-1], train) for x in shown])]


# -- every default, chosen by nested leave-one-collection-out -------------------------------------

EFFECTIVENESS = "retrieval.experiments.effectiveness"


def add_effectiveness(p):
    p.add_argument("--data", required=True, help="shared collections' folder, e.g. ../shared/data")
    p.add_argument("--indexes", default="indexes", help="where the collections' indexes are built")
    p.add_argument("--collections", nargs="+", default=list(constant(EFFECTIVENESS, "COLLECTIONS")),
                   help="folders of --data, each with docs/, topics.trec and qrels.txt (yours too)")
    p.add_argument("--kinds", nargs="+", choices=kinds(), default=list(constant(EFFECTIVENESS, "KINDS")),
                   help="the model kinds, each trained at its defaults (kept in the index's models/)")
    p.add_argument("--feedback-kinds", nargs="+", choices=kinds(),
                   default=list(constant(EFFECTIVENESS, "FEEDBACK_KINDS")),
                   help="the kinds whose feedback runs choose the feedback defaults, with exact QL's")


# -- comp5 and held-out likelihood (PAM paper) ----------------------------------------------------

def add_comp5(p):
    p.add_argument("--data", default=DEFAULT_20NEWS, help="20news-bydate.tar.gz, e.g. in ../shared/data/20news")
    p.add_argument("--kinds", nargs="+", default=["lda", "pam"], choices=("lda", "pam", "glda"),
                   help="kinds that draw documents, at the paper's settings (gLDA at LDA's)")
    p.add_argument("--samples", type=int, default=1000, help="documents sampled for the empirical likelihood")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)


_SMALL = dict(n_chains=1, n_iter=6, burn_in=3, sample_every=1, seed=0)
QUICK_COMP5 = dict(samples=20, params={"lda": dict(n_topics=5, **_SMALL), "glda": dict(n_topics=5, **_SMALL),
                                       "pam": dict(n_super=2, n_sub=5, **_SMALL)})


def comp5(*, data, kinds, samples, seed, threads, params=None):
    from ..experiments.pam_eval import PAPER_COMP5, comp5_accuracy

    res = comp5_accuracy(data, kinds=kinds, params=params, seed=seed, n_docs=samples, n_jobs=threads)
    rows = [{"model": k, "paper %": PAPER_COMP5.get(k, float("nan")), **v} for k, v in res.items()]
    return [Table("20 Newsgroups comp5 classification accuracy (%), one model per class", rows, digits=2)]


def heldout(*, data, kinds, samples, seed, threads, params=None):
    from ..experiments.pam_eval import heldout as measure

    res = measure(data, kinds=kinds, params=params, seed=seed, n_docs=samples, n_jobs=threads)
    return [Table("comp5 held-out likelihood (empirical likelihood, 75/25 split; lower bits/word is better)",
                  [{"model": k, **v} for k, v in res.items()])]


# -- gLDA ----------------------------------------------------------------------------------------

def add_glda_table(p):
    MODELS = constant("retrieval.experiments.glda", "MODELS")

    p.add_argument("--data", default="../shared/data", help="shared data folder (20news and the collections)")
    p.add_argument("--corpora", nargs="+", default=["20news", "scifact", "cacm"])
    p.add_argument("--variants", nargs="+", default=["stemmed", "raw"], choices=["stemmed", "raw"])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--docs", type=int, default=2000, help="20 Newsgroups posts (0: all)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--group-size", type=float, default=4.0)
    p.add_argument("--doc-counts", default="groups", choices=["groups", "tokens"],
                   help="gLDA's doc factor in eq. 3 (see models.glda.model.GroupedLDA)")
    p.add_argument("--record-every", type=int, default=20)
    p.add_argument("--jobs", type=int, default=1, help="fits at once (processes)")
    p.add_argument("--cache", default="build/glda_cache", help="corpus cache folder")
    p.add_argument("--out", default="build/glda_out", help="folder for table.md, fig7.png, topics.md, results.json")
    p.add_argument("--prepare", action="store_true", help="only build the cached corpora")


def add_glda_map(p):
    add_collections(p, ("med", "cran", "cisi", "cacm", "npl", "scifact"))
    p.add_argument("--k", type=int, nargs="+", default=[100])
    p.add_argument("--lam", type=float, nargs="+", default=[0.5, 0.7, 0.9])
    p.add_argument("--mu", type=float, default=1000.0)
    add_schedule(p)


# -- tree-LDA ------------------------------------------------------------------------------------

def add_tree_table1(p):
    add_tree_lda(p, values=(50, 100, 200, 500))


def add_tree_map(p):
    add_collections(p, constant(REGRESSIONS, "COLLECTIONS"))
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--lam", type=float, default=0.7)
    p.add_argument("--mu", type=float, default=1000.0)
    add_schedule(p)
    p.add_argument("--no-example", dest="example", action="store_false", help="skip the synonym example")
    p.add_argument("--control", action="store_true", help="also tree-LDA without synsets (no WordNet)")


# -- a growing index -----------------------------------------------------------------------------

def add_growing(p):
    p.add_argument("--kind", choices=kinds(), default="lda", help="the model kind (one with fold_in)")
    add_collections(p, ["med", "cran", "cisi", "cacm"])
    p.add_argument("--k", type=int, default=constant("retrieval.experiments.growing", "K"), help="topics of the models")
    p.add_argument("--lam", type=finite, default=constant(SCORING, "LAM"))
    p.add_argument("--mu", type=finite, default=constant(SCORING, "MU"))
    add_schedule(p, chains=2, iterations=60, burn_in=30, sample_every=10)
    p.add_argument("--seeds", type=int, nargs="+", default=[0],
                   help="train both models once per seed and report the mean MAP over the seeds")


def growing(*, kind, data, indexes, collections, k, lam, mu, chains, iterations, burn_in, sample_every, seeds):
    from ..experiments.growing import TRAIN, growing_table

    train = dict(TRAIN, n_chains=chains, n_iter=iterations, burn_in=burn_in, sample_every=sample_every)
    return [growing_table(Path(data), collections, Path(indexes), kind=kind, k=k, train=train, mu=mu, lam=lam,
                          seeds=seeds)]


# -- aviPAM --------------------------------------------------------------------------------------

def add_avipam_tables(p):
    add_avipam_common(p)
    p.add_argument("--table", type=int, nargs="+", choices=(1, 2), default=[1, 2])
    p.add_argument("--only-avipam", action="store_true")
    p.add_argument("--rows", nargs="+", help="only the rows whose label contains one of these, e.g. 4pam")


def _lib(module: str, func: str = "run"):
    def call(**kwargs):
        import importlib

        return getattr(importlib.import_module(f"retrieval.{module}"), func)(**kwargs)
    return call


REPRODUCTIONS = [
    TableCommand("regressions", "QL, Lucene QLD, BM25 and BM25+RM3 on the shared collections, checked against "
                 "expected MAP (exit 1 on a regression)", add_regressions, regressions, dict(collections=["med"]),
                 exit_code=regression_status),
    TableCommand("effectiveness", "exact QL, every kind's smoothing and both feedback modes on the shared "
                 "collections, each default chosen by nested leave-one-collection-out",
                 add_effectiveness, _lib("experiments.effectiveness", "reproduce"),
                 dict(collections=["adi", "med"], kinds=["lda"])),
    TableCommand("smoothing", "topic smoothing vs QL on the shared collections (LOCO-tuned K and lam)",
                 add_smoothing, smoothing, dict(collections=["med", "cisi"], k=[5], lam=[0.5, 0.7], **QUICK_TRAIN)),
    TableCommand("comp5", "20 Newsgroups comp5 classification with LDA and PAM (PAM paper, Table 6)",
                 add_comp5, comp5, QUICK_COMP5),
    TableCommand("heldout", "held-out likelihood (empirical likelihood) of LDA and PAM on comp5",
                 add_comp5, heldout, QUICK_COMP5),
    TableCommand("glda-table", "gLDA against LDA by log p(W, Z) (Bart 2011, Table 1 and Figures 7-8)",
                 add_glda_table, _lib("experiments.glda"),
                 dict(corpora=["20news"], variants=["raw"], docs=200, seeds=2, iters=4, k=5, record_every=2)),
    TableCommand("glda-map", "MAP of QL, LDA and gLDA smoothing on the shared collections",
                 add_glda_map, _lib("experiments.glda_map"),
                 dict(collections=["med", "cisi"], k=[5], lam=[0.7], **QUICK_TRAIN)),
    TableCommand("tree-lda-table1", "tree-LDA samplers' seconds per sweep and speed-ups (Hu & Boyd-Graber 2012, "
                 "Table 1)", add_tree_table1, _lib("bench.tree_lda"), QUICK_TREE),
    TableCommand("tree-lda-map", "MAP of QL, LDA and tree-LDA smoothing (WordNet prior) and a synonym example",
                 add_tree_map, _lib("experiments.tree_map"), dict(collections=["med"], k=5, **QUICK_TRAIN)),
    TableCommand("growing", "a growing index: a model trained on 4 in 5 documents ranking all of them (the "
                 "others added with index --add and folded in) against one trained on all", add_growing,
                 growing, dict(collections=["med"], k=5, **QUICK_TRAIN)),
    TableCommand("avipam-tables", "the aviPAM paper's Tables 1 and 2: NPMI, time and collapse against Gibbs models",
                 add_avipam_tables, _lib("bench.avipam", "tables"),
                 dict(table=[1], rows=["4pam"], epochs=2, gibbs_iters=3)),
]


def _fill(s) -> None:
    add_table_commands(s.add_subparsers(dest="reproduction", required=True, metavar="NAME"), REPRODUCTIONS)


REPRODUCE = Command("reproduce", "reproduce a table of the papers or of the shared collections (topicir "
                    "reproduce NAME --write PATH)", _fill)
