"""Pixel layouts: a dataset whose frames are its files' raw frames with the pixels moved.

Some detectors store a frame's pixels in another order than the image has (PNDetector's
pnCCD stores its lower half turned by 180° beside the upper one, and repeats binned rows).
Decoding puts every pixel in its place, a copy of every frame. UDFs whose results are
sums over frames per pixel (or over each frame's pixels) need no such copy: summed in the
raw order, their per-pixel results are moved once per partition (``folds_layout``, see
:mod:`ltdask.udf.paths.raw_layout`), and the raw frames are read as views of the files.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class PixelLayout:
    """Image pixel ``p`` of a frame (flat, C order) is raw pixel ``index[p]`` of the raw frame
    in the files; each raw pixel stands for `multiplicity` image pixels.

    Parameters
    ----------
    dataset
        The same scan as a dataset of raw frames (the same positions, sync offset and
        files; frames in the files' order, read as views where the bytes allow).
    make_index, args
        ``make_index(*args)``: the int64 `index` (a module-level function, so that the
        layout pickles small into tasks; it is called once per process and arguments).
    multiplicity
        How many image pixels each raw pixel is (binned rows repeated: the binning).

    Examples
    --------
    A frame stored transposed, as a layout of its raw frames:

    >>> import numpy as np
    >>> from ltdask.io.layout import PixelLayout
    >>> def transposed(h, w):
    ...     return np.arange(h * w).reshape(w, h).T.reshape(-1)
    >>> layout = PixelLayout(None, transposed, (2, 3))
    >>> raw = np.arange(6).reshape(3, 2)  # the stored frame: 3 rows of 2
    >>> layout.gather(raw.reshape(-1)).reshape(2, 3).tolist() == raw.T.tolist()
    True
    """

    def __init__(self, dataset, make_index: Callable, args: tuple, multiplicity: int = 1):
        self.dataset = dataset
        self.make_index = make_index
        self.args = tuple(args)
        self.multiplicity = int(multiplicity)

    @property
    def index(self) -> np.ndarray:
        return _index(self.make_index, self.args)

    def gather(self, raw: np.ndarray) -> np.ndarray:
        """Per-pixel values of raw frames (flat) as values of the image's pixels (flat)."""
        return raw.reshape(-1)[self.index]

    def __dask_tokenize__(self):
        return (type(self).__qualname__, self.make_index.__qualname__, self.args, self.multiplicity)


_CACHE: dict = {}


def _index(make_index: Callable, args: tuple) -> np.ndarray:
    key = (make_index, args)
    out = _CACHE.get(key)
    if out is None:
        if len(_CACHE) > 8:
            _CACHE.clear()
        out = _CACHE[key] = np.ascontiguousarray(make_index(*args), dtype=np.int64)
        out.setflags(write=False)
    return out
