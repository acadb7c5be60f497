"""What a test asks a ``distributed`` worker about its memory (``client.run``): importable
by worker processes, so these travel by reference."""

from __future__ import annotations

import os


def memory_state(dask_worker) -> dict:
    """The worker's process id, peak RSS (``VmHWM``) and RSS in bytes (None where there is
    no ``/proc``), its memory limit, and for each file it keeps mapped: the map's address
    and how much of it is resident (``Rss`` of its mapping in ``/proc/self/smaps``)."""
    from ltdask.io.maps import MAPS

    state = {"pid": os.getpid(), "limit": dask_worker.memory_manager.memory_limit}
    state["peak"] = _status_bytes("VmHWM")
    state["rss"] = _status_bytes("VmRSS")
    resident = _mapped_rss()
    state["maps"] = {
        key[0]: (int(buf.ctypes.data), resident.get(key[0], 0))
        for key, (buf, _) in list(MAPS._maps.items())
    }
    return state


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _mapped_rss() -> dict[str, int]:
    """Resident bytes per mapped file path, from ``/proc/self/smaps``."""
    out: dict[str, int] = {}
    path = None
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                fields = line.split()
                if "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
                    path = fields[5] if len(fields) > 5 else None
                elif fields[0] == "Rss:" and path:
                    out[path] = out.get(path, 0) + int(fields[1]) * 1024
    except OSError:
        pass
    return out
