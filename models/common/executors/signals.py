"""Keep a process's native fatal-signal handlers across ``ray.init``.

The JVM that reads the index (pyserini, in the same process) handles SIGSEGV and SIGBUS itself:
compiled Java code turns null checks and stack probes into those faults on purpose. ``ray.init``
installs Ray's C++ failure handlers over them, after which the JVM's next routine fault kills
the process (exit 139, no traceback); ``ray.shutdown`` resets SIGSEGV, SIGFPE and SIGILL to the
default, with the same effect. So the handlers in place before either call are put back after
it: Ray's crash reports for its own C++ code are what is given up.
"""
import contextlib
import ctypes
import signal

FATAL = tuple(getattr(signal, n) for n in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL") if hasattr(signal, n))
_SIGACTION_BYTES = 512  # more than sizeof(struct sigaction) on every Linux and macOS ABI


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction  # noqa: B018  (absent on Windows: nothing to keep there)
        return libc
    except (OSError, AttributeError):
        return None


def handler_address(sig):
    """The address of the native handler of ``sig`` (0 for the default), or None off POSIX."""
    libc = _libc()
    if libc is None:
        return None
    buf = ctypes.create_string_buffer(_SIGACTION_BYTES)
    if libc.sigaction(int(sig), None, buf) != 0:
        return None
    return ctypes.cast(buf, ctypes.POINTER(ctypes.c_void_p))[0] or 0


@contextlib.contextmanager
def native_handlers_kept(signals=FATAL):
    """Within the block anything may install handlers for ``signals``; on leaving, the ones in
    place on entry are restored byte for byte (struct sigaction, flags and mask included)."""
    libc = _libc()
    saved = []
    if libc is not None:
        for sig in signals:
            buf = ctypes.create_string_buffer(_SIGACTION_BYTES)
            if libc.sigaction(int(sig), None, buf) == 0:
                saved.append((int(sig), buf))
    try:
        yield
    finally:
        for sig, buf in saved:
            libc.sigaction(sig, buf, None)


def init_ray(**kwargs):
    """``ray.init(**kwargs)`` that leaves the process's fatal-signal handlers as they were."""
    import ray

    with native_handlers_kept():
        return ray.init(**kwargs)


def shutdown_ray():
    """``ray.shutdown()`` that leaves the process's fatal-signal handlers as they were."""
    import ray

    with native_handlers_kept():
        ray.shutdown()
