"""Frame analyses: the sum of all frames (`SumUDF`) and one picked frame (`PickUDF`), and
LiberTEM's GUI views of their Fourier transforms (`SumfftAnalysis`,
`PickFFTFrameAnalysis`)."""

from __future__ import annotations

import numpy as np

from ltdask import masks
from ltdask.analysis._viz import scaled_image
from ltdask.analysis.base import Analysis, complex_results
from ltdask.analysis.results import (
    AnalysisResult,
    AnalysisResultSet,
    PickResultSet,
    SumResultSet,
)
from ltdask.udf.builtin.pick import PickUDF
from ltdask.udf.builtin.sums import SumUDF

__all__ = ["PickFFTFrameAnalysis", "PickFrameAnalysis", "SumAnalysis", "SumfftAnalysis"]


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

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        """A `SumResultSet` (`SumfftAnalysis` gives another set, as LiberTEM's)."""
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


def _real_space_masked(image: np.ndarray, parameters: dict) -> np.ndarray:
    """`image` with the disk of LiberTEM's ``real_rad`` around ``(real_centerx,
    real_centery)`` set to zero (where the three are given), before its FFT: the GUI
    cuts the central beam out this way."""
    radius = parameters.get("real_rad")
    cx, cy = parameters.get("real_centerx"), parameters.get("real_centery")
    if radius is None or cx is None or cy is None:
        return image
    height, width = image.shape
    inside = np.asarray(masks.circular(cx, cy, width, height, radius), dtype=bool)
    return image * ~inside


class SumfftAnalysis(SumAnalysis):
    """LiberTEM's ``FFTSUM_FRAMES``: the sum of all frames (``intensity``, as
    `SumAnalysis`), pictured as the log of the magnitude of its centred 2-D FFT
    (``log(|fftshift(fft2(sum))| + 1)``; with ``real_rad``, ``real_centerx`` and
    ``real_centery``, of the sum with that disk set to zero).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.analysis import SumfftAnalysis
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(SumfftAnalysis(dataset=ds, parameters={}))
    >>> result.keys(), result.intensity.raw_data[0, 0].item(), result.intensity.visualized.shape
    (['intensity'], 6.0, (8, 8, 4))
    """

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        self._check_sig_2d()
        total = np.asarray(udf_results["intensity"].data)

        def picture():
            spectrum = np.fft.fftshift(np.fft.fft2(_real_space_masked(total, self.parameters)))
            return scaled_image(np.log(np.abs(spectrum) + 1), damage=True)

        return AnalysisResultSet(
            [AnalysisResult(total, picture, "intensity", "fft of sum of all frames", "intensity")]
        )


class PickFFTFrameAnalysis(PickFrameAnalysis):
    """LiberTEM's ``PICK_FFT_FRAME``: the magnitude of the centred 2-D FFT of the frame at
    ``(z, y, x)`` (``|fftshift(fft2(frame))|``; with ``real_rad``, ``real_centerx`` and
    ``real_centery``, of the frame with that disk set to zero), as `PickFrameAnalysis`
    gives a frame: ``intensity`` and ``intensity_lin``. Complex frames are given as they
    are, as in LiberTEM.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> from ltdask.analysis import PickFFTFrameAnalysis
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 4, 4), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(PickFFTFrameAnalysis(dataset=ds, parameters={"x": 1, "y": 0}))
    >>> result.intensity.raw_data[2].tolist()  # all in the zero frequency, now centred
    [0.0, 0.0, 16.0, 0.0]
    """

    def get_udf_results(self, udf_results, roi, damage) -> PickResultSet:
        frame = udf_results["intensity"].data[0]
        if frame.dtype.kind != "c":
            self._check_sig_2d()
            masked = _real_space_masked(frame, self.parameters)
            frame = np.fft.fftshift(np.abs(np.fft.fft2(masked)))
        desc = f"the frame at {self._coords()}"
        return _frame_results(frame, "intensity", desc, desc, PickResultSet)
