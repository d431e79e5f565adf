"""Guards of the ``topicir`` command: argument types that refuse what the library would choke on
later (infinite or empty numbers, zero threads), output checks before the work, and one-line
messages for OS errors and warnings. Kept apart from ``cli.py`` so its parser can be regenerated.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import warnings


def floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, comma-separated, got {text!r}")
    return values


def weights(text: str) -> list[float]:
    """Comma-separated weights, each in [0, 1] (lam: the share of QL in the mixture)."""
    values = floats(text)
    bad = [v for v in values if not 0.0 <= v <= 1.0]
    if bad:
        raise argparse.ArgumentTypeError(f"expected weights between 0 and 1, got {bad[0]:g}")
    return values


def finite(text: str) -> float:
    value = floats(text)
    if len(value) != 1:
        raise argparse.ArgumentTypeError(f"expected one finite number, got {text!r}")
    return value[0]


def pos_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


# Library parameter names -> the flags of `topicir train`, for error messages.
_TRAIN_FLAGS = {"burn_in": "--burn-in", "sample_every": "--sample-every", "n_iter": "--iterations",
                "n_topics": "--topics", "n_chains": "--chains", "n_shards": "--shards", "n_jobs": "--threads"}


def cli_flags(message: str) -> str:
    """A library message with parameter names as the command's flags (``burn_in`` -> ``--burn-in``)."""
    from .estimator_args import FLAG_NAMES, flag_of

    names = set(_TRAIN_FLAGS) | set(FLAG_NAMES)
    return re.sub(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b",
                  lambda m: _TRAIN_FLAGS.get(m.group(1)) or flag_of(m.group(1)), message)


def one_line_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one line for users, without the Python source line that raised them."""
    return f"topicir: warning: {message}\n"


def os_error_message(exc: OSError) -> str:
    """``PATH: what`` for an OSError that names a file (PermissionError, ENOSPC, EISDIR, ...)."""
    if exc.filename is None:
        return str(exc)
    where = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else exc.filename
    return f"{where}: {exc.strerror or exc}"


def run_guarded(command: str, func, args) -> int:
    """``func(args)`` with every failure as one line on stderr: exit 2 for bad input (including
    a missing, unreadable or misplaced file), 1 for a locked target, a lost Ray worker, another
    OSError (ENOSPC) or a bug (``TOPICIR_TRACEBACK=1`` re-raises it), 130 for Ctrl-C (and SIGTERM,
    which :func:`retrieval.ui.cli.main` turns into Ctrl-C)."""
    from models.common.atomic import LockedError
    from models.common.executors import WorkerLostError

    formatwarning, warnings.formatwarning = warnings.formatwarning, one_line_warning
    try:
        return func(args)
    except (ValueError, KeyError, FileNotFoundError, FileExistsError, IsADirectoryError,
            NotADirectoryError, PermissionError) as exc:
        msg = os_error_message(exc) if isinstance(exc, OSError) else exc
        print(f"topicir {command}: error: {msg}", file=sys.stderr)
        return 2
    except WorkerLostError as exc:  # expected on a cluster: say how to resume
        print(f"topicir {command}: error: {exc.rerun_message()}", file=sys.stderr)
        return 1
    except (LockedError, OSError) as exc:
        msg = os_error_message(exc) if isinstance(exc, OSError) else exc
        print(f"topicir {command}: error: {msg}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"topicir {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line for users, the traceback on request
        return internal_error(f"topicir {command}", exc)
    finally:
        warnings.formatwarning = formatwarning


def internal_error(command: str, exc: Exception) -> int:
    """A bug as one line on stderr (exit 1), or raised again under ``TOPICIR_TRACEBACK=1``."""
    if os.environ.get("TOPICIR_TRACEBACK"):
        raise exc
    first = next(iter(str(exc).splitlines()), "")  # a Java exception carries its stack trace
    print(f"{command}: internal error: {type(exc).__name__}: {first} "
          f"(TOPICIR_TRACEBACK=1 shows the traceback; please report it)", file=sys.stderr)
    return 1
