"""LiberTEM's Analysis API on ltdask's UDFs.

`AnalysisMixin` gives `ltdask.compat.Context` LiberTEM 0.16's ``create_ring_analysis``,
``create_disk_analysis``, ``create_point_analysis``, ``create_mask_analysis``,
``create_com_analysis``, ``create_pick_analysis``, ``create_sum_analysis``,
``create_radial_fourier_analysis`` and ``run(analysis, roi=None, progress=False,
corrections=None)``, which returns an `AnalysisResultSet` of `AnalysisResult` objects
(``raw_data``, ``visualized``, ``title``, ``desc``, ``key``) with LiberTEM's keys, shapes,
dtypes and values. Pictures (``visualized``) are made on first access; they need matplotlib
for LiberTEM's colour maps (a grey ramp without it). LiberTEM's GUI analyses
`FEMAnalysis`, `ApplyFFTMask`, `SDAnalysis`, `SumSigAnalysis`, `SumfftAnalysis` and
`PickFFTFrameAnalysis` are made directly (``FEMAnalysis(dataset=ds,
parameters={...})``) and run the same way.

Examples
--------
>>> import numpy as np
>>> from ltdask.compat import Context
>>> ctx = Context()  # a Context is an AnalysisMixin
>>> ds = ctx.load("memory", data=np.arange(2 * 2 * 4 * 4.0).reshape(2, 2, 4, 4), sig_dims=2)
>>> ctx.run(ctx.create_pick_analysis(dataset=ds, x=1, y=0)).intensity.raw_data[0].tolist()
[16.0, 17.0, 18.0, 19.0]
"""

from ltdask.analysis.base import Analysis
from ltdask.analysis.com import COMAnalysis
from ltdask.analysis.frames import (
    PickFFTFrameAnalysis,
    PickFrameAnalysis,
    SumAnalysis,
    SumfftAnalysis,
)
from ltdask.analysis.masks import (
    BaseMasksAnalysis,
    DiskMaskAnalysis,
    MasksAnalysis,
    PointMaskAnalysis,
    RingMaskAnalysis,
    SingleMaskAnalysis,
)
from ltdask.analysis.mixin import AnalysisMixin
from ltdask.analysis.radial import RadialFourierAnalysis
from ltdask.analysis.results import (
    AnalysisResult,
    AnalysisResultSet,
    COMResultSet,
    MasksResultSet,
    PickResultSet,
    RadialFourierResultSet,
    SingleMaskResultSet,
    SumResultSet,
)
from ltdask.analysis.rings import ApplyFFTMask, FEMAnalysis
from ltdask.analysis.statistics import SDAnalysis, SumSigAnalysis

__all__ = [
    "Analysis",
    "AnalysisMixin",
    "AnalysisResult",
    "AnalysisResultSet",
    "ApplyFFTMask",
    "BaseMasksAnalysis",
    "COMAnalysis",
    "COMResultSet",
    "DiskMaskAnalysis",
    "FEMAnalysis",
    "MasksAnalysis",
    "MasksResultSet",
    "PickFFTFrameAnalysis",
    "PickFrameAnalysis",
    "PickResultSet",
    "PointMaskAnalysis",
    "RadialFourierAnalysis",
    "RadialFourierResultSet",
    "RingMaskAnalysis",
    "SDAnalysis",
    "SingleMaskAnalysis",
    "SingleMaskResultSet",
    "SumAnalysis",
    "SumResultSet",
    "SumSigAnalysis",
    "SumfftAnalysis",
]
