"""How the ``topicir`` command speaks on stderr: warnings and errors (logging's and Python's
``warnings``) as one line ``topicir: warning: ...``, progress messages as ``HH:MM:SS message``
(off under ``-q``)."""
from __future__ import annotations

import logging
import sys
import warnings
from contextlib import contextmanager

from .guard import one_line_warning


class UserFormatter(logging.Formatter):
    """``topicir: warning: message`` for WARNING and above, ``HH:MM:SS message`` below."""

    def __init__(self):
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            text = " ".join(record.getMessage().split("\n"))
            return f"topicir: {'warning' if record.levelno == logging.WARNING else 'error'}: {text}"
        return super().format(record)


def setup_logging(quiet: bool) -> None:
    """Root logging to stderr through :class:`UserFormatter` (WARNING only under ``quiet``), and
    Python warnings in the same style, each shown once per place."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(UserFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "topicir", False)]:
        root.removeHandler(old)
    handler.topicir = True
    level = logging.WARNING if quiet else logging.INFO
    handler.setLevel(level)  # a library's logger set to DEBUG still reaches the log, not the screen
    root.addHandler(handler)
    root.setLevel(level)
    warnings.simplefilter("default")
    # an unclosed file is the code's bug, not the user's: a signal between an import's open and
    # its ``with`` leaves one that the collector reports while the command already stops
    warnings.filterwarnings("ignore", category=ResourceWarning)
    # a library's deprecation of its own internals (Ray Train setting Ray Data's old options) is
    # not the user's to act on; one that names a call of ours is attributed to our module
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray(\.|$)")
    warnings.formatwarning = one_line_warning


@contextmanager
def above_progress_bars():
    """While the block runs, the command's log lines go above tqdm's progress bars (through
    ``tqdm.write``) instead of into a bar's line; the handler keeps its level and format."""
    from tqdm.contrib import DummyTqdmFile

    handlers = [h for h in logging.getLogger().handlers if getattr(h, "topicir", False)]
    streams = [h.stream for h in handlers]
    for h in handlers:
        h.setStream(DummyTqdmFile(h.stream))
    try:
        yield
    finally:
        for h, stream in zip(handlers, streams):
            h.setStream(stream)
