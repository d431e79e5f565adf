"""One step of ``topicir bench full``: a command run in its own child process and measured as
the operating system accounts for it.

The child is reaped in two moves: ``waitid(..., WNOWAIT)`` sees it exit and leaves it a zombie,
whose ``/proc/<pid>/io`` still holds what it wrote; ``wait4`` then reaps it and returns its
resource usage. So the figures are the whole process's, from its first instruction to its
exit, with no sampling:

- wall seconds, from the start of the child to its exit (polled every ``POLL_S``);
- CPU seconds, user + system (``ru_utime + ru_stime``, every thread of the child, the JVM's
  included, and of any children it waited for);
- peak memory, the largest ``VmHWM`` of ``/proc/<pid>/status`` seen while the child runs (its
  resident set at its largest, every thread included); without ``/proc``, ``ru_maxrss``, which
  Linux also raises to the parent's resident set at the moment the child was forked;
- bytes written to disk: ``write_bytes - cancelled_write_bytes`` of ``/proc/<pid>/io`` (the
  storage layer's count; pages overwritten or deleted before they reached the disk are
  cancelled), where ``/proc`` exists, otherwise ``ru_oublock`` blocks of 512 bytes; and
  ``wchar``, the bytes handed to ``write`` calls (logs and pipes included).

A training is watched too: every time its checkpoint file is replaced is counted, with the
largest size it had and the time it was seen at with the sweep it holds (the pace of the
training: early sweeps can be far slower than settled ones). At a deadline, the training is sent SIGTERM once, on which ``topicir
train`` stops after the sweep in progress with its checkpoint written, so a rerun resumes with
no sweep lost. Ctrl-C or SIGTERM of the benchmark stops the child as well, and the part it ran
is still measured.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

from ..core.machine import cpu_model

POLL_S = 0.1
GRACE_S = 10.0      # a Ctrl-C reaches the child too: this long for it to exit on its own
TERM_S = 300.0      # then SIGTERM, and this long before SIGKILL


def _exited(pid: int) -> bool:
    """Whether child ``pid`` has exited (left unreaped)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None


def _wait_exit(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _exited(pid):
            return True
        time.sleep(POLL_S)
    return _exited(pid)


def _stop(pid: int) -> None:
    """End child ``pid`` after an interruption: its own Ctrl-C first, then SIGTERM (topicir
    handles it as Ctrl-C), then SIGKILL; it is left unreaped."""
    steps = [(None, GRACE_S), (signal.SIGINT, GRACE_S), (signal.SIGTERM, TERM_S), (signal.SIGKILL, TERM_S)]
    for sig, wait in steps:
        if sig is not None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        try:
            if _wait_exit(pid, wait):
                return
        except KeyboardInterrupt:  # asked again: go on to the next signal at once
            continue


def _vm_hwm(pid: int) -> int | None:
    """``VmHWM`` of ``/proc/<pid>/status`` in bytes (None without /proc, or once it has exited)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def _proc_io(pid: int) -> dict:
    """The fields of ``/proc/<pid>/io`` (empty without /proc)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return {}
    return {k.strip(): int(v) for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


class _Watch:
    """The checkpoint file of a training: how often it was replaced (or first written), its
    largest size, and when each write was seen with the sweep (epoch) it holds."""

    def __init__(self, path: Path):
        self.path = path
        self.seen = self._state()
        self.writes = 0
        self.max_bytes = 0
        self.start = time.perf_counter()
        self.times = []  # [seconds since the start, sweep or None]

    def _state(self) -> tuple | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def poll(self) -> bool:
        """Look again; True when the checkpoint was written since the last look."""
        now = self._state()
        new = now is not None and now != self.seen
        self.seen = now
        if new:
            self.writes += 1
            self.max_bytes = max(self.max_bytes, now[2])
            done = progress(self.path)
            self.times.append([round(time.perf_counter() - self.start, 1), done[0] if done else None])
        return new


def run_measured(cmd: list[str], log_path: Path, *, env: dict | None = None, checkpoint: Path | None = None,
                 deadline: float | None = None, on_start=None) -> dict:
    """Run ``cmd`` (its output appended to ``log_path``) and return its measured part: ``exit``
    (the exit status; 130 when interrupted), ``wall_s``, ``user_s``, ``sys_s``, ``peak_gib``,
    ``written_bytes``, ``wchar_bytes`` (None without /proc), ``started`` (UTC, ISO),
    ``interrupted`` (``"ctrl-c"``, ``"deadline"`` or None), ``load`` (the 1-minute load average
    at its start and end), ``cpu`` (the machine's CPU model: the parts of one step may run on
    different machines) and, with ``checkpoint``, ``checkpoints``
    (writes seen), ``checkpoint_max_bytes`` and ``checkpoint_times`` ([seconds into the part,
    sweep] of each write seen). ``on_start(pid)`` runs once the child exists.

    With ``deadline`` (a ``time.time()``), the child is sent SIGTERM once when it is reached
    (``interrupted`` is ``"deadline"`` unless the child still exits 0). A KeyboardInterrupt here
    stops the child (:func:`_stop`), records the part and is raised again as
    :class:`Interrupted` carrying it.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load = os.getloadavg()[0]
    watch = _Watch(checkpoint) if checkpoint is not None else None
    with open(log_path, "a") as log:
        log.write(f"\n$ {shlex.join(cmd)}  # {started}\n")
        log.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    interrupted = None
    hwm = 0
    try:
        if on_start is not None:
            on_start(proc.pid)
        while not _exited(proc.pid):
            hwm = max(hwm, _vm_hwm(proc.pid) or 0)
            if watch is not None:
                watch.poll()
            if deadline is not None and interrupted is None and time.time() >= deadline:
                interrupted = "deadline"
                # SIGTERM, not SIGINT: a child started in the background (nohup, a script's `&`)
                # ignores SIGINT
                os.kill(proc.pid, signal.SIGTERM)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        interrupted = "ctrl-c"
        _stop(proc.pid)
    wall = time.perf_counter() - t0
    if watch is not None:
        watch.poll()
    io = _proc_io(proc.pid)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode == 0 and interrupted == "deadline":  # signalled as it saved its model
        interrupted = None
    written = (io["write_bytes"] - io.get("cancelled_write_bytes", 0)) if "write_bytes" in io else ru.ru_oublock * 512
    part = dict(started=started, exit=proc.returncode, interrupted=interrupted, wall_s=wall, user_s=ru.ru_utime,
                sys_s=ru.ru_stime, peak_gib=hwm / 2**30 if hwm else ru.ru_maxrss / 2**20, written_bytes=max(0, written),
                wchar_bytes=io.get("wchar"), load=[load, os.getloadavg()[0]], cpu=cpu_model())
    if watch is not None:
        part.update(checkpoints=watch.writes, checkpoint_max_bytes=watch.max_bytes, checkpoint_times=watch.times)
    if interrupted == "ctrl-c":
        raise Interrupted(part)
    return part


def progress(checkpoint: Path) -> tuple[int, int | None] | None:
    """(sweeps or epochs done, of how many) by the training that wrote ``checkpoint``; None when
    there is none (or it is being replaced)."""
    from models.common.checkpoint import read_header

    try:
        header = read_header(checkpoint)
    except (OSError, ValueError):
        return None
    params = header.get("params", {})
    total = params.get("n_iter", params.get("epochs"))
    return int(header.get("iteration", 0)), None if total is None else int(total)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while a step ran: ``part`` is what was measured of it."""

    def __init__(self, part: dict):
        super().__init__()
        self.part = part
