"""``ltdask`` commands that would give wrong values silently: an ``--out-dtype`` that cannot
hold the data (refused, or clipped with ``--clip``), a disk or ring without a pixel in the
frame, a ``--roi`` reaching past the scan. Run in this process (click's runner); the refusals
themselves are rows of ``test_cli_errors.MISTAKES`` too."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers.cli import invoke

from ltdask.cli._errors import UserError
from ltdask.cli._options import parse_roi


@pytest.fixture
def folder(tmp_path):
    # uint16 values 0..4000, most of them above uint8's 255 (the issue's case)
    data = (np.arange(4 * 4 * 8 * 12) * 7 % 4001).astype(np.uint16).reshape(4, 4, 8, 12)
    np.save(tmp_path / "x.npy", data)
    return tmp_path, data


def test_convert_refuses_an_out_dtype_that_wraps_values(folder):
    d, data = folder
    result = invoke(["convert", "x.npy", "o.zarr", "--out-dtype", "uint8", "--no-progress"], d)
    assert result.exit_code == 2, result.output
    assert "--out-dtype uint8: x.npy" in result.stderr
    assert "outside uint8's range 0..255" in result.stderr and "give --clip" in result.stderr
    assert sorted(os.listdir(d)) == ["x.npy"]


def test_convert_refusal_keeps_the_store_it_would_replace(folder):
    d, data = folder
    assert invoke(["convert", "x.npy", "o.zarr", "--no-progress"], d).exit_code == 0
    args = ["convert", "x.npy", "o.zarr", "--out-dtype", "int8", "--overwrite", "--no-progress"]
    result = invoke(args, d)
    assert result.exit_code == 2 and "outside int8's range -128..127" in result.stderr
    assert sorted(os.listdir(d)) == ["o.zarr", "x.npy"]
    stored = zarr.open_array(d / "o.zarr", mode="r")
    assert stored.dtype == np.uint16
    np.testing.assert_array_equal(stored[...], data)


def test_convert_clip_clips_and_says_how_many(folder):
    d, data = folder
    args = ["convert", "x.npy", "o.zarr", "--out-dtype", "uint8", "--clip", "--no-progress"]
    result = invoke(args, d)
    assert result.exit_code == 0, result.output
    above = int(np.count_nonzero(data > 255))
    assert f"clipped {above} of {data.size} values into uint8's range 0..255" in result.stdout
    stored = zarr.open_array(d / "o.zarr", mode="r")
    assert stored.dtype == np.uint8
    np.testing.assert_array_equal(stored[...], np.minimum(data, 255))


def test_convert_nan_to_integers_is_refused_even_with_clip(tmp_path):
    data = np.ones((2, 2, 4, 4), dtype=np.float32)
    data[1, 0, 2, 3] = np.nan
    np.save(tmp_path / "f.npy", data)
    args = ["convert", "f.npy", "o.zarr", "--out-dtype", "uint16", "--clip", "--no-progress"]
    result = invoke(args, tmp_path)
    assert result.exit_code == 2
    assert "NaN, which uint16 cannot hold" in result.stderr
    assert "(the first: nan at scan position (1, 0), pixel (2, 3))" in result.stderr
    assert "convert to a float --out-dtype" in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["f.npy"]


def test_ring_partly_outside_the_frame_runs(tmp_path):
    """A centre outside the frame is fine where the ring reaches into it."""
    data = np.random.default_rng(4).integers(0, 100, (3, 4, 16, 16)).astype(np.uint16)
    np.save(tmp_path / "scan.npy", data)
    args = ["run", "ring", "scan.npy", "--out", "r.zarr", "--no-progress"]
    result = invoke([*args, "-p", "cy=-3", "-p", "cx=8", "-p", "r=6", "-p", "ri=4"], tmp_path)
    assert result.exit_code == 0, result.output
    y, x = np.mgrid[:16, :16]
    d2 = (y + 3) ** 2 + (x - 8) ** 2
    ring = (d2 > 16) & (d2 <= 36)
    assert ring.any()
    res = xr.open_zarr(tmp_path / "r.zarr")
    values = res[next(iter(res.data_vars))].values
    np.testing.assert_allclose(values.reshape(3, 4), (data * ring).sum(axis=(2, 3)))


@pytest.mark.parametrize(
    "spec, index",
    [
        ("0:32,0:32", np.s_[0:32, 0:32]),
        ("-4:,3", np.s_[-4:, 3]),
        ("-32:32,:", np.s_[-32:32, :]),
        ("5:9", np.s_[5:9]),
    ],
)
def test_roi_slices_inside_the_scan(spec, index):
    expected = np.zeros((32, 32), dtype=bool)
    expected[index] = True
    np.testing.assert_array_equal(parse_roi(spec, (32, 32)), expected)


@pytest.mark.parametrize("spec", ["0:64,0:64", "0:33,0:2", "-33:,0", "3,30:40"])
def test_roi_reaching_past_the_scan_is_refused(spec):
    with pytest.raises(
        UserError, match=rf"--roi '{spec}': .* reaches outside the scan.*\(32, 32\)"
    ):
        parse_roi(spec, (32, 32))


# -- the direct beam as the default geometry ----------------------------------------------------
def _beam_scan(tmp_path, cy=20.25, cx=14.5, r=6.0):
    """A 4 x 5 scan of 48 x 40 frames: a disk of 100 counts at (cy, cx) on 1 count."""
    y, x = np.mgrid[:48, :40]
    frame = np.where((y - cy) ** 2 + (x - cx) ** 2 <= r * r, 100, 1).astype(np.uint16)
    data = np.broadcast_to(frame, (4, 5, 48, 40)).copy()
    np.save(tmp_path / "scan.npy", data)
    return data


def _values(store):
    res = xr.open_zarr(store)
    return res[next(iter(res.data_vars))].values


def test_disk_and_ring_default_to_the_direct_beam(tmp_path):
    data = _beam_scan(tmp_path)
    result = invoke(["run", "disk", "scan.npy", "--out", "d.zarr", "--no-png"], tmp_path)
    assert result.exit_code == 0, result.output
    line = next(s for s in result.output.splitlines() if s.startswith("direct beam"))
    found = dict(part.split("=") for part in line.split(";")[1].split() if "=" in part)
    cy, cx, r = (float(found[k]) for k in ("cy", "cx", "r"))
    assert abs(cy - 20.25) <= 0.5 and abs(cx - 14.5) <= 0.5 and abs(r - 6) <= 1
    y, x = np.mgrid[:48, :40]
    mask = (y - cy) ** 2 + (x - cx) ** 2 <= r * r
    np.testing.assert_allclose(_values(tmp_path / "d.zarr")[..., 0], (data * mask).sum((2, 3)))
    # a ring: from the beam's edge out to the frame's nearest edge
    result = invoke(["run", "ring", "scan.npy", "--out", "r.zarr", "--no-png"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "-p ri=" in result.output and "-p r=" in result.output
    outer = min(cy, cx, 47 - cy, 39 - cx)
    ring = ((y - cy) ** 2 + (x - cx) ** 2 <= outer**2) & ~mask
    np.testing.assert_allclose(_values(tmp_path / "r.zarr")[..., 0], (data * ring).sum((2, 3)))


def test_given_geometry_is_kept_and_a_blank_scan_keeps_the_defaults(tmp_path):
    _beam_scan(tmp_path)
    args = ["run", "disk", "scan.npy", "--out", "d.zarr", "--no-png"]
    result = invoke([*args, "-p", "cy=10", "-p", "cx=10", "-p", "r=3"], tmp_path)
    assert result.exit_code == 0 and "direct beam" not in result.output, result.output
    np.save(tmp_path / "blank.npy", np.zeros((2, 3, 16, 16), np.uint16))
    result = invoke(["run", "disk", "blank.npy", "--out", "b.zarr", "--no-png"], tmp_path)
    assert result.exit_code == 0, result.output
    assert "no direct beam found" in result.output
