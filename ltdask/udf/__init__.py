"""User-defined functions: the `UDF` base class and the shipped analyses."""

from ltdask.udf.base import UDF, AuxData, UDFMethod
from ltdask.udf.meta import UDFMeta

__all__ = ["UDF", "AuxData", "UDFMeta", "UDFMethod"]
