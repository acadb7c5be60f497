"""Writing UDF results (`to_zarr`) and whole datasets (`write_dataset`) to Zarr stores."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ltdask._version import __version__
from ltdask.runtime.progress import compute
from ltdask.store._chunks import check_alignment, zarr_aligned
from ltdask.store._convert import checked_astype, needs_check
from ltdask.store._replace import atomic_store


def _prepared(result):
    """A copy of a results Dataset whose dask variables (and coordinates) sit on regular
    grids, and the encoding that gives the store the same chunks."""
    import dask.array as da

    out = result.copy(deep=False)
    encoding = {}
    for name, var in out.variables.items():
        if isinstance(var.data, da.Array):
            arr, chunks = zarr_aligned(
                var.data,
                f"result variable {name!r}",
                "UDF results take their chunks from the dataset's partitions: a partition "
                "size (ltdask.partition-bytes) that splits the scan into equal parts gives "
                "chunks that need no rechunk",
            )
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


def to_zarr(results, store, mode: str = "w-", progress: bool | None = None):
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
    with atomic_store(store, mode) as target:
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
        if None not in named:
            _point_to_groups(target, list(named))
        _consolidate(target)
    return store


def _point_to_groups(store, groups: list[str]) -> None:
    """Root attributes naming the groups: ``xarray.open_zarr(store)`` of a store of several
    results shows them (its root holds no variables)."""
    import zarr

    root = zarr.open_group(store, mode="a")
    root.attrs.update(
        {
            "ltdask_groups": groups,
            "ltdask_note": (
                "one group per UDF: xarray.open_zarr(store, group=NAME) reads one, "
                "xarray.open_datatree(store, engine='zarr') all of them"
            ),
            "ltdask_version": __version__,
        }
    )


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
    progress: bool | None = None,
    corrections=None,
    clip: bool = False,
):
    """Convert the scan to a Zarr (v3) array, in parallel on the active scheduler
    (``ds.to_zarr(store, ...)`` is this function as a method of every dataset).

    Shards hold one partition each (the chunks of :meth:`DataSet.to_dask`), split into
    chunks of whole frames of about 1 MiB, compressed with blosc/zstd. A path is written
    under a temporary name and renamed when complete; an existing store is replaced only
    with ``mode="w"``. Read it back with :func:`ltdask.open_zarr`. With `corrections` (a
    `ltdask.CorrectionSet`), the corrected frames are written (as floats, unless `dtype`
    asks for another).

    A `dtype` that cannot hold every value of the data (uint8 for uint16 data, an integer
    for floats, float32 for float64) is checked as the chunks are written: a value outside
    its range (NaN and infinities, for integers) raises `ltdask.ConversionError` and a path
    is left as it was (the partial store is removed; a zarr store object given as `store`
    is written in place and keeps what was written). With ``clip=True`` such values are
    clipped into the range instead (NaN still raises), and their number is recorded in the
    array's attributes, ``attrs["ltdask"]["clipped_values"]``. Floats become integers
    without their fractions, as ``numpy.astype`` makes them. The dataset's calibrations
    are kept in ``attrs["ltdask"]["calibration"]``, where :func:`ltdask.open_zarr` finds
    them.

    Examples
    --------
    >>> import numpy as np, ltdask, tempfile, os, zarr
    >>> data = np.arange(3 * 4 * 5 * 6, dtype=np.uint16).reshape(3, 4, 5, 6)
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.zarr")
    >>> _ = ltdask.from_array(data).to_zarr(path)
    >>> bool((zarr.open_array(path)[...] == data).all())
    True
    >>> _ = ltdask.from_array(data).to_zarr(path, dtype="uint8", mode="w", clip=True)
    >>> zarr.open_array(path).attrs["ltdask"]["clipped_values"]
    104
    """
    import dask.array as da
    import zarr
    from zarr.codecs import BloscCodec

    target = None if dtype is None else dataset.resolve_dtype(dtype)
    # a conversion that can change values is made below, chunk by chunk, checked
    read = None if target is not None and needs_check(dataset.dtype, target) else target
    arr = dataset.to_dask(dtype=read, chunks=chunks, corrections=corrections)
    clipped = None
    if target is not None and arr.dtype != target:
        if needs_check(arr.dtype, target):
            arr, clipped = checked_astype(
                arr, target, clip, str(dataset.path), len(dataset.nav_shape)
            )
        else:
            arr = arr.astype(target)
    arr, shard = zarr_aligned(
        arr,
        f"the dataset {dataset.path}",
        "pass DataSet.to_zarr chunks of one size along each dim (the last one may be "
        "smaller), e.g. chunks={target}",
    )
    frame_bytes = math.prod(dataset.sig_shape) * arr.dtype.itemsize
    # inner chunks: whole frames, about 1 MiB, inside shards of one dask chunk each
    sizes = list(shard)
    nav_dims = len(dataset.nav_shape)
    budget = max(1, 2**20 // max(1, frame_bytes))
    for d in range(nav_dims - 1, -1, -1):
        sizes[d] = max(1, min(shard[d], budget))
        budget = max(1, budget // max(1, sizes[d]))
        for e in range(d):
            sizes[e] = 1
        if sizes[d] < shard[d]:
            break
    inner = tuple(i if shard[d] % i == 0 else _divisor(shard[d], i) for d, i in enumerate(sizes))
    if compressors == "auto":
        compressors = BloscCodec(
            cname="zstd", clevel=3, shuffle="bitshuffle" if arr.dtype.itemsize == 1 else "shuffle"
        )
    attrs: dict[str, Any] = {
        "ltdask": {
            "sig_dims": len(dataset.sig_shape),
            "source": str(dataset.path),
            "version": __version__,
        }
    }
    calibration = stored_calibration(dataset)
    if calibration:
        attrs["ltdask"]["calibration"] = calibration
    with atomic_store(store, mode) as target:
        zarr_arr: Any = zarr.create_array(
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
        writes = [da.store(arr, zarr_arr, lock=False, compute=False)]
        if clipped is not None:
            writes.append(clipped)  # counted in the same graph: each chunk is read once
        done = compute(*writes, progress=progress)
        if clipped is not None:
            attrs["ltdask"]["clipped_values"] = int(done[1])
            zarr_arr.attrs.update(attrs)
    return store


def stored_calibration(dataset) -> dict:
    """The calibrations of `dataset` as the Zarr array's ``attrs["ltdask"]["calibration"]``
    keeps them (``{"nav": [{"scale", "origin", "units"}, ...], "sig": [...]}``; a kind
    without a calibrated dim is left out), for `ltdask.open_zarr` to read back."""
    out = {}
    for kind, axes in (("nav", dataset.nav_calibration), ("sig", dataset.sig_calibration)):
        if any(a.calibrated for a in axes):
            out[kind] = [{"scale": a.scale, "origin": a.origin, "units": a.units} for a in axes]
    return out


def _divisor(n: int, at_most: int) -> int:
    """The largest divisor of `n` not above `at_most` (shards must hold whole chunks)."""
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0:
            return d
    return 1
