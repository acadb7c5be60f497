"""Malformed and truncated EMPAD files: clear `DataSetError`s naming the file and what is
wrong."""

from __future__ import annotations

import pytest
from helpers.empadfiles import empad_frames, write_empad

import ltdask
from ltdask import DataSetError


@pytest.fixture
def xml(tmp_path):
    return write_empad(tmp_path, empad_frames(6, seed=0), (2, 3))


def replace(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_malformed_xml(xml):
    xml.write_text("<root><raw_file filename='x.raw'></root")
    with pytest.raises(DataSetError, match=r"scan\.xml' is not a readable XML file"):
        ltdask.open_empad(xml)


def test_xml_without_raw_file(xml):
    replace(xml, '<raw_file filename="scan_x3_y2.raw"/>', "")
    with pytest.raises(DataSetError, match=r"scan\.xml' is not an EMPAD descriptor"):
        ltdask.open_empad(xml)


def test_missing_raw_file(xml, tmp_path):
    (tmp_path / "scan_x3_y2.raw").rename(tmp_path / "renamed.raw")
    with pytest.raises(DataSetError, match=r"names the raw file 'scan_x3_y2\.raw'.*renamed"):
        ltdask.open_empad(xml)


def test_raw_file_without_a_whole_frame(xml, tmp_path):
    (tmp_path / "scan_x3_y2.raw").write_bytes(bytes(1000))
    with pytest.raises(DataSetError, match=r"scan_x3_y2\.raw' holds no whole EMPAD frame"):
        ltdask.open_empad(xml)


def test_unknown_type(xml):
    replace(xml, "<type>scan</type>", "<type>movie</type>")
    with pytest.raises(DataSetError, match=r"<type> is 'movie'; expected 'scan' or 'series'"):
        ltdask.open_empad(xml)


def test_scan_resolution_not_an_integer(xml):
    replace(xml, "<scan_resolution_x>3<", "<scan_resolution_x>3.5<")
    with pytest.raises(DataSetError, match=r"<scan_resolution_x> is '3\.5', not an integer"):
        ltdask.open_empad(xml)


def test_series_without_count(tmp_path):
    xml = write_empad(tmp_path, empad_frames(3, seed=1), (3,), kind="series")
    replace(xml, "<count>3</count>", "")
    replace(xml, "<scan_parameters><series_count>3</series_count></scan_parameters>", "")
    with pytest.raises(DataSetError, match="a series without <count>"):
        ltdask.open_empad(xml)


def test_raw_without_descriptor_or_nav_shape(tmp_path):
    raw = tmp_path / "lonely.raw"
    raw.write_bytes(bytes(66560 * 2))
    with pytest.raises(DataSetError, match=r"lonely\.raw': no EMPAD XML descriptor.*nav_shape="):
        ltdask.open_empad(raw)


def test_sig_shape_that_does_not_fit(xml):
    with pytest.raises(DataSetError, match=r"sig_shape=\(128, 127\) does not fit the frames"):
        ltdask.open_empad(xml, sig_shape=(128, 127))


def test_nav_shape_beyond_the_file_warns(xml):
    with pytest.warns(ltdask.MissingFramesWarning, match="asks for 8 frames, but the files hold 6"):
        ds = ltdask.open_empad(xml, nav_shape=(2, 4))
    assert ds.valid_nav_mask().sum() == 6


def test_not_a_file(tmp_path):
    with pytest.raises(DataSetError, match="is a directory"):
        ltdask.open_empad(tmp_path)
    with pytest.raises(FileNotFoundError):
        ltdask.open_empad(tmp_path / "nothing.xml")
