"""User-defined functions: the `UDF` base class, the shipped analyses, and
`apply_whole` for a UDF's post-processing on whole result arrays."""

from ltdask.udf.apply import apply_whole
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
    "apply_whole",
    "run_analysis_crystall",
    "run_fem",
    "run_logsum",
]
