"""8- and 16-bit data summed from its own integers: SumUDF and SumSigUDF declare
``NATIVE_INTEGER_TILES``, so a run of only them reads the file's integers (views, no float
copy) while ``meta.input_dtype`` stays float32; results as numpy's exact sums, in float32."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ltdask
from ltdask.corrections import CorrectionSet
from ltdask.udf import StdDevUDF, SumSigUDF, SumUDF
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

    class MySum(SumUDF):  # a subclass processes tiles its own way unless it says so
        pass

    assert tile_dtype(ds, [SumUDF(), StdDevUDF()]) is None
    assert tile_dtype(ds, [MySum()]) is None
    assert tile_dtype(ds, [SumUDF()], corrections=CorrectionSet(dark=np.zeros((5, 6)))) is None
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
