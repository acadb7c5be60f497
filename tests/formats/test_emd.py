"""open_emd: Velox files written from the published description read back as written, and as
RosettaSciIO's Velox reader reads them (data and calibrations)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr
from helpers.emdfiles import write_emd

import ltdask
from ltdask.udf import SumSigUDF, SumUDF


def frames_of(n, sig=(9, 11), dtype=np.uint16, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n, *sig)).astype(dtype)
    return rng.integers(0, 3000, (n, *sig)).astype(dtype)


def rsciio_stack(path):
    emd = pytest.importorskip("rsciio.emd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = emd.file_reader(str(path))
    return [r for r in found if r["data"].ndim == 3]


LAYOUTS = [
    pytest.param({}, "VeloxDataSet", id="frame-chunks"),
    pytest.param({"chunked": False}, "VeloxH5DataSet", id="contiguous"),
    pytest.param({"create": {"compression": "gzip"}}, "VeloxH5DataSet", id="gzip"),
]


@pytest.mark.parametrize("kwargs, cls", LAYOUTS)
@pytest.mark.parametrize("dtype", ["<u2", "<i4", "<f4"])
def test_equals_written_and_rosettasciio(tmp_path, kwargs, cls, dtype):
    frames = frames_of(35, dtype=dtype)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(5, 7), extra_image=True, **kwargs)
    ds = ltdask.open_emd(path)
    assert type(ds).__name__ == cls
    assert (ds.nav_shape, ds.sig_shape, ds.dtype) == ((5, 7), (9, 11), np.dtype(dtype))
    got = ds.to_dask().compute()
    np.testing.assert_array_equal(got.reshape(frames.shape), frames)
    (theirs,) = rsciio_stack(path)
    np.testing.assert_array_equal(got.reshape(frames.shape), np.asarray(theirs["data"]))
    res = ltdask.compute(ds, [SumUDF(), SumSigUDF()])
    np.testing.assert_allclose(
        res[0]["intensity"].values, frames.sum(0, dtype=np.float64), rtol=1e-5
    )
    np.testing.assert_allclose(
        res[1]["intensity"].values, frames.sum((1, 2), dtype=np.float64).reshape(5, 7), rtol=1e-5
    )


@pytest.mark.parametrize(
    "unit, size, offset",
    [
        ("1/m", (2.5e8, 3.0e8), (-1.2e10, -1.1e10)),
        ("m", (1.5e-11, 2.5e-11), (0.0, 4e-10)),
        ("rad", (1e-4, 1e-4), (-0.003, -0.004)),
    ],
    ids=["reciprocal", "metres", "radians"],
)
def test_calibrations_match_rosettasciio(tmp_path, unit, size, offset):
    pint = pytest.importorskip("pint")
    ureg = pint.UnitRegistry()
    frames = frames_of(6)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(2, 3), pixel_size=size, unit=unit,
                     offset=offset)  # fmt: skip
    ds = ltdask.open_emd(path)
    (theirs,) = rsciio_stack(path)
    sig_axes = [a for a in theirs["axes"] if a.get("name") in ("y", "x")]
    assert len(sig_axes) == 2
    for ours, axis in zip(ds.sig_calibration, sig_axes, strict=True):
        theirs_unit = ureg(str(axis["units"]).replace(" ", "")).units
        scale = (ours.scale * ureg(ours.units)).to(theirs_unit).magnitude
        origin = (ours.origin * ureg(ours.units)).to(theirs_unit).magnitude
        assert scale == pytest.approx(axis["scale"], rel=1e-9)
        assert origin == pytest.approx(axis["offset"], rel=1e-9, abs=1e-12)
    xa = ds.to_xarray()
    assert xa.coords["det_x"].attrs["units"] == ds.sig_calibration[1].units
    res = SumUDF().compute(ds)
    np.testing.assert_allclose(res["intensity"].coords["det_y"].values,
                               ds.sig_calibration[0].coordinate(9))  # fmt: skip


def test_several_series_by_name_and_listing(tmp_path):
    import h5py
    from helpers.emdfiles import add_series, frame_metadata

    frames = frames_of(12, sig=(4, 5))
    path = write_emd(tmp_path / "scan.emd", frames, scan=(3, 4), extra_image=True)
    other = frames_of(6, sig=(4, 5), seed=1)
    with h5py.File(path, "a") as f:
        uuid = add_series(f, other, frame_metadata(other, detector="DF4", scan=(2, 3)))
    with pytest.raises(ltdask.DataSetError, match=r"several image series") as info:
        ltdask.open_emd(path)
    for text in ("scan.emd", "dataset=", "(Ceta, 12 frames", "(DF4, 6 frames", uuid):
        assert text in str(info.value)
    by_name = ltdask.open_emd(path, dataset="DF4")
    by_uuid = ltdask.open_emd(path, dataset=uuid)
    by_key = ltdask.open(path, key=f"/Data/Image/{uuid}/Data")
    for ds in (by_name, by_uuid, by_key):
        assert ds.nav_shape == (2, 3)
        np.testing.assert_array_equal(ds.to_dask().compute().reshape(other.shape), other)
    ceta = ltdask.open_emd(path, dataset="Ceta")
    np.testing.assert_array_equal(ceta.to_dask().compute().reshape(frames.shape), frames)
    with pytest.raises(ltdask.DataSetError, match=r"dataset='HAADF2' names no series.*HAADF"):
        ltdask.open_emd(path, dataset="HAADF2")


def test_nav_shape_sources_and_metadata(tmp_path):
    frames = frames_of(12)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(3, 4))
    ds = ltdask.open_emd(path)
    assert ds.nav_shape == (3, 4)
    assert ds.metadata["detector"] == "Ceta"
    assert ds.metadata["velox version"] == "11"
    assert ds.metadata["microscope"] == "Talos F200X"
    assert ltdask.open_emd(path, nav_shape=(2, 6)).nav_shape == (2, 6)
    assert ltdask.open_emd(write_emd(tmp_path / "a.emd", frames)).nav_shape == (12,)
    # a scan size that does not fit the frames is not used
    assert ltdask.open_emd(write_emd(tmp_path / "b.emd", frames, scan=(5, 5))).nav_shape == (12,)
    one = frames_of(1)
    ds = ltdask.open_emd(write_emd(tmp_path / "c.emd", one, scan=(1, 1)))
    assert ds.nav_shape == (1, 1)
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(one.shape), one)


def test_registry_xarray_roi_pickle(tmp_path):
    import pickle

    frames = frames_of(35)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(5, 7))
    assert ltdask.io.detect_format(path) == "velox"
    ds = pickle.loads(pickle.dumps(ltdask.open(path)))
    roi = np.zeros((5, 7), bool)
    roi[0, 1] = roi[3, 2:5] = True
    res = SumUDF().compute(ds, roi=roi)
    np.testing.assert_array_equal(res["intensity"].values, frames[roi.ravel()].sum(0))
    xds = xr.open_dataset(path, engine="ltdask")
    np.testing.assert_array_equal(
        next(iter(xds.data_vars.values())).values.reshape(frames.shape), frames
    )


def test_other_emd_files_stay_hdf5(tmp_path):
    import h5py

    path = tmp_path / "berkeley.emd"
    with h5py.File(path, "w") as f:
        f.create_dataset("data/datacube", data=np.zeros((2, 3, 4, 5), np.uint8))
    assert ltdask.io.detect_format(path) == "hdf5"
    assert ltdask.open(path).nav_shape == (2, 3)


@pytest.mark.parametrize("sync_offset", [4, -3])
def test_sync_offset(tmp_path, sync_offset):
    frames = frames_of(12)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.MissingFramesWarning)
        ds = ltdask.open_emd(path, sync_offset=sync_offset)
    expected = np.zeros_like(frames)
    if sync_offset > 0:
        expected[: 12 - sync_offset] = frames[sync_offset:]
    else:
        expected[-sync_offset:] = frames[:sync_offset]
    np.testing.assert_array_equal(ds.to_dask().compute().reshape(frames.shape), expected)


def test_info_prints_the_detector(tmp_path):
    from click.testing import CliRunner

    from ltdask.cli import main

    path = write_emd(tmp_path / "scan.emd", frames_of(6), scan=(2, 3))
    result = CliRunner().invoke(main, ["info", str(path)])
    assert result.exit_code == 0, result.output
    assert "velox" in result.output and "Ceta" in result.output and "(2, 3)" in result.output


def test_opening_again_reuses_the_runs_until_the_file_changes(tmp_path, monkeypatch):
    """The runs of frame chunks are found once per version of a file: opening it again does
    not walk its chunks; a rewritten file is walked again (and read as it now is)."""
    from ltdask.io.formats.velox import dataset as velox

    walks = []
    real = velox._chunk_offsets
    monkeypatch.setattr(velox, "_chunk_offsets", lambda *a: walks.append(1) or real(*a))
    frames = frames_of(12)
    path = write_emd(tmp_path / "scan.emd", frames, scan=(3, 4))
    first = ltdask.open_emd(path)
    again = ltdask.open_emd(path)
    assert len(walks) == 1
    assert again.fileset.files == first.fileset.files
    changed = frames[::-1].copy()
    write_emd(path, changed, scan=(3, 4))
    reopened = ltdask.open_emd(path)
    assert len(walks) == 2
    np.testing.assert_array_equal(reopened.to_dask().compute().reshape(changed.shape), changed)
