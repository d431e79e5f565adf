"""Run-time lookup of a model kind's adapter module, ``retrieval.adapters.<kind>`` (see that
package for the hooks). By name, so that core code imports no adapter: imports go
ui -> experiments -> adapters -> core -> models.
"""
from __future__ import annotations

import importlib
import importlib.util

ADAPTERS = "retrieval.adapters"


def adapter(kind: str):
    """The adapter module of ``kind``, or None when the kind has none."""
    name = f"{ADAPTERS}.{kind.replace('-', '_')}"
    if importlib.util.find_spec(name) is None:
        return None
    return importlib.import_module(name)


def hook(kind: str, name: str):
    """Hook ``name`` of the adapter of ``kind``, or None."""
    module = adapter(kind)
    return getattr(module, name, None) if module is not None else None
