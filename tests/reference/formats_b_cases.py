"""The EMPAD, NanoMEGAS BLO and TVIPS files of the format reference cases (numpy only).

Shared by ``make_formats_b.py`` (which reads them with LiberTEM 0.16 and stores its decoded
frames in ``data/formats/<format>.npz``) and ``test_formats_b.py`` (which writes the same
files again, with the same writers and seeds, and reads them with ltdask). A case is
``Case(id, write)``: ``write(folder)`` writes the files and returns a `Load`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from helpers.blofiles import blo_frames, write_blo
from helpers.empadfiles import empad_frames, write_empad
from helpers.tvipsfiles import scan_positions, tvips_frames, write_tvips

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "formats")


@dataclass(frozen=True)
class Load:
    """How to open a case's files: LiberTEM's ``ctx.load(lt_type, **lt_kwargs)`` and
    ltdask's ``ltdask.open(path, **kwargs)``."""

    lt_type: str
    lt_kwargs: dict
    path: str
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Case:
    id: str
    write: Callable[[Path], Load]

    @property
    def format(self) -> str:
        return self.id.split("-")[0]


def _empad(nav, n=None, seed=0, kind="scan", sync=None, via_raw=False, cut=0, **xml):
    def write(folder: Path) -> Load:
        count = int(np.prod(nav)) if n is None else n
        frames = empad_frames(count, seed=seed, sparse=True)
        xml_path = write_empad(folder, frames, nav, kind=kind, cut_bytes=cut, **xml)
        extra = {} if sync is None else {"sync_offset": sync}
        if via_raw:
            raw = [p for p in os.listdir(folder) if p.endswith(".raw")][0]
            path = str(Path(folder) / raw)
            extra["nav_shape"] = tuple(nav)
            # a .raw file is raw data to ltdask.open unless told otherwise
            return Load("empad", {"path": path, **extra}, path, {"format": "empad", **extra})
        path = str(xml_path)
        return Load("empad", {"path": path, **extra}, path, extra)

    return write


def _blo(nav, edge, bits=8, seed=0, sync=None, records=None, cut=0):
    def write(folder: Path) -> Load:
        frames = blo_frames(int(np.prod(nav)), edge, bits=bits, seed=seed)
        path = str(write_blo(Path(folder) / "scan.blo", frames, nav, bits, cut, records))
        extra = {} if sync is None else {"sync_offset": sync}
        return Load("blo", {"path": path, **extra}, path, extra)

    return write


def _tvips(nav, lead=0, tail=0, per_file=12, bits=16, sig=(9, 11), seed=0, given=None, **kw):
    def write(folder: Path) -> Load:
        n = lead + int(np.prod(nav)) + tail
        frames = tvips_frames(n, sig, bits=bits, seed=seed)
        positions = scan_positions(nav, lead, tail) if len(nav) == 2 else None
        paths = write_tvips(folder, frames, per_file, positions=positions, **kw)
        extra = dict(given or {})
        return Load("tvips", {"path": str(paths[0]), **extra}, str(paths[-1]), extra)

    return write


CASES = [
    Case("empad-scan", _empad((3, 4), fov=(9e-8, 1.6e-7), pixelsize=2.5e-11)),
    # the acquire parameters do not fit the file: LiberTEM takes the search parameters
    Case("empad-search", _empad((2, 3), acquire=(128, 128), search=(2, 3), pix=False)),
    Case("empad-series", _empad((5,), kind="series", seed=1)),
    Case("empad-sync+2", _empad((2, 3), sync=2, seed=2)),
    Case("empad-sync-3", _empad((2, 3), sync=-3, seed=3)),
    Case("empad-one-frame", _empad((1, 1), seed=4)),
    # an interrupted acquisition: the last frame is cut inside its pixels
    Case("empad-partial-raw", _empad((2, 3), seed=5, via_raw=True, cut=3000)),
    Case("blo-u8", _blo((3, 5), 9)),
    Case("blo-u16", _blo((4, 3), 7, bits=16, seed=1)),
    Case("blo-sync-2", _blo((2, 3), 8, seed=2, sync=-2)),
    Case("blo-sync+1", _blo((3, 3), 6, seed=3, sync=1)),
    Case("blo-one-frame", _blo((1, 1), 5, seed=4)),
    # three files (12, 12, 1 frames), 3 lead-in frames before a 4 x 5 scan, 2 after it
    Case("tvips-scan", _tvips((4, 5), lead=3, tail=2)),
    Case("tvips-u8-odd-header", _tvips((3, 7), lead=1, bits=8, frame_header_bytes=77, seed=1)),
    Case(
        "tvips-given", _tvips((2, 6), lead=2, given={"nav_shape": (3, 4), "sync_offset": 1}, seed=2)
    ),
    Case("tvips-v1", _tvips((7,), per_file=4, version=1, seed=3, sig=(6, 5))),
]


def data_file(fmt: str) -> str:
    return os.path.join(DATA, f"{fmt}.npz")
