"""``ltdask.live``: headless (matplotlib's Agg), the figures' images change as partitions
finish and end as the numpy result."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

import ltdask
from ltdask.udf import SumSigUDF, SumUDF
from ltdask.views.viz import MPLLive2DPlot

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NAV = (16, 20)
SIG = (8, 8)


class Recording(MPLLive2DPlot):
    """Keeps a copy of the figure's image after each update."""

    def update(self, damage, force=False):
        super().update(damage, force)
        self.shown.append(np.array(self.im_obj.get_array().filled(np.nan), dtype=float))

    def display(self):
        self.shown: list = []
        super().display()
        made.append(self)


made: list[Recording] = []


@pytest.fixture
def scan(tmp_path):
    data = np.random.default_rng(2).random(NAV + SIG).astype(np.float32)
    data.tofile(tmp_path / "scan.raw")
    made.clear()
    yield ltdask.open_raw(tmp_path / "scan.raw", nav_shape=NAV, sig_shape=SIG, dtype="f4"), data
    plt.close("all")


def test_figures_follow_the_run(scan):
    ds, data = scan
    before = set(plt.get_fignums())
    frames, total = ltdask.live(ds, [SumSigUDF(), SumUDF()], plot_class=Recording, min_delta=0)
    # a figure per 2-D result: the per-frame sums (nav) and the sum frame (sig)
    assert len(set(plt.get_fignums()) - before) == 2
    nav_plot, sig_plot = made
    assert nav_plot.axes.get_title() == "SumSigUDF: intensity"
    expected = data.sum(axis=(2, 3))
    shown = nav_plot.shown
    assert len(shown) >= 10  # one per step, and the last one again
    undone = [int(np.isnan(s).sum()) for s in shown]
    assert undone[0] > 0 and undone[-1] == 0
    assert all(a > b for a, b in zip(undone[:-2], undone[1:-1], strict=True))  # changes each step
    for image in shown:  # where drawn, the partial result is the numpy one
        done = ~np.isnan(image)
        np.testing.assert_allclose(image[done], expected[done], rtol=1e-5)
    np.testing.assert_allclose(nav_plot.im_obj.get_array(), expected, rtol=1e-5)
    np.testing.assert_allclose(sig_plot.im_obj.get_array(), data.sum(axis=(0, 1)), rtol=1e-4)
    # the colour range is that of the final image
    assert nav_plot.im_obj.get_clim() == pytest.approx((expected.min(), expected.max()))
    # the results are returned, as compute returns them
    np.testing.assert_allclose(frames["intensity"].values, expected, rtol=1e-5)
    np.testing.assert_allclose(total["intensity"].values, data.sum(axis=(0, 1)), rtol=1e-4)


def test_live_with_roi_and_channels(scan):
    ds, data = scan
    roi = np.zeros(NAV, bool)
    roi[2:9, 3:15] = True
    (res,) = ltdask.live(
        ds, SumSigUDF(), roi=roi, plots=[[("intensity", np.sqrt)]], plot_class=Recording
    )
    (plot,) = made
    assert plot.axes.get_title() == "SumSigUDF: sqrt(intensity)"
    expected = np.where(roi, np.sqrt(data.sum(axis=(2, 3))), np.nan)
    np.testing.assert_allclose(plot.shown[-1], expected, rtol=1e-5)
    np.testing.assert_allclose(res["intensity"].values ** 0.5, expected, rtol=1e-5)


def test_default_plot_class_draws_with_matplotlib(scan):
    ds, data = scan
    before = set(plt.get_fignums())
    ltdask.live(ds, [SumSigUDF()])
    (new,) = set(plt.get_fignums()) - before
    image = plt.figure(new).axes[0].images[0].get_array()
    np.testing.assert_allclose(image, data.sum(axis=(2, 3)), rtol=1e-5)
