"""Type aliases shared across ltdask."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeAlias

import numpy.typing as npt

ShapeLike: TypeAlias = "int | Sequence[int]"
PathLike: TypeAlias = "str | os.PathLike[str]"
ROILike: TypeAlias = "npt.ArrayLike | None"
DTypeLike = npt.DTypeLike

__all__ = ["ShapeLike", "PathLike", "ROILike", "DTypeLike"]
