"""Live plots of UDF results while a run goes on, with LiberTEM's plot interface.

``Context.run_udf(..., plots=True)`` (see :mod:`ltdask.compat`) makes one plot per 2-D
result buffer of each UDF and feeds it the partial results as partitions finish. A plot
class takes ``(dataset, udf, roi=None, channel=None, title=None, min_delta=..., udfresult=
None)`` and implements :meth:`Live2DPlot.display` and :meth:`Live2DPlot.update`; the channel
is a buffer name, a ``(name, function)`` pair, or a function of ``(buffers, damage)``.
`MPLLive2DPlot` draws with matplotlib (imported when a plot is made, never by ``import
ltdask``); `Dummy2DPlot` draws nothing (for scripts and tests without a screen).

Plots read a UDF's results as `ltdask.views.buffers.BufferView` objects (LiberTEM's
buffer interface over ltdask's xarray results); `prepare_plots` makes them for a run from
LiberTEM's forms of ``plots=``, `update_plots` feeds them each step. ``ltdask.live`` and
the compatibility layer's ``Context`` both run them.
"""

from __future__ import annotations

import time

import numpy as np

from ltdask.exceptions import warn
from ltdask.views.buffers import Step, initial_buffers


def plottable_channels(buffers: dict) -> list[str]:
    """The names of the result buffers whose data is 2-D once axes of size 1 are dropped."""
    return [name for name, buf in buffers.items() if np.asarray(buf.data).squeeze().ndim == 2]


class Live2DPlot:
    """A plot of one channel of one UDF's results, updated as partitions finish.

    Parameters
    ----------
    dataset
        The dataset the UDF runs on.
    udf
        The UDF instance given to the run.
    roi
        The run's region of interest.
    channel
        None (the first 2-D buffer), a buffer name, ``(name, function)`` (the function maps
        the buffer's data to a 2-D array) or ``function(buffers, damage) -> (data, damage)``.
    title
        By default the UDF's class name and the channel.
    min_delta
        Seconds between two updates at least (except the last one).
    udfresult
        The results before the run: ``buffers`` (a tuple with the UDF's dict of result
        buffers) and ``damage`` (a `ltdask.views.buffers.Step`, or LiberTEM's
        ``UDFResults`` with one UDF, ``ltdask.compat.UDFResults``); made from the UDF's
        buffers after ``preprocess`` if not given.
    """

    def __init__(
        self, dataset, udf, roi=None, channel=None, title=None, min_delta=0.0, udfresult=None
    ):
        if udfresult is None:
            nothing = np.zeros(tuple(dataset.nav_shape), dtype=bool)
            udfresult = Step(initial_buffers(dataset, [udf], roi), nothing)
        buffers = udfresult.buffers[0]
        eligible = plottable_channels(buffers)
        self._extract = None
        if channel is None:
            if not eligible:
                raise ValueError(f"No plottable 2D channel found for {type(udf).__name__}")
            channel = label = eligible[0]
        elif callable(channel):
            self._extract, label, channel = channel, channel.__name__, None
        elif isinstance(channel, (tuple, list)):
            name, func = channel
            if name not in buffers:
                raise ValueError(f"channel {name} not found, have: {list(buffers)}")
            nav = buffers[name].kind == "nav"

            def extract(results, damage, name=name, func=func, nav=nav):
                return func(results[name].data), (damage if nav else True)

            self._extract, label, channel = extract, f"{func.__name__}({name})", name
        else:
            if channel not in eligible:
                raise ValueError(
                    f"channel {channel} not found or not plottable, have: {eligible!r}"
                )
            label = channel
        self.channel = channel
        self.title = f"{type(udf).__name__}: {label}" if title is None else title
        self.udf = udf
        self.min_delta = min_delta
        self.last_update = 0.0
        self.data, _ = self.extract(buffers, udfresult.damage)

    def get_udf(self):
        """The UDF instance this plot belongs to."""
        return self.udf

    def extract(self, udf_results: dict, damage):
        """``(data, damage)`` to plot from one UDF's (partial) results."""
        if self._extract is not None:
            return self._extract(udf_results, damage)
        buffer = udf_results[self.channel]
        return buffer.masked_data.squeeze(), np.asarray(buffer.valid_mask).squeeze()

    def new_data(self, udf_results: dict, damage, force: bool = False):
        """Take the results of a step; updates the plot unless the last update is more
        recent than ``min_delta`` (or `force`)."""
        now = time.monotonic()
        if not force and now - self.last_update < self.min_delta:
            return
        self.data, damage = self.extract(udf_results, damage)
        finite = np.isfinite(np.ma.filled(np.asarray(self.data, dtype=float), np.nan))
        if hasattr(damage, "shape"):
            damage = np.asarray(damage)
            extra = tuple(range(damage.ndim, finite.ndim))
            if extra:  # e.g. RGB channels
                finite = finite.all(axis=extra)
        self.update(damage & finite, force=force)
        self.last_update = time.monotonic()

    def update(self, damage, force=False):
        """Redraw from ``self.data``; `damage` marks its finite, processed positions."""
        raise NotImplementedError

    def display(self):
        """Show the plot."""
        raise NotImplementedError


class Dummy2DPlot(Live2DPlot):
    """A plot that shows nothing: for batch runs and tests."""

    def update(self, damage, force=False):
        pass

    def display(self):
        pass


class MPLLive2DPlot(Live2DPlot):
    """A live matplotlib image of the channel, its colour range from the processed part.

    In a Jupyter notebook the figure shows when the run starts and changes as partitions
    finish: with ipympl (``%matplotlib widget``) as a widget, with the inline backend by
    redrawing its picture. Keyword arguments beyond `Live2DPlot`'s go to ``imshow``.
    """

    def __init__(
        self,
        dataset,
        udf,
        roi=None,
        channel=None,
        title=None,
        min_delta=0.5,
        udfresult=None,
        **kwargs,
    ):
        super().__init__(dataset, udf, roi, channel, title, min_delta, udfresult)
        self.kwargs = kwargs
        self.fig = self.axes = self.im_obj = None
        self._handle = None  # a notebook's display of the figure, with the inline backend

    def display(self):
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError(
                "live plots need matplotlib: pip install matplotlib (or pass "
                "plot_class=ltdask.viz.Dummy2DPlot)"
            ) from None
        self.fig, self.axes = plt.subplots()
        self.im_obj = self.axes.imshow(np.ma.filled(self.data, np.nan), **self.kwargs)
        self.axes.set_title(self.title)
        self.fig.colorbar(self.im_obj, ax=self.axes)
        self._handle = show_now(self.fig)

    def update(self, damage, force=False):
        if self.im_obj is None:
            return
        data = np.ma.filled(np.asarray(self.data, dtype=float), np.nan)
        self.im_obj.set_data(data)
        shown = data[damage] if np.ndim(damage) else data[np.isfinite(data)]
        if shown.size:
            low, high = float(np.nanmin(shown)), float(np.nanmax(shown))
            self.im_obj.set_clim(low, high if high > low else np.nextafter(low, np.inf))
        if self._handle is not None:
            self._handle.update(self.fig)
        else:
            self.fig.canvas.draw_idle()
            self.fig.canvas.flush_events()


def show_now(fig):
    """Show `fig` now, not when the notebook cell ends; returns the display handle to
    update where it is a static picture (the inline backend), else None (a widget, a window
    or no screen: the canvas redraws itself)."""
    import sys

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    if shell is None or not hasattr(shell, "kernel"):  # not in a Jupyter kernel
        return None
    import matplotlib
    from IPython.display import display

    backend = matplotlib.get_backend().lower()
    if "ipympl" in backend or "widget" in backend:
        display(fig.canvas)
        return None
    if "inline" in backend:
        import matplotlib.pyplot as plt

        handle = display(fig, display_id=True)
        plt.close(fig)  # shown through the handle, not once more when the cell ends
        return handle
    return None


def prepare_plots(plot_class, udfs, dataset, roi_flat, plots, before=None, **plot_kwargs) -> list:
    """The live plots of a run, from LiberTEM's three forms of ``plots``: True (a plot of
    `plot_class` per 2-D result of each UDF), channels per UDF (buffer names, ``(name,
    function)`` pairs or functions; see `Live2DPlot`; UDFs after the last list are not
    plotted), or plot objects (shown by their maker). The plots made here are shown
    (``display()``); `plot_kwargs` go to them. `before`: a function giving the results before
    the run, with ``buffers`` (one dict per UDF) and ``damage`` (as a `Step` has them);
    by default the UDFs' buffers after ``preprocess``."""
    if plots is True:
        channels = None
    elif isinstance(plots, (list, tuple)) and all(
        isinstance(p, (list, tuple))
        and all(isinstance(c, (str, list, tuple)) or callable(c) for c in p)
        for p in plots
    ):
        channels = plots
    else:
        return list(plots)
    if channels is not None and len(channels) > len(udfs):
        raise ValueError(
            f"plots: {len(channels)} lists of channels for {len(udfs)} UDFs; expected one list "
            "per UDF, in the order of the UDFs (UDFs after the last list are not plotted)"
        )
    if before is None:
        nothing = np.zeros(tuple(dataset.nav_shape), dtype=bool)
        start = Step(initial_buffers(dataset, udfs, roi_flat), nothing)
    else:
        start = before()
    if channels is None:
        channels = [plottable_channels(b) for b in start.buffers]
        for u, (udf, chans) in enumerate(zip(udfs, channels, strict=True)):
            if not chans:
                warn(
                    f"No plottable channels found for UDF #{u}: {type(udf).__name__}, "
                    "not plotting.",
                    UserWarning,
                )
    out = []
    # as LiberTEM: UDFs after the last list of channels are not plotted
    for u, (udf, chans) in enumerate(zip(udfs[: len(channels)], channels, strict=True)):
        for channel in chans:
            plot = plot_class(
                dataset,
                udf=udf,
                roi=roi_flat,
                channel=channel,
                udfresult=Step((start.buffers[u],), start.damage),
                **plot_kwargs,
            )
            plot.display()
            out.append(plot)
    return out


def update_plots(plots, udfs, buffers, damage, force: bool) -> None:
    """Feed each of `plots` its UDF's `buffers` (one dict per UDF, in the order of `udfs`)
    and `damage` (nav-shaped: the positions processed so far)."""
    for plot in plots:
        index = next(i for i, u in enumerate(udfs) if u is plot.get_udf())
        plot.new_data(buffers[index], damage, force=force)
