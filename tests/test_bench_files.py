"""bench files: the checks' share of loading every model file of an index."""
from pathlib import Path

import pytest

from retrieval.core.index import build_index
from retrieval.core.modelfiles import train_model

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def index_with_models(tmp_path_factory):
    index = build_index([DATA / "docs.trec"], tmp_path_factory.mktemp("files") / "mini")
    for k in (2, 3):
        train_model(index, "lda", index.path / "models" / f"lda-k{k}.npz", progress=False, n_topics=k,
                    n_iter=4, burn_in=2, n_chains=1)
    return index


def test_bench_files_times_the_checks_within_each_load(index_with_models, monkeypatch):
    import models.common.validate_files as validate_files
    from retrieval.bench.files import run

    calls = []
    checks = validate_files.run_checks
    monkeypatch.setattr(validate_files, "run_checks", lambda c, ctx: calls.append(1) or checks(c, ctx))
    [table] = run(index=str(index_with_models.path), repeats=2)
    assert [r["model file"] for r in table.rows] == ["lda-k2.npz", "lda-k3.npz"]
    for row in table.rows:
        load, spent = float(row["load s"]), float(row["checks s"])
        assert 0 <= spent <= load and row["checks / load"].endswith("%")
        # the peak's growth over a load, where Linux lets it be reset: this file is read whole
        # (its members are below the size that is mapped), so a load holds about the file
        peak = row["load peak MB"]
        assert peak == "n/a" if not Path("/proc/self/clear_refs").exists() else 0 <= float(peak) < 64
    assert calls  # the loads went through the checks the bench times


def test_bench_files_names_an_index_without_models(tmp_path):
    from retrieval.bench.files import run

    index = build_index([DATA / "docs.trec"], tmp_path / "bare")
    with pytest.raises(ValueError, match="no model files"):
        run(index=str(index.path))
