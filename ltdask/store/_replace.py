"""Replacing a Zarr store on the local file system without ever losing a user's data.

A store on the local file system is written under a temporary name and renamed into place
when complete (`atomic_store`), so a failed run leaves nothing that looks complete, and an
existing store is only replaced with ``mode="w"``:

* only a Zarr store (``zarr.json``, ``.zgroup`` or ``.zarray`` at its root) or an empty
  folder is replaced; a file, a folder of other things or a symbolic link is refused
  (`StoreReplaceError`) before anything is computed;
* the complete new store and the old one swap places in one step, Linux
  ``renameat2(RENAME_EXCHANGE)``, so the path always holds the old or the new store; the old
  one is then deleted from its hidden name, its root metadata last. Where the file system
  lacks the exchange (``ENOSYS``/``EINVAL``), two renames leave an instant with nothing at
  the path, the old store waiting complete at ``.NAME.old-PID-HEX``: if the writer is killed
  then, the next write to ``NAME`` puts the old store back first;
* writes killed part way leave ``.NAME.partial-PID-HEX`` / ``.NAME.old-PID-HEX`` siblings;
  the next write to ``NAME`` removes those that are stores (or empty) and whose process is
  gone.

Stores that are not local paths (URLs, zarr store objects) are written in place.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator

from ltdask.exceptions import LtdaskError

#: ``"w-"``: create, fail if the store exists; ``"w"``: replace it (if it is a store)
MODES = ("w-", "w")


def _local_path(store) -> str | None:
    if isinstance(store, (str, os.PathLike)):
        path = os.fspath(store)
        if "://" not in path:
            return os.path.abspath(path)
    return None


def _store_exists(store) -> bool:
    path = _local_path(store)
    if path is not None:
        return os.path.lexists(path)
    import zarr

    try:
        zarr.open(store, mode="r")
    except Exception:
        return False
    return True


class StoreReplaceError(LtdaskError):
    """An existing path that ltdask will not replace: it is not a Zarr store (nor an empty
    folder).

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("my notes")
    >>> res = ltdask.udf.SumUDF().lazy(ltdask.from_array(np.ones((2, 2, 4, 4))))
    >>> try:
    ...     ltdask.to_zarr(res, path, mode="w")
    ... except ltdask.StoreReplaceError as e:
    ...     print(type(e).__name__)
    StoreReplaceError
    >>> os.path.isfile(path)  # left as it was
    True
    """


#: files at the root of a Zarr store (v3, v2 group, v2 array)
ZARR_ROOT_FILES = ("zarr.json", ".zgroup", ".zarray")


#: hidden siblings made while writing ``NAME``: ``.NAME.partial-PID-HEX``, ``.NAME.old-PID-HEX``
_LEFTOVER = r"\.{name}\.(partial|old)-(\d+)-[0-9a-f]{{8}}"


#: the temporary stores this process is writing now (never cleaned up as leftovers)
_ACTIVE: set[str] = set()


def _step(name: str) -> None:
    """A point in a store replacement; tests replace this to kill the process there."""


def _is_store(path: str) -> bool:
    """A real (not linked) folder that is empty or a Zarr store (a store being written holds
    its root metadata before any chunk)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    names = os.listdir(path)
    return not names or any(n in names for n in ZARR_ROOT_FILES)


def _check_replaceable(path: str) -> None:
    """Raise unless `path` is absent, an empty folder or a Zarr store."""
    if not os.path.lexists(path) or _is_store(path):
        return
    if os.path.islink(path):
        what = f"a symbolic link to {os.readlink(path)}"
    elif not os.path.isdir(path):
        what = "a file"
    else:
        names = sorted(os.listdir(path))
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        what = f"a folder holding {shown}, with no zarr.json, .zgroup or .zarray"
    raise StoreReplaceError(
        f"{path} is {what}: not a Zarr store, so it was left as it is; ltdask replaces only "
        "Zarr stores and empty folders; choose another path"
    )


def _remove_store(path: str) -> None:
    """Delete a store, its root metadata last, so that a store half deleted by a killed
    process is still recognisable (and removed by the next write)."""
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.name in ZARR_ROOT_FILES:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
    _step("removing")
    for name in ZARR_ROOT_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, name))
    os.rmdir(path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(parent: str, name: str) -> Iterator[tuple[str, str]]:
    """``(kind, path)`` of the stores named as ltdask names its temporary (``partial``) and
    replaced (``old``) stores of ``NAME`` whose writing process is gone."""
    pattern = re.compile(_LEFTOVER.format(name=re.escape(name)))
    try:
        names = os.listdir(parent or ".")
    except FileNotFoundError:
        return
    for entry in names:
        match = pattern.fullmatch(entry)
        if match is None:
            continue
        full = os.path.join(parent, entry)
        pid = int(match.group(2))
        if full in _ACTIVE or (pid != os.getpid() and _pid_alive(pid)):
            continue
        if _is_store(full):
            yield match.group(1), full


def _restore_moved_away(path: str) -> None:
    """Where a replacement without ``RENAME_EXCHANGE`` was killed between its two renames,
    `path` is empty and the old store waits complete at ``.NAME.old-PID-HEX``: put it back
    (the newest such store of a process that is gone), so that it is neither lost nor
    treated as absent."""
    if os.path.lexists(path):
        return
    parent, name = os.path.split(path)
    waiting = [(os.stat(p).st_mtime_ns, p) for kind, p in _leftovers(parent, name) if kind == "old"]
    if waiting:
        with contextlib.suppress(OSError):
            os.rename(max(waiting)[1], path)


def _remove_leftovers(parent: str, name: str) -> None:
    """Remove the temporary and old stores that killed or failed writes to ``NAME`` left in
    `parent` (those of live processes' writes in progress are kept)."""
    for _, path in list(_leftovers(parent, name)):
        with contextlib.suppress(OSError):
            _remove_store(path)


_AT_FDCWD = -100


_RENAME_NOREPLACE = 1


_RENAME_EXCHANGE = 2


#: renameat2's system call number where glibc lacks the wrapper
_SYSCALL_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}


def _renameat2(src: str, dst: str, flags: int) -> bool:
    """Linux ``renameat2``: True when done, False where the kernel, C library or file
    system does not support it; other failures raise `OSError`."""
    import ctypes
    import errno
    import platform

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    args = (
        ctypes.c_int(_AT_FDCWD),
        os.fsencode(src),
        ctypes.c_int(_AT_FDCWD),
        os.fsencode(dst),
        ctypes.c_uint(flags),
    )
    fn = getattr(libc, "renameat2", None)
    if fn is not None:
        rc = fn(*args)
    else:
        number = _SYSCALL_RENAMEAT2.get(platform.machine())
        if number is None or not hasattr(libc, "syscall"):
            return False
        rc = libc.syscall(ctypes.c_long(number), *args)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), src, None, dst)


def _replace(tmp: str, path: str, old: str) -> None:
    """Put the complete store `tmp` at `path`, replacing what is there (checked to be a
    store). With ``RENAME_EXCHANGE`` the path always holds the old or the new store; where
    the file system lacks it, two renames leave an instant with nothing at `path` (the old
    store then waits at `old`)."""
    if not os.path.lexists(path):
        with contextlib.suppress(FileExistsError):  # appeared meanwhile: replace it below
            if _renameat2(tmp, path, _RENAME_NOREPLACE):
                return
            if not os.path.lexists(path):
                os.rename(tmp, path)
                return
    _check_replaceable(path)
    if _renameat2(tmp, path, _RENAME_EXCHANGE):
        _step("exchanged")
        if not _is_store(tmp):
            # something else took the path between the check and the exchange: put it back
            _renameat2(tmp, path, _RENAME_EXCHANGE)
            _check_replaceable(path)
        os.rename(tmp, old)
    else:
        os.rename(path, old)
        _step("moved-away")
        os.rename(tmp, path)
    _step("replaced")
    _remove_store(old)


#: seconds a failed write's temporary store must stay gone before the write gives up on it
#: (tasks still running write into it after a task's error), and the most it waits
_SETTLE_S, _SETTLE_MAX_S = 0.3, 10.0


def _remove_abandoned(tmp: str) -> None:
    """Remove the temporary store of a write that failed. dask raises a task's error while
    tasks already started run on (and zarr re-creates the folders a chunk goes into), so
    the store is removed again until it has stayed gone for `_SETTLE_S`; one that comes
    back later still is removed by the next write to the same path (`_remove_leftovers`)."""
    import time

    start = quiet = time.monotonic()
    while time.monotonic() - start < _SETTLE_MAX_S:
        if os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
            quiet = time.monotonic()
        elif time.monotonic() - quiet >= _SETTLE_S:
            return
        time.sleep(0.02)


@contextlib.contextmanager
def atomic_store(store, mode: str) -> Iterator:
    """Yield where to write; move it to `store` when the block completes (a local path:
    written under a temporary name, then swapped in; other stores: written in place)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected 'w-' (create, fail if it exists) or 'w'")
    path = _local_path(store)
    if path is not None:
        _restore_moved_away(path)
    if mode == "w-" and _store_exists(store):
        raise FileExistsError(
            f"{store!s} already exists; pass mode='w' to replace it, or choose another path"
        )
    if path is None:
        yield store
        return
    _check_replaceable(path)
    parent, name = os.path.split(path)
    os.makedirs(parent or ".", exist_ok=True)
    _remove_leftovers(parent, name)
    _step("start")
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp = os.path.join(parent, f".{name}.partial-{tag}")
    _ACTIVE.add(tmp)
    try:
        os.mkdir(tmp)
        _step("partial-created")
        try:
            yield tmp
        except BaseException:
            _remove_abandoned(tmp)
            raise
        _step("written")
        if mode == "w-" and os.path.lexists(path):
            shutil.rmtree(tmp, ignore_errors=True)
            raise FileExistsError(f"{path} appeared while writing; left it as it was")
        try:
            _replace(tmp, path, os.path.join(parent, f".{name}.old-{tag}"))
        except BaseException:
            if _is_store(tmp):
                _remove_store(tmp)
            raise
    finally:
        _ACTIVE.discard(tmp)
