"""A live view of a run: a figure per 2-D result, redrawn from the partial results as
partitions finish (``ltdask.live``), with the plot classes of :mod:`ltdask.views.viz`."""

from __future__ import annotations

import numpy as np

from ltdask.io.dataset import DataSet
from ltdask.udf.api import compute_datasets, iter_steps
from ltdask.udf.interface import UDFBase
from ltdask.udf.roi import normalize_roi
from ltdask.views.buffers import buffer_views

__all__ = ["live"]


def live(
    dataset: DataSet,
    udfs: list[UDFBase] | UDFBase,
    roi=None,
    *,
    plots=True,
    plot_class=None,
    min_delta: float = 0.5,
    corrections=None,
    backends=None,
) -> list:
    """Run `udfs` together on `dataset` (as :func:`ltdask.compute`) and watch them: a
    matplotlib figure per 2-D result is redrawn as partitions finish.

    Positions not processed yet show blank (NaN); the colour range follows the processed
    part. The run takes at least ``ltdask.iter-updates`` steps (see :func:`ltdask.iter`). In
    Jupyter the figures update in place (ipympl's ``%matplotlib widget`` or the inline
    backend); without a screen (matplotlib's Agg backend) they are drawn all the same.

    Parameters
    ----------
    dataset, udfs, roi, corrections, backends
        As for :func:`ltdask.compute`.
    plots
        True (every 2-D result of every UDF), a list per UDF of channels (buffer names,
        ``(name, function)`` pairs or functions, see `ltdask.viz.Live2DPlot`) or a list
        of plot objects, as ``Context.run_udf(plots=...)`` takes them.
    plot_class
        The class of the plots made here (default `ltdask.viz.MPLLive2DPlot`; the plots are
        its ``fig``, ``axes`` and ``im_obj``).
    min_delta
        Seconds between two redraws of a figure at least (the last one is always drawn).

    Returns
    -------
    list of xarray.Dataset
        One per UDF, computed (the results of the last step).

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> from ltdask.udf import SumSigUDF
    >>> from ltdask.views.viz import Dummy2DPlot  # draws nothing: matplotlib's is the default
    >>> ds = ltdask.from_array(np.ones((8, 8, 4, 4), dtype=np.float32))
    >>> (res,) = ltdask.live(ds, [SumSigUDF()], plot_class=Dummy2DPlot)
    >>> float(res["intensity"].sum())
    1024.0
    """
    # here, not with the module: ``ltdask.live`` is imported by ``import ltdask``, and the
    # plots are not (see `ltdask.common._lazy`)
    from ltdask.views.viz import MPLLive2DPlot, prepare_plots, update_plots

    udfs = [udfs] if isinstance(udfs, UDFBase) else list(udfs)
    roi_flat = normalize_roi(roi, dataset)
    if plot_class is None:
        plot_class = MPLLive2DPlot
    shown = prepare_plots(plot_class, udfs, dataset, roi_flat, plots, min_delta=min_delta)
    results: list = []
    step = None
    nav_shape = tuple(dataset.nav_shape)
    for make, done in iter_steps(
        dataset, udfs, roi_flat, corrections=corrections, backends=backends
    ):
        results = dataset.settle(compute_datasets(make()))
        buffers = tuple(
            buffer_views(r, u, dataset, roi_flat) for r, u in zip(results, udfs, strict=True)
        )
        # the positions processed (`done`, flat) within the ROI
        damage = (done if roi_flat is None else done & roi_flat).reshape(nav_shape)
        step = (buffers, np.asarray(damage))
        update_plots(shown, udfs, *step, force=False)
    if step is not None:
        update_plots(shown, udfs, *step, force=True)
    return results
