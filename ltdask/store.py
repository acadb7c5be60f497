"""Writing UDF results and whole datasets to Zarr stores.

Every array is created by ltdask with chunks (or shards) that line up one to one with the
dask chunks that fill it, and the alignment is checked before anything is written:
``dask.array.to_zarr`` silently writes wrong data when chunks straddle store chunks (dask
issue 12583). A store on the local file system is written under a temporary name and
renamed into place when complete, so a failed run leaves nothing that looks complete, and
an existing store is only replaced with ``mode="w"``.

Never losing a user's data:

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
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence

from ltdask._version import __version__
from ltdask._progress import compute
from ltdask.exceptions import LtdaskError

MODES = ("w-", "w")


def regular_chunks(chunks: Sequence[Sequence[int]]) -> bool:
    """Whether every dim's chunks are one size except a smaller last one (Zarr's grid)."""
    for c in chunks:
        if len(c) > 1 and (len(set(c[:-1])) > 1 or c[-1] > c[0]):
            return False
    return True


def zarr_aligned(arr):
    """`arr` (dask) rechunked, if needed, onto a regular grid; returns ``(arr, chunks)``."""
    if not regular_chunks(arr.chunks):
        arr = arr.rechunk(tuple(max(c) if c else 1 for c in arr.chunks))
    chunks = tuple(max(c[0], 1) if c else 1 for c in arr.chunks)
    check_alignment(arr.chunks, chunks)
    return arr, chunks


def check_alignment(dask_chunks, store_chunks) -> None:
    """Raise unless each dask chunk covers exactly one store chunk (or shard)."""
    for dim, (dc, sc) in enumerate(zip(dask_chunks, store_chunks, strict=True)):
        if any(c != sc for c in dc[:-1]) or (dc and dc[-1] > sc):
            raise LtdaskError(
                f"dask chunks {tuple(dc)} along dim {dim} do not line up with the store's "
                f"chunks of {sc}; writing them would corrupt data (dask issue 12583)"
            )


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
    """An existing path that ltdask will not replace: it is not a Zarr store."""


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


@contextlib.contextmanager
def _atomic(store, mode: str) -> Iterator:
    """Yield where to write; move it to `store` when the block completes."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected 'w-' (create, fail if it exists) or 'w'")
    if _local_path(store) is not None:
        _restore_moved_away(_local_path(store))
    if mode == "w-" and _store_exists(store):
        raise FileExistsError(
            f"{store!s} already exists; pass mode='w' to replace it, or choose another path"
        )
    path = _local_path(store)
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
            shutil.rmtree(tmp, ignore_errors=True)
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


def _prepared(result):
    """A copy of a results Dataset whose dask variables (and coordinates) sit on regular
    grids, and the encoding that gives the store the same chunks."""
    import dask.array as da

    out = result.copy(deep=False)
    encoding = {}
    for name, var in out.variables.items():
        if isinstance(var.data, da.Array):
            arr, chunks = zarr_aligned(var.data)
            var.data = arr
            encoding[name] = {"chunks": chunks}
    return out, encoding


def _named(results) -> dict:
    import xarray as xr

    if isinstance(results, xr.Dataset):
        return {None: results}
    if isinstance(results, Mapping):
        return dict(results)
    named = {}
    for i, r in enumerate(results):
        base = r.attrs.get("udf", f"result{i}")
        key = base if base not in named else f"{base}_{i}"
        named[key] = r
    return named


def to_zarr(results, store, mode: str = "w-", progress: bool = False):
    """Write UDF results (lazy or computed) to a Zarr store, partition by partition.

    Parameters
    ----------
    results
        An `xarray.Dataset` from ``udf.lazy``/``udf.compute``, or several (a list: one
        group per UDF, named after it; a dict: one group per key).
    store
        A path (written atomically: a failed run leaves no store) or a zarr store.
    mode
        ``"w-"`` (default): fail if the store exists; ``"w"``: replace it, if it is a Zarr
        store or an empty folder (anything else raises `StoreReplaceError`).
    progress
        Show a progress bar.

    Returns
    -------
    The store as given.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, xarray as xr
    >>> ds = ltdask.from_array(np.ones((4, 4, 8, 8), dtype=np.float32))
    >>> res = ltdask.udf.SumSigUDF().lazy(ds)
    >>> path = os.path.join(tempfile.mkdtemp(), "res.zarr")
    >>> _ = ltdask.to_zarr(res, path)
    >>> float(xr.open_zarr(path)["intensity"].sum())
    1024.0
    """

    named = _named(results)
    with _atomic(store, mode) as target:
        writes = []
        for group, result in named.items():
            prepared, encoding = _prepared(result)
            prepared.attrs.setdefault("ltdask_version", __version__)
            writes.append(
                prepared.to_zarr(
                    target,
                    group=group,
                    mode="w" if group is None else "a",
                    encoding=encoding,
                    consolidated=False,
                    compute=False,
                )
            )
        # one graph for all groups: the UDFs of one run share their partition tasks
        compute(*writes, progress=progress)
        _consolidate(target)
    return store


def _consolidate(store) -> None:
    """Consolidated metadata, which ``xarray.open_zarr`` looks for first (zarr warns that
    it is not part of the v3 spec yet; xarray warns when it is missing)."""
    import warnings

    import zarr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        zarr.consolidate_metadata(store)


def write_dataset(
    dataset,
    store,
    chunks=None,
    dtype=None,
    compressors="auto",
    mode: str = "w-",
    progress: bool = False,
    corrections=None,
):
    """Write a dataset as one Zarr (v3) array (see :meth:`DataSet.to_zarr`)."""
    import dask.array as da
    import zarr
    from zarr.codecs import BloscCodec

    arr = dataset.to_dask(dtype=dtype, chunks=chunks, corrections=corrections)
    arr, shard = zarr_aligned(arr)
    frame_bytes = math.prod(dataset.sig_shape) * arr.dtype.itemsize
    # inner chunks: whole frames, about 1 MiB, inside shards of one dask chunk each
    inner = list(shard)
    nav_dims = len(dataset.nav_shape)
    budget = max(1, 2**20 // max(1, frame_bytes))
    for d in range(nav_dims - 1, -1, -1):
        inner[d] = max(1, min(shard[d], budget))
        budget = max(1, budget // max(1, inner[d]))
        for e in range(d):
            inner[e] = 1
        if inner[d] < shard[d]:
            break
    inner = tuple(i if shard[d] % i == 0 else _divisor(shard[d], i) for d, i in enumerate(inner))
    if compressors == "auto":
        compressors = BloscCodec(
            cname="zstd", clevel=3, shuffle="bitshuffle" if arr.dtype.itemsize == 1 else "shuffle"
        )
    attrs = {
        "ltdask": {
            "sig_dims": len(dataset.sig_shape),
            "source": str(dataset.path),
            "version": __version__,
        }
    }
    with _atomic(store, mode) as target:
        zarr_arr = zarr.create_array(
            target,
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=inner,
            shards=shard,
            compressors=compressors,
            dimension_names=list(dataset.dims),
            attributes=attrs,
        )
        check_alignment(arr.chunks, shard)
        compute(da.store(arr, zarr_arr, lock=False, compute=False), progress=progress)
    return store


def _divisor(n: int, at_most: int) -> int:
    """The largest divisor of `n` not above `at_most` (shards must hold whole chunks)."""
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0:
            return d
    return 1
