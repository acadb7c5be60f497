"""K2IS, FRMS6 and DE SEQ scans for ``bench_formats.py --detectors`` (issue 17), each next to
a raw uint16 file of the same frames (frame count and shape), written once to ``--dir`` by
the tests' writers (``tests/helpers``), frame block by frame block:

* ``k2is 12-bit``: 8 sector files, 1860 x 2048 frames (time series, shutter open from the
  first frame); decoded from 12-bit blocks tile by tile;
* ``frms6 + dark``: 264 x 264 frames (binning 1) in 4 signal files and 50 dark frames; read
  with the dark frame subtracted (the default: float32 frames);
* ``seq u16``: 512 x 512 frames with an 8-byte timestamp after each (views of the file);
  ``seq u16 + dark/gain``: the same file with ``.dark.mrc``/``.gain.mrc`` references.

Each pair is ``(name, opener)`` with the raw file as ``"<format>: raw u16"``.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

import ltdask

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from helpers import frms6files, k2isfiles, seqfiles  # noqa: E402

GIB = 2**30
K2IS_SIG = (1860, 2048)
FRMS6_SIG = (264, 264)
SEQ_SIG = (512, 512)


def _frames(seed: int, n: int, sig) -> np.ndarray:
    return np.random.default_rng([2026, seed]).integers(0, 4096, (n, *sig), dtype=np.uint16)


def _done(path: str) -> bool:
    return os.path.exists(path + ".done")


def _mark(path: str) -> None:
    open(path + ".done", "w").close()


def write_k2is(folder: str, gib: float) -> tuple[str, str, int]:
    n = max(2, int(gib * GIB // (math.prod(K2IS_SIG) * 2)))
    gtg = os.path.join(folder, f"k2is_{n}_.gtg")
    raw = os.path.join(folder, f"k2is_{n}.raw")
    if not _done(gtg):
        print(f"  writing {n} K2IS frames", file=sys.stderr)
        stem = gtg[: -len(".gtg")]
        sectors = [open(f"{stem}{s + 1}.bin", "wb") for s in range(8)]
        with open(raw, "wb") as r:
            for i in range(n):
                frame = _frames(i, 1, K2IS_SIG)[0]
                frame.tofile(r)
                for s, f in enumerate(sectors):
                    f.write(k2isfiles.frame_blocks(frame, s, 100 + i, 5000 + 32 * i, True))
        for f in sectors:
            f.close()
        with open(gtg, "wb") as f:
            f.write(k2isfiles.dm4({"Acquisition": {"Frames": n}}))
        _mark(gtg)
    return gtg, raw, n


def write_frms6(folder: str, gib: float) -> tuple[str, str, int]:
    side = int(math.sqrt(gib * GIB // (math.prod(FRMS6_SIG) * 2)))
    n = side * side
    hdr = os.path.join(folder, f"frms6_{n}.hdr")
    raw = os.path.join(folder, f"frms6_{n}.raw")
    if not _done(hdr):
        print(f"  writing {n} FRMS6 frames", file=sys.stderr)
        stem = hdr[: -len(".hdr")]
        frms6files.write_hdr(hdr, n, (side, side), 1, dark_frames=50)
        dark = _frames(10**9, 50, FRMS6_SIG) // 16
        with open(f"{stem}_000.frms6", "wb") as f:
            f.write(frms6files.frms6_file(frms6files.fold(dark)))
        bounds = np.linspace(0, n, 5).astype(int)
        with open(raw, "wb") as r:
            for k in range(4):
                with open(f"{stem}_{k + 1:03d}.frms6", "wb") as f:
                    for j, a in enumerate(range(bounds[k], bounds[k + 1], 512)):
                        b = min(a + 512, bounds[k + 1])
                        images = _frames(a, b - a, FRMS6_SIG)
                        images.tofile(r)
                        data = frms6files.frms6_file(frms6files.fold(images), False)
                        f.write(data if j == 0 else data[1024:])
        _mark(hdr)
    return hdr, raw, n


def write_seq(folder: str, gib: float) -> tuple[str, str, int]:
    n = int(gib * GIB // (math.prod(SEQ_SIG) * 2))
    path = os.path.join(folder, f"seq_{n}.seq")
    raw = os.path.join(folder, f"seq_{n}.raw")
    if not _done(path):
        print(f"  writing {n} SEQ frames", file=sys.stderr)
        slot = math.prod(SEQ_SIG) * 2 + 8
        with open(path, "wb") as f, open(raw, "wb") as r:
            f.write(seqfiles.seq_header(SEQ_SIG[1], SEQ_SIG[0], 16, n, slot))
            stamp = bytes(8)
            for a in range(0, n, 256):
                frames = _frames(a, min(256, n - a), SEQ_SIG)
                frames.tofile(r)
                f.write(b"".join(frame.tobytes() + stamp for frame in frames))
        refs = os.path.join(folder, f"refs_{n}.seq")
        if not os.path.exists(refs):
            os.symlink(path, refs)
        rng = np.random.default_rng(1)
        seqfiles.write_mrc(refs + ".dark.mrc", rng.random(SEQ_SIG) * 40)
        seqfiles.write_mrc(refs + ".gain.mrc", 0.5 + rng.random(SEQ_SIG))
        _mark(path)
    return path, raw, n


def entries(folder: str, gib: float, only=None) -> dict:
    """name -> opener; each format next to ``"<format>: raw u16"`` of the same frames."""
    os.makedirs(folder, exist_ok=True)
    out: dict = {}
    if not only or any(o in "k2is 12-bit" for o in only):
        gtg, raw, n = write_k2is(folder, gib)
        out["k2is: raw u16"] = lambda: ltdask.open_raw(raw, (n,), K2IS_SIG, "uint16")
        out["k2is 12-bit"] = lambda: ltdask.open_k2is(gtg)
    if not only or any(o in "frms6 + dark" for o in only):
        hdr, raw6, n6 = write_frms6(folder, gib)
        out["frms6: raw u16"] = lambda: ltdask.open_raw(raw6, (n6,), FRMS6_SIG, "uint16")
        out["frms6 + dark"] = lambda: ltdask.open_frms6(hdr)
    if not only or any(o in "seq u16" for o in only):
        seq, raws, ns = write_seq(folder, gib)
        refs = os.path.join(folder, f"refs_{ns}.seq")
        out["seq: raw u16"] = lambda: ltdask.open_raw(raws, (ns,), SEQ_SIG, "uint16")
        out["seq u16"] = lambda: ltdask.open_seq(seq, nav_shape=(ns,))
        out["seq u16 + dark/gain"] = lambda: ltdask.open_seq(refs, nav_shape=(ns,))
    return out


def partner(name: str) -> str:
    """The raw baseline of an entry."""
    return name.split(" ")[0].rstrip(":") + ": raw u16"
