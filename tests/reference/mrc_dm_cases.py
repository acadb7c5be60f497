"""Inputs of the MRC and DM reference cases: files written by ``mrcfile`` and by the tests'
DM writer from deterministic numpy data.

Imported by ``make_mrc_dm.py`` (in LiberTEM's environment) and by
``tests/formats/test_mrc_dm_reference.py`` (in ltdask's): both write the same files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

NAV = (5, 7)
SIG = (9, 11)

#: case id -> (format, dtype, how the file is written)
CASES = {
    "mrc-stack-u16": ("mrc", "uint16", {}),
    "mrc-stack-f32": ("mrc", "float32", {}),
    "dm4-4d-u16": ("dm", "uint16", dict(version=4)),
    "dm3-4d-f32": ("dm", "float32", dict(version=3)),
    "dm4-4d-u16-odd-offset": ("dm", "uint16", dict(version=4, pad=1)),
    "dm4-stack-i16": ("dm", "int16", dict(version=4, stack=True)),
}


def data(dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return np.round(rng.normal(100, 30, (*NAV, *SIG)), 2).astype(dtype)
    return rng.integers(0, 4000, (*NAV, *SIG)).astype(dtype)


def write(case: str, folder: Path) -> tuple[Path, dict]:
    """Write the case's file into `folder`: ``(path, nav_shape keyword for the readers)``."""
    from helpers.dmfiles import write_dm
    from helpers.mrcfiles import write_mrc

    fmt, dtype, how = CASES[case]
    values = data(dtype)
    if fmt == "mrc":
        path = write_mrc(folder / f"{case}.mrc", values.reshape(-1, *SIG))
        return path, dict(nav_shape=NAV)
    how = dict(how)
    if how.pop("stack", False):
        path = write_dm(folder / f"{case}.dm4", values.reshape(-1, *SIG), **how)
        return path, dict(nav_shape=NAV)
    return write_dm(folder / f"{case}.dm{how['version']}", values, **how), {}
