import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# TOPICIR_SHARED_DATA points elsewhere, e.g. from a worktree that has no ../shared beside it
SHARED_DATA = Path(os.environ.get("TOPICIR_SHARED_DATA", ROOT.parent / "shared" / "data"))


def sigint_as_from_a_terminal():
    """A ``preexec_fn`` for a child the test sends SIGINT: it takes it as a terminal's command
    does, also where the tests run in a background job (whose children start with SIGINT
    ignored, which a command keeps, as under nohup)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true",
                     help="also run tests marked slow (README benchmark commands) and long")
    parser.addoption("--runlong", action="store_true",
                     help="also run tests marked long (end-to-end checks of minutes; `make test-long`)")
    parser.addoption("--numba-compiles", metavar="DIR",
                     help="write the numba compile seconds per test and signature to DIR and "
                          "summarise them (tests/numba_compiles.py)")


def pytest_configure(config):
    if config.getoption("--numba-compiles"):
        from tests.numba_compiles import CompileReport

        config.pluginmanager.register(CompileReport(Path(config.getoption("--numba-compiles"))))


def pytest_collection_modifyitems(config, items):
    runslow = config.getoption("--runslow")
    runlong = runslow or config.getoption("--runlong")
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow")
    skip_long = pytest.mark.skip(reason="long: run with --runlong (make test-long)")
    for item in items:
        if "slow" in item.keywords and not runslow:
            item.add_marker(skip_slow)
        elif "long" in item.keywords and not runlong:
            item.add_marker(skip_long)
