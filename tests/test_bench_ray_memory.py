"""``topicir bench ray-memory`` (issue 62): the table of the driver's and capped workers' peak
memory with every worker-state kind's state on the workers, and the cap that fails a worker
past it."""
import subprocess
import sys

import pytest

from retrieval.bench.ray_memory import CAP_MIB, DOCS, _params, run, synsets

KINDS = ("lda", "pam", "glda", "tree-lda", "tcm")


def test_every_worker_state_kind_has_its_size_and_cap_and_its_workers_own_shards():
    from models.common.executors.ray import WORKER_STATE_KINDS

    assert set(WORKER_STATE_KINDS) == set(KINDS) == set(DOCS) == set(CAP_MIB)
    for kind in KINDS:
        p = _params(dict(kind=kind, k=50, workers=4, iters=3, seed=0))
        assert p["n_iter"] == 3 and p["burn_in"] == 2
        assert p["n_chains"] == 1 and p["n_shards"] == 4  # one chain cut into a shard per worker
    assert _params(dict(kind="pam", k=50, workers=4, iters=3, seed=0))["n_super"] == 10


def test_tree_prior_synsets_are_seeded_sets_of_two_to_five_terms_of_the_vocabulary():
    s = synsets(1000, 0)
    assert len(s) == 500 and s == synsets(1000, 0) and s != synsets(1000, 1)
    assert all(2 <= len(x) <= 5 and len(set(x)) == len(x) and all(0 <= t < 1000 for t in x) for x in s)


@pytest.mark.slow  # starts a Ray cluster and trains every kind in child processes at two sizes
def test_quick_table_measures_the_driver_and_every_worker_and_the_same_model_for_every_kind(tmp_path):
    pytest.importorskip("ray")
    from retrieval.ui.cli_bench import BENCHES

    quick = next(b for b in BENCHES if b.name == "ray-memory").quick  # the options under TOPICIR_QUICK=1
    (t,) = run(**dict(quick, work=str(tmp_path)))
    assert [(r["kind"], r["size"], r["docs"]) for r in t.rows] == [
        (kind, f"{s}x", quick["docs"] * s) for kind in KINDS for s in quick["scales"]]
    for r in t.rows:
        assert set(r) >= {"driver MiB", "driver before fit", "workers MiB", "cap MiB", "local MiB", "same model"}
        cap = CAP_MIB[r["kind"]]
        driver, before = float(r["driver MiB"]), float(r["driver before fit"])
        assert r["cap MiB"] == cap
        assert 50 < before <= driver < cap  # measured: a Python process with Ray's client is tens of MiB
        workers = [float(w) for w in r["workers MiB"].split()]
        assert len(workers) == quick["workers"] and all(50 < w < cap for w in workers)
        assert float(r["local MiB"]) > 50 and r["same model"] == "True", r
    assert any("restaurants' types it owns" in n for n in t.notes)


def test_a_worker_past_its_cap_exits():
    code = ("import numpy as np; from models.common.executors.ray import _watch_memory; "
            "a = np.ones(400 << 17); _watch_memory(200 << 20)")  # 400 MiB resident, capped at 200
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 86
    assert "past its cap of 200 MiB (worker_memory); exiting" in proc.stderr
