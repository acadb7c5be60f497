"""The ``ltdask`` command, run as a subprocess through its real entry points
(``python -m ltdask.cli``, and the installed console script once) on small files made here;
results are read back from the stores and compared with numpy.

Each command spends about a second importing ltdask and much of the rest waiting on one core,
so the commands of the selected tests are started together in a small thread pool when the
module starts (`commands`); every test then checks the outcome of its own commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest
import xarray as xr
import zarr

import ltdask
from ltdask.io.synthetic import synthetic_scan

NAV = (6, 8)
SIG = (16, 16)
RAW = ["--nav-shape", "6,8", "--sig-shape", "16,16", "--dtype", "uint16"]
#: seconds one command may take (the distributed one starts a local cluster)
TIMEOUT = 120


def ltdask_cmd(*args, cwd, console: bool = False) -> subprocess.CompletedProcess:
    """Run ``ltdask ARGS`` (``python -m ltdask.cli``, or the console script) in `cwd`."""
    cmd = [console_script()] if console else [sys.executable, "-m", "ltdask.cli"]
    return subprocess.run(
        [*cmd, *(str(a) for a in args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def console_script() -> str:
    """The ``ltdask`` script installed next to this Python (by ``pip install``)."""
    script = shutil.which("ltdask", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the ltdask console script is not installed next to this python")
    return script


def ok(proc: subprocess.CompletedProcess) -> str:
    """`proc`'s stdout, after checking that it succeeded."""
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single ``Error: ...`` line of a command that failed cleanly."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def table(stdout: str) -> dict[str, str]:
    """``ltdask info``'s rows: name, two or more spaces, value."""
    rows = (re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in stdout.splitlines())
    return {row[0]: row[1] for row in rows if len(row) == 2}


def disk(cy, cx, r, shape=SIG):
    y, x = np.mgrid[: shape[0], : shape[1]]
    return (y - cy) ** 2 + (x - cx) ** 2 <= r**2


# -- data and commands -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    """A small synthetic scan as ``scan.raw`` and ``scan.npy``, and ROIs as ``.npy`` files."""
    d = tmp_path_factory.mktemp("cli")
    data, _ = synthetic_scan(NAV, SIG, seed=3)
    data.tofile(d / "scan.raw")
    np.save(d / "scan.npy", data)
    roi = np.zeros(NAV, dtype=bool)
    roi[1::2, ::3] = True
    roi[4, :] = True
    np.save(d / "roi.npy", roi)
    flat_roi = np.zeros(np.prod(NAV), dtype=bool)
    flat_roi[5:37] = True
    np.save(d / "flat_roi.npy", flat_roi)
    np.save(d / "bad_roi.npy", np.ones((3, 3), dtype=bool))
    return SimpleNamespace(
        dir=d, raw=d / "scan.raw", npy=d / "scan.npy", data=data, roi=roi, flat_roi=flat_roi
    )


#: test name -> job(scan, workdir) that runs the test's commands and returns what it checks
JOBS: dict[str, Callable] = {}
#: jobs started first, as they take longest
SLOW = ("processes", "distributed", "convert", "demo")


@pytest.fixture(scope="module")
def commands(request, scan, tmp_path_factory):
    """Starts the jobs of this module's selected tests; ``.get(test_name)`` waits for one."""
    module = sys.modules[__name__]
    names = [item.name for item in request.session.items if item.module is module]
    names = [n for n in names if n in JOBS]
    names.sort(key=lambda n: not any(s in n for s in SLOW))
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        futures: dict[str, Future] = {}
        for name in names:
            workdir = tmp_path_factory.mktemp(re.sub(r"\W+", "-", name)[:40])
            futures[name] = pool.submit(JOBS[name], scan, workdir)
        yield SimpleNamespace(get=lambda name: futures[name].result())
        for f in futures.values():
            f.cancel()


def job(name: str):
    def register(fn):
        JOBS[name] = fn
        return fn

    return register


# -- info --------------------------------------------------------------------------------------
@job("test_info_raw")
def _(scan, workdir):
    return ltdask_cmd("info", scan.raw, *RAW, cwd=workdir)


def test_info_raw(commands, scan):
    rows = table(ok(commands.get("test_info_raw")))
    assert rows["format"] == "raw"
    assert rows["class"] == "RawDataSet"
    assert rows["nav shape"] == str(NAV)
    assert rows["sig shape"] == str(SIG)
    assert rows["dtype"] == "uint16"
    assert rows["dims"] == "scan_y, scan_x, det_y, det_x"
    assert rows["frames in files"] == str(np.prod(NAV))
    ds = ltdask.open_raw(scan.raw, nav_shape=NAV, sig_shape=SIG, dtype="uint16")
    assert rows["partitions"].split()[0] == str(len(ds.get_partitions()))


@job("test_console_script_version_and_info_npy")
def _(scan, workdir):
    if shutil.which("ltdask", path=str(Path(sys.executable).parent)) is None:
        return None
    return (
        ltdask_cmd("--version", cwd=workdir, console=True),
        ltdask_cmd("info", scan.npy, cwd=workdir, console=True),
    )


def test_console_script_version_and_info_npy(commands):
    """The installed ``ltdask`` script (once): ``--version`` and ``info`` of a ``.npy`` file."""
    procs = commands.get("test_console_script_version_and_info_npy")
    if procs is None:
        console_script()  # skips
    version, info = procs
    assert ltdask.__version__ in ok(version)
    rows = table(ok(info))
    assert rows["format"] == "npy"
    assert rows["class"] == "NpyDataSet"
    assert (rows["nav shape"], rows["sig shape"], rows["dtype"]) == (str(NAV), str(SIG), "uint16")
    assert int(rows["partitions"].split()[0]) >= 1


# -- convert -----------------------------------------------------------------------------------
@job("test_convert_raw_to_zarr")
def _(scan, workdir):
    out = workdir / "converted.zarr"
    other = workdir / "other.npy"
    np.save(other, scan.data[::-1, ::-1].copy())
    steps = SimpleNamespace(out=out, workdir=workdir)
    steps.first = ltdask_cmd("convert", scan.raw, out, *RAW, "--no-progress", cwd=workdir)
    steps.stored_first = zarr.open_array(out, mode="r")[...] if out.exists() else None
    # into the same store again: refused
    steps.refused = ltdask_cmd("convert", other, out, "--no-progress", cwd=workdir)
    steps.after_refusal = zarr.open_array(out, mode="r")[...] if out.exists() else None
    args = ("convert", other, out, "--overwrite", "--out-dtype", "float32", "--no-progress")
    steps.overwrite = ltdask_cmd("--scheduler", "sync", *args, cwd=workdir)
    return steps


def test_convert_raw_to_zarr(commands, scan):
    steps = commands.get("test_convert_raw_to_zarr")
    assert "wrote" in ok(steps.first)
    np.testing.assert_array_equal(steps.stored_first, scan.data)
    assert steps.stored_first.dtype == np.uint16

    # refused without --overwrite, and the store is left as it was
    line = one_error_line(steps.refused)
    assert "already exists" in line and "--overwrite" in line and "converted.zarr" in line
    np.testing.assert_array_equal(steps.after_refusal, scan.data)

    # --overwrite replaces it (here with another dtype, on the synchronous scheduler)
    ok(steps.overwrite)
    arr = zarr.open_array(steps.out, mode="r")
    assert arr.dtype == np.float32
    assert tuple(arr.metadata.dimension_names) == ("scan_y", "scan_x", "det_y", "det_x")
    np.testing.assert_array_equal(arr[...], scan.data[::-1, ::-1].astype(np.float32))
    # nothing left behind but the store and its source
    assert sorted(p.name for p in steps.workdir.iterdir()) == ["converted.zarr", "other.npy"]


# -- run: every shipped UDF, on every scheduler, with --param and both kinds of --roi ------------
def check_sum(res, scan):
    frames = scan.data[scan.roi].astype(np.float64)
    assert res["intensity"].dtype == np.float64  # -p dtype=float64
    assert res["intensity"].dims == ("det_y", "det_x")
    np.testing.assert_allclose(res["intensity"], frames.sum(axis=0))


def check_sumsig(res, scan):
    roi = np.zeros(NAV, dtype=bool)
    roi[1:4, 2:7] = True
    np.testing.assert_array_equal(res["intensity_valid"], roi)
    values = res["intensity"].values
    np.testing.assert_allclose(values[roi], scan.data[roi].sum(axis=(1, 2)))
    assert np.isnan(values[~roi]).all()


def check_stddev(res, scan):
    frames = scan.data.reshape(-1, *SIG)[scan.flat_roi].astype(np.float64)
    assert int(res["num_frames"][0]) == scan.flat_roi.sum()
    np.testing.assert_allclose(res["sum"], frames.sum(axis=0))
    np.testing.assert_allclose(res["mean"], frames.mean(axis=0))
    np.testing.assert_allclose(res["var"], frames.var(axis=0))
    np.testing.assert_allclose(res["std"], frames.std(axis=0))


def check_com(res, scan):
    cy, cx, r = 7.5, 8, 5
    y, x = np.mgrid[: SIG[0], : SIG[1]]
    weighted = scan.data.astype(np.float64) * ((y - cy) ** 2 + (x - cx) ** 2 < r**2)
    total = weighted.sum(axis=(2, 3))
    com = np.stack([(weighted * y).sum((2, 3)) / total, (weighted * x).sum((2, 3)) / total], -1)
    shifts = com - np.array([cy, cx])
    np.testing.assert_allclose(res["raw_com"], com, rtol=1e-5)
    np.testing.assert_allclose(res["raw_shifts"], shifts, rtol=1e-4, atol=1e-5)
    # flip_y=True, no rotation, no regression: the field is the shifts with y negated
    np.testing.assert_allclose(res["field_y"], -shifts[..., 0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["field_x"], shifts[..., 1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res["magnitude"], np.hypot(shifts[..., 0], shifts[..., 1]), 1e-4)
    np.testing.assert_array_equal(res["regression"], np.zeros((3, 2)))


def check_pick(res, scan):
    assert res["intensity"].dtype == np.uint16
    np.testing.assert_array_equal(res["intensity"], scan.data[2, 1:5])


def check_pick_overwritten(res, scan):
    np.testing.assert_array_equal(res["intensity"], scan.data[0, :2])


def check_disk(res, scan):
    # cy not given: the direct beam's (tests/test_find_beam.py checks find_beam itself)
    cy = round(ltdask.find_beam(ltdask.from_array(scan.data)).cy, 2)
    mask = disk(cy=cy, cx=7, r=4)
    assert res["intensity"].shape == (*NAV, 1)
    np.testing.assert_allclose(res["intensity"][..., 0], (scan.data * mask).sum(axis=(2, 3)))


def check_ring(res, scan):
    beam = ltdask.find_beam(ltdask.from_array(scan.data))  # the centre, not given
    cy, cx = round(beam.cy, 2), round(beam.cx, 2)
    mask = disk(cy, cx, 6) & ~disk(cy, cx, 3)
    np.testing.assert_allclose(res["intensity"][..., 0], (scan.data * mask).sum(axis=(2, 3)))


class Run(NamedTuple):
    global_opts: list
    udf: str
    opts: list
    check: Callable
    result_class: str


RUNS = {
    "sum-sync-roi-npy-param": Run(
        ["--scheduler", "sync"],
        "sum",
        ["-p", "dtype=float64", "--roi", "roi.npy"],
        check_sum,
        "SumUDF",
    ),
    "sumsig-threads-roi-slices": Run(
        ["--scheduler", "threads", "--workers", "2"],
        "sumsig",
        ["--roi", "1:4,2:7"],
        check_sumsig,
        "SumSigUDF",
    ),
    "stddev-processes-flat-roi-npy": Run(
        ["--scheduler", "processes", "--workers", "2"],
        "stddev",
        ["--roi", "flat_roi.npy"],
        check_stddev,
        "StdDevUDF",
    ),
    "com-distributed-params": Run(
        ["--scheduler", "distributed", "--workers", "1"],
        "com",
        ["-p", "cy=7.5", "-p", "cx=8", "-p", "r=5", "--param", "flip_y=True"],
        check_com,
        "CoMUDF",
    ),
    "pick-roi-overwrite": Run([], "pick", ["--roi", "2,1:5"], check_pick, "PickUDF"),
    "disk-params": Run([], "disk", ["-p", "r=4", "-p", "cx=7"], check_disk, "ApplyMasksUDF"),
    "ring-params": Run([], "ring", ["-p", "r=6", "-p", "ri=3"], check_ring, "ApplyMasksUDF"),
}


def run_args(case: str, scan, out, opts=None):
    run = RUNS[case]
    opts = [str(scan.dir / o) if o.endswith(".npy") else o for o in (opts or run.opts)]
    return [*run.global_opts, "run", run.udf, scan.raw, *RAW, *opts, "--out", out, "--no-progress"]


def run_job(case, scan, workdir):
    out = workdir / f"{RUNS[case].udf}.zarr"
    procs = [ltdask_cmd(*run_args(case, scan, out), cwd=workdir)]
    procs.append(xr.open_zarr(out).compute() if out.exists() else None)
    if "overwrite" in case:
        procs.append(ltdask_cmd(*run_args(case, scan, out, ["--roi", "0,0:2"]), cwd=workdir))
        procs.append(xr.open_zarr(out).compute() if out.exists() else None)
        again = run_args(case, scan, out, ["--roi", "0,0:2", "--overwrite"])
        procs.append(ltdask_cmd(*again, cwd=workdir))
    return out, procs


for _case in RUNS:
    JOBS[f"test_run[{_case}]"] = lambda scan, workdir, case=_case: run_job(case, scan, workdir)


@pytest.mark.parametrize("case", RUNS)
def test_run(commands, scan, case):
    run = RUNS[case]
    out, procs = commands.get(f"test_run[{case}]")
    assert f"wrote {out}" in ok(procs[0])
    res = procs[1]  # the store as the run left it
    assert res.attrs["udf"] == run.result_class
    run.check(res, scan)
    if "overwrite" in case:
        # into the same store again: refused, the store unchanged; then --overwrite replaces it
        refused, kept, overwrite = procs[2:]
        assert "--overwrite" in one_error_line(refused)
        run.check(kept, scan)
        ok(overwrite)
        check_pick_overwritten(xr.open_zarr(out).compute(), scan)


# -- demo --------------------------------------------------------------------------------------
@job("test_demo")
def _(scan, workdir):
    out = workdir / "demo"
    args = ("demo", "--out", out, "--nav", "16,16", "--sig", "32,32", "--no-progress")
    return out, ltdask_cmd(*args, cwd=workdir)


def test_demo(commands):
    from PIL import Image

    out, proc = commands.get("test_demo")
    written = [Path(p) for p in re.findall(r"^wrote (.+?)(?=: | \(|$)", ok(proc), re.M)]
    names = {p.name for p in written}
    assert "results.zarr" in names
    pngs = [p for p in written if p.suffix == ".png"]
    assert {"bright_field.png", "dark_field.png", "com_field.png", "stddev.png"} <= names
    for p in written:
        assert p.exists(), p
        assert p.parent == out
    # the scan was scratch data: gone
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    for p in pngs:
        with Image.open(p) as img:
            pixels = np.asarray(img, dtype=np.float64)
        assert min(pixels.shape[:2]) >= 16, p
        assert pixels.std() > 0, f"{p.name} is blank"

    data, _ = synthetic_scan((16, 16), (32, 32))  # the demo's scan
    std = xr.open_zarr(out / "results.zarr", group="stddev")
    np.testing.assert_allclose(std["std"], data.astype(np.float64).std(axis=(0, 1)))
    vd = xr.open_zarr(out / "results.zarr", group="virtual_detectors")["intensity"].values
    bright = disk(16, 16, 32 / 8 * 1.6, shape=(32, 32))  # as the demo makes it
    np.testing.assert_allclose(vd[..., 0], (data * bright).sum(axis=(2, 3)))
    com = xr.open_zarr(out / "results.zarr", group="com")
    assert np.isfinite(com["field_y"]).all()
    # made-up calibrations: 0.4 nm a scan step, 0.05 mrad a pixel from the frame's centre
    assert com["field_y"].attrs["units"] == "mrad" and com["scan_x"].attrs["units"] == "nm"
    np.testing.assert_allclose(com["scan_x"], 0.4 * np.arange(16))
    np.testing.assert_allclose(std["det_y"], 0.05 * (np.arange(32) - 16))


# -- errors: exit code != 0, one line naming the file or value, no traceback, no output --------
ERRORS = {
    "missing-file": (["info", "missing.raw"], ["missing.raw"]),
    "raw-without-dtype": (
        ["info", "scan.raw", "--nav-shape", "6,8", "--sig-shape", "16,16"],
        ["scan.raw", "dtype"],
    ),
    "bad-shape": (["info", "scan.raw", "--nav-shape", "a,b"], ["'a,b'"]),
    "param-no-value": (["run", "sum", "scan.raw", *RAW, "-p", "dtype"], ["'dtype'"]),
    "param-unknown": (["run", "com", "scan.raw", *RAW, "-p", "bogus=1"], ["bogus"]),
    "param-bad-value": (["run", "sum", "scan.raw", *RAW, "-p", "dtype=notadtype"], ["notadtype"]),
    "roi-not-slices": (["run", "sumsig", "scan.raw", *RAW, "--roi", "a:b"], ["'a:b'"]),
    "roi-outside": (["run", "sumsig", "scan.raw", *RAW, "--roi", "9,0"], ["'9,0'"]),
    "roi-missing-npy": (["run", "sumsig", "scan.raw", *RAW, "--roi", "gone.npy"], ["gone.npy"]),
    "roi-wrong-shape": (
        ["run", "sumsig", "scan.raw", *RAW, "--roi", "bad_roi.npy"],
        ["bad_roi.npy", "(3, 3)"],
    ),
    "roi-partly-outside": (
        ["run", "sumsig", "scan.raw", *RAW, "--roi", "0:64,0:64"],
        ["'0:64,0:64'", "reaches outside the scan", "(6, 8)"],
    ),
    "ring-outside-the-frame": (
        ["run", "ring", "scan.raw", *RAW, "-p", "cy=500"],
        ["-p cy=500.0", "the ring has no pixel in the scan's 16 x 16 frames"],
    ),
    # the synthetic counts (up to 89) are not booleans; the output named as error_job names it
    "convert-out-dtype": (
        ["convert", "scan.raw", "error-convert-out-dtype.zarr", *RAW, "--out-dtype", "bool"],
        ["--out-dtype bool: scan.raw", "outside bool's range 0..1", "--clip"],
    ),
    "bad-scheduler": (["--scheduler", "nowhere", "run", "sum", "scan.raw", *RAW], ["nowhere"]),
}


def error_job(case, scan, workdir):
    """Runs in the scan's folder (the arguments name its files); writes nothing."""
    args, _ = ERRORS[case]
    out = scan.dir / f"error-{case}.zarr"
    if "run" in args:
        args = [*args, "--out", out, "--no-progress"]
    return out, ltdask_cmd(*args, cwd=scan.dir)


for _case in ERRORS:
    JOBS[f"test_errors[{_case}]"] = lambda scan, workdir, case=_case: error_job(case, scan, workdir)


@pytest.mark.parametrize("case", ERRORS)
def test_errors(commands, scan, case):
    out, proc = commands.get(f"test_errors[{case}]")
    line = one_error_line(proc)
    for name in ERRORS[case][1]:
        assert name in line, line
    assert not out.exists()
    assert not [p for p in os.listdir(scan.dir) if p.startswith(f".{out.name}")]
