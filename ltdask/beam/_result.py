"""`Beam`: what `find_beam` found, and its picture."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, eq=False, repr=False)
class Beam:
    """The direct beam found by `find_beam`, in detector pixels (``cy`` down the rows,
    ``cx`` along them, as `ltdask.udf.CoMUDF` and `ltdask.masks` take them).

    Attributes
    ----------
    cy, cx : float
        The beam's centre in the mean of the sampled frames.
    r : float
        Its radius: where its edge falls to half height. `ltdask.masks` and
        `ltdask.udf.CoMUDF` take the pixels with ``d**2 <= r**2``: add a pixel or two to
        take the whole edge.
    centres : numpy.ndarray
        ``(frames, 2)``: ``(cy, cx)`` in each sampled frame (NaN where no beam was found).
    positions : numpy.ndarray
        ``(frames, nav_dims)``: the nav index of each sampled frame.
    mean_frame : numpy.ndarray
        The mean of the sampled frames (float64), hot pixels repaired.
    nav_shape : tuple of int
        The scan's nav shape.

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.zeros((2, 3, 32, 32), np.float32)
    >>> yy, xx = np.mgrid[:32, :32]
    >>> data[..., (yy - 12) ** 2 + (xx - 20) ** 2 <= 36] = 100
    >>> beam = ltdask.find_beam(ltdask.from_array(data))
    >>> beam
    Beam(cy=12.00, cx=20.00, r=6.04 px; wander up to 0.00 px over 6 of 6 frames)
    >>> beam.centres.shape, beam.frames, beam.wander
    ((6, 2), 6, 0.0)
    """

    cy: float
    cx: float
    r: float
    centres: np.ndarray = field(repr=False)
    positions: np.ndarray = field(repr=False)
    mean_frame: np.ndarray = field(repr=False)
    nav_shape: tuple[int, ...] = ()

    @property
    def frames(self) -> int:
        """How many frames were sampled."""
        return len(self.centres)

    @property
    def found(self) -> int:
        """In how many of them a beam was found."""
        return int(np.isfinite(self.centres).all(axis=1).sum())

    @property
    def wander(self) -> float:
        """The largest distance (px) of a sampled frame's centre from ``(cy, cx)``."""
        ok = np.isfinite(self.centres).all(axis=1)
        if not ok.any():
            return math.nan
        return float(np.hypot(*(self.centres[ok] - (self.cy, self.cx)).T).max())

    def centre_map(self) -> np.ndarray:
        """The centres on the scan: nav shape + ``(2,)``, NaN where no frame was sampled.

        Examples
        --------
        >>> import numpy as np, ltdask
        >>> data = np.zeros((2, 3, 16, 16), np.float32)
        >>> data[0, 0, 5:8, 9:12] = data[0, 2, 6:9, 9:12] = 1  # centres (6, 10), (7, 10)
        >>> beam = ltdask.find_beam(ltdask.from_array(data), frames=2)  # (0, 0) and (0, 2)
        >>> beam.centre_map()[..., 0].tolist()
        [[6.0, nan, 7.0], [nan, nan, nan]]
        """
        out = np.full((*self.nav_shape, 2), np.nan)
        out[tuple(self.positions.T)] = self.centres
        return out

    def plot(
        self,
        ax=None,
        *,
        log: bool = False,
        title: str | None = None,
        cmap: str = "gray",
        colour_bar: bool = True,
        **kwargs,
    ):
        """Show the mean of the sampled frames with the disk found (a circle of radius
        ``r`` around ``(cy, cx)``) and each frame's centre (dots), on pixel axes.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; by default a new pyplot figure.
        log : bool
            A logarithmic colour scale (for a faint disk beside bright ones).
        title : str, optional
            By default the centre and radius.
        cmap : str
        colour_bar : bool
        **kwargs
            Passed to ``imshow`` (``vmin``, ``vmax``, ...).

        Returns
        -------
        matplotlib.axes.Axes

        Examples
        --------
        >>> import numpy as np, ltdask
        >>> from matplotlib.figure import Figure
        >>> data = np.zeros((2, 2, 16, 16), np.float32); data[..., 6:9, 4:7] = 1
        >>> ax = ltdask.find_beam(ltdask.from_array(data)).plot(ax=Figure().add_subplot())
        >>> ax.patches[0].center, ax.get_xlabel()
        ((5.0, 7.0), 'det_x')
        """
        import xarray as xr

        from ltdask.views import plot

        ax = plot._axes(ax)  # first: its error names what to install
        from matplotlib.colors import LogNorm
        from matplotlib.patches import Circle

        values = self.mean_frame
        if log:
            positive = values[values > 0]
            low = float(positive.min()) if positive.size else 1.0
            kwargs["norm"] = LogNorm(vmin=low, vmax=max(low, float(values.max())))
            values = np.maximum(values, low)
        image = xr.DataArray(values, dims=("det_y", "det_x"), name="mean frame")
        im, _ = plot._show(image, ax, cmap=cmap, **kwargs)
        if colour_bar:
            ax.figure.colorbar(im, ax=ax, label="mean intensity")
        ax.add_patch(Circle((self.cx, self.cy), self.r, fill=False, color="tab:red", lw=1.5))
        ax.plot(self.centres[:, 1], self.centres[:, 0], ".", color="tab:orange", ms=2)
        ax.plot([self.cx], [self.cy], "+", color="tab:red", ms=10)
        if title is None:
            title = f"beam at ({self.cy:.1f}, {self.cx:.1f}), r = {self.r:.1f} px"
        ax.set_title(title)
        return ax

    def __repr__(self) -> str:
        total = math.prod(self.nav_shape)
        found = "" if self.found == self.frames else f", found in {self.found}"
        return (
            f"Beam(cy={self.cy:.2f}, cx={self.cx:.2f}, r={self.r:.2f} px; wander up to "
            f"{self.wander:.2f} px over {self.frames} of {total} frames{found})"
        )
