"""numba's on-disk cache of the kernels is keyed by the whole source (models/common/jit.py)."""
import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

from numba.core.registry import CPUDispatcher

from models.common import jit

REPO = Path(__file__).resolve().parents[1]


def kernel_modules():
    for root in jit.ROOTS:
        for path in sorted(root.rglob("*.py")):
            if "cache=True" in path.read_text():
                yield ".".join(path.relative_to(REPO).with_suffix("").parts)


def test_every_cached_kernel_is_keyed_by_the_whole_source():
    kernels = {}
    for name in kernel_modules():
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == name:
                kernels[f"{name}.{value.py_func.__name__}"] = value
    cached = {k: d for k, d in kernels.items() if hasattr(d._cache, "_impl")}
    assert len(cached) > 200
    plain = [k for k, d in cached.items() if not isinstance(d._cache._impl.locator, jit._SourceDigest)]
    assert plain == [], "kernels cached by file alone (take njit from models.common.jit)"
    assert all(d._cache._cache_file._source_stamp[1] == jit.source_digest() for d in cached.values())


CALLER = """
from models.common.jit import njit
from .callee import g

@njit(cache=True)
def f():
    return g()
"""
RUN = """
import sys
from pathlib import Path
import models.common.jit as jit
jit.ROOTS = (Path(sys.argv[1]) / "pkg",)
sys.path.insert(0, sys.argv[1])
from pkg.caller import f
print(f(), len(f.stats.cache_hits), len(f.stats.cache_misses))
"""


def test_a_kernel_whose_callee_changed_in_another_file_is_compiled_again(tmp_path):
    """numba alone would load the caller's cached code, with the old callee inlined in it."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "caller.py").write_text(CALLER)
    script = tmp_path / "run.py"
    script.write_text(RUN)

    def run(value):
        (pkg / "callee.py").write_text(textwrap.dedent(f"""
            from models.common.jit import njit

            @njit(cache=True)
            def g():
                return {value}
            """))
        out = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=REPO, check=True,
                             capture_output=True, text=True).stdout.split()
        return [int(x) for x in out]

    assert run(1) == [1, 0, 1]  # compiled
    assert run(1) == [1, 1, 0]  # from the cache
    assert run(22) == [22, 0, 1]  # the callee changed: compiled again
