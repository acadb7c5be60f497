"""Malformed ``.seq`` files and side files: errors that name the file and the field."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from helpers.badinput import case_id, record
from helpers.seqfiles import frames_for, write_bad_pixel_xml, write_metadata, write_mrc, write_seq

import ltdask
from ltdask import DataSetError
from ltdask.io.formats.seq import open_seq


def patched(tmp_path, offset, fmt, value, n=4):
    path = write_seq(tmp_path / "x.seq", frames_for(n))
    raw = bytearray(path.read_bytes())
    struct.pack_into(fmt, raw, offset, value)
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize(
    "offset, fmt, value, message",
    [
        pytest.param(0, "<I", 0xBEEF, r"magic 0xbeef at byte 0", id="magic"),
        pytest.param(568, "<I", 200, "image_format is 200", id="colour"),
        pytest.param(620, "<I", 1, "compression_format is 1", id="compressed"),
        pytest.param(556, "<I", 12, "bit_depth is 12", id="bit-depth"),
        pytest.param(548, "<I", 0, "width is 0", id="zero-width"),
        pytest.param(552, "<I", 2**31, "height is 2147483648", id="huge-height"),
        pytest.param(580, "<I", 10, "true_image_size is 10 bytes", id="slot-too-small"),
    ],
)
def test_bad_header_fields(tmp_path, offset, fmt, value, message):
    path = patched(tmp_path, offset, fmt, value)
    with pytest.raises(DataSetError, match=message) as e:
        open_seq(path, nav_shape=(4,))
    assert "x.seq" in str(e.value)


def test_truncated_files(tmp_path):
    path = tmp_path / "short.seq"
    path.write_bytes(b"\xed\xfe\0\0" + bytes(100))
    with pytest.raises(DataSetError, match=r"short\.seq.*shorter than a StreamPix"):
        open_seq(path, nav_shape=(1,))
    path = write_seq(tmp_path / "empty.seq", frames_for(1), truncate=100)
    with pytest.raises(DataSetError, match=r"empty\.seq.*not even one frame"):
        open_seq(path, nav_shape=(1,))


def test_arguments(tmp_path):
    path = write_seq(tmp_path / "a.seq", frames_for(4, (3, 4)))
    with pytest.raises(DataSetError, match="pass nav_shape"):
        open_seq(path)
    with pytest.raises(DataSetError, match=r"sig_shape=\(5, 5\) does not fit.*12 pixels"):
        open_seq(path, nav_shape=(4,), sig_shape=(5, 5))
    with pytest.raises(FileNotFoundError, match="missing.seq"):
        open_seq(tmp_path / "missing.seq", nav_shape=(4,))


@pytest.mark.parametrize(
    "image, cut, mode, message",
    [
        pytest.param(
            np.zeros((4, 3)), 0, 2, r"nx=3, ny=4, nz=1; expected .* nx=4, ny=3, nz=1", id="shape"
        ),
        pytest.param(np.zeros((3, 4)), 10, 2, "truncated", id="truncated"),
        pytest.param(np.zeros((3, 4)), 0, 4, "MRC mode 4", id="mode"),
        pytest.param(np.zeros((3, 4)), 1000, 2, "shorter than an MRC header", id="no-header"),
    ],
)
def test_bad_references(tmp_path, image, cut, mode, message):
    path = write_seq(tmp_path / "a.seq", frames_for(4, (3, 4)))
    ref = write_mrc(tmp_path / "a.seq.gain.mrc", image, mode=2)
    raw = bytearray(ref.read_bytes())
    struct.pack_into("<i", raw, 12, mode)
    ref.write_bytes(bytes(raw[: len(raw) - cut]))
    with pytest.raises(DataSetError, match=message) as e:
        open_seq(path, nav_shape=(4,))
    assert "a.seq.gain.mrc" in str(e.value)
    # the reference can be left out
    ds = open_seq(path, nav_shape=(4,), gain=False)
    np.testing.assert_array_equal(ds.to_dask().compute(), frames_for(4, (3, 4)))


HOT = [{"Row": "2", "Column": "3"}]


@pytest.mark.parametrize(
    "maps, binning, match",
    [
        pytest.param([(6, 6, None, HOT)], 1,
                     r"map of Rows=6, Columns=6 of \(6, 6\) does not fit frames of \(3, 4\)",
                     id="map-smaller-than-the-crop"),
        pytest.param([(12, 12, None, [{"Row": "12"}])], 1, r"Defect Row='12' is not a pixel",
                     id="defect-beyond-the-map"),
        pytest.param([(12, 12, None, [{"Columns": "5-x"}])], 1, r"Defect Columns='5-x'",
                     id="defect-not-a-range"),
        pytest.param([(12, "many", None, HOT)], 1, r"Columns='many' is not an integer",
                     id="map-size-not-int"),
        pytest.param([(12, 12, None, HOT)], 2, r"no BadPixelMap for HardwareBinning=2",
                     id="no-map-for-the-binning"),
        pytest.param(None, 1, r"not readable XML", id="not-xml"),
    ],
)  # fmt: skip
def test_unusable_bad_pixel_maps(request, tmp_path, maps, binning, match):
    """A bad-pixel map that cannot be used is left out with a MetadataWarning naming the
    file and the value; the dark and gain still apply."""
    frames = frames_for(4, (3, 4))
    path = write_seq(tmp_path / "a.seq", frames)
    dark = np.full((3, 4), 2, np.float32)
    write_mrc(tmp_path / "a.seq.dark.mrc", dark)
    write_metadata(tmp_path / "a.seq.metadata", binning=binning, size=(3, 4), offset=(2, 3))
    xml = tmp_path / "a.seq.Config.Metadata.xml"
    if maps is None:
        xml.write_text("<Configuration><BadPixelMap")
    else:
        write_bad_pixel_xml(xml, maps)
    with pytest.warns(ltdask.MetadataWarning, match=match) as caught:
        ds = open_seq(path, nav_shape=(4,))
    message = str(caught[0].message)
    short = message.replace(str(tmp_path) + "/", ".../")
    record(case_id(request), None, f"MetadataWarning: {short}")
    assert "a.seq.Config.Metadata.xml" in message
    np.testing.assert_allclose(ds.to_dask().compute(), frames - dark)
