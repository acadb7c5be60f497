"""``ltdask.open`` (``ltdask.io.open.open_dataset``): the format from suffix and magic bytes."""

from __future__ import annotations

import dataclasses
import importlib
import shutil
import sys

import numpy as np
import pytest
from helpers.formatfiles import (
    FILE_FORMAT_PARAMS,
    HAVE_H5PY,
    make_data,
    write_hdf5,
    write_npy,
    write_raw_csr,
)

import ltdask
from ltdask import DataSetError
from ltdask.io import registry
from ltdask.io.open import detect_format, open_dataset
from ltdask.io.registry import FormatPluginError, FormatPluginWarning

DATA = make_data("<u2", nav=(3, 4), sig=(5, 6))


@pytest.mark.parametrize("fmt", FILE_FORMAT_PARAMS)
def test_every_format_opens_by_path(fmt, tmp_path):
    data = fmt.data()
    target, kwargs = fmt.write_to(tmp_path, data)
    expected = fmt.opener(target, **kwargs)
    ds = open_dataset(target, **kwargs)
    assert type(ds) is type(expected)
    assert ds.shape == data.shape
    np.testing.assert_array_equal(ds.to_dask().compute(), data)


@pytest.mark.parametrize(
    "write, suffix, expected",
    [
        pytest.param(write_npy, ".dat5", "npy", id="npy-magic"),
        pytest.param(
            write_hdf5,
            ".data",
            "hdf5",
            id="hdf5-magic",
            marks=pytest.mark.skipif(not HAVE_H5PY, reason="needs h5py"),
        ),
        pytest.param(write_raw_csr, ".conf", "raw_csr", id="toml-descriptor"),
    ],
)
def test_magic_bytes_without_suffix(tmp_path, write, suffix, expected):
    path, kwargs = write(tmp_path, DATA)
    renamed = path.with_suffix(suffix)
    shutil.move(path, renamed)
    assert detect_format(renamed) == expected
    np.testing.assert_array_equal(open_dataset(renamed, **kwargs).to_dask().compute(), DATA)


def test_zarr_spellings(tmp_path):
    import zarr

    z = zarr.create_array(str(tmp_path / "scan"), shape=DATA.shape, dtype=DATA.dtype)
    z[...] = DATA
    for target in (tmp_path / "scan", tmp_path / "scan" / "zarr.json", z):
        assert detect_format(target) == "zarr"
        np.testing.assert_array_equal(open_dataset(target).to_dask().compute(), DATA)


def test_zarr_key_is_path(tmp_path):
    import zarr

    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("a", shape=DATA.shape, dtype=DATA.dtype)[...] = DATA
    group.create_array("b", shape=DATA.shape, dtype=DATA.dtype)
    for kw in ({"key": "a"}, {"path": "a"}):
        np.testing.assert_array_equal(
            open_dataset(tmp_path / "g.zarr", **kw).to_dask().compute(), DATA
        )


def test_raw_needs_shape_and_dtype(tmp_path):
    path = tmp_path / "scan.raw"
    DATA.tofile(path)
    with pytest.raises(
        DataSetError, match=r"read as raw data \(.*\), which has no header: pass sig_shape=, dtype="
    ):
        open_dataset(path, nav_shape=(3, 4))
    ds = open_dataset(path, nav_shape=(3, 4), sig_shape=(5, 6), dtype="<u2")
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA)
    # no suffix: raw when the keywords describe it
    bare = tmp_path / "scan"
    shutil.copy(path, bare)
    assert detect_format(bare, dict(nav_shape=(3, 4), sig_shape=(5, 6), dtype="<u2")) == "raw"


def test_unknown_format_lists_the_supported_ones(tmp_path):
    path = tmp_path / "scan.xyz"
    path.write_bytes(b"\x00" * 100)
    with pytest.raises(
        DataSetError,
        match=r"cannot tell the format of .*scan.xyz.*raw: .*npy: "
        r".*hdf5: .*zarr: .*raw_csr: .*mib: ",
    ):
        open_dataset(path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(
        DataSetError, match="is a directory but not a zarr store; ltdask.open reads"
    ):
        open_dataset(tmp_path / "folder")
    with pytest.raises(DataSetError, match=r"format='tiff' is not known; supported: raw, npy"):
        open_dataset(path, format="tiff")


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        open_dataset(tmp_path / "nope.h5")


def test_unknown_keyword(tmp_path):
    path, _ = write_npy(tmp_path, DATA)
    with pytest.raises(TypeError, match=r"npy data does not take 'key'; open_npy takes sig_dims"):
        open_dataset(path, key="data")


def test_format_forces_the_opener(tmp_path):
    path, _ = write_npy(tmp_path, DATA)
    weird = tmp_path / "scan.h5"
    shutil.move(path, weird)
    np.testing.assert_array_equal(open_dataset(weird, format="npy").to_dask().compute(), DATA)


@pytest.mark.parametrize("name", ["scan.mib", "scan.hdr", "scan-magic"])
def test_mib_goes_to_the_mib_reader(tmp_path, monkeypatch, fresh_registry, name):
    path = tmp_path / name
    path.write_bytes(b"MQ1,000001,00384,01,0256,0256,U16,   1x1" + b"\x00" * 100)
    calls = []
    opened = ltdask.from_array(np.zeros((1, 1, 2, 2)))  # (an opener must return a dataset)
    mib = importlib.import_module("ltdask.io.formats.mib")
    fake = dataclasses.replace(
        mib.FORMAT, opener=lambda path, **kw: calls.append((path, kw)) or opened
    )
    monkeypatch.setattr(mib, "FORMAT", fake)
    registry.refresh()
    assert detect_format(path) == "mib"
    assert open_dataset(path, nav_shape=(1, 1)) is opened
    assert calls == [(path, {"nav_shape": (1, 1)})]


def test_mib_without_the_mib_reader(tmp_path, monkeypatch, fresh_registry):
    """A format whose module cannot be imported is left out, and says why."""
    path = tmp_path / "scan.mib"
    path.write_bytes(b"MQ1," + b"\x00" * 100)
    monkeypatch.setitem(sys.modules, "ltdask.io.formats.mib", None)  # import fails
    registry.refresh()
    with pytest.warns(FormatPluginWarning, match=r"format 'mib' from ltdask itself cannot be"):
        assert "mib" not in registry.format_names()
    message = r"cannot tell the format .* could not be loaded: the record of the format 'mib'"
    with pytest.raises(DataSetError, match=message):
        open_dataset(path)
    with pytest.raises(FormatPluginError, match=r"ModuleNotFoundError.*; reinstall ltdask"):
        open_dataset(path, format="mib")


def test_hdr_files_go_to_their_detector(tmp_path):
    """Merlin and pnCCD acquisitions both have ``.hdr`` files: their first bytes decide."""
    merlin = tmp_path / "merlin.hdr"
    merlin.write_text("HDR,\t\nFrames in Acquisition (Number):\t4\nEnd\t\n")
    pnccd = tmp_path / "pnccd.hdr"
    pnccd.write_text("[measurementInfo]\nframes=4\n")
    other = tmp_path / "other.hdr"
    other.write_text("something else\n")
    assert detect_format(merlin) == "mib"
    assert detect_format(pnccd) == "frms6"
    with pytest.raises(DataSetError, match="cannot tell the format"):
        detect_format(other)
