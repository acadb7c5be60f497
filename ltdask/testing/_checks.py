"""The conformance checks: one dataset (or its opener) against the array it must read as.

Each check raises `AssertionError` with what differs; none imports pytest, so they run under
any test runner (and in a notebook).
"""

from __future__ import annotations

import inspect
import pickle
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np

from ltdask.exceptions import DataSetError, MissingFramesWarning, UDFError
from ltdask.io.dataset import DataSet
from ltdask.io.tiling import TILE_MAX, TilingPreferences

#: tiny partitions and tiles: several partitions per scan of a few hundred bytes a frame, and
#: tiles that do not divide them (every check that looks at partitions or tiles runs in it)
SMALL_PARTITIONS = {
    "ltdask.partition-bytes": 2000,
    "ltdask.min-partitions": 1,
    "ltdask.tile-bytes": 1600,
}

#: what a bad input may raise: the documented exceptions, whose messages name the file and
#: the value (``ltdask.DataSetError`` is a ``ValueError``)
DOCUMENTED_ERRORS = (DataSetError, FileNotFoundError, UDFError, ValueError, TypeError)


def reference_scan(nav=(5, 7), sig=(9, 11), dtype="<u2", seed: int = 0) -> np.ndarray:
    """A scan of values that `dtype` holds exactly (integers up to 4000; floats with two
    decimals), in odd shapes that divide into no partition, chunk or tile size.

    Examples
    --------
    >>> from ltdask.testing import reference_scan
    >>> data = reference_scan(nav=(2, 3), sig=(4, 5), dtype=">u2")
    >>> data.shape, data.dtype.str
    ((2, 3, 4, 5), '>u2')
    """
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    shape = (*nav, *sig)
    if dt.kind in "iu":
        values = rng.integers(0, min(np.iinfo(dt).max, 4000), size=shape, endpoint=True)
    else:
        values = np.round(rng.standard_normal(shape) * 100, 2)
    return values.astype(dt)


def native(data: np.ndarray) -> np.ndarray:
    """`data` in native byte order: what a dataset of it reads as."""
    return data.astype(data.dtype.newbyteorder("="))


def _close(actual, expected, what: str) -> None:
    """Sums in the UDFs' float32 buffers against float64 numpy sums."""
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-3, err_msg=what)


def check_registered(name: str, target=None, keywords: dict | None = None) -> None:
    """The format `name` is in the registry and loads (a broken plug-in fails here with its
    `~ltdask.io.FormatPluginError`, which says why); ``ltdask.open`` tells a scan of it at
    `target` (given the opener's `keywords`) from its name or first bytes, and ``ltdask``
    and ``ltdask.io`` export its opener under the opener's own name.

    Examples
    --------
    >>> from ltdask.testing import check_registered
    >>> check_registered("mib")
    """
    import ltdask.io
    from ltdask.io import registry
    from ltdask.io.open import detect_format

    record = registry.get_format(name)  # raises FormatPluginError for a broken plug-in
    assert record.name == name, (record.name, name)
    if target is not None and not isinstance(target, np.ndarray):
        told = detect_format(target, keywords or {})
        assert told == name, f"ltdask.open tells {target} as {told!r}, not {name!r}"
    opener = record.opener_name()
    if opener.startswith("open_"):
        # (ltdask.io, not the package root, which it re-exports: layers below the root)
        assert getattr(ltdask.io, opener) is record.load_opener(), f"ltdask.io.{opener}"


def check_shape_and_dtype(ds: DataSet, reference: np.ndarray, sig_dims: int = 2) -> None:
    """The dataset's shape, nav/sig split, dtype (native byte order) and dims, and those of
    its dask array and xarray, are the reference's.

    Examples
    --------
    >>> import ltdask
    >>> from ltdask.testing import check_shape_and_dtype, reference_scan
    >>> data = reference_scan()
    >>> check_shape_and_dtype(ltdask.from_array(data), data)
    """
    nav, sig = reference.shape[:-sig_dims], reference.shape[-sig_dims:]
    assert tuple(ds.shape) == reference.shape, (tuple(ds.shape), reference.shape)
    assert ds.nav_shape == nav and ds.sig_shape == sig, (ds.nav_shape, ds.sig_shape)
    assert ds.dtype == reference.dtype.newbyteorder("="), (ds.dtype, reference.dtype)
    assert len(ds.dims) == reference.ndim, ds.dims
    arr = ds.to_dask()
    assert arr.shape == reference.shape and arr.dtype == ds.dtype, (arr.shape, arr.dtype)
    xa = ds.to_xarray()
    assert xa.dims == ds.dims and xa.shape == reference.shape, (xa.dims, xa.shape)


def check_values(ds: DataSet, reference: np.ndarray) -> None:
    """``to_dask()`` holds the reference: as it is and as float64, in the dataset's own
    partitions, in tiny partitions, and in chunks that cut frames (synchronous scheduler).
    """
    got = ds.to_dask().compute(scheduler="sync")
    np.testing.assert_array_equal(got, native(reference), err_msg="to_dask()")
    got = ds.to_dask(dtype="float64").compute(scheduler="sync")
    np.testing.assert_array_equal(got, reference.astype("float64"), err_msg="float64")
    with dask.config.set(SMALL_PARTITIONS):
        arr = ds.to_dask()
        got = arr.compute(scheduler="sync")
    np.testing.assert_array_equal(got, native(reference), err_msg="tiny partitions")
    # chunks that are not flat nav ranges and cut the frame
    chunks = tuple(max(1, n // 2) for n in reference.shape)
    arr = ds.to_dask(dtype="float32", chunks=chunks)
    assert arr.chunks == da.core.normalize_chunks(chunks, reference.shape), arr.chunks
    got = arr.compute(scheduler="sync")
    np.testing.assert_array_equal(got, reference.astype("float32"), err_msg=f"chunks={chunks}")


def tiling_preferences(sig_shape: Sequence[int], itemsize: int) -> list[TilingPreferences]:
    """Consumers that make the negotiation choose each kind of tile it has: its default,
    whole frames, whole partitions, one frame deep, tiles of one row of pixels (cut
    frames, where the format's base shape allows) and the largest."""
    row = int(sig_shape[-1]) * itemsize
    return [
        TilingPreferences(),
        TilingPreferences(method="frame"),
        TilingPreferences(method="partition"),
        TilingPreferences(depth=1),
        TilingPreferences(depth=1, total_size=row),
        TilingPreferences(depth=TILE_MAX, total_size=TILE_MAX),
    ]


def check_tile_shapes(ds: DataSet, reference: np.ndarray) -> set[tuple[int, ...]]:
    """Every tile the negotiation can choose, read as the dataset's dtype and as float32, in
    tiny partitions: each frame and pixel comes once, in a tile of the scheme's shape, and
    holds the reference's value. Returns the tile shapes seen.
    """
    frames = native(reference).reshape(-1, *ds.sig_shape)
    seen: set[tuple[int, ...]] = set()
    with dask.config.set(SMALL_PARTITIONS):
        for dtype in (ds.dtype, np.dtype("float32")):
            for prefs in tiling_preferences(ds.sig_shape, np.dtype(dtype).itemsize):
                scheme = ds.negotiate([prefs], dtype)
                count = np.zeros(frames.shape, np.int64)
                got = np.zeros(frames.shape, dtype)
                blocks = ds.partition_blocks()  # in-memory data: a task gets its block
                for i, p in enumerate(ds.get_partitions()):
                    positions = np.arange(p.start, p.stop)
                    block = None
                    if blocks is not None:
                        nav_index = np.unravel_index(i, blocks.numblocks[: len(ds.nav_shape)])
                        block = blocks.blocks[nav_index].compute(scheduler="sync")
                    for tile, first, s in ds.iter_tiles(positions, scheme, dtype, block):
                        tile = np.asarray(tile)
                        what = f"{prefs} as {np.dtype(dtype)}: {scheme}"
                        assert tile.dtype == np.dtype(dtype), (what, tile.dtype)
                        assert 1 <= tile.shape[0] <= scheme.depth, (what, tile.shape)
                        assert tile.shape[1:] == tuple(scheme[s].shape), (what, tile.shape)
                        where: tuple = (positions[first : first + len(tile)], *scheme[s].get())
                        count[where] += 1
                        got[where] = tile
                        seen.add(tuple(tile.shape))
                assert (count == 1).all(), f"{prefs}: pixels read {set(count.flat)} times"
                np.testing.assert_array_equal(got, frames.astype(dtype), err_msg=str(prefs))
    return seen


def shifted(reference: np.ndarray, sync_offset: int, sig_dims: int = 2) -> np.ndarray:
    """The scan that ``sync_offset=`` makes of `reference`'s frames: position ``p`` holds frame
    ``p + sync_offset``, zeros where that frame does not exist (LiberTEM's rule)."""
    nav = reference.shape[:-sig_dims]
    frames = native(reference).reshape(-1, *reference.shape[-sig_dims:])
    out = np.zeros_like(frames)
    n = len(frames)
    if sync_offset >= 0:
        out[: n - sync_offset] = frames[sync_offset:]
    else:
        out[-sync_offset:] = frames[: n + sync_offset]
    return out.reshape(*nav, *frames.shape[1:])


def takes_sync_offset(opener: Callable) -> bool:
    """Whether `opener` has a ``sync_offset`` keyword."""
    params = inspect.signature(opener).parameters
    return "sync_offset" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def check_sync_offset(
    open_scan: Callable[..., DataSet],
    reference: np.ndarray,
    offsets: Sequence[int] = (3, -2),
    base: int = 0,
) -> None:
    """``open_scan(sync_offset=base + k)`` reads frame ``p + k`` of the reference at position
    ``p`` (zeros where there is none), for each of `offsets`, in tiny partitions.

    `base` is the offset of the reference's first frame in the files, for formats that find
    it themselves (the ``sync_offset`` of the scan opened without one: TVIPS's frames
    before the scan starts, which must then be zeros).
    """
    for k in offsets:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingFramesWarning)
            ds = open_scan(sync_offset=base + k)
            with dask.config.set(SMALL_PARTITIONS):
                got = ds.to_dask().compute(scheduler="sync")
        np.testing.assert_array_equal(got, shifted(reference, k), err_msg=f"sync_offset={k}")


def roi_for(nav_shape: Sequence[int], seed: int = 1) -> np.ndarray:
    """An ROI of about half the positions; the first position out, the last in."""
    roi = np.random.default_rng(seed).random(tuple(nav_shape)) < 0.45
    roi.flat[0] = False
    roi.flat[-1] = True
    return roi


def _sums(ds: DataSet, reference: np.ndarray, roi, scheduler: Any = None) -> None:
    """SumSigUDF and SumUDF over `ds` (with `roi`) against numpy's sums of the reference."""
    from ltdask.udf.api import compute
    from ltdask.udf.builtin import SumSigUDF, SumUDF

    config = SMALL_PARTITIONS if scheduler is None else {**SMALL_PARTITIONS, "scheduler": scheduler}
    with dask.config.set(config):
        sig_sums, sums = compute(ds, [SumSigUDF(), SumUDF()], roi=roi)
    truth = reference.astype("float64")
    axes = tuple(range(len(ds.nav_shape), reference.ndim))
    selected = np.ones(ds.nav_shape, bool) if roi is None else roi
    _close(sig_sums["intensity"].values, np.where(selected, truth.sum(axis=axes), np.nan), "sig")
    _close(sums["intensity"].values, truth[selected].sum(axis=0), "sum over the scan")
    if roi is not None:
        valid = sig_sums["intensity"]["intensity_valid"].values
        np.testing.assert_array_equal(valid, roi, err_msg="valid mask")


def check_roi(ds: DataSet, reference: np.ndarray, roi: np.ndarray | None = None) -> None:
    """SumSigUDF and SumUDF over an ROI (by default `roi_for`), in tiny partitions whose
    tiles do not divide them, equal numpy's sums of the reference (float32 buffers:
    ``rtol=1e-5``)."""
    _sums(ds, reference, roi_for(ds.nav_shape) if roi is None else roi)


def check_pickle(ds: DataSet, reference: np.ndarray, in_memory: bool = False) -> None:
    """The dataset, and what a task receives of it, pickle; a file format's pickle is a
    description of the files (under half the data's size), not their data; the unpickled
    dataset has the same token and reads the same values."""
    blob = pickle.dumps(ds)
    if not in_memory:
        assert len(blob) < 0.5 * reference.nbytes, f"pickled dataset: {len(blob)} bytes"
    again = pickle.loads(blob)
    assert again.shape == ds.shape and again.dtype == ds.dtype
    assert dask.base.tokenize(again) == dask.base.tokenize(ds), "token changed by pickling"
    got = again.to_dask().compute(scheduler="sync")
    np.testing.assert_array_equal(got, native(reference), err_msg="unpickled")
    pickle.loads(pickle.dumps(ds.for_task()))


def check_distributed(ds: DataSet, reference: np.ndarray, client=None) -> None:
    """A UDF run (with an ROI) and ``to_dask().sum()`` on a `distributed` cluster of worker
    processes (`client`, or a one-worker ``LocalCluster`` made for the check), where every
    task and result is pickled, equal numpy's."""
    if client is None:
        from distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=1, threads_per_worker=2, dashboard_address=None) as cluster,
            Client(cluster) as own,
        ):
            return check_distributed(ds, reference, own)
    _sums(ds, reference, roi_for(ds.nav_shape, seed=2), scheduler=client)
    with dask.config.set(scheduler=client):
        total = ds.to_dask("float64").sum().compute()
    np.testing.assert_allclose(total, reference.astype("float64").sum(), rtol=1e-9)
    return None


@dataclass(frozen=True)
class BadInput:
    """One bad input to an opener and the error it must raise.

    Parameters
    ----------
    id
        A name for reports (``"truncated-header"``).
    make
        ``make(folder, target, keywords) -> (target, keywords)``: the bad call's path and
        keywords, made from a good scan written to `folder` (its path `target` and opener
        keywords `keywords`): a file cut short, a wrong keyword...
    error
        The exception type, or types (of `DOCUMENTED_ERRORS`).
    match
        A regular expression the message must match (``re.search``).
    """

    id: str
    make: Callable[[Any, Any, dict], tuple[Any, dict]]
    error: type[BaseException] | tuple[type[BaseException], ...]
    match: str


def _missing(folder, target, keywords):
    return Path(folder) / "no-such-scan", keywords


def _empty(folder, target, keywords):
    path = Path(folder) / ("empty" + Path(str(target)).suffix)
    path.write_bytes(b"")
    return path, keywords


#: the bad inputs every file format gets: a path that does not exist, an empty file with
#: the format's suffix
COMMON_BAD_INPUTS = (
    BadInput("missing-file", _missing, (FileNotFoundError, DataSetError), "no-such-scan"),
    BadInput("empty-file", _empty, DataSetError, "empty"),
)


def check_bad_input(
    opener: Callable[..., DataSet], folder, target, keywords: dict, cases: Sequence[BadInput]
) -> dict[str, str]:
    """Each case's call of `opener` raises its documented error with a message that matches;
    none segfaults, hangs or returns a dataset. Returns ``{case id: first line of the
    message}``."""

    seen = {}
    for case in cases:
        path, kwargs = case.make(folder, target, dict(keywords))
        try:
            opener(path, **kwargs)
        except DOCUMENTED_ERRORS as e:
            message = str(e)
            if not isinstance(e, case.error):
                raise AssertionError(
                    f"{case.id}: raised {type(e).__name__} ({message}), expected {case.error!r}"
                ) from e
            if not re.search(case.match, message):
                raise AssertionError(
                    f"{case.id}: the message {message!r} does not match {case.match!r}"
                ) from e
            seen[case.id] = message.splitlines()[0] if message else ""
        else:
            raise AssertionError(f"{case.id}: {opener.__name__}({path!r}) raised nothing")
    return seen
