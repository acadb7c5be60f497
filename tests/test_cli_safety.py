"""The command line never destroys its inputs or a user's files, and reports bad values as
one ``Error:`` line (no traceback). Commands run in this process (click's runner), ``info``
as a real command."""

from __future__ import annotations

import os
import re
from typing import NamedTuple

import numpy as np
import pytest
from click.testing import CliRunner
from test_cli import ltdask_cmd, ok, one_error_line
from test_store_safety import snapshot

from ltdask.cli import main
from ltdask.cli._demo import DEMO_FILES

#: case -> (arguments, substrings of the one error line; None: the command succeeds)
CASES = {
    "run-out-is-input-folder": (
        ["run", "sum", "data/scan.npy", "--out", "data", "--overwrite"],
        ["--out 'data'", "contains the input file 'data/scan.npy'"],
    ),
    "run-out-is-input": (
        ["run", "sum", "data/scan.npy", "--out", "data/scan.npy", "--overwrite"],
        ["--out 'data/scan.npy'", "is the input file"],
    ),
    "run-out-is-input-via-link": (
        ["run", "sum", "alias.npy", "--out", "data/scan.npy", "--overwrite"],
        ["--out 'data/scan.npy'", "is the input file"],
    ),
    "run-out-is-roi-file": (
        ["run", "sum", "data/scan.npy", "--roi", "roi.npy", "--out", "roi.npy", "--overwrite"],
        ["--out 'roi.npy'", "is the input file 'roi.npy'"],
    ),
    "convert-onto-source": (
        ["convert", "data/scan.npy", "data/scan.npy", "--overwrite"],
        ["OUTPUT 'data/scan.npy'", "is the input file"],
    ),
    "convert-into-source-folder": (
        ["convert", "data/scan.npy", "data", "--overwrite"],
        ["OUTPUT 'data'", "contains the input file"],
    ),
    "run-out-is-user-folder": (
        ["run", "sum", "data/scan.npy", "--out", "mine", "--overwrite"],
        ["--out", "mine", "a folder holding notes.txt", "not a Zarr store"],
    ),
    "convert-out-is-user-file": (
        ["convert", "data/scan.npy", "notes", "--overwrite"],
        ["OUTPUT", "notes is a file", "not a Zarr store"],
    ),
    "convert-out-is-user-text-file": (
        ["convert", "data/scan.npy", "notes.txt", "--overwrite"],
        ["OUTPUT 'notes.txt'", "ltdask writes Zarr stores, not .txt files"],
    ),
    "convert-bad-out-dtype": (
        ["convert", "data/scan.npy", "x.zarr", "--out-dtype", "foo"],
        ["--out-dtype", "'foo'"],
    ),
    "run-empty-roi-slices": (
        ["run", "sum", "data/scan.npy", "--roi", "100:200,0:3", "--out", "r.zarr"],
        ["--roi '100:200,0:3' selects no positions", "(4, 6)"],
    ),
    "run-empty-roi-file": (
        ["run", "sum", "data/scan.npy", "--roi", "empty_roi.npy", "--out", "r.zarr"],
        ["--roi 'empty_roi.npy'", "selects no positions"],
    ),
    "demo-zero-nav": (["demo", "--nav", "0,0", "--out", "demo"], ["--nav", "'0,0'"]),
    "demo-over-user-files": (
        ["demo", "--nav", "2,2", "--sig", "8,8", "--out", "pictures"],
        ["--out", "'pictures'", "already holds bright_field.png", "would overwrite"],
    ),
    "demo-overwrite-user-files": (
        ["demo", "--nav", "2,2", "--sig", "8,8", "--out", "pictures", "--overwrite"],
        ["--out", "'pictures'", "already holds bright_field.png", "would overwrite"],
    ),
    "demo-tiny": (["demo", "--nav", "1,1", "--sig", "4,4", "--out", "demo"], None),
    "info-missing-frames": (
        ["info", "short.raw", "--nav-shape", "4,4", "--sig-shape", "4,4", "--dtype", "uint16"],
        None,
    ),
}


def setup(folder):
    (folder / "data").mkdir()
    (folder / "data" / "scan.raw").write_bytes(b"my own scan")
    np.save(
        folder / "data" / "scan.npy", np.arange(4 * 6 * 4 * 4, dtype=np.uint16).reshape(4, 6, 4, 4)
    )
    (folder / "alias.npy").symlink_to(folder / "data" / "scan.npy")
    roi = np.zeros((4, 6), bool)
    roi[1, 2] = True
    np.save(folder / "roi.npy", roi)
    np.save(folder / "empty_roi.npy", np.zeros((4, 6), bool))
    (folder / "mine").mkdir()
    (folder / "mine" / "notes.txt").write_text("my notes")
    (folder / "notes.txt").write_text("my notes")
    (folder / "pictures").mkdir()
    (folder / "pictures" / "bright_field.png").write_bytes(b"my picture")
    (folder / "notes").write_text("my notes")
    np.zeros(10 * 16, np.uint16).tofile(folder / "short.raw")


class Run(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def invoke(args, cwd) -> Run:
    """``ltdask ARGS`` in this process (a subprocess costs a second of imports each)."""
    previous = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Run(result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every case, each in a folder of its own; the info case as a real command."""
    done = {}
    for case, (args, _) in CASES.items():
        folder = tmp_path_factory.mktemp(re.sub(r"\W+", "-", case))
        setup(folder)
        before = snapshot(folder)
        if args[0] == "info":
            proc = ltdask_cmd(*args, cwd=folder)
        else:
            proc = invoke([*args, "--no-progress"], folder)
        done[case] = folder, before, proc
    return done


@pytest.mark.parametrize("case", [c for c, (_, want) in CASES.items() if want is not None])
def test_refused_and_nothing_touched(runs, case):
    folder, before, proc = runs[case]
    line = one_error_line(proc)
    for text in CASES[case][1]:
        assert text in line, line
    assert snapshot(folder) == before


def test_demo_on_tiny_frames(runs):
    folder, _, proc = runs["demo-tiny"]
    ok(proc)
    assert (folder / "demo" / "results.zarr" / "zarr.json").exists()
    # a second demo into the same folder replaces the first one's files with --overwrite
    again = ["demo", "--nav", "1,1", "--sig", "4,4", "--out", "demo", "--no-progress"]
    line = one_error_line(invoke(again, folder))
    assert "holds an earlier demo's results.zarr" in line and "pass --overwrite" in line
    ok(invoke([*again, "--overwrite"], folder))
    assert sorted(os.listdir(folder / "demo")) == sorted(DEMO_FILES)


def everything(folder) -> set[str]:
    """Every file and folder under `folder`."""
    out = set()
    for root, dirs, files in os.walk(folder):
        out.update(os.path.relpath(os.path.join(root, n), folder) for n in dirs + files)
    return out


@pytest.mark.parametrize("fault", ["to_zarr", "com_field"])
@pytest.mark.parametrize("out_exists", [False, True], ids=["new-out", "own-out"])
def test_demo_failing_midway_cleans_up_only_its_own(tmp_path, monkeypatch, fault, out_exists):
    """An error while the demo runs (writing the results; drawing, after some pictures are
    written) leaves neither its scratch scan nor partial results, and all else as it was."""
    import ltdask
    import ltdask.views.plot

    setup(tmp_path)
    if out_exists:
        (tmp_path / "demo").mkdir()
        (tmp_path / "demo" / "notes.txt").write_text("mine, beside the demo's")
    before, paths = snapshot(tmp_path), everything(tmp_path)

    def broken(*args, **kwargs):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(ltdask.plot if fault == "com_field" else ltdask, fault, broken)
    args = ["demo", "--nav", "4,4", "--sig", "16,16", "--out", "demo", "--no-progress"]
    run = invoke(args, tmp_path)  # a bug, as the command line sees it: its traceback
    assert run.returncode == 1
    assert "RuntimeError: injected fault" in run.stderr and "internal error" in run.stderr
    assert everything(tmp_path) == paths
    assert snapshot(tmp_path) == before


def test_info_flags_missing_frames(runs):
    _, _, proc = runs["info-missing-frames"]
    out = ok(proc)
    assert re.search(r"MISSING FRAMES\s+only 10 of the 16 frames", out), out
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1 and "short.raw" in warnings[0], proc.stderr
