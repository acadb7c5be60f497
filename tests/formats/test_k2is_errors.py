"""Malformed K2 IS acquisitions: errors that name the file and the block, never a wrong
result or a numba traceback."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from helpers.badinput import expect
from helpers.k2isfiles import BLOCK_BYTES, dm4, random_frames, write_k2is

import ltdask
from ltdask import DataSetError
from ltdask.io.formats.k2is import open_k2is


@pytest.fixture(scope="module")
def frames():
    return random_frames(2, seed=3)


@pytest.fixture
def scan(tmp_path, frames):
    return write_k2is(tmp_path, frames)


def test_missing_sector_file_is_named(scan, tmp_path):
    (tmp_path / "Capture_6.bin").unlink()
    with pytest.raises(DataSetError, match=r"missing: '.*Capture_6\.bin'"):
        open_k2is(scan)


def test_corrupt_block_names_file_and_byte(scan, tmp_path):
    path = tmp_path / "Capture_4.bin"
    raw = bytearray(path.read_bytes())
    raw[32 * BLOCK_BYTES : 32 * BLOCK_BYTES + 4] = b"\0\0\0\0"  # the last frame's first block
    path.write_bytes(bytes(raw))
    with pytest.raises(DataSetError, match=rf"Capture_4\.bin.*byte {32 * BLOCK_BYTES}"):
        open_k2is(scan)


def test_block_of_wrong_size(scan, tmp_path):
    path = tmp_path / "Capture_1.bin"
    raw = path.read_bytes()
    path.write_bytes(raw[:100] + raw[101:])  # every later block one byte early
    with pytest.raises(DataSetError, match=r"Capture_1\.bin.*no valid K2 IS block"):
        open_k2is(scan)


def test_file_shorter_than_a_block(scan, tmp_path):
    (tmp_path / "Capture_2.bin").write_bytes(b"\xff\xff\x00\x55" + bytes(100))
    with pytest.raises(DataSetError, match=r"Capture_2\.bin.*not even one K2 IS block"):
        open_k2is(scan)


def test_truncated_sector_shortens_the_scan(scan, tmp_path, frames):
    """A sector cut inside the last frame: that frame is dropped in every sector."""
    path = tmp_path / "Capture_8.bin"
    path.write_bytes(path.read_bytes()[: 50 * BLOCK_BYTES + 7])
    ds = open_k2is(scan)
    assert ds.image_count == 1 and ds.nav_shape == (1,)
    np.testing.assert_array_equal(ds.to_dask().compute(), frames[:1])


def cut(path, blocks: int):
    """Cut a sector file after `blocks` blocks and a few bytes (an interrupted copy)."""
    path.write_bytes(path.read_bytes()[: blocks * BLOCK_BYTES + 7])


def test_stem_scan_with_a_sector_cut_short(request, tmp_path, frames):
    """A STEM scan whose shutter flag is set from frame 0 starts at sync offset -1: with a
    sector cut to one whole frame, the error names the short file, not a sync_offset the
    user never gave."""
    gtg = write_k2is(tmp_path, frames, scan=(1, 2))
    short = tmp_path / "Capture_3.bin"
    cut(short, 40)
    error = expect(
        request, DataSetError, r"Capture_3\.bin' \(\d+ bytes\) holds only 1 whole frame.*cut short",
        open_k2is, gtg, names=short,
    )  # fmt: skip
    assert "sync_offset=-1" not in str(error) and "beyond the data" not in str(error)


def test_no_shutter_frame_in_a_sector_cut_short(request, tmp_path):
    """The shutter opens at frame 2 of 3, but a sector holds only frame 0: the error says
    which file is short, not just that no frame has the shutter flag."""
    gtg = write_k2is(tmp_path, random_frames(3, seed=4), shutter_from=2)
    short = tmp_path / "Capture_6.bin"
    cut(short, 33)
    expect(request, DataSetError, r"shutter flag.*Capture_6\.bin.*holds only 1 whole frame",
           open_k2is, gtg, names=short)  # fmt: skip


def test_sector_cut_by_more_than_a_frame_warns(tmp_path):
    """Sectors end within one frame of each other when an acquisition stops; a sector that
    ends two frames early was cut short: the frames still read, with a warning naming it."""
    frames = random_frames(3, seed=5)
    gtg = write_k2is(tmp_path, frames)
    cut(tmp_path / "Capture_2.bin", 35)
    with pytest.warns(ltdask.MissingFramesWarning, match=r"Capture_2\.bin.*holds only 1 whole"):
        ds = open_k2is(gtg)
    assert ds.nav_shape == (1,) and ds.metadata["whole frames per sector"][1] == 1
    np.testing.assert_array_equal(ds.to_dask().compute(), frames[:1])


def test_gtg_scan_beyond_the_frames_names_the_gtg(tmp_path, frames):
    """The missing-frames warning says the nav shape came from the .gtg, and a scan far
    beyond the frames fails at open, not when a run makes its partitions."""
    gtg = write_k2is(tmp_path, frames, scan=(2, 3), shutter_from=1)
    origin = r"\(from SI Dimensions Size Y=2, Size X=3 in '.*Capture_\.gtg'\)"
    match = rf"nav_shape=\(2, 3\) {origin} asks for 6 frames, but the files hold 2"
    with pytest.warns(ltdask.MissingFramesWarning, match=match):
        open_k2is(gtg)
    gtg.write_bytes(dm4({"SI Dimensions": {"Size X": 10**5, "Size Y": 10**5}}))
    with pytest.raises(DataSetError, match=r"Size Y=100000, Size X=100000 .*without a single"):
        open_k2is(gtg)


def test_sectors_of_other_acquisitions(tmp_path, frames):
    write_k2is(tmp_path, frames)
    other = tmp_path / "other"
    other.mkdir()
    write_k2is(other, frames, first_count=500_000)
    (tmp_path / "Capture_5.bin").write_bytes((other / "Capture_5.bin").read_bytes())
    with pytest.raises(DataSetError, match="do not overlap"):
        open_k2is(tmp_path / "Capture_.gtg")


@pytest.mark.parametrize(
    "content, message",
    [
        pytest.param(b"\0\0\0\x05" + bytes(20), "not a DigitalMicrograph", id="version"),
        pytest.param(b"\0\0\0\x04", "too short", id="short"),
        pytest.param(dm4({"A": 1})[:-14], "ends early|malformed", id="truncated"),
        pytest.param(
            struct.pack(">IQI", 4, 0, 1)
            + struct.pack(">BBQ", 0, 1, 1)
            + b"\x33\x00\x01A"
            + bytes(8),
            "type byte 51",
            id="bad-tag-type",
        ),
    ],
)
def test_malformed_gtg(scan, content, message):
    scan.write_bytes(content)
    with pytest.raises(DataSetError, match=message):
        open_k2is(scan)


def test_bad_arguments(scan):
    with pytest.raises(DataSetError, match=r"sig_shape=\(2048, 1860\)"):
        open_k2is(scan, sig_shape=(2048, 1860))
    with pytest.raises(DataSetError, match="sync_offset=5 is beyond"):
        open_k2is(scan, sync_offset=5)
    with pytest.raises(DataSetError, match="expected the .gtg or a .bin"):
        open_k2is(scan.with_suffix(".txt").write_bytes(b"") or scan.with_suffix(".txt"))
