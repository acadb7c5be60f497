"""Datasets, ROIs and numpy references for the UDF engine tests.

A *case* is data (a numpy array, nav dims first) opened two ways: in memory
(``ltdask.from_array``) and as a raw file written in ``tmp_path`` (``ltdask.open_raw``).
Partitions are forced small with ``ltdask.partition-bytes`` so that tiny scans have several.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import dask
import numpy as np
import xarray as xr

import ltdask
from ltdask.io import ArrayDataSet, RawDataSet

ROI_KINDS = ("none", "random", "all-false", "all-true")


def partitions(nbytes: int | str = 400, min_partitions: int = 1):
    """dask config for partitions of about `nbytes` (counted as float32 pixels)."""
    return dask.config.set(
        {"ltdask.partition-bytes": nbytes, "ltdask.min-partitions": min_partitions}
    )


def random_data(shape: Sequence[int], dtype="float32", seed: int = 0) -> np.ndarray:
    """Small exact values (integers) so that sums in any order agree exactly."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, size=tuple(shape))
    return values.astype(dtype)


def open_dataset(kind: str, data: np.ndarray, tmp_path, sig_dims: int = 2, **raw_kwargs):
    """`data` as an in-memory (``"memory"``) or raw-file (``"raw"``) dataset.

    Partitions are cut with the dask config active when this is called.
    """
    if kind == "memory":
        ds = ltdask.from_array(data, sig_dims=sig_dims)
    elif kind == "raw":
        path = tmp_path / f"data-{data.dtype.str.replace('<', 'l').replace('>', 'b')}.raw"
        n = 0
        while path.exists():
            n += 1
            path = tmp_path / f"data-{n}.raw"
        data.tofile(path)
        ds = ltdask.open_raw(
            path,
            nav_shape=data.shape[:-sig_dims],
            sig_shape=data.shape[-sig_dims:],
            dtype=data.dtype,
            **raw_kwargs,
        )
    else:
        raise ValueError(kind)
    ds.get_partitions()  # fix the partition grid under the current config
    return ds


def make_roi(kind: str, nav_shape: Sequence[int], seed: int = 1) -> np.ndarray | None:
    nav_shape = tuple(nav_shape)
    if kind == "none":
        return None
    if kind == "all-false":
        return np.zeros(nav_shape, dtype=bool)
    if kind == "all-true":
        return np.ones(nav_shape, dtype=bool)
    if kind == "random":
        rng = np.random.default_rng(seed)
        roi = rng.random(nav_shape) < 0.5
        if roi.size > 1:
            # never trivially all or nothing
            roi.flat[0] = True
            roi.flat[-1] = False
        return roi
    raise ValueError(kind)


def roi_mask(roi: np.ndarray | None, nav_shape: Sequence[int]) -> np.ndarray:
    """The ROI as a nav-shaped boolean array (all True for None)."""
    if roi is None:
        return np.ones(tuple(nav_shape), dtype=bool)
    return np.asarray(roi, dtype=bool).reshape(tuple(nav_shape))


def nav_dims(nav_ndim: int) -> tuple[str, ...]:
    if nav_ndim == 2:
        return ("scan_y", "scan_x")
    if nav_ndim == 1:
        return ("frame",)
    return tuple(f"nav_{i}" for i in range(nav_ndim))


def sig_dims(sig_ndim: int) -> tuple[str, ...]:
    return ("det_y", "det_x") if sig_ndim == 2 else tuple(f"sig_{i}" for i in range(sig_ndim))


def fill_nav(values: np.ndarray, mask: np.ndarray, dtype) -> np.ndarray:
    """Nav-shaped `values` with ltdask's fill value outside `mask` (nav-shaped bool)."""
    dtype = np.dtype(dtype)
    out = np.array(values, dtype=dtype, copy=True)
    if dtype.kind in "fc":
        out[~mask] = np.nan
    elif dtype.kind == "b":
        out[~mask] = False
    elif dtype.kind in "SU":
        out[~mask] = ""
    elif dtype.kind == "O":
        out[~mask] = None
    else:
        out[~mask] = 0
    return out


def assert_same(actual, expected, *, exact: bool = False, rtol: float = 1e-5):
    """NaN-aware comparison with an informative message; dtype kinds must agree."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind in "fc" or actual.dtype.kind in "fc":
        if exact:
            np.testing.assert_array_equal(actual, expected)
        else:
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


def check_variable(
    res: xr.Dataset,
    name: str,
    expected,
    valid,
    dims: Sequence[str],
    dtype=None,
    **kw,
):
    """`res[name]` has `dims`, the values `expected` and the coordinate ``name_valid``
    equal to `valid` (broadcast to the variable's shape)."""
    var = res[name]
    assert var.dims == tuple(dims), (name, var.dims, tuple(dims))
    if dtype is not None:
        assert var.dtype == np.dtype(dtype), (name, var.dtype, dtype)
    assert_same(var.values, expected, **kw)
    coord = res.coords[f"{name}_valid"]
    assert coord.dims == tuple(dims), (name, coord.dims)
    assert coord.dtype == bool
    np.testing.assert_array_equal(coord.values, np.broadcast_to(valid, var.shape))


def selected(data: np.ndarray, roi, nav_ndim: int) -> np.ndarray:
    """The frames inside the ROI, flat nav, C order."""
    nav_shape = data.shape[:nav_ndim]
    flat = data.reshape((math.prod(nav_shape), *data.shape[nav_ndim:]))
    return flat[roi_mask(roi, nav_shape).reshape(-1)]


# -- datasets with hooks (importable, so they pickle into worker processes) -----------------


class SlicedArrayDataSet(ArrayDataSet):
    """An in-memory dataset that accepts signal slices of any size, so that a small
    ``ltdask.tile-bytes`` cuts even tiny frames into several slices."""

    def get_min_sig_size(self) -> int:
        return 1


class PartialFrameArrayDataSet(ArrayDataSet):
    """Insists on tiles of at most `max_rows` signal rows, even for whole-frame consumers."""

    max_rows = 1

    def need_decode(self, read_dtype, roi=None) -> bool:
        return True  # like a format that always decodes its fixed-size tiles

    def adjust_tileshape(self, tileshape, roi=None):
        return (tileshape[0], min(tileshape[1], self.max_rows), *tileshape[2:])


class CountingRawDataSet(RawDataSet):
    """A raw dataset that appends one line per tile it hands out to ``log_path``:
    ``scheme_idx first_position n_frames`` with positions in flat nav coordinates."""

    def __init__(self, *args, log_path, **kwargs):
        super().__init__(*args, **kwargs)
        self.log_path = str(log_path)

    def iter_flat_tiles(self, positions, scheme, dtype, block=None):
        for data, first, s, flat in super().iter_flat_tiles(positions, scheme, dtype, block):
            n = data.shape[0]
            with open(self.log_path, "a") as f:
                f.write(f"{s} {int(positions[first])} {n} {int(positions[first + n - 1])}\n")
            yield data, first, s, flat


def read_log(path) -> np.ndarray:
    """The ``(scheme_idx, first_position, n_frames, last_position)`` rows of a counting log."""
    try:
        text = open(path).read().split()
    except FileNotFoundError:
        return np.zeros((0, 4), dtype=np.int64)
    return np.array(text, dtype=np.int64).reshape((-1, 4))
