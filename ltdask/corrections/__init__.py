"""Detector corrections: dark frame, gain map and excluded (hot, dead, noisy) pixels.

Every frame a UDF sees becomes ``(frame - dark) * gain`` in the run's float dtype, and then
each excluded pixel the mean of the pixels of its 3×3 neighbourhood that are not excluded
(fewer at edges and corners; clusters are handled because excluded neighbours never count),
as LiberTEM 0.16 does. A pixel whose neighbours are all excluded cannot be repaired: an error
when the `CorrectionSet` is made, unless ``allow_empty=True`` (then it keeps its dark- and
gain-corrected value).

Modules: ``_set`` (`CorrectionSet`, what the user gives), ``_apply`` (the corrections
prepared for one signal shape, applied to tiles in the partition tasks), ``_kernels`` (the
numba kernel they run), ``_find`` (`find_excluded`, finding bad pixels in a scan), ``_linear``
(`LinearCorrection`: the corrections as one linear map, for UDFs that fold them into
results linear in the frame).
"""

from __future__ import annotations

from ltdask.corrections._apply import PreparedCorrections, RepairPlan
from ltdask.corrections._find import ExcludedReport, find_excluded
from ltdask.corrections._linear import LinearCorrection, RepairedMoments
from ltdask.corrections._set import CorrectionSet

__all__ = [
    "CorrectionSet",
    "ExcludedReport",
    "LinearCorrection",
    "PreparedCorrections",
    "RepairPlan",
    "RepairedMoments",
    "find_excluded",
]
