"""What the host offers: MemAvailable, the load average, CPUs (thin /proc readers)."""
from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from config.errors import ConfigError
from config.names import HOST_NAME_PATTERN
from slot.memory import read_memory

_KIB = 1024


def parse_meminfo_field(meminfo: bytes, name: bytes) -> int:
    """One field of /proc/meminfo (`MemTotal`, `MemAvailable`, ...), in bytes."""
    prefix = name + b":"
    for line in meminfo.splitlines():
        if line.startswith(prefix):
            return int(line.split()[1]) * _KIB
    raise ValueError(f"no {name.decode()} line in /proc/meminfo (MemAvailable needs Linux 3.14+)")


def parse_mem_available(meminfo: bytes) -> int:
    """MemAvailable in bytes: the kernel's estimate of memory that can be given to new work
    without swapping, page cache included."""
    return parse_meminfo_field(meminfo, b"MemAvailable")


def _meminfo() -> bytes:
    with open("/proc/meminfo", "rb") as file:
        return file.read()


def mem_available_bytes() -> int:
    return parse_mem_available(_meminfo())


def mem_total_bytes() -> int:
    return parse_meminfo_field(_meminfo(), b"MemTotal")


def load_avg_1m() -> float:
    return os.getloadavg()[0]


def cpu_count() -> int:
    """CPUs this process may run on (a container's cpuset, not the whole machine)."""
    return len(os.sched_getaffinity(0)) or 1


def host_name(configured: str | None) -> str:
    """The configured name (checked by the config model) or the machine's, which must fit
    the same pattern: the manager refuses a report naming any other (config/bounded.py)."""
    name = configured or socket.gethostname()
    if not re.match(HOST_NAME_PATTERN, name):
        raise ConfigError(f"the host name {name!r} does not match {HOST_NAME_PATTERN}: "
                          "set [master] host_name")
    return name


@dataclass(frozen=True, slots=True)
class HostFigures:
    """One measurement of the host: what capacity is computed from and reported with."""

    master_pss_bytes: int
    slots_pss_bytes: tuple[int, ...]
    mem_available_bytes: int
    load_avg_1m: float
    cpus: int
    mem_total_bytes: int = 0


def measure(slots_pss_bytes: Sequence[int]) -> HostFigures:
    """The master's own PSS and the host's figures now; the slots' PSS comes from their beacons."""
    return HostFigures(
        master_pss_bytes=read_memory().pss_bytes,
        slots_pss_bytes=tuple(slots_pss_bytes),
        mem_available_bytes=mem_available_bytes(),
        load_avg_1m=load_avg_1m(),
        cpus=cpu_count(),
        mem_total_bytes=mem_total_bytes(),
    )
