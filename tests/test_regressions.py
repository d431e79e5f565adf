"""MAP on the shared collections against values computed independently (issue 2).

Builds each collection's index in a temporary directory; needs ../shared/data.
"""
import pytest

from retrieval.experiments.regressions import COLLECTIONS, EXPECTED_QL, EXPECTED_QLD, TOLERANCE, check, run_collection


# Two small collections in the default suite, every one in make test-long.
@pytest.mark.regression
@pytest.mark.parametrize("name", [n if n in ("med", "cacm") else pytest.param(n, marks=pytest.mark.long)
                                  for n in COLLECTIONS])
def test_exact_ql_reproduces_reference_map(shared_data, shared_indexes, name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # runs go to ./topics_runs of a scratch dir
    methods = ("ql", "qld", "bm25", "bm25+rm3") if name == "med" else ("ql", "qld")
    rows = run_collection(shared_data, name, shared_indexes, methods=methods)
    by_method = {r["method"]: r for r in rows}
    assert by_method["QL (exact Dirichlet)"]["AP"] == pytest.approx(EXPECTED_QL[name], abs=TOLERANCE)
    if name in EXPECTED_QLD:
        assert by_method["Lucene QLD"]["AP"] == pytest.approx(EXPECTED_QLD[name], abs=TOLERANCE)
    # Lucene's clamped QLD never beats exact QL on these collections.
    assert by_method["Lucene QLD"]["AP"] < by_method["QL (exact Dirichlet)"]["AP"]
    assert check(rows) == []
    if name == "med":
        assert by_method["BM25+RM3"]["AP"] > by_method["BM25"]["AP"] > 0.45
