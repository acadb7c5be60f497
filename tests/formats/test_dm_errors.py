"""open_dm on bad input: files that are not DM, malformed and truncated tag trees, hostile
counts and sizes, image tags that do not describe the data; hypothesis fuzzes the bytes of
a valid file's tag tree."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from helpers.badinput import HUGE, expect, fuzz, fuzz_file
from helpers.dmfiles import Raw, i32, image_group, u32, write_dm, write_tree
from hypothesis import given
from hypothesis import strategies as st

from ltdask import DataSetError
from ltdask.io.formats.dm import open_dm

DATA = np.arange(2 * 3 * 4 * 5, dtype=np.uint16).reshape(2, 3, 4, 5)


def image(**replace) -> list:
    """The scan's ImageList entry, with ImageData tags replaced (None: removed)."""
    entries = image_group(DATA, DATA.shape, DATA.dtype)
    image_data = dict(entries[0][1])
    for key, value in replace.items():
        if value is None:
            image_data.pop(key, None)
        else:
            image_data[key] = value
    return [("ImageData", list(image_data.items())), *entries[1:]]


def tree_file(folder: Path, root: list, version=4, name="scan.dm4") -> Path:
    return write_tree(folder / name, root, version)


#: images whose tags say they hold spectra: (numpy-order data, write_dm's tags)
SPECTRA = {
    "eels-1xN": (np.zeros((1, 64), "f4"), dict(kind="Spectrum", signal="EELS")),
    "eels-1d": (np.zeros(64, "f4"), dict(kind="Spectrum", signal="EELS")),
    "cl-line": (
        np.zeros((67, 1336), "u2"),
        dict(kind="Spectrum image", signal="CL", calibrations=[(0.1, 0, "µm"), (0.3, 0, "nm")]),
    ),
    "eds-si": (np.zeros((16, 3, 4), "u4"), dict(kind="Spectrum image", signal="X-ray")),
    "si-untyped": (np.zeros((16, 3, 4), "u4"), dict(kind="Spectrum image")),
    "energy-axis": (
        np.zeros((3, 100), "f4"),
        dict(kind=None, calibrations=[(1.0, 0.0, "nm"), (0.25, 40.0, "eV")]),
    ),
    "orsay-spim": (
        np.zeros((3, 100), "f4"),
        dict(kind=None, image_tags=(("spim", [("eels", [("Dispersion", i32(1))])]),)),
    ),
}


def _case(folder: Path, kind: str) -> Path:
    good = write_dm(folder / "good.dm4", DATA)
    raw = good.read_bytes()
    cut = {"missing": None}
    if kind in cut:
        return folder / "missing.dm4"
    if kind == "dir":
        (folder / "dir.dm4").mkdir()
        return folder / "dir.dm4"
    simple = {
        "empty": b"",
        "tiny": b"\0\0\0\x04\0\0",
        "version-5": struct.pack(">I", 5) + raw[4:],
        "byte-order-7": raw[:12] + struct.pack(">I", 7) + raw[16:],
        "ntags-huge": raw[:18] + struct.pack(">Q", 2**60) + raw[26:],
        "cut-in-tags": raw[:120],
        "cut-in-data": raw[: raw.rfind(b"DataType") - 100],  # inside the 240 pixel bytes
    }
    if kind in simple:
        path = folder / "scan.dm4"
        path.write_bytes(simple[kind])
        return path
    if kind in SPECTRA:
        data, tags = SPECTRA[kind]
        return write_dm(folder / "scan.dm4", data, **tags)
    if kind == "dm3-cut":
        path = write_dm(folder / "scan.dm3", DATA, version=3)
        path.write_bytes(path.read_bytes()[:-300])
        return path
    trees = {
        "no-imagelist": [("Other", [("", i32(1))])],
        "no-data": [("ImageList", [("", image(Data=None))])],
        "rgb": [("ImageList", [("", image(DataType=i32(8)))])],
        "datatype-99": [("ImageList", [("", image(DataType=i32(99)))])],
        "pixel-depth": [("ImageList", [("", image(PixelDepth=u32(4)))])],
        "dims-mismatch": [
            ("ImageList", [("", image(Dimensions=[("", u32(d)) for d in (5, 4, 3, 3)]))])
        ],  # noqa: E501
        "dim-zero": [("ImageList", [("", image(Dimensions=[("", u32(d)) for d in (5, 4, 0, 2)]))])],
        "dims-missing": [("ImageList", [("", image(Dimensions=None))])],
        "five-d": [
            ("ImageList", [("", image(Dimensions=[("", u32(d)) for d in (5, 4, 3, 2, 1)]))])
        ],  # noqa: E501
        "one-d": [("ImageList", [("", image(Dimensions=[("", u32(120))]))])],
        "unknown-value-type": [("Bad", [("x", Raw([13], b"\0" * 4))])],
        "array-of-arrays": [("Bad", [("x", Raw([20, 20, 4, 2], b"\0" * 8))])],
        "array-count-huge": [("Bad", [("x", Raw([20, 4, 2**40], b"\0" * 8))])],
        "struct-inconsistent": [("Bad", [("x", Raw([15, 0, 5, 0, 3], b"\0" * 4))])],
        "words-huge": [("Bad", [("x", Raw([3] * 3, b"\0" * 4))])],
    }
    if kind == "words-huge":
        path = tree_file(folder, trees[kind])
        data = bytearray(path.read_bytes())
        at = data.find(b"%%%%") + 4
        data[at : at + 8] = struct.pack(">Q", 2**50)
        path.write_bytes(bytes(data))
        return path
    if kind == "bad-marker":
        path = tree_file(folder, [("ImageList", [("", image())])])
        data = path.read_bytes().replace(b"%%%%", b"%%%!", 1)
        path.write_bytes(data)
        return path
    if kind == "deep":
        node: list = [("", i32(1))]
        for _ in range(100):
            node = [("g", node)]
        return tree_file(folder, node)
    if kind == "bad-tag-kind":
        path = tree_file(folder, [("ImageList", [("", image())])])
        data = bytearray(path.read_bytes())
        data[26] = 7  # the kind byte of the root's first tag
        path.write_bytes(bytes(data))
        return path
    return tree_file(folder, trees[kind])


DM_CASES = [
    pytest.param("missing", FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", DataSetError, r"not a DM3/DM4 file: only 0 bytes", id="empty-file"),
    pytest.param("tiny", DataSetError, r"only 6 bytes", id="six-bytes"),
    pytest.param("version-5", DataSetError, r"version 5, expected 3 or 4", id="version-5"),
    pytest.param("byte-order-7", DataSetError, r"byte order flag .* is 7", id="byte-order-7"),
    pytest.param("ntags-huge", DataSetError, r"group of 1152921504606846976 tags",
                 id="ntags-2**60"),
    pytest.param("cut-in-tags", DataSetError, r"truncated: the tag tree needs bytes",
                 id="truncated-in-tags"),
    pytest.param("cut-in-data", DataSetError, r"truncated or its tag 'Data' is wrong",
                 id="truncated-in-data"),
    pytest.param("dm3-cut", DataSetError, r"truncated", id="dm3-truncated"),
    pytest.param("no-imagelist", DataSetError, r"has no ImageList", id="no-imagelist"),
    pytest.param("no-data", DataSetError, r"no image in the ImageList .* has data",
                 id="image-without-data"),
    pytest.param("rgb", DataSetError, r"data type 8 \(RGB\) is not supported", id="rgb"),
    pytest.param("datatype-99", DataSetError, r"DataType is 99", id="datatype-99"),
    pytest.param("pixel-depth", DataSetError, r"PixelDepth is 4 bytes, but DataType 10",
                 id="pixel-depth-wrong"),
    pytest.param("dims-mismatch", DataSetError, r"holds 240 bytes, but its Dimensions "
                 r"\(5, 4, 3, 3\) of uint16 need 360", id="dims-do-not-fit-data"),
    pytest.param("dim-zero", DataSetError, r"\(5, 4, 0, 2\); every dimension must be >= 1",
                 id="dim-zero"),
    pytest.param("dims-missing", DataSetError, r"Dimensions is missing", id="dims-missing"),
    pytest.param("five-d", DataSetError, r"5-D image data", id="five-d"),
    pytest.param("one-d", DataSetError, r"1-D image data; expected 2 to 4", id="one-d"),
    pytest.param("unknown-value-type", DataSetError, r"unknown value type 13",
                 id="unknown-value-type"),
    pytest.param("array-of-arrays", DataSetError, r"not supported|unknown definition",
                 id="array-of-arrays"),
    pytest.param("array-count-huge", DataSetError, r"1099511627776 values",
                 id="array-count-2**40"),
    pytest.param("struct-inconsistent", DataSetError, r"struct definition .* inconsistent",
                 id="struct-inconsistent"),
    pytest.param("words-huge", DataSetError, r"1125899906842624 definition words",
                 id="definition-words-2**50"),
    pytest.param("bad-marker", DataSetError, r"does not start with '%%%%'", id="bad-marker"),
    pytest.param("deep", DataSetError, r"nested more than 64 deep", id="nested-100-deep"),
    pytest.param("bad-tag-kind", DataSetError, r"has kind 7", id="bad-tag-kind"),
    pytest.param("eels-1xN", DataSetError, r"the 1 x 64 image holds spectra, not a stack of "
                 r"2-D frames: ImageTags/Meta Data/Format is 'Spectrum'; ImageTags/Meta "
                 r"Data/Signal is 'EELS' \(EELS spectra\); ltdask reads detector frames",
                 id="eels-spectrum-1xN"),
    pytest.param("eels-1d", DataSetError, r"the 64 image holds spectra.*Format is 'Spectrum'",
                 id="eels-spectrum-1d"),
    pytest.param("cl-line", DataSetError, r"the 67 x 1336 image holds spectra.*Format is "
                 r"'Spectrum image'; .*Signal is 'CL' \(cathodoluminescence spectra\)",
                 id="cl-line-scan-67x1336"),
    pytest.param("eds-si", DataSetError, r"16 x 3 x 4 image holds spectra.*'X-ray' \(EDS",
                 id="eds-spectrum-image"),
    pytest.param("si-untyped", DataSetError, r"16 x 3 x 4 image holds spectra, not a stack of "
                 r"2-D frames: ImageTags/Meta Data/Format is 'Spectrum image'; ltdask",
                 id="spectrum-image-no-signal"),
    pytest.param("energy-axis", DataSetError, r"3 x 100 image holds spectra.*: its fastest dim "
                 r"\(100 long\) is calibrated in eV, an energy axis", id="energy-axis-untagged"),
    pytest.param("orsay-spim", DataSetError, r"3 x 100 image holds spectra.*'spim' group",
                 id="orsay-spim"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "expected", "match"), DM_CASES)
def test_open_dm(request, tmp_path, kind, expected, match):
    path = _case(tmp_path, kind)
    expect(request, expected, match, open_dm, path, names=path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"nav_shape": (HUGE,)}, r"9223372036854775808", id="nav-2**63"),
        pytest.param({"nav_shape": (2, 0)}, r"has zero", id="nav-zero"),
        pytest.param({"sync_offset": 6}, r"sync_offset=6 is beyond", id="sync-beyond"),
    ],
)
def test_open_dm_arguments(request, tmp_path, kwargs, match):
    path = write_dm(tmp_path / "scan.dm4", DATA)
    expect(request, DataSetError, match, open_dm, path, names=path, **kwargs)


# -- fuzzing -----------------------------------------------------------------------------------
_GOOD: dict[int, bytes] = {}


def _good(version: int) -> bytes:
    if version not in _GOOD:
        path = fuzz_file(f"good.dm{version}", b"")
        _GOOD[version] = write_dm(path, DATA[:1, :2], version=version).read_bytes()
    return _GOOD[version]


@given(
    st.sampled_from([3, 4]),
    st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1,
             max_size=6),
    st.one_of(st.none(), st.floats(0, 1)),
)  # fmt: skip
def test_fuzz_dm_bytes(version, flips, cut):
    """A valid file with bytes changed (and perhaps cut short): a DataSetError or a dataset
    whose data lies inside the file."""
    raw = bytearray(_good(version))
    for where, value in flips:
        raw[16 + int(where * (len(raw) - 16))] = value
    if cut is not None:
        raw = raw[: int(cut * len(raw))]
    path = fuzz_file(f"fuzz.dm{version}", bytes(raw))
    ds = fuzz("dm-bytes", open_dm, path, force_c_order=True)
    if ds is not None:
        assert ds.fileset.bytes_needed()[0] <= len(raw)
        fuzz("dm-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))
