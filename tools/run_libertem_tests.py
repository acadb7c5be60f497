"""Run LiberTEM 0.16.0's own tests of its user-facing API against ltdask, through the alias.

Usage::

    python tools/run_libertem_tests.py VENV [--work DIR] [--timeout SECONDS] [-k EXPR]

1. makes (or reuses) the virtual environment VENV as `run_libertem_ecosystem.py` does, and
   installs LiberTEM's test plug-ins that the tests need (`TEST_DEPENDENCIES`); LiberTEM
   itself is not installed (the alias refuses to run where it is importable);
2. fetches LiberTEM's sdist (``pip download --no-binary :all: --no-deps libertem==0.16.0``;
   it holds ``tests/``) and unpacks it in the work directory;
3. runs `TEST_PATHS` there with LiberTEM's own ``pytest.ini`` (its marker selection: not
   slow, dist, flaky, compilation or web_api), the alias on, and LiberTEM's conftests
   replaced by ``tools/libertem_test_fixtures.py`` (``--noconftest -p
   libertem_test_fixtures``: LiberTEM's root conftest imports its web server, tracing and
   dataset classes; the plug-in makes the fixtures the tests use with ltdask). The tests
   in `LEFT_OUT` are deselected, each for the reason given there;
4. prints passed / failed / errors / skipped and every failure message with its count.

Nothing here is part of ltdask; it needs the network (PyPI) for steps 1 and 2.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_libertem_ecosystem import print_table, run, run_suite, summarise  # noqa: E402

TOOLS = Path(__file__).resolve().parent
LIBERTEM = ("libertem", "0.16.0")
#: the parts of LiberTEM's suite that test its user-facing API (UDFs, Context, masks,
#: analyses); the rest tests its internals (IO backends and dataset classes, executors,
#: the web server, ...)
TEST_PATHS = ("tests/udf", "tests/test_context.py", "tests/test_masks.py", "tests/analysis")
#: LiberTEM's test plug-ins its tests need (async tests)
TEST_DEPENDENCIES = ("pytest-asyncio",)
#: test (node id prefix) -> why it is left out: it tests LiberTEM internals that ltdask
#: does not have by design (see docs/coming-from-libertem.md)
LEFT_OUT: dict[str, str] = {
    "tests/udf/test_execution_plan.py": (
        "libertem.udf.base._execution_plan: LiberTEM's planner of which device and array "
        "backend each UDF gets from its executor's worker resources; ltdask picks the "
        "backend per run (backends=, the UDFs' get_backends), dask places the tasks"
    ),
    "tests/udf/test_get_resources.py": (
        "UDFRunner/get_resources_for_backends: the resource requests LiberTEM's executors "
        "schedule partitions by; dask schedules ltdask's tasks"
    ),
    "tests/udf/test_resources_for_backends.py": (
        "get_resources_for_backends: as test_get_resources.py"
    ),
    "tests/udf/test_udf_runner.py": (
        "UDFRunner with LiberTEM's executors and AsyncAdapter: the runner class itself "
        "(ltdask's engine is ltdask.udf.api)"
    ),
    "tests/udf/test_multi_udf.py::test_simple_multi_udf_run": (
        "UDFRunner(udfs).run_for_dataset(...): the runner class itself"
    ),
    "tests/test_context.py::test_dynamic_parameter_update_integration": (
        "executor.get_available_workers and UDF parameters changed between partitions "
        "through LiberTEM's executor internals"
    ),
}


def prepare(venv: Path, work: Path) -> Path:
    """Make the venv, install the test plug-ins and unpack LiberTEM's sdist; its tree."""
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    run([str(python), "-m", "pip", "install", *TEST_DEPENDENCIES])
    name, version = LIBERTEM
    stem = f"{name}-{version}"
    tree = work / stem
    if not (tree / "tests").is_dir():
        sdists = work / "sdists"
        sdists.mkdir(parents=True, exist_ok=True)
        run(
            [str(python), "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
            + ["-d", str(sdists), f"{name}=={version}"]
        )
        with tarfile.open(sdists / f"{stem}.tar.gz") as tar:
            tar.extractall(work, filter="data")
    if not (tree / "tests").is_dir():
        raise SystemExit(f"{tree}: the sdist of {stem} has no tests/ directory")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("--work", type=Path, default=Path("ltdask-libertem-tests"))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression (a part only)")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    tree = prepare(args.venv.resolve(), work)
    options = ["--noconftest", "-p", "libertem_test_fixtures", "-p", "no:randomly"]
    options += [f"--deselect={node}" for node in LEFT_OUT]
    if args.keyword:
        options += ["-k", args.keyword]
    report = run_suite(
        args.venv.resolve(),
        tree,
        work,
        args.timeout,
        paths=TEST_PATHS,
        options=tuple(options),
        pythonpath=(TOOLS, tree / "tests"),
    )
    if not report.exists():
        print_table([(f"libertem-{LIBERTEM[1]}", None, None)])
        return 1
    print_table([(f"libertem-{LIBERTEM[1]}", *summarise(report))], causes_shown=1000)
    print(f"\nleft out ({len(LEFT_OUT)}):")
    for node, why in LEFT_OUT.items():
        print(f"  {node}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
