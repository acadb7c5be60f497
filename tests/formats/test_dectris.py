"""open_dectris: DECTRIS series written with h5py + hdf5plugin read back as h5py reads them.

The writer (``tests/helpers/dectrisfiles.py``) makes a master and linked data files with
hdf5plugin's filters; the reference is h5py + hdf5plugin reading the same files through the
master's links. RosettaSciIO's ARINA reader is a second, independent reader.
"""

from __future__ import annotations

import re
import warnings

import dask
import numpy as np
import pytest
import xarray as xr
from helpers.dectrisfiles import read_with_h5py, write_series
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.io.formats.dectris import chunks as dectris_chunks
from ltdask.udf import SumSigUDF, SumUDF

pytest.importorskip("hdf5plugin")


def frames_of(n, sig=(9, 11), dtype=np.uint16, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    top = min(np.iinfo(dtype).max, 5000)
    values = np.where(rng.random((n, *sig)) < 0.3, rng.integers(0, top, (n, *sig)), 0)
    return values.astype(dtype)


@pytest.fixture
def small_partitions():
    with dask.config.set(
        {"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1, "ltdask.tile-bytes": 600}
    ):
        yield


@pytest.mark.parametrize(
    "kind, codec",
    [
        ("bslz4", "bslz4"),
        ("bslz4-small-blocks", "bslz4"),
        ("bszstd", "bszstd"),
        ("lz4", "lz4"),
        ("lz4-small-blocks", "lz4"),
        ("none", "none"),
        ("gzip", "h5py"),
    ],
)
@pytest.mark.parametrize(
    "per_file, chunk_frames",
    [(12, 5), (35, 1), (35, 4), (8, 8)],
    ids=["3files-partial-chunks", "1file-1frame", "1file-4frames", "5files-whole-chunks"],
)
def test_equals_h5py(tmp_path, kind, codec, per_file, chunk_frames, small_partitions):
    frames = frames_of(35)
    master = write_series(tmp_path, frames, per_file=per_file, chunk_frames=chunk_frames,
                          kind=kind, scan=(5, 7))  # fmt: skip
    truth = read_with_h5py(master)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.PerformanceWarning)
        ds = ltdask.open_dectris(master)
    assert ds.codec == codec
    assert (ds.nav_shape, ds.sig_shape, ds.dtype) == ((5, 7), (9, 11), np.uint16)
    got = ds.to_dask().compute()
    np.testing.assert_array_equal(got.reshape(truth.shape), truth)
    res = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_array_equal(res[0]["intensity"].values, truth.sum(axis=0))
    np.testing.assert_array_equal(res[1]["intensity"].values, truth.sum(axis=(1, 2)).reshape(5, 7))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32], ids=["u8", "u16", "u32"])
def test_dtypes_keep_full_range(tmp_path, dtype):
    frames = frames_of(6, sig=(5, 8), dtype=dtype)
    frames[0, 0, 0] = np.iinfo(dtype).max  # flagged pixels: the dtype's maximum
    master = write_series(tmp_path, frames, per_file=4, chunk_frames=3)
    ds = ltdask.open_dectris(master, nav_shape=(2, 3))
    assert ds.dtype == dtype
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(frames.shape), frames)


def test_decompresses_in_tasks_not_through_h5py(tmp_path, monkeypatch):
    frames = frames_of(20)
    master = write_series(tmp_path, frames, per_file=7, chunk_frames=3)
    ds = ltdask.open_dectris(master)

    def refuse(*args):
        raise AssertionError("read through h5py")

    monkeypatch.setattr(dectris_chunks.ChunkReader, "_through_h5py", refuse)
    with dask.config.set(scheduler="threads"):
        got = ds.to_dask().compute()
    np.testing.assert_array_equal(got, frames)


def test_nav_shape_sources(tmp_path):
    frames = frames_of(12)
    master = write_series(tmp_path, frames, per_file=5, chunk_frames=2)
    assert ltdask.open_dectris(master).nav_shape == (12,)  # no scan metadata: 1-D
    assert ltdask.open_dectris(master, nav_shape=(3, 4)).nav_shape == (3, 4)
    write_series(tmp_path, frames, per_file=5, chunk_frames=2, scan=(4, 3), scan_step_nm=1.5)
    ds = ltdask.open_dectris(master)
    assert ds.nav_shape == (4, 3)
    assert [(a.scale, a.units) for a in ds.nav_calibration] == [(1.5, "nm")] * 2
    # scan metadata that does not fit the frames is not used, with a word (it had none)
    write_series(tmp_path, frames, per_file=5, chunk_frames=2, scan=(5, 5))
    with pytest.warns(ltdask.MetadataWarning, match="needs 25 frames, the data files hold 12"):
        assert ltdask.open_dectris(master).nav_shape == (12,)


@pytest.mark.parametrize(
    "scan, sync_offset, match",
    [
        pytest.param((-4, 3), 0, r"NumPixelsY=-4, NumPixelsX=3 .*not a scan shape", id="negative"),
        pytest.param((0, 3), 0, r"NumPixelsY=0, NumPixelsX=3 .*not a scan shape", id="zero"),
        pytest.param((3, 5), 0, r"a 3 x 5 scan needs 15 frames, the data files hold 12",
                     id="more-than-the-files"),
        pytest.param((3, 4), 2, r"needs 12 frames, the data files hold 12 \(10 from "
                     r"sync_offset=2\)", id="more-after-sync-offset"),
    ],
)  # fmt: skip
def test_unusable_scan_metadata_warns(tmp_path, scan, sync_offset, match):
    """STEM Metadata that cannot be the scan shape: a flat scan, as before, but the warning
    names the values, the file and the shape used (it opened without a word)."""
    frames = frames_of(12)
    master = write_series(tmp_path, frames, per_file=5, chunk_frames=2, scan=scan)
    base = r"'STEM Metadata' of '.*series\.h5'"
    with pytest.warns(ltdask.MetadataWarning, match=match) as caught:
        ds = ltdask.open_dectris(master, sync_offset=sync_offset)
    used = 12 - sync_offset
    assert ds.nav_shape == (used,)
    message = str(caught[0].message)
    assert re.search(base, message) and f"nav_shape=({used},)" in message
    np.testing.assert_array_equal(ds.to_dask().compute(), frames[sync_offset:])


@pytest.mark.parametrize("sync_offset", [3, -2])
def test_sync_offset(tmp_path, sync_offset):
    frames = frames_of(15)
    master = write_series(tmp_path, frames, per_file=4, chunk_frames=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.MissingFramesWarning)
        ds = ltdask.open_dectris(master, nav_shape=(3, 5), sync_offset=sync_offset)
    expected = np.zeros_like(frames)
    if sync_offset > 0:
        expected[: 15 - sync_offset] = frames[sync_offset:]
    else:
        expected[-sync_offset:] = frames[:sync_offset]
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(frames.shape), expected)


def test_metadata_and_calibration(tmp_path):
    frames = frames_of(6, dtype=np.uint32)
    master = write_series(tmp_path, frames, per_file=6, chunk_frames=2, bit_depth=32,
                          scan=(2, 3), scan_step_nm=0.5)  # fmt: skip
    ds = ltdask.open_dectris(master)
    meta = ds.metadata
    assert meta["detector"] == "Dectris ARINA Si"
    assert meta["pixel size x (m)"] == pytest.approx(75e-6)
    assert meta["bit depth (image)"] == 32
    assert meta["count time (s)"] == pytest.approx(0.00009)
    assert meta["compression"] == "bslz4"
    assert [(a.scale, a.units) for a in ds.sig_calibration] == [(pytest.approx(75.0), "um")] * 2
    xa = ds.to_xarray()
    assert xa.coords["det_x"].attrs["units"] == "um"
    np.testing.assert_allclose(xa.coords["scan_x"].values, [0, 0.5, 1.0])
    res = SumUDF().compute(ds)
    assert res["intensity"].coords["det_y"].attrs["units"] == "um"
    np.testing.assert_array_equal(ds.read_pixel_mask(), np.zeros(frames.shape[1:], np.uint32))


def test_open_from_a_data_file_and_through_registry(tmp_path):
    frames = frames_of(10)
    master = write_series(tmp_path, frames, per_file=4, chunk_frames=2, scan=(2, 5))
    data_file = tmp_path / "series_data_000002.h5"
    for target in (master, data_file):
        ds = ltdask.open(target)
        assert isinstance(ds, ltdask.io.DectrisDataSet)
        assert ds.path == str(master)
        np.testing.assert_array_equal(ds.to_dask().compute().reshape(frames.shape), frames)
    assert ltdask.io.detect_format(master) == "dectris"
    xds = xr.open_dataset(master, engine="ltdask")
    np.testing.assert_array_equal(
        next(iter(xds.data_vars.values())).values.reshape(frames.shape), frames
    )
    # a data file opened as plain HDF5 still reads as HDF5
    assert ltdask.io.detect_format(tmp_path / "series.h5") == "hdf5"


def test_data_in_master_and_one_frame(tmp_path):
    frames = frames_of(1)
    master = write_series(tmp_path, frames, in_master=True)
    ds = ltdask.open_dectris(master)
    assert ds.nav_shape == (1,)
    np.testing.assert_array_equal(ds.to_dask().compute(), frames)


def test_roi_and_pickle(tmp_path):
    import pickle

    frames = frames_of(35)
    master = write_series(tmp_path, frames, per_file=12, chunk_frames=5, scan=(5, 7))
    ds = pickle.loads(pickle.dumps(ltdask.open_dectris(master)))
    roi = np.zeros((5, 7), bool)
    roi[1, 2:6] = roi[4, 0] = True
    res = SumUDF().compute(ds, roi=roi)
    np.testing.assert_array_equal(res["intensity"].values, frames[roi.ravel()].sum(axis=0))


def test_rosettasciio_reads_the_same(tmp_path):
    # RosettaSciIO's ARINA reader swaps the axes of non-square frames: square ones here
    arina = pytest.importorskip("rsciio.arina")
    frames = frames_of(12, sig=(8, 8))
    master = write_series(tmp_path, frames, per_file=5, chunk_frames=1, scan=(3, 4),
                          scan_step_nm=0.25)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = arina.file_reader(str(master), navigation_shape=(3, 4))[0]
    ds = ltdask.open_dectris(master)
    ours = ds.to_dask().compute()
    np.testing.assert_array_equal(ours, np.asarray(theirs["data"]).reshape(ours.shape))
    assert theirs["axes"][0]["units"] == "A"
    assert ds.nav_calibration[0].scale * 10 == pytest.approx(theirs["axes"][0]["scale"])


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n=st.integers(1, 23),
    per_file=st.integers(1, 9),
    chunk_frames=st.integers(1, 6),
    kind=st.sampled_from(["bslz4", "lz4"]),
    partition_bytes=st.integers(200, 3000),
)
def test_any_split_reads_the_frames(tmp_path_factory, n, per_file, chunk_frames, kind,
                                    partition_bytes):  # fmt: skip
    folder = tmp_path_factory.mktemp("series")
    frames = frames_of(n, sig=(4, 6), seed=n)
    master = write_series(folder, frames, per_file=per_file, chunk_frames=chunk_frames, kind=kind)
    with dask.config.set({"ltdask.partition-bytes": partition_bytes, "ltdask.tile-bytes": 100}):
        ds = ltdask.open_dectris(master)
        np.testing.assert_array_equal(ds.to_dask().compute(), frames)
        np.testing.assert_array_equal(SumUDF().compute(ds)["intensity"].values, frames.sum(0))


def test_info_prints_the_detector(tmp_path):
    from click.testing import CliRunner

    from ltdask.cli import main

    master = write_series(tmp_path, frames_of(6), per_file=4, chunk_frames=2, scan=(2, 3))
    result = CliRunner().invoke(main, ["info", str(master)])
    assert result.exit_code == 0, result.output
    rows = dict(line.split(None, 1) for line in result.output.splitlines() if " " in line.strip())
    assert rows["format"].strip() == "dectris"
    assert "Dectris ARINA Si" in result.output
    assert "(2, 3)" in result.output
