"""``ltdask run``: one of the shipped analyses over a dataset, its results to a Zarr store.

``ltdask run`` is a group with one command per analysis of :mod:`ltdask.cli._analyses`
(``ltdask run ANALYSIS PATH ...``), so that ``ltdask run --help`` lists the analyses and
``ltdask run ANALYSIS --help`` the typed ``-p NAME=VALUE`` parameters of one."""

from __future__ import annotations

import contextlib
import os
import time

import click

from ltdask.cli._analyses import ANALYSES, Analysis, beam_geometry, find
from ltdask.cli._app import run_context
from ltdask.cli._errors import UserError
from ltdask.cli._options import (
    _open,
    check_output,
    check_suffix,
    correction_options,
    exists_message,
    input_files,
    load_corrections,
    open_options,
    parse_roi,
)
from ltdask.cli._pictures import check_pictures, draw_pictures, picture_paths, result_pictures

UDF_NAMES = tuple(ANALYSES)


def make_udf(name: str, params: dict, sig_shape):
    """A shipped UDF from its analysis name and parameter values."""
    return find(name, ANALYSES).build(dict(params), tuple(sig_shape))


class AnalysisCommand(click.Command):
    """``ltdask run NAME``: its help ends with the analysis's parameters."""

    def __init__(self, analysis: Analysis, **kwargs):
        super().__init__(analysis.name, **kwargs)
        self.analysis = analysis

    def format_epilog(self, ctx, formatter):
        params = [p.describe() for p in self.analysis.parameters]
        with formatter.section("Parameters (-p NAME=VALUE)"):
            if params:
                formatter.write_dl(params)
            else:
                formatter.write_text("none")
        super().format_epilog(ctx, formatter)


class RunGroup(click.Group):
    """The analyses in catalogue order; an unknown name gets the closest as a hint."""

    def list_commands(self, ctx):
        return list(ANALYSES)

    def get_command(self, ctx, cmd_name):
        analysis = ANALYSES.get(cmd_name)
        return None if analysis is None else _command(analysis)

    def resolve_command(self, ctx, args):
        if args and not args[0].startswith("-"):
            find(args[0], ANALYSES)  # a UserError with a suggestion
        return super().resolve_command(ctx, args)


@click.group(cls=RunGroup, subcommand_metavar="ANALYSIS PATH [OPTIONS]", options_metavar="")
def run():
    """Run an analysis on PATH and write its results to a Zarr store (--out). Each
    analysis takes its parameters as -p NAME=VALUE; ltdask run ANALYSIS --help lists them."""


def _command(analysis: Analysis) -> click.Command:
    @click.pass_context
    def callback(ctx, **kwargs):
        return _run(analysis, ctx, **kwargs)

    decorators = [
        click.argument("path", type=click.Path(exists=True)),
        open_options,
        correction_options,
        click.option(
            "--param", "-p", multiple=True, help="a parameter NAME=VALUE (repeatable; below)"
        ),
        click.option("--roi", help="a .npy file of booleans, or slices such as 10:20,0:64"),
        click.option("--out", required=True, type=click.Path(), help="results Zarr store"),
        click.option(
            "--overwrite",
            is_flag=True,
            help="replace --out (and the pictures ltdask drew beside it) if it exists",
        ),
        click.option(
            "--png/--no-png",
            default=True,
            show_default=True,
            help="draw a PNG of every 2-D result beside --out: OUT.NAME.png",
        ),
        click.option(
            "--gpus",
            callback=_check_gpus,
            help="GPU workers: a count (2) or device ids (0,2); the run goes to a local "
            "cluster of a worker per GPU and --workers CPU workers (default: one per core)",
        ),
        click.option(
            "--progress/--no-progress",
            default=None,
            help="A bar of the partitions done (default: once a run takes a few seconds, in "
            "a terminal).",
        ),
    ]
    for decorate in reversed(decorators):
        callback = decorate(callback)
    params = callback.__click_params__  # type: ignore[attr-defined]
    return AnalysisCommand(
        analysis,
        callback=callback,
        params=list(reversed(params)),  # in the order @click.command gives them
        help=f"{analysis.summary}\n\nWrites its results to the Zarr store --out.",
        short_help=analysis.summary,
    )


def _check_gpus(ctx, param, value: str | None):
    """``--gpus``: a count or comma-separated device ids, as `gpu_ids` takes them."""
    if value is None:
        return None
    try:
        parts = [int(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: expected a number of GPUs (2) or device ids (0,2)"
        ) from None
    return parts[0] if len(parts) == 1 and "," not in value else parts


@contextlib.contextmanager
def _gpu_cluster(ctx, gpus):
    """With `gpus`, a client of a new local cluster of GPU and CPU workers
    (`ltdask.runtime.gpu_cluster`), closed afterwards; else None."""
    if gpus is None:
        yield None
        return
    from ltdask.exceptions import ExecutorSpecException
    from ltdask.runtime.gpu_cluster import gpu_ids, start_local

    if ctx.obj["scheduler"] != "threads":
        raise UserError(
            f"--gpus starts a local cluster of its own: leave out --scheduler "
            f"{ctx.obj['scheduler']!r} (or start GPU workers there with --resources GPU=1)"
        )
    try:
        written = ",".join(map(str, gpus)) if isinstance(gpus, list) else gpus
        ids = gpu_ids(gpus, where="ltdask run", given=f"--gpus {written}")
    except ExecutorSpecException as e:
        raise UserError(str(e)) from None
    from ltdask.compat.devices import detect

    cpus = ctx.obj["workers"] or len(detect()["cpus"])
    client = start_local(cpus, ids)
    try:
        yield client
    finally:
        client.close()
        client.cluster.close()


@contextlib.contextmanager
def _scheduler(ctx, client):
    """The group's scheduler (`run_context`), or `client` (`_gpu_cluster`'s) where given."""
    if client is None:
        with run_context(ctx) as active:
            yield active
        return
    import dask

    with client.as_current(), dask.config.set(scheduler=client):
        yield client


def _run(
    analysis,
    ctx,
    path,
    opening,
    dark,
    gain,
    excluded,
    param,
    roi,
    out,
    overwrite,
    png,
    gpus,
    progress,
):
    values = analysis.parse(param)
    ds = _open(path, opening)
    roi_mask = parse_roi(roi, ds.nav_shape)
    roi_file = roi if roi is not None and os.path.exists(roi) else None
    check_output(out, "--out", input_files(ds, path, roi_file, dark, gain, excluded))
    check_suffix(out, "--out")
    corrections = load_corrections(dark, gain, excluded, ds.sig_shape)
    with _gpu_cluster(ctx, gpus) as client:
        written = (out, overwrite, png, progress)
        _analyse(analysis, ctx, client, ds, values, roi_mask, corrections, written)


def _analyse(analysis, ctx, client, ds, values, roi_mask, corrections, written) -> None:
    """Run `analysis` on `ds` (on `client` where given) and write its results."""
    import ltdask
    from ltdask.store import StoreReplaceError

    out, overwrite, png, progress = written
    with _scheduler(ctx, client):
        found = beam_geometry(analysis.name, values, ds, roi_mask, corrections)
    if found is not None:
        click.echo(found)
    try:
        udf = analysis.build(values, tuple(ds.sig_shape))
    except (TypeError, ValueError) as e:
        raise UserError(f"-p for {analysis.name}: {e}") from None
    nav_dims, sig_dims = ds.dims[: len(ds.nav_shape)], ds.dims[len(ds.nav_shape) :]
    t0 = time.perf_counter()
    with _scheduler(ctx, client):
        try:
            lazy = udf.lazy(ds, roi=roi_mask, corrections=corrections)
            if png:
                pictures = result_pictures(lazy, nav_dims, sig_dims)
                check_pictures(picture_paths(out, pictures).values(), overwrite)
            ltdask.to_zarr(lazy, out, mode="w" if overwrite else "w-", progress=progress)
        except FileExistsError:
            raise UserError(exists_message(out)) from None
        except StoreReplaceError as e:
            raise UserError(f"--out: {e}") from None
        except (ltdask.UDFError, TypeError, ValueError) as e:
            raise UserError(f"{analysis.name} ({type(udf).__name__}): {e}") from None
    click.echo(f"wrote {out}: {', '.join(lazy.data_vars)} in {time.perf_counter() - t0:.1f} s")
    if png:
        for picture in draw_pictures(out, nav_dims, sig_dims):
            click.echo(f"wrote {picture}")
