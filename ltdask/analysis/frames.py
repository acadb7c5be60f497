"""Frame analyses: the sum of all frames (`SumUDF`) and one picked frame (`PickUDF`)."""

from __future__ import annotations

import numpy as np

from ltdask.analysis._viz import scaled_image
from ltdask.analysis.base import Analysis, complex_results
from ltdask.analysis.results import AnalysisResult, PickResultSet, SumResultSet
from ltdask.udf.builtin.pick import PickUDF
from ltdask.udf.builtin.sums import SumUDF

__all__ = ["PickFrameAnalysis", "SumAnalysis"]


def _frame_results(frame: np.ndarray, title: str, desc: str, complex_desc: str, cls):
    """LiberTEM's results for one sig-shaped image: ``intensity`` with a log picture and
    ``intensity_lin`` (complex: magnitude, real, imaginary, angle, complex)."""
    if frame.dtype.kind == "c":
        return cls(
            complex_results(frame, "intensity", title, complex_desc, True, default_lin=False)
        )
    return cls(
        [
            AnalysisResult(
                frame,
                lambda: scaled_image(frame, logarithmic=True, damage=True),
                f"{title} [log]",
                f"{desc} log-scaled",
                "intensity",
            ),
            AnalysisResult(
                frame,
                lambda: scaled_image(frame, logarithmic=False, damage=True),
                f"{title} [lin]",
                f"{desc} lin-scaled",
                "intensity_lin",
            ),
        ]
    )


class SumAnalysis(Analysis):
    """The sum of all frames (in the ROI), in the data's dtype when it is floating point
    or complex, otherwise float32.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.uint16), sig_dims=2)
    >>> result = ctx.run(ctx.create_sum_analysis(dataset=ds))
    >>> result.intensity_lin.raw_data.dtype, result.intensity_lin.raw_data[0, 0].item()
    (dtype('float32'), 6.0)
    """

    def get_udf(self) -> SumUDF:
        dtype = np.dtype(self.dataset.dtype)
        return SumUDF(dtype=dtype if dtype.kind in "fc" else np.dtype("float32"))

    def get_roi(self):
        return self._gui_roi()

    def get_udf_results(self, udf_results, roi, damage) -> SumResultSet:
        data = udf_results["intensity"].data
        return _frame_results(data, "intensity", "sum of frames", "sum of all frames", SumResultSet)


class PickFrameAnalysis(Analysis):
    """The frame at nav position ``(z, y, x)`` (as many coordinates as nav axes; 1 to 3),
    in the data's dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.arange(2 * 3 * 8 * 8.0).reshape(2, 3, 8, 8), sig_dims=2)
    >>> analysis = ctx.create_pick_analysis(dataset=ds, x=2, y=1)
    >>> analysis.get_roi().tolist()  # only that frame is read
    [[False, False, False], [False, False, True]]
    >>> ctx.run(analysis).intensity_lin.raw_data[0, :4].tolist()
    [320.0, 321.0, 322.0, 323.0]
    """

    def origin(self) -> tuple[int, ...]:
        """The picked position, one index per nav axis."""
        dims = len(self.nav_shape)
        if dims not in (1, 2, 3):
            raise ValueError(f"can only handle 1D/2D/3D nav currently, received {dims} dimensions")
        zyx = tuple(self.parameters.get(axis) for axis in ("z", "y", "x"))
        keep, drop = zyx[3 - dims :], zyx[: 3 - dims]
        if None in keep or any(d is not None for d in drop):
            need = {1: "x, not y and not z", 2: "x, y and not z", 3: "x, y z"}[dims]
            raise ValueError(
                f"Need {need} to index {dims}D dataset, received z={zyx[0]}, y={zyx[1]}, x={zyx[2]}"
            )
        return keep  # type: ignore[return-value]

    def get_udf(self) -> PickUDF:
        return PickUDF()

    def get_roi(self) -> np.ndarray:
        roi = np.zeros(self.nav_shape, dtype=bool)
        roi[self.origin()] = True
        return roi

    def _coords(self) -> str:
        return " ".join(
            f"{axis}={int(self.parameters[axis])}"
            for axis in ("x", "y", "z")
            if axis in self.parameters
        )

    def get_udf_results(self, udf_results, roi, damage) -> PickResultSet:
        frame = udf_results["intensity"].data[0]
        desc = f"the frame at {self._coords()}"
        return _frame_results(frame, "intensity", desc, desc, PickResultSet)
