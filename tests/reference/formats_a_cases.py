"""K2IS, FRMS6 and DE SEQ files for the LiberTEM reference (issue 17), shared by
``make_formats_a.py`` (LiberTEM's reading, stored) and ``test_formats_a.py`` (ltdask's).

Each case writes its files with the tests' own writers and a fixed seed, so both sides read
the same bytes; ``write(folder)`` returns ``(path, ltdask keywords, LiberTEM keywords)``.
K2IS frames are stored as a SHA-256 of each decoded frame plus a crop across a block and
sector boundary (full frames would be megabytes).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from helpers import frms6files, k2isfiles, seqfiles


def _seq(n, shape, dtype, nav, pad=0, version=5, dark=False, gain=False, sync_offset=0, seed=0):
    def write(folder: Path):
        path, _, _, _ = seqfiles.write_scan(
            folder, n, shape, dtype, seed=seed, dark=dark, gain=gain, version=version, pad=pad
        )
        kw = dict(nav_shape=nav, sync_offset=sync_offset)
        return path, kw, kw

    return write


def _frms6(n, sig, binning, scan, splits, seed=0, offset=True, gain=False, nav=None):
    def write(folder: Path):
        images = frms6files.random_images(n, sig, binning, seed=seed)
        dark = frms6files.random_images(4, sig, binning, seed=seed + 1, high=60)
        hdr = frms6files.write_acquisition(folder, images, dark, binning, scan, splits)
        kw: dict = dict(enable_offset_correction=offset)
        if nav is not None:
            kw["nav_shape"] = nav
        if gain:
            import scipy.io

            g = np.random.default_rng(seed + 2).random(sig) + 0.5
            scipy.io.savemat(folder / "gain.mat", {"GainMap": g})
            kw["gain_map_path"] = str(folder / "gain.mat")
        return hdr, kw, kw

    return write


def _k2is(n, lead, tail, seed=0, nav=None, sync_offset=None):
    def write(folder: Path):
        frames = k2isfiles.random_frames(n, seed=seed)
        gtg = k2isfiles.write_k2is(folder, frames, lead_blocks=lead, tail_blocks=tail)
        kw: dict = {}
        if nav is not None:
            kw["nav_shape"] = nav
        if sync_offset is not None:
            kw["sync_offset"] = sync_offset
        return gtg, kw, kw

    return write


#: id -> (format, writer)
CASES = {
    "seq-u16-dark-gain": ("seq", _seq(12, (7, 9), "<u2", (3, 4), pad=6, dark=True, gain=True)),
    "seq-u8-sync2": ("seq", _seq(12, (5, 6), "<u1", (2, 5), sync_offset=2, seed=1)),
    "seq-u32-v4-insert": ("seq", _seq(6, (4, 3), "<u4", (2, 4), version=4, sync_offset=-2)),
    "seq-dark-only-odd-nav": ("seq", _seq(7, (6, 6), "<u2", (7,), pad=2, dark=True, seed=3)),
    "frms6-bin1-dark": ("frms6", _frms6(12, (8, 6), 1, (3, 4), (5,))),
    "frms6-bin2-dark-3files": ("frms6", _frms6(12, (8, 6), 2, (3, 4), (3, 7), seed=4)),
    "frms6-bin4-nodark": ("frms6", _frms6(6, (16, 10), 4, (2, 3), (), seed=5, offset=False)),
    "frms6-gain-mat": ("frms6", _frms6(6, (8, 6), 1, (2, 3), (2,), seed=6, gain=True)),
    "frms6-scan-2x6": ("frms6", _frms6(12, (8, 6), 1, (2, 6), (6,), seed=7)),
    "k2is-partial-first-and-last": (
        "k2is",
        _k2is(3, (5, 7, 5, 5, 6, 5, 5, 5), (3, 1, 3, 3, 3, 3, 3, 9), seed=8),
    ),
    "k2is-sector-skew-sync1": (
        "k2is",
        _k2is(3, (0, 4, 0, 2, 0, 0, 1, 0), (0,) * 8, seed=9, nav=(2,), sync_offset=1),
    ),
}


def frame_digest(frames: np.ndarray) -> dict:
    """What is stored of K2IS frames: a SHA-256 per frame (uint16 bytes) and a crop."""
    frames = np.asarray(frames).astype(np.uint16)
    return {
        "sha256": np.array([hashlib.sha256(f.tobytes()).hexdigest() for f in frames]),
        "crop": frames[:, 920:940, 1016:1040].copy(),
    }
