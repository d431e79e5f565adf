"""The ``topicir`` command's entry point (``topicir = "retrieval.ui.cli:main"``).

It imports nothing but the standard library before :func:`main` has made Ctrl-C and SIGTERM an
interruption (exit 130, one line): the parsers (:mod:`retrieval.ui.cli_parser`), the handlers
(:mod:`retrieval.ui.cli_commands`) and the library they call load after that.
"""
from __future__ import annotations

import signal
import sys
from contextlib import nullcontext

from .stop_signals import interrupts_not_lost, terminate


def main(argv=None) -> int:
    """Run ``topicir ARGV`` (``argv`` None: the process's arguments) and return its exit status.
    A command-line run owns the process: SIGTERM is handled as Ctrl-C from the first line on; a
    caller of ``main(argv)`` keeps its own signal handlers."""
    if argv is None:
        signal.signal(signal.SIGTERM, terminate)
    command = "topicir"
    try:
        # an interrupt Python dropped and delivers again as the block ends is caught below too
        with interrupts_not_lost() if argv is None else nullcontext():
            from .cli_parser import parse_args
            from .guard import internal_error, run_guarded
            from .logs import setup_logging
            from .progress import progress_bars

            try:
                args = parse_args(argv)
            except Exception as exc:  # argparse's own errors are SystemExit
                return internal_error(command, exc)
            command = f"topicir {args.command}"
            setup_logging(args.quiet)
            with progress_bars(not args.quiet):
                return run_guarded(args.command, args.func, args)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if not _caused_by_interrupt(exc):
            raise
        print(f"{command}: interrupted", file=sys.stderr)
        return 130


def _caused_by_interrupt(exc) -> bool:
    """Whether ``exc`` wraps a KeyboardInterrupt: a signal during a class body's __set_name__
    (a dataclass being imported) reaches us as the RuntimeError that wraps it."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


if __name__ == "__main__":
    raise SystemExit(main())
