"""``ltdask simulate``: detectors replaying a file on this machine's loopback interface.

For trying live processing (:mod:`ltdask.acquire`) without a detector, and for the tests:
each subcommand serves one detector's protocol on 127.0.0.1 only, bounded in frames and
time, with fault modes (dropped, duplicated and reordered frames, a cut connection, a
stall).
"""

from __future__ import annotations

import click


@click.group()
def simulate() -> None:
    """Replay a recorded scan as a live detector on 127.0.0.1 (for ltdask.acquire)."""
