"""What the benchmarks read of their processes in /proc: parents, CPU time, memory."""

from __future__ import annotations

import os
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state is [0], ppid [1])."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def parents() -> dict[int, int]:
    """Every live process's parent, from one pass over /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = int(stat_fields(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                continue  # it ended meanwhile
    return found


def children_of(pid: int, table: dict[int, int]) -> list[int]:
    return [child for child, parent in table.items() if parent == pid]


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(the process's own utime + stime, the cutime + cstime of the children it reaped)."""
    fields = stat_fields(pid)
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def live_children_ticks(pid: int, table: dict[int, int]) -> int:
    """CPU ticks of ``pid``'s live children and the ones they reaped (a tool worker's warm
    work horse lives across jobs, so its time is not yet in the worker's cutime)."""
    total = 0
    for child in children_of(pid, table):
        try:
            total += sum(cpu_ticks(child))
        except OSError:
            continue  # reaped meanwhile: its time is in the parent's cutime now
    return total


def pss_mib(pid: int) -> float:
    """Proportional set size: each shared page counted once across its sharers."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0
