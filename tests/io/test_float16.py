"""float16 scans end to end (issue 11, item 10): every format reads them, ``to_dask`` in
any dtype, and every shipped UDF runs on them (UDF runs read float16 as float32: numba has
no float16). References are numpy on the same data."""

from __future__ import annotations

import math
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from helpers.formatfiles import FORMATS, SIG

import ltdask
from ltdask import masks
from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF

NAV = (5, 7)
ROI = np.zeros(NAV, dtype=bool)
ROI[1, 2:6] = ROI[3, 0] = True


def half_data(byteorder: str = "<") -> np.ndarray:
    """Values spread over float16's range, with fractions it rounds (exact in float16)."""
    rng = np.random.default_rng(16)
    values = rng.standard_normal((*NAV, *SIG)) * 300
    return values.astype(np.dtype(byteorder + "f2"))


def write_raw_csr_half(folder: Path, data):
    """raw_csr with float16 values, written by hand (scipy.sparse has no float16)."""
    frames = data.reshape(math.prod(data.shape[:2]), -1)
    rows, cols = np.nonzero(frames)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=frames.shape[0]))])
    indptr.astype("<i8").tofile(folder / "ptr.raw")
    cols.astype("<i4").tofile(folder / "idx.raw")
    frames[rows, cols].astype("<f2").tofile(folder / "val.raw")
    path = folder / "scan.toml"
    path.write_text(
        "[params]\n"
        'filetype = "raw_csr"\n'
        f"nav_shape = {list(data.shape[:2])}\n"
        f"sig_shape = {list(data.shape[2:])}\n"
        "[raw_csr]\n"
        'indptr_file = "ptr.raw"\nindptr_dtype = "<i8"\n'
        'indices_file = "idx.raw"\nindices_dtype = "<i4"\n'
        'data_file = "val.raw"\ndata_dtype = "<f2"\n'
    )
    return ltdask.open_raw_csr(path)


def _cases():
    cases = []
    for fmt in FORMATS:
        if not fmt.float16 or fmt.id == "raw-csr" or fmt.sig != SIG:
            continue  # CSR below
        order = ">" if "bigendian" in fmt.id else "<"

        def make(folder, fmt=fmt, order=order):
            data = half_data(order)
            target, kwargs = fmt.write_to(folder, data)
            return fmt.opener(target, **kwargs), data

        cases.append(pytest.param(make, id=fmt.id))
    cases.append(pytest.param(lambda folder: (ltdask.from_array(d := half_data()), d), id="numpy"))
    cases.append(
        pytest.param(
            lambda folder: (
                ltdask.from_array(da.from_array(d := half_data(), chunks=(2, 3, 9, 11))),
                d,
            ),
            id="dask",
        )
    )
    cases.append(
        pytest.param(lambda folder: (write_raw_csr_half(folder, d := half_data()), d), id="csr")
    )
    cases.append(
        pytest.param(
            lambda folder: (
                ltdask.open_raw(
                    _tofile(folder, d := half_data(">")), NAV, SIG, ">f2", frame_header_bytes=0
                ),
                d,
            ),
            id="raw-bigendian",
        )
    )
    return cases


def _tofile(folder: Path, data) -> Path:
    path = folder / "scan-be.raw"
    data.tofile(path)
    return path


CASES = _cases()


@pytest.mark.parametrize("make", CASES)
def test_to_dask(tmp_path, make):
    ds, data = make(tmp_path)
    assert ds.dtype == np.float16
    native = ds.to_dask().compute()
    assert native.dtype == np.float16
    np.testing.assert_array_equal(native, data)
    for dtype in ("float32", "float64", "complex64", "float16"):
        np.testing.assert_array_equal(ds.to_dask(dtype=dtype).compute(), data.astype(dtype))


@pytest.mark.parametrize("make", CASES)
def test_shipped_udfs(tmp_path, make):
    ds, data = make(tmp_path)
    ref = data.astype(np.float64)
    sum_res, sumsig_res, std_res = ltdask.compute(ds, [SumUDF(), SumSigUDF(), StdDevUDF()])
    assert sum_res["intensity"].dtype == np.float32  # read as float32, not float16
    np.testing.assert_allclose(sum_res["intensity"].values, ref.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(
        sumsig_res["intensity"].values, ref.sum(axis=(2, 3)), rtol=1e-5, atol=1e-2
    )
    np.testing.assert_allclose(std_res["std"].values, ref.std(axis=(0, 1)), rtol=1e-5)
    # a UDF that asks for float16 tiles gets float32 ones: numba cannot compute with float16
    half_sum = SumUDF(dtype="float16").compute(ds)
    np.testing.assert_allclose(half_sum["intensity"].values, ref.sum(axis=(0, 1)), rtol=1e-5)
    mask = masks.circular(5, 4, SIG[1], SIG[0], 3)  # centre x, centre y, width, height, r
    bf = ApplyMasksUDF([lambda: mask], preferred_dtype=np.float16).compute(ds)
    np.testing.assert_allclose(
        bf["intensity"].values[..., 0], (ref * mask).sum(axis=(2, 3)), rtol=1e-5, atol=1e-2
    )
    com = CoMUDF.with_params(cy=4, cx=5, r=3).compute(ds)
    assert np.isfinite(com["field"].values).all()
    picked = PickUDF().compute(ds, roi=ROI)
    # the native dtype, as LiberTEM's PickUDF gives it
    assert picked["intensity"].dtype == np.float16
    np.testing.assert_array_equal(picked["intensity"].values, data[ROI])
    mapped = ltdask.map(ds, lambda frame: frame.max(), roi=ROI)
    np.testing.assert_array_equal(mapped.values[ROI], ref[ROI].max(axis=(1, 2)))


def test_udf_meta_input_dtype_is_float32(tmp_path):
    ds = ltdask.from_array(half_data())
    seen = []

    class Native(ltdask.UDF):
        def get_preferred_input_dtype(self):
            return self.USE_NATIVE_DTYPE

        def get_result_buffers(self):
            return {"peak": self.buffer(kind="nav", dtype="float64")}

        def process_frame(self, frame):
            seen.append((self.meta.input_dtype, frame.dtype))
            self.results.peak[:] = frame.max()

    res = Native().compute(ds)
    assert set(seen) == {(np.dtype(np.float32), np.dtype(np.float32))}
    np.testing.assert_array_equal(res["peak"].values, half_data().max(axis=(2, 3)))


@pytest.mark.parametrize("stored", ["<u2", ">u2", "<i4", ">f4", "<f8"])
def test_other_dtypes_as_float16(tmp_path, stored):
    """float16 output of every decoder is rounded once, as numpy's astype rounds."""
    rng = np.random.default_rng(3)
    dtype = np.dtype(stored)
    if dtype.kind == "f":
        values = rng.standard_normal((*NAV, *SIG)) * 1000
    else:
        values = rng.integers(0 if dtype.kind == "u" else -65000, 65000, (*NAV, *SIG))
    data = values.astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ds = ltdask.open_raw(path, NAV, SIG, stored, frame_header_bytes=0)
    expected = data.astype(np.float16)
    np.testing.assert_array_equal(ds.to_dask(dtype="float16").compute(), expected)
