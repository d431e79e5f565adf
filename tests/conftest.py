from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared test collections (../shared/data); tests needing them skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_indexes(tmp_path_factory) -> Path:
    """One directory for the indexes of the shared collections, so that each is built once per
    test session (and models trained into them are reused)."""
    return tmp_path_factory.mktemp("shared-indexes")


@pytest.fixture(scope="session")
def med_index(shared_data, shared_indexes):
    from retrieval.experiments.regressions import ensure_index

    return ensure_index(shared_data, "med", shared_indexes)
