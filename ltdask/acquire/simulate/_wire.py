"""The Merlin simulator's bytes on the wire: buffers sent in order with as few calls as the
socket takes, and the acquisition header of repeated passes of a file."""

from __future__ import annotations

import re
import socket

#: buffers one ``sendmsg`` sends at most (Linux's IOV_MAX)
IOV_MAX = 1024


def send_all(conn: socket.socket, buffers, stopping) -> bool:
    """Send `buffers` (bytes or memoryviews) in order; False where the simulator stops."""
    views = [memoryview(b).cast("B") for b in buffers]
    first = 0
    while first < len(views):
        if stopping():
            return False
        try:
            sent = conn.sendmsg(views[first : first + IOV_MAX])
        except TimeoutError:
            continue
        while sent and sent >= len(views[first]):
            sent -= len(views[first])
            first += 1
        if sent:
            views[first] = views[first][sent:]
    return True


def scaled_hdr(hdr: bytes, repeat: int) -> bytes:
    """The header of `repeat` passes of the file: its frame count and ScanY times `repeat`."""
    text = hdr.decode("latin-1")

    def times(match: re.Match) -> str:
        return f"{match.group(1)}{int(match.group(2)) * repeat}"

    for key in (r"Frames in Acquisition \(Number\):\s*", r"ScanY:\s*"):
        text = re.sub(f"({key})(\\d+)", times, text)
    return text.encode("latin-1")
