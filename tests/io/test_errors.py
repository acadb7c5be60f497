"""Bad input to what every format shares: clear errors that name the file and the
offending value, raised at open time. ``ltdask.open`` with what it cannot read, FIFOs and
devices refused before a byte is read (every opener), files replaced by a FIFO after
opening, dtypes the read path cannot handle; and ``from_array``, which reads no file.

The cases of one format are in ``tests/formats/test_<format>_errors.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from helpers.badinput import (
    NAV,
    NOT_REGULAR,
    RAW_KW,
    SIG,
    expect,
    named,
    scan_data,
    special,
    write_hdf5,
    write_raw,
    write_zarr,
)

import ltdask
from ltdask import (
    DataSetError,
    from_array,
    open_hdf5,
    open_mib,
    open_npy,
    open_raw,
    open_raw_csr,
    open_zarr,
)
from ltdask.io.open import open_dataset

open_any = ltdask.open


def test_data_set_error_is_value_error():
    assert issubclass(DataSetError, ValueError)
    assert issubclass(DataSetError, ltdask.LtdaskError)


# -- ltdask.open ---------------------------------------------------------------------------------
def _open_target(folder: Path, kind: str) -> Path:
    if kind == "missing":
        return folder / "missing.raw"
    if kind == "dir":
        return folder
    if kind == "unknown":
        path = folder / "scan.xyz"
        path.write_bytes(b"\x01\x02\x03" * 100)
        return path
    if kind in ("raw", "raw-format"):
        return write_raw(folder)
    if kind == "npy-garbage":
        path = folder / "scan.npy"
        path.write_bytes(b"garbage" * 50)
        return path
    if kind == "h5-garbage":
        path = folder / "scan.h5"
        path.write_bytes(b"garbage" * 50)
        return path
    if kind == "toml-garbage":
        path = folder / "scan.toml"
        path.write_text("[nothing]\n")
        return path
    if kind == "mib-garbage":
        path = folder / "scan.mib"
        path.write_bytes(b"garbage" * 50)
        return path
    raise ValueError(kind)


OPEN_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"directory but not a zarr store", id="directory"),
    pytest.param("unknown", {}, DataSetError, r"cannot tell the format", id="unknown-format"),
    pytest.param("raw", {}, DataSetError, r"nav_shape=, sig_shape=, dtype=", id="raw-no-shape"),
    pytest.param("raw-format", {"format": "tiff"}, DataSetError, r"format='tiff'",
                 id="unknown-format-name"),
    pytest.param("raw", dict(nav_shape=NAV, sig_shape=SIG, dtype="u2", key="x"), TypeError,
                 r"'key'", id="unknown-keyword"),
    pytest.param("npy-garbage", {}, DataSetError, r"not a valid \.npy", id="npy-garbage"),
    pytest.param("h5-garbage", {}, DataSetError, r"not an HDF5 file", id="h5-garbage"),
    pytest.param("toml-garbage", {}, DataSetError, r"no \[params\]", id="toml-garbage"),
    pytest.param("mib-garbage", {}, DataSetError, r"not a Merlin", id="mib-garbage"),
]  # fmt: skip


@pytest.mark.parametrize("opener", [open_any, open_dataset], ids=["ltdask.open", "open_dataset"])
@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), OPEN_CASES)
def test_open(request, tmp_path, opener, kind, kwargs, expected, match):
    path = _open_target(tmp_path, kind)
    names = None if expected is TypeError else path
    expect(request, expected, match, opener, path, names=names, **kwargs)


# -- format plug-ins whose opener returns something else than a dataset -------------------------
def _returns_none(path, **kwargs):
    return None


def _returns_array(path, **kwargs):
    return np.zeros((2, 2, 4, 4))


PLUGIN_OPENERS = [
    pytest.param(_returns_none, "returned NoneType None", id="plugin-opener-returns-none"),
    pytest.param("os.path:basename", "returned str .scan.toy.", id="plugin-opener-by-path"),
    pytest.param(_returns_array, r"returned ndarray array\(\[\[\[\[0\.", id="plugin-opener-array"),
]  # fmt: skip


@pytest.mark.parametrize("how", ["ltdask.open", "Context.load", "xarray"])
@pytest.mark.parametrize(("opener", "match"), PLUGIN_OPENERS)
def test_plugin_opener_returns_no_dataset(request, tmp_path, monkeypatch, opener, match, how):
    # None gave "AttributeError: 'NoneType' object has no attribute ..." further on
    from ltdask.compat import Context
    from ltdask.io import registry

    toy = registry.Format("toy", opener, "toy scans (.toy)", suffixes=(".toy",), keywords=())
    monkeypatch.setitem(registry._registry().formats, "toy", toy)
    path = write_raw(tmp_path, "scan.toy")
    name = opener if isinstance(opener, str) else f"{__name__}:{opener.__name__}"
    message = rf"the opener {re.escape(name)} of the format 'toy' {match}.*not an ltdask DataSet"
    if how == "ltdask.open":
        run = lambda: ltdask.open(path)  # noqa: E731
    elif how == "Context.load":
        run = lambda: Context().load("toy", path)  # noqa: E731
    else:
        import xarray as xr

        run = lambda: xr.open_dataset(path, engine="ltdask", format="toy")  # noqa: E731
    error = expect(request, registry.FormatPluginError, message, run)
    assert isinstance(error, DataSetError)


# -- FIFOs and devices: refused before a byte is read ---------------------------------------------
SPECIAL_OPENERS = [
    pytest.param(open_raw, ".raw", RAW_KW, id="open_raw"),
    pytest.param(open_npy, ".npy", {}, id="open_npy"),
    pytest.param(open_hdf5, ".h5", {}, id="open_hdf5"),
    pytest.param(open_raw_csr, ".toml", {}, id="open_raw_csr"),
    pytest.param(open_mib, ".mib", {}, id="open_mib"),
    pytest.param(open_mib, ".hdr", {}, id="open_mib-hdr"),
    pytest.param(open_zarr, ".zarr", {}, id="open_zarr"),
    pytest.param(open_any, ".npy", {}, id="ltdask.open-npy"),
    pytest.param(open_any, ".bin", {}, id="ltdask.open-sniffed"),
    pytest.param(open_any, ".bin", RAW_KW, id="ltdask.open-raw"),
    pytest.param(open_any, ".bin", {"format": "npy"}, id="ltdask.open-format"),
]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("kind", ["fifo", "zero", "null", "link-zero"])
@pytest.mark.parametrize(("opener", "suffix", "kwargs"), SPECIAL_OPENERS)
def test_fifo_and_device_refused(request, tmp_path, opener, suffix, kwargs, kind):
    path = special(tmp_path, kind, suffix)
    expect(request, DataSetError, NOT_REGULAR, opener, path, names=path, **kwargs)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("fmt", ["raw", "npy", "hdf5-mapped", "hdf5-gzip", "zarr"])
def test_file_replaced_by_fifo_after_open(request, tmp_path, fmt):
    """Tasks do not block on a FIFO put where the scan was: it is a changed file."""
    data = scan_data()
    if fmt == "raw":
        path = write_raw(tmp_path)
        ds = open_raw(path, **RAW_KW)
    elif fmt == "npy":
        path = tmp_path / "scan.npy"
        np.save(path, data)
        ds = open_npy(path)
    elif fmt.startswith("hdf5"):
        create = {"chunks": (2, 3, 4, 8), "compression": "gzip"} if fmt == "hdf5-gzip" else {}
        path = write_hdf5(tmp_path, data={"data": data, **create})
        ds = open_hdf5(path, "data")
    else:
        store = write_zarr(tmp_path, data, chunks=(2, 3, 4, 8))
        ds = open_zarr(store)
        path = store / "zarr.json"
    path.unlink()
    os.mkfifo(path)
    run = ds.to_dask().compute
    changed = r"changed since it was opened \(it was replaced by a FIFO \(named pipe\)\)"
    expect(request, DataSetError, changed, run, names=path)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("suffix", [".toml", ".npy", ".mib", ".h5"])
def test_xarray_engine_guess_on_fifo(request, tmp_path, suffix):
    """xarray asks every engine whether it can open a path: ltdask's guess must not read a
    FIFO, and opening it with the engine is refused."""
    import xarray as xr

    from ltdask.io.xarray_backend import LtdaskBackendEntrypoint

    path = special(tmp_path, "fifo", suffix)
    entry = LtdaskBackendEntrypoint()
    assert entry.guess_can_open(path) == (suffix in (".npy", ".mib"))
    run = xr.open_dataset
    expect(request, DataSetError, NOT_REGULAR, run, path, engine="ltdask", names=path)


# -- dtypes numba cannot compute with: refused at open or when the run is built ----------------
#: what every refusal lists (float16 is supported: decoded through numpy, run as float32)
SUPPORTED = r"expected one of bool, .*uint64, float16, float32, float64, complex64, complex128"
UNSUPPORTED_DTYPES = [
    pytest.param(
        np.longdouble, r"\(float128\) is not supported: extended precision", id="float128"
    ),
    pytest.param(np.clongdouble, r"\(complex256\) is not supported: extended", id="complex256"),
    pytest.param(object, r"\(object\) is not supported: not a bool, integer", id="object"),
]


# h5py stores no object arrays: nothing to open
DTYPE_WHERE = [
    pytest.param(where, *case.values, id=f"{where}-{case.id}")
    for where in ("open_raw", "open_npy", "open_hdf5", "from_array", "to_dask")
    for case in UNSUPPORTED_DTYPES
    if not (where == "open_hdf5" and case.id == "object")
]


@pytest.mark.parametrize(("where", "dtype", "match"), DTYPE_WHERE)
def test_unsupported_dtype(request, tmp_path, where, dtype, match):
    data = np.ones((*NAV, *SIG), dtype=dtype)
    names = None
    if where == "open_raw":
        run, args, names = open_raw, (write_raw(tmp_path),), "scan.raw"
        kwargs = dict(nav_shape=NAV, sig_shape=SIG, dtype=dtype)
    elif where == "open_npy":
        path = tmp_path / "scan.npy"
        np.save(path, data, allow_pickle=True)
        run, args, kwargs, names = open_npy, (path,), {}, path
    elif where == "open_hdf5":
        path = write_hdf5(tmp_path, data=data)
        run, args, kwargs, names = open_hdf5, (path, "data"), {}, path
    elif where == "from_array":
        run, args, kwargs = from_array, (data,), {}
    else:
        run, args, kwargs = from_array(scan_data()).to_dask, (), dict(dtype=dtype)
    expect(request, DataSetError, match + ".*" + SUPPORTED, run, *args, names=names, **kwargs)


# -- reading as another dtype ----------------------------------------------------------------
def test_complex_read_as_real(tmp_path):
    path = tmp_path / "complex.raw"
    np.zeros((4, *SIG), dtype="<c8").tofile(path)
    ds = open_raw(path, (4,), SIG, "complex64")
    message = named(path) + r": cannot read complex data \(complex64\) as float32"
    with pytest.raises(DataSetError, match=message):
        ds.to_dask(dtype="float32")
    with pytest.raises(DataSetError, match=message):
        ds.to_xarray(dtype="float32")
    with pytest.raises(DataSetError, match=r"as int16"):
        ds.to_dask(dtype="int16")


def test_to_dask_bad_dtype(tmp_path):
    raw_path = write_raw(tmp_path)
    ds = open_raw(raw_path, **RAW_KW)
    with pytest.raises(DataSetError, match=named(raw_path) + ".*dtype='foo' is not a numpy"):
        ds.to_dask(dtype="foo")
    with pytest.raises(DataSetError, match="is not supported"):
        ds.to_dask(dtype="U3")


# -- from_array ---------------------------------------------------------------------------------
ARRAY_CASES = [
    pytest.param(np.zeros(8), {}, r"sig_dims=2 does not fit the array shape \(8,\)", id="1d"),
    pytest.param(np.zeros(()), {}, r"sig_dims=2 does not fit", id="0d"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": 3}, r"sig_dims=3", id="sig-dims-all"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": 0}, r"sig_dims=0 does not fit", id="sig-dims-0"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": -1}, r"sig_dims=-1", id="sig-dims-negative"),
    pytest.param(np.zeros((2, 3, 4)), {"sig_dims": "2"}, r"sig_dims='2'", id="sig-dims-str"),
    pytest.param(np.zeros((0, 3, 4, 4)), {}, r"nav_shape=\(0, 3\) has zero", id="zero-nav"),
    pytest.param(np.zeros((2, 3, 4, 0)), {}, r"sig_shape=\(4, 0\) has zero", id="zero-sig"),
    pytest.param(np.array([None] * 8).reshape(2, 2, 2), {}, r"object", id="object-dtype"),
    pytest.param(np.zeros((2, 2, 2), "U3"), {}, r"<U3", id="str-dtype"),
    pytest.param(np.zeros((2, 2, 2), "u2,f4"), {}, r"not supported", id="structured-dtype"),
    pytest.param(da.zeros((2**40, 2**40, 64, 64), chunks=(2**39, 2**39, 64, 64)), {},
                 r"absurdly large", id="dask-2**80-frames"),
    pytest.param(np.zeros((2, 3, 4, 4)), {"dims": ("a", "a", "b", "c")}, r"distinct",
                 id="dims-repeated"),
    pytest.param(None, {}, r"sig_dims=2 does not fit", id="none"),
    # (the coordinates of these were inf from the second entry on)
    pytest.param(np.zeros((2, 3, 4, 4)), {"nav_calibration": (1e308, 1e308, "nm")},
                 r"nav_calibration\[0\]: scale=1e\+308, origin=1e\+308 give coordinate inf at "
                 r"index 1 .*must be finite", id="calibration-overflow"),
    pytest.param(np.zeros((2, 3, 4, 4)), {"sig_calibration": [(1.0, "nm"), (-1e308, "nm")]},
                 r"sig_calibration\[1\]: scale=-1e\+308, origin=0 give coordinate -inf at "
                 r"index 3", id="calibration-overflow-sig-dim"),
]  # fmt: skip


@pytest.mark.parametrize(("array", "kwargs", "match"), ARRAY_CASES)
def test_from_array(request, array, kwargs, match):
    expect(request, DataSetError, match, from_array, array, **kwargs)


def test_from_array_complex_as_real():
    ds = ltdask.from_array(np.zeros((2, 3, 4), dtype=np.complex128), sig_dims=1)
    with pytest.raises(DataSetError, match=r"cannot read complex data \(complex128\) as float64"):
        ds.to_dask(dtype="float64")
