"""`ltdask.testing`, the conformance kit: each check passes on a dataset that reads its
reference and fails, saying what differs, on one that does not; the kit imports no pytest."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import ltdask
from ltdask import DataSetError
from ltdask.testing import (
    BadInput,
    FormatTests,
    check_bad_input,
    check_pickle,
    check_registered,
    check_roi,
    check_shape_and_dtype,
    check_sync_offset,
    check_tile_shapes,
    check_values,
    reference_scan,
    shifted,
)

DATA = reference_scan(nav=(4, 5), sig=(6, 7), dtype=">u2")


def write_raw(folder, data):
    path = folder / "scan.raw"
    data.tofile(path)
    return path, dict(nav_shape=data.shape[:2], sig_shape=data.shape[2:], dtype=data.dtype)


def test_reference_scan_holds_exact_values():
    assert DATA.shape == (4, 5, 6, 7) and DATA.dtype == np.dtype(">u2")
    assert 0 <= DATA.min() and DATA.max() <= 4000 and len(np.unique(DATA)) > 100
    floats = reference_scan(dtype="<f4")
    np.testing.assert_array_equal(floats, np.round(floats.astype("f8"), 2).astype("f4"))


def test_shifted_by_hand():
    frames = np.arange(6).reshape(2, 3, 1, 1)
    assert shifted(frames, 2).ravel().tolist() == [2, 3, 4, 5, 0, 0]
    assert shifted(frames, -1).ravel().tolist() == [0, 0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "wrong, check, message",
    [
        pytest.param(DATA + 1, check_values, "to_dask", id="values"),
        pytest.param(DATA.astype("<u4"), check_shape_and_dtype, "uint32", id="dtype"),
        pytest.param(DATA[:, :4], check_shape_and_dtype, r"\(4, 4, 6, 7\)", id="shape"),
        pytest.param(DATA[::-1], check_tile_shapes, "Arrays are not equal", id="tiles"),
        pytest.param(DATA * 2, check_roi, "Not equal to tolerance", id="roi-sums"),
    ],
)
def test_checks_fail_on_a_dataset_that_reads_other_values(wrong, check, message):
    check(ltdask.from_array(DATA), DATA)  # the right one passes
    with pytest.raises(AssertionError, match=message):
        check(ltdask.from_array(np.ascontiguousarray(wrong)), DATA)


def test_sync_offset_check_fails_where_the_offset_is_ignored(tmp_path):
    target, kwargs = write_raw(tmp_path, DATA)
    check_sync_offset(lambda **k: ltdask.open_raw(target, **kwargs, **k), DATA)
    with pytest.raises(AssertionError, match="sync_offset=3"):
        check_sync_offset(lambda sync_offset: ltdask.open_raw(target, **kwargs), DATA)


def test_pickle_check_fails_on_a_pickle_that_holds_the_data(tmp_path):
    data = reference_scan(nav=(8, 8), sig=(16, 16))  # 32 KiB: more than a file's description
    target, kwargs = write_raw(tmp_path, data)
    check_pickle(ltdask.open_raw(target, **kwargs), data)
    check_pickle(ltdask.from_array(data), data, in_memory=True)
    with pytest.raises(AssertionError, match="pickled dataset: .* bytes"):
        check_pickle(ltdask.from_array(data), data)


def test_bad_input_check(tmp_path):
    target, kwargs = write_raw(tmp_path, DATA)

    def negative_header(folder, target, keywords):
        return target, {**keywords, "file_header_bytes": -1}

    def nothing_wrong(folder, target, keywords):
        return target, keywords

    case = BadInput("negative-header", negative_header, DataSetError, "file_header_bytes")
    seen = check_bad_input(ltdask.open_raw, tmp_path, target, kwargs, [case])
    assert "-1" in seen["negative-header"]
    wrong_type = BadInput("negative-header", negative_header, FileNotFoundError, ".")
    with pytest.raises(AssertionError, match="raised DataSetError .* expected"):
        check_bad_input(ltdask.open_raw, tmp_path, target, kwargs, [wrong_type])
    wrong_text = BadInput("negative-header", negative_header, DataSetError, "no such words")
    with pytest.raises(AssertionError, match="does not match 'no such words'"):
        check_bad_input(ltdask.open_raw, tmp_path, target, kwargs, [wrong_text])
    accepted = BadInput("accepted", nothing_wrong, DataSetError, ".")
    with pytest.raises(AssertionError, match="accepted: open_raw.* raised nothing"):
        check_bad_input(ltdask.open_raw, tmp_path, target, kwargs, [accepted])


def test_registered_check(tmp_path):
    target, kwargs = write_raw(tmp_path, DATA)
    check_registered("raw", target, kwargs)
    npy = tmp_path / "scan.npy"
    np.save(npy, DATA)
    with pytest.raises(AssertionError, match="tells .*scan.npy as 'npy', not 'raw'"):
        check_registered("raw", npy, kwargs)
    with pytest.raises(DataSetError, match="format='tiff' is not known"):
        check_registered("tiff")


class TestRawThroughTheKit(FormatTests):
    """The mixin as a format's test module uses it (the raw format, by its registry name)."""

    format = "raw"
    dtype = ">u2"
    distributed = False  # (tests/io/test_conformance.py runs every format on a cluster)

    def write(self, folder, data):
        return write_raw(folder, data)


def test_format_tests_without_a_writer_say_so(tmp_path):
    class TestNothing(FormatTests):
        format = "raw"

    with pytest.raises(NotImplementedError, match="TestNothing.write: write a scan"):
        TestNothing().test_values(tmp_path)


def test_import_ltdask_imports_neither_the_kit_nor_pytest():
    code = (
        "import sys, json, ltdask, ltdask.io\n"
        "before = [m for m in ('ltdask.testing', 'pytest') if m in sys.modules]\n"
        "import ltdask.testing\n"
        "print(json.dumps([before, 'pytest' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [[], False]
