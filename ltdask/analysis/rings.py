"""Two analyses of LiberTEM's GUI over a ring, one result ``intensity`` (nav-shaped) each:
`FEMAnalysis` (`ltdask.udf.FEMUDF`: the spread of each frame inside a ring) and
`ApplyFFTMask` (`ltdask.udf.CrystallinityUDF`: each frame's spectrum inside a ring)."""

from __future__ import annotations

from ltdask.analysis._viz import scaled_image
from ltdask.analysis.base import Analysis
from ltdask.analysis.results import AnalysisResult, AnalysisResultSet
from ltdask.udf.builtin.crystallinity import CrystallinityUDF
from ltdask.udf.builtin.fem import FEMUDF

__all__ = ["ApplyFFTMask", "FEMAnalysis"]


def _intensity(udf_results, damage, desc: str) -> AnalysisResultSet:
    data = udf_results["intensity"].data
    return AnalysisResultSet(
        [
            AnalysisResult(
                data, lambda: scaled_image(data, damage=damage), "intensity", desc, "intensity"
            )
        ]
    )


class FEMAnalysis(Analysis):
    """LiberTEM's ``FEMAnalysis``: `FEMUDF` with the parameters ``cx``, ``cy`` (the ring's
    centre), ``ri`` and ``ro`` (its radii).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 9, 9), dtype=np.float32), sig_dims=2)
    >>> analysis = FEMAnalysis(dataset=ds, parameters=dict(cx=4, cy=4, ri=1, ro=3))
    >>> ctx.run(analysis).intensity.raw_data.tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """

    def get_udf(self) -> FEMUDF:
        p = self.parameters
        return FEMUDF(center=(p["cy"], p["cx"]), rad_in=p["ri"], rad_out=p["ro"])

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        return _intensity(udf_results, damage, "result from SD calculation over ring")


class ApplyFFTMask(Analysis):
    """LiberTEM's ``ApplyFFTMask``: `CrystallinityUDF` with the parameters ``rad_in``,
    ``rad_out`` (the ring in Fourier space), ``real_centerx``, ``real_centery`` and
    ``real_rad`` (the disk of the frame left out first).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.zeros((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> parameters = dict(rad_in=0, rad_out=1, real_centerx=1, real_centery=1, real_rad=1)
    >>> ctx.run(ApplyFFTMask(dataset=ds, parameters=parameters)).intensity.raw_data.shape
    (2, 3)
    """

    def get_udf(self) -> CrystallinityUDF:
        p = self.parameters
        return CrystallinityUDF(
            rad_in=p["rad_in"],
            rad_out=p["rad_out"],
            real_center=(p["real_centery"], p["real_centerx"]),
            real_rad=p["real_rad"],
        )

    def get_udf_results(self, udf_results, roi, damage) -> AnalysisResultSet:
        return _intensity(udf_results, damage, "result from integration over mask in Fourier space")
