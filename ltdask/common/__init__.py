"""Shapes, slices and small helpers shared by the I/O and UDF layers."""

from ltdask.common.shape import Shape
from ltdask.common.slice import Slice

__all__ = ["Shape", "Slice"]
