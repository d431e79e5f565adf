"""The library values a ``--help`` shows, read from the library's source without importing it.

The command's parsers show the library's defaults (``MU``, ``DEPTH``, an estimator's signature
and docstring), and those live in modules that import numba, torch or the JVM: importing them
would cost every command, ``--version`` and ``--help`` included, seconds before it starts. So a
module-level constant and a class's docstring and ``__init__`` signature are read from the
module's syntax tree (:mod:`ast`), evaluating only literals, arithmetic on them, names bound to
such values (in the module or imported from another) and ``Path(...)``. Anything else (or a
module already imported) is taken from the imported module, so the values are always the
library's; tests check that the commands' values are all read without an import.
"""
from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
import operator
import sys
from pathlib import Path
from typing import NamedTuple

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_CALLS = {("pathlib", "Path"): Path}  # the only calls evaluated: (module, name) -> callable


class NotStatic(Exception):
    """The value is not a literal expression: import the module instead."""


class _Module(NamedTuple):
    name: str
    values: dict     # top-level name -> its expression (the last plain assignment)
    imports: dict    # top-level name -> (absolute module, attribute), from `from X import A as name`
    classes: dict    # top-level class name -> ast.ClassDef
    functions: dict  # top-level function name -> ast.FunctionDef


@functools.lru_cache(maxsize=None)
def _module(name: str) -> _Module:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise NotStatic(name)
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    package = name if spec.submodule_search_locations else name.rpartition(".")[0]
    values, imports, classes, functions = {}, {}, {}, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                values[target.id] = value
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                values.update((t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom):
            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            for alias in node.names:
                imports[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
    return _Module(name, values, imports, classes, functions)


def _evaluate(module: _Module, node: ast.AST):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_evaluate(module, e) for e in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_evaluate(module, k): _evaluate(module, v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(module, node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(module, node.left), _evaluate(module, node.right))
    if isinstance(node, ast.Name):
        return _static_constant(module.name, node.id)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords
            and module.imports.get(node.func.id) in _CALLS):
        return _CALLS[module.imports[node.func.id]](*(_evaluate(module, a) for a in node.args))
    raise NotStatic(ast.dump(node))


def _static_constant(module_name: str, name: str):
    module = _module(module_name)
    if name in module.values:
        return _evaluate(module, module.values[name])
    if name in module.imports:
        source, attr = module.imports[name]
        return _static_constant(source, attr)
    raise NotStatic(f"{module_name}.{name}")


def constant(module: str, name: str):
    """``module.name`` (a module-level constant), read from the source unless the module is
    imported already or the value is more than a literal expression."""
    if module not in sys.modules:
        try:
            return _static_constant(module, name)
        except (NotStatic, SyntaxError, OSError, ArithmeticError, TypeError, ValueError):
            pass
    return getattr(importlib.import_module(module), name)


class ClassInfo(NamedTuple):
    """What the command line needs of an estimator: its docstring and ``__init__`` signature."""

    doc: str
    signature: inspect.Signature


def _static_class(module_name: str, name: str) -> ClassInfo:
    module = _module(module_name)
    if name not in module.classes:
        if name in module.imports:
            return _static_class(*module.imports[name])
        raise NotStatic(f"{module_name}.{name}")
    node = module.classes[name]
    init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:  # inherited: inspect resolves it through the MRO
        raise NotStatic(f"{module_name}.{name}.__init__")
    return ClassInfo(ast.get_docstring(node, clean=False) or "", _signature(module, init.args))


def _signature(module: _Module, args: ast.arguments) -> inspect.Signature:
    P = inspect.Parameter
    params = []
    positional = [(a, P.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [P.empty] * (len(positional) - len(args.defaults)) + [_evaluate(module, d) for d in args.defaults]
    params += [P(a.arg, kind, default=d) for (a, kind), d in zip(positional, defaults)]
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    params += [P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else _evaluate(module, d))
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def class_info(location: str) -> ClassInfo:
    """Docstring and ``__init__`` signature of the class at ``"module:Class"``, read from the
    source unless the module is imported already or the signature is more than literals."""
    module, _, name = location.partition(":")
    if module not in sys.modules:
        try:
            return _static_class(module, name)
        except (NotStatic, SyntaxError, OSError, ArithmeticError, TypeError, ValueError):
            pass
    cls = getattr(importlib.import_module(module), name)
    return ClassInfo(cls.__doc__ or "", inspect.signature(cls.__init__))


def subcommands(module: str, function: str = "add_commands") -> list[tuple[str, str]] | None:
    """``(name, help)`` of every ``sub.add_parser(NAME, help=HELP)`` in ``module``'s top-level
    ``function`` (a kind's adapter adds its own commands so), read from the source; None when
    the module or the function does not exist. Raises :class:`NotStatic` when a name or help is
    more than a literal expression."""
    if importlib.util.find_spec(module) is None:
        return None
    parsed = _module(module)
    func = parsed.functions.get(function)
    if func is None:
        return None
    out = []
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_parser":
            if not node.args:
                raise NotStatic(f"{module}.{function}")
            help_text = next((k.value for k in node.keywords if k.arg == "help"), ast.Constant(""))
            out.append((_evaluate(parsed, node.args[0]), _evaluate(parsed, help_text)))
    return out
