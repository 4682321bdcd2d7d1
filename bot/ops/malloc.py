"""How many heaps glibc's malloc may keep for a long-running process.

glibc gives each thread that allocates its own heap ("arena"), up to eight per
CPU, and keeps what it frees there for reuse. The bot's threads are short-lived
helpers (SQLite connections, name lookups, a chart's drawing): each leaves an
arena behind, partly used, and the process's peak resident memory grows by
megabytes that no Python object holds. Two arenas serve an event loop and its
helpers without contention worth measuring.

An operator's own `MALLOC_ARENA_MAX` wins: glibc read it at start.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: glibc's `M_ARENA_MAX` parameter of `mallopt` (malloc.h)
M_ARENA_MAX = -8
ARENAS = 2


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas at `arenas`; call before the process starts a
    thread. False where it does not apply (not Linux with glibc, or the
    environment already sets it) or glibc refused."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        # glibc's soname (`ctypes.util.find_library` would run a process to find it)
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and other C libraries: no glibc, no mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
