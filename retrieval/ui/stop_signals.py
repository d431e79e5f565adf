"""Ctrl-C and SIGTERM: a command stops at once (:func:`terminate`, SIGTERM as Ctrl-C), except
during ``topicir train``, where the first stops the training after the sweep (epoch) in
progress, once its checkpoint is written, so that a rerun resumes with nothing lost, and a
second stops at once (the sweeps since the last checkpoint are lost). Standard library only:
:mod:`retrieval.ui.cli` imports it before anything else."""
from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
from contextlib import contextmanager

log = logging.getLogger(__name__)


def terminate(signum, frame):
    """The command line's SIGTERM handler: an interruption, cleaned up (temporaries, partial
    builds) as Ctrl-C is."""
    raise KeyboardInterrupt


@contextmanager
def interrupts_not_lost():
    """A KeyboardInterrupt raised where Python cannot pass it on (a weakref callback of the
    import machinery, a ``__del__``) is printed as "Exception ignored" and dropped, and the
    command would go on: it is delivered again, as SIGTERM, whose handler stops the command.
    From a timer thread, a moment later: delivered at once, it would be raised in this hook,
    which is no place to pass it on either. One still on its way when the block ends arrives
    before the block is left."""
    before = sys.unraisablehook
    timers = []

    def hook(unraisable):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            timer = threading.Timer(0.01, _thread.interrupt_main, args=(signal.SIGTERM,))
            timer.daemon = True
            timer.start()
            timers.append(timer)
        else:
            before(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = before
        for timer in timers:
            timer.join()


@contextmanager
def stop_after_sweep(enabled: bool = True):
    """Yields an event the first Ctrl-C or SIGTERM sets (``train_model``'s ``stop``), or None
    where nothing is installed: not ``enabled`` (no checkpoint to write), outside the main thread,
    or when the process is not the command line's (:func:`retrieval.ui.cli.main` called with
    arguments keeps its caller's handlers). A signal ignored when the process started (SIGINT
    under nohup or a script's ``&``) stays ignored."""
    if not enabled or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not terminate:
        yield None
        return
    event = threading.Event()

    def request(signum, frame):
        if event.is_set():
            raise KeyboardInterrupt
        event.set()
        log.warning("stopping after the sweep in progress, once its checkpoint is written; "
                    "again to stop at once (losing the sweeps since the last checkpoint)")

    kinds = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN]
    before = {s: signal.signal(s, request) for s in kinds}
    try:
        yield event
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
