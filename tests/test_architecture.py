"""The shape the README's Architecture section promises: one import direction, no model kind
named in core retrieval code, small modules."""
import ast
import re
from pathlib import Path

import pytest

from models import registry
from tests.conftest import ROOT

# each may import only the layers after it; datasets (corpus readers) import no other layer
LAYERS = ["ui", "bench", "experiments", "adapters", "core", "datasets"]
MAX_LINES = 500


def imports_of(path: Path) -> set[str]:
    """The retrieval subpackages a module imports (relative or absolute, at any depth)."""
    tree = ast.parse(path.read_text())
    pkg = path.parent.relative_to(ROOT).parts  # e.g. ("retrieval", "core")
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg[:len(pkg) - node.level + 1]) + (node.module.split(".") if node.module else [])
            else:
                base = (node.module or "").split(".")
            names = [base] if node.module else [base + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name.split(".") for a in node.names]
        else:
            continue
        for parts in names:
            if parts[:1] == ["retrieval"] and len(parts) > 1:
                out.add(parts[1])
    return out


def modules(*parts):
    return sorted((ROOT.joinpath(*parts)).rglob("*.py"))


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_go_one_way(layer):
    allowed = set(LAYERS[LAYERS.index(layer):])
    for path in modules("retrieval", layer):
        bad = (imports_of(path) & set(LAYERS)) - allowed
        assert not bad, f"{path.relative_to(ROOT)} imports retrieval.{', retrieval.'.join(sorted(bad))}"


def test_models_never_import_retrieval():
    for path in modules("models"):
        assert not imports_of(path), path


def test_no_model_kind_named_in_core_code():
    kinds = registry.kinds()
    pattern = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, kinds)))
    for path in modules("retrieval", "core"):
        hits = [i + 1 for i, line in enumerate(path.read_text().splitlines()) if pattern.search(line)]
        assert not hits, f"{path.relative_to(ROOT)} names a model kind on lines {hits}"


def test_no_module_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in modules("retrieval") + modules("models")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_serial_kernels_take_at_most_12_positional_parameters():
    """State travels grouped (typing.NamedTuple); only kernels compiled with parallel=True, whose
    prange bodies cannot take tuples, may stay flat."""
    long = []
    for path in modules("models"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorators = " ".join(ast.unparse(d) for d in node.decorator_list)
            if "jit" in decorators and "parallel=True" not in decorators:
                n = len(node.args.posonlyargs) + len(node.args.args)
                if n > 12:
                    long.append(f"{path.relative_to(ROOT)}:{node.name} ({n})")
    assert not long, long
