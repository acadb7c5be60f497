"""Live plots with LiberTEM's interface: ``Context.run_udf(..., plots=...)``, plot classes,
``Context.display``."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import ltdask
from ltdask import UDF
from ltdask.compat import Context
from ltdask.udf import SumSigUDF, SumUDF
from ltdask.views.viz import Dummy2DPlot, Live2DPlot, MPLLive2DPlot, plottable_channels


class Recorder(Dummy2DPlot):
    """Keeps what each update drew."""

    updates: list = []

    def update(self, damage, force=False):
        data = np.ma.filled(np.asarray(self.data, dtype=float), np.nan)
        Recorder.updates.append((self.title, data.copy(), np.asarray(damage).copy(), force))


@pytest.fixture
def scan(tmp_path):
    data = np.random.default_rng(0).random((6, 5, 4, 3)).astype(np.float32)
    data.tofile(tmp_path / "scan.raw")
    ds = ltdask.open_raw(tmp_path / "scan.raw", nav_shape=(6, 5), sig_shape=(4, 3), dtype="f4")
    Recorder.updates = []
    with dask.config.set({"ltdask.partition-bytes": 5 * 4 * 4 * 2, "ltdask.min-partitions": 1}):
        yield data, ds


def test_plots_true_follows_the_run(scan):
    data, ds = scan
    ctx = Context.make_with("inline", plot_class=Recorder)
    frames, total = ctx.run_udf(dataset=ds, udf=[SumSigUDF(), SumUDF()], plots=True)
    titles = {t for t, *_ in Recorder.updates}
    assert titles == {"SumSigUDF: intensity", "SumUDF: intensity"}
    nav = [u for u in Recorder.updates if u[0] == "SumSigUDF: intensity"]
    assert len(nav) > 2  # one per step, and the final forced one
    assert nav[-1][3] is True and not any(force for *_, force in nav[:-1])
    # damage grows; the drawn data is the partial result where done
    done = [d.sum() for _, _, d, _ in nav]
    assert done == sorted(done) and done[-1] == 30
    np.testing.assert_allclose(nav[-1][1], data.sum(axis=(2, 3)), rtol=1e-5)
    _, first, first_damage, _ = nav[0]
    np.testing.assert_allclose(first[first_damage], data.sum(axis=(2, 3))[first_damage], rtol=1e-5)
    np.testing.assert_allclose(frames["intensity"].data, data.sum(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(total["intensity"].data, data.sum(axis=(0, 1)), rtol=1e-5)


def test_plot_channels_and_objects(scan):
    data, ds = scan
    ctx = Context.make_with("inline", plot_class=Recorder)
    udf = SumSigUDF()
    ctx.run_udf(dataset=ds, udf=udf, plots=[[("intensity", np.log1p)]])
    assert Recorder.updates[-1][0] == "SumSigUDF: log1p(intensity)"
    np.testing.assert_allclose(Recorder.updates[-1][1], np.log1p(data.sum(axis=(2, 3))), 1e-5)

    def doubled(results, damage):
        return 2 * results["intensity"].data, damage

    Recorder.updates = []
    ctx.run_udf(dataset=ds, udf=udf, plots=[[doubled]])
    np.testing.assert_allclose(Recorder.updates[-1][1], 2 * data.sum(axis=(2, 3)), 1e-5)

    Recorder.updates = []
    plot = Recorder(ds, udf, channel="intensity", title="mine")
    steps = list(ctx.run_udf_iter(dataset=ds, udf=udf, plots=[plot]))
    assert [t for t, *_ in Recorder.updates] == ["mine"] * (len(steps) + 1)


def test_bad_channels(scan):
    _, ds = scan
    with pytest.raises(ValueError, match=r"channel nope not found or not plottable"):
        Recorder(ds, SumSigUDF(), channel="nope")

    class Scalar(UDF):
        def get_result_buffers(self):
            return {"n": self.buffer(kind="single")}

        def process_frame(self, frame):
            self.results.n[:] += 1

        def merge(self, dest, src):
            dest.n[:] += src.n

    with pytest.raises(ValueError, match="No plottable 2D channel found for Scalar"):
        Recorder(ds, Scalar())
    with pytest.warns(UserWarning, match=r"No plottable channels found for UDF #0: Scalar"):
        Context.make_with("inline", plot_class=Recorder).run_udf(
            dataset=ds, udf=Scalar(), plots=True
        )


def test_matplotlib_plot(scan):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, ds = scan
    ctx = Context.make_with("inline")
    assert ctx.plot_class is MPLLive2DPlot
    udf = SumSigUDF()
    plot = MPLLive2DPlot(ds, udf, min_delta=0)
    plot.display()  # plot objects given to a run are shown by their maker (as LiberTEM)
    ctx.run_udf(dataset=ds, udf=udf, plots=[plot])
    shown = plot.im_obj.get_array()
    np.testing.assert_allclose(shown, data.sum(axis=(2, 3)), rtol=1e-5)
    low, high = plot.im_obj.get_clim()
    assert low == pytest.approx(data.sum(axis=(2, 3)).min(), rel=1e-5)
    assert high == pytest.approx(data.sum(axis=(2, 3)).max(), rel=1e-5)
    assert plot.axes.get_title() == "SumSigUDF: intensity"
    plt.close("all")


def test_plots_true_draws_with_matplotlib(scan):
    """LiberTEM's ``run_udf(..., plots=True)`` with the default class: a figure per 2-D
    result, made when the run starts, showing the final results when it ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data, ds = scan
    before = set(plt.get_fignums())
    ctx = Context.make_with("inline")
    frames, total = ctx.run_udf(dataset=ds, udf=[SumSigUDF(), SumUDF()], plots=True)
    figures = [plt.figure(n) for n in sorted(set(plt.get_fignums()) - before)]
    shown = {f.axes[0].get_title(): f.axes[0].images[0].get_array() for f in figures}
    assert set(shown) == {"SumSigUDF: intensity", "SumUDF: intensity"}
    np.testing.assert_allclose(shown["SumSigUDF: intensity"], data.sum(axis=(2, 3)), rtol=1e-5)
    np.testing.assert_allclose(shown["SumUDF: intensity"], data.sum(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(frames["intensity"].data, data.sum(axis=(2, 3)), rtol=1e-5)
    for f in figures:
        plt.close(f)


def test_display_lists_the_buffers(scan):
    _, ds = scan
    info = Context.make_with("inline").display(ds, SumSigUDF())
    assert info.rows() == [("intensity", "nav", (), (30,), np.dtype("float32"))]
    assert "<td>intensity</td><td>nav</td>" in info._repr_html_()
    assert "intensity: kind=nav" in repr(info)


def test_plottable_channels():
    class B:
        def __init__(self, shape):
            self.data = np.zeros(shape)

    buffers = {"a": B((4, 5)), "b": B((4, 5, 1)), "c": B((3,)), "d": B((2, 3, 4))}
    assert plottable_channels(buffers) == ["a", "b"]
    assert issubclass(MPLLive2DPlot, Live2DPlot)
