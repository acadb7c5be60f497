"""A new format is one folder and one registry line: a toy format, shaped as the built-in
ones are (``toyfolder/__init__.py`` declares its record and public names, ``dataset.py``
reads it) and registered by one entry-point line, is opened by ``ltdask.open``,
``ltdask.open_toy`` and the ``ltdask`` command, and passes ltdask's conformance kit
(`ltdask.testing.FormatTests`) in a test module of its own package."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import ltdask

TOY_FOLDER = {
    "toyfolder/__init__.py": '''
        """A toy detector: b"TOY1", a 2-byte header length, a JSON header, then the frames."""
        from ltdask.io import Format

        from toyfolder.dataset import open_toy

        FORMAT = Format(
            name="toy",
            opener=open_toy,
            description=".toy (a toy detector)",
            suffixes=(".toy",),
            magic=(b"TOY1",),
        )

        __all__ = ["FORMAT", "open_toy"]
    ''',
    "toyfolder/dataset.py": '''
        import json

        import ltdask
        from ltdask import DataSetError


        def write_toy(path, data):
            header = json.dumps({"shape": data.shape, "dtype": data.dtype.str}).encode()
            with open(path, "wb") as f:
                f.write(b"TOY1" + len(header).to_bytes(2, "little") + header + data.tobytes())
            return path


        def open_toy(path, sync_offset=0):
            """A raw scan behind a header: the shared raw read path does the reading."""
            with open(path, "rb") as f:
                head = f.read(6)
                if len(head) < 6 or head[:4] != b"TOY1":
                    raise DataSetError(f"{path}: not a toy file (it starts {head[:4]!r})")
                header = json.loads(f.read(int.from_bytes(head[4:], "little")))
            shape = header["shape"]
            return ltdask.open_raw(
                path,
                nav_shape=shape[:-2],
                sig_shape=shape[-2:],
                dtype=header["dtype"],
                file_header_bytes=6 + len(json.dumps(header).encode()),
                sync_offset=sync_offset,
            )
    ''',
    # the format's one registry line: an entry point
    "toyfolder-0.1.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: toyfolder
        Version: 0.1
    """,
    "toyfolder-0.1.dist-info/entry_points.txt": """
        [ltdask.formats]
        toy = toyfolder:FORMAT
    """,
    # the plug-in's own conformance tests, through ltdask's kit
    "test_toy_conformance.py": """
        from ltdask import DataSetError
        from ltdask.testing import BadInput, FormatTests
        from toyfolder.dataset import write_toy


        def wrong_magic(folder, target, keywords):
            path = folder / "wrong.toy"
            path.write_bytes(b"TOY2" + target.read_bytes()[4:])
            return path, keywords


        class TestToy(FormatTests):
            format = "toy"
            dtype = ">u2"
            distributed = False  # (the table of built-in formats runs on a cluster)
            bad_inputs = [BadInput("wrong-magic", wrong_magic, DataSetError, "not a toy file")]

            def write(self, folder, data):
                return write_toy(folder / "scan.toy", data), {}
    """,
}


def _install(folder: Path) -> None:
    for name, text in TOY_FOLDER.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())


def _run(site: Path, *args: str) -> str:
    """``python ARGS`` with the toy's site and this ltdask first on the path."""
    tree = str(Path(ltdask.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), tree])}
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, env=env, cwd=site
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_toy_format_is_one_folder(tmp_path):
    site = tmp_path / "site"
    _install(site)
    data = np.arange(3 * 4 * 5 * 6, dtype=">u2").reshape(3, 4, 5, 6)
    path = tmp_path / "scan.toy"
    data.astype(">u2").tofile(tmp_path / "frames.raw")
    script = f"""
        import numpy as np
        import ltdask
        from toyfolder.dataset import write_toy

        data = np.fromfile({str(tmp_path / "frames.raw")!r}, ">u2").reshape(3, 4, 5, 6)
        write_toy({str(path)!r}, data)
        for ds in (ltdask.open({str(path)!r}), ltdask.open_toy({str(path)!r}),
                   ltdask.io.open_toy({str(path)!r}, sync_offset=0)):
            np.testing.assert_array_equal(ds.to_dask().compute(), data)
        assert ltdask.open_toy is ltdask.io.open_toy
        print(type(ds).__name__, tuple(ds.shape))
    """
    out = _run(site, "-c", textwrap.dedent(script))
    assert "RawDataSet (3, 4, 5, 6)" in out, out

    info = _run(site, "-m", "ltdask.cli", "info", str(path))
    assert "toy" in info and "(3, 4)" in info and "(5, 6)" in info, info


def test_toy_format_passes_the_conformance_kit(tmp_path):
    """The plug-in's own test module: one `FormatTests` subclass, nine checks."""
    site = tmp_path / "site"
    _install(site)
    tests = _run(site, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_toy_conformance.py")
    assert "9 passed" in tests, tests
