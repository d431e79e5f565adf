"""``topicir bench ray-memory`` (issue 62): the table of the driver's and capped workers' peak
memory with LDA's state on the workers, and the cap that fails a worker past it."""
import subprocess
import sys

import pytest

from retrieval.bench.ray_memory import run


@pytest.mark.slow  # starts a Ray cluster and trains in child processes at two sizes
def test_quick_table_measures_the_driver_and_every_worker_and_the_same_model(tmp_path):
    pytest.importorskip("ray")
    (t,) = run(docs=200, terms=300, mean_len=20.0, scales=[1, 2], workers=2, cap_mib=2048, k=4, iters=2,
               work=str(tmp_path))
    assert [r["size"] for r in t.rows] == ["1x", "2x"]
    assert [r["docs"] for r in t.rows] == [200, 400]
    for r in t.rows:
        assert set(r) >= {"driver MiB", "driver before fit", "workers MiB", "cap MiB", "local MiB", "same model"}
        driver, before = float(r["driver MiB"]), float(r["driver before fit"])
        assert 50 < before <= driver < 2048  # measured: a Python process with Ray's client is tens of MiB
        workers = [float(w) for w in r["workers MiB"].split()]
        assert len(workers) == 2 and all(50 < w < 2048 for w in workers)
        assert float(r["local MiB"]) > 50 and r["same model"] == "True"


def test_a_worker_past_its_cap_exits():
    code = ("import numpy as np; from models.common.executors.ray import _watch_memory; "
            "a = np.ones(400 << 17); _watch_memory(200 << 20)")  # 400 MiB resident, capped at 200
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 86
    assert "past its cap of 200 MiB (worker_memory); exiting" in proc.stderr
