"""``pytest --numba-compiles=DIR`` (tests/conftest.py): where a run's numba compiles go. Each
process (each xdist worker) writes DIR/<worker>.json: the compiling thread's CPU seconds per
test and per compiled signature (a function compiled inside another one's compile counts in
that one's seconds). The run ends with a summary: compile seconds per worker, the signatures
compiled by more than one worker (the same kernel twice: its cache was not written yet when the
second worker needed it) and the tests that compiled most. Loads from the numba cache are not
compiles and are not counted."""
from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest


class CompileReport:
    def __init__(self, out: Path):
        from numba.core import event

        self.out = out
        self.stack = []
        self.per_test = defaultdict(float)
        self.per_signature = defaultdict(float)
        self.test = "<collection>"
        if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller, or a run without xdist
            for old in out.glob("*.json"):
                old.unlink()
        report = self

        class Listener(event.Listener):
            def on_start(self, ev):
                report.stack.append(time.thread_time())

            def on_end(self, ev):
                report.compiled(ev.data, time.thread_time() - report.stack.pop())

        event.register("numba:compile", Listener())

    def compiled(self, data, seconds):
        if self.stack:  # nested: inside the outer compile's seconds
            return
        fn = data["dispatcher"].py_func
        self.per_test[self.test] += seconds
        self.per_signature[f"{fn.__module__}.{fn.__qualname__} {data['args']}"] += seconds

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.test = item.nodeid
        yield

    def pytest_sessionfinish(self, session):
        if not self.per_test:  # xdist's controller compiles nothing
            return
        self.out.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (self.out / f"{worker}.json").write_text(json.dumps(
            {"per_test": self.per_test, "per_signature": self.per_signature}, indent=1))

    def pytest_terminal_summary(self, terminalreporter):
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return
        runs = {p.stem: json.loads(p.read_text()) for p in sorted(self.out.glob("*.json"))}
        tr = terminalreporter
        tr.section("numba compiles (CPU seconds of the compiling thread)")
        by_sig = defaultdict(dict)
        for worker, r in runs.items():
            tr.write_line(f"{worker}: {sum(r['per_signature'].values()):.1f} s, "
                          f"{len(r['per_signature'])} signatures")
            for sig, s in r["per_signature"].items():
                by_sig[sig][worker] = s
        again = sorted(((sum(w.values()) - max(w.values()), sig) for sig, w in by_sig.items()
                        if len(w) > 1), reverse=True)
        tr.write_line(f"compiled again by another worker: {sum(s for s, _ in again):.1f} s")
        for s, sig in again[:15]:
            tr.write_line(f"  {s:7.1f} s  {sig[:160]}")
        tests = sorted(((s, t) for r in runs.values() for t, s in r["per_test"].items()), reverse=True)
        tr.write_line("tests that compiled most:")
        for s, t in tests[:25]:
            tr.write_line(f"  {s:7.1f} s  {t}")
