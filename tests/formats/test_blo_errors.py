"""Malformed and truncated ``.blo`` files: clear `DataSetError`s naming the file and the
field, offset or frame record that is wrong."""

from __future__ import annotations

import struct

import pytest
from helpers.blofiles import blo_frames, write_blo

import ltdask
from ltdask import DataSetError


@pytest.fixture
def blo(tmp_path):
    return write_blo(tmp_path / "scan.blo", blo_frames(6, 4), (2, 3))


def patch(path, offset, fmt, value):
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    path.write_bytes(bytes(data))


def test_not_a_block_file(blo):
    patch(blo, 0, "6s", b"IMGBLX")
    with pytest.raises(DataSetError, match=r"scan\.blo' is not a block file.*IMGBLX"):
        ltdask.open_blo(blo)


def test_unknown_version(blo):
    patch(blo, 6, "<H", 0x0205)
    with pytest.raises(DataSetError, match=r"unknown block file version 0x0205"):
        ltdask.open_blo(blo)


def test_truncated_header(blo):
    blo.write_bytes(blo.read_bytes()[:100])
    with pytest.raises(DataSetError, match=r"scan\.blo' is truncated: 100 bytes"):
        ltdask.open_blo(blo)


@pytest.mark.parametrize(
    ("offset", "value"),
    [(8, 100), (12, 10**8), (12, 4000)],
    ids=["vbf-in-header", "frames-past-end", "frames-before-vbf"],
)
def test_offsets_that_do_not_fit(blo, offset, value):
    patch(blo, offset, "<I", value)
    with pytest.raises(DataSetError, match=r"the header's offsets .* do not fit a file"):
        ltdask.open_blo(blo)


@pytest.mark.parametrize("field", [20, 24, 26], ids=["frame-size", "nx", "ny"])
def test_zero_sizes(blo, field):
    patch(blo, field, "<H", 0)
    with pytest.raises(DataSetError, match="all must be at least 1"):
        ltdask.open_blo(blo)


def test_wrong_data_offset_is_caught_by_the_record_marks(blo):
    offset = struct.unpack_from("<I", blo.read_bytes(), 12)[0]
    patch(blo, 12, "<I", offset + 2)
    with pytest.raises(DataSetError, match=r"the record of frame 0 at byte \d+ starts with"):
        ltdask.open_blo(blo)


def test_wrong_frame_size_is_caught_by_the_record_marks(blo):
    patch(blo, 20, "<H", 3)  # frames of 4 x 4 said to be 3 x 3
    with pytest.raises(DataSetError, match=r"the record of frame (0|\d+) at byte"):
        ltdask.open_blo(blo)


def test_no_whole_frame(blo):
    offset = struct.unpack_from("<I", blo.read_bytes(), 12)[0]
    blo.write_bytes(blo.read_bytes()[: offset + 10])
    with pytest.raises(DataSetError, match=r"scan\.blo' holds no whole frame"):
        ltdask.open_blo(blo)


def test_16_bit_note_on_an_8_bit_version(tmp_path):
    """Only the newer version (0x0103) takes its bit depth from the note: a 16-bit note in an
    8-bit file leaves it 8-bit, and the records then do not fit (caught)."""
    path = write_blo(tmp_path / "scan.blo", blo_frames(6, 4, bits=16), (2, 3), bits=16)
    patch(path, 6, "<H", 0x0102)
    with pytest.raises(DataSetError, match="the record of frame"):
        ltdask.open_blo(path)
