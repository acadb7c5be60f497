"""The result objects of LiberTEM's Analysis API: `AnalysisResult` and the result sets."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "AnalysisResult",
    "AnalysisResultSet",
    "COMResultSet",
    "MasksResultSet",
    "PickResultSet",
    "RadialFourierResultSet",
    "SingleMaskResultSet",
    "SumResultSet",
]


class AnalysisResult:
    """One named result of an analysis, as LiberTEM's ``AnalysisResult``.

    Parameters
    ----------
    raw_data : numpy.ndarray or tuple of numpy.ndarray
        The numbers (CoM's ``field``: the tuple ``(x, y)``).
    visualized : numpy.ndarray or callable
        An RGB(A) ``uint8`` image of ``raw_data``, or a function without arguments that makes
        it; it is made on first access of `visualized` and kept.
    title, desc, key : str
        Title and description (as LiberTEM's GUI shows them) and the key the result set
        finds the result by.
    include_in_download : bool
        As LiberTEM's (False for CoM's ``field``).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.analysis import AnalysisResult
    >>> r = AnalysisResult(np.ones((2, 2)), visualized=None, title="t", desc="d", key="k")
    >>> np.asarray(r).sum()
    np.float64(4.0)
    """

    def __init__(
        self,
        raw_data: Any,
        visualized: np.ndarray | Callable[[], np.ndarray] | None,
        title: str,
        desc: str,
        key: str,
        include_in_download: bool = True,
    ):
        self.raw_data = raw_data
        self._visualized = visualized
        self.title = title
        self.desc = desc
        self.key = key
        self.include_in_download = include_in_download

    @property
    def visualized(self) -> np.ndarray | None:
        """The RGB(A) image, made on first access."""
        if callable(self._visualized):
            self._visualized = self._visualized()
        return self._visualized

    def get_image(self, save_kwargs: dict | None = None):
        """`visualized` encoded as a PNG in a ``BytesIO`` (needs pillow).

        Parameters
        ----------
        save_kwargs : dict, optional
            Passed to ``PIL.Image.save`` (``format`` defaults to ``"png"``).
        """
        import io

        try:
            from PIL import Image
        except ImportError as err:  # pragma: no cover - depends on the environment
            raise ImportError("AnalysisResult.get_image needs pillow: pip install pillow") from err
        kwargs = {"format": "png", **(save_kwargs or {})}
        buffer = io.BytesIO()
        Image.fromarray(np.asarray(self.visualized)).save(buffer, **kwargs)
        buffer.seek(0)
        return buffer

    def __array__(self, dtype=None, copy=None):
        return np.array(self.raw_data, dtype=dtype, copy=copy)

    def __str__(self) -> str:
        return "".join(
            f"{name}: {getattr(self, name)}\n"
            for name in ("title", "desc", "key", "raw_data", "visualized")
        )

    def __repr__(self) -> str:
        return f"<AnalysisResult: {self.key}>"


class AnalysisResultSet:
    """The results of one analysis: a list, an iterator, a mapping by key and attributes.

    ``results[0]``, ``results["intensity"]``, ``results.intensity`` and
    ``for r in results`` all work, as in LiberTEM.

    Parameters
    ----------
    results : list of AnalysisResult or callable
        The results, or a function without arguments that makes them on first use.
    raw_results : optional
        The numbers behind the results where the analysis keeps them (radial Fourier).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.analysis import AnalysisResult, AnalysisResultSet
    >>> rs = AnalysisResultSet([AnalysisResult(np.zeros(2), None, "t", "d", "mask_0")])
    >>> rs.mask_0 is rs["mask_0"] is rs[0]
    True
    >>> rs.keys()
    ['mask_0']
    """

    def __init__(
        self,
        results: Sequence[AnalysisResult] | Callable[[], Sequence[AnalysisResult]],
        raw_results: Any = None,
    ):
        self._results = results
        self.raw_results = raw_results

    @property
    def results(self) -> list[AnalysisResult]:
        """The results as a list (made on first use if they were given as a function)."""
        if callable(self._results):
            self._results = self._results()
        return list(self._results)

    def __getattr__(self, key: str) -> AnalysisResult:
        if key.startswith("_"):
            raise AttributeError(key)
        for result in self.results:
            if result.key == key:
                return result
        raise AttributeError(f"result with key {key!r} not found, have: {', '.join(self.keys())}")

    def __getitem__(self, key: str | int) -> AnalysisResult:
        if isinstance(key, str):
            return self.__getattr__(key)
        return self.results[key]

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[AnalysisResult]:
        return iter(self.results)

    def keys(self) -> list[str]:
        """The keys of the results, in order."""
        return [r.key for r in self.results]

    def __repr__(self) -> str:
        return repr(self.results)


class SingleMaskResultSet(AnalysisResultSet):
    """Ring, disk and point analyses: ``intensity`` and ``intensity_log`` (nav-shaped);
    for complex data also ``intensity_real``, ``_imag``, ``_angle`` and ``_complex``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_ring_analysis(dataset=ds, ri=2, ro=3))
    >>> type(result).__name__, result.keys()
    ('SingleMaskResultSet', ['intensity', 'intensity_log'])
    >>> result.intensity.visualized.shape  # an RGBA picture
    (2, 3, 4)
    """


class MasksResultSet(AnalysisResultSet):
    """Mask analysis: ``mask_0`` … ``mask_<n>`` (nav-shaped); for complex data also
    ``mask_<i>_log``, ``_real``, ``_imag``, ``_angle`` and ``_complex``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> factories = [lambda: np.ones((8, 8)), lambda: np.eye(8)]
    >>> result = ctx.run(ctx.create_mask_analysis(factories=factories, dataset=ds))
    >>> type(result).__name__, result.keys()
    ('MasksResultSet', ['mask_0', 'mask_1'])
    """


class SumResultSet(AnalysisResultSet):
    """Sum analysis: ``intensity`` (log-scaled picture) and ``intensity_lin``
    (sig-shaped).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_sum_analysis(dataset=ds))
    >>> type(result).__name__, result.keys()
    ('SumResultSet', ['intensity', 'intensity_lin'])
    >>> result.intensity_lin.raw_data.shape
    (8, 8)
    """


class PickResultSet(AnalysisResultSet):
    """Pick analysis: ``intensity`` (log-scaled picture) and ``intensity_lin``
    (sig-shaped). LiberTEM 0.16 returns a plain `AnalysisResultSet` here; this subclass
    is one.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.arange(2 * 3 * 8 * 8.0).reshape(2, 3, 8, 8), sig_dims=2)
    >>> result = ctx.run(ctx.create_pick_analysis(dataset=ds, x=2, y=1))
    >>> type(result).__name__, result.keys()
    ('PickResultSet', ['intensity', 'intensity_lin'])
    >>> result.intensity_lin.raw_data[0, :4].tolist()
    [320.0, 321.0, 322.0, 323.0]
    """


class COMResultSet(AnalysisResultSet):
    """CoM analysis: ``field`` (the tuple ``(x, y)``), ``magnitude``, ``divergence`` and
    ``curl`` (when both nav axes are longer than 1), ``x``, ``y``; for complex data
    ``x_real``, ``y_real``, ``x_imag`` and ``y_imag`` instead.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> data = np.zeros((2, 3, 8, 8), dtype=np.float32); data[..., 5, 2] = 1  # a spot
    >>> ds = ctx.load("memory", data=data, sig_dims=2)
    >>> result = ctx.run(ctx.create_com_analysis(dataset=ds, cx=4, cy=4))
    >>> type(result).__name__, result.keys()
    ('COMResultSet', ['field', 'magnitude', 'divergence', 'curl', 'x', 'y'])
    >>> round(result.magnitude.raw_data[0, 0].item() ** 2, 6)  # shift (1, -2)
    5.0
    """


class RadialFourierResultSet(AnalysisResultSet):
    """Radial Fourier analysis: per bin ``b`` and order ``o``: ``dominant_<b>``,
    ``absolute_<b>_<o>``, ``phase_<b>_<o>`` and ``complex_<b>_<o>``; ``raw_results`` is the
    complex array of shape ``(n_bins, max_order + 1, *nav)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> analysis = ctx.create_radial_fourier_analysis(dataset=ds, ro=4, n_bins=1, max_order=1)
    >>> result = ctx.run(analysis)
    >>> type(result).__name__, result.keys()[:4]
    ('RadialFourierResultSet', ['dominant_0', 'absolute_0_0', 'absolute_0_1', 'phase_0_0'])
    >>> result.raw_results.shape
    (1, 2, 2, 3)
    """
