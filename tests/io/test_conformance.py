"""Every dataset format through the same checks: shapes and dtypes, values against the numpy
truth, every tile shape, sync_offset, ROI, partial tiles and partitions, pickling, every dask
scheduler and the bad inputs every file format shares.

The checks are ltdask's conformance kit, `ltdask.testing` (which plug-in formats run too);
the formats are the table in ``tests/helpers/formatfiles.py``: a new format is a row there.
"""

from __future__ import annotations

import inspect

import dask
import numpy as np
import pytest
from helpers.formatfiles import FILE_FORMAT_PARAMS, FORMAT_PARAMS, FORMATS, NAV

import ltdask
from ltdask.io import registry
from ltdask.testing import (
    COMMON_BAD_INPUTS,
    SMALL_PARTITIONS,
    check_bad_input,
    check_pickle,
    check_registered,
    check_roi,
    check_shape_and_dtype,
    check_sync_offset,
    check_tile_shapes,
    check_values,
    roi_for,
    takes_sync_offset,
)
from ltdask.udf import SumSigUDF

every_format = pytest.mark.parametrize("fmt", FORMAT_PARAMS)


def close(actual, expected):
    """Sums in the UDFs' float32 buffers against float64 numpy sums."""
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-3)


@every_format
def test_shape_and_dtype(fmt, tmp_path):
    ds, data = fmt.open(tmp_path)
    check_shape_and_dtype(ds, data)
    assert tuple(ds.shape.nav) == NAV and tuple(ds.shape.sig) == fmt.sig
    assert ds.dims == ("scan_y", "scan_x", "det_y", "det_x")


@every_format
def test_values(fmt, tmp_path):
    """to_dask as it is and as float64, in tiny partitions and in chunks that cut frames."""
    ds, data = fmt.open(tmp_path)
    check_values(ds, data)


@every_format
def test_tile_shapes(fmt, tmp_path):
    """Every tile the negotiation can choose holds the written values, once."""
    ds, data = fmt.open(tmp_path)
    shapes = check_tile_shapes(ds, data)
    assert len(shapes) > 1, shapes  # the consumers make it choose more than one


@every_format
def test_sync_offset(fmt, tmp_path):
    if not takes_sync_offset(fmt.opener):
        pytest.skip(f"{fmt.opener.__name__} takes no sync_offset")
    data = fmt.data()
    target, kwargs = fmt.write_to(tmp_path, data)
    # the scan shape stays (a DECTRIS scan shape in the file is not used with an offset)
    if "nav_shape" in inspect.signature(fmt.opener).parameters:
        kwargs.setdefault("nav_shape", NAV)
    base = fmt.opener(target, **kwargs).sync_offset  # (TVIPS finds the scan's start)
    check_sync_offset(lambda **k: fmt.opener(target, **kwargs, **k), data, base=base)


@every_format
def test_roi(fmt, tmp_path):
    ds, data = fmt.open(tmp_path)
    check_roi(ds, data)


@every_format
def test_partial_tiles_and_partitions(fmt, tmp_path):
    """Partitions and tiles that do not divide the scan (and cut the frame where the format
    allows) give the same results as numpy."""
    with dask.config.set(SMALL_PARTITIONS):
        ds, data = fmt.open(tmp_path)
        sizes = [p.num_frames for p in ds.get_partitions()]
        assert len(sizes) > 1
        assert sum(sizes) == np.prod(NAV)
        scheme = ds.negotiate([ltdask.TilingPreferences()], np.result_type(ds.dtype, "f4"))
        assert any(n % scheme.depth for n in sizes) or len(scheme) > 1, scheme
    check_roi(ds, data, roi=np.ones(NAV, bool))


@every_format
def test_pickle(fmt, tmp_path):
    ds, data = fmt.open(tmp_path)
    check_pickle(ds, data, in_memory=fmt.in_memory)


@pytest.mark.parametrize("fmt", FILE_FORMAT_PARAMS)
def test_registered(fmt, tmp_path):
    """The registry's record of the format tells the written scan, and exports its opener."""
    name = next(f.name for f in registry.formats() if f.load_opener() is fmt.opener)
    target, kwargs = fmt.write_to(tmp_path, fmt.data())
    check_registered(name, target, kwargs)


@pytest.mark.parametrize("fmt", FILE_FORMAT_PARAMS)
def test_common_bad_input(fmt, tmp_path):
    """A path that does not exist, an empty file: the documented errors, naming the path."""
    data = fmt.data()
    target, kwargs = fmt.write_to(tmp_path, data)
    check_bad_input(fmt.opener, tmp_path, target, kwargs, COMMON_BAD_INPUTS)


def test_every_format_on_scheduler(scheduler, tmp_path):
    """All formats in one graph per scheduler (the processes and distributed ones pickle
    every dataset, its tasks and results)."""
    roi = roi_for(NAV, 2)
    runs = []
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        for i, fmt in enumerate(FORMATS):
            folder = tmp_path / str(i)
            folder.mkdir()
            ds, data = fmt.open(folder)
            runs.append((fmt.id, data, SumSigUDF().lazy(ds, roi=roi), ds.to_dask("float64")))
    computed = dask.compute(*[(lazy, arr.sum()) for _, _, lazy, arr in runs])
    for (name, data, _, _), (res, total) in zip(runs, computed, strict=True):
        truth = data.astype("float64")
        expected = np.where(roi, truth.sum(axis=(2, 3)), np.nan)
        close(res["intensity"].values, expected)
        np.testing.assert_allclose(total, truth.sum(), rtol=1e-9, err_msg=name)
