"""Malformed, truncated and incomplete TVIPS series: clear `DataSetError`s naming the file
and what is wrong (a missing file of the series by its name)."""

from __future__ import annotations

import struct

import pytest
from helpers.tvipsfiles import tvips_frames, write_tvips

import ltdask
from ltdask import DataSetError


@pytest.fixture
def series(tmp_path):
    return write_tvips(tmp_path, tvips_frames(9, (4, 5)), 3)


def patch(path, offset, value):
    data = bytearray(path.read_bytes())
    struct.pack_into("<i", data, offset, value)
    path.write_bytes(bytes(data))


def test_missing_first_file(series):
    series[0].unlink()
    with pytest.raises(
        DataSetError,
        match=r"scan_000\.tvips \(the first file, which holds the series header\) .* is missing",
    ):
        ltdask.open_tvips(series[1])


def test_missing_middle_file(series):
    series[1].unlink()
    with pytest.raises(
        DataSetError,
        match=r"scan_001\.tvips \(a file\) of the series is missing.*"
        r"found scan_000\.tvips, scan_002\.tvips",
    ):
        ltdask.open_tvips(series[2])


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (0, 255, r"does not start with a TVIPS series header \(header size 255"),
        (4, 3, r"version 3; expected 256 and 1 or 2"),
        (16, 12, r"12 bits per pixel; expected 8 or 16"),
        (8, 0, r"frames of 0 x 4 pixels"),
        (12, -4, r"frames of 5 x -4 pixels"),
        (48, -1, r"frame headers of -1 bytes"),
    ],
    ids=["header-size", "version", "bits", "zero-width", "negative-height", "frame-header"],
)
def test_bad_series_header(series, offset, value, match):
    patch(series[0], offset, value)
    with pytest.raises(DataSetError, match=r"scan_000\.tvips.*" + match):
        ltdask.open_tvips(series[0])


def test_frame_header_size_that_does_not_fit(series):
    patch(series[0], 48, 100)  # records said to be 28 bytes shorter than they are
    with pytest.raises(DataSetError, match=r"scan_000\.tvips' ends inside frame \d+ of the stream"):
        ltdask.open_tvips(series[0])


def test_truncated_series_header(series):
    series[0].write_bytes(series[0].read_bytes()[:200])
    with pytest.raises(DataSetError, match=r"scan_000\.tvips' is truncated: 200 bytes"):
        ltdask.open_tvips(series[0])


def test_middle_file_ending_inside_a_frame(series):
    series[1].write_bytes(series[1].read_bytes()[:-5])
    with pytest.raises(
        DataSetError,
        match=r"scan_001\.tvips' ends inside frame 5 of the stream .*only the last file",
    ):
        ltdask.open_tvips(series[0])


def test_no_whole_frame(tmp_path):
    paths = write_tvips(tmp_path, tvips_frames(1, (4, 5)), 1, cut_bytes=3)
    with pytest.raises(DataSetError, match=r"scan_000\.tvips: the series holds no whole frame"):
        ltdask.open_tvips(paths[0])


def test_a_lone_file_without_series_header(tmp_path):
    path = tmp_path / "movie.tvips"
    path.write_bytes(bytes(1000))
    with pytest.raises(
        DataSetError, match=r"movie\.tvips' does not start with a TVIPS series header"
    ):
        ltdask.open(path)


def test_sig_shape_that_does_not_fit(series):
    with pytest.raises(DataSetError, match=r"sig_shape=\(3, 3\) does not fit the frames"):
        ltdask.open_tvips(series[0], sig_shape=(3, 3))
