"""Progress bars of a whole command switched off (``topicir -q``)."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def progress_bars(enabled: bool):
    """While the block runs with ``enabled`` False, every tqdm bar is disabled. Library calls pass
    ``disable=`` themselves, so tqdm's TQDM_DISABLE (read at import) cannot reach them; a log
    redirected to a file then has no lines of ``\\r`` bars."""
    if enabled:
        yield
        return
    from tqdm import std

    init = std.tqdm.__init__

    def quiet_init(self, *a, **kw):
        init(self, *a, **dict(kw, disable=True))

    std.tqdm.__init__ = quiet_init
    try:
        yield
    finally:
        std.tqdm.__init__ = init
