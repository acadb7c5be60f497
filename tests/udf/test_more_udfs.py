"""`LogsumUDF`, `FEMUDF` and `CrystallinityUDF`: against numpy and against LiberTEM 0.16.

The LiberTEM results come from ``tests/reference/make_more_udfs.py`` (run with
``/tmp/lt-venv/bin/python``), on the inputs of ``tests/reference/more_udfs_cases.py``.
"""

from __future__ import annotations

import os
import warnings

import dask
import numpy as np
import pytest

import ltdask
from ltdask.compat import Context
from ltdask.udf import (
    FEMUDF,
    CrystallinityUDF,
    LogsumUDF,
    run_analysis_crystall,
    run_fem,
    run_logsum,
)

REFERENCE = os.path.join(os.path.dirname(__file__), os.pardir, "reference")

from reference import more_udfs_cases as cases  # noqa: E402

DATA = os.path.join(REFERENCE, "data", "more_udfs")
UDFS = {"LogsumUDF": LogsumUDF, "FEMUDF": FEMUDF, "CrystallinityUDF": CrystallinityUDF}


# -- independent numpy references (per frame, float64) ------------------------------------
def _distance2(shape, cy, cx):
    yy, xx = np.indices(shape, dtype=np.float64)
    return (yy - cy) ** 2 + (xx - cx) ** 2


def logsum_reference(frames):
    sig = frames.shape[-2:]
    total = np.zeros(sig)
    for frame in frames.reshape(-1, *sig).astype(np.float32):
        total += np.log(frame.astype(np.float64) - frame.min() + 1)
    return total.astype(np.float32)


def fem_reference(frames, center, rad_in, rad_out):
    sig = frames.shape[-2:]
    d2 = _distance2(sig, center[0], center[1])
    ring = (d2 <= rad_out**2) & (d2 > rad_in**2)
    flat = frames.reshape(-1, *sig).astype(np.float64)
    out = np.array([f[ring].std() if ring.any() else np.nan for f in flat])
    return out.reshape(frames.shape[:-2]).astype(np.float32)


def crystallinity_reference(frames, rad_in, rad_out, real_center, real_rad):
    h, w = sig = frames.shape[-2:]
    flat = frames.reshape(-1, *sig).astype(np.float64)
    if real_center is not None and real_rad is not None:
        flat = flat * (_distance2(sig, *real_center) > real_rad**2)
    # weights on the centred spectrum: +1 in the outer disk, -1 in the inner one
    d2 = _distance2(sig, h / 2, w / 2)
    centred = (d2 <= rad_out**2).astype(float) - (d2 <= rad_in**2)
    # LiberTEM moves these weights with ``fftshift`` (not its inverse, which differs for odd
    # sizes): frequency (ky, kx) gets the weight at ((ky - h//2) % h, (kx - w//2) % w); only
    # the columns of the real-input half spectrum (kx <= w // 2) count
    ky = (np.arange(h) - h // 2) % h
    kx = (np.arange(w // 2 + 1) - w // 2) % w
    weights = centred[np.ix_(ky, kx)]
    spectra = np.abs(np.fft.fft2(flat))[:, :, : w // 2 + 1]
    out = (spectra * weights).sum(axis=(1, 2))
    return out.reshape(frames.shape[:-2]).astype(np.float32)


def reference(name, params, frames):
    if name == "LogsumUDF":
        return {"logsum": logsum_reference(frames)}
    if name == "FEMUDF":
        return {"intensity": fem_reference(frames, **params)}
    return {"intensity": crystallinity_reference(frames, **params)}


def expected(name, params, data, roi):
    """numpy results for the whole run: nav buffers NaN outside `roi`, sums over it."""
    nav = data.shape[:-2]
    mask = np.ones(nav, bool) if roi is None else np.asarray(roi, bool).reshape(nav)
    if name == "LogsumUDF":
        return reference(name, params, data[mask])
    full = reference(name, params, data)
    return {k: np.where(mask, v, np.nan).astype(np.float32) for k, v in full.items()}


def _close(actual, wanted, name):
    # float32 results: a few ulps of the largest value, and NaN where the reference is
    atol = 4e-6 * max(1.0, float(np.nanmax(np.abs(wanted), initial=0)))
    np.testing.assert_allclose(actual, wanted, rtol=2e-5, atol=atol, equal_nan=True, err_msg=name)


# -- the UDFs against numpy --------------------------------------------------------------
SHAPES = [
    pytest.param((4, 6), (9, 11), id="2d-nav-odd-sig"),
    pytest.param((7,), (8, 8), id="1d-nav"),
    pytest.param((1, 1), (5, 7), id="1-frame"),
    pytest.param((3, 5), (16, 15), id="odd-nav"),
]
PARAMS = [
    pytest.param("LogsumUDF", {}, id="logsum"),
    pytest.param("FEMUDF", {"center": (3.5, 4), "rad_in": 1.5, "rad_out": 4}, id="fem"),
    pytest.param("FEMUDF", {"center": (0, 0), "rad_in": 0, "rad_out": 30}, id="fem-all"),
    pytest.param(
        "CrystallinityUDF",
        {"rad_in": 1, "rad_out": 3.5, "real_center": (2, 3), "real_rad": 1.5},
        id="cryst-real-mask",
    ),
    pytest.param(
        "CrystallinityUDF",
        {"rad_in": 0, "rad_out": 2, "real_center": None, "real_rad": None},
        id="cryst-plain",
    ),
]


def _frames(nav, sig, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "u":
        return rng.integers(0, 4000, size=(*nav, *sig)).astype(dtype)
    return (rng.lognormal(0.5, 1.2, size=(*nav, *sig)) - 0.5).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "uint16"])
@pytest.mark.parametrize("nav, sig", SHAPES)
@pytest.mark.parametrize("name, params", PARAMS)
@pytest.mark.parametrize("roi_kind", [None, "random"])
def test_against_numpy(name, params, nav, sig, dtype, roi_kind):
    data = _frames(nav, sig, dtype, seed=len(nav) * 100 + sig[0])
    roi = None
    if roi_kind == "random":
        roi = np.random.default_rng(sig[1]).random(nav) < 0.6
    # small partitions: partial results are merged
    with dask.config.set({"ltdask.partition-bytes": 3 * int(np.prod(sig)) * 4}):
        (res,) = ltdask.compute(ltdask.from_array(data), [UDFS[name](**params)], roi=roi)
    wanted = expected(name, params, data, roi)
    for key, value in wanted.items():
        assert res[key].dtype == np.float32
        assert res[key].shape == value.shape
        _close(res[key].values, value, f"{name} {key}")
        if key == "intensity":
            mask = np.ones(nav, bool) if roi is None else roi
            np.testing.assert_array_equal(res[key].coords[f"{key}_valid"].values, mask)


@pytest.mark.parametrize("name, params", PARAMS)
def test_roi_selects_nothing(name, params):
    data = _frames((3, 4), (6, 7), "float32", seed=1)
    roi = np.zeros((3, 4), bool)
    res = UDFS[name](**params).compute(ltdask.from_array(data), roi=roi)
    if name == "LogsumUDF":
        np.testing.assert_array_equal(res["logsum"].values, np.zeros((6, 7), np.float32))
    else:
        assert np.isnan(res["intensity"].values).all()
        assert not res["intensity"].coords["intensity_valid"].values.any()


def test_fem_empty_ring_is_nan():
    data = _frames((2, 3), (6, 6), "float32", seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy.std of nothing warns; the UDF does not
        res = FEMUDF(center=(3, 3), rad_in=2, rad_out=2).compute(ltdask.from_array(data))
    assert np.isnan(res["intensity"].values).all()
    assert res["intensity"].coords["intensity_valid"].values.all()


class ArrayFEM(FEMUDF):
    """`FEMUDF` without its flat-tile kernel: every tile through `process_tile`, the array
    code (``self.xp``) that CuPy runs, here on numpy."""

    process_flat_tile = None


@pytest.mark.parametrize("udf", [FEMUDF, ArrayFEM])
@pytest.mark.parametrize("roi_kind", [None, "random"])
def test_fem_tiles_that_cut_the_frame(roi_kind, udf):
    """Tiles of a few rows of pixels: each frame's ring is seen in several slices, whose
    counts, means and squared deviations are merged; values far from zero with a small
    spread (60000 +- 10) keep their digits, as numpy.std's two passes do. (uint16 read as
    float32: decoded tiles, which may cut frames; views of an array's frames do not.)"""
    rng = np.random.default_rng(11)
    data = rng.integers(59990, 60010, (3, 5, 128, 100)).astype(np.uint16)
    roi = None if roi_kind is None else rng.random((3, 5)) < 0.6
    params = dict(center=(63.5, 49.0), rad_in=10, rad_out=45.5)
    ds = ltdask.from_array(data)
    with dask.config.set({"ltdask.tile-bytes": 16384}):
        assert len(ltdask.explain(ds, [udf(**params)]).scheme) > 1
        res = udf(**params).compute(ds, roi=roi)
    wanted = expected("FEMUDF", params, data, roi)["intensity"]
    np.testing.assert_allclose(res["intensity"].values, wanted, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("udf", [FEMUDF, ArrayFEM])
def test_fem_on_sparse_tiles(tmp_path, udf):
    """A raw_csr scan (sparse tiles made dense for the UDF) gives numpy's values, through
    the flat-tile kernel and through the array code."""
    from helpers.formatfiles import write_raw_csr

    rng = np.random.default_rng(12)
    data = (rng.random((4, 5, 16, 18)) < 0.3) * rng.integers(1, 50, (4, 5, 16, 18))
    data = data.astype(np.uint16)
    params = dict(center=(7.5, 9.0), rad_in=2, rad_out=7)
    path, kwargs = write_raw_csr(tmp_path, data)
    res = udf(**params).compute(ltdask.open_raw_csr(path, **kwargs))
    wanted = expected("FEMUDF", params, data, None)["intensity"]
    np.testing.assert_allclose(res["intensity"].values, wanted, rtol=1e-6)


def test_center_is_row_then_column():
    # LiberTEM's FEMUDF takes center[0] as the row, whatever its docstring says
    data = np.zeros((1, 1, 9, 15), np.float32)
    data[0, 0, 2, 12] = 1
    ds = ltdask.from_array(data)
    # the four neighbours of (row 2, column 11), one of them the bright pixel
    res = FEMUDF(center=(2, 11), rad_in=0, rad_out=1).compute(ds)
    np.testing.assert_allclose(float(res["intensity"][0, 0]), np.std([1.0, 0, 0, 0]), rtol=1e-6)
    # (row 11, column 2) is outside the frame and so is its ring: NaN
    res = FEMUDF(center=(11, 2), rad_in=0, rad_out=1).compute(ds)
    assert np.isnan(float(res["intensity"][0, 0]))


# -- the helpers through the compat Context ----------------------------------------------
def test_helpers_through_context():
    data = _frames((3, 4), (10, 9), "uint16", seed=3)
    roi = np.random.default_rng(4).random((3, 4)) < 0.5
    roi[0, 0] = True
    ctx = Context()
    ds = ctx.load("memory", data=data, sig_dims=2)
    got = run_logsum(ctx, ds, roi=roi)["logsum"]
    _close(got.data, logsum_reference(data[roi]), "run_logsum")
    got = run_fem(ctx, ds, center=(4, 4), rad_in=1, rad_out=3, roi=roi)["intensity"]
    _close(got.data, np.where(roi, fem_reference(data, (4, 4), 1, 3), np.nan), "run_fem")
    np.testing.assert_array_equal(got.valid_mask, roi)
    got = run_analysis_crystall(ctx, ds, 1, 3, real_center=(5, 4), real_rad=2, roi=roi)
    wanted = crystallinity_reference(data, 1, 3, (5, 4), 2)
    _close(got["intensity"].data, np.where(roi, wanted, np.nan), "run_analysis_crystall")


def test_one_pass_with_other_udfs():
    data = _frames((4, 4), (8, 8), "float32", seed=5)
    udfs = [
        LogsumUDF(),
        FEMUDF(center=(4, 4), rad_in=1, rad_out=3),
        ltdask.udf.SumUDF(),
        CrystallinityUDF(rad_in=1, rad_out=3, real_center=None, real_rad=None),
    ]
    logsum, fem, total, cryst = ltdask.compute(ltdask.from_array(data), udfs)
    _close(logsum["logsum"].values, logsum_reference(data), "logsum")
    _close(fem["intensity"].values, fem_reference(data, (4, 4), 1, 3), "fem")
    _close(total["intensity"].values, data.sum(axis=(0, 1)), "sum")
    _close(cryst["intensity"].values, crystallinity_reference(data, 1, 3, None, None), "cryst")


# -- against LiberTEM 0.16 ---------------------------------------------------------------
def _libertem(case_id):
    with np.load(os.path.join(DATA, f"{case_id}.npz")) as z:
        names = [k for k in z.files if "__" not in k]
        return {k: (z[k], z[f"{k}__valid"], np.dtype(str(z[f"{k}__dtype"]))) for k in names}


@pytest.mark.parametrize("via", ["compute", "context"])
@pytest.mark.parametrize("case_id", list(cases.CASES))
def test_against_libertem(case_id, via):
    name, params, _, nav, _, _ = cases.CASES[case_id]
    data, roi = cases.data(case_id), cases.roi(case_id)
    udf = UDFS[name](**params)
    frames = int(np.prod(nav))
    with dask.config.set({"ltdask.partition-bytes": data.nbytes // min(3, frames) or 1}):
        if via == "compute":
            (res,) = ltdask.compute(ltdask.from_array(data), [udf], roi=roi)
            got = {
                k: (res[k].values, res[k].coords[f"{k}_valid"].values, res[k].dtype) for k in res
            }
        else:
            ctx = Context()
            out = ctx.run_udf(dataset=ctx.load("memory", data=data, sig_dims=2), udf=udf, roi=roi)
            got = {
                k: (np.asarray(v.data), np.asarray(v.valid_mask), v.data.dtype)
                for k, v in out.items()
            }
    lt = _libertem(case_id)
    assert set(got) == set(lt)
    for key, (value, valid, dtype) in lt.items():
        g_value, g_valid, g_dtype = got[key]
        assert g_dtype == dtype, key
        assert g_value.shape == value.shape, key
        _close(g_value, value, f"{case_id} {key}")
        np.testing.assert_array_equal(g_valid, valid, err_msg=f"{case_id} {key} valid mask")


def test_reference_inputs_are_unchanged():
    # the stored LiberTEM results belong to these inputs; a changed generator needs a re-run
    for case_id, (name, params, *_rest) in cases.CASES.items():
        lt = _libertem(case_id)
        wanted = expected(name, params, cases.data(case_id), cases.roi(case_id))
        for key, value in wanted.items():
            _close(lt[key][0], value, f"stored {case_id} {key}")
