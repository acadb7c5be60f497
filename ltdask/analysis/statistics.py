"""Statistics analyses of LiberTEM's GUI: the standard deviation of the frames
(`SDAnalysis`, on `StdDevUDF`) and the sum of each frame (`SumSigAnalysis`, on
`SumSigUDF`)."""

from __future__ import annotations

from ltdask.analysis._viz import scaled_image
from ltdask.analysis.base import Analysis
from ltdask.analysis.results import AnalysisResult, AnalysisResultSet
from ltdask.udf.builtin.stddev import StdDevUDF
from ltdask.udf.builtin.sums import SumSigUDF

__all__ = ["SDAnalysis", "SumSigAnalysis"]


class SDAnalysis(Analysis):
    """LiberTEM's ``SD_FRAMES``: the standard deviation over the frames (in the GUI ROI
    parameter ``roi``, where given) of each signal pixel, `StdDevUDF`'s ``std``:
    ``intensity`` (log-scaled picture) and ``intensity_lin``, sig-shaped.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.analysis import SDAnalysis
    >>> ctx = Context()
    >>> data = np.zeros((2, 2, 4, 4), dtype=np.float32)
    >>> data[0] = 2  # half the frames 2, half 0: each pixel's standard deviation is 1
    >>> ds = ctx.load("memory", data=data, sig_dims=2)
    >>> result = ctx.run(SDAnalysis(dataset=ds, parameters={}))
    >>> result.keys(), result.intensity_lin.raw_data[0].tolist()
    (['intensity', 'intensity_lin'], [1.0, 1.0, 1.0, 1.0])
    """

    def get_udf(self) -> StdDevUDF:
        return StdDevUDF()

    def get_roi(self):
        return self._gui_roi()

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        std = udf_results["std"].data
        return AnalysisResultSet(
            [
                AnalysisResult(
                    std,
                    lambda: scaled_image(std, logarithmic=True, damage=True),
                    "intensity [log]",
                    "Standard deviation of frames log-scaled",
                    "intensity",
                ),
                AnalysisResult(
                    std,
                    lambda: scaled_image(std, logarithmic=False, damage=True),
                    "intensity [lin]",
                    "Standard deviation of frames lin-scaled",
                    "intensity_lin",
                ),
            ]
        )


class SumSigAnalysis(Analysis):
    """LiberTEM's ``SUM_SIG``: the sum over the signal of each frame, `SumSigUDF`'s
    ``intensity`` (nav-shaped; NaN outside a ROI).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.analysis import SumSigAnalysis
    >>> ctx = Context()
    >>> data = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    >>> ds = ctx.load("memory", data=data, sig_dims=2)
    >>> ctx.run(SumSigAnalysis(dataset=ds, parameters={})).intensity.raw_data.tolist()
    [[6.0, 22.0, 38.0], [54.0, 70.0, 86.0]]
    """

    def get_udf(self) -> SumSigUDF:
        return SumSigUDF()

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        sums = udf_results["intensity"].data.reshape(self.nav_shape)
        return AnalysisResultSet(
            [
                AnalysisResult(
                    sums,
                    lambda: scaled_image(sums, damage=damage),
                    "intensity",
                    "result from frame integration",
                    "intensity",
                )
            ]
        )
