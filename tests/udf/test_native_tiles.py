"""8- and 16-bit data reduced from its own integers: SumUDF, SumSigUDF, StdDevUDF, CoMUDF
and ApplyMasksUDF declare ``TilePaths(integer_tiles=True)``, so a run of only them reads the file's
integers (views, no float copy) while ``meta.input_dtype`` stays float32; sums are numpy's
exact ones in float32, the other results those of float tiles (up to the order of sums)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.corrections import CorrectionSet
from ltdask.udf import (
    ApplyMasksUDF,
    CoMUDF,
    LogsumUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
    TilePaths,
)
from ltdask.udf.graph import Run


def raw_scan(tmp_path, data):
    path = tmp_path / "scan.raw"
    data.tofile(path)
    nav, sig = data.shape[:2], data.shape[2:]
    return ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype=data.dtype)


def tile_dtype(ds, udfs, **kw):
    return Run(ds, udfs, kw.get("roi"), kw.get("corrections"), None).plan.context.tile_dtype


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from(["u1", "<u2", "<i2", ">u2"]),
    nav=st.tuples(st.integers(1, 9), st.integers(1, 7)),
    sig=st.tuples(st.integers(1, 13), st.integers(1, 11)),
    roi_p=st.sampled_from([None, 0.0, 0.5]),
    seed=st.integers(0, 100),
)
def test_sums_equal_numpy(tmp_path_factory, dtype, nav, sig, roi_p, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(np.dtype(dtype))
    data = rng.integers(info.min, info.max, (*nav, *sig), endpoint=True).astype(dtype)
    ds = raw_scan(tmp_path_factory.mktemp("n"), data)
    roi = None if roi_p is None else rng.random(nav) < roi_p
    total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()], roi=roi)
    frames = data.reshape(-1, *sig) if roi is None else data[roi]
    exact = frames.astype(np.float64)
    assert total["intensity"].dtype == np.float32
    np.testing.assert_allclose(total["intensity"].values, exact.sum(axis=0), rtol=1e-6)
    got = per_frame["intensity"].values
    want = exact.sum(axis=(1, 2)).reshape(nav) if roi is None else exact.sum(axis=(1, 2))
    np.testing.assert_allclose(got if roi is None else got[roi], want, rtol=1e-6)


def test_tiles_are_the_files_integers(tmp_path, monkeypatch):
    data = np.arange(4 * 5 * 6 * 7, dtype="<u2").reshape(4, 5, 6, 7)
    ds = raw_scan(tmp_path, data)
    assert tile_dtype(ds, [SumUDF(), SumSigUDF()]) == np.dtype("uint16")
    seen = []
    real = SumUDF.process_flat_tile

    def spy(self, frames, p0, p1):
        seen.append((frames.dtype, self.meta.input_dtype, frames.flags.owndata))
        return real(self, frames, p0, p1)

    monkeypatch.setattr(SumUDF, "process_flat_tile", spy)
    res = SumUDF().compute(ds, progress=False)
    assert seen and all(d == np.uint16 and i == np.float32 and not own for d, i, own in seen)
    np.testing.assert_array_equal(res["intensity"].values, data.sum(axis=(0, 1)))


def test_float_tiles_where_any_udf_wants_them(tmp_path):
    data = np.ones((3, 4, 5, 6), dtype="<u2")
    ds = raw_scan(tmp_path, data)

    class MySum(SumUDF):  # a subclass with its own tile code: float tiles unless it says so
        def process_flat_tile(self, frames, p0, p1):
            super().process_flat_tile(frames, p0, p1)

    class SameSum(SumUDF):  # tiles processed as SumUDF does: its paths
        pass

    assert tile_dtype(ds, [SumUDF(), LogsumUDF()]) is None
    assert tile_dtype(ds, [MySum()]) is None
    assert tile_dtype(ds, [SameSum()]) == np.dtype("uint16")
    dark = CorrectionSet(dark=np.zeros((5, 6)))
    hot = np.zeros((5, 6), bool)
    hot[2, 3] = True
    # corrections folded into the sums: integer tiles; repaired pixels need float tiles
    assert tile_dtype(ds, [SumUDF()], corrections=dark) == np.dtype("uint16")
    assert tile_dtype(ds, [MySum()], corrections=dark) is None
    repaired = CorrectionSet(dark=np.zeros((5, 6)), excluded_pixels=hot)
    assert tile_dtype(ds, [SumUDF()], corrections=repaired) is None
    assert tile_dtype(ds, [SumUDF(dtype="float64")]) == np.dtype("uint16")
    wide = raw_scan(tmp_path, np.ones((3, 4, 5, 6), dtype="<u4"))
    assert tile_dtype(wide, [SumUDF()]) is None  # (float32 does not hold every uint32)


@pytest.mark.parametrize("dtype", ["<u2", "u1"])
def test_large_sums_exact_before_rounding(tmp_path, dtype):
    """Integer tiles are summed exactly; float32 tiles summed in float32 lose counts."""
    info = np.iinfo(np.dtype(dtype))
    data = np.full((64, 64, 2, 2), info.max, dtype=dtype)
    data[0, 0] = 1
    total = SumUDF().compute(raw_scan(tmp_path, data))["intensity"].values
    exact = data.astype(np.float64).sum(axis=(0, 1))
    np.testing.assert_allclose(total, exact, rtol=2**-23)


class FloatStdDev(StdDevUDF):  # (declaring no paths: float tiles)
    TILE_PATHS = TilePaths()


class FloatCoM(CoMUDF):
    TILE_PATHS = TilePaths()


class FloatMasks(ApplyMasksUDF):
    TILE_PATHS = TilePaths()


def _masks(sig, count, sparse, seed):
    rng = np.random.default_rng(seed)
    stack = (rng.random((count, *sig)) < 0.3) * rng.random((count, *sig)).astype(np.float32)
    return [lambda m=m: m for m in stack], sparse


@settings(max_examples=20, deadline=None)
@given(
    dtype=st.sampled_from(["u1", "<u2", ">i2"]),
    nav=st.tuples(st.integers(1, 7), st.integers(1, 6)),
    sig=st.tuples(st.integers(2, 17), st.integers(2, 13)),
    count=st.sampled_from([1, 3, 6]),
    sparse=st.booleans(),
    roi_p=st.sampled_from([None, 0.0, 0.6]),
    seed=st.integers(0, 100),
)
def test_other_udfs_as_on_float_tiles(
    tmp_path_factory, dtype, nav, sig, count, sparse, roi_p, seed
):
    rng = np.random.default_rng(seed)
    info = np.iinfo(np.dtype(dtype))
    data = rng.integers(info.min, info.max, (*nav, *sig), endpoint=True).astype(dtype)
    ds = raw_scan(tmp_path_factory.mktemp("o"), data)
    roi = None if roi_p is None else rng.random(nav) < roi_p
    factories, use_sparse = _masks(sig, count, sparse, seed)
    r = min(sig) / 3
    kw = {"use_sparse": use_sparse}
    native = [StdDevUDF(), CoMUDF.with_params(r=r), ApplyMasksUDF(factories, **kw)]
    floats = [FloatStdDev(), FloatCoM.with_params(r=r), FloatMasks(factories, **kw)]
    assert tile_dtype(ds, native, roi=roi) == np.dtype(dtype).newbyteorder("=")
    assert tile_dtype(ds, floats, roi=roi) is None
    got = ltdask.compute(ds, native, roi=roi, progress=False)
    want = ltdask.compute(ds, floats, roi=roi, progress=False)
    # (integer tiles are negotiated for their own itemsize: tiles of other depths may sum
    # in another order, so equal up to rounding, not bit for bit; StdDev's sums of integer
    # tiles are exact, those of float tiles rounded relative to the largest value, so a
    # small sum where values cancel differs by that much)
    for g, w in zip(got, want, strict=True):
        for name, rtol in (("var", 1e-12), ("sum", 1e-12), ("raw_com", 1e-5), ("intensity", 1e-5)):
            if name in w:
                values = w[name].values
                finite = np.abs(values[np.isfinite(values)])
                scale = float(finite.max()) if finite.size else 0.0
                np.testing.assert_allclose(
                    g[name].values, values, rtol, atol=rtol * scale, err_msg=name
                )
    frames = (data.reshape(-1, *sig) if roi is None else data[roi]).astype(np.float64)
    if len(frames):
        np.testing.assert_allclose(got[0]["var"].values, frames.var(axis=0), rtol=1e-9)
        masks = np.stack([f() for f in factories]).reshape(count, -1)
        products = frames.reshape(len(frames), -1) @ masks.T.astype(np.float64)
        intensity = got[2]["intensity"].values.reshape(-1, count)
        if roi is not None:
            intensity = got[2]["intensity"].values[roi]
        np.testing.assert_allclose(intensity, products, rtol=1e-5, atol=1e-3 * info.max)


def test_the_shared_pass_on_integer_tiles(tmp_path):
    data = np.random.default_rng(1).integers(0, 2**16, (5, 6, 9, 11)).astype("<u2")
    ds = raw_scan(tmp_path, data)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()]
    assert tile_dtype(ds, udfs) == np.dtype("uint16")
    total, per_frame, stats = ltdask.compute(ds, udfs, progress=False)
    exact = data.astype(np.float64)
    np.testing.assert_allclose(total["intensity"].values, exact.sum(axis=(0, 1)), rtol=1e-6)
    np.testing.assert_allclose(per_frame["intensity"].values, exact.sum(axis=(2, 3)), rtol=1e-6)
    np.testing.assert_allclose(stats["var"].values, exact.var(axis=(0, 1)), rtol=1e-9)
