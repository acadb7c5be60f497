"""Sparse masks: stamping a template into a sparse stack, and converting between dense,
``scipy.sparse`` and pydata ``sparse`` masks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse
import sparse

from ltdask.masks._geometry import _check_image_size, _warn_if_empty


def sparse_template_multi_stack(
    mask_index: Sequence[int] | npt.ArrayLike,
    offsetX: Sequence[int] | npt.ArrayLike,
    offsetY: Sequence[int] | npt.ArrayLike,
    template: npt.ArrayLike,
    imageSizeX: int,
    imageSizeY: int,
) -> sparse.COO:
    """Stamp a template into a sparse stack of masks at given offsets.

    Copy ``i`` of ``template`` is placed in mask ``mask_index[i]`` with its top-left corner
    at ``(offsetY[i], offsetX[i])``; whatever falls outside the image is clipped away, and
    copies stamped into the same mask add up.

    Parameters
    ----------
    mask_index : sequence of int
        Index of the mask each copy goes to.
    offsetX, offsetY : sequence of int
        Column and row of each copy's top-left corner; may be negative.
    template : array_like
        2D template.
    imageSizeX, imageSizeY : int
        Width and height of the image.

    Returns
    -------
    sparse.COO
        Shape ``(max(mask_index) + 1, imageSizeY, imageSizeX)``, dtype of ``template``.

    Raises
    ------
    ValueError
        If the index and offset sequences differ in length or are empty, or the template
        is not 2D.

    Warns
    -----
    ltdask.EmptyMaskWarning
        If a mask of the stack holds no pixel of the image (its copies all fall outside it,
        or no copy goes to it).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import sparse_template_multi_stack
    >>> stack = sparse_template_multi_stack([0, 1], [0, 2], [0, 1], np.ones((2, 2)), 4, 3)
    >>> stack.todense().astype(int)
    array([[[1, 1, 0, 0],
            [1, 1, 0, 0],
            [0, 0, 0, 0]],
    <BLANKLINE>
           [[0, 0, 0, 0],
            [0, 0, 1, 1],
            [0, 0, 1, 1]]])
    """
    sx, sy = _check_image_size(imageSizeX, imageSizeY)
    template = np.asarray(template)
    if template.ndim != 2:
        raise ValueError(f"template must be 2D, got shape {template.shape}")
    index = np.asarray(mask_index, dtype=np.intp).ravel()
    ox = np.asarray(offsetX, dtype=np.intp).ravel()
    oy = np.asarray(offsetY, dtype=np.intp).ravel()
    if not (len(index) == len(ox) == len(oy)) or len(index) == 0:
        raise ValueError(
            "mask_index, offsetX and offsetY must be non-empty and of equal length, got "
            f"lengths {len(index)}, {len(ox)} and {len(oy)}"
        )
    if index.min() < 0:
        raise ValueError(f"mask_index must be >= 0, got {index.min()}")
    ty, tx = np.indices(template.shape).reshape(2, -1)
    ys = oy[:, np.newaxis] + ty
    xs = ox[:, np.newaxis] + tx
    masks = np.broadcast_to(index[:, np.newaxis], ys.shape)
    data = np.broadcast_to(template.ravel(), ys.shape)
    inside = (ys >= 0) & (ys < sy) & (xs >= 0) & (xs < sx)
    stack = sparse.COO(
        np.stack((masks[inside], ys[inside], xs[inside])),
        data[inside],
        shape=(int(index.max()) + 1, sy, sx),
    )
    filled = np.zeros(stack.shape[0], dtype=bool)
    filled[stack.coords[0][stack.data != 0]] = True
    if not filled.all():
        empty = np.flatnonzero(~filled).tolist()
        shown = ", ".join(map(str, empty[:10])) + (" ..." if len(empty) > 10 else "")
        _warn_if_empty(
            np.zeros(0),
            f"sparse_template_multi_stack(...), in {len(empty)} of its {stack.shape[0]} masks "
            f"({shown}),",
            sx,
            sy,
            "give each mask an offset (offsetX, offsetY) where its template overlaps the frame",
        )
    return stack


def is_sparse(a: Any) -> bool:
    """Tell whether ``a`` is a pydata ``sparse`` array or a ``scipy.sparse`` matrix/array.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import is_sparse, to_sparse
    >>> is_sparse(np.eye(2)), is_sparse(to_sparse(np.eye(2)))
    (False, True)
    """
    return isinstance(a, sparse.SparseArray) or scipy.sparse.issparse(a)


def to_dense(a: Any) -> np.ndarray:
    """Convert a sparse (pydata or scipy) or array-like mask to a dense ``numpy.ndarray``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import to_dense, to_sparse
    >>> to_dense(to_sparse(np.eye(2)))
    array([[1., 0.],
           [0., 1.]])
    """
    if isinstance(a, sparse.SparseArray):
        return a.todense()
    if scipy.sparse.issparse(a):
        return a.toarray()
    return np.asarray(a)


def to_sparse(a: Any) -> sparse.COO:
    """Convert a dense, scipy.sparse or pydata sparse mask to a ``sparse.COO``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.masks import to_sparse
    >>> to_sparse(np.eye(3)).nnz
    3
    """
    if isinstance(a, sparse.COO):
        return a
    if isinstance(a, sparse.SparseArray):
        return sparse.COO(a)
    if scipy.sparse.issparse(a):
        return sparse.COO.from_scipy_sparse(a)
    return sparse.COO.from_numpy(np.asarray(a))
