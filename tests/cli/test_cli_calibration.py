"""``--nav-calibration`` / ``--sig-calibration`` and the pictures of ``ltdask run``: results
reopened with ``xr.open_zarr`` carry coordinates ``origin + scale * index`` with ``units``
(from the options, else from the file's header); a PNG of every 2-D result beside the store,
none with ``--no-png``, and none drawn over a file ltdask did not draw. Run in this process
(click's runner); the refused option values are rows of ``test_cli_errors.MISTAKES`` too."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr
from helpers.cli import invoke
from helpers.dmfiles import write_dm
from PIL import Image

from ltdask.cli._calibration import AxisSpec, parse_calibration
from ltdask.cli._errors import UserError

NAV, SIG = (4, 5), (16, 16)


def ok(result) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(7).integers(0, 100, (*NAV, *SIG)).astype(np.uint16)


@pytest.fixture
def folder(tmp_path, data):
    np.save(tmp_path / "scan.npy", data)
    return tmp_path


def run(folder, analysis, *options, out="out.zarr"):
    return invoke(["run", analysis, "scan.npy", "--out", out, "--no-progress", *options], folder)


def check_coordinate(result, dim, scale, origin, units):
    coord = result.coords[dim]
    np.testing.assert_allclose(coord.values, np.arange(result.sizes[dim]) * scale + origin)
    assert coord.attrs["units"] == units


# -- the option's syntax ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("1.5nm", [(1.5, 0.0, "nm")], id="number-units"),
        pytest.param("0.2 mrad", [(0.2, 0.0, "mrad")], id="space"),
        pytest.param("1.5e-3um", [(0.0015, 0.0, "um")], id="exponent"),
        pytest.param(".5 Å", [(0.5, 0.0, "Å")], id="angstrom"),
        pytest.param("2µm", [(2.0, 0.0, "µm")], id="micro-sign"),
        pytest.param("0.01 1/nm", [(0.01, 0.0, "1/nm")], id="reciprocal"),
        pytest.param("1.5nm,2nm", [(1.5, 0.0, "nm"), (2.0, 0.0, "nm")], id="per-dim"),
        pytest.param("0.2mrad@-3.2", [(0.2, -3.2, "mrad")], id="origin"),
        pytest.param("0.2mrad @ -3.2 mrad", [(0.2, -3.2, "mrad")], id="origin-units"),
        pytest.param("0.2mrad@centre", [(0.2, None, "mrad")], id="centre"),
        pytest.param("1nm@1,-2nm@center", [(1.0, 1.0, "nm"), (-2.0, None, "nm")], id="both"),
    ],
)
def test_calibration_syntax(text, expected):
    assert parse_calibration(text, "--nav-calibration") == tuple(AxisSpec(*e) for e in expected)


@pytest.mark.parametrize(
    "text, message",
    [
        ("abc", "--sig-calibration abc: expected a number with units, e.g. 1.5nm"),
        ("1.5", "--sig-calibration 1.5: no units; expected a number with units"),
        ("1nm,x", "--sig-calibration 1nm,x: x: expected a number with units"),
        ("0mrad", "--sig-calibration 0mrad: the scale must not be zero"),
        ("1e400nm", "--sig-calibration 1e400nm: 1e400 is too large for a float"),
        ("1nm@x", "--sig-calibration 1nm@x: the origin 'x' is not a number (in nm) or centre"),
        ("1nm@2um", "--sig-calibration 1nm@2um: the origin is in um, the scale in nm"),
        ("inf nm", "--sig-calibration inf nm: expected a number with units"),
    ],
)
def test_calibration_syntax_errors(text, message):
    with pytest.raises(UserError) as e:
        parse_calibration(text, "--sig-calibration")
    assert e.value.format_message().startswith(message)


# -- calibrated results -----------------------------------------------------------------------
def test_run_writes_the_calibrations_as_coordinates_with_units(folder, data):
    nav = ["--nav-calibration", "1.5nm@-3,2 nm@1"]
    ok(run(folder, "sumsig", *nav, "--no-png"))
    res = xr.open_zarr(folder / "out.zarr")
    check_coordinate(res, "scan_y", 1.5, -3.0, "nm")
    check_coordinate(res, "scan_x", 2.0, 1.0, "nm")
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(2, 3)))


def test_run_sig_calibration_about_the_centre(folder, data):
    ok(run(folder, "sum", "--sig-calibration", "0.2mrad@centre", "--no-png"))
    res = xr.open_zarr(folder / "out.zarr")
    # 0 at pixel 8 of 16, where the analyses put the frame's centre (-p cx=8.0 (default))
    check_coordinate(res, "det_y", 0.2, -1.6, "mrad")
    check_coordinate(res, "det_x", 0.2, -1.6, "mrad")
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(0, 1)))


def test_a_virtual_detector_has_the_scan_coordinates(folder):
    """The issue's case: disk results reopened with dims and no coordinates."""
    ok(run(folder, "disk", "--nav-calibration", "0.4nm", "--no-png"))
    res = xr.open_zarr(folder / "out.zarr")
    check_coordinate(res, "scan_y", 0.4, 0.0, "nm")
    check_coordinate(res, "scan_x", 0.4, 0.0, "nm")


#: numpy order; DM's (scale, origin, units): the coordinate is (index - origin) * scale
DM_CAL = [(2.0, 1.0, "nm"), (3.0, -2.0, "nm"), (0.5, 3.0, "1/nm"), (0.25, 5.5, "1/nm")]


@pytest.fixture
def dm_file(tmp_path, data):
    return write_dm(tmp_path / "scan.dm4", data, calibrations=DM_CAL)


def test_the_header_calibration_without_the_options(dm_file):
    ok(invoke(["run", "sumsig", dm_file.name, "--out", "o.zarr", "--no-progress"], dm_file.parent))
    res = xr.open_zarr(dm_file.parent / "o.zarr")
    check_coordinate(res, "scan_y", 2.0, -2.0, "nm")
    check_coordinate(res, "scan_x", 3.0, 6.0, "nm")
    ok(invoke(["run", "sum", dm_file.name, "--out", "s.zarr", "--no-png"], dm_file.parent))
    res = xr.open_zarr(dm_file.parent / "s.zarr")
    check_coordinate(res, "det_y", 0.5, -1.5, "1/nm")
    check_coordinate(res, "det_x", 0.25, -1.375, "1/nm")


def test_the_options_override_the_header(dm_file):
    args = ["run", "sumsig", dm_file.name, "--out", "o.zarr", "--no-png"]
    ok(invoke([*args, "--nav-calibration", "7pm@1"], dm_file.parent))
    res = xr.open_zarr(dm_file.parent / "o.zarr")
    check_coordinate(res, "scan_y", 7.0, 1.0, "pm")
    check_coordinate(res, "scan_x", 7.0, 1.0, "pm")


def test_info_shows_the_calibrations(dm_file):
    out = ok(invoke(["info", dm_file.name], dm_file.parent))
    (row,) = [line for line in out.splitlines() if line.startswith("calibration")]
    assert row.split(None, 1)[1] == (
        "scan_y: 2 nm, origin -2; scan_x: 3 nm, origin 6; "
        "det_y: 0.5 1/nm, origin -1.5; det_x: 0.25 1/nm, origin -1.375"
    )
    out = ok(invoke(["info", dm_file.name, "--sig-calibration", "0.1mrad"], dm_file.parent))
    (row,) = [line for line in out.splitlines() if line.startswith("calibration")]
    assert row.endswith("det_y: 0.1 mrad; det_x: 0.1 mrad")


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--nav-calibration", "1nm,2nm,3nm", "3 calibrations for the 2 dims (scan_y, scan_x)"),
        ("--sig-calibration", "1e308nm@1e308", "give a smaller scale or origin"),
    ],
)
def test_calibrations_that_do_not_fit_the_scan(folder, option, value, message):
    result = invoke(["info", "scan.npy", option, value], folder)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"Error: {option}") or line.startswith("Error: scan.npy")
    assert option in line and message in line and "_calibration" not in line


def test_convert_stores_the_calibrations(dm_file, data):
    """The header's signal calibration and the option's nav one, read back from the store."""
    d = dm_file.parent
    ok(invoke(["convert", dm_file.name, "c.zarr", "--nav-calibration", "4nm", "--no-progress"], d))
    out = ok(invoke(["info", "c.zarr"], d))
    (row,) = [line for line in out.splitlines() if line.startswith("calibration")]
    assert row.split(None, 1)[1] == (
        "scan_y: 4 nm; scan_x: 4 nm; det_y: 0.5 1/nm, origin -1.5; det_x: 0.25 1/nm, origin -1.375"
    )
    ok(invoke(["run", "sumsig", "c.zarr", "--out", "s.zarr", "--no-png"], d))
    res = xr.open_zarr(d / "s.zarr")
    check_coordinate(res, "scan_x", 4.0, 0.0, "nm")
    np.testing.assert_allclose(res["intensity"].values, data.sum(axis=(2, 3)))


# -- pictures ---------------------------------------------------------------------------------
def check_png(path):
    assert path.stat().st_size > 2000  # a picture, not an empty figure's few hundred bytes
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size[0] >= 300 and image.size[1] >= 300
        image.verify()


#: the analyses' 2-D results, on the scan's or the detector's dims (by hand from the UDFs)
PICTURES = {
    "disk": ["intensity"],
    "sum": ["intensity"],
    "com": ["field", "field_y", "field_x", "magnitude", "divergence", "curl"],
    "stddev": ["varsum", "sum", "var", "std", "mean"],
}


@pytest.mark.parametrize("analysis", PICTURES)
def test_run_draws_every_2d_result_beside_the_store(folder, analysis):
    out = ok(run(folder, analysis, "--nav-calibration", "1.5nm"))
    expected = {f"out.{name}.png" for name in PICTURES[analysis]}
    assert set(os.listdir(folder)) == {"scan.npy", "out.zarr", *expected}
    for name in expected:
        check_png(folder / name)
        assert f"wrote {name}" in out


def test_run_with_one_picked_frame_draws_it(folder):
    ok(run(folder, "pick", "--roi", "1,2"))
    assert set(os.listdir(folder)) == {"scan.npy", "out.zarr", "out.intensity.png"}
    check_png(folder / "out.intensity.png")


def test_no_png_draws_none(folder):
    ok(run(folder, "com", "--no-png"))
    assert sorted(os.listdir(folder)) == ["out.zarr", "scan.npy"]


def test_pictures_are_not_drawn_over_files(folder):
    (folder / "out.intensity.png").write_bytes(b"my picture")
    result = run(folder, "sumsig")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "Error: out.intensity.png already exists; pass --overwrite to replace it, or choose "
        "another path (or --no-png)"
    ]
    result = run(folder, "sumsig", "--overwrite")
    assert result.exit_code == 2
    assert "out.intensity.png exists and is not a picture ltdask drew" in result.stderr
    assert (folder / "out.intensity.png").read_bytes() == b"my picture"
    assert sorted(os.listdir(folder)) == ["out.intensity.png", "scan.npy"]


def test_overwrite_replaces_the_pictures_ltdask_drew(folder):
    ok(run(folder, "sumsig"))
    before = (folder / "out.intensity.png").read_bytes()
    ok(run(folder, "sumsig", "--nav-calibration", "3nm", "--overwrite"))
    check_png(folder / "out.intensity.png")
    assert (folder / "out.intensity.png").read_bytes() != before  # now on axes in nm
