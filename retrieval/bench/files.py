"""What checking a model file costs: the share of loading it spent in the checks that run
before any kernel reads it (shapes, bounds, totals across arrays, priors, the index's
documents), for every model file of an index, and the memory a load holds at its peak (a
model file's count tables are memory-mapped and checked a chunk at a time, see
:mod:`models.common.checkpoint`)."""
from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path
from unittest import mock

import models.common.validate_files as validate_files

from ..core.index import Index
from ..core.modelfiles import load_model
from ..core.tables import Table, fixed

log = logging.getLogger(__name__)


def _peak_growth(step):
    """``step()`` and how many bytes the process's peak resident set grew by during it (mapped
    pages of files included), or None where the peak cannot be reset (Linux's
    ``/proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak becomes the current resident set
    except OSError:
        return step(), None

    def peak():
        with open("/proc/self/status") as f:
            return int(next(line for line in f if line.startswith("VmHWM")).split()[1]) << 10
    base = peak()
    result = step()
    return result, peak() - base


def _timed_load(path: Path, index: Index) -> tuple[float, float]:
    """Seconds of one ``load_model`` and of the checks within it."""
    spent = 0.0
    run_checks = validate_files.run_checks

    def timed(checks, ctx):
        nonlocal spent
        start = time.perf_counter()
        try:
            return run_checks(checks, ctx)
        finally:
            spent += time.perf_counter() - start
    with mock.patch.object(validate_files, "run_checks", timed):
        start = time.perf_counter()
        load_model(path, index)
        total = time.perf_counter() - start
    return total, spent


def run(*, index: str = "indexes/aila2019", models: list[str] | None = None, repeats: int = 5) -> list[Table]:
    """Median seconds of loading each model file of ``index`` (or ``models``) and of its checks,
    over ``repeats`` loads after one that warms the page cache and compiles the checks."""
    idx = Index(index)
    paths = [Path(p) for p in models] if models else sorted((idx.path / "models").glob("*.npz"))
    if not paths:
        raise ValueError(f"{index}: no model files in {idx.path / 'models'} (topicir train KIND --index {index})")
    rows = []
    for path in paths:
        _timed_load(path, idx)
        first, grown = _peak_growth(lambda: _timed_load(path, idx))
        times = [first] + [_timed_load(path, idx) for _ in range(repeats - 1)]
        total = statistics.median(t for t, _ in times)
        checks = statistics.median(c for _, c in times)
        log.info("%s: load %.3f s, checks %.3f s", path.name, total, checks)
        rows.append({"model file": path.name, "MB": fixed(path.stat().st_size / 2**20, 1),
                     "load s": fixed(total, 3), "checks s": fixed(checks, 3),
                     "checks / load": f"{100 * checks / total:.1f}%",
                     "load peak MB": "n/a" if grown is None else fixed(grown / 2**20, 1)})
    return [Table("Model files: the checks' share of loading", rows,
                  notes=[f"index {index}: {idx.stats.n_docs:,} docs, {idx.stats.n_tokens:,} tokens; median of {repeats} "
                         f"loads after a warm-up; load: topicir's load_model, the file read and checked; the checks "
                         f"read every entry of the count tables once; load peak: how much the process's peak "
                         f"resident set grew during the first load after the warm-up (mapped pages included)"])]
