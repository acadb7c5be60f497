"""Zarr arrays (formats 2 and 3, sharded or not), read chunk aligned through zarr-python.

Partitions start on shard boundaries (a shard is one stored object, read with its index),
and tiles are cut along the read chunks (a sharded array's inner chunks), so every chunk
is fetched and decompressed by one task, once per tile that needs it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Sequence

from ltdask.exceptions import DataSetError, MetadataWarning, warn
from ltdask.io.calibration import takes_calibration
from ltdask.io.checks import (
    changed_error,
    check_dtype,
    check_sig_dims,
    describe_candidates,
    same_version,
    signature_of,
    stat_regular_file,
)
from ltdask.io.chunked import ChunkedArrayDataSet

#: names of the metadata documents that mark a Zarr node
ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup", ".zattrs")


def claims_target(target) -> bool:
    """Whether `target` is Zarr before a file is examined: a ``zarr.Array``, a URL (only
    Zarr is read from URLs) or the name of a metadata document."""
    zarr = sys.modules.get("zarr")  # a zarr.Array means zarr is imported
    if zarr is not None and isinstance(target, zarr.Array):
        return True
    if not isinstance(target, (str, os.PathLike)):
        return False
    path = os.fspath(target)
    return isinstance(path, str) and ("://" in path or os.path.basename(path) in ZARR_METADATA)


def is_zarr(path: str) -> bool:
    """Whether `path` is a Zarr store directory (or a metadata document in one)."""
    if os.path.basename(path) in ZARR_METADATA:
        return True
    if os.path.isdir(path):
        return any(os.path.exists(os.path.join(path, m)) for m in ZARR_METADATA[:3])
    return False


def check_local_store(store: str, path: str | None) -> None:
    """A `DataSetError` if the local store `store` is not a directory, or if a metadata
    document zarr would read for `path` is not a regular file (a FIFO blocks its reader,
    a device never ends); checked before anything is opened."""
    try:
        mode = os.stat(store).st_mode
    except OSError:
        return  # missing: opening it says so
    if not stat.S_ISDIR(mode):
        stat_regular_file(store)  # the error names a FIFO or device
        raise DataSetError(f"{store!r} is a file, not a Zarr store directory")
    bases = [store] if not path else [store, os.path.join(store, path)]
    for base in bases:
        for name in ZARR_METADATA:
            doc = os.path.join(base, name)
            if os.path.lexists(doc):
                stat_regular_file(doc)


def _candidates(group, min_dims: int = 3) -> list[tuple[str, tuple[int, ...], str]]:
    import zarr

    found = []
    for name, node in group.members(max_depth=None):
        if isinstance(node, zarr.Array) and node.ndim >= min_dims:
            found.append((name, tuple(node.shape), str(node.dtype)))
    return sorted(found)


def _describe(found) -> str:
    return describe_candidates(found, "array", "store")


def _open_node(store, path: str | None, where: str):
    """The array or group at `path` in `store`; errors name what is there instead."""
    import zarr

    try:
        return zarr.open(store=store, path=path or "", mode="r")
    except FileNotFoundError as e:
        if isinstance(store, str) and "://" not in store and not os.path.exists(store):
            raise FileNotFoundError(f"{where} does not exist") from None
        if path:
            try:
                root = zarr.open(store=store, mode="r")
            except (FileNotFoundError, ValueError):
                root = None
            if isinstance(root, zarr.Group):
                raise DataSetError(
                    f"{where}: path={path!r} is not in the store; {_describe(_candidates(root))}"
                ) from None
        raise DataSetError(f"{where} is not a Zarr array or group ({e})") from None
    except (ValueError, TypeError, KeyError) as e:
        raise DataSetError(f"cannot open {where} as Zarr: {e}") from None


def dimension_names(arr) -> tuple[str, ...] | None:
    names = getattr(arr.metadata, "dimension_names", None)
    if names and all(names) and len(set(names)) == len(names):
        return tuple(str(n) for n in names)
    return None


class ZarrDataSet(ChunkedArrayDataSet):
    """A Zarr array read through zarr-python in the tasks (see :func:`open_zarr`).

    Parameters
    ----------
    array
        The opened ``zarr.Array``.
    store, array_path
        Where tasks reopen it: a store path or URL and the array's path in it; with
        ``store=None`` the array object itself travels with the tasks.
    where
        The array's location, for messages.

    Examples
    --------
    >>> import zarr, ltdask, tempfile, os
    >>> store = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> z = zarr.create_array(store, shape=(2, 3, 4, 5), dtype="uint16", chunks=(1, 3, 4, 5))
    >>> ds = ltdask.open(store)  # or ltdask.open_zarr(store), ltdask.open(z)
    >>> type(ds).__name__, ds.chunks, ds.shards
    ('ZarrDataSet', (1, 3, 4, 5), None)
    """

    def __init__(
        self,
        array,
        store: str | None,
        array_path: str,
        where: str,
        sig_dims: int = 2,
        nav_shape=None,
        sync_offset: int = 0,
        dims=None,
    ):
        self.path = where
        self.store = store
        self.array_path = array_path
        self._array = None if store is not None else array
        self.zarr_format = int(array.metadata.zarr_format)
        self.shards = None if array.shards is None else tuple(array.shards)
        self.chunks = tuple(array.chunks)
        dtype = check_dtype(array.dtype, where)
        if dims is None and nav_shape is None:
            dims = dimension_names(array)
        self._metadata_stat = self._stat_metadata()
        super().__init__(
            array.shape,
            dtype,
            sig_dims,
            read_chunks=self.chunks,
            storage_chunks=self.shards,
            nav_shape=nav_shape,
            sync_offset=sync_offset,
            dims=dims,
        )
        self._read_calibration(array)

    def _read_calibration(self, array) -> None:
        """The calibrations that `DataSet.to_zarr` kept in the array's attributes
        (``attrs["ltdask"]["calibration"]``): the signal ones where the frame has the
        stored dims, the nav ones where the scan keeps the stored nav shape."""
        stored = dict(array.attrs).get("ltdask")
        if not isinstance(stored, dict) or not isinstance(stored.get("calibration"), dict):
            return
        calibration = stored["calibration"]
        sig_dims = len(self.sig_shape)
        same_sig = stored.get("sig_dims", sig_dims) == sig_dims
        same_nav = same_sig and tuple(array.shape[:-sig_dims]) == tuple(self.nav_shape)
        try:
            self.calibrate(
                nav=calibration.get("nav") if same_nav else None,
                sig=calibration.get("sig") if same_sig else None,
            )
        except DataSetError as e:
            warn(
                f"{self.path}: the calibration in attrs['ltdask'] cannot be used "
                f"({str(e).removeprefix(f'{self.path}: ')}); the "
                "scan is read without it (pass nav_calibration=/sig_calibration= to set one)",
                MetadataWarning,
            )

    def _stat_metadata(self):
        """``(metadata document, its Signature)`` of an array in a local store, or None:
        the array is rewritten (new shape, dtype, codecs) exactly when this changes."""
        if not isinstance(self.store, str) or "://" in self.store:
            return None
        base = os.path.join(self.store, self.array_path or "")
        for name in ("zarr.json", ".zarray"):
            doc = os.path.join(base, name)
            try:
                return (doc, signature_of(os.stat(doc)))
            except OSError:
                continue
        return None

    def check_unchanged(self) -> None:
        """A `DataSetError` if the array's metadata document changed since it was opened
        (one ``os.stat``): chunks would be decoded with the old shape, dtype and codecs."""
        if self._metadata_stat is None:
            return
        doc, old = self._metadata_stat
        try:
            st = os.stat(doc)
            now = signature_of(st)
        except OSError as e:
            raise DataSetError(
                f"cannot read the Zarr array {self.path}: {doc!r}: {e.strerror or e}; "
                "was it deleted or rewritten since it was opened? Open it again"
            ) from None
        if not same_version(old, now):
            raise changed_error(doc, old, now, st.st_mode)

    def open_array(self):
        if self._array is not None:
            return self._array
        import zarr

        self.check_unchanged()
        try:
            return zarr.open_array(store=self.store, path=self.array_path or "", mode="r")
        except (FileNotFoundError, ValueError) as e:
            raise DataSetError(f"cannot read the Zarr array {self.path}: {e}") from None

    @contextlib.contextmanager
    def open_reader(self):
        from zarr.core.buffer.cpu import NDBuffer

        arr = self.open_array()

        def read(index, out):
            try:
                arr.get_basic_selection(index, out=NDBuffer.from_numpy_array(out))
            except MemoryError:
                raise
            except Exception as e:  # codecs raise RuntimeError, ValueError, zlib.error...
                raise DataSetError(
                    f"cannot read {self.path} at {index}: {type(e).__name__}: {e} "
                    "(a damaged or truncated chunk?)"
                ) from e

        yield read

    def attrs(self) -> dict:
        attrs = {**super().attrs(), "zarr_format": self.zarr_format}
        if self.shards is not None:
            attrs["shards"] = list(self.shards)
        return attrs

    def _token_fields(self) -> tuple:
        where = (
            (self.store, self.array_path, self._metadata_stat)
            if self._array is None
            else (str(self._array.store), self._array.path, id(self._array.store))
        )
        return (super()._token_fields(), where, self.shards)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", zarr v{self.zarr_format}>"


@takes_calibration
def open_zarr(
    store,
    path: str | None = None,
    sig_dims: int = 2,
    dims: Sequence[str] | None = None,
    sync_offset: int = 0,
    nav_shape: Sequence[int] | None = None,
) -> ZarrDataSet:
    """Open a Zarr array (format 2 or 3, sharded or not); its last `sig_dims` dims are the frame.

    Only metadata is read here; tasks open the array themselves.

    Parameters
    ----------
    store
        A store directory or URL (a ``zarr.json`` / ``.zarray`` path inside one works too),
        or a ``zarr.Array``. Arrays in a local store are reopened in the tasks from their
        path; arrays in other stores (memory, remote) travel with the tasks.
    path
        The array's path inside the store, if the store is a group. If None and the store
        is a group holding exactly one array with more than `sig_dims` dims, that one.
    sig_dims
        How many trailing dims are the frame.
    dims
        Names of the nav and sig dims; by default the array's ``dimension_names`` (Zarr 3),
        if it has distinct ones, else ``scan_y, scan_x, det_y, det_x`` (for 4-D).
    sync_offset
        Positive: skip that many frames; negative: insert that many empty frames first.
    nav_shape
        Reinterpret the stored frames (flattened) as this scan shape.

    Raises
    ------
    FileNotFoundError
        The store does not exist.
    ltdask.DataSetError
        The store is not Zarr, or `path` is not an array in it (the message lists the arrays
        with at least 3 dims).

    Examples
    --------
    >>> import zarr, numpy as np, ltdask, tempfile, os
    >>> store = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> data = np.arange(4 * 6 * 8 * 8, dtype=np.uint16).reshape(4, 6, 8, 8)
    >>> z = zarr.create_array(store, shape=data.shape, dtype=data.dtype,
    ...                       chunks=(1, 3, 8, 8), shards=(2, 6, 8, 8))
    >>> z[...] = data
    >>> ds = open_zarr(store)
    >>> ds.nav_shape, ds.sig_shape, ds.chunks, ds.shards
    ((4, 6), (8, 8), (1, 3, 8, 8), (2, 6, 8, 8))
    >>> bool((ds.to_dask().compute() == data).all())
    True
    """
    import zarr

    check_sig_dims(sig_dims, f"open_zarr({store!s})")
    if isinstance(store, zarr.Array):
        array = store
        where = repr(f"{array.store}/{array.path}".rstrip("/"))
        root = getattr(array.store, "root", None)
        if root is not None and type(array.store).__name__ == "LocalStore":
            return ZarrDataSet(
                array, os.fspath(root), array.path, where, sig_dims, nav_shape, sync_offset, dims
            )
        return ZarrDataSet(array, None, array.path, where, sig_dims, nav_shape, sync_offset, dims)
    if isinstance(store, (str, os.PathLike)):
        store = os.fspath(store)
        if os.path.basename(store) in ZARR_METADATA:
            store = os.path.dirname(store) or "."
        if "://" not in store:
            check_local_store(store, path)
    where = repr(f"{store}/{path}" if path else str(store))
    node = _open_node(store, path, where)
    if isinstance(node, zarr.Group):
        found = _candidates(node, sig_dims + 1)
        if path is None and len(found) == 1:
            path = found[0][0]
            node = _open_node(store, path, where)
        else:
            what = f"path={path!r} is a group" if path else "the store is a group"
            root = _open_node(store, None, where) if path else node
            raise DataSetError(
                f"{where}: {what}; pass path=... naming an array ({_describe(_candidates(root))})"
            )
    # a store object (not a path or URL): the opened array travels with the tasks
    task_store = store if isinstance(store, str) else None
    return ZarrDataSet(node, task_store, path or "", where, sig_dims, nav_shape, sync_offset, dims)
