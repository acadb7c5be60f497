"""The `Analysis` base class: parameters with defaults, a UDF, and results from its output."""

from __future__ import annotations

from typing import Any

import numpy as np

from ltdask import masks
from ltdask.analysis._viz import scaled_image, vector_image
from ltdask.analysis.results import AnalysisResult, AnalysisResultSet

__all__ = ["Analysis", "complex_results"]


class Analysis:
    """A LiberTEM-style analysis: a UDF plus the conversion of its results into an
    `AnalysisResultSet`. Made by the ``create_*_analysis`` methods of
    `ltdask.analysis.AnalysisMixin` and run with its ``run``.

    Parameters
    ----------
    dataset : ltdask.DataSet
        The data the analysis works on.
    parameters : dict
        The parameters given; `get_parameters` fills in the defaults for those left out.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> analysis = ctx.create_sum_analysis(dataset=ds)
    >>> type(analysis.get_udf()).__name__
    'SumUDF'
    >>> ctx.run(analysis).intensity_lin.raw_data.shape
    (8, 8)
    """

    def __init__(self, dataset, parameters: dict):
        self.dataset = dataset
        given = dict(parameters)
        self.parameters = self.get_parameters(dict(given))
        self.parameters.update(given)

    @property
    def sig_shape(self) -> tuple[int, ...]:
        return tuple(self.dataset.sig_shape)

    @property
    def nav_shape(self) -> tuple[int, ...]:
        return tuple(self.dataset.nav_shape)

    def get_parameters(self, parameters: dict) -> dict:
        """The parameters with defaults for those not given (none here)."""
        return parameters

    def get_udf(self):
        """The UDF this analysis runs."""
        raise NotImplementedError

    def get_roi(self):
        """The ROI to use when ``run`` is given none (None: everything)."""
        return None

    def get_udf_results(self, udf_results: dict, roi, damage) -> AnalysisResultSet:
        """The result set made from the UDF's results (``Context.run_udf`` buffers)."""
        raise NotImplementedError

    def _check_sig_2d(self) -> tuple[int, int]:
        if len(self.sig_shape) != 2:
            raise ValueError(
                f"{type(self).__name__}: can only handle 2D signals currently, the dataset's "
                f"signal shape is {self.sig_shape}"
            )
        height, width = self.sig_shape
        return height, width

    def _gui_roi(self) -> np.ndarray | None:
        """LiberTEM's GUI ROI parameter (``{"roi": {"shape": "disk" | "rect", ...}}``)."""
        spec: Any = self.parameters.get("roi")
        if not spec or "shape" not in spec:
            return None
        ny, nx = self.nav_shape
        if spec["shape"] == "disk":
            return masks.circular(spec["cx"], spec["cy"], nx, ny, spec["r"])
        if spec["shape"] == "rect":
            return masks.rectangular(spec["x"], spec["y"], spec["width"], spec["height"], nx, ny)
        raise NotImplementedError(f"unknown ROI shape {spec['shape']!r}")


def complex_results(
    values: np.ndarray, key_prefix: str, title: str, desc: str, damage, default_lin=True
) -> list[AnalysisResult]:
    """LiberTEM's six results for a complex array: magnitude (linear and log), real,
    imaginary, angle and the complex values; ``default_lin`` says whether the plain
    ``key_prefix`` is the linear (True) or the log picture of the magnitude."""
    # a value with a NaN part is missing as a whole (ltdask fills complex results outside
    # the ROI with nan+0j, LiberTEM with nan+nanj)
    values = np.where(np.isnan(values), np.array(complex(np.nan, np.nan), values.dtype), values)
    damage = damage & np.isfinite(values)
    magnitude = np.abs(values)
    angle = np.angle(values)
    vmax = np.max(magnitude[damage])

    def picture(data, logarithmic=False):
        return lambda: scaled_image(data, logarithmic=logarithmic, damage=damage)

    lin_key, log_key = (
        (key_prefix, f"{key_prefix}_log") if default_lin else (f"{key_prefix}_lin", key_prefix)
    )
    return [
        AnalysisResult(magnitude, picture(magnitude), f"{title} [magn]", f"{desc} [magn]", lin_key),
        AnalysisResult(
            magnitude,
            picture(magnitude, logarithmic=True),
            f"{title} [log(magn)]",
            f"{desc} [log(magn)]",
            log_key,
        ),
        AnalysisResult(
            values.real,
            picture(values.real),
            f"{title} [real]",
            f"{desc} [real]",
            f"{key_prefix}_real",
        ),
        AnalysisResult(
            values.imag,
            picture(values.imag),
            f"{title} [imag]",
            f"{desc} [imag]",
            f"{key_prefix}_imag",
        ),
        AnalysisResult(
            angle, picture(angle), f"{title} [angle]", f"{desc} [angle]", f"{key_prefix}_angle"
        ),
        AnalysisResult(
            values,
            lambda: vector_image(x=values.real, y=values.imag, vmax=vmax),
            f"{title} [complex]",
            f"{desc} [complex]",
            f"{key_prefix}_complex",
        ),
    ]
