"""Benchmark: every model kind at AP scale, on a synthetic collection in AP's own layout.

    topicir bench scale                                # 250,000 documents, every kind, 5% trained
    topicir bench scale --kinds lda pam --fraction 0.02

Steps, each measured in its own child process so that its peak memory (``ru_maxrss`` of that
process, the JVM included, since Anserini runs inside it) is its own:

1. ``--docs`` documents of :mod:`retrieval.datasets.ap_synth` (gzip'd TREC SGML, 1,000 a file,
   WordNet words, Zipfian, latent topics) are generated into ``--work`` (kept: a rerun reuses
   them, and the index below when it is already there, unless ``--reindex``).
2. ``topicir index`` of all of them: wall time and peak memory. Then 100 generated title
   queries of 2-4 words ranked over the whole index with exact QL (``retrieval.run_topics``).
3. A ``--fraction`` of the files is indexed apart, and every kind of ``--kinds`` is trained on
   it at its default settings (``registry.model_class(kind)()``, training inputs through
   :mod:`retrieval.core.modelfiles` as ``topicir train`` gets them) for ``--sweeps`` sweeps (or
   epochs), with samples kept from the first sweep on so the model has as many samples per chain
   as a default one keeps (at most 5), and the 100 queries are ranked with it. Numba's kernels
   are compiled (or loaded from its cache) by a throw-away run first.

A second fraction of half as many files is trained too, and every figure is extrapolated
through the two runs (:func:`fit_two`): setup (training inputs, initialisation and the first
sweep), seconds per sweep, finishing and the memory above the child's baseline (after imports,
JIT and the JVM) as a part proportional to the tokens plus one proportional to the vocabulary
(count tables are vocabulary-sized). An epoch of mini-batches is projected by its parts instead
(:func:`epoch_by_parts`): its steps' vocabulary-sized parts (Adam's step and the first layers'
dense gradients, timed apart) grow with the steps times the vocabulary, its closed-form topics
with the vocabulary, the rest with the tokens; its first epoch is an epoch plus a part fitted as
above. The ranking time with a model is that of exact QL on the
whole collection plus what the model adds on the fraction: its parts that grow with the
documents (P_TM tables, finding extra query parts, the mixture's scoring; timed apart) as a cost per
document plus a fixed one through both runs, the rest as measured. For the Gibbs kinds the
smaller fraction is also trained for ``--sweeps`` sweeps, so that the batch's fit compares models
at the same sweep. The mixture's scoring, the same work whatever the model,
is timed on the whole collection instead. The target
collection is the whole one, grown linearly in
documents to AP's 250,000 when ``--docs`` is smaller, its vocabulary by Heaps' law. Indexing
and exact QL are measured on the whole collection. A last table splits every kind's projected
training (setup, sweeps, finishing) and batch (exact QL, P_TM tables, extra parts, the
mixture's scoring, the rest per query) into those parts.
"""
from __future__ import annotations

import json
import logging
import math
import subprocess
import sys
import time
from pathlib import Path

from models.common.atomic import atomic_open

from ..core.scoring import LAM
from ..core.tables import Table, fixed
from .scale_fit import projection, target_size
from .scale_batch import BATCH_REPEATS, maxrss_gib, time_batch
from .scale_profile import profile_table

log = logging.getLogger(__name__)

KINDS = ("lda", "pam", "tcm", "glda", "tree-lda", "avipam")
# Targets on 2 cores at the defaults
TRAIN_TARGET_MIN = {"lda": 30, "pam": 120, "tcm": 120, "glda": 120, "tree-lda": 120, "avipam": 60}
MEMORY_TARGET_GIB = 12.0
BATCH_TARGET_S = 2.0
INDEX_TARGET_MIN = 10.0
N_QUERIES = 100
AP_DOCS = 250_000  # the targets are for AP88-90's size; a smaller --docs is extrapolated to it
KEPT_PER_CHAIN = 5  # samples a default Gibbs model keeps per chain (100 sweeps: every 10th of 51..100)


# -- child processes ---------------------------------------------------------------------------

def _child(task: str, args: dict, log_path: Path, timeout: float | None = None) -> dict:
    """Run ``task`` in a fresh interpreter (:func:`child_main`) and return the JSON it writes;
    its output (progress, logging) goes to ``log_path``."""
    out = log_path.with_suffix(".json")
    out.unlink(missing_ok=True)
    cmd = child_command(task, args, out)
    with open(log_path, "w") as err:
        proc = subprocess.run(cmd, stdout=err, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0 or not out.exists():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"bench scale: the {task} step failed (exit {proc.returncode}); the end of "
                           f"{log_path}:\n" + "\n".join(tail))
    return json.loads(out.read_text())


def task_index(files: list[str], out: str, threads: int, queries: list[str]) -> dict:
    """Build the index (timed; this process's peak memory is the build's), then time the batch
    of exact QL queries over it."""
    from ..core.index import build_index

    start = time.perf_counter()
    index = build_index(files, out, threads=threads, force=True)
    secs = time.perf_counter() - start
    peak = maxrss_gib()
    s = index.stats
    result = dict(index_s=secs, index_peak_gib=peak, n_docs=s.n_docs, n_tokens=int(s.n_tokens),
                  n_terms=s.n_terms)
    result.update(time_batch(index, queries, None))
    return result


def task_ql(index: str, queries: list[str]) -> dict:
    from ..core.index import Index

    index = Index(index)
    s = index.stats
    return dict(n_docs=s.n_docs, n_tokens=int(s.n_tokens), n_terms=s.n_terms, **time_batch(index, queries, None))


def task_model_batch(index: str, model: str, queries: list[str]) -> dict:
    """Time the batch with a model file, loaded as ``topicir run --model`` loads it."""
    from ..core.index import Index
    from ..core.modelfiles import load_model

    index = Index(index)
    return time_batch(index, queries, load_model(model, index))


def _schedule_params(kind: str, sweeps: int, threads: int, epochs: int | None = None) -> dict:
    """The defaults, cut to ``sweeps`` sweeps (``epochs`` epochs, default ``sweeps``) that keep
    the last samples."""
    from models.registry import model_class

    params = model_class(kind)().get_params()
    if "epochs" in params:
        return dict(epochs=epochs or sweeps, n_jobs=threads)
    return dict(n_iter=sweeps, burn_in=max(0, sweeps - KEPT_PER_CHAIN), sample_every=1, n_jobs=threads)


def task_warm(index: str, kinds: list[str], threads: int) -> dict:
    """Compile every kernel the timed runs use (numba caches them on disk) at quick settings."""
    from models.registry import model_class

    from ..core.index import Index
    from ..core.modelfiles import index_corpus, training_inputs

    index = Index(index)
    corpus = index_corpus(index)
    for kind in kinds:
        cls = model_class(kind)
        quick = dict(cls.quick_params)
        quick.update(dict(epochs=1) if "epochs" in quick else dict(n_iter=2, burn_in=0, sample_every=1))
        model = cls(**quick, n_jobs=threads)
        model.fit(corpus, **training_inputs(index, model, progress=False))
        time_batch(index, ["warm up"], model)
    return {}


def task_kind(index: str, kind: str, sweeps: int, threads: int, queries: list[str], epochs: int | None = None) -> dict:
    """Train ``kind`` at its defaults for ``sweeps`` sweeps on ``index`` with timings per sweep,
    then rank the queries with it."""
    from models.registry import model_class

    from ..core.index import Index
    from ..core.modelfiles import index_corpus, training_inputs
    from ..core.quick import quick_train_params

    cls = model_class(kind)  # imports torch for aviPAM: part of the baseline
    index = Index(index)
    index.analyze("warm")  # the JVM belongs to the baseline too
    base = maxrss_gib()
    # under TOPICIR_QUICK=1 the kind's quick settings, as ``topicir train`` takes them
    defaults = quick_train_params(kind, cls().get_params())
    model = cls(**{**defaults, **_schedule_params(kind, sweeps, threads, epochs)})
    ticks = []
    start = time.perf_counter()
    corpus = index_corpus(index)
    inputs = training_inputs(index, model, progress=False)
    inputs_s = time.perf_counter() - start
    # an epoch of mini-batches: its vocabulary-sized parts timed apart (bench.scale_fit.epoch_by_parts)
    clock = None
    if "epochs" in defaults:
        from .avipam_steps import time_parts

        clock = time_parts(model, model.device)

    def callback(m, it, n):
        ticks.append(time.perf_counter())
        if clock is not None:
            clock.epoch_done(it, n)

    fit_start = time.perf_counter()
    model.fit(corpus, callback=callback, **inputs)
    end = time.perf_counter()
    steps = [b - a for a, b in zip([fit_start] + ticks[:-1], ticks)]
    train_peak = maxrss_gib()
    retained = _array_gib(model)
    result = dict(kind=kind, n_tokens=int(corpus.n_tokens), n_docs=int(corpus.n_docs), n_terms=int(corpus.n_terms),
                  base_gib=base, train_peak_gib=train_peak, retained_gib=retained, inputs_s=inputs_s, steps=steps,
                  finish_s=end - ticks[-1], defaults={k: v for k, v in defaults.items() if _plain(v)},
                  n_samples=int(getattr(model, "n_samples_", 1)))
    if clock is not None and clock.steps:
        result.update(vocab_step_s=clock.per_step("dense gradients", "Adam step"), mstep_s=clock.mstep_s)
    result.update(time_batch(index, queries, model))
    return result


def _array_gib(model) -> float:
    """GiB of the numpy arrays a fitted model holds (its attributes, and the arrays in its lists,
    tuples and dicts): the state whose size follows the collection exactly."""
    import numpy as np

    total = 0
    for value in vars(model).values():
        items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        total += sum(x.nbytes for x in items if isinstance(x, np.ndarray))
    return total / 2**30


def _plain(value) -> bool:
    return value is None or isinstance(value, (int, float, str, bool))


# -- the benchmark -----------------------------------------------------------------------------

def _steps_text(steps: list[float]) -> str:
    text = [f"{s:.1f}" for s in steps]
    return " ".join(text if len(text) <= 9 else text[:6] + ["..."] + text[-3:])


def _met(value: float, target: float) -> str:
    return "met" if value <= target else "missed"


def run(*, kinds=KINDS, docs: int = 250_000, fraction: float = 0.05, sweeps: int = 6, small_sweeps: int = 20,
        terms: int = 200_000,
        threads: int = 2, seed: int = 0, work: str = "build/bench-scale", reindex: bool = False,
        wordnet: str | None = None) -> list[Table]:
    """Generate ``docs`` AP-layout documents, time their indexing and exact QL, train every kind
    of ``kinds`` on ``fraction`` of them and project its training, memory and ranking to the
    whole collection (module docstring)."""
    from models.registry import kinds as registered

    from ..datasets.ap_synth import DOCS_PER_FILE, Generator, generate

    unknown = [k for k in kinds if k not in registered()]
    if unknown:
        raise ValueError(f"unknown model kind(s) {', '.join(map(repr, unknown))}; choose from {', '.join(registered())}")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    if sweeps < 2:
        raise ValueError(f"sweeps must be >= 2 (the first one is setup), got {sweeps!r}")
    work = Path(work)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    files = [str(p) for p in generate(work / "ap", docs, n_terms=terms, seed=seed, wordnet=wordnet)]
    gen_s = time.perf_counter() - start
    gen = Generator(terms, seed, wordnet=wordnet)
    queries = gen.queries(N_QUERIES, seed=seed)
    n_frac_files = max(1, math.ceil(fraction * docs / DOCS_PER_FILE))
    full_ix, frac_ix = work / f"index-{docs}", work / f"index-{docs}-f{n_frac_files}"

    def cached_index(path, file_list, what):
        record = path.with_name(path.name + ".measured.json")
        if not reindex and (path / "topicir.json").exists() and record.exists():
            log.info("reusing %s and its measured build (--reindex to build it again)", path)
            measured = json.loads(record.read_text())
            measured.update(_child("ql", dict(index=str(path), queries=queries), logs / f"ql-{what}.log"))
            return measured, True
        log.info("indexing %d files into %s", len(file_list), path)
        measured = _child("index", dict(files=file_list, out=str(path), threads=threads, queries=queries),
                          logs / f"index-{what}.log")
        record.write_text(json.dumps({k: measured[k] for k in ("index_s", "index_peak_gib")}) + "\n")
        return measured, False

    full, full_cached = cached_index(full_ix, files, "full")
    if n_frac_files >= len(files):  # the fraction is the whole collection
        frac_ix, frac = full_ix, full
    else:
        frac, _ = cached_index(frac_ix, files[:n_frac_files], "fraction")
    # a second, smaller fraction separates what grows with the tokens from what does not
    n_small_files = n_frac_files // 2
    small_ix = work / f"index-{docs}-f{n_small_files}"
    small = cached_index(small_ix, files[:n_small_files], "small")[0] if n_small_files else None
    # to AP's size: linear in documents for the whole collection
    grow = max(1.0, AP_DOCS / full["n_docs"])
    target = target_size(full, frac, grow, terms)
    log.info("compiling the kernels (not timed)")
    _child("warm", dict(index=str(frac_ix), kinds=list(kinds), threads=threads), logs / "warm.log")
    per_kind, per_kind_small, per_kind_early = {}, {}, {}
    for kind in kinds:
        log.info("training %s on %s", kind, frac_ix)
        per_kind[kind] = _child("kind", dict(index=str(frac_ix), kind=kind, sweeps=sweeps, threads=threads,
                                             queries=queries), logs / f"kind-{kind}.log")
        if small is not None:
            log.info("training %s on %s", kind, small_ix)
            # longer: how sweeps speed up as the chains settle (an epoch costs the same throughout)
            per_kind_small[kind] = _child("kind", dict(index=str(small_ix), kind=kind,
                                                       sweeps=max(sweeps, small_sweeps), epochs=sweeps,
                                                       threads=threads, queries=queries),
                                          logs / f"kind-{kind}-small.log")
            if "epochs" not in per_kind[kind]["defaults"] and small_sweeps > sweeps:
                # the small collection at the fraction's sweeps: its batch pairs with the
                # fraction's (the same point of the chains)
                log.info("training %s on %s for %d sweeps", kind, small_ix, sweeps)
                per_kind_early[kind] = _child("kind", dict(index=str(small_ix), kind=kind, sweeps=sweeps,
                                                           threads=threads, queries=queries),
                                              logs / f"kind-{kind}-early.log")
    return _tables(kinds, full, frac, small, per_kind, per_kind_small, per_kind_early, target, dict(
        docs=docs, fraction=fraction, n_frac_files=n_frac_files, n_small_files=n_small_files, sweeps=sweeps,
        small_sweeps=small_sweeps,
        threads=threads, gen_s=gen_s, full_cached=full_cached, vocab=gen.vocab, grow=grow))


def _tables(kinds, full, frac, small, per_kind, per_kind_small, per_kind_early, target, info) -> list[Table]:
    proj = {k: projection(per_kind[k], per_kind_small.get(k), target, per_kind_early.get(k)) for k in kinds}
    rows = []

    def row(what, value, unit, target, digits=1):
        rows.append({"measure": what, "figure": f"{value:.{digits}f} {unit}", "target": f"<= {target:g} {unit}",
                     "": _met(value, target)})

    grow = info["grow"]
    mark = "**" if grow > 1 else ""
    row(f"indexing {round(full['n_docs'] * grow):,} documents (wall){mark}", full["index_s"] * grow / 60, "min",
        INDEX_TARGET_MIN)
    row(f"indexing: peak memory (JVM included){mark}", full["index_peak_gib"], "GiB", MEMORY_TARGET_GIB, 2)
    row(f"{N_QUERIES}-query batch, exact QL{mark}", full["batch_s"] * grow, "s", BATCH_TARGET_S, 2)
    for k in kinds:
        p = proj[k]
        sched = f"{p['chains']} chains x {p['sweeps']} sweeps" if p["chains"] > 1 or "n_iter" in per_kind[k]["defaults"] \
            else f"{p['sweeps']} epochs"
        row(f"{k}: default training ({sched})*", p["train_min"], "min", TRAIN_TARGET_MIN[k])
        row(f"{k}: peak memory*", p["peak_gib"], "GiB", MEMORY_TARGET_GIB, 2)
        row(f"{k}: {N_QUERIES}-query batch with the model*", p["batch_s"], "s", BATCH_TARGET_S, 2)
    details = []
    for k in kinds:
        r, p = per_kind[k], proj[k]
        unit = "epoch" if "epochs" in r["defaults"] else "sweep (1 chain)"
        details.append({"kind": k, "setup s*": fixed(p["setup_s"], 1), "s per sweep/epoch of 1 chain*": fixed(p["per_chain_s"], 2),
                        "late sweeps*": fixed(p["late_chain_s"], 2),
                        "unit": unit, "samples kept": r["n_samples"],
                        "measured: tokens": f"{r['n_tokens']:,}", "measured: s per step": _steps_text(r["steps"]),
                        "measured: vocabulary ms per step": fixed(1000 * r["vocab_step_s"], 1) if "vocab_step_s" in r else "",
                        "measured: peak GiB": fixed(r["peak_gib"], 2), "baseline GiB": fixed(r["base_gib"], 2),
                        "measured: arrays GiB": fixed(r["retained_gib"], 3),
                        "measured: batch s": fixed(r["batch_s"], 2),
                        "measured: QL batch s": fixed(r["ql_batch_s"], 2),
                        "measured: of which P_TM tables s": fixed(r.get("tables_s", 0.0), 2),
                        "measured: of which extra parts s": fixed(r.get("extras_s", 0.0), 2),
                        "measured: of which mixture scoring s": fixed(r.get("scoring_s", 0.0), 2),
                        "measured: first 2 queries s": fixed(r["first_s"], 2)})
        if k in per_kind_small:
            q = per_kind_small[k]
            details[-1].update({"small: tokens": f"{q['n_tokens']:,}",
                                "small: s per step": _steps_text(q["steps"]),
                                "small: peak GiB": fixed(q["peak_gib"], 2), "small: arrays GiB": fixed(q["retained_gib"], 3),
                                "small: batch s": fixed(q["batch_s"], 2),
                                "small: P_TM tables s": fixed(q.get("tables_s", 0.0), 3)})
            if k in per_kind_early:
                details[-1]["small, early sweeps: P_TM tables s"] = fixed(per_kind_early[k].get("tables_s", 0.0), 3)
    vocab = info["vocab"]
    whole = all(proj[k]["own_sweeps"] for k in kinds)  # every fraction trained its whole schedule
    notes = [
        f"Collection: {full['n_docs']:,} synthetic AP-layout documents (retrieval.datasets.ap_synth), "
        f"{full['n_tokens'] / 1e6:.1f} M tokens and {full['n_terms']:,} terms after analysis; content words: "
        f"{vocab.n_wordnet:,} WordNet lemmas ({vocab.source}) and {len(vocab.words) - vocab.n_wordnet:,} other words; "
        f"generated or reused in {info['gen_s']:.0f} s. Threads: {info['threads']} (indexing and training).",
        f"* Trained on a fraction: the first {info['n_frac_files']} files ({frac['n_docs']:,} documents, "
        f"{frac['n_tokens'] / 1e6:.2f} M tokens, {frac['n_terms']:,} terms; asked: --fraction {info['fraction']:g}), "
        f"{info['sweeps']} sweeps (epochs) at the kind's defaults otherwise, samples kept from sweep "
        f"{max(1, info['sweeps'] - KEPT_PER_CHAIN + 1)} on. "
        + (f"Each kind also trained on the first {info['n_small_files']} files ({small['n_docs']:,} documents, "
           f"{small['n_tokens'] / 1e6:.2f} M tokens, {small['n_terms']:,} terms; the 'small' columns) for "
           f"{max(info['sweeps'], info['small_sweeps'])} sweeps ({info['sweeps']} epochs), and every "
           f"figure extrapolated through both runs (bench.scale_fit.fit_two): setup (training inputs + "
           f"initialisation + first sweep), seconds per sweep (median of the later ones), finishing and the "
           f"memory above the process's baseline as a part proportional to the tokens plus one proportional "
           f"to the vocabulary (for an epoch of mini-batches, to the vocabulary times the steps: every step "
           f"updates the vocabulary-sized encoder layers), except an epoch's seconds: its steps' vocabulary-sized "
           f"parts (Adam's step, the first layers' dense gradients; timed apart, 'vocabulary ms per step') grow "
           f"with the steps times the vocabulary, its closed-form topics with the vocabulary and the rest with "
           f"the tokens, measured on the fraction (bench.scale_fit.epoch_by_parts; setup: an epoch plus the "
           f"first epoch's excess, fitted through both runs); memory is the larger of that and the model's own arrays fitted the same "
           f"way plus the rest of the peak as a fixed part and a vocabulary part (bench.scale_fit.memory_by_parts, "
           f"'arrays GiB' columns). "
           + ("The fraction trained every sweep of each kind's default schedule: the training is its own "
              "sweeps, each scaled as their median is (bench.scale_fit.own_curve; 'late sweeps': the "
              "median of the last five), samplers getting faster as the chains settle. " if whole else
              f"The sweeps after the first few follow the small run's curve (a running "
              f"median over five sweeps relative to its sweeps 2-{info['sweeps']}, at most 1, its last point held to the "
              f"last sweep; bench.scale_fit.sweep_curve): samplers get faster as the chains settle ('late "
              f"sweeps'). ")
           + f"The Gibbs kinds are trained on the small fraction for {info['sweeps']} sweeps too "
           f"('early sweeps'): the batch's parts are fitted through the two runs at the same sweep (a "
           f"small collection's chains settle sooner), so the batch is that of a model at sweep "
           f"{info['sweeps']} (bench.scale_fit.batch_added). "
           f"Target collection: "
           if small is not None else
           "Extrapolated linearly in tokens from this one run: setup, seconds per sweep, finishing, the memory "
           "above the process's baseline (an upper bound for vocabulary-sized arrays). Target collection: ")
        + f"{target['docs']:,.0f} documents, {target['tokens'] / 1e6:.1f} M tokens, {target['terms']:,.0f} terms "
        "(Heaps' law through the fraction and the whole index). The default training is setup + the "
        "remaining sweeps of all chains + finishing. The batch with a model (its ranking scores every "
        "document) is the exact QL batch of the whole collection plus what the model added on the "
        "fraction (its batch minus the QL batch, timed in turn in the same process): the parts that "
        + ("grow with the documents as a cost per document plus a fixed one, fitted through the fraction "
           "and the small run" if small is not None else "grow with the documents linear in documents")
        + ", the rest (per query) as measured (bench.scale_fit.batch_added). Indexing and exact QL are measured on the "
        "whole collection" + (" (the index and its build measurement reused from an earlier run: "
                                "--reindex to measure again)." if info["full_cached"] else "."),
        "Each step ran in its own process; peak memory is its ru_maxrss (JVM included). Queries: "
        f"{N_QUERIES} generated title queries of 2-4 words (each from one latent topic's top words, half of them "
        "starting with one of the topic's set phrases), "
        f"ranked to depth 1000 over every document (retrieval.run_topics; lam {LAM:g} with a model), the "
        f"fastest of {BATCH_REPEATS} batches, timed after two queries that load the kernels and compute the model's per-document constants "
        "(their seconds, a once-per-process cost, are in the second table, not extrapolated). The parts "
        "of a model's batch that grow with the documents, each timed apart after the batch as the batch "
        f"computes them (the fastest of {BATCH_REPEATS}): 'P_TM tables', the model's P_TM of the query terms "
        "for every document, and of the parts a kind adds to a query (TCM's multi-word collocations), one "
        "model call per group of queries whose tables fit their memory (retrieval.core.ranking.batch_tables); "
        "'extra parts', finding and scoring those parts (TCM: segmenting the query, the collocations' exact "
        "occurrences, their term of the score), "
        "timed for the queries that have one"
        + "".join(f" ({k}: {r['extra_queries']} queries)" for k, r in per_kind.items() if r.get("extra_queries"))
        + "; 'mixture scoring', every document's score of the query terms under the mixture. "
        "The rest is per query: analysis (a TCM query's segmentation included), ranking and run lines."
        + (f" The mixture's scoring is also timed on the whole collection, with P_TM tables of one value (the "
           f"same work whatever the model): {full['scoring_s']:.2f} s, scaled to the target collection, it "
           f"replaces the fitted figure of every kind."
           if "scoring_s" in full else ""),
        f"QL batch on the fraction index: {frac['batch_s']:.2f} s"
        + (f", on the small one: {small['batch_s']:.2f} s." if small is not None else "."),
    ]
    if grow > 1:
        notes.insert(2, f"** Measured on {full['n_docs']:,} documents ({full['index_s'] / 60:.1f} min, "
                        f"{full['batch_s']:.2f} s for the QL batch) and extrapolated linearly to "
                        f"{AP_DOCS:,} (x{grow:.2f}); peak memory as measured (Lucene's buffers are "
                        f"bounded; the statistics read back grow with the tokens). The * figures are "
                        f"extrapolated to {AP_DOCS:,} documents too.")
    return [Table("AP scale: every target (2 cores, default settings)", rows, notes=notes),
            Table("Per kind: measured on the fraction, and extrapolated (*)", details, digits=2),
            profile_table(kinds, proj)]


# -- what the child processes run -------------------------------------------------------------

TASKS = {"index": task_index, "ql": task_ql, "warm": task_warm, "kind": task_kind, "model": task_model_batch}
_CHILD = "import sys; from retrieval.bench.scale import child_main; child_main(sys.argv[1:])"


def child_command(task: str, args: dict, out: Path) -> list[str]:
    """The command that runs ``task`` with ``args`` in a fresh interpreter, its result written
    as JSON to ``out``."""
    return [sys.executable, "-c", _CHILD, task, json.dumps(args), str(out)]


def child_main(argv: list[str]) -> None:
    """``TASK ARGS_JSON OUT``: run one task and write its result to OUT (atomically)."""
    task, args, out = argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    result = TASKS[task](**json.loads(args))
    with atomic_open(out, "w") as f:
        json.dump(result, f)
