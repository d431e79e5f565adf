"""Benchmark: the Ray driver off the data path, in memory. LDA trains with its chain state on
the workers (``RayExecutor(state="workers")``) on a memory-mapped synthetic collection at 1x,
2x and 4x its size, every worker capped; the driver's and each worker's peak resident memory
are set beside the local trainer's on the same collection. The command starts one local Ray
cluster, which the driver of each size joins (each driver's workers are processes of their
own).

    topicir bench ray-memory                      # 4 workers, sizes 1x 2x 4x
    topicir bench ray-memory --scales 1 4 --cap-mib 1024

Every figure is a process's ``VmHWM`` (its resident set at its largest: the pages it wrote,
the file and shared pages it touched). Each training runs in a child process of its own, so
the driver's figure is that process's whole life (imports, Ray's client, the fit, the model
file written and loaded back); its figure before the fit (imports and Ray up) is shown beside
it. The workers' are read from each worker when the last sweep ends. The cap is
``RayExecutor(worker_memory=...)``: a worker past it exits and the fit fails. The collection
is written once per size into ``--work`` as .npy files and opened memory mapped, as an index's
corpus is. "same model": the Ray model file's arrays and log-likelihoods equal the local
trainer's.
"""
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ..core.tables import Table, fixed

log = logging.getLogger(__name__)

MIB = 2**20


def _params(a):
    return dict(n_topics=a["k"], n_chains=1, n_iter=a["iters"], burn_in=a["iters"] - 1, sample_every=1,
                n_shards=a["workers"], seed=a["seed"], log_lik_every=1)


def _load_corpus(folder: Path):
    from models.common.corpus import make_corpus

    meta = json.loads((folder / "meta.json").read_text())
    return make_corpus(np.load(folder / "doc_ptr.npy", mmap_mode="r"), np.load(folder / "term_ids.npy", mmap_mode="r"),
                       n_terms=meta["n_terms"], fingerprint=meta["fingerprint"])


def _make(a):
    """Write the synthetic collection of ``a`` into ``a["folder"]`` (kept when it is there)."""
    from models.common.corpus import synthetic_corpus

    folder = Path(a["folder"])
    want = dict(docs=a["docs"], terms=a["terms"], mean_len=a["mean_len"], seed=a["seed"])
    meta_path = folder / "meta.json"
    if meta_path.is_file() and json.loads(meta_path.read_text()).get("made") == want:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    c = synthetic_corpus(a["docs"], a["terms"], a["mean_len"], seed=a["seed"])
    np.save(folder / "doc_ptr.npy", c.doc_ptr)
    np.save(folder / "term_ids.npy", c.term_ids)
    meta = dict(made=want, n_terms=c.n_terms, fingerprint=f"synthetic:{a['docs']}:{a['terms']}:{a['seed']}")
    meta_path.write_text(json.dumps(meta))
    return {}


def _ray(a):
    """Train on Ray with the state on the workers: the driver's and the workers' peaks."""
    from models.common.executors import WorkerLostError, peak_memory
    from models.common.executors.ray import RayExecutor
    from models.common.executors.signals import init_ray, shutdown_ray
    from models.lda.model import LDA

    corpus = _load_corpus(Path(a["folder"]))
    init_ray(address=a["address"], log_to_driver=False)
    start = peak_memory()
    ex = RayExecutor(n_workers=a["workers"], state="workers", worker_memory=a["cap_mib"] * MIB)
    out = dict(driver_start=start, tokens=corpus.n_tokens, docs=corpus.n_docs)

    def last(model, it, n_iter):
        if it == n_iter:
            out["workers"] = ex.worker_peaks()

    t0 = time.perf_counter()
    try:
        model = LDA(executor=ex, **_params(a)).fit(corpus, callback=last)
        model.save(a["model"])
    except WorkerLostError as e:
        out["error"] = str(e)
    out["seconds"] = time.perf_counter() - t0
    shutdown_ray()
    out["driver"] = peak_memory()
    return out


def _local(a):
    """Train with the local trainer: its peak."""
    from models.common.executors import peak_memory
    from models.lda.model import LDA

    corpus = _load_corpus(Path(a["folder"]))
    t0 = time.perf_counter()
    LDA(n_jobs=a["threads"], **_params(a)).fit(corpus).save(a["model"])
    return dict(seconds=time.perf_counter() - t0, local=peak_memory())


ROLES = dict(make=_make, ray=_ray, local=_local)


def child(spec: str) -> None:
    """A child process's work (``spec``: JSON of the role and the settings); its result is
    written as JSON to the path ``result``."""
    a = json.loads(spec)
    out = ROLES[a["role"]](a)
    Path(a["result"]).write_text(json.dumps(out))


def _in_child(role: str, a: dict) -> dict:
    result = Path(a["folder"]) / f"{role}.json"
    result.unlink(missing_ok=True)
    spec = json.dumps(dict(a, role=role, result=str(result)))
    code = "import sys; from retrieval.bench.ray_memory import child; child(sys.argv[1])"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                                   os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", code, spec], env=env, capture_output=True, text=True)
    if proc.returncode != 0 or not result.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"bench ray-memory: the {role} child failed ({proc.returncode}): {tail[0]}")
    return json.loads(result.read_text())


def same_model(path_a, path_b) -> bool:
    """Whether two LDA model files hold the same arrays and log-likelihood trace."""
    from models.common import checkpoint as ckpt

    a, b = ckpt.read_model_file(path_a), ckpt.read_model_file(path_b)
    if a.header.get("log_lik") != b.header.get("log_lik") or sorted(a.arrays) != sorted(b.arrays):
        return False
    return all(np.array_equal(a.arrays[n], b.arrays[n]) for n in a.arrays)


def _mib(nbytes) -> str:
    return fixed(nbytes / MIB, 0)


def run(*, docs: int = 50_000, terms: int = 20_000, mean_len: float = 100.0, scales=(1, 2, 4), workers: int = 4,
        cap_mib: int = 700, k: int = 50, iters: int = 3, threads: int = 2, seed: int = 0,
        work: str = "build/bench-ray-memory") -> list[Table]:
    """LDA on ``workers`` Ray workers capped at ``cap_mib`` MiB each, with the chain state on
    them, on ``docs`` x scale synthetic documents (``terms``, ``mean_len``) for each of
    ``scales``; ``iters`` sweeps, ``k`` topics, one chain, a shard per worker; beside the local
    trainer (``threads`` threads) on the same collection."""
    if iters < 1 or workers < 1 or cap_mib < 1 or not scales:
        raise ValueError("--iters, --workers and --cap-mib must be >= 1, and --scales not empty")
    import ray

    from models.common.executors.signals import init_ray, shutdown_ray

    # one local cluster for every size, which each driver joins: its workers are its own processes
    for _ in range(3):
        try:
            init_ray(num_cpus=workers, log_to_driver=False, include_dashboard=False)
            break
        except Exception as e:  # Ray's start-up timeout on a busy machine: start it again
            log.warning("bench ray-memory: Ray did not start (%s); trying again", e)
            shutdown_ray()
    else:
        raise ConnectionError("bench ray-memory: Ray did not start in 3 attempts (a busy machine: run it again)")
    try:
        return _run(dict(docs=docs, terms=terms, mean_len=mean_len, seed=seed, k=k, iters=iters, workers=workers,
                         threads=threads, cap_mib=cap_mib, address=ray.get_runtime_context().gcs_address),
                    scales, Path(work))
    finally:
        shutdown_ray()


def _run(base: dict, scales, work: Path) -> list[Table]:
    docs, terms, mean_len, seed, k, iters, workers, threads, cap_mib = (
        base[n] for n in ("docs", "terms", "mean_len", "seed", "k", "iters", "workers", "threads", "cap_mib"))
    rows = []
    for scale in scales:
        folder = work / f"x{scale}"
        a = dict(base, folder=str(folder), docs=docs * scale)
        log.info("bench ray-memory: %dx (%d docs)", scale, docs * scale)
        _in_child("make", a)
        r = _in_child("ray", dict(a, model=str(folder / "ray.npz")))
        loc = _in_child("local", dict(a, model=str(folder / "local.npz")))
        peaks = r.get("workers", [])
        rows.append({"size": f"{scale}x", "docs": r["docs"], "M tokens": fixed(r["tokens"] / 1e6, 2),
                     "driver MiB": _mib(r["driver"]), "driver before fit": _mib(r["driver_start"]),
                     "workers MiB": " ".join(_mib(p) for p in peaks) or "-",
                     "cap MiB": cap_mib, "local MiB": _mib(loc["local"]),
                     "local/cap": fixed(loc["local"] / (cap_mib * MIB), 2),
                     "ray s": fixed(r["seconds"], 0), "local s": fixed(loc["seconds"], 0),
                     "same model": "failed: " + r["error"] if "error" in r
                     else str(same_model(folder / "ray.npz", folder / "local.npz"))})
    return [Table("The Ray driver off the data path: peak resident memory as the collection grows", rows,
                  notes=[f"synthetic collection: {docs} documents x size, {terms} terms, mean length {mean_len:g}, "
                         f"seed {seed}, memory mapped; LDA K={k}, {iters} sweeps, 1 chain, n_shards={workers}; "
                         f"RayExecutor(n_workers={workers}, state='workers', worker_memory={cap_mib} MiB); "
                         f"local trainer n_jobs={threads}",
                         "MiB: VmHWM of the process (peak resident set); driver: the whole child process, "
                         "'driver before fit' after its imports and Ray's start; workers: each worker at the "
                         "end of the last sweep; a worker past the cap exits and fails the fit"])]
