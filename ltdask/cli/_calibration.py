"""``--nav-calibration`` / ``--sig-calibration``: how the options are written
(``1.5nm``, ``0.2mrad@-3.2``, ``1.5nm,2nm``), parsed, and set on a dataset."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import click

from ltdask.cli._errors import UserError

#: a number, as the calibration options take it (``1.5``, ``.5``, ``-2``, ``1.5e-3``)
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
#: units: a letter first (µ and Å too), or ``1/`` then one (``1/nm``)
_UNITS = r"(?:1/)?[^\W\d_][^\s@,]*"
_SCALE = re.compile(rf"\s*(?P<number>{_NUMBER})\s*(?P<units>{_UNITS})?\s*")
_ORIGIN = re.compile(
    rf"\s*(?:(?P<centre>cent(?:er|re))|(?P<number>{_NUMBER})\s*(?P<units>{_UNITS})?)\s*", re.I
)
#: how the calibration options are written, for their help and errors
CALIBRATION_SYNTAX = "a number with units, e.g. 1.5nm"


class AxisSpec(NamedTuple):
    """One dim's calibration as an option gives it: the origin is a number, or None for
    ``@centre`` (the frame's centre, known once the dataset is open)."""

    scale: float
    origin: float | None
    units: str


def parse_calibration(value: str | None, option: str) -> tuple[AxisSpec, ...] | None:
    """``--nav-calibration`` / ``--sig-calibration``: ``SCALE UNITS[@ORIGIN]``, one for all
    dims or one per dim separated by commas (``1.5nm``, ``0.2 mrad@-3.2``,
    ``0.2mrad@centre``, ``1.5nm,2nm``). The origin is the coordinate of the first pixel,
    in the scale's units (``centre``: 0 at the frame's centre, index size / 2)."""
    if value is None:
        return None
    specs = []
    for part in value.split(","):
        scale_text, at, origin_text = part.partition("@")
        scale = _SCALE.fullmatch(scale_text)
        which = f"{part.strip()}: " if "," in value else ""
        if scale is None:
            raise UserError(f"{option} {value}: {which}expected {CALIBRATION_SYNTAX}")
        if not scale["units"]:
            raise UserError(
                f"{option} {value}: {which}no units; expected {CALIBRATION_SYNTAX} (px for pixels)"
            )
        units = scale["units"]
        origin: float | None = 0.0
        found = None
        if at:
            found = _ORIGIN.fullmatch(origin_text)
            if found is None:
                raise UserError(
                    f"{option} {value}: the origin {origin_text.strip()!r} is not a number "
                    f"(in {units}) or centre; e.g. {scale_text.strip()}@-3.2{units}"
                )
            if found["units"] and found["units"] != units:
                raise UserError(
                    f"{option} {value}: the origin is in {found['units']}, the scale in "
                    f"{units}; give both in the same units"
                )
            origin = None if found["centre"] else float(found["number"])
        numbers = [scale["number"]] + ([found["number"]] if found and found["number"] else [])
        for number in numbers:
            if not math.isfinite(float(number)):
                raise UserError(f"{option} {value}: {number} is too large for a float")
        if float(scale["number"]) == 0:
            raise UserError(f"{option} {value}: the scale must not be zero")
        specs.append(AxisSpec(float(scale["number"]), origin, units))
    return tuple(specs)


def calibration_option(option: str, help: str):
    return click.option(
        option,
        metavar="SCALE",
        callback=lambda c, p, v: parse_calibration(v, option),
        help=help,
    )


def calibrate(ds, option: str, specs: tuple[AxisSpec, ...] | None) -> None:
    """Set the calibration of `ds`'s nav (``--nav-calibration``) or signal dims from
    `specs` (as `parse_calibration` gives them), or a `UserError` naming `option`."""
    from ltdask.exceptions import DataSetError

    if specs is None:
        return
    nav = option == "--nav-calibration"
    shape = ds.nav_shape if nav else ds.sig_shape
    dims = ds.dims[: len(ds.nav_shape)] if nav else ds.dims[len(ds.nav_shape) :]
    given = ",".join(f"{s.scale:g}{s.units}" for s in specs)
    if len(specs) not in (1, len(shape)):
        raise UserError(
            f"{option} {given}: {len(specs)} calibrations for the {len(shape)} dims "
            f"({', '.join(dims)}) of {ds.path}; give one for all or one per dim"
        )
    if len(specs) == 1:
        specs = specs * len(shape)
    axes = [
        (s.scale, -s.scale * (size / 2) if s.origin is None else s.origin, s.units)
        for s, size in zip(specs, shape, strict=True)
    ]
    try:
        ds.calibrate(**{"nav" if nav else "sig": axes})
    except DataSetError as e:
        keyword = "nav_calibration" if nav else "sig_calibration"
        raise UserError(str(e).replace(keyword, option)) from None
