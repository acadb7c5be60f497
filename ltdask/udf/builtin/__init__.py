"""The shipped analyses."""

from ltdask.udf.builtin.apply_masks import ApplyMasksUDF, MaskContainer
from ltdask.udf.builtin.com import CoMParams, CoMUDF
from ltdask.udf.builtin.pick import AutoUDF, PickUDF, map
from ltdask.udf.builtin.stddev import StdDevUDF
from ltdask.udf.builtin.sums import SumSigUDF, SumUDF

__all__ = [
    "ApplyMasksUDF",
    "AutoUDF",
    "CoMParams",
    "CoMUDF",
    "MaskContainer",
    "PickUDF",
    "StdDevUDF",
    "SumSigUDF",
    "SumUDF",
    "map",
]
