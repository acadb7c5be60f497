"""``ltdask --help``, ``ltdask run --help`` and ``ltdask run ANALYSIS --help``: the analyses
and their typed parameters, as the UDFs' signatures and docstrings give them; the parameters
parsed into those types; ``ltdask warmup`` and ``--precompile``."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from click.testing import CliRunner

from ltdask.cli import main
from ltdask.cli._analyses import ANALYSES, REQUIRED
from ltdask.udf import CoMUDF, SumUDF


def help_text(*args) -> str:
    result = CliRunner().invoke(main, [*args, "--help"], prog_name="ltdask")
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # unwrapped


def test_group_help_lists_commands_and_options():
    text = help_text()
    for word in ("info", "convert", "run", "demo", "warmup", "--debug", "--precompile"):
        assert word in text


def test_run_help_lists_every_analysis_with_its_summary():
    text = help_text("run")
    assert "Usage: ltdask run ANALYSIS PATH [OPTIONS]" in text
    names = re.findall(r"^  (\w+)  ", CliRunner().invoke(main, ["run", "--help"]).output, re.M)
    assert names == list(ANALYSES)
    assert "sum Sum of all frames (inside the ROI)" in text
    assert "com Centre of mass of each frame inside a disk or ring." in text


@pytest.mark.parametrize("name", ANALYSES)
def test_analysis_help_lists_its_parameters(name):
    text = help_text("run", name)
    assert f"Usage: ltdask run {name} [OPTIONS] PATH" in text
    assert "Parameters (-p NAME=VALUE):" in text
    for param in ANALYSES[name].parameters:
        assert f"{param.name}={param.kind.upper()}" in text


def test_parameters_come_from_the_signatures():
    com = {p.name: p for p in ANALYSES["com"].parameters}
    signature = inspect.signature(CoMUDF.with_params).parameters
    assert list(com) == list(signature)
    assert {n: p.default for n, p in com.items()} == {n: p.default for n, p in signature.items()}
    assert (com["r"].kind, com["flip_y"].kind, com["regression"].kind) == ("float", "bool", "int")
    (dtype,) = ANALYSES["sum"].parameters
    assert (dtype.name, dtype.kind, dtype.default) == ("dtype", "dtype", "float32")
    assert SumUDF().params.dtype == dtype.default
    assert all(p.default is REQUIRED for p in ANALYSES["fem"].parameters)


def test_help_shows_defaults_and_documentation():
    text = help_text("run", "com")
    assert "flip_y=BOOL Negate the y shifts before rotating them (default: False)" in text
    assert "cy=FLOAT Row of the disk's centre on the detector (default: the frame's centre)" in text
    assert (
        "r=FLOAT Outer radius of the disk or ring the centre of mass is taken in (default: inf)"
        in text
    )
    assert "dtype=DTYPE Preferred input dtype" in help_text("run", "sum")
    assert "center=VALUE Centre of the ring (required)" in help_text("run", "fem")
    assert "Parameters (-p NAME=VALUE): none" in help_text("run", "sumsig")


@pytest.mark.parametrize(
    ("analysis", "pairs", "expected"),
    [
        pytest.param(
            "com",
            ["cy=7.5", "cx=8", "flip_y=True"],
            {"cy": 7.5, "cx": 8.0, "flip_y": True},
            id="com",
        ),
        pytest.param(
            "com",
            ["flip_y=no", "regression=1", "r=inf"],
            {"flip_y": False, "regression": 1, "r": float("inf")},
            id="bool-int-inf",
        ),
        pytest.param("com", ["cy=none"], {"cy": None}, id="optional-none"),
        pytest.param("sum", ["dtype=f8"], {"dtype": "float64"}, id="dtype-normalised"),
        pytest.param(
            "fem",
            ["center=(4, 4)", "rad_in=2", "rad_out=3"],
            {"center": (4, 4), "rad_in": 2.0, "rad_out": 3.0},
            id="literal",
        ),
    ],
)
def test_parameters_are_parsed_into_their_types(analysis, pairs, expected):
    assert ANALYSES[analysis].parse(pairs) == expected


def test_new_analyses_run(tmp_path):
    data = np.random.default_rng(1).integers(0, 9, (3, 4, 9, 9)).astype(np.float32)
    np.save(tmp_path / "scan.npy", data)
    args = ["run", "fem", str(tmp_path / "scan.npy"), "--out", str(tmp_path / "fem.zarr")]
    result = CliRunner().invoke(
        main, [*args, "-p", "center=(4,4)", "-p", "rad_in=2", "-p", "rad_out=3", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    import xarray as xr

    import ltdask
    from ltdask.udf import FEMUDF

    expected = FEMUDF(center=(4, 4), rad_in=2, rad_out=3).compute(ltdask.from_array(data))
    np.testing.assert_allclose(
        xr.open_zarr(tmp_path / "fem.zarr")["intensity"], expected["intensity"]
    )


@pytest.mark.slow  # compiles every shipped kernel in a fresh cache
def test_warmup_command_and_precompile(tmp_path):
    result = CliRunner().invoke(main, ["warmup", "--dtype", "uint16"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(
        r"(compiled \d+ kernel signatures|nothing to compile: the cache was warm) \(uint16\) "
        r"in [\d.]+ s; numba cache: .+\n",
        result.stdout,
    ), result.stdout
    np.save(tmp_path / "scan.npy", np.ones((2, 3, 4, 4), np.uint16))
    args = [
        "--precompile",
        "run",
        "sum",
        str(tmp_path / "scan.npy"),
        "--out",
        str(tmp_path / "s.zarr"),
        "--no-progress",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert re.search(
        r"^precompiled here: \d+ kernel signatures compiled in [\d.]+ s$", result.stderr, re.M
    )
    assert (tmp_path / "s.zarr").exists()
