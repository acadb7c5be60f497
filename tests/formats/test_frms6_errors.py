"""Malformed pnCCD acquisitions: errors that name the file and the field."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from helpers.frms6files import random_images, write_acquisition

from ltdask import DataSetError
from ltdask.io.formats.frms6 import open_frms6


@pytest.fixture
def hdr(tmp_path):
    images = random_images(6, (8, 6))
    dark = random_images(2, (8, 6), seed=1, high=50)
    return write_acquisition(tmp_path, images, dark, scan=(2, 3), splits=(4,))


@pytest.mark.parametrize(
    "offset, fmt, value, message",
    [
        pytest.param(0, "<H", 512, "header size 512", id="header-size"),
        pytest.param(2, "<H", 32, "frame header size 32", id="frame-header-size"),
        pytest.param(7, "<B", 5, "version 5", id="version"),
        pytest.param(88, "<H", 13, "even, non-zero width", id="odd-width"),
        pytest.param(90, "<H", 0, "even, non-zero width", id="zero-height"),
    ],
)
def test_bad_file_headers(hdr, tmp_path, offset, fmt, value, message):
    path = tmp_path / "scan_002.frms6"
    raw = bytearray(path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    path.write_bytes(bytes(raw))
    with pytest.raises(DataSetError, match=rf"scan_002\.frms6.*{message}"):
        open_frms6(hdr)


def test_files_of_other_frame_sizes(hdr, tmp_path):
    path = tmp_path / "scan_002.frms6"
    raw = bytearray(path.read_bytes())
    struct.pack_into("<HH", raw, 88, 6, 8)  # same bytes per frame, another shape
    path.write_bytes(bytes(raw))
    with pytest.raises(DataSetError, match=r"scan_002\.frms6.*8 x 6 raw pixels.*same frame size"):
        open_frms6(hdr)


def test_truncated_header(hdr, tmp_path):
    (tmp_path / "scan_001.frms6").write_bytes(bytes(100))
    with pytest.raises(DataSetError, match=r"scan_001\.frms6.*shorter than the 1024-byte"):
        open_frms6(hdr)


@pytest.mark.parametrize(
    "old, new, message",
    [
        pytest.param('"bin: 1,', '"bin: x,', "readoutmode=", id="readoutmode"),
        pytest.param("signalframes=6", "signalframes=six", "signalframes='six'", id="frames"),
        pytest.param("signalframes=6\n", "", "no signalframes", id="no-frames"),
        pytest.param("stemimagesize=2x3", "stemimagesize=2by3", "stemimagesize=", id="scan"),
        pytest.param("[measurementInfo]", "[other]", r"no \[measurementInfo\]", id="section"),
        pytest.param("[measurementInfo]", "measurementInfo", "cannot read", id="not-ini"),
    ],
)
def test_bad_hdr(hdr, old, new, message):
    hdr.write_text(hdr.read_text().replace(old, new))
    with pytest.raises(DataSetError, match=message) as e:
        open_frms6(hdr)
    assert "scan.hdr" in str(e.value)


def test_missing_files(hdr, tmp_path):
    (tmp_path / "scan_001.frms6").unlink()
    (tmp_path / "scan_002.frms6").unlink()
    with pytest.raises(DataSetError, match=r"scan_000\.frms6 \(dark frames\).*found \['scan_000"):
        open_frms6(hdr)
    hdr.unlink()
    with pytest.raises(DataSetError, match=r"scan\.hdr.*does not exist"):
        open_frms6(tmp_path / "scan_000.frms6")


def test_gain_maps(hdr, tmp_path):
    np.save(tmp_path / "gain.npy", np.ones((6, 8)))
    with pytest.raises(DataSetError, match=r"gain\.npy.*shape \(6, 8\).*\(8, 6\)"):
        open_frms6(hdr, gain_map_path=tmp_path / "gain.npy")
    (tmp_path / "gain.txt").write_text("1")
    with pytest.raises(DataSetError, match=r"gain\.txt.*\.mat, \.csv or \.npy"):
        open_frms6(hdr, gain_map_path=tmp_path / "gain.txt")
    (tmp_path / "gain.csv").write_text("1;x;\n")
    with pytest.raises(DataSetError, match=r"gain\.csv.*cannot read"):
        open_frms6(hdr, gain_map_path=tmp_path / "gain.csv")


def test_arguments(hdr, tmp_path):
    with pytest.raises(DataSetError, match=r"sig_shape=\(6, 8\).*\(8, 6\)"):
        open_frms6(hdr, sig_shape=(6, 8))
    other = tmp_path / "scan.txt"
    other.write_text("")
    with pytest.raises(DataSetError, match="expected a .hdr or .frms6"):
        open_frms6(other)


def test_empty_dark_file(hdr, tmp_path):
    path = tmp_path / "scan_000.frms6"
    path.write_bytes(path.read_bytes()[:1024])
    with pytest.raises(DataSetError, match=r"scan_000\.frms6.*no whole dark frame"):
        open_frms6(hdr)
    ds = open_frms6(hdr, enable_offset_correction=False)
    assert ds.image_count == 6
