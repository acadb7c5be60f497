"""The documentation site builds without a warning (``-W``): every page, the API reference
from the docstrings, the command-line reference from the commands, and the notebooks,
executed (a notebook cell that raises fails the build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ipykernel.kernelspec import write_kernel_spec

DOCS = Path(__file__).resolve().parent.parent / "docs"


pytestmark = pytest.mark.slow


def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    # the notebooks run in a ``python3`` kernel of *this* interpreter, never one installed
    # for another Python (JUPYTER_PATH comes first in the kernel search)
    jupyter = tmp_path / "jupyter"
    write_kernel_spec(jupyter / "kernels" / "python3")
    env = {**os.environ, "JUPYTER_PATH": str(jupyter)}
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-E"]
        + [str(DOCS), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    for page in ("index", "concepts", "formats", "api", "_generated/cli", "coming-from-libertem"):
        assert (out / f"{page}.html").is_file(), page
    # the command-line reference is generated from the commands themselves
    cli = (out / "_generated" / "cli.html").read_text()
    assert "ltdask run" in cli and "--nav-shape" in cli
    # executed notebooks carry their outputs into the pages
    quickstart = (out / "notebooks" / "01-quickstart.html").read_text()
    assert "cell_output" in quickstart
