"""Bad-input checks shared by the test modules that feed malformed input to the openers and
to UDF runs (``tests/formats/test_*_errors.py``, ``tests/io/test_errors.py``,
``tests/test_bad_input.py``).

Every case must raise a clear, documented exception: ``ltdask.DataSetError`` (a
``ValueError``), ``FileNotFoundError``, ``ltdask.UDFError`` or ``ValueError`` (``TypeError``
for arguments of the wrong type), with the file and the offending value in the message;
never a segfault, a numba/h5py/zarr internal error or a silently wrong result.

:func:`expect` checks one case and records it; :func:`report` (a module-scoped fixture's
body) writes each module's cases and what they raised to ``build/bad-input-tables.txt`` at its
end (``pytest --bad-input-tables`` prints them too).
:func:`fuzz` runs one hypothesis example and counts the outcomes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ltdask import DataSetError, UDFError

NAV = (4, 6)
SIG = (8, 8)
FRAMES = math.prod(NAV)
HUGE = 2**63
#: the documented exception types
DOCUMENTED = (DataSetError, FileNotFoundError, UDFError, ValueError, TypeError)
#: a FIFO blocked its reader forever and /dev/zero filled the memory; now an error at once
NOT_REGULAR = r"is a (FIFO \(named pipe\)|character device); expected a regular file"
#: keywords that describe `write_raw`'s scan
RAW_KW = dict(nav_shape=NAV, sig_shape=SIG, dtype="uint16")

#: ``case id -> (exception type, first line of the message)`` of the running module
TABLE: dict[str, tuple[str, str]] = {}
#: fuzz test name -> how often each outcome was seen
FUZZ_SEEN: dict[str, Counter] = {}
_fuzz_dirs: list[Path] = []


# -- checking and recording cases ---------------------------------------------------------------
def named(path) -> str:
    """A regex for `path` as messages show it, with or without quotes."""
    return "'?" + re.escape(str(path)) + "'?"


def message_of(error: BaseException) -> str:
    return "\n".join([str(error), *getattr(error, "__notes__", [])])


def record(case: str, error: BaseException | None, note: str = "") -> None:
    """Note what `case` raised (None: that it was accepted, `note` saying how)."""
    if error is None:
        TABLE[case] = ("(no error)", note)
    else:
        first = message_of(error).splitlines()[0] if str(error) else ""
        # pytest's temporary folders make long names: keep the file's own name
        first = re.sub(r"/[^\s']*/pytest-\d+/[^/\s']+/", ".../", first)
        TABLE[case] = (type(error).__name__, first)


def case_id(request) -> str:
    return request.node.name.replace("test_", "", 1)


def expect(request, expected, match: str | None, fn, *args, names=None, **kwargs):
    """Call ``fn`` and check that it raises `expected` with a message matching `match` and
    naming `names` (a path), and nothing from numba, h5py or zarr internals."""
    with pytest.raises(expected) as info:
        fn(*args, **kwargs)
    error = info.value
    record(case_id(request), error)
    assert isinstance(error, DOCUMENTED), f"undocumented {type(error)}: {error}"
    module = type(error).__module__
    assert not module.startswith(("numba", "h5py", "zarr", "llvmlite")), (module, error)
    message = message_of(error)
    if match is not None:
        assert re.search(match, message), f"{message!r} does not match {match!r}"
    if names is not None:
        assert os.path.basename(os.fspath(names).rstrip("/")) in message, (
            f"{message!r} does not name {names}"
        )
    return error


def report(request):
    """Body of a module-scoped fixture: at the end of the module, write every case and what
    it raised to the tables file (and the terminal, on request), and remove the fuzz tests'
    files."""
    TABLE.clear()
    FUZZ_SEEN.clear()
    yield
    lines = [f"bad input ({request.node.name}): {len(TABLE)} cases and what they raise"]
    width = max((len(k) for k in TABLE), default=0)
    for case, (kind, message) in sorted(TABLE.items()):
        lines.append(f"{case:<{width}}  {kind:<18} {message[:110]}")
    for name, seen in sorted(FUZZ_SEEN.items()):
        lines.append(f"fuzz {name}: {dict(seen)}")
    if len(lines) > 1:
        _write_table(request.config, lines)
    while _fuzz_dirs:
        shutil.rmtree(_fuzz_dirs.pop(), ignore_errors=True)


#: where the tables go, under the rootdir (``build/`` is ignored by git)
TABLES_FILE = Path("build") / "bad-input-tables.txt"


def tables_path(config) -> Path:
    return Path(config.rootpath) / TABLES_FILE


def _write_table(config, lines: list[str]) -> None:
    """Append one module's table to the tables file; print it where ``--bad-input-tables``
    asks (fixture teardown is captured, so past pytest's capture)."""
    path = tables_path(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write("\n".join(["-- " + lines[0] + " --", *lines[1:], ""]) + "\n")
    if not config.getoption("bad_input_tables", False):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line("")
        reporter.write_sep("-", lines[0])
        for line in lines[1:]:
            reporter.write_line(line)


# -- files ---------------------------------------------------------------------------------------
def scan_data(dtype="<u2") -> np.ndarray:
    return np.arange(FRAMES * math.prod(SIG), dtype=np.int64).reshape(*NAV, *SIG).astype(dtype)


def write_raw(folder: Path, name="scan.raw", nbytes: int | None = None) -> Path:
    path = folder / name
    raw = scan_data().tobytes()
    path.write_bytes(raw if nbytes is None else raw[:nbytes])
    return path


def write_hdf5(folder: Path, name="scan.h5", **datasets) -> Path:
    """An HDF5 file with `datasets` (key -> array, or key -> ``create_dataset`` keywords)."""
    import h5py

    path = folder / name
    with h5py.File(path, "w") as f:
        for key, value in datasets.items():
            if isinstance(value, dict):
                f.create_dataset(key, **value)
            else:
                f.create_dataset(key, data=value)
    return path


def write_zarr(folder: Path, data, name="scan.zarr", **create) -> Path:
    import zarr

    path = folder / name
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, **create)
    if data.size:
        z[...] = data
    return path


def special(folder: Path, kind: str, suffix: str) -> Path:
    """A FIFO (``kind="fifo"``), or a link to a device (``"link-zero"``), named like a scan;
    or the device itself (``"zero"``, ``"null"``)."""
    if kind == "fifo":
        path = folder / f"scan{suffix}"
        os.mkfifo(path)
        return path
    if kind.startswith("link-"):
        path = folder / f"scan{suffix}"
        path.symlink_to("/dev/" + kind.removeprefix("link-"))
        return path
    return Path("/dev") / kind


# -- fuzzing -------------------------------------------------------------------------------------
def fuzz_dir() -> Path:
    """One folder for the fuzz tests' files (function-scoped tmp_path does not fit
    hypothesis), removed at the end of the module (see `report`)."""
    if not _fuzz_dirs:
        _fuzz_dirs.append(Path(tempfile.mkdtemp(prefix="ltdask-fuzz-")))
    return _fuzz_dirs[0]


def fuzz(name: str, fn, *args, **kwargs):
    """Call fn; only documented exceptions may come out. Counts what happened."""
    seen = FUZZ_SEEN.setdefault(name, Counter())
    try:
        result = fn(*args, **kwargs)
    except (DataSetError, FileNotFoundError) as e:
        seen[type(e).__name__] += 1
        return None
    seen["opened"] += 1
    return result


def fuzz_file(name: str, content: bytes) -> Path:
    path = fuzz_dir() / name
    path.write_bytes(content)
    return path
