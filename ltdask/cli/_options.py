"""What the commands parse alike: the options that open a dataset, detector corrections,
ROIs, ``key=value`` parameters, and the checks that keep outputs off the inputs."""

from __future__ import annotations

import ast
import os

import click
import numpy as np


def parse_shape(value: str | None) -> tuple[int, ...] | None:
    """A shape such as ``128,128`` or ``128x128``."""
    if value is None:
        return None
    try:
        return tuple(int(v) for v in value.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a shape like 128,128") from None


def open_path(path: str, nav_shape=None, sig_shape=None, dtype=None, sync_offset=0, key=None):
    """Open `path` with `ltdask.open`, passing only the options that were given."""
    from ltdask.io.open import open_dataset

    kwargs = {}
    if nav_shape:
        kwargs["nav_shape"] = nav_shape
    if sig_shape:
        kwargs["sig_shape"] = sig_shape
    if dtype:
        kwargs["dtype"] = dtype
    if sync_offset:
        kwargs["sync_offset"] = sync_offset
    if key:
        kwargs["key"] = key
    return open_dataset(path, **kwargs)


def _open(path, nav_shape, sig_shape, dtype, sync_offset, key):
    from ltdask.exceptions import DataSetError

    try:
        return open_path(path, nav_shape, sig_shape, dtype, sync_offset, key)
    except (DataSetError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None


def open_options(f):
    """The options every command that opens a dataset takes."""
    options = [
        click.option(
            "--nav-shape",
            callback=lambda c, p, v: parse_shape(v),
            help="scan shape, e.g. 128,128 (raw files; overrides headers)",
        ),
        click.option(
            "--sig-shape",
            callback=lambda c, p, v: parse_shape(v),
            help="frame shape, e.g. 256,256 (raw files)",
        ),
        click.option("--dtype", help="pixel dtype of raw files, e.g. uint16 or >u2"),
        click.option(
            "--sync-offset",
            type=int,
            default=0,
            show_default=True,
            help="frames to skip (negative: to insert) at the start",
        ),
        click.option("--key", help="dataset path inside an HDF5 file"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def correction_options(f):
    """``--dark``, ``--gain`` and ``--excluded``: detector corrections."""
    options = [
        click.option(
            "--dark",
            type=click.Path(exists=True),
            help="dark frame: a .npy of the frame shape, or a dark series in any format "
            "ltdask opens (averaged over its frames)",
        ),
        click.option(
            "--gain",
            type=click.Path(exists=True),
            help="gain map: a .npy of the frame shape (or a series, averaged)",
        ),
        click.option(
            "--excluded",
            type=click.Path(exists=True),
            help="pixels to repair from their neighbours: a .npy mask of the frame shape "
            "(non-zero = excluded)",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _frame(path: str, option: str, sig_shape) -> np.ndarray:
    """The frame-shaped array an option names: a .npy, or a series averaged over its frames."""
    from ltdask.exceptions import DataSetError

    try:
        if path.lower().endswith(".npy"):
            arr = np.load(path, allow_pickle=False)
            if arr.shape != tuple(sig_shape) and arr.ndim > len(sig_shape):
                arr = arr.reshape((-1, *arr.shape[-len(sig_shape) :])).mean(axis=0)
        else:
            series = open_path(path)
            arr = series.to_dask(dtype="float64").mean(axis=tuple(range(len(series.nav_shape))))
            arr = arr.compute()
    except (DataSetError, OSError, ValueError) as e:
        raise click.BadParameter(f"{path}: {e}", param_hint=option) from None
    if arr.shape != tuple(sig_shape):
        raise click.BadParameter(
            f"{path} holds frames of shape {arr.shape}; expected the scan's frame shape "
            f"{tuple(sig_shape)}",
            param_hint=option,
        )
    return arr


def load_corrections(dark, gain, excluded, sig_shape):
    """A `CorrectionSet` from the ``--dark``/``--gain``/``--excluded`` files, or None."""
    if dark is None and gain is None and excluded is None:
        return None
    from ltdask.corrections import CorrectionSet
    from ltdask.exceptions import DataSetError

    arrays = {}
    for option, path in (("--dark", dark), ("--gain", gain), ("--excluded", excluded)):
        if path is not None:
            arrays[option] = _frame(path, option, sig_shape)
    if "--excluded" in arrays:
        arrays["--excluded"] = arrays["--excluded"] != 0
    try:
        cs = CorrectionSet(
            dark=arrays.get("--dark"),
            gain=arrays.get("--gain"),
            excluded_pixels=arrays.get("--excluded"),
        )
        cs.for_shape(sig_shape)
    except DataSetError as e:
        hint = next((o for o in ("--gain", "--dark", "--excluded") if o[2:] in str(e)), None)
        raise click.BadParameter(str(e), param_hint=hint) from None
    return cs


def parse_value(text: str):
    """A ``--param`` value: a Python literal (number, tuple, ...) or else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_roi(spec: str | None, nav_shape):
    """A ROI from a ``.npy`` file of booleans or slices like ``10:20,0:64``."""
    if spec is None:
        return None
    if os.path.exists(spec):
        try:
            roi = np.load(spec)
        except (OSError, ValueError):
            raise click.BadParameter(f"--roi {spec!r}: not a .npy file of booleans") from None
        if roi.shape != tuple(nav_shape) and roi.shape != (int(np.prod(nav_shape)),):
            raise click.BadParameter(
                f"--roi {spec!r}: an array of shape {roi.shape}; expected the nav shape "
                f"{tuple(nav_shape)}"
            )
        roi = roi.astype(bool)
        if not roi.any():
            raise click.BadParameter(f"--roi {spec!r}: the array selects no positions")
        return roi
    if spec.lower().endswith(".npy"):
        raise click.BadParameter(f"--roi {spec!r}: no such file")
    roi = np.zeros(nav_shape, dtype=bool)
    try:
        index = tuple(
            slice(*(int(p) if p else None for p in part.split(":"))) if ":" in part else int(part)
            for part in spec.split(",")
        )
        roi[index] = True
    except (ValueError, IndexError) as e:
        raise click.BadParameter(f"--roi {spec!r}: {e}") from None
    if not roi.any():
        raise click.BadParameter(
            f"--roi {spec!r} selects no positions of the nav shape {tuple(nav_shape)}"
        )
    return roi


def input_files(ds, *paths) -> list[str]:
    """The files a command reads: the paths it was given and every file of the dataset."""
    files = [os.fspath(p) for p in paths if p]
    if getattr(ds, "path", None):
        files.append(os.fspath(ds.path))
    files += [os.fspath(f.path) for f in getattr(getattr(ds, "fileset", None), "files", ())]
    return files


def check_output(output: str, option: str, inputs) -> None:
    """Refuse an output (named `option` on the command line) that is one of the run's input
    files or a folder holding one: replacing it would delete the input."""
    out = os.path.realpath(output)
    for path in inputs:
        real = os.path.realpath(path)
        same = real == out
        if not same and os.path.exists(output) and os.path.exists(path):
            same = os.path.samefile(output, path)
        if same or real.startswith(out.rstrip(os.sep) + os.sep):
            what = "is" if same else "contains"
            raise click.UsageError(
                f"{option} {output!r} {what} the input file {path!r}; writing there would "
                f"destroy the input; choose another {option}"
            )


def exists_message(path: str) -> str:
    """The error for an output that exists without ``--overwrite``."""
    return f"{path} already exists; pass --overwrite to replace it, or choose another path"
