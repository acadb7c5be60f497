"""What the commands parse alike: the options that open a dataset, detector corrections,
ROIs, ``key=value`` parameters, and the checks that keep outputs off the inputs."""

from __future__ import annotations

import ast
import functools
import os

import click
import numpy as np

from ltdask.cli._calibration import calibrate, calibration_option
from ltdask.cli._errors import OPTION_OF_KEYWORD, UserError, cli_terms


def parse_shape(value: str | None) -> tuple[int, ...] | None:
    """A shape such as ``128,128`` or ``128x128``."""
    if value is None:
        return None
    try:
        shape = tuple(int(v) for v in value.replace("x", ",").split(",") if v.strip())
    except ValueError:
        shape = ()
    if not shape:
        raise click.BadParameter(f"{value!r} is not a shape like 128,128")
    return shape


#: the options that open a dataset, by the keyword of `ltdask.open` they set (the
#: calibrations are set after opening, see `calibrate`)
OPEN_OPTIONS = (
    "nav_shape",
    "sig_shape",
    "dtype",
    "sync_offset",
    "key",
    "format",
    "nav_calibration",
    "sig_calibration",
)


def open_path(
    path: str,
    nav_shape=None,
    sig_shape=None,
    dtype=None,
    sync_offset=0,
    key=None,
    format=None,
    nav_calibration=None,
    sig_calibration=None,
):
    """Open `path` with `ltdask.open`, passing only the options that were given, and
    calibrate it with the calibration options (`parse_calibration`'s specs); a format
    that cannot be told, lacks an option or does not take one is a `UserError` that names
    the options."""
    from ltdask.exceptions import DataSetError
    from ltdask.io.open import detect_format, open_dataset
    from ltdask.io.registry import format_names, get_format

    given = {
        "nav_shape": nav_shape,
        "sig_shape": sig_shape,
        "dtype": dtype,
        "sync_offset": sync_offset,
        "key": key,
    }
    kwargs = {k: v for k, v in given.items() if v}
    try:
        fmt = get_format(format or detect_format(path, kwargs), where=path)
    except DataSetError as e:
        if format is not None or "cannot tell the format" not in str(e):
            raise
        raise UserError(
            f"{path}: cannot tell its format from its name or first bytes; give --format "
            f"({', '.join(format_names())}; raw also needs --nav-shape, --sig-shape, --dtype)"
        ) from None
    aliases = {given for given, _ in fmt.keyword_aliases}
    accepted = fmt.keyword_names()
    unknown = [k for k in kwargs if accepted is not None and k not in {*accepted, *aliases}]
    if unknown:
        takes = [
            OPTION_OF_KEYWORD[k] for k in OPEN_OPTIONS if k in (accepted or ()) or k in aliases
        ]
        raise UserError(
            f"{_options(unknown)}: {path} is read as {fmt.name} data, which does not take "
            f"{'it' if len(unknown) == 1 else 'them'}"
            + (f" (it takes {', '.join(takes)})" if takes else "")
        )
    missing = [k for k in fmt.required if k not in kwargs]
    if missing:
        raise UserError(
            f"{path} is read as {fmt.name} data, which has no header: give {_options(missing)}"
        )
    ds = open_dataset(path, format=fmt.name, **kwargs)
    calibrate(ds, "--nav-calibration", nav_calibration)
    calibrate(ds, "--sig-calibration", sig_calibration)
    return ds


def _options(keywords) -> str:
    names = [OPTION_OF_KEYWORD.get(k, k) for k in keywords]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _open(path, opening: dict):
    from ltdask.exceptions import DataSetError

    try:
        return open_path(path, **opening)
    except (DataSetError, FileNotFoundError, ValueError) as e:
        raise UserError(cli_terms(str(e))) from None


def open_options(f):
    """The options every command that opens a dataset takes, handed to it as one dict,
    ``opening`` (for :func:`_open`)."""
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
        click.option(
            "--format",
            help="the file's format, e.g. raw, npy, hdf5, mib (default: told from the name "
            "and first bytes)",
        ),
        calibration_option(
            "--nav-calibration",
            "the scan step with units, e.g. 1.5nm (over what the file says); one per dim: "
            "1.5nm,2nm; an origin after @: 1.5nm@-3",
        ),
        calibration_option(
            "--sig-calibration",
            "the detector pixel with units, e.g. 0.2mrad or 0.01 1/nm (over what the file "
            "says); an origin after @: 0.2mrad@-3.2, or 0.2mrad@centre (0 at the centre)",
        ),
    ]

    @functools.wraps(f)
    def command(*args, **kwargs):
        opening = {k: kwargs.pop(k) for k in OPEN_OPTIONS}
        return f(*args, opening=opening, **kwargs)

    for option in reversed(options):
        command = option(command)
    return command


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
    except UserError:
        raise UserError(
            f"{option} {path}: neither a .npy file nor a series in a format ltdask can tell "
            "from its name"
        ) from None
    except (DataSetError, OSError, ValueError) as e:
        raise UserError(f"{option} {path}: {cli_terms(str(e))}") from None
    if arr.shape != tuple(sig_shape):
        raise UserError(
            f"{option} {path} holds frames of shape {arr.shape}; expected the scan's frame "
            f"shape {tuple(sig_shape)}"
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
        raise UserError(f"{hint}: {e}" if hint else str(e)) from None
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
            raise UserError(f"--roi {spec!r}: not a .npy file of booleans") from None
        if roi.shape != tuple(nav_shape) and roi.shape != (int(np.prod(nav_shape)),):
            raise UserError(
                f"--roi {spec!r}: an array of shape {roi.shape}; expected the nav shape "
                f"{tuple(nav_shape)}"
            )
        roi = roi.astype(bool)
        if not roi.any():
            raise UserError(f"--roi {spec!r}: the array selects no positions")
        return roi
    if spec.lower().endswith(".npy"):
        raise UserError(f"--roi {spec!r}: no such file")
    roi = np.zeros(nav_shape, dtype=bool)
    try:
        index = tuple(
            slice(*(int(p) if p else None for p in part.split(":"))) if ":" in part else int(part)
            for part in spec.split(",")
        )
        roi[index] = True
    except (ValueError, IndexError) as e:
        raise UserError(
            f"--roi {spec!r}: not slices of the nav shape {tuple(nav_shape)} such as "
            f"10:20,0:64 ({e})"
        ) from None
    if not roi.any():
        raise UserError(f"--roi {spec!r} selects no positions of the nav shape {tuple(nav_shape)}")
    _check_inside(spec, index, nav_shape)
    return roi


def _check_inside(spec: str, index: tuple, nav_shape) -> None:
    """Refuse slices that reach past the scan (numpy would cut them to it silently)."""
    parts = spec.split(",")
    for dim, (part, item, size) in enumerate(zip(parts, index, nav_shape, strict=False)):
        bounds = (item.start, item.stop) if isinstance(item, slice) else ()
        if any(b is not None and not -size <= b <= size for b in bounds):
            raise UserError(
                f"--roi {spec!r}: {part.strip()} reaches outside the scan, whose nav shape is "
                f"{tuple(nav_shape)} (dim {dim} holds positions 0 to {size - 1}); give slices "
                f"inside it, such as 0:{size}"
            )


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
            raise UserError(
                f"{option} {output!r} {what} the input file {path!r}; writing there would "
                f"destroy the input; choose another {option}"
            )


def exists_message(path: str) -> str:
    """The error for an output that exists without ``--overwrite``."""
    return f"{path} already exists; pass --overwrite to replace it, or choose another path"


#: what the commands write, by the suffix of the output path (none: a Zarr store too)
OUTPUT_SUFFIXES = {".zarr": "a Zarr store", "": "a Zarr store"}


def check_suffix(output: str, option: str) -> None:
    """Refuse an output whose suffix names a format the commands do not write."""
    suffix = os.path.splitext(os.path.normpath(output))[1].lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise UserError(
            f"{option} {output!r}: ltdask writes Zarr stores, not {suffix} files; give a path "
            "ending in .zarr (or without a suffix)"
        )
