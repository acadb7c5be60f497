"""The PNG pictures the commands draw of their results, with `ltdask.plot`.

`save_picture` draws one figure into a PNG (``ltdask demo`` draws its pictures with it);
`result_pictures` plans one picture for every 2-D result of ``ltdask run`` (a variable on
the scan's or the detector's two dims, after dropping other dims of size 1, such as the
``mask`` of one virtual detector) and a colour picture of a CoM field; `check_pictures`
refuses to replace a file that ltdask did not draw.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ltdask._version import __version__
from ltdask.cli._errors import UserError
from ltdask.cli._options import exists_message

#: the PNG text chunk that marks a picture as ltdask's (``Software``, as PNG defines it)
SOFTWARE = f"ltdask {__version__}"
#: results that are signed about zero: a diverging colour map, symmetric about zero
SIGNED = ("divergence", "curl", "field_y", "field_x")
#: a picture: what draws it into an axes (and returns the axes), and its title
Picture = tuple[Callable[[Any], Any], str]


def save_picture(path: str, draw: Callable[[Any], Any], title: str) -> str:
    """Draw a 5 x 4 inch figure with `draw` (it takes the axes and returns them), give it
    `title`, write it to the PNG `path` (marked as ltdask's in its ``Software`` chunk)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4), layout="constrained")
    ax = draw(fig.add_subplot())
    ax.set_title(title)
    fig.savefig(path, dpi=100, format="png", metadata={"Software": SOFTWARE})
    return path


def _image(variable, pairs):
    """`variable` as a 2-D image on one of the dim `pairs`, or None."""
    for pair in pairs:
        extra = [d for d in variable.dims if d not in pair]
        if set(pair) <= set(variable.dims) and all(variable.sizes[d] == 1 for d in extra):
            return variable.isel({d: 0 for d in extra}, drop=True).transpose(*pair)
    return None


def result_pictures(result, nav_dims: tuple[str, ...], sig_dims: tuple[str, ...]) -> dict:
    """The pictures of `result` (an ``xarray.Dataset`` of a UDF's results) by name: one
    for every variable that is an image on the scan's (`nav_dims`) or the detector's
    (`sig_dims`) two dims, and ``field``, the CoM field in colours, where the result has
    ``field_y`` and ``field_x``."""
    from ltdask.views import plot

    pairs = [dims for dims in (tuple(nav_dims), tuple(sig_dims)) if len(dims) == 2]
    pictures: dict[str, Picture] = {}
    if {"field_y", "field_x"} <= set(result.data_vars) and _image(
        result["field_y"], pairs
    ) is not None:
        pictures["field"] = (lambda ax: plot.com_field(result, ax), "CoM field")
    for name, variable in result.data_vars.items():
        if _image(variable, pairs) is None:
            continue

        def draw(ax, name=name):
            image = _image(result[name], pairs)
            if name not in SIGNED:
                return plot.virtual_image(image, ax)
            span = float(abs(image).max()) or 1.0
            return plot.virtual_image(image, ax, cmap="RdBu_r", vmin=-span, vmax=span)

        pictures[str(name)] = (draw, str(name))
    return pictures


def picture_paths(store: str, names) -> dict[str, str]:
    """Where the pictures of the results in `store` go: beside it, ``STEM.NAME.png``
    (``out.zarr`` -> ``out.intensity.png``)."""
    base = os.path.splitext(os.path.normpath(store))[0]
    return {name: f"{base}.{name}.png" for name in names}


def drawn_by_ltdask(path: str) -> bool:
    """Whether `path` is a PNG that `save_picture` wrote (its ``Software`` text chunk)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"\x89PNG\r\n\x1a\n") and b"tEXtSoftware\x00ltdask " in head


def check_pictures(paths, overwrite: bool) -> None:
    """Refuse to write pictures over files: without `overwrite` any; with it, files that
    are not pictures ltdask drew."""
    for path in paths:
        if not os.path.lexists(path):
            continue
        if not overwrite:
            raise UserError(exists_message(path) + " (or --no-png)")
        if os.path.isdir(path) or os.path.islink(path) or not drawn_by_ltdask(path):
            raise UserError(
                f"{path} exists and is not a picture ltdask drew; --overwrite replaces only "
                "those: move it, choose another --out, or pass --no-png"
            )


def draw_pictures(store: str, nav_dims: tuple[str, ...], sig_dims: tuple[str, ...]) -> list[str]:
    """Draw the pictures of the results in the Zarr store `store` (`result_pictures`)
    beside it (`picture_paths`); their paths."""
    import xarray as xr

    result = xr.open_zarr(store)
    pictures = result_pictures(result, nav_dims, sig_dims)
    paths = picture_paths(store, pictures)
    return [save_picture(paths[name], draw, title) for name, (draw, title) in pictures.items()]
