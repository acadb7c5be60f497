"""Every user mistake the ``ltdask`` command knows of: exit code 2 and one ``Error:`` line that
names the option as typed on the command line; ``--debug`` adds the traceback; a bug shows
its traceback and asks for a report. In this process (click's runner), a few through the
real entry point."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from helpers.cli import invoke

RAW = ["--nav-shape", "6,8", "--sig-shape", "16,16", "--dtype", "uint16"]
RUN = ["run", "sum", "scan.npy", "--out", "out.zarr", "--no-progress"]

#: case -> (arguments, parts of the one error line)
MISTAKES = {
    # files
    "missing-file": (["info", "missing.raw"], ["'PATH'", "missing.raw", "does not exist"]),
    "unknown-format": (
        ["info", "notes.txt"],
        ["notes.txt: cannot tell its format", "give --format (raw, npy,", "--nav-shape"],
    ),
    "unknown-format-name": (["info", "scan.npy", "--format", "rawr"], ["--format 'rawr'", "npy"]),
    "raw-without-shapes": (
        ["info", "scan.raw"],
        ["scan.raw is read as raw data", "give --nav-shape, --sig-shape and --dtype"],
    ),
    "raw-without-dtype": (
        ["info", "scan.raw", "--nav-shape", "6,8", "--sig-shape", "16,16"],
        ["give --dtype"],
    ),
    "option-the-format-does-not-take": (
        ["info", "scan.npy", "--key", "data"],
        ["--key: scan.npy is read as npy data, which does not take it", "--sync-offset"],
    ),
    # shapes and dtypes
    "bad-shape": (["info", "scan.raw", "--nav-shape", "a,b"], ["'--nav-shape'", "'a,b'"]),
    "empty-shape": (["info", "scan.raw", "--sig-shape", ","], ["'--sig-shape'", "','"]),
    "zero-shape": (
        ["info", "scan.raw", *RAW[2:], "--nav-shape", "0,8"],
        ["scan.raw: --nav-shape (0, 8) has zero or negative dims"],
    ),
    "bad-dtype": (
        ["info", "scan.raw", *RAW[:4], "--dtype", "uint17"],
        ["--dtype 'uint17' is not a numpy dtype"],
    ),
    "bad-sync-offset": (["info", "scan.npy", "--sync-offset", "x"], ["'--sync-offset'", "'x'"]),
    "bad-out-dtype": (
        ["convert", "scan.npy", "c.zarr", "--out-dtype", "foo"],
        ["--out-dtype 'foo': not a numpy dtype"],
    ),
    "out-dtype-does-not-hold": (
        ["convert", "scan.npy", "c.zarr", "--out-dtype", "uint8"],
        ["--out-dtype uint8: scan.npy", "outside uint8's range 0..255", "give --clip"],
    ),
    "out-dtype-does-not-hold-onto-a-store": (
        ["convert", "scan.npy", "taken.zarr", "--out-dtype", "int8", "--overwrite"],
        ["--out-dtype int8: scan.npy", "outside int8's range -128..127"],
    ),
    # calibrations
    "calibration-not-a-number": (
        [*RUN, "--nav-calibration", "abc"],
        ["--nav-calibration abc: expected a number with units, e.g. 1.5nm"],
    ),
    "calibration-without-units": (
        ["info", "scan.npy", "--sig-calibration", "0.2"],
        ["--sig-calibration 0.2: no units; expected a number with units, e.g. 1.5nm"],
    ),
    "calibration-zero-scale": (
        ["convert", "scan.npy", "c.zarr", "--nav-calibration", "0 nm"],
        ["--nav-calibration 0 nm: the scale must not be zero"],
    ),
    "calibration-bad-origin": (
        [*RUN, "--sig-calibration", "0.2mrad@left"],
        ["--sig-calibration 0.2mrad@left: the origin 'left' is not a number (in mrad) or centre"],
    ),
    "calibration-one-per-dim": (
        [*RUN, "--nav-calibration", "1nm,2nm,3nm"],
        ["--nav-calibration 1nm,2nm,3nm: 3 calibrations for the 2 dims (scan_y, scan_x)"],
    ),
    # commands, analyses and their parameters
    "unknown-command": (["infoo", "scan.npy"], ["No such command 'infoo'", "'info'"]),
    "unknown-option": (["info", "scan.npy", "--nav-shap", "3"], ["'--nav-shap'", "'--nav-shape'"]),
    "group-option-after-command": (
        [*RUN, "--workers", "2"],
        ["'--workers'", "--workers is an option of ltdask itself"],
    ),
    "unknown-analysis": (
        ["run", "summ", "scan.npy", "--out", "out.zarr"],
        ["no analysis 'summ'; did you mean sum?", "ltdask run --help"],
    ),
    "param-typo": (
        [*RUN, "-p", "dtyp=float64"],
        ["-p dtyp: sum has no parameter 'dtyp'; did you mean dtype?"],
    ),
    "param-unknown": (
        ["run", "com", "scan.npy", "--out", "o.zarr", "-p", "bogus=1"],
        ["-p bogus: com has no parameter 'bogus'", "cy, cx, r, ri"],
    ),
    "param-without-value": ([*RUN, "-p", "dtype"], ["-p 'dtype': expected NAME=VALUE"]),
    "param-not-a-number": (
        ["run", "com", "scan.npy", "--out", "o.zarr", "-p", "cy=abc"],
        ["-p cy=abc: com's cy is a number"],
    ),
    "param-not-an-integer": (
        ["run", "com", "scan.npy", "--out", "o.zarr", "-p", "regression=0.5"],
        ["-p regression=0.5: com's regression is an integer"],
    ),
    "param-not-a-bool": (
        ["run", "com", "scan.npy", "--out", "o.zarr", "-p", "flip_y=maybe"],
        ["-p flip_y=maybe: com's flip_y is true or false"],
    ),
    "param-not-a-dtype": (
        [*RUN, "-p", "dtype=notadtype"],
        ["-p dtype=notadtype: sum's dtype is a numpy dtype"],
    ),
    "param-refused-by-the-udf": (
        ["run", "ring", "scan.npy", "--out", "o.zarr", "-p", "r=2", "-p", "ri=5"],
        ["ring (ApplyMasksUDF): radius_inner (5.0) must not be larger than radius (2.0)"],
    ),
    "ring-outside-the-frame": (
        ["run", "ring", "scan.npy", "--out", "o.zarr", "-p", "cy=500"],
        [
            "-p cy=500.0 -p cx=8.0 (default) -p r=4.0 (default) -p ri=2.0 (default): the ring "
            "has no pixel in the scan's 16 x 16 frames",
            "move -p cy and -p cx",
        ],
    ),
    "disk-outside-the-frame": (
        ["run", "disk", "scan.npy", "--out", "o.zarr", "-p", "cx=-30", "-p", "r=3"],
        ["-p cy=8.0 (default) -p cx=-30.0 -p r=3.0: the disk has no pixel", "columns 0..15"],
    ),
    "param-required": (
        ["run", "fem", "scan.npy", "--out", "o.zarr"],
        ["fem needs -p center=... -p rad_in=... -p rad_out=..."],
    ),
    # --roi
    "roi-not-slices": ([*RUN, "--roi", "a:b"], ["--roi 'a:b': not slices of the nav shape"]),
    "roi-too-many-dims": ([*RUN, "--roi", "0:2,0:2,1"], ["--roi '0:2,0:2,1'", "(6, 8)"]),
    "roi-outside": ([*RUN, "--roi", "9,0"], ["--roi '9,0'"]),
    "roi-partly-outside": (
        [*RUN, "--roi", "0:64,0:64"],
        ["--roi '0:64,0:64': 0:64 reaches outside the scan", "nav shape is (6, 8)", "0 to 5"],
    ),
    "roi-partly-outside-second-dim": (
        [*RUN, "--roi", "2:4,-20:"],
        ["--roi '2:4,-20:': -20: reaches outside", "(dim 1 holds positions 0 to 7)"],
    ),
    "roi-empty": ([*RUN, "--roi", "100:200,0:3"], ["--roi '100:200,0:3' selects no positions"]),
    "roi-missing-npy": ([*RUN, "--roi", "gone.npy"], ["--roi 'gone.npy': no such file"]),
    "roi-wrong-shape": ([*RUN, "--roi", "bad_roi.npy"], ["--roi 'bad_roi.npy'", "(3, 3)"]),
    "roi-not-npy": ([*RUN, "--roi", "notes.txt"], ["--roi 'notes.txt': not a .npy file"]),
    # outputs
    "run-without-out": (RUN[:3], ["Missing option '--out'"]),
    "out-exists": ([*RUN[:3], "--out", "taken.zarr"], ["taken.zarr already exists", "--overwrite"]),
    "out-suffix": (
        [*RUN[:3], "--out", "out.h5"],
        ["--out 'out.h5': ltdask writes Zarr stores, not .h5 files", "ending in .zarr"],
    ),
    "convert-output-suffix": (
        ["convert", "scan.npy", "out.tif"],
        ["OUTPUT 'out.tif': ltdask writes Zarr stores, not .tif files"],
    ),
    "out-is-input": ([*RUN[:3], "--out", "scan.npy"], ["--out 'scan.npy' is the input file"]),
    # the group's options
    "bad-scheduler": (
        ["--scheduler", "nowhere", *RUN],
        ["'--scheduler'", "'nowhere'", "tcp://host:8786"],
    ),
    "bad-workers": (["--workers", "0", *RUN], ["'--workers'", "0 is not in the range"]),
    "workers-not-a-number": (["--workers", "x", *RUN], ["'--workers'", "'x'"]),
    # corrections
    "dark-missing": ([*RUN, "--dark", "gone.npy"], ["'--dark'", "gone.npy", "does not exist"]),
    "dark-wrong-shape": (
        [*RUN, "--dark", "small.npy"],
        ["--dark small.npy holds frames of shape (5, 5)", "(16, 16)"],
    ),
    "dark-not-a-frame": (
        [*RUN, "--dark", "notes.txt"],
        ["--dark notes.txt: neither a .npy file nor a series"],
    ),
    "gain-not-npy": ([*RUN, "--gain", "broken.npy"], ["--gain broken.npy"]),
    "warmup-bad-dtype": (["warmup", "--dtype", "foo"], ["'--dtype'", "'foo'"]),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("mistakes")
    data = np.arange(6 * 8 * 16 * 16, dtype=np.uint16).reshape(6, 8, 16, 16)
    data.tofile(d / "scan.raw")
    np.save(d / "scan.npy", data)
    np.save(d / "bad_roi.npy", np.ones((3, 3), bool))
    np.save(d / "small.npy", np.zeros((5, 5)))
    (d / "broken.npy").write_bytes(b"not numpy")
    (d / "notes.txt").write_text("my notes")
    (d / "taken.zarr").mkdir()
    (d / "taken.zarr" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    return d


@pytest.mark.parametrize("case", MISTAKES)
def test_mistake_is_one_line_and_exit_code_2(folder, case):
    args, parts = MISTAKES[case]
    before = sorted(os.listdir(folder))
    result = invoke(args, folder)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for part in parts:
        assert part in lines[0]
    assert "_shape" not in lines[0] and "dtype=" not in lines[0].replace("-p dtype=", "")
    assert sorted(os.listdir(folder)) == before


def test_debug_shows_the_traceback_then_the_line(folder):
    result = invoke(["--debug", *RUN, "--roi", "a:b"], folder)
    assert result.exit_code == 2
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "ValueError" in result.stderr  # the cause, not only the CLI's own error
    assert result.stderr.splitlines()[-1].startswith("Error: --roi 'a:b'")


def test_a_bug_shows_its_traceback_and_asks_for_a_report(folder, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr("ltdask.io.open.detect_format", broken)
    result = invoke(["info", "scan.npy"], folder)
    assert result.exit_code == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert "in broken" in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: internal error in ltdask")
    assert "KeyError: 'boom'" in last and "please report it with the traceback above" in last


def test_system_errors_are_one_line_with_exit_code_1(folder, monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "out.zarr")

    monkeypatch.setattr("ltdask.to_zarr", refused)
    result = invoke(RUN, folder)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == ["Error: [Errno 13] Permission denied: 'out.zarr'"]


def test_help_is_no_error(folder):
    for args in (["--help"], ["run", "--help"], ["run", "com", "--help"]):
        result = invoke(args, folder)
        assert (result.exit_code, result.stderr) == (0, ""), args


# -- through the real entry point ---------------------------------------------------------------
def ltdask(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "ltdask.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def test_entry_point_mistake(folder):
    proc = ltdask("info", "scan.raw", "--nav-shape", "6,8", cwd=folder)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "Error: scan.raw is read as raw data, which has no header: give --sig-shape and --dtype"
    ]
    assert proc.stdout == ""


def test_entry_point_debug(folder):
    proc = ltdask("--debug", *RUN[:3], "--out", "x.zarr", "-p", "dtype=foo", cwd=folder)
    assert proc.returncode == 2
    assert "Traceback (most recent call last):" in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("Error: -p dtype=foo: sum's dtype")


def test_a_reader_that_goes_away_is_no_error(folder):
    """``ltdask info scan.npy | head``: the pipe closes before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ltdask.cli", "info", "scan.npy"],
            cwd=folder,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == ""
    assert proc.returncode == 1
