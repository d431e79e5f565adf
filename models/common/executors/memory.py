"""A process's peak resident memory (what the Ray workers' caps and reports read)."""


def peak_memory(pid="self"):
    """Peak resident memory of a process in bytes (``VmHWM`` of /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) << 10
    raise OSError(f"/proc/{pid}/status: no VmHWM")
