"""Never lose a user's data: what ``to_zarr(mode="w")`` replaces, and writes killed at every
step of a store replacement (fault injection in child processes)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr
import zarr

import ltdask
from ltdask.store import StoreReplaceError
from ltdask.store import _replace as store_module

OLD, NEW = 1.0, 2.0


def result(value: float) -> xr.Dataset:
    return xr.Dataset({"v": ("x", np.full(4, value))})


def snapshot(folder) -> dict:
    """Every file under `folder` (links not followed) with its bytes."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            p = os.path.join(root, name)
            out[os.path.relpath(p, folder)] = (
                os.readlink(p) if os.path.islink(p) else open(p, "rb").read()
            )
    return out


def value_at(path) -> float:
    """The one value a store holds: results (variable ``v``) or a dataset (an array)."""
    node = zarr.open(path, mode="r")
    values = np.asarray(node[...] if isinstance(node, zarr.Array) else node["v"][...]).ravel()
    assert len(set(values.tolist())) == 1, values
    return float(values[0])


# -- what mode="w" replaces ----------------------------------------------------------------------
def user_folder(tmp_path):
    d = tmp_path / "mydata"
    d.mkdir()
    (d / "notes.txt").write_text("my notes")
    (d / "scan.raw").write_bytes(b"\x01\x02" * 100)
    return d, "a folder holding notes.txt, scan.raw"


def user_file(tmp_path):
    f = tmp_path / "mydata"
    f.write_bytes(b"precious")
    return f, "a file"


def user_link(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "zarr.json").write_text("{}")
    (target / "data.bin").write_bytes(b"x" * 10)
    link = tmp_path / "mydata"
    link.symlink_to(target)
    return link, "a symbolic link to"


@pytest.mark.parametrize(
    "make", [user_folder, user_file, user_link], ids=["folder-of-files", "file", "symlink"]
)
@pytest.mark.parametrize("writer", ["results", "dataset"])
def test_replace_refuses_what_is_not_a_store(tmp_path, make, writer):
    path, what = make(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(StoreReplaceError, match=f"{path}.* is {what}.*not a Zarr store"):
        if writer == "results":
            ltdask.to_zarr(result(NEW), path, mode="w")
        else:
            ltdask.from_array(np.ones((2, 2, 3, 3), np.float32)).to_zarr(path, mode="w")
    assert snapshot(tmp_path) == before
    assert sorted(os.listdir(tmp_path)) == sorted(before_names(before))


def before_names(snap) -> set:
    return {p.split(os.sep)[0] for p in snap}


@pytest.mark.parametrize("existing", ["empty-folder", "zarr-store"])
def test_replace_store_or_empty_folder(tmp_path, existing):
    path = tmp_path / "out.zarr"
    if existing == "empty-folder":
        path.mkdir()
    else:
        ltdask.to_zarr(result(OLD), path)
    ltdask.to_zarr(result(NEW), path, mode="w")
    assert value_at(path) == NEW
    assert os.listdir(tmp_path) == ["out.zarr"]


@pytest.mark.parametrize("appears", ["zarr-store", "user-folder"])
def test_path_taken_while_writing(tmp_path, monkeypatch, appears):
    """Something appears at the path while the run computes: a store is replaced, anything
    else is left as it is (and the new store is not left behind)."""
    path = tmp_path / "out.zarr"

    def step(name):
        if name == "written":
            path.mkdir()
            (path / ("zarr.json" if appears == "zarr-store" else "notes.txt")).write_text("{}")

    monkeypatch.setattr(store_module, "_step", step)
    if appears == "zarr-store":
        ltdask.to_zarr(result(NEW), path, mode="w")
        assert value_at(path) == NEW
    else:
        with pytest.raises(StoreReplaceError, match="a folder holding notes.txt"):
            ltdask.to_zarr(result(NEW), path, mode="w")
        assert os.listdir(path) == ["notes.txt"]
    assert os.listdir(tmp_path) == ["out.zarr"]


def test_exchange_is_atomic_rename(tmp_path):
    """RENAME_EXCHANGE swaps two folders: the path is never empty."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "from-a").touch()
    assert store_module._renameat2(str(a), str(b), store_module._RENAME_EXCHANGE)
    assert os.listdir(b) == ["from-a"] and os.listdir(a) == []


class LibcWithout:
    """The C library as ctypes gives it, without the ``renameat2`` wrapper (old glibc)."""

    def __init__(self, name=None, use_errno=False):
        self._libc = REAL_CDLL(name, use_errno=use_errno)
        self.syscall = self._libc.syscall


class LibcUnsupported:
    """A ``renameat2`` that fails as on a file system without RENAME_EXCHANGE."""

    def __init__(self, name=None, use_errno=False):
        pass

    def renameat2(self, *args):
        ctypes.set_errno(errno.EINVAL)
        return -1


REAL_CDLL = ctypes.CDLL


def test_exchange_by_syscall_without_glibc_wrapper(tmp_path, monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", LibcWithout)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "from-a").touch()
    swapped = store_module._renameat2(str(a), str(b), store_module._RENAME_EXCHANGE)
    assert swapped == (platform.machine() in store_module._SYSCALL_RENAMEAT2)
    if swapped:
        assert os.listdir(b) == ["from-a"] and os.listdir(a) == []
    path = tmp_path / "out.zarr"
    ltdask.to_zarr(result(OLD), path)
    ltdask.to_zarr(result(NEW), path, mode="w")
    assert value_at(path) == NEW and sorted(os.listdir(tmp_path)) == ["a", "b", "out.zarr"]


def test_replace_where_exchange_is_unsupported(tmp_path, monkeypatch):
    monkeypatch.setattr(ctypes, "CDLL", LibcUnsupported)
    assert not store_module._renameat2("a", "b", store_module._RENAME_EXCHANGE)
    path = tmp_path / "out.zarr"
    ltdask.to_zarr(result(OLD), path)
    ltdask.to_zarr(result(NEW), path, mode="w")
    assert value_at(path) == NEW and os.listdir(tmp_path) == ["out.zarr"]


# -- writes killed at every step --------------------------------------------------------------
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    import numpy as np, xarray as xr
    import ltdask
    from ltdask.store import _replace as store

    path, kill_at, exchange, writer = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]

    def step(name):
        if name == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    store._step = step
    if not exchange:
        real = store._renameat2
        store._renameat2 = lambda a, b, flags: (
            False if flags == store._RENAME_EXCHANGE else real(a, b, flags)
        )
    if writer == "results":
        ltdask.to_zarr(xr.Dataset({"v": ("x", np.full(4, 2.0))}), path, mode="w")
    else:
        ltdask.from_array(np.full((2, 2, 3, 3), 2.0)).to_zarr(path, mode="w")
    """
)
#: (step, exchange) -> the value the path holds after the kill (None: nothing), for writes of
#: results; a dataset's write (``convert``) goes through the same steps, checked at some
STEPS = {
    ("start", True): OLD,
    ("partial-created", True): OLD,
    ("written", True): OLD,
    ("exchanged", True): NEW,
    ("replaced", True): NEW,
    ("removing", True): NEW,
    ("none", True): NEW,
    # without RENAME_EXCHANGE (a file system that lacks it) two renames leave an instant
    # with nothing at the path; the old store then waits, complete, at .NAME.old-*
    ("moved-away", False): None,
    ("replaced", False): NEW,
    ("none", False): NEW,
}


DATASET_STEPS = [("partial-created", True), ("written", True), ("exchanged", True)]


def old_store(path, writer):
    if writer == "results":
        ltdask.to_zarr(result(OLD), path)
    else:
        ltdask.from_array(np.full((2, 2, 3, 3), OLD)).to_zarr(path)


@pytest.mark.slow  # kills writers at many points
def test_killed_replacement_loses_nothing(tmp_path):
    procs = {}
    cases = [(*key, "results") for key in STEPS] + [(*key, "dataset") for key in DATASET_STEPS]
    for step, exchange, writer in cases:
        folder = tmp_path / f"{writer}-{step}-{int(exchange)}"
        folder.mkdir()
        old_store(folder / "out.zarr", writer)
        args = [str(folder / "out.zarr"), step, str(int(exchange)), writer]
        procs[step, exchange, writer] = subprocess.Popen(
            [sys.executable, "-c", CHILD, *args], stderr=subprocess.PIPE, text=True
        )
    for (step, exchange, writer), proc in procs.items():
        _, err = proc.communicate(timeout=120)
        folder = tmp_path / f"{writer}-{step}-{int(exchange)}"
        path = folder / "out.zarr"
        want_rc = 0 if step == "none" else -signal.SIGKILL
        assert proc.returncode == want_rc, (step, exchange, err)
        expected = STEPS[step, exchange]
        if expected is None:
            assert not path.exists()
            (old,) = [n for n in os.listdir(folder) if n.startswith(".out.zarr.old-")]
            assert value_at(folder / old) == OLD
            # the next write puts the old store back before it looks at the path: a
            # create-only write finds it there and refuses
            with pytest.raises(FileExistsError):
                ltdask.to_zarr(result(3.0), path, mode="w-")
            assert value_at(path) == OLD
        else:
            assert value_at(path) == expected, (step, exchange)
        # the next write removes the killed write's leftovers
        ltdask.to_zarr(result(3.0), path, mode="w")
        assert os.listdir(folder) == ["out.zarr"], (step, exchange)
        assert value_at(path) == 3.0


def test_leftovers_of_live_writes_and_user_files_are_kept(tmp_path):
    path = tmp_path / "out.zarr"
    ltdask.to_zarr(result(OLD), path)
    live = tmp_path / f".out.zarr.partial-{os.getppid()}-abcdef01"
    live.mkdir()
    (live / "zarr.json").write_text("{}")
    mine = tmp_path / ".out.zarr.old-99999999-abcdef02"  # no such process
    mine.mkdir()
    (mine / "notes.txt").write_text("not a store")
    other = tmp_path / ".out.zarr.backup"
    other.mkdir()
    ltdask.to_zarr(result(NEW), path, mode="w")
    assert sorted(os.listdir(tmp_path)) == sorted(["out.zarr", live.name, mine.name, other.name])
    assert (mine / "notes.txt").read_text() == "not a store"
