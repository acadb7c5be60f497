"""Inputs of the LiberTEM comparison for `LogsumUDF`, `FEMUDF` and `CrystallinityUDF`.

Shared (numpy only) by ``make_more_udfs.py``, which runs them through LiberTEM 0.16, and by
``tests/udf/test_more_udfs.py``, which runs them through ltdask.
"""

from __future__ import annotations

import numpy as np

#: id -> (udf class name, parameters, dtype, nav shape, sig shape, roi kind)
CASES = {
    "logsum-f32": ("LogsumUDF", {}, "float32", (4, 5), (8, 7), None),
    "logsum-u16-roi": ("LogsumUDF", {}, "uint16", (3, 4), (6, 6), "random"),
    "logsum-1frame": ("LogsumUDF", {}, "float32", (1,), (5, 9), None),
    "logsum-roi-none-selected": ("LogsumUDF", {}, "uint16", (2, 3), (4, 4), "none"),
    "fem-f32": (
        "FEMUDF",
        {"center": (4, 5), "rad_in": 1, "rad_out": 3},
        "float32",
        (4, 5),
        (9, 11),
        None,
    ),
    "fem-u16-roi-fractional": (
        "FEMUDF",
        {"center": (3.5, 2.25), "rad_in": 0.5, "rad_out": 4},
        "uint16",
        (5, 3),
        (7, 8),
        "random",
    ),
    "fem-1d-nav": (
        "FEMUDF",
        {"center": (2, 6), "rad_in": 2, "rad_out": 5},
        "float32",
        (7,),
        (6, 10),
        None,
    ),
    "fem-empty-ring": (
        "FEMUDF",
        {"center": (3, 3), "rad_in": 3, "rad_out": 2},
        "float32",
        (2, 2),
        (6, 6),
        None,
    ),
    "fem-1frame": (
        "FEMUDF",
        {"center": (2, 2), "rad_in": 0, "rad_out": 2},
        "uint16",
        (1, 1),
        (5, 5),
        None,
    ),
    "fem-roi-none-selected": (
        "FEMUDF",
        {"center": (2, 2), "rad_in": 0, "rad_out": 2},
        "float32",
        (3, 2),
        (5, 5),
        "none",
    ),
    "cryst-f32-real-mask": (
        "CrystallinityUDF",
        {"rad_in": 1, "rad_out": 3, "real_center": (4, 5), "real_rad": 2},
        "float32",
        (3, 4),
        (8, 10),
        None,
    ),
    "cryst-u16-odd-roi": (
        "CrystallinityUDF",
        {"rad_in": 0.5, "rad_out": 2.5, "real_center": None, "real_rad": None},
        "uint16",
        (5, 3),
        (9, 7),
        "random",
    ),
    "cryst-inner-larger": (
        "CrystallinityUDF",
        {"rad_in": 3, "rad_out": 1.5, "real_center": (2.5, 3), "real_rad": 1.5},
        "float32",
        (2, 3),
        (7, 8),
        None,
    ),
    "cryst-1frame": (
        "CrystallinityUDF",
        {"rad_in": 1, "rad_out": 4, "real_center": None, "real_rad": 2},
        "float32",
        (1,),
        (8, 8),
        None,
    ),
    "cryst-roi-none-selected": (
        "CrystallinityUDF",
        {"rad_in": 1, "rad_out": 3, "real_center": None, "real_rad": None},
        "uint16",
        (2, 2),
        (6, 6),
        "none",
    ),
}


def data(case_id: str) -> np.ndarray:
    """The case's frames, nav + sig shaped (seeded: the same on both sides)."""
    _, _, dtype, nav, sig, _ = CASES[case_id]
    seed = sum(map(ord, case_id))
    rng = np.random.default_rng(seed)
    shape = (*nav, *sig)
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, 1000, size=shape).astype(dtype)
    # a bright spot on a skewed background: log-scaling and spreads both matter
    frames = rng.lognormal(1.0, 1.0, size=shape).astype(dtype)
    frames[(..., sig[0] // 2, sig[1] // 2)] += 500
    return frames


def roi(case_id: str) -> np.ndarray | None:
    """The case's ROI (nav shaped, bool) or None."""
    _, _, _, nav, _, kind = CASES[case_id]
    if kind is None:
        return None
    if kind == "none":
        return np.zeros(nav, dtype=bool)
    rng = np.random.default_rng(sum(map(ord, case_id)) + 1)
    selected = rng.random(nav) < 0.5
    selected.flat[0] = True
    return selected
