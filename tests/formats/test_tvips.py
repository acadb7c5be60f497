"""TVIPS series: frames across files, scan detection and calibration against RosettaSciIO's
reader and the numpy frames the test-side writer wrote (``tests/helpers/tvipsfiles.py``).
LiberTEM 0.16's decoded frames (and its scan detection) are checked in ``tests/reference``."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner
from helpers.tvipsfiles import scan_positions, tvips_frames, write_tvips
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.cli import main as cli
from ltdask.udf import SumSigUDF, SumUDF


def rsciio_read(path, **kwargs):
    from rsciio.tvips import file_reader

    return file_reader(str(path), **kwargs)[0]


@pytest.mark.parametrize(
    ("per_file", "bits", "sig"),
    [(1, 16, (9, 11)), (4, 8, (7, 5)), (7, 16, (1, 13)), (100, 8, (16, 16))],
    ids=["1-per-file-u16", "4-per-file-u8", "7-per-file-1-row", "one-file-u8"],
)
def test_frames_across_files_equal_rsciio(tmp_path, per_file, bits, sig):
    frames = tvips_frames(13, sig, bits=bits, seed=per_file)
    paths = write_tvips(tmp_path, frames, per_file)
    theirs = rsciio_read(paths[0])["data"]
    np.testing.assert_array_equal(theirs, frames)
    for path in {paths[0], paths[len(paths) // 2], paths[-1]}:  # any file opens the series
        ds = ltdask.open(path)
        assert type(ds).__name__ == "TVIPSDataSet"
        assert ds.nav_shape == (13,) and ds.sig_shape == sig and ds.dtype == frames.dtype
        assert ds.metadata["files"] == len(paths)
        np.testing.assert_array_equal(ds.to_dask().compute(), theirs)


def test_scan_from_positions_equals_rsciio(tmp_path):
    """A 5 x 6 scan after 4 lead-in frames, 3 frames after it; files of 5 frames, so the lead-in
    and first row span two files (LiberTEM 0.16 fails there: it looks in the first only)."""
    nav, lead = (5, 6), 4
    n = lead + 30 + 3
    frames = tvips_frames(n, (6, 7), seed=1)
    paths = write_tvips(tmp_path, frames, 5, positions=scan_positions(nav, lead, 3))
    ds = ltdask.open_tvips(paths[3])
    assert ds.scan_detection == "scan positions in the frame headers"
    assert ds.nav_shape == nav and ds.sync_offset == lead
    theirs = rsciio_read(paths[0], scan_shape=nav, scan_start_frame=lead)["data"]
    np.testing.assert_array_equal(ds.to_dask().compute(), theirs)
    np.testing.assert_array_equal(theirs.reshape(30, 6, 7), frames[lead : lead + 30])


def test_scan_from_rotator_equals_rsciio_auto(tmp_path):
    """Headers of 60 bytes (RosettaSciIO's own): no scan positions, a rotator index 1..16 after
    3 lead-in frames: a 4 x 4 scan, as RosettaSciIO's ``scan_shape="auto"`` finds it (the
    index stays at 16 after the scan: RosettaSciIO 0.15 takes a fall back to 0 for a rise)."""
    rotator = np.r_[np.zeros(3), np.arange(1, 17), [16, 16]]
    frames = tvips_frames(21, (5, 5), seed=2)
    paths = write_tvips(tmp_path, frames, 8, frame_header_bytes=60, rotator=rotator)
    ds = ltdask.open_tvips(paths[0])
    assert ds.scan_detection == "rotator index in the frame headers"
    assert ds.nav_shape == (4, 4) and ds.sync_offset == 3
    theirs = rsciio_read(paths[0], scan_shape="auto")["data"]
    np.testing.assert_array_equal(ds.to_dask().compute(), theirs)


@pytest.mark.parametrize(
    ("n", "nav", "positions"),
    [(6, (6,), None), (16, (4, 4), None), (6, (2, 3), (2, 3))],
    ids=["0-to-5", "0-to-15-square", "0-to-5-positions-2x3"],
)
def test_rotator_counting_from_zero_keeps_the_first_frame(tmp_path, n, nav, positions):
    """Headers numbering the rotator positions 0, 1, … n - 1 from the series' first frame:
    that frame is the scan's first point, not lead-in. RosettaSciIO reads all n frames, and
    the scan from frame 0 where it is told the shape (the scan positions say it too)."""
    frames = tvips_frames(n, (3, 4), seed=n)
    kwargs: dict = {"rotator": np.arange(n)}
    if positions is None:
        kwargs["frame_header_bytes"] = 60  # RosettaSciIO's own: no scan positions
    else:
        kwargs["positions"] = scan_positions(positions)
    paths = write_tvips(tmp_path, frames, 4, **kwargs)
    ds = ltdask.open_tvips(paths[1])
    assert ds.sync_offset == 0 and ds.nav_shape == nav
    assert ds.scan_detection == (
        "rotator index in the frame headers"
        if positions is None
        else "scan positions in the frame headers"
    )
    stack = rsciio_read(paths[0])["data"]
    np.testing.assert_array_equal(stack, frames)
    data = ds.to_dask().compute()
    np.testing.assert_array_equal(data.reshape(stack.shape), stack)
    if len(nav) == 2:
        scan = rsciio_read(paths[0], scan_shape=nav, scan_start_frame=0)["data"]
        np.testing.assert_array_equal(data, scan)


def test_rotator_of_a_non_square_scan(tmp_path):
    rotator = np.r_[np.zeros(2), np.arange(1, 13)]
    paths = write_tvips(
        tmp_path, tvips_frames(14, (3, 3)), 14, frame_header_bytes=60, rotator=rotator
    )
    ds = ltdask.open_tvips(paths[0])
    assert ds.nav_shape == (12,) and ds.sync_offset == 2


def test_no_scan_information(tmp_path):
    paths = write_tvips(tmp_path, tvips_frames(6, (3, 3)), 4)
    ds = ltdask.open_tvips(paths[0])
    assert ds.scan_detection == "none" and ds.nav_shape == (6,) and ds.sync_offset == 0


def test_given_shape_and_offset_win(tmp_path):
    frames = tvips_frames(20, (4, 4), seed=3)
    paths = write_tvips(tmp_path, frames, 6, positions=scan_positions((3, 5), 2, 3))
    ds = ltdask.open_tvips(paths[0], nav_shape=(2, 8), sync_offset=-1)
    data = ds.to_dask().compute().reshape(16, 4, 4)
    assert not data[0].any()
    np.testing.assert_array_equal(data[1:], frames[:15])
    ds = ltdask.open_tvips(paths[0], nav_shape=(4, 4))  # the detected lead-in stays
    assert ds.sync_offset == 2


@pytest.mark.parametrize(("mode", "units"), [(1, "nm"), (2, "1/nm")])
def test_sig_calibration_equals_rsciio(tmp_path, mode, units):
    frames = tvips_frames(3, (4, 4))
    paths = write_tvips(tmp_path, frames, 3, pixel_size=12)
    data = bytearray(paths[0].read_bytes())
    for i in range(3):  # the mode word of each frame header
        data[256 + i * (128 + 32) + 24] = mode
    paths[0].write_bytes(bytes(data))
    ds = ltdask.open_tvips(paths[0])
    axes = rsciio_read(paths[0])["axes"]
    for ours, theirs in zip(ds.sig_calibration, axes[1:], strict=True):
        assert (ours.scale, ours.units) == (theirs["scale"], theirs["units"]) == (12.0, units)
    assert ds.metadata["mode"] == mode


@pytest.mark.parametrize(
    ("nav", "lead", "rotator"),
    [((3, 6), 0, False), ((2, 5), 2, False), ((4, 4), 0, True)],
    ids=["positions-3x6", "positions-lead-in", "rotator-4x4"],
)
def test_partial_last_frame_keeps_the_scan(tmp_path, nav, lead, rotator):
    """A 3-file series whose last file ends inside the scan's last frame: the scan keeps the
    shape its headers give, every whole frame is read, the cut-off frame's position is
    invalid (and warned about), rather than a row of whole frames dropped with it."""
    points = nav[0] * nav[1]
    n = lead + points
    frames = tvips_frames(n, (5, 6), seed=n)
    if rotator:
        kwargs: dict = {"rotator": np.arange(points), "frame_header_bytes": 60}
    else:
        kwargs = {"positions": scan_positions(nav, lead)}
    paths = write_tvips(tmp_path, frames, -(-n // 3), cut_bytes=9, **kwargs)
    assert len(paths) == 3
    with pytest.warns(ltdask.MissingFramesWarning) as caught:
        ds = ltdask.open_tvips(paths[0])
    messages = " / ".join(str(w.message) for w in caught)
    assert f"scan_002.tvips' ends inside frame {n - 1}" in messages
    assert ds.nav_shape == nav and ds.sync_offset == lead
    data = ds.to_dask().compute().reshape(points, 5, 6)
    np.testing.assert_array_equal(data[:-1], frames[lead:-1])
    assert not data[-1].any()
    res = SumSigUDF().compute(ds)
    valid = res["intensity_valid"].values.ravel().tolist()
    assert valid == [True] * (points - 1) + [False]
    np.testing.assert_array_equal(
        res["intensity"].values.ravel()[:-1], frames[lead:-1].sum(axis=(1, 2))
    )


def test_version_1(tmp_path):
    frames = tvips_frames(9, (3, 8), bits=8, seed=5)
    paths = write_tvips(tmp_path, frames, 4, version=1)
    ds = ltdask.open_tvips(paths[1])
    assert ds.nav_shape == (9,) and ds.metadata["version"] == 1
    np.testing.assert_array_equal(ds.to_dask().compute(), frames)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ny=st.integers(1, 4),
    nx=st.integers(2, 6),
    lead=st.integers(0, 4),
    tail=st.integers(0, 3),
    per_file=st.integers(1, 9),
    header=st.sampled_from([76, 77, 128, 511]),
    bits=st.sampled_from([8, 16]),
)
def test_detection_across_any_files(tmp_path_factory, ny, nx, lead, tail, per_file, header, bits):
    """Any split into files, lead-in, frame header size (odd ones misalign 16-bit pixels: read
    through the decoder rather than as views) and pixel depth."""
    folder = tmp_path_factory.mktemp("tvips")
    n = lead + ny * nx + tail
    frames = tvips_frames(n, (3, 4), bits=bits, seed=n)
    positions = scan_positions((ny, nx), lead, tail)
    paths = write_tvips(folder, frames, per_file, frame_header_bytes=header, positions=positions)
    ds = ltdask.open_tvips(paths[-1])
    # the rows after the scan's own: as many whole rows as the frames after the lead-in hold
    assert ds.sync_offset == lead
    assert ds.nav_shape == ((ny * nx + tail) // nx, nx)
    data = ds.to_dask().compute().reshape(-1, 3, 4)
    np.testing.assert_array_equal(data[: ny * nx], frames[lead : lead + ny * nx])


def test_xarray_and_info(tmp_path):
    frames = tvips_frames(6, (4, 5), seed=6)
    paths = write_tvips(tmp_path, frames, 4, positions=scan_positions((2, 3)))
    ds = xr.open_dataset(paths[1])
    assert ds["data"].dims == ("scan_y", "scan_x", "det_y", "det_x")
    np.testing.assert_array_equal(ds["data"].values.reshape(6, 4, 5), frames)
    out = CliRunner().invoke(cli, ["info", str(paths[1])])
    assert out.exit_code == 0, out.output
    assert "tvips" in out.output and "scan positions in the frame headers" in out.output
    assert "high_tension_kV" in out.output


@pytest.mark.parametrize("header", [128, 60, 14], ids=["h128", "h60", "h14"])
def test_native_tiles_are_rows_of_the_records(tmp_path, header):
    """Read in their own dtype, frames with headers between them reach flat-tile UDFs as rows
    of the files' records (pixels from the header's end), in tiles and partitions that
    do not divide the files."""
    import dask

    frames = tvips_frames(23, (6, 10), seed=header)
    paths = write_tvips(tmp_path, frames, 5, frame_header_bytes=header)
    small = {"ltdask.partition-bytes": 1500, "ltdask.min-partitions": 1, "ltdask.tile-bytes": 400}
    with dask.config.set(small):
        ds = ltdask.open_tvips(paths[0])
        assert ds.hands_out_views(ds.dtype)
        sums, sig_sums = ltdask.compute(ds, [SumUDF(dtype="uint16"), SumSigUDF(dtype="uint16")])
    np.testing.assert_array_equal(sums["intensity"].values, frames.sum(axis=0, dtype=np.int64))
    np.testing.assert_array_equal(sig_sums["intensity"].values, frames.sum(axis=(1, 2)))


def test_scan_found_once_per_version_of_the_files(tmp_path, monkeypatch):
    """Opening the same series again reads no frame header but the first (its time and
    mode); a file that changed (another scan written over it) is read again."""
    from ltdask.io.formats.tvips import scan as tvips_scan

    nav, lead = (4, 5), 2
    frames = tvips_frames(lead + 20, (6, 7), seed=3)
    paths = write_tvips(tmp_path, frames, 30, positions=scan_positions(nav, lead, 0))
    first = ltdask.open_tvips(paths[0])
    assert (first.nav_shape, first.sync_offset) == (nav, lead)
    reads = []
    real = tvips_scan.read_fields
    monkeypatch.setattr(
        tvips_scan, "read_fields", lambda *a, **k: reads.append(a[1:]) or real(*a, **k)
    )
    again = ltdask.open_tvips(paths[0])
    assert (again.nav_shape, again.sync_offset) == (nav, lead)
    assert [(start, stop) for *_, start, stop in reads] == [(0, 1)]
    other = (4, 4)
    write_tvips(tmp_path, frames[: lead + 16], 30, positions=scan_positions(other, lead, 0))
    changed = ltdask.open_tvips(paths[0])
    assert changed.nav_shape == other and len(reads) > 2
