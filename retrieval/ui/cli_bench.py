"""``topicir bench AREA``: speed benchmarks, one per area (ql: ranking; a model kind: its
training). Options here, measurements in :mod:`retrieval.bench`."""
from __future__ import annotations

import argparse
import importlib

from .cli_tables import Command, TableCommand, add_table_commands
from .source_values import constant

DEFAULT_20NEWS = "/work/shared/data/20news/20news-bydate.tar.gz"


def _call(module: str, func: str = "run"):
    """The library function, imported when the command runs (numba, torch and Ray load slowly)."""
    def call(**kwargs):
        return getattr(importlib.import_module(f"retrieval.bench.{module}"), func)(**kwargs)
    return call


def _pairs(text: str) -> tuple[int, int]:
    try:
        s, s2 = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected s,s' (two integers), got {text!r}") from None
    return s, s2


def _newsgroups(p, what="20news-bydate tarball"):
    p.add_argument("--data", default=DEFAULT_20NEWS, help=what)


def add_ql(p):
    p.add_argument("--docs", type=int, default=250_000, help="documents of the synthetic collection")
    p.add_argument("--terms", type=int, default=200_000, help="its vocabulary")
    p.add_argument("--mean-len", type=float, default=240.0, help="its mean document length")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared", default="indexes/npl",
                   help="index of the largest shared collection, ranked too when it exists ('' to skip)")
    p.add_argument("--baselines", default="indexes/cranfield",
                   help="index whose Lucene baselines are timed against pyserini's batch search when it exists "
                        "('' to skip)")
    p.add_argument("--baselines-topics", default="irds:cranfield", help="the topics they rank")


def add_lda(p):
    _newsgroups(p)
    p.add_argument("--k", type=int, nargs="+", default=[100, 800], help="topic counts")
    p.add_argument("--iters", type=int, default=50, help="Gibbs sweeps per run")
    p.add_argument("--docs", type=int, default=None, help="only the first DOCS posts")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shards", type=int, default=4, help="topicir document shards")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tomotopy", action="store_true")
    p.add_argument("--synthetic", action="store_true", help="run the AP-scale synthetic benchmark instead")
    p.add_argument("--syn-docs", type=int, default=250_000)
    p.add_argument("--syn-terms", type=int, default=200_000)
    p.add_argument("--syn-len", type=float, default=240.0)
    p.add_argument("--syn-iters", type=int, default=5)
    p.add_argument("--syn-samples", type=int, default=5,
                   help="samples kept per chain (the last ones), as Wei & Croft's 5 per chain")


def add_peers(p):
    p.add_argument("--index", default="build/bench-full/index",
                   help="index whose corpus both samplers train on ('topicir bench full' builds this one)")
    p.add_argument("--kinds", nargs="+", default=["lda", "pam"], choices=("lda", "pam"))
    p.add_argument("--k", type=int, nargs="+", default=[100, 800], help="LDA topic counts")
    p.add_argument("--iters", type=int, default=10, help="topicir LDA sweeps per run")
    p.add_argument("--tomotopy-iters", type=int, default=10, help="tomotopy LDA sweeps per run")
    p.add_argument("--pam-sizes", type=_pairs, nargs="+", default=[(50, 100), (100, 800)], help="PAM s,s' pairs")
    p.add_argument("--pam-every", type=int, nargs="+", default=[1, 25],
                   help="for each PAM size, keep every k-th document only (both samplers)")
    p.add_argument("--pam-iters", type=int, default=5, help="topicir PAM sweeps per run")
    p.add_argument("--pam-tomotopy-iters", type=int, default=1, help="tomotopy PAM sweeps per run")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shards", type=int, default=4, help="topicir document shards")
    p.add_argument("--seed", type=int, default=0)


def add_pam(p):
    _newsgroups(p)
    p.add_argument("--sizes", type=_pairs, nargs="+", default=[(50, 100), (100, 800)], help="s,s' pairs")
    p.add_argument("--iters", type=int, default=40, help="topicir sweeps per run")
    p.add_argument("--tomotopy-iters", type=int, default=3, help="tomotopy sweeps timed per size")
    p.add_argument("--samplers", nargs="+", default=["exact", "pruned"], choices=("exact", "pruned"))
    p.add_argument("--prune-start", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shards", type=int, default=4, help="topicir document shards")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-tomotopy", action="store_true")
    p.add_argument("--every", type=int, default=1,
                   help="keep every k-th post only (both samplers), e.g. 10 to time tomotopy at 100,800")


def add_tcm(p):
    _newsgroups(p)
    p.add_argument("--subsets", type=int, nargs="+", default=[2000, 0],
                   help="document counts of the corpora timed; 0 = all of 20 Newsgroups")
    p.add_argument("--k", type=int, nargs="+", default=[100, 800], help="topic counts")
    p.add_argument("--samplers", nargs="+", default=["sparse", "exact"], choices=("sparse", "exact"))
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--iters", type=int, default=5, help="timed sweeps per row")
    p.add_argument("--warm", type=int, default=2, help="untimed sweeps before them")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)


def add_files(p):
    p.add_argument("--index", default="indexes/aila2019",
                   help="the index whose model files are loaded (default: the shared collection with most tokens)")
    p.add_argument("--models", nargs="+", help="these model files of the index instead of all in its models/")
    p.add_argument("--repeats", type=int, default=5, help="loads timed after a warm-up (the median is shown)")


def add_glda(p):
    _newsgroups(p)
    p.add_argument("--k", type=int, nargs="+", default=[100, 800])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--docs", type=int, default=None, help="only the first DOCS posts")
    p.add_argument("--group-size", type=float, default=4.0)
    p.add_argument("--seed", type=int, default=0)


def add_tree_lda(p, values=(100,)):
    SAMPLERS = constant("models.tree_lda.kernels", "SAMPLERS")

    _newsgroups(p)
    p.add_argument("--wordnet", dest="wordnet_dir", default=None,
                   help="WordNet 3.0 dict directory (default /usr/share/wordnet)")
    p.add_argument("--vary", choices=("T", "V", "C"), default="T", help="the setting that takes --values")
    p.add_argument("--values", type=int, nargs="+", default=list(values))
    p.add_argument("--T", type=int, default=100, help="topics")
    p.add_argument("--V", type=int, default=10000, help="vocabulary (top terms by tf-idf)")
    p.add_argument("--C", type=int, default=100, help="WordNet synsets (correlations)")
    p.add_argument("--iters", type=int, default=3, help="timed sweeps per sampler and seed")
    p.add_argument("--burn", type=int, default=20, help="FAST-RB-SDW sweeps before timing")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--shards", type=int, default=1,
                   help="time sharded sweeps of S shards on numba's threads (wall-clock) instead "
                        "of sequential ones (CPU time)")
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    p.add_argument("--plot", dest="plot_path", default=None, help="PNG of seconds per sweep against the varied value")
    p.add_argument("--lists", type=int, default=0, metavar="N",
                   help="instead of timing: N FAST-RB sweeps at T, V, C, with list lengths and bucket shares")


def add_ray(p):
    KINDS = constant("retrieval.bench.ray", "KINDS")

    _newsgroups(p)
    p.add_argument("--docs", type=int, default=1500, help="only the first DOCS posts")
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="model kinds to measure")
    p.add_argument("--sizes", default="default", choices=("default", "quick"),
                   help="topic counts: each kind's defaults, or its quick settings")
    p.add_argument("--iters", type=int, default=4, help="sweeps (aviPAM: epochs) per run (>= 3)")
    p.add_argument("--chains", type=int, default=2,
                   help="chains (gLDA's Ray workers with the state on the driver own whole chains)")
    p.add_argument("--shards", type=int, default=4, help="document shards (gLDA here: one, whole chains)")
    p.add_argument("--threads", type=int, default=2, help="threads of the local trainer")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray worker counts")
    p.add_argument("--address", default=None, help="Ray cluster (default: start a local one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gbps", type=float, default=10.0, help="network bandwidth of the projection, Gb/s")
    p.add_argument("--heaps-beta", type=float, default=0.5,
                   help="Heaps' law exponent growing the vocabulary of the larger collection")
    p.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of the projected term frequencies")


def add_ray_memory(p):
    KINDS = constant("models.common.executors.ray", "WORKER_STATE_KINDS")

    def per_kind(name):
        return ", ".join(f"{k} {v}" for k, v in constant("retrieval.bench.ray_memory", name).items())

    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS,
                   help="model kinds trained (those whose chain state can stay on the workers)")
    p.add_argument("--docs", type=int, default=None,
                   help=f"documents of the synthetic collection at size 1x (default by kind: {per_kind('DOCS')})")
    p.add_argument("--terms", type=int, default=20_000, help="its vocabulary")
    p.add_argument("--mean-len", type=float, default=100.0, help="its mean document length")
    p.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4], help="sizes trained, as multiples of --docs")
    p.add_argument("--workers", type=int, default=4,
                   help="Ray workers (a document shard of the one chain each)")
    p.add_argument("--cap-mib", type=int, default=None,
                   help=f"every worker's cap on its peak resident memory, MiB (default by kind: {per_kind('CAP_MIB')})")
    p.add_argument("--k", type=int, default=50, help="topics (PAM: sub-topics, under k/5 super-topics)")
    p.add_argument("--iters", type=int, default=3, help="sweeps")
    p.add_argument("--threads", type=int, default=2, help="threads of the local trainer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default="build/bench-ray-memory", help="folder of the collections and models (kept)")


def add_scale(p):
    KINDS = constant("retrieval.bench.scale", "KINDS")

    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="model kinds to measure")
    p.add_argument("--docs", type=int, default=250_000, help="documents of the synthetic AP collection")
    p.add_argument("--fraction", type=float, default=0.05,
                   help="share of the documents the models train on (whole files of 1,000), and half "
                        "as many files again; their figures are extrapolated through both runs")
    p.add_argument("--sweeps", type=int, default=6, help="sweeps (epochs) trained per kind, the first one timed as setup")
    p.add_argument("--small-sweeps", type=int, default=20,
                   help="sweeps of the Gibbs kinds on the smaller fraction: how sweeps speed up as chains settle")
    p.add_argument("--terms", type=int, default=200_000, help="vocabulary of the generator")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default="build/bench-scale",
                   help="folder of the generated files, the indexes and the logs (kept and reused)")
    p.add_argument("--reindex", action="store_true",
                   help="build and time the indexes again even when the work folder holds them")
    p.add_argument("--wordnet", default=None, help="WordNet 3.0 dict directory (default /usr/share/wordnet)")


def add_full(p):
    KINDS = constant("retrieval.bench.scale", "KINDS")

    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS, help="model kinds to train and rank with")
    p.add_argument("--docs", type=int, default=250_000, help="documents of the synthetic AP collection")
    p.add_argument("--terms", type=int, default=200_000, help="vocabulary of the generator")
    p.add_argument("--threads", type=int, default=2, help="--threads of every command (and NUMBA_NUM_THREADS)")
    p.add_argument("--iterations", type=int, default=None,
                   help="train this many sweeps (epochs) instead of each kind's default schedule; the table says so")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work", default="build/bench-full",
                   help="folder of the collection, index, models, runs, logs and the state file (rerun to go on)")
    p.add_argument("--stop-after", type=float, default=None, metavar="MIN",
                   help="start no step after MIN minutes and stop a training then, after its sweep in progress, "
                        "with its checkpoint; 0 writes the table of what is measured")
    p.add_argument("--remeasure", nargs="+", default=[], metavar="STEP",
                   help="run these ranking steps again (ql, run-KIND), measured before, e.g. after a code change; "
                        "their new figures replace the old")
    p.add_argument("--runs", type=int, default=3,
                   help="run each ranking step (ql, run-KIND) this many times; its row gives the median run's figures")
    p.add_argument("--projection", default="docs/results/bench-scale.md",
                   help="the file 'topicir bench scale --write' wrote, whose figures the measured ones are set beside")
    p.add_argument("--wordnet", default=None, help="WordNet 3.0 dict directory (default /usr/share/wordnet)")


def add_foldin(p):
    p.add_argument("--train-docs", type=int, default=20_000, help="synthetic documents the model trains on")
    p.add_argument("--new-docs", type=int, default=1000, help="new documents folded in")
    p.add_argument("--terms", type=int, default=50_000)
    p.add_argument("--mean-len", type=float, default=250.0)
    p.add_argument("--k", type=int, default=800, help="topics")
    p.add_argument("--iters", type=int, default=40, help="training sweeps")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)


def add_avipam_common(p):
    """The options of every aviPAM command (``None``: the command's schedule decides)."""
    p.add_argument("--epochs", type=int, help="tables: 200, others: 100")
    p.add_argument("--gibbs-iters", type=int, default=200)
    p.add_argument("--dmfvi-iters", type=int, default=100,
                   help="passes of scikit-learn's variational LDA (the DMFVI row)")
    p.add_argument("--dmfvi-method", choices=("batch", "online"), default="batch",
                   help="scikit-learn's learning_method for the DMFVI row")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument("--lr", type=float, help="tables: 2e-3, others: 1e-3")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--decoder", choices=("mixture", "product"),
                   help="aviPAM decoder: PAM's mixture or ProdLDA's product of experts "
                        "(tables: product, lr 2e-3, 200 epochs by default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--newsgroups", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--corpus-npz", help="a corpus written by 'topicir bench avipam prepare' (instead of --newsgroups)")
    p.add_argument("--save", help="directory for every row's topics and the rows (JSON lines)")
    p.add_argument("--alpha", type=float,
                   help="aviPAM Dirichlet prior below the root (tables and collapse: 1, the paper's; map: AVIPAM's)")
    p.add_argument("--alpha-root", type=float,
                   help="aviPAM Dirichlet prior of the root (tables and collapse: 1, the paper's; map: AVIPAM's)")
    p.add_argument("--beta1", type=float, help="aviPAM Adam beta1 (default: AVIPAM's)")
    p.add_argument("--dropout", type=float, help="aviPAM dropout (default: AVIPAM's)")
    p.add_argument("--theta-dropout", type=float, help="aviPAM dropout on the document mixture (default: AVIPAM's)")
    p.add_argument("--hidden", type=int, help="aviPAM encoder width (default: AVIPAM's)")
    p.add_argument("--kl-warmup", type=int, help="aviPAM epochs of KL warm-up (default: AVIPAM's, 0 = none)")


def add_avipam_collapse(p):
    add_avipam_common(p)
    p.add_argument("--arch", default="4pam:2,50")


def add_avipam_map(p):
    add_avipam_common(p)
    p.add_argument("--data", default="../shared/data", help="shared collections' folder")
    p.add_argument("--indexes", default="indexes")
    p.add_argument("--collections", nargs="+", default=["med"])
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--mu", type=float, default=1000.0)
    p.add_argument("--lam", type=float, default=0.7)
    p.add_argument("--avipam-arch", nargs="+",
                   help="aviPAM architectures, one column each (default: 4pam:K/8,K), e.g. ctm:50")


def add_avipam_steps(p):
    p.add_argument("--docs", type=int, default=20_000, help="documents of the synthetic corpus")
    p.add_argument("--terms", type=int, default=200_000, help="its vocabulary (AP's)")
    p.add_argument("--mean-len", type=float, default=282.0, help="its mean document length (AP's)")
    p.add_argument("--index", help="train on the first DOCS documents of this index instead")
    p.add_argument("--target-docs", type=int, default=250_000, help="documents the figures are projected to")
    p.add_argument("--epochs", type=int, default=3, help="epochs trained (the first one is not timed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)


def add_avipam_prepare(p):
    p.add_argument("--newsgroups", default=DEFAULT_20NEWS, help="20news-bydate tarball")
    p.add_argument("--out", default="build/avipam_20news.npz")


def _prepare(**kwargs):
    from ..bench.avipam import prepare
    from ..core.tables import Table

    return [Table("", [], notes=[prepare(**kwargs)])]


QUICK_TREE = dict(values=[10], T=10, V=500, C=10, iters=1, burn=1)

BENCHES = [
    TableCommand("ql", "ranking speed and memory of exact QL (synthetic AP-scale collection, a shared one, Lucene); "
                 "the Lucene baselines against pyserini's batch search",
                 add_ql, _call("ql"), dict(docs=2000, terms=3000, mean_len=50.0, queries=10, shared="", baselines="")),
    TableCommand("lda", "LDA training throughput against tomotopy (20 Newsgroups), or an AP-scale synthetic run",
                 add_lda, _call("lda"), dict(k=[10], iters=5, docs=500)),
    TableCommand("pam", "PAM training speed of the exact and pruned samplers against tomotopy (20 Newsgroups)",
                 add_pam, _call("pam"), dict(sizes=[(4, 8)], iters=4, tomotopy_iters=1, every=40, prune_start=2)),
    TableCommand("tcm", "TCM seconds per Gibbs iteration (Zhao et al. Table 5; 20 Newsgroups)",
                 add_tcm, _call("tcm"), dict(subsets=[300], k=[10], threads=[1], iters=2, warm=1)),
    TableCommand("glda", "grouped LDA against LDA: seconds per Gibbs sweep (20 Newsgroups)",
                 add_glda, _call("glda"), dict(k=[10], iters=3, docs=300)),
    TableCommand("tree-lda", "tree-LDA samplers' seconds per sweep with T, V or C varied (20 Newsgroups, WordNet)",
                 add_tree_lda, _call("tree_lda"), QUICK_TREE),
    TableCommand("scale", "every model kind at AP scale: indexing, training, memory and ranking against the targets",
                 add_scale, _call("scale"), dict(kinds=["lda"], docs=300, fraction=1.0, sweeps=2, terms=3000,
                                                 work="build/bench-scale-quick")),
    TableCommand("full", "the user's path on the synthetic AP collection (index, default trainings, 100-query runs), "
                 "each command measured (wall, CPU, peak memory, disk writes) beside the scale projection; "
                 "rerun to resume",
                 add_full, _call("full"), dict(kinds=["lda"], docs=1000, terms=3000, runs=2,
                                               work="build/bench-full-quick")),
    TableCommand("peers", "LDA and PAM against tomotopy on an AP-size index (the one 'bench full' builds), as ratios",
                 add_peers, _call("peers"), dict(index="build/bench-full-quick/index", k=[8], iters=2, tomotopy_iters=2,
                                                 pam_sizes=[(4, 8)], pam_every=[1], pam_iters=2,
                                                 pam_tomotopy_iters=1)),
    TableCommand("foldin", "fold-in of new documents under a K = 800 LDA model (seconds, held-out likelihood)",
                 add_foldin, _call("foldin"), dict(train_docs=500, new_docs=50, terms=2000, mean_len=50.0, k=8,
                                                   iters=4)),
    TableCommand("files", "what checking a model file costs: the checks' share of loading it",
                 add_files, _call("files"), dict(repeats=1)),
    TableCommand("ray", "every kind trained on Ray workers against the local trainer (Gibbs kinds: the same model; "
                 "aviPAM on Ray Train: the same ELBO trace), and the cluster's cost model projected from the measured parts",
                 add_ray, _call("ray"), dict(docs=200, sizes="quick", iters=3, shards=2, workers=[1, 2])),
    TableCommand("ray-memory", "peak memory of the Ray driver and of capped workers as the collection grows 4x, "
                 "every kind's state on the workers, beside the local trainer (same model)",
                 add_ray_memory, _call("ray_memory"), dict(docs=300, terms=500, mean_len=30.0, scales=[1, 2], workers=2,
                                                           k=8, iters=2, work="build/bench-ray-memory-quick")),
]

AVIPAM = [
    TableCommand("collapse", "aviPAM component collapse with batch, l2 and no normalisation",
                 add_avipam_collapse, _call("avipam", "collapse"), dict(arch="4pam:2,10", epochs=2)),
    TableCommand("map", "MAP of QL mixed with LDA, 4-PAM and aviPAM on shared collections",
                 add_avipam_map, _call("avipam", "map_table"), dict(k=8, gibbs_iters=3, epochs=2)),
    TableCommand("steps", "where aviPAM's training time goes at its defaults, projected to AP's size",
                 add_avipam_steps, _call("avipam_steps"), dict(docs=300, terms=2000, mean_len=50.0, epochs=2,
                                                               target_docs=1000)),
    TableCommand("prepare", "write the aviPAM 20 Newsgroups corpus into one .npz (for a machine without the data)",
                 add_avipam_prepare, _prepare),
]


def bench_areas() -> list[str]:
    return sorted([b.name for b in BENCHES] + ["avipam"])


def _fill(s) -> None:
    areas = s.add_subparsers(dest="area", required=True, metavar="AREA")
    add_table_commands(areas, BENCHES)
    a = areas.add_parser("avipam", help="aviPAM: component collapse, MAP as a document model, training profile; corpus file",
                         description="aviPAM benchmarks (the paper's tables: topicir reproduce avipam-tables).")
    add_table_commands(a.add_subparsers(dest="what", required=True, metavar="WHAT"), AVIPAM)


BENCH = Command("bench", "benchmarks: ranking speed (ql), each model kind's training speed, AP scale (scale), "
                "the user's path measured at that scale (full), fold-in", _fill)
