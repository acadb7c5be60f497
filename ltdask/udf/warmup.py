"""`warmup`: compile the kernels of the shipped analyses and readers into numba's cache by
running them over tiny scans (the mechanism, counting and timing what compiles, is
:func:`ltdask.runtime.kernel_cache.warm_up`)."""

from __future__ import annotations

import dask.config
import numpy as np

from ltdask.corrections import CorrectionSet
from ltdask.runtime.kernel_cache import warm_up
from ltdask.udf.api import compute
from ltdask.udf.builtin import ApplyMasksUDF, CoMUDF, StdDevUDF, SumSigUDF, SumUDF

__all__ = ["WARMUP_DTYPES", "warmup"]

#: pixel dtypes that `warmup` compiles for by default (detectors' counts, and floats)
WARMUP_DTYPES = ("uint8", "uint16", "uint32", "float32")


def warmup(dtypes=WARMUP_DTYPES, verbose: bool = False) -> dict:
    """Compile ltdask's kernels into numba's cache, so that later processes start warm.

    Writes a tiny scan of each dtype to a temporary folder and runs the shipped analyses
    over it (sums, standard deviation, masks, centre of mass; alone and in one pass; with
    and without a ROI and detector corrections) on the synchronous scheduler in this
    process. Kernels already in the cache are loaded, not compiled again, so a second call
    takes about a second.

    On a cluster whose workers share no cache folder, run it on every worker:
    ``client.run(ltdask.warmup)``.

    Parameters
    ----------
    dtypes
        Pixel dtypes to compile for.
    verbose
        Print a line per dtype to stderr.

    Returns
    -------
    dict
        ``compiled`` (kernel signatures compiled rather than loaded), ``seconds``,
        ``cache`` (where numba keeps them, see
        :func:`ltdask.runtime.kernel_cache.cache_location`) and ``dtypes``.

    Examples
    --------
    >>> import ltdask
    >>> report = ltdask.warmup(dtypes=["uint16"])
    >>> sorted(report)
    ['cache', 'compiled', 'dtypes', 'seconds']
    """
    return warm_up(_run_analyses, dtypes, verbose)


def _run_analyses(path: str, dtype) -> None:
    """The shipped analyses over a tiny raw scan of `dtype` at `path`, as ``ltdask run``
    and the API run them."""
    # (here: ``import ltdask`` imports neither the masks nor the raw reader)
    from ltdask.io import open_raw
    from ltdask.masks import circular

    nav, sig = (4, 6), (16, 16)
    rng = np.random.default_rng(0)
    (rng.random((*nav, *sig)) * 100).astype(dtype).tofile(path)
    ds = open_raw(path, nav_shape=nav, sig_shape=sig, dtype=dtype)
    roi = np.zeros(nav, dtype=bool)
    roi[1:3, ::2] = True  # frames apart: read through the read ranges, not as views
    excluded = np.zeros(sig, dtype=bool)
    excluded[3, 4] = True
    corrections = CorrectionSet(dark=np.ones(sig), gain=np.full(sig, 2.0), excluded_pixels=excluded)
    # (without excluded pixels, Sum, SumSig and StdDev fold a dark frame into their results)
    folded = CorrectionSet(dark=np.ones(sig))

    def udfs():
        return [
            SumUDF(),
            SumSigUDF(),
            StdDevUDF(),
            ApplyMasksUDF([lambda: circular(8, 8, 16, 16, 4)]),
            CoMUDF.with_params(cy=8, cx=8, r=6),
        ]

    # on this process's own threads even inside a distributed worker (``client.run``); in
    # several partitions of several tiles, which read through the read ranges as large
    # scans do, rather than as views of the file
    settings = {
        "scheduler": "synchronous",
        "ltdask.partition-bytes": 8 * 1024,
        "ltdask.min-partitions": 2,
        "ltdask.tile-bytes": 2 * 1024,
    }
    with dask.config.set(settings):
        for udf in udfs():
            for kwargs in ({}, {"roi": roi}, {"corrections": corrections}, {"corrections": folded}):
                compute(ds, [udf], **kwargs)
        for kwargs in ({}, {"roi": roi}, {"corrections": corrections}):
            compute(ds, udfs(), **kwargs)
        ds.to_dask().sum().compute()
