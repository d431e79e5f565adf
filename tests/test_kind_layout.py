"""The layout of ``models/`` that docs/architecture.md describes: one folder per kind, holding its
estimator and its file spec; the machinery every kind shares in ``models/common``, which imports
no kind; estimators whose parameters are keyword-only, as scikit-learn's."""
import ast
import importlib
import inspect

import pytest

from models import registry
from tests.conftest import ROOT

MODELS = ROOT / "models"
TOP_MODULES = {"__init__.py", "registry.py", "_version.py"}


def folder_of(kind):
    """The folder under models/ of ``kind``'s estimator module (``models.<folder>.<module>``)."""
    module = registry.class_path(kind).split(":")[0]
    parts = module.split(".")
    assert parts[0] == "models" and len(parts) == 3, f"{kind}: {module} is not models.<folder>.<module>"
    return parts[1]


def imported_modules(path):
    """The absolute names of the modules ``path`` imports (relative imports resolved)."""
    pkg = path.parent.relative_to(ROOT).parts
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - node.level + 1]) if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            out += [module] if node.module else [module + [a.name] for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name.split(".") for a in node.names]
    return out


@pytest.mark.parametrize("kind", registry.kinds())
def test_estimator_parameters_are_keyword_only(kind):
    cls = registry.model_class(kind)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert params, kind
    positional = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert not positional, f"{kind}: {cls.__name__}.__init__ takes {positional} positionally"
    with pytest.raises(TypeError):
        cls(1)


@pytest.mark.parametrize("kind", registry.kinds())
def test_kind_folder_holds_its_estimator_and_file_spec(kind):
    folder = MODELS / folder_of(kind)
    module = registry.class_path(kind).split(":")[0]
    assert (folder / "__init__.py").is_file(), folder
    assert (folder / (module.split(".")[-1] + ".py")).is_file(), module
    assert (folder / "files.py").is_file(), f"{kind}: no {folder.relative_to(ROOT)}/files.py"
    files = importlib.import_module(f"models.{folder.name}.files")
    assert registry.model_class(kind)._FILE_SPEC is files.SPEC, kind


def test_models_holds_only_the_registry_the_kinds_and_common():
    top = {p.name for p in MODELS.glob("*.py")}
    assert top == TOP_MODULES, sorted(top - TOP_MODULES)
    packages = {p.name for p in MODELS.iterdir() if (p / "__init__.py").is_file()}
    assert packages == {folder_of(k) for k in registry.kinds()} | {"common"}, packages


def test_common_imports_no_kind():
    kinds = {folder_of(k) for k in registry.kinds()}
    for path in sorted((MODELS / "common").rglob("*.py")):
        bad = [".".join(m) for m in imported_modules(path) if m[:1] == ["models"] and m[1:2] and m[1] in kinds]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
