"""Inputs of the detector-correction reference cases: numpy only, deterministic.

Imported by ``make_corrections.py`` (in LiberTEM's environment) and by
``tests/test_corrections.py`` (in ltdask's): both see the same data.
"""

from __future__ import annotations

import numpy as np

NAV = (5, 7)
SIG = (16, 12)


def frames(dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.normal(100, 20, (*NAV, *SIG)).astype(dtype)
    return rng.integers(0, 4000, (*NAV, *SIG)).astype(dtype)


def dark(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(10, 2, SIG).astype(np.float32)


def gain(seed: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.8, 1.2, SIG).astype(np.float32)


def excluded(kind: str) -> np.ndarray:
    """A boolean mask of the excluded pixels."""
    mask = np.zeros(SIG, dtype=bool)
    h, w = SIG
    if kind in ("corners", "mixed"):
        mask[0, 0] = mask[0, w - 1] = mask[h - 1, 0] = mask[h - 1, w - 1] = True
    if kind in ("edges", "mixed"):
        mask[0, 5] = mask[h - 1, 7] = mask[6, 0] = mask[9, w - 1] = True
    if kind in ("interior", "mixed"):
        mask[4, 4] = mask[11, 8] = True
    if kind in ("pairs", "mixed"):
        mask[7, 5] = mask[7, 6] = True  # side by side
        mask[2, 9] = mask[3, 10] = True  # diagonal
    if kind in ("cluster", "mixed"):
        mask[12:15, 2:5] = True  # a 3x3 block: its centre is repaired from nothing ...
        mask[13, 3] = False  # ... so leave the centre in: a ring of 8 around a good pixel
    return mask


def roi(kind: str) -> np.ndarray | None:
    if kind == "none":
        return None
    r = np.random.default_rng(7).random(NAV) > 0.5
    r[0, 0] = True
    return r


#: (id, data dtype, dark?, gain?, excluded kind, roi kind)
CASES = [
    ("dark-f32", "float32", True, False, "none", "none"),
    ("gain-f32", "float32", False, True, "none", "none"),
    ("dark-gain-u16", "uint16", True, True, "none", "none"),
    ("corners-f32", "float32", False, False, "corners", "none"),
    ("edges-u16", "uint16", False, False, "edges", "none"),
    ("interior-f32", "float32", True, False, "interior", "none"),
    ("pairs-f32", "float32", False, True, "pairs", "none"),
    ("cluster-u16", "uint16", True, True, "cluster", "none"),
    ("mixed-f32-roi", "float32", True, True, "mixed", "random"),
    ("mixed-u16", "uint16", True, True, "mixed", "none"),
]

#: the shipped UDFs each case runs, by name: (LiberTEM import, ltdask name, parameters)
UDFS = ["sum", "sumsig", "stddev", "ring", "com", "pick"]
