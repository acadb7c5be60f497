"""open_frms6: pnCCD acquisitions read back as the unfolded images the writer folded, with
the mean of the dark frames subtracted by default (as LiberTEM does) and a gain map applied.

The writer (``tests/helpers/frms6files.py``) folds images with numpy from the published
layout; the numpy reference of the reader's unfolding (``frms6_kernels.unfold``) must invert
it. LiberTEM's reading of the same files is compared in ``tests/reference``.
"""

from __future__ import annotations

import dataclasses
import pickle

import dask
import numpy as np
import pytest
import scipy.io
from helpers.frms6files import fold, random_images, write_acquisition

import ltdask
from ltdask.io.formats.frms6 import open_frms6
from ltdask.io.formats.frms6.kernels import unfold
from ltdask.udf import PickUDF, StdDevUDF, SumSigUDF, SumUDF

SMALL = {"ltdask.partition-bytes": 3000, "ltdask.min-partitions": 1, "ltdask.tile-bytes": 400}
RAW = ltdask.CorrectionSet()


def acquisition(tmp_path, n=12, sig=(8, 6), binning=1, scan=(3, 4), splits=(5,), seed=0, **kw):
    images = random_images(n, sig, binning, seed=seed)
    dark = random_images(3, sig, binning, seed=seed + 1, high=60)
    hdr = write_acquisition(tmp_path, images, dark, binning, scan, splits, **kw)
    return hdr, images, dark.astype(np.float64).mean(0)


@pytest.mark.parametrize("binning", [1, 2, 4])
def test_unfold_inverts_fold(binning):
    images = random_images(3, (16, 10), binning, seed=binning)
    np.testing.assert_array_equal(unfold(fold(images, binning), binning), images)


@pytest.mark.parametrize(
    "binning, sig, splits",
    [
        pytest.param(1, (8, 6), (5,), id="bin1-two-files"),
        pytest.param(2, (8, 6), (), id="bin2-one-file"),
        pytest.param(4, (16, 10), (3, 4, 9), id="bin4-four-files"),
        pytest.param(1, (2, 1), (11,), id="bin1-tiny-frames"),
    ],
)
def test_frames_unfolded(tmp_path, binning, sig, splits):
    hdr, images, dark = acquisition(tmp_path, 12, sig, binning, splits=splits)
    ds = open_frms6(hdr)
    assert ds.nav_shape == (3, 4) and ds.sig_shape == sig and ds.dtype == np.uint16
    raw = ds.to_dask(corrections=RAW).compute(scheduler="sync")
    np.testing.assert_array_equal(raw.reshape(images.shape), images)
    # any chunking of the frame, also across the two halves and binned row pairs
    cut = ds.to_dask(dtype="float64", chunks=(2, 3, 3, 5), corrections=RAW).compute()
    np.testing.assert_array_equal(cut.reshape(images.shape), images)
    corrected = ds.to_dask().compute()
    assert corrected.dtype == np.float32
    np.testing.assert_allclose(corrected.reshape(images.shape), images - dark, atol=1e-3)


@pytest.mark.parametrize("binning", [1, 2])
def test_udfs_with_dark_and_roi(tmp_path, binning):
    hdr, images, dark = acquisition(tmp_path, 12, (8, 6), binning, splits=(4, 7))
    roi = np.random.default_rng(3).random((3, 4)) < 0.5
    roi[0, 0] = True
    expected = (images - dark)[roi.reshape(-1)]
    with dask.config.set(SMALL):
        ds = open_frms6(hdr)
        res = ltdask.udf.SumUDF().compute(ds, roi=roi)
        sums = ltdask.udf.SumSigUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].values, expected.sum(0), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(
        sums["intensity"].values.reshape(-1), (images - dark).sum((1, 2)), rtol=1e-5
    )


def _without_layout(cls):
    """`cls` as a subclass that reads decoded frames (it declares the other paths)."""
    paths = dataclasses.replace(cls.TILE_PATHS, folds_layout=False)
    return type(f"Decoded{cls.__name__}", (cls,), {"TILE_PATHS": paths})


@pytest.mark.parametrize(
    "binning, nav, sync_offset, corrections",
    [
        pytest.param(1, (3, 4), 0, "dark", id="bin1-dark"),
        pytest.param(2, (3, 4), 0, "dark+gain", id="bin2-dark-gain"),
        pytest.param(4, (2, 5), 2, None, id="bin4-skip-2-raw"),
        pytest.param(1, (3, 5), -3, "dark+gain", id="bin1-missing-frames"),
        pytest.param(2, (1,), 11, "dark", id="bin2-one-frame"),
    ],
)
@pytest.mark.parametrize("which", ["sum", "sumsig", "stddev", "all"])
def test_udfs_sum_the_raw_frames(tmp_path, binning, nav, sync_offset, corrections, which):
    """Sum, SumSig and StdDev read the raw frames as stored (no unfolding) and move their
    per-pixel results: equal to numpy on the unfolded frames, and to the same UDFs reading
    decoded frames."""
    hdr, images, dark = acquisition(tmp_path, 12, (8, 6), binning, splits=(4, 7))
    gain = np.random.default_rng(7).random((8, 6)) + 0.5
    np.save(tmp_path / "gain.npy", gain)
    kw = {"gain_map_path": tmp_path / "gain.npy"} if corrections == "dark+gain" else {}
    kw["enable_offset_correction"] = corrections is not None
    warn = sync_offset < 0
    with pytest.warns(ltdask.MissingFramesWarning) if warn else _nothing():
        ds = open_frms6(hdr, nav_shape=nav, sync_offset=sync_offset, **kw)
    n = int(np.prod(nav))
    frames = np.zeros((n, 8, 6))
    for i in range(n):
        if 0 <= sync_offset + i < 12:
            frames[i] = images[sync_offset + i]
    present = (np.arange(n) + sync_offset >= 0) & (np.arange(n) + sync_offset < 12)
    if corrections is not None:
        frames = np.where(present[:, None, None], frames - dark, 0)
    if corrections == "dark+gain":
        frames = frames * gain
    roi = np.random.default_rng(3).random(nav) < 0.6
    roi.reshape(-1)[-1] = True
    picked = frames[roi.reshape(-1) & present]
    classes = {"sum": [SumUDF], "sumsig": [SumSigUDF], "stddev": [StdDevUDF]}
    classes["all"] = [SumUDF, SumSigUDF, StdDevUDF]
    udfs = [c() for c in classes[which]]
    with dask.config.set(SMALL):
        # (SumSigUDF folds a gain map as pixel weights, moved to the raw pixels)
        assert "the files' raw frames" in str(ltdask.explain(ds, udfs, roi=roi))
        got = ltdask.compute(ds, udfs, roi=roi)
        decoded = ltdask.compute(ds, [_without_layout(c)() for c in classes[which]], roi=roi)
    for res, ref in zip(got, decoded, strict=True):
        for name in ref.data_vars:
            np.testing.assert_allclose(res[name].values, ref[name].values, rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(
                res[name].attrs.get("valid", None), ref[name].attrs.get("valid", None)
            )
    for cls, res in zip(classes[which], got, strict=True):
        if cls is SumUDF:
            want = picked.sum(0)
            np.testing.assert_allclose(res["intensity"].values, want, rtol=1e-5, atol=1e-3)
        elif cls is SumSigUDF:
            sel = roi.reshape(-1) & present
            values = res["intensity"].values.reshape(-1)[sel]
            np.testing.assert_allclose(values, frames[sel].sum((1, 2)), rtol=1e-5, atol=1e-2)
        else:
            np.testing.assert_allclose(res["var"].values, picked.var(0), rtol=1e-4, atol=1e-3)
            assert int(res["num_frames"].values.reshape(-1)[0]) == len(picked)


def test_other_runs_read_decoded_frames(tmp_path):
    """UDFs that see the frames (a pick) read unfolded frames; excluded pixels are folded
    into the sums and moments of the raw frames and repaired as numpy does."""
    hdr, images, dark = acquisition(tmp_path)
    ds = open_frms6(hdr)
    mask = np.zeros((8, 6), bool)
    mask[2, 3] = True
    repaired = ltdask.CorrectionSet(dark=dark, excluded_pixels=mask)
    assert "raw frames" in str(ltdask.explain(ds, [SumUDF()], corrections=repaired))
    assert "raw frames" not in str(ltdask.explain(ds, [SumUDF(), PickUDF()]))
    roi = np.eye(3, 4, dtype=bool)
    res = ltdask.compute(ds, [SumUDF(), PickUDF()], roi=roi)
    want = (images[[0, 5, 10]] - dark).sum(0)
    np.testing.assert_allclose(res[0]["intensity"].values, want, rtol=1e-5, atol=1e-3)
    want[2, 3] = (want[1:4, 2:5].sum() - want[2, 3]) / 8  # (the mean of its 8 neighbours)
    got = SumUDF().compute(ds, roi=roi, corrections=repaired)["intensity"].values
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)
    assert "raw frames" in str(ltdask.explain(ds, [StdDevUDF()], corrections=repaired))
    frames = images[[0, 5, 10]] - dark
    frames[:, 2, 3] = (frames[:, 1:4, 2:5].sum((1, 2)) - frames[:, 2, 3]) / 8
    got = StdDevUDF().compute(ds, roi=roi, corrections=repaired)["var"].values
    np.testing.assert_allclose(got, frames.var(0), rtol=1e-4, atol=1e-3)


def test_gain_map(tmp_path):
    hdr, images, dark = acquisition(tmp_path)
    gain = np.random.default_rng(5).random((8, 6)) + 0.5
    scipy.io.savemat(tmp_path / "gain.mat", {"GainMap": gain})
    # LiberTEM transposes a CSV gain map after parsing: the file holds the map's columns
    (tmp_path / "gain.csv").write_text(
        "\n".join(";".join(f"{v:.17g}" for v in col) + ";" for col in gain.T)
    )
    for path in ("gain.mat", "gain.csv"):
        ds = open_frms6(hdr, gain_map_path=tmp_path / path)
        got = ds.to_dask().compute().reshape(images.shape)
        np.testing.assert_allclose(got, (images - dark) * gain, rtol=1e-5, atol=1e-3)
        plain = open_frms6(hdr, gain_map_path=tmp_path / path, enable_offset_correction=False)
        got = plain.to_dask().compute().reshape(images.shape)
        np.testing.assert_allclose(got, images * gain, rtol=1e-5)


def test_without_offset_correction(tmp_path):
    hdr, images, _ = acquisition(tmp_path)
    ds = open_frms6(hdr, enable_offset_correction=False)
    assert ds.default_corrections() is None
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(images.shape), images)


@pytest.mark.parametrize(
    "nav, sync_offset, first, count",
    [
        pytest.param(None, 0, 0, 12, id="hdr-scan"),
        pytest.param((2, 5), 2, 2, 10, id="skip-2"),
        pytest.param((3, 5), -3, -3, 15, id="insert-3-missing-end"),
        pytest.param((1,), 11, 11, 1, id="last-frame"),
        pytest.param((7,), 0, 0, 7, id="odd-line"),
    ],
)
def test_scan_shapes_and_sync(tmp_path, nav, sync_offset, first, count):
    hdr, images, _ = acquisition(tmp_path)
    warn = (first < 0) or (first + count > 12)
    with pytest.warns(ltdask.MissingFramesWarning) if warn else _nothing():
        ds = open_frms6(hdr, nav_shape=nav, sync_offset=sync_offset)
    got = ds.to_dask(corrections=RAW).compute().reshape(count, *images.shape[1:])
    for i in range(count):
        want = images[first + i] if 0 <= first + i < 12 else 0
        np.testing.assert_array_equal(got[i], want)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_partial_last_frame_and_header_counts(tmp_path):
    """Files without frame counts (older files) and a file cut inside its last frame: the
    whole frames are read, the cut one is missing."""
    hdr, images, _ = acquisition(tmp_path, count_in_header=False)
    last = tmp_path / "scan_002.frms6"
    last.write_bytes(last.read_bytes()[:-10])
    with pytest.warns(ltdask.MissingFramesWarning):
        ds = open_frms6(hdr)
    assert ds.image_count == 11
    got = ds.to_dask(corrections=RAW).compute().reshape(images.shape)
    np.testing.assert_array_equal(got[:11], images[:11])
    np.testing.assert_array_equal(got[11], 0)


def test_signalframes_limits_the_stream(tmp_path):
    hdr, images, _ = acquisition(tmp_path, scan=None, signal_frames=9)
    ds = open_frms6(hdr)
    assert ds.nav_shape == (9,)
    np.testing.assert_array_equal(ds.to_dask(corrections=RAW).compute(), images[:9])


def test_opening_from_any_file_and_metadata(tmp_path):
    hdr, images, _ = acquisition(tmp_path, binning=2)
    for path in (hdr, tmp_path / "scan_000.frms6", tmp_path / "scan_002.frms6"):
        ds = open_frms6(path)
        np.testing.assert_array_equal(
            ds.to_dask(corrections=RAW).compute().reshape(images.shape), images
        )
    ds = ltdask.open(tmp_path / "scan_001.frms6")
    assert type(ds).__name__ == "Frms6DataSet"
    assert ds.metadata["binning"] == 2 and ds.metadata["dark frames"] == 3
    assert ds.metadata["raw frame"] == (2, 12) and ds.metadata["signal frames"] == 12
    xr = pytest.importorskip("xarray")
    xa = xr.open_dataset(tmp_path / "scan_001.frms6", engine="ltdask")
    arr = next(iter(xa.data_vars.values()))
    assert arr.shape == (3, 4, 8, 6)


def test_pickles_small(tmp_path):
    hdr, _, _ = acquisition(tmp_path)
    ds = open_frms6(hdr)
    assert len(pickle.dumps(ds)) < 4000
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again.to_dask().compute(), ds.to_dask().compute())
