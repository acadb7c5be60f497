"""open_raw_csr on bad input: descriptors that are not TOML or lack keys, files that do
not fit together, index files that point outside the frame; hypothesis fuzzes the
descriptor parser."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from helpers.badinput import (
    FRAMES,
    NAV,
    NOT_REGULAR,
    SIG,
    expect,
    fuzz,
    fuzz_dir,
    fuzz_file,
    scan_data,
)
from helpers.formatfiles import write_raw_csr
from hypothesis import given
from hypothesis import strategies as st

from ltdask import DataSetError, open_raw_csr


def csr_files(folder: Path, data=None, **overrides) -> Path:
    """A raw_csr scan; `overrides` replace descriptor lines (value None drops the key)."""
    import scipy.sparse

    data = scan_data("<f4") if data is None else data
    csr = scipy.sparse.csr_matrix(data.reshape(FRAMES, -1))
    csr.indptr.astype("<i8").tofile(folder / "ptr.raw")
    csr.indices.astype("<i4").tofile(folder / "idx.raw")
    csr.data.astype("<f4").tofile(folder / "val.raw")
    params = {
        "filetype": '"raw_csr"',
        "nav_shape": str(list(NAV)),
        "sig_shape": str(list(SIG)),
    }
    section = {
        "indptr_file": '"ptr.raw"',
        "indptr_dtype": '"<i8"',
        "indices_file": '"idx.raw"',
        "indices_dtype": '"<i4"',
        "data_file": '"val.raw"',
        "data_dtype": '"<f4"',
    }
    for key, value in overrides.items():
        target = params if key in ("filetype", "nav_shape", "sig_shape", "sync_offset") else section
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    lines = ["[params]", *(f"{k} = {v}" for k, v in params.items()), "", "[raw_csr]"]
    lines += [f"{k} = {v}" for k, v in section.items()]
    path = folder / "scan.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


CSR_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"missing\.toml", id="missing-descriptor"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", {}, DataSetError, r"no \[params\]", id="empty-descriptor"),
    pytest.param("binary", {}, DataSetError, r"not valid TOML|not a TOML", id="binary"),
    pytest.param("bad-toml", {}, DataSetError, r"not valid TOML", id="not-toml"),
    pytest.param(None, {"filetype": '"raw"'}, DataSetError, r"filetype = 'raw'",
                 id="wrong-filetype"),
    pytest.param(None, {"filetype": "3"}, DataSetError, r"filetype = 3", id="filetype-int"),
    pytest.param(None, {"data_file": None}, DataSetError, r"lacks data_file",
                 id="missing-key"),
    pytest.param(None, {"data_file": '"nope.raw"'}, FileNotFoundError, r"nope\.raw",
                 id="missing-data-file"),
    pytest.param(None, {"data_file": "[1, 2]"}, DataSetError, r"data_file = \[1, 2\]",
                 id="file-name-list"),
    pytest.param(None, {"data_file": '"."'}, DataSetError, r"is a directory",
                 id="data-file-is-directory"),
    pytest.param(None, {"indptr_dtype": '"<f8"'}, DataSetError, r"indptr_dtype = '<f8'",
                 id="float-indptr"),
    pytest.param(None, {"data_dtype": '"<q9"'}, DataSetError, r"data_dtype = '<q9'",
                 id="garbage-dtype"),
    pytest.param(None, {"data_dtype": '"|O"'}, DataSetError, r"object|not supported",
                 id="object-dtype"),
    pytest.param(None, {"nav_shape": "[9223372036854775807]"}, DataSetError,
                 r"9223372036854775807", id="nav-2**63"),
    pytest.param(None, {"nav_shape": None}, DataSetError, r"no nav_shape", id="nav-missing"),
    pytest.param(None, {"nav_shape": '"4x6"'}, DataSetError, r"nav_shape='4x6'",
                 id="nav-string"),
    pytest.param("sig-override", {}, DataSetError, r"sig_shape=\(9, 9\) has 81 pixels",
                 id="sig-wrong-pixels"),
    pytest.param(None, {"sig_shape": "[0, 8]"}, DataSetError, r"has zero", id="sig-zero"),
    pytest.param(None, {"sync_offset": "1.5"}, DataSetError, r"sync_offset=1\.5",
                 id="sync-float"),
    pytest.param("truncated-values", {}, DataSetError, r"val\.raw.*not a whole number",
                 id="truncated-values"),
    pytest.param("short-values", {}, DataSetError, r"indices but .*values", id="fewer-values"),
    pytest.param("short-indptr", {}, DataSetError, r"row pointers run from 0",
                 id="indptr-last-wrong"),
    pytest.param("empty-indptr", {}, DataSetError, r"ptr\.raw.*empty", id="indptr-empty"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "lines", "expected", "match"), CSR_CASES)
def test_open_raw_csr(request, tmp_path, kind, lines, expected, match):
    path = csr_files(tmp_path, **lines) if kind is None or kind not in ("missing", "dir") else None
    names = path
    kwargs = {}
    if kind == "missing":
        path = names = tmp_path / "missing.toml"
    elif kind == "dir":
        path = names = tmp_path
    elif kind == "empty":
        path.write_text("")
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00garbage\x00")
    elif kind == "bad-toml":
        path.write_text("[params\nfiletype = raw_csr\n")
    elif kind == "truncated-values":
        raw = (tmp_path / "val.raw").read_bytes()
        (tmp_path / "val.raw").write_bytes(raw[:-2])
        names = tmp_path / "val.raw"
    elif kind == "short-values":
        raw = (tmp_path / "val.raw").read_bytes()
        (tmp_path / "val.raw").write_bytes(raw[:-4])
    elif kind == "short-indptr":
        raw = (tmp_path / "ptr.raw").read_bytes()
        (tmp_path / "ptr.raw").write_bytes(raw[:-8])
    elif kind == "empty-indptr":
        (tmp_path / "ptr.raw").write_bytes(b"")
        names = tmp_path / "ptr.raw"
    elif kind == "sig-override":
        kwargs["sig_shape"] = (9, 9)
    elif lines.get("data_file") == '"nope.raw"':
        names = tmp_path / "nope.raw"
    elif lines.get("data_file") == '"."':
        names = tmp_path
    expect(request, expected, match, open_raw_csr, path, names=names, **kwargs)


@pytest.mark.parametrize("where", ["indices-out-of-range", "indptr-decreasing"])
def test_raw_csr_bad_content_found_when_read(request, tmp_path, where):
    """Index files that pass the open-time checks but point outside the frame or run
    backwards: an error when read, not a write outside the tile buffer."""
    path = csr_files(tmp_path)
    if where == "indices-out-of-range":
        idx = np.fromfile(tmp_path / "idx.raw", dtype="<i4")
        idx[len(idx) // 2] = 10**6
        idx.tofile(tmp_path / "idx.raw")
    else:
        ptr = np.fromfile(tmp_path / "ptr.raw", dtype="<i8")
        ptr[5] = ptr[-1]  # frames 5.. run backwards from the end
        ptr.tofile(tmp_path / "ptr.raw")
    ds = open_raw_csr(path)
    expect(request, DataSetError, r"ptr\.raw|idx\.raw|index|row pointer",
           lambda: ds.to_dask().sum().compute(scheduler="sync"))  # fmt: skip


def test_raw_csr_float128_values(request, tmp_path):
    path = csr_files(tmp_path, data_dtype='"<f16"')
    expect(request, DataSetError, r"\(float128\) is not supported", open_raw_csr, path, names=path)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("part", ["indptr", "data"])
def test_raw_csr_names_a_fifo(request, tmp_path, part):
    path, _ = write_raw_csr(tmp_path, scan_data("<f4"))
    target = tmp_path / f"scan_{part}.raw"
    target.unlink()
    os.mkfifo(target)
    expect(request, DataSetError, NOT_REGULAR, open_raw_csr, path, names=target)


# -- fuzzing the descriptor parser -----------------------------------------------------------
def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value > 0 else "-inf") if math.isinf(value) \
            else repr(value)  # fmt: skip
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


TOML_WORDS = ["raw_csr", "RAW_CSR", "raw", "ptr.raw", "idx.raw", "val.raw", "<i8", "<i4", "<f4",
              "|O", "S3", "float64", "..", "/", "nope.raw", ""]  # fmt: skip
_toml_scalar = (
    st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.sampled_from(TOML_WORDS)
    | st.text(max_size=6)
)
_toml_value_st = _toml_scalar | st.lists(
    st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4
)
_params_keys = st.sampled_from(["filetype", "nav_shape", "sig_shape", "sync_offset", "x"])
_csr_keys = st.sampled_from(
    ["indptr_file", "indptr_dtype", "indices_file", "indices_dtype", "data_file", "data_dtype"]
)


@given(
    st.dictionaries(_params_keys, _toml_value_st, max_size=2),
    st.dictionaries(_csr_keys, _toml_value_st, max_size=2),
    st.booleans(),
)
def test_fuzz_raw_csr_descriptor(params, section, complete):
    folder = fuzz_dir() / "csr"
    folder.mkdir(exist_ok=True)
    if not (folder / "val.raw").exists():
        csr_files(folder)
    base = {
        "filetype": "raw_csr", "nav_shape": list(NAV), "sig_shape": list(SIG),
    } if complete else {}  # fmt: skip
    base.update(params)
    files = {
        "indptr_file": "ptr.raw", "indptr_dtype": "<i8", "indices_file": "idx.raw",
        "indices_dtype": "<i4", "data_file": "val.raw", "data_dtype": "<f4",
    } if complete else {}  # fmt: skip
    files.update(section)
    text = "[params]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in base.items())
    text += "\n[raw_csr]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in files.items())
    path = folder / "fuzz.toml"
    path.write_text(text)
    ds = fuzz("raw-csr-toml", open_raw_csr, path)
    if ds is not None:
        fuzz("raw-csr-toml-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


@given(st.binary(max_size=300))
def test_fuzz_raw_csr_random_bytes(content):
    path = fuzz_file("fuzzb.toml", content)
    fuzz("raw-csr-bytes", open_raw_csr, path)


def test_dense_frames_larger_than_memory_refused(tmp_path):
    """A descriptor's sig_shape can make each frame of a few entries terabytes dense: reading
    dense frames is refused with the sizes (found by the descriptor fuzzer, as a MemoryError);
    the sparse path still runs."""
    from ltdask.udf import SumSigUDF

    path = csr_files(tmp_path, sig_shape="[1048576, 1048576]")
    ds = open_raw_csr(path)
    with pytest.raises(DataSetError, match=r"dense frames of shape \(\d+, 1048576, 1048576\)"):
        ds.to_dask()[0, 0].compute(scheduler="sync")
    with pytest.raises(DataSetError, match="more than this machine's"):
        SumSigUDF().compute(ds, backends=("numpy",))
    sums = SumSigUDF().compute(ds)["intensity"].values  # CSR tiles: no dense frame
    expected = scan_data("<f4").reshape(*NAV, -1).sum(-1)
    np.testing.assert_allclose(sums, expected, rtol=1e-5)
