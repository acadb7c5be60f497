"""Run the test suites of packages built on LiberTEM against ltdask, through the alias.

Usage::

    python tools/run_libertem_ecosystem.py VENV [--work DIR] [--timeout SECONDS]

1. makes the virtual environment VENV if it does not exist (``--system-site-packages``,
   so ltdask's dependencies come from this interpreter), and installs into it, with
   ``pip install --no-deps``, the packages in `PACKAGES` (their own dependencies other than
   ``libertem`` come from this interpreter or from `TEST_DEPENDENCIES`, installed normally;
   a missing one shows up as a failure);
2. fetches their sdists (``pip download --no-binary :all: --no-deps``) and unpacks them in
   the work directory, for their ``tests/``;
3. runs each suite with ``LTDASK_ALIAS_LIBERTEM=1`` and a ``sitecustomize.py`` that
   imports ltdask (from this checkout) first, so that ``import libertem`` resolves to
   ltdask (see ``docs/coming-from-libertem.md``);
4. prints passed / failed / errors / skipped per package and the most common first lines
   of the failures.

Nothing here is part of ltdask; it needs the network (PyPI) for steps 1 and 2.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (distribution, version) of the packages whose suites are run
PACKAGES = (
    ("libertem-blobfinder", "0.6.1"),
    ("libertem-holo", "1.0.0"),
    ("libertem-parallax", "0.1.2"),
)
#: what the packages and their tests import besides LiberTEM and ltdask's dependencies
#: (blobfinder's hdbscan extra, holo's empyre and natsort; parallax's comparison against
#: quantem, which pulls in torch, is left out: that test module fails to import)
TEST_DEPENDENCIES = ("scikit-image", "ncempy", "natsort", "empyre", "hdbscan")

SITECUSTOMIZE = '''\
"""Turns on ltdask's LiberTEM alias before anything imports libertem."""
import os

if os.environ.get("LTDASK_ALIAS_LIBERTEM"):
    import ltdask  # noqa: F401  (honours LTDASK_ALIAS_LIBERTEM=1)
'''


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(command), flush=True)
    return subprocess.run(command, check=True, **kwargs)


def prepare(venv: Path, work: Path) -> dict[str, Path]:
    """Make the venv, install the packages and unpack their sdists; {name: sdist dir}."""
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)])
    specs = [f"{name}=={version}" for name, version in PACKAGES]
    run([str(python), "-m", "pip", "install", "--no-deps", *specs])
    run([str(python), "-m", "pip", "install", *TEST_DEPENDENCIES])
    sdists = work / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    run(
        [str(python), "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
        + ["-d", str(sdists), *specs]
    )
    trees = {}
    for name, version in PACKAGES:
        stem = f"{name.replace('-', '_')}-{version}"
        archive = sdists / f"{stem}.tar.gz"
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        trees[name] = work / stem
    return trees


def summarise(report: Path) -> tuple[collections.Counter, collections.Counter]:
    """Outcome counts and the first lines of the failure/error messages of a junit file."""
    counts: collections.Counter = collections.Counter()
    causes: collections.Counter = collections.Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "errors"}.get(child.tag, child.tag)
                if child.tag != "skipped":
                    causes[_cause(child)] += 1
        counts[outcome] += 1
    return counts, causes


def _cause(element) -> str:
    """The first line of a failure's message; for collection errors (whose message says
    only that), the last ``E`` line of the traceback."""
    message = (element.get("message") or "").strip()
    lines = [line[1:].strip() for line in (element.text or "").splitlines() if line[:1] == "E"]
    if (not message or message == "collection failure") and lines:
        message = lines[-1]
    return message.splitlines()[0][:200] if message else "(no message)"


def run_suite(
    venv: Path,
    tree: Path,
    work: Path,
    timeout: int,
    paths: tuple[str, ...] = ("tests",),
    options: tuple[str, ...] = (),
    pythonpath: tuple[Path, ...] = (),
) -> Path:
    """Run pytest on `paths` of `tree` with the alias on and ltdask from this checkout
    (`options`: more pytest options; `pythonpath`: more import directories); the junit
    report's path."""
    alias_dir = work / "alias"
    alias_dir.mkdir(exist_ok=True)
    (alias_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "LTDASK_ALIAS_LIBERTEM": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(alias_dir), *map(str, pythonpath)]),
    }
    report = work / f"{tree.name}.xml"
    command = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    # the projects' own addopts (marker selections) stay
    command += ["--continue-on-collection-errors", f"--junitxml={report}"]
    command += [*options, *paths]
    print("$", " ".join(command), f"(in {tree})", flush=True)
    try:
        subprocess.run(command, cwd=tree, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        print(f"{tree.name}: timed out after {timeout} s", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path)
    parser.add_argument("--work", type=Path, default=Path("ltdask-ecosystem-run"))
    parser.add_argument("--timeout", type=int, default=900, help="per package, seconds")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    venv = args.venv.resolve()
    trees = prepare(venv, work)
    rows: list[tuple[str, collections.Counter | None, collections.Counter | None]] = []
    for name, tree in trees.items():
        report = run_suite(venv, tree, work, args.timeout)
        if not report.exists():
            rows.append((name, None, None))
            continue
        rows.append((name, *summarise(report)))
    print_table(rows)
    return 0


def print_table(
    rows: list[tuple[str, collections.Counter | None, collections.Counter | None]],
    causes_shown: int = 12,
) -> None:
    """Outcome counts per suite, then each suite's most common failure messages."""
    print("\npackage               passed  failed  errors  skipped")
    for name, outcome, _ in rows:
        if outcome is None:
            print(f"{name:<20}  (no report: the run timed out or pytest did not start)")
            continue
        print(
            f"{name:<20}  {outcome['passed']:>6}  {outcome['failed']:>6}  "
            f"{outcome['errors']:>6}  {outcome['skipped']:>7}"
        )
    for name, _, causes in rows:
        if causes:
            print(f"\n{name}: most common failures")
            for message, n in causes.most_common(causes_shown):
                print(f"  {n:>4}  {message}")


if __name__ == "__main__":
    sys.exit(main())
