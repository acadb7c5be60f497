"""LiberTEM's `DataTile`: a tile's data with the `Slice` of the dataset it covers."""

from __future__ import annotations

import math

from ltdask.common import Slice

__all__ = ["DataTile"]


class DataTile:
    """A tile's `data` (an array of ``tile_slice.shape``), where it lies in the flat-nav
    dataset (`tile_slice`) and the index of its signal slice in the tiling scheme
    (`scheme_idx`), as LiberTEM's ``libertem.io.dataset.base.DataTile``.

    As in LiberTEM, a UDF's ``process_tile`` / ``process_frame`` / ``process_partition``
    gets plain arrays, not DataTiles: their slice is ``self.meta.slice`` and their
    scheme index ``self.meta.tiling_scheme_idx``. DataTile is for code that passes tiles
    with their place around (as LiberTEM datasets' ``get_tiles`` did).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.common import Shape, Slice
    >>> from ltdask.compat.tiles import DataTile
    >>> where = Slice((4, 0, 0), Shape((2, 3, 3), sig_dims=2))
    >>> tile = DataTile(np.ones((2, 3, 3)), tile_slice=where, scheme_idx=0)
    >>> tile.shape, tile.flat_data.shape, tile.size
    ((2, 3, 3), (2, 9), 18)
    """

    def __init__(self, data, tile_slice: Slice, scheme_idx: int):
        if isinstance(data, DataTile):
            data = data.data
        if tuple(data.shape) != tuple(tile_slice.shape):
            raise ValueError(
                f"DataTile: data of shape {tuple(data.shape)} does not fit tile_slice "
                f"{tile_slice} (shape {tuple(tile_slice.shape)}); expected data of the "
                "slice's shape"
            )
        self._data = data
        self.tile_slice = tile_slice
        self.scheme_idx = scheme_idx

    @property
    def data(self):
        """The tile's array."""
        return self._data

    @property
    def flat_data(self):
        """The data as ``(frames, pixels)``: a reshaped view."""
        shape = self.tile_slice.shape
        return self._data.reshape((shape.nav.size, shape.sig.size))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tile_slice.shape)

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"<DataTile {self.tile_slice!r} scheme_idx={self.scheme_idx}>"
