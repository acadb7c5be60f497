"""User-defined functions: the `UDF` base class and the shipped analyses."""

from ltdask.udf.base import UDF, AuxData, UDFMethod
from ltdask.udf.builtin import (
    ApplyMasksUDF,
    AutoUDF,
    CoMParams,
    CoMUDF,
    MaskContainer,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)
from ltdask.udf.builtin.crystallinity import CrystallinityUDF, run_analysis_crystall
from ltdask.udf.builtin.fem import FEMUDF, run_fem
from ltdask.udf.builtin.logsum import LogsumUDF, run_logsum
from ltdask.udf.meta import UDFMeta

__all__ = [
    "UDF",
    "ApplyMasksUDF",
    "AutoUDF",
    "AuxData",
    "CoMParams",
    "CoMUDF",
    "CrystallinityUDF",
    "FEMUDF",
    "LogsumUDF",
    "MaskContainer",
    "PickUDF",
    "StdDevUDF",
    "SumSigUDF",
    "SumUDF",
    "UDFMeta",
    "UDFMethod",
    "run_analysis_crystall",
    "run_fem",
    "run_logsum",
]
