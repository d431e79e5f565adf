"""``TOPICIR_QUICK=1``: every training and measurement at its smallest settings.

Meant for smoke tests of printed commands (the documentation's commands run this way in the test
suite): the commands behave as printed, only the amount of work shrinks. A training takes its
kind's ``quick_params`` (few topics, chains and sweeps; the seed stays the one given);
benchmarks and reproductions take the small settings each declares.
"""
from __future__ import annotations

import os

ENV = "TOPICIR_QUICK"


def is_quick() -> bool:
    """Whether ``TOPICIR_QUICK`` is set to a true value (1, true, yes)."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")


def quick_train_params(kind: str, params: dict) -> dict:
    """``params`` with the kind's ``quick_params`` in force (except the seed) under quick mode."""
    if not is_quick():
        return params
    from models.registry import model_class

    quick = {k: v for k, v in model_class(kind).quick_params.items() if k != "seed"}
    return {**params, **quick}
