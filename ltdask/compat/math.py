"""LiberTEM's ``libertem.common.math``: `prod` (the product of a shape, as a Python int)
and `count_nonzero` (for dense and sparse arrays alike)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["count_nonzero", "prod"]


def prod(iterable: Iterable) -> int:
    """The product of `iterable` (a shape) as a Python int: no overflow of fixed-size
    integers, and 1 for an empty shape.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.math import prod
    >>> prod((np.int32(2**20), 2**20)), prod(())
    (1099511627776, 1)
    """
    result = 1
    for n in iterable:
        value = int(n)
        if value != n:
            raise ValueError(f"prod: {n!r} is not an integer; expected a shape of integers")
        result *= value
    return result


def count_nonzero(array) -> int:
    """The number of non-zero elements of `array` (numpy, CuPy, ``scipy.sparse`` or pydata
    ``sparse``), as a Python int; explicitly stored zeros of sparse arrays do not count.

    Examples
    --------
    >>> import numpy as np, scipy.sparse
    >>> from ltdask.compat.math import count_nonzero
    >>> count_nonzero(np.array([[True, False], [True, True]]))
    3
    >>> count_nonzero(scipy.sparse.csr_matrix(np.eye(3)))
    3
    """
    module = type(array).__module__
    if module.startswith(("scipy.sparse", "cupyx.scipy.sparse")):
        return int(array.count_nonzero())
    if module.startswith("sparse"):  # pydata sparse: the stored values
        return int(np.count_nonzero(array.data))
    return int(np.count_nonzero(array))
