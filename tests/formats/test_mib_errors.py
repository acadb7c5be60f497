"""open_mib on bad input: malformed frame headers and ``.hdr`` files, truncated files,
files whose frames are not what their headers say; hypothesis fuzzes both header parsers.

(``test_mib.py`` holds the hand-made malformed headers of the MIB reader's own tests.)
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers.badinput import FRAMES, HUGE, SIG, expect, fuzz, fuzz_dir, fuzz_file, write_raw
from hypothesis import given
from hypothesis import strategies as st

from ltdask import DataSetError, MissingFramesWarning, open_mib


def mib_header(
    seq=1,
    size=384,
    chips="01",
    width="0008",
    height="0008",
    ptype="U16",
    layout="  1x1",
    depth="12",
    raw_fields: list[str] | None = None,
) -> bytes:
    fields = raw_fields or [
        "MQ1", f"{seq:06d}", f"{size:05d}" if isinstance(size, int) else size, chips, width,
        height, ptype, layout, "01", "2024-06-14 11:31:30.060732", "0.001000", "0", "0", "0",
        "1.0E+0", "0", "0", "0", "0", "0", "MQ1A", "2024-06-14T11:31:30.060732Z",
        "1000ns", depth,
    ]  # fmt: skip
    text = ",".join(fields).encode("latin-1")
    full = size if isinstance(size, int) and size > len(text) else len(text) + 1
    return text.ljust(full, b"\x00")


def write_mib(folder: Path, frames: int = FRAMES, name="scan.mib", header=None, data_bytes=None,
              nbytes: int | None = None) -> Path:  # fmt: skip
    """A U16 Merlin file of 8 x 8 frames (``header`` replaces the frame headers)."""
    path = folder / name
    pixels = data_bytes if data_bytes is not None else math.prod(SIG) * 2
    out = bytearray()
    for i in range(frames):
        out += header if header is not None else mib_header(seq=i + 1)
        out += bytes(pixels)
    path.write_bytes(bytes(out if nbytes is None else out[:nbytes]))
    return path


def write_hdr(folder: Path, text: str, name="scan.hdr") -> Path:
    path = folder / name
    path.write_text(text)
    return path


HDR_OK = (
    "HDR,\t\nTime and Date Stamp (day, mnth, yr, hr, min, s):\t14/06/2024 11:31:30\n"
    "Chip ID:\tW529_F5,-,-,-\nFrames in Acquisition (Number):\t{frames}\n"
    "Frames per Trigger (Number):\t{per_trigger}\nCounter Depth (number):\t12\nEnd\t"
)


def _mib(folder: Path, kind: str):
    """``(path to open, path the message must name)``."""
    if kind == "missing":
        return folder / "missing.mib", folder / "missing.mib"
    if kind == "dir":
        (folder / "dir.mib").mkdir()
        return folder / "dir.mib", folder / "dir.mib"
    if kind == "empty":
        (folder / "scan.mib").write_bytes(b"")
        return folder / "scan.mib", folder / "scan.mib"
    if kind == "not-mib":
        path = write_raw(folder, "scan.mib")
        return path, path
    header_kinds = {
        "size-0": mib_header(size="00000"),
        "size-huge": mib_header(size="99999999999999999999"),
        "size-text": mib_header(size="abcde"),
        "width-2**63": mib_header(width="9223372036854775808"),
        "width-0": mib_header(width="0000"),
        "height-negative": mib_header(height="-008"),
        "pixel-type": mib_header(ptype="F32"),
        "layout": mib_header(layout="sideways"),
        "depth": mib_header(ptype="R64", depth="13"),
        "few-fields": mib_header(raw_fields=["MQ1", "000001", "00384", "01"]),
        "not-ascii": mib_header()[:30] + b"\xff\xfe" + mib_header()[32:],
    }
    if kind in header_kinds:
        path = write_mib(folder, frames=2, header=header_kinds[kind])
        return path, path
    if kind == "truncated":
        path = write_mib(folder, nbytes=(384 + 128) * 3 + 100)
        return path, path
    if kind == "shorter-than-frame":
        path = write_mib(folder, nbytes=300)
        return path, path
    if kind == "frame-size-lies":
        # every header says 8 x 8 U16, but the frames hold 10 x 10 pixels
        path = write_mib(folder, frames=5, data_bytes=200)
        return path, path
    if kind == "hdr-garbage":
        write_mib(folder)
        hdr = write_hdr(folder, "nothing to see\n")
        return hdr, hdr
    if kind == "hdr-bad-int":
        write_mib(folder)
        hdr = write_hdr(folder, HDR_OK.format(frames="many", per_trigger=6))
        return hdr, hdr
    if kind == "hdr-no-mib":
        hdr = write_hdr(folder, HDR_OK.format(frames=24, per_trigger=6), name="alone.hdr")
        return hdr, hdr
    if kind == "hdr-binary":
        write_mib(folder)
        hdr = folder / "scan.hdr"
        hdr.write_bytes(bytes(range(256)) * 4)
        return hdr, hdr
    if kind == "hdr-absurd-scan":
        write_mib(folder)
        hdr = write_hdr(folder, scan_hdr(FRAMES, 6, scan=(10**6, 10**6)))
        return hdr, hdr
    if kind == "hdr-astronomic-scan":
        write_mib(folder)
        hdr = write_hdr(folder, scan_hdr(FRAMES, 6, scan=(10**8, 10**8)))
        return hdr, hdr
    if kind == "hdr-absurd-frames":
        write_mib(folder)
        hdr = write_hdr(folder, HDR_OK.format(frames=10**12, per_trigger=10**6))
        return hdr, hdr
    raise ValueError(kind)


def scan_hdr(frames: int, per_trigger: int, scan=None) -> str:
    """A ``.hdr`` text, with ``ScanX``/``ScanY`` if `scan` is ``(y, x)``."""
    text = HDR_OK.format(frames=frames, per_trigger=per_trigger)
    if scan is not None:
        text = text.replace("End\t", f"ScanX:\t{scan[1]}\nScanY:\t{scan[0]}\nEnd\t")
    return text


MIB_CASES = [
    pytest.param("missing", {}, FileNotFoundError, r"does not exist", id="missing-file"),
    pytest.param("dir", {}, DataSetError, r"is a directory", id="directory"),
    pytest.param("empty", {}, DataSetError, r"not a Merlin \.mib", id="empty-file"),
    pytest.param("not-mib", {}, DataSetError, r"not a Merlin \.mib", id="raw-bytes"),
    pytest.param("size-0", {}, DataSetError, r"header size\) is 0", id="header-size-0"),
    pytest.param("size-huge", {}, DataSetError, r"header", id="header-size-huge"),
    pytest.param("size-text", {}, DataSetError, r"'abcde'", id="header-size-text"),
    pytest.param("width-2**63", {}, DataSetError, r"9223372036854775808|width",
                 id="width-2**63"),
    pytest.param("width-0", {}, DataSetError, r"width\) is '0000'", id="width-0"),
    pytest.param("height-negative", {}, DataSetError, r"height\) is '-008'",
                 id="height-negative"),
    pytest.param("pixel-type", {}, DataSetError, r"pixel type\) is 'F32'", id="pixel-type"),
    pytest.param("layout", {}, DataSetError, r"'sideways'", id="chip-layout"),
    pytest.param("depth", {}, DataSetError, r"counter depth\) is 13", id="counter-depth"),
    pytest.param("few-fields", {}, DataSetError, r"header", id="few-fields"),
    pytest.param("not-ascii", {}, DataSetError, r"not ASCII", id="header-not-ascii"),
    pytest.param("truncated", {}, DataSetError, r"truncated.*100 bytes left over",
                 id="truncated-mid-frame"),
    pytest.param("shorter-than-frame", {}, DataSetError, r"at most the 300 bytes read",
                 id="shorter-than-one-frame"),
    pytest.param("frame-size-lies", {}, DataSetError, r"truncated|frame header",
                 id="frames-larger-than-header-says"),
    pytest.param("hdr-garbage", {}, DataSetError, r"not a Merlin \.hdr", id="hdr-garbage"),
    pytest.param("hdr-bad-int", {}, DataSetError, r"'many'", id="hdr-frames-not-int"),
    pytest.param("hdr-no-mib", {}, DataSetError, r"no \.mib files", id="hdr-without-mib"),
    pytest.param("hdr-binary", {}, DataSetError, r"not a Merlin \.hdr", id="hdr-binary"),
    # a 10**6 x 10**6 scan over 24 frames failed only when a run made its partitions
    pytest.param("hdr-absurd-scan", {}, DataSetError,
                 r"\(from ScanY=1000000, ScanX=1000000 in '.*scan\.hdr'\) asks for "
                 r"1000000000000 frames, but the files hold 24", id="hdr-scan-10**6-squared"),
    # 10**16 frames: the partition grid alone would have taken GiBs (MemoryError)
    pytest.param("hdr-astronomic-scan", {}, DataSetError,
                 r"ScanY=100000000.*scan\.hdr'\) asks for 10000000000000000 frames, but the "
                 r"files hold 24",
                 id="hdr-scan-10**8-squared"),
    pytest.param("hdr-absurd-frames", {}, DataSetError,
                 r"\(from Frames in Acquisition \(Number\)=1000000000000, Frames per Trigger "
                 r"\(Number\)=1000000 in '.*scan\.hdr'\) asks for", id="hdr-frames-10**12"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "kwargs", "expected", "match"), MIB_CASES)
def test_open_mib(request, tmp_path, kind, kwargs, expected, match):
    path, names = _mib(tmp_path, kind)
    expect(request, expected, match, open_mib, path, names=names, **kwargs)


def test_interrupted_scan_names_the_hdr_fields(tmp_path):
    """A ``.hdr`` scan of 5 x 6 over 24 frames (an interrupted acquisition) opens with the
    header's shape; the warning says where that shape came from."""
    path = write_mib(tmp_path)
    write_hdr(tmp_path, scan_hdr(FRAMES, 6, scan=(5, 6)))
    with pytest.warns(MissingFramesWarning, match=r"nav_shape=\(5, 6\) \(from ScanY=5, ScanX=6 "
                      r"in '.*scan\.hdr'\) asks for 30 frames, but the files hold 24"):  # fmt: skip
        ds = open_mib(path)
    assert ds.valid_nav_mask().sum() == FRAMES and ds.nav_shape == (5, 6)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"nav_shape": (HUGE,)}, r"9223372036854775808", id="nav-2**63"),
        pytest.param({"nav_shape": (0,)}, r"has zero", id="nav-zero"),
        pytest.param({"sig_shape": (9, 9)}, r"sig_shape=\(9, 9\) does not fit", id="sig-wrong"),
        pytest.param({"sync_offset": -HUGE}, r"sync_offset=-9223", id="sync-minus-2**63"),
    ],
)
def test_open_mib_arguments(request, tmp_path, kwargs, match):
    path = write_mib(tmp_path)
    expect(request, DataSetError, match, open_mib, path, names=path, **kwargs)


# -- fuzzing the header parsers -------------------------------------------------------------
MIB_TOKENS = ["MQ1", "000001", "00384", "384", "01", "04", "0008", "0256", "U08", "U16", "U32",
              "U64", "R64", "U01", "1x1", "2x2", "2x2G", "Nx1", "MQ1A", "1", "6", "12", "24", "",
              "-1", "99999999999999999999", "0x10", " ", "\x00"]  # fmt: skip
_mib_token = st.sampled_from(MIB_TOKENS) | st.text(st.characters(codec="latin-1"), max_size=6)


_MIB_FIELDS = mib_header().rstrip(b"\x00").decode("latin-1").split(",")


@given(
    st.lists(st.tuples(st.integers(1, len(_MIB_FIELDS) - 1), _mib_token), max_size=3),
    st.integers(2, len(_MIB_FIELDS)),
    st.sampled_from([128, 0, 64, 127, 256, 1000]),
    st.integers(1, 3),
)
def test_fuzz_mib_frame_header(changes, keep, data_bytes, frames):
    """A valid U16 8 x 8 frame header with fields replaced and cut short."""
    fields = list(_MIB_FIELDS)
    for index, token in changes:
        fields[index] = token
    header = ",".join(fields[:keep]).encode("latin-1")
    header = header.ljust(max(len(header) + 1, 384), b"\x00")
    path = fuzz_file("fuzz.mib", (header + bytes(data_bytes)) * frames)
    hdr = fuzz_dir() / "fuzz.hdr"
    if hdr.exists():
        hdr.unlink()
    ds = fuzz("mib-header", open_mib, path)
    if ds is not None:
        fuzz("mib-header-read", lambda: ds.to_dask().sum().compute(scheduler="sync"))


@given(st.binary(max_size=600))
def test_fuzz_mib_random_bytes_after_magic(rest):
    path = fuzz_file("fuzzb.mib", b"MQ1," + rest)
    fuzz("mib-bytes", open_mib, path)


HDR_KEYS = ["Frames in Acquisition (Number)", "Frames per Trigger (Number)", "ScanX", "ScanY",
            "Counter Depth (number)", "End", ""]  # fmt: skip
_line_text = st.characters(codec="latin-1", exclude_characters="\n\r")
_hdr_key = st.sampled_from(HDR_KEYS) | st.text(_line_text, max_size=12)
_hdr_value = st.integers(-5, 2**70).map(str) | st.text(
    st.characters(codec="latin-1", exclude_characters="\n\r"), max_size=10
)


@given(st.lists(st.tuples(_hdr_key, st.sampled_from(["\t", ":", ": ", "\t\t"]), _hdr_value),
                max_size=8), st.booleans())  # fmt: skip
def test_fuzz_mib_hdr(lines, with_magic):
    folder = fuzz_dir() / "hdr"
    folder.mkdir(exist_ok=True)
    if not (folder / "scan.mib").exists():
        write_mib(folder)
    text = ("HDR,\t\n" if with_magic else "") + "".join(f"{k}{s}{v}\n" for k, s, v in lines)
    hdr = folder / "scan.hdr"
    hdr.write_text(text, encoding="latin-1")
    for target in (hdr, folder / "scan.mib"):
        ds = fuzz("mib-hdr", open_mib, target)
        if ds is not None:
            assert math.prod(ds.nav_shape) >= 1
