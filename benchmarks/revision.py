"""Import another git revision of ltdask beside this one, in the same process.

A/B comparisons of two versions of the code must be interleaved, round by round, in one
process: memory bandwidth here drifts by +-20 % within minutes, and two versions measured in
separate processes minutes apart differed by more than that with no change in the code
between them. `load_revision` exports the ``ltdask`` package of a revision with ``git
archive`` into a cache folder, renamed ``ltdask_<rev>`` (every ``ltdask`` word in its
sources renamed too, so its imports, dask settings and graph names stay its own), and
imports it. Both versions then run on the same scheduler, files and page cache.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

CACHE = Path("/tmp/ltdask-revisions")
REPO = Path(__file__).resolve().parent.parent
_WORD = re.compile(r"\bltdask\b")


def load_revision(rev: str, cache: Path = CACHE) -> ModuleType:
    """The ``ltdask`` package of git revision `rev`, imported as ``ltdask_<sha>``."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short=10", rev],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    name = f"ltdask_{sha}"
    root = cache / sha
    if not (root / name / "__init__.py").exists():
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha, "ltdask"],
            cwd=REPO,
            check=True,
            capture_output=True,
        ).stdout
        staging = cache / f"{sha}.partial"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        for path in (staging / "ltdask").rglob("*.py"):
            path.write_text(_WORD.sub(name, path.read_text()))
        root.mkdir(parents=True, exist_ok=True)
        (staging / "ltdask").rename(root / name)
        staging.rmdir()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(name)
