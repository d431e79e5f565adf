"""Command-line options generated from an estimator: ``topicir train KIND`` shows exactly that
kind's parameters, with the library's defaults (read from the signature) and help (the first
sentence of each numpy-style docstring entry), under one vocabulary across commands. The
signature and docstring come from :func:`retrieval.ui.source_values.class_info`, which reads
them without importing the estimator (numba, torch).
"""
from __future__ import annotations

import argparse
import inspect
import math
import re

# One vocabulary: the constructor parameter -> the option every command uses for it.
FLAG_NAMES = {"n_topics": "topics", "n_iter": "iterations", "n_jobs": "threads", "n_chains": "chains",
              "n_shards": "shards", "n_super": "super", "n_sub": "sub", "n_workers": "workers"}
# Parameters that make no sense on a command line (Python objects).
SKIP = {"callback"}

_ENTRY = re.compile(r"^(\w+)\s*:\s*(.*)$")


def flag_of(param: str) -> str:
    return "--" + FLAG_NAMES.get(param, param).replace("_", "-")


def parse_docstring(doc: str | None) -> dict[str, tuple[str, str]]:
    """``{parameter: (type line, description)}`` from the ``Parameters`` section of a numpy-style
    docstring."""
    lines = inspect.cleandoc(doc or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines)
                     if line.strip() == "Parameters" and lines[i + 1].strip().startswith("---"))
    except StopIteration:
        return {}
    out, name = {}, None
    body = lines[start + 2:]
    for i, line in enumerate(body):
        underline = body[i + 1].strip() if i + 1 < len(body) else ""
        if line.strip() and not line.startswith(" ") and underline and set(underline) == {"-"}:
            break  # the next section ("Attributes", ...)
        m = _ENTRY.match(line)
        if m:
            name = m.group(1)
            out[name] = (m.group(2), "")
        elif name and line.strip():
            kind, text = out[name]
            out[name] = (kind, (text + " " + line.strip()).strip())
    return out


def _plain(text: str) -> str:
    """Docstring markup read as plain text on a terminal: ``:func:`name``` and ````code````
    become ``name`` and ``code``."""
    return re.sub(r"``([^`]+)``", r"\1", re.sub(r":\w+:`~?([^`]+)`", r"\1", text))


# Words whose period ends no sentence: "et al. 2009", "eq. 3", "i.e. 0.6", "e.g. 20", "cf. the".
_ABBREVIATIONS = {"al", "eq", "eqs", "i.e", "e.g", "cf", "vs", "fig", "sec", "resp", "approx", "etc"}


def first_sentence(text: str) -> str:
    """The first sentence of ``text``: up to a period followed by a space (or the end) that is
    outside parentheses, follows a word (not `` . `` between two factors of a formula) and ends
    no abbreviation (``et al.``, ``eq.``, ``i.e.``) or initial (``K. Wei``)."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c == "." and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace()) and i and not text[i - 1].isspace():
            word = re.search(r"[\w.]*$", text[:i]).group(0).lower()
            initial = len(word) == 1 and text[i - 1].isupper()
            if word not in _ABBREVIATIONS and not initial or i + 1 == len(text):
                return text[:i + 1].strip()
    return text.strip()


def _choices(type_line: str):
    m = re.search(r"\{([^}]*)\}", type_line)
    if not m:
        return None
    return [c.strip().strip("'\"") for c in m.group(1).split(",") if c.strip()]


def _number(kind, minimum=None):
    """A parser for one number that refuses inf and nan (a NaN prior only fails much later) and,
    with ``minimum``, smaller values (counts such as ``--threads``)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return value
    parse.__name__ = kind.__name__
    return parse


def add_estimator_args(parser: argparse.ArgumentParser, info) -> list[str]:
    """Add one option per constructor parameter of an estimator (``info``: its
    :class:`~retrieval.ui.source_values.ClassInfo`); returns the parameter names added."""
    docs = parse_docstring(info.doc)
    names = []
    for name, param in info.signature.parameters.items():
        if name == "self" or name in SKIP or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        type_line, text = docs.get(name, ("", ""))
        default = param.default
        help_text = _plain(first_sentence(text)) if text else name.replace("_", " ")
        flag = flag_of(name)
        if isinstance(default, bool):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text + " (default: %(default)s)")
        else:
            choices = _choices(type_line)
            if choices is not None:
                kind = str
            elif isinstance(default, int) or "int" in type_line.split(" or ")[0]:
                # counts (n_*) and periods (*_every) are at least 1
                kind = _number(int, 1 if name.startswith("n_") or name.endswith("_every") else None)
            elif isinstance(default, float) or "float" in type_line:
                kind = _number(float)
            else:
                kind = str
            parser.add_argument(flag, dest=name, type=kind, choices=choices, default=default,
                                metavar=None if choices else flag[2:].upper().replace("-", "_"),
                                help=help_text + " (default: %(default)s)")
        names.append(name)
    return names
