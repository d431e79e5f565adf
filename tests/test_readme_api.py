"""The README's Python API example runs as printed, on ``irds:cranfield`` (ir_datasets' download
seeded from the shared data, as ``make demo`` does on a machine without network)."""
import re
import shutil
from pathlib import Path

from tests.conftest import ROOT


def _seed_cranfield(shared_data: Path) -> None:
    import ir_datasets

    cran = ir_datasets.util.home_path() / "cranfield" / "cran.tar.gz"
    if not cran.exists():
        cran.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shared_data / "irds-cache" / "cranfield" / "cran.tar.gz", cran)


def test_readme_api_example(shared_data, tmp_path, monkeypatch, capsys):
    _seed_cranfield(shared_data)
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Python API.*?```python\n(.*?)```", text, re.S).group(1)
    assert "../shared" not in code  # runs anywhere: ir_datasets fetches Cranfield
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(code, "README.md (Python API)", "exec"), ns)
    tir = ns["tir"]
    ql, lda = tir.aggregate(ns["ql"], ns["qrels"], ["AP"])["AP"], tir.aggregate(ns["lda"], ns["qrels"], ["AP"])["AP"]
    assert 0.2790 < ql < 0.2792 and 0.3063 < lda < 0.3064  # seeded: the same figures on every machine
    assert list(ns["frame"].columns) == ["qid", "docno", "score", "rank"]
    assert (ns["frame"].groupby("qid")["rank"].min() == 0).all()
    assert len(ns["per_topic"]) == 225 and abs(ns["per_topic"]["AP"].mean() - lda) < 1e-12
    assert f"{ql:.4f}"[:4] in capsys.readouterr().out
    assert Path(ns["path"]).exists() and Path(ns["path"]).resolve().is_relative_to(tmp_path.resolve() / "indexes")
