"""Inputs of the Analysis API reference cases, shared by the LiberTEM generator
(``make_analysis.py``) and ``tests/test_analysis.py``.

numpy only: every array comes from a seeded generator, so both sides build the same data.
Each case names an input (``DATA``), a ``create_*_analysis`` method with its keyword
arguments, and an optional ROI (``ROIS``).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CASES",
    "DATA",
    "ROIS",
    "case_by_name",
    "make_data",
    "make_roi",
    "mask_factories",
    "resolve_kwargs",
]

#: name -> (shape, dtype, seed)
DATA = {
    "f32": ((5, 7, 16, 18), "float32", 1),
    "u16": ((6, 5, 12, 12), "uint16", 2),
    "f64": ((4, 4, 9, 11), "float64", 3),
    "c64": ((4, 6, 10, 9), "complex64", 4),
    "nav1": ((8, 12, 12), "float32", 5),
    "nav3": ((2, 3, 4, 8, 8), "float32", 6),
    "sparse": ((6, 6, 16, 16), "float32", 7),
}

#: name -> (nav shape, seed)
ROIS = {
    "f32": ((5, 7), 11),
    "u16": ((6, 5), 12),
    "c64": ((4, 6), 13),
    "nav1": ((8,), 14),
    "sparse": ((6, 6), 15),
}


def make_data(name: str) -> np.ndarray:
    """The input array called ``name`` in `DATA`."""
    shape, dtype, seed = DATA[name]
    rng = np.random.default_rng(seed)
    if name == "sparse":
        # mostly zeros with a bright spot: exercises zero sums and log visualisation
        data = np.zeros(shape, dtype=dtype)
        mask = rng.random(shape) < 0.03
        data[mask] = rng.integers(1, 50, size=int(mask.sum()))
        data[..., 8, 8] += 100
        data[0, 0] = 0  # one empty frame
        return data
    if dtype == "uint16":
        return rng.integers(0, 1000, size=shape).astype(dtype)
    if dtype == "complex64":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    return (rng.random(shape) * 100).astype(dtype)


def make_roi(name: str) -> np.ndarray:
    """The boolean ROI called ``name`` in `ROIS` (about half the positions, never none)."""
    shape, seed = ROIS[name]
    rng = np.random.default_rng(seed)
    roi = rng.random(shape) < 0.5
    roi.reshape(-1)[0] = True
    return roi


def mask_factories(name: str, sig_shape):
    """Mask factories for ``create_mask_analysis`` cases (plain numpy, picklable)."""
    h, w = sig_shape
    rng = np.random.default_rng(99)
    a = rng.random((h, w)).astype(np.float32)
    b = np.zeros((h, w), dtype=np.float64)
    b[1:4, 2:5] = 1
    if name == "two":
        return [lambda: a, lambda: b]
    if name == "stack":
        stack = np.stack([a, b.astype(np.float32), np.ones((h, w), np.float32)])
        return lambda: stack
    if name == "complex":
        c = (a + 1j * b).astype(np.complex64)
        return [lambda: c]
    raise KeyError(name)


#: (case name, data name, method, keyword arguments, roi name or None)
CASES = [
    ("ring_default", "f32", "create_ring_analysis", {}, None),
    ("ring_params", "f32", "create_ring_analysis", dict(cx=7.5, cy=9, ri=2, ro=6.5), None),
    ("ring_roi", "f32", "create_ring_analysis", dict(cx=8, cy=8, ri=3, ro=7), "f32"),
    ("ring_u16", "u16", "create_ring_analysis", dict(cx=5, cy=6, ri=1.5, ro=5), None),
    ("ring_nav1", "nav1", "create_ring_analysis", dict(ri=2, ro=5), "nav1"),
    ("ring_complex", "c64", "create_ring_analysis", dict(ri=1, ro=4), None),
    ("disk_default", "f32", "create_disk_analysis", {}, None),
    ("disk_params", "u16", "create_disk_analysis", dict(cx=4.5, cy=7, r=3.2), "u16"),
    ("disk_f64", "f64", "create_disk_analysis", dict(cx=5, cy=4, r=3), None),
    ("disk_complex_roi", "c64", "create_disk_analysis", dict(r=3), "c64"),
    ("point_default", "f32", "create_point_analysis", {}, None),
    ("point_xy", "u16", "create_point_analysis", dict(x=3, y=8), "u16"),
    ("point_nav1", "nav1", "create_point_analysis", dict(x=11, y=0), None),
    ("mask_two", "f32", "create_mask_analysis", dict(factories="two"), None),
    ("mask_two_roi", "u16", "create_mask_analysis", dict(factories="two"), "u16"),
    (
        "mask_stack",
        "f64",
        "create_mask_analysis",
        dict(factories="stack", mask_count=3, mask_dtype="float32"),
        None,
    ),
    ("mask_dtype", "u16", "create_mask_analysis", dict(factories="two", dtype="float64"), None),
    ("mask_complex", "f32", "create_mask_analysis", dict(factories="complex"), None),
    ("sum", "f32", "create_sum_analysis", {}, None),
    ("sum_roi", "u16", "create_sum_analysis", {}, "u16"),
    ("sum_f64", "f64", "create_sum_analysis", {}, None),
    ("sum_complex", "c64", "create_sum_analysis", {}, None),
    ("sum_sparse", "sparse", "create_sum_analysis", {}, None),
    ("pick_2d", "f32", "create_pick_analysis", dict(x=3, y=4), None),
    ("pick_u16", "u16", "create_pick_analysis", dict(x=4, y=0), None),
    ("pick_nav1", "nav1", "create_pick_analysis", dict(x=5), None),
    ("pick_nav3", "nav3", "create_pick_analysis", dict(x=2, y=1, z=1), None),
    ("pick_complex", "c64", "create_pick_analysis", dict(x=1, y=2), None),
    ("com_default", "f32", "create_com_analysis", {}, None),
    (
        "com_params",
        "f32",
        "create_com_analysis",
        dict(cx=8.5, cy=7, mask_radius=5.5, flip_y=True, scan_rotation=33.0),
        None,
    ),
    ("com_roi", "f32", "create_com_analysis", dict(mask_radius=6), "f32"),
    ("com_u16", "u16", "create_com_analysis", dict(cx=6, cy=6, scan_rotation=-90.0), None),
    (
        "com_annular",
        "sparse",
        "create_com_analysis",
        dict(cx=8, cy=8, mask_radius=7, mask_radius_inner=2),
        "sparse",
    ),
    ("com_sparse", "sparse", "create_com_analysis", dict(cx=8, cy=8, mask_radius=3), None),
    ("radial_default", "u16", "create_radial_fourier_analysis", {}, None),
    (
        "radial_params",
        "f32",
        "create_radial_fourier_analysis",
        dict(cx=8, cy=8.5, ri=1, ro=7, n_bins=3, max_order=5),
        "f32",
    ),
    (
        "radial_sparse",
        "sparse",
        "create_radial_fourier_analysis",
        dict(cx=8, cy=8, ri=0, ro=8, n_bins=2, max_order=4, use_sparse=True),
        None,
    ),
]


def case_by_name(name: str):
    """The `CASES` entry called ``name``."""
    for case in CASES:
        if case[0] == name:
            return case
    raise KeyError(name)


def resolve_kwargs(method: str, kwargs: dict, sig_shape) -> dict:
    """``kwargs`` with the factories' name replaced by the factories, dtype names by dtypes."""
    out = dict(kwargs)
    if "factories" in out:
        out["factories"] = mask_factories(out["factories"], sig_shape)
    for key in ("mask_dtype", "dtype"):
        if key in out:
            out[key] = np.dtype(out[key])
    return out
