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
from ltdask.udf.meta import UDFMeta

__all__ = [
    "UDF",
    "ApplyMasksUDF",
    "AutoUDF",
    "AuxData",
    "CoMParams",
    "CoMUDF",
    "MaskContainer",
    "PickUDF",
    "StdDevUDF",
    "SumSigUDF",
    "SumUDF",
    "UDFMeta",
    "UDFMethod",
]
