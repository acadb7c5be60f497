"""The ``ltdask`` command: ``info``, ``convert``, ``run`` and ``demo``."""

from __future__ import annotations

import ast
import contextlib
import os
import tempfile
import time
import warnings

import click
import numpy as np

UDF_NAMES = ("sum", "sumsig", "stddev", "com", "pick", "disk", "ring")


# -- schedulers ------------------------------------------------------------------------------
@contextlib.contextmanager
def scheduler_context(scheduler: str, workers: int | None):
    """Make `scheduler` the active dask scheduler: threads, processes, sync, distributed
    (a local cluster of `workers` processes) or the address of a running scheduler."""
    import dask

    if scheduler in ("threads", "processes", "sync", "synchronous"):
        config = {"scheduler": scheduler}
        if workers:
            config["num_workers"] = workers
        with dask.config.set(config):
            yield None
        return
    from distributed import Client, LocalCluster

    if scheduler in ("distributed", "local"):
        with (
            LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, ValueError, TypeError) as e:
        raise click.ClickException(
            f"--scheduler {scheduler!r}: not threads, processes, sync or distributed, and no "
            f"scheduler answers at that address ({e})"
        ) from None
    with client:
        yield client


def _shape(value: str | None):
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


def open_options(f):
    """The options every command that opens a dataset takes."""
    options = [
        click.option(
            "--nav-shape",
            callback=lambda c, p, v: _shape(v),
            help="scan shape, e.g. 128,128 (raw files; overrides headers)",
        ),
        click.option(
            "--sig-shape",
            callback=lambda c, p, v: _shape(v),
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


def _open(path, nav_shape, sig_shape, dtype, sync_offset, key):
    from ltdask.exceptions import DataSetError

    try:
        return open_path(path, nav_shape, sig_shape, dtype, sync_offset, key)
    except (DataSetError, FileNotFoundError, ValueError) as e:
        raise click.ClickException(str(e)) from None


def input_files(ds, *paths) -> list[str]:
    """The files a command reads: the paths it was given and every file of the dataset."""
    files = [os.fspath(p) for p in paths if p]
    files.append(os.fspath(ds.path)) if getattr(ds, "path", None) else None
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


def _warning_line(message, category, filename, lineno, file=None, line=None):
    click.echo(f"Warning: {message}", err=True)


class Group(click.Group):
    """Shows ltdask's errors as one ``Error:`` line and its warnings as ``Warning:`` lines."""

    def invoke(self, ctx):
        from ltdask.exceptions import LtdaskError

        previous = warnings.showwarning
        warnings.showwarning = _warning_line
        try:
            return super().invoke(ctx)
        except LtdaskError as e:
            raise click.ClickException(str(e)) from None
        finally:
            warnings.showwarning = previous


# -- the group -------------------------------------------------------------------------------
@click.group(cls=Group)
@click.version_option(package_name="ltdask")
@click.option(
    "--scheduler",
    default="threads",
    show_default=True,
    help="threads, processes, sync, distributed (a local cluster) or a scheduler "
    "address such as tcp://host:8786",
)
@click.option("--workers", type=int, default=None, help="threads or worker processes")
@click.pass_context
def main(ctx, scheduler, workers):
    """ltdask: 4D-STEM datasets and UDFs on dask."""
    ctx.obj = {"scheduler": scheduler, "workers": workers}


def _run_context(ctx):
    return scheduler_context(ctx.obj["scheduler"], ctx.obj["workers"])


@main.command()
@click.argument("path", type=click.Path(exists=True))
@open_options
def info(path, nav_shape, sig_shape, dtype, sync_offset, key):
    """Format, shapes, dtype, size, partitions and tiling of PATH."""
    from ltdask.io.open import detect_format

    ds = _open(path, nav_shape, sig_shape, dtype, sync_offset, key)
    parts = ds.get_partitions()
    scheme = ds.negotiate([], np.float32)
    rows = [
        ("path", path),
        ("format", detect_format(path, {"nav_shape": nav_shape} if nav_shape else {})),
        ("class", type(ds).__name__),
        ("nav shape", ds.nav_shape),
        ("sig shape", ds.sig_shape),
        ("dims", ", ".join(ds.dims)),
        ("dtype", ds.dtype),
        ("size", f"{ds.nbytes / 2**20:.1f} MiB"),
        ("frames in files", ds.image_count),
        *_present_rows(ds),
        ("sync offset", ds.sync_offset),
        ("partitions", f"{len(parts)} (nav chunks {_chunks(ds.nav_chunks)})"),
        ("tiles (float32)", f"{scheme.tileshape}, {len(scheme)} signal slices"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        click.echo(f"{k:<{width}}  {v}")


def _present_rows(ds) -> list:
    """A row that flags a nav shape asking for more frames than the files hold."""
    start, stop = getattr(ds, "present_range", (0, None))
    asked = getattr(ds, "num_frames", None)
    if stop is None or asked is None or stop - start >= asked:
        return []
    return [
        (
            "MISSING FRAMES",
            f"only {stop - start} of the {asked} frames the nav shape {tuple(ds.nav_shape)} "
            f"asks for are in the files (positions {start}:{stop}); the others read as zeros "
            "and are invalid",
        )
    ]


def _chunks(chunks) -> str:
    return " x ".join(f"{c[0]}" + (f"..{c[-1]}" if c[-1] != c[0] else "") for c in chunks)


@main.command()
@click.argument("source", type=click.Path(exists=True))
@click.argument("output", type=click.Path())
@open_options
@correction_options
@click.option("--out-dtype", help="dtype to store (default: the data's)")
@click.option("--overwrite", is_flag=True, help="replace OUTPUT if it exists")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def convert(
    ctx,
    source,
    output,
    nav_shape,
    sig_shape,
    dtype,
    sync_offset,
    key,
    dark,
    gain,
    excluded,
    out_dtype,
    overwrite,
    progress,
):
    """Convert SOURCE to a Zarr (v3) array OUTPUT, chunked by partition (corrected with
    --dark/--gain/--excluded, as floats)."""
    from ltdask.store import StoreReplaceError

    ds = _open(source, nav_shape, sig_shape, dtype, sync_offset, key)
    check_output(output, "OUTPUT", input_files(ds, source, dark, gain, excluded))
    corrections = load_corrections(dark, gain, excluded, ds.sig_shape)
    if out_dtype is not None:
        try:
            np.dtype(out_dtype)
        except TypeError:
            raise click.BadParameter(
                f"{out_dtype!r} is not a numpy dtype such as float32 or uint16",
                param_hint="--out-dtype",
            ) from None
    t0 = time.perf_counter()
    with _run_context(ctx):
        try:
            ds.to_zarr(
                output,
                dtype=out_dtype,
                mode="w" if overwrite else "w-",
                progress=progress,
                corrections=corrections,
            )
        except FileExistsError:
            raise click.ClickException(_exists(output)) from None
        except StoreReplaceError as e:
            raise click.ClickException(f"OUTPUT: {e}") from None
    click.echo(
        f"wrote {output}: {ds.shape.to_tuple()} {out_dtype or ds.dtype} "
        f"in {time.perf_counter() - t0:.1f} s"
    )


def _exists(path: str) -> str:
    return f"{path} already exists; pass --overwrite to replace it, or choose another path"


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def make_udf(name: str, params: dict, sig_shape):
    """A shipped UDF from its command-line name and ``key=value`` parameters."""
    from ltdask import masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF

    sy, sx = sig_shape[-2], sig_shape[-1]
    cy, cx = params.pop("cy", sy / 2), params.pop("cx", sx / 2)
    if name == "sum":
        return SumUDF(**params)
    if name == "sumsig":
        return SumSigUDF(**params)
    if name == "stddev":
        return StdDevUDF(**params)
    if name == "pick":
        return PickUDF(**params)
    if name == "com":
        return CoMUDF.with_params(cy=cy, cx=cx, **params)
    r = params.pop("r", min(sy, sx) / 4)
    if name == "disk":
        return ApplyMasksUDF([lambda: masks.circular(cx, cy, sx, sy, r)], **params)
    if name == "ring":
        ri = params.pop("ri", r / 2)
        return ApplyMasksUDF([lambda: masks.ring(cx, cy, sx, sy, r, ri)], **params)
    raise click.BadParameter(f"unknown UDF {name!r}; choose from {', '.join(UDF_NAMES)}")


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


@main.command()
@click.argument("udf_name", metavar="UDF", type=click.Choice(UDF_NAMES))
@click.argument("path", type=click.Path(exists=True))
@open_options
@correction_options
@click.option("--param", "-p", multiple=True, help="UDF parameter key=value (repeatable)")
@click.option("--roi", help="a .npy file of booleans, or slices such as 10:20,0:64")
@click.option("--out", required=True, type=click.Path(), help="results Zarr store")
@click.option("--overwrite", is_flag=True, help="replace --out if it exists")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def run(
    ctx,
    udf_name,
    path,
    nav_shape,
    sig_shape,
    dtype,
    sync_offset,
    key,
    dark,
    gain,
    excluded,
    param,
    roi,
    out,
    overwrite,
    progress,
):
    """Run a shipped UDF on PATH and write its results to a Zarr store."""
    import ltdask
    from ltdask.store import StoreReplaceError

    ds = _open(path, nav_shape, sig_shape, dtype, sync_offset, key)
    params = {}
    for p in param:
        if "=" not in p:
            raise click.BadParameter(f"--param {p!r}: expected key=value")
        k, v = p.split("=", 1)
        params[k.strip()] = _value(v.strip())
    try:
        udf = make_udf(udf_name, params, ds.sig_shape)
    except (TypeError, ValueError) as e:
        raise click.BadParameter(f"--param for {udf_name}: {e}") from None
    roi_mask = parse_roi(roi, ds.nav_shape)
    roi_file = roi if roi is not None and os.path.exists(roi) else None
    check_output(out, "--out", input_files(ds, path, roi_file, dark, gain, excluded))
    corrections = load_corrections(dark, gain, excluded, ds.sig_shape)
    t0 = time.perf_counter()
    with _run_context(ctx):
        try:
            lazy = udf.lazy(ds, roi=roi_mask, corrections=corrections)
            ltdask.to_zarr(lazy, out, mode="w" if overwrite else "w-", progress=progress)
        except FileExistsError:
            raise click.ClickException(_exists(out)) from None
        except StoreReplaceError as e:
            raise click.ClickException(f"--out: {e}") from None
        except (ltdask.UDFError, TypeError, ValueError) as e:
            raise click.ClickException(f"{type(udf).__name__}: {e}") from None
    click.echo(f"wrote {out}: {', '.join(lazy.data_vars)} in {time.perf_counter() - t0:.1f} s")


# -- demo ------------------------------------------------------------------------------------
def synthetic_scan(nav_shape=(64, 64), sig_shape=(128, 128), seed=0) -> tuple:
    """A diffraction disk whose position and intensity vary across the scan, with Poisson
    noise (uint16); returns the scan and the true disk shifts ``(y, x)`` per position."""
    rng = np.random.default_rng(seed)
    ny, nx = nav_shape
    sy, sx = sig_shape
    yy, xx = np.mgrid[:ny, :nx]
    shift_y = 3 * np.sin(2 * np.pi * xx / nx) + 1.5 * np.cos(2 * np.pi * yy / ny)
    shift_x = 3 * np.cos(2 * np.pi * yy / ny) - 1.0 * np.sin(4 * np.pi * xx / nx)
    intensity = 40 + 30 * np.exp(-((yy - ny / 2) ** 2 + (xx - nx / 2) ** 2) / (ny * nx / 10))
    dy, dx = np.mgrid[:sy, :sx]
    radius = min(sy, sx) / 8
    out = np.empty((ny, nx, sy, sx), dtype=np.uint16)
    for y in range(ny):
        d2 = (dy[None] - (sy / 2 + shift_y[y])[:, None, None]) ** 2
        d2 = d2 + (dx[None] - (sx / 2 + shift_x[y])[:, None, None]) ** 2
        disk = np.clip(radius + 0.5 - np.sqrt(d2), 0, 1)
        # diffuse scattering that grows where the disk is dimmer (a "dark field" signal)
        halo = (80 - intensity[y])[:, None, None] * 0.02 * np.exp(-d2 / (2 * (3 * radius) ** 2))
        out[y] = rng.poisson(1 + disk * intensity[y][:, None, None] + halo)
    return out, np.stack([shift_y, shift_x], axis=-1)


def _png(path: str, image: np.ndarray) -> None:
    """A grey image (2-D) or RGB (3-D, 0..1) as an 8-bit PNG, scaled to its range."""
    from PIL import Image

    img = np.nan_to_num(np.asarray(image, dtype=np.float64))
    if img.ndim == 2:
        lo, hi = np.percentile(img, [0.5, 99.5])
        img = np.clip((img - lo) / (hi - lo if hi > lo else 1), 0, 1)
    pixels = (img * 255).round().astype(np.uint8)
    scale = max(1, 256 // max(pixels.shape[:2]))
    pixels = pixels.repeat(scale, axis=0).repeat(scale, axis=1)
    Image.fromarray(pixels).save(path)


def field_colours(fy: np.ndarray, fx: np.ndarray) -> np.ndarray:
    """Direction as hue, magnitude as brightness: an RGB image of a vector field."""
    hue = (np.arctan2(fy, fx) / (2 * np.pi)) % 1.0
    mag = np.hypot(fy, fx)
    value = np.clip(mag / (np.nanpercentile(mag, 99) or 1), 0, 1)
    h6 = hue * 6
    c = value
    x = c * (1 - np.abs(h6 % 2 - 1))
    zero = np.zeros_like(c)
    sector = np.floor(h6).astype(int) % 6
    choices = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    rgb = np.zeros((*c.shape, 3))
    for s, (r, g, b) in enumerate(choices):
        sel = sector == s
        rgb[sel] = np.stack([r[sel], g[sel], b[sel]], axis=-1)
    return rgb


#: the files ``ltdask demo`` writes into its folder
DEMO_FILES = (
    "scan.raw",
    "results.zarr",
    "bright_field.png",
    "dark_field.png",
    "com_field.png",
    "com_magnitude.png",
    "divergence.png",
    "stddev.png",
    "mean_frame.png",
)


def _check_demo_folder(out_dir: str) -> None:
    """Refuse a folder where the demo would overwrite files it did not write: it rewrites its
    own files only where an earlier demo left them (its ``results.zarr`` store is there)."""
    from ltdask.store import ZARR_ROOT_FILES

    taken = [n for n in DEMO_FILES if os.path.lexists(os.path.join(out_dir, n))]
    store = os.path.join(out_dir, "results.zarr")
    earlier_demo = any(os.path.isfile(os.path.join(store, n)) for n in ZARR_ROOT_FILES)
    if taken and not earlier_demo:
        raise click.BadParameter(
            f"{out_dir!r} already holds {', '.join(taken)}, which the demo would overwrite; "
            "choose another folder",
            param_hint="--out",
        )


@main.command()
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="folder for the scan and the results (default: a new temporary folder)",
)
@click.option("--nav", default="64,64", show_default=True, callback=lambda c, p, v: _shape(v))
@click.option("--sig", default="128,128", show_default=True, callback=lambda c, p, v: _shape(v))
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.pass_context
def demo(ctx, out_dir, nav, sig, progress):
    """Write a synthetic scan; run virtual bright/dark field, centre of mass and standard
    deviation in one pass; write the results to Zarr and PNG images."""
    import xarray as xr

    import ltdask
    from ltdask import masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, StdDevUDF

    for option, shape in (("--nav", nav), ("--sig", sig)):
        if len(shape) != 2 or min(shape) < 1:
            raise click.BadParameter(
                f"{','.join(map(str, shape))!r}: expected two sizes >= 1, such as 64,64",
                param_hint=option,
            )
    out_dir = out_dir or tempfile.mkdtemp(prefix="ltdask-demo-")
    _check_demo_folder(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    scan_path = os.path.join(out_dir, "scan.raw")
    data, _ = synthetic_scan(nav, sig)
    data.tofile(scan_path)
    click.echo(
        f"wrote {scan_path}: nav {nav}, sig {sig}, uint16, "
        f"{data.nbytes / 2**20:.0f} MiB (a disk that moves and dims across the scan)"
    )
    ds = ltdask.open_raw(scan_path, nav_shape=nav, sig_shape=sig, dtype="uint16")
    sy, sx = sig
    r = min(sy, sx) / 8
    # the dark-field ring spans from outside the disk to the frame's edge (kept a valid
    # ring, outer above inner, on frames too small for that)
    ring_inner = r * 2.2
    ring_outer = max(min(sy, sx) / 2 - 1, ring_inner + 1)
    bf = ApplyMasksUDF(
        [
            lambda: masks.circular(sx / 2, sy / 2, sx, sy, r * 1.6),
            lambda: masks.ring(sx / 2, sy / 2, sx, sy, ring_outer, ring_inner),
        ]
    )
    com = CoMUDF.with_params(cy=sy / 2, cx=sx / 2, r=r * 2)
    std = StdDevUDF()
    t0 = time.perf_counter()
    with _run_context(ctx):
        lazy = ltdask.lazy(ds, [bf, com, std])
        store = os.path.join(out_dir, "results.zarr")
        ltdask.to_zarr(
            dict(zip(("virtual_detectors", "com", "stddev"), lazy, strict=True)),
            store,
            mode="w",
            progress=progress,
        )
    elapsed = time.perf_counter() - t0
    vd = xr.open_zarr(store, group="virtual_detectors")["intensity"].values
    com_res = xr.open_zarr(store, group="com")
    std_res = xr.open_zarr(store, group="stddev")
    images = {
        "bright_field.png": vd[..., 0],
        "dark_field.png": vd[..., 1],
        "com_field.png": field_colours(com_res["field_y"].values, com_res["field_x"].values),
        "com_magnitude.png": com_res["magnitude"].values,
        "divergence.png": com_res["divergence"].values,
        "stddev.png": std_res["std"].values,
        "mean_frame.png": np.log1p(std_res["mean"].values),
    }
    for name, image in images.items():
        _png(os.path.join(out_dir, name), image)
    mb = data.nbytes / 2**20
    click.echo(
        f"ran virtual bright/dark field, CoM and StdDev in one pass: {elapsed:.2f} s "
        f"({mb / elapsed:.0f} MiB/s, {len(ds.get_partitions())} partitions)"
    )
    click.echo(f"wrote {store} (groups virtual_detectors, com, stddev)")
    for name in images:
        click.echo(f"wrote {os.path.join(out_dir, name)}")


if __name__ == "__main__":
    main()
