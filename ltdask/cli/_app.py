"""The ``ltdask`` click group: global options, error and warning display, schedulers."""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any

import click

from ltdask.cli._errors import UserError, report

#: the schedulers ``--scheduler`` names (else it is a scheduler's address)
SCHEDULERS = ("threads", "processes", "sync", "synchronous", "distributed", "local")


@contextlib.contextmanager
def scheduler_context(scheduler: str, workers: int | None) -> Iterator[Any]:
    """Make `scheduler` the active dask scheduler: threads, processes, sync, distributed
    (a local cluster of `workers` processes) or the address of a running scheduler."""
    import dask

    if scheduler in ("threads", "processes", "sync", "synchronous"):
        config: dict[str, Any] = {"scheduler": scheduler}
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
        raise UserError(
            f"--scheduler {scheduler!r}: no dask scheduler answers at that address ({e})"
        ) from None
    with client:
        yield client


@contextlib.contextmanager
def run_context(ctx: click.Context) -> Iterator[Any]:
    """The scheduler that the group's ``--scheduler`` and ``--workers`` ask for; with
    ``--precompile``, ltdask's kernels compiled first (here, and on every worker of a
    distributed scheduler)."""
    with scheduler_context(ctx.obj["scheduler"], ctx.obj["workers"]) as client:
        if ctx.obj.get("precompile"):
            _precompile(client)
        yield client


def _precompile(client) -> None:
    from ltdask.udf.warmup import warmup

    reports = [warmup()]
    if client is not None:
        reports += list(client.run(warmup).values())
    compiled = sum(r["compiled"] for r in reports)
    seconds = max(r["seconds"] for r in reports)
    where = "here" if client is None else f"here and on {len(reports) - 1} workers"
    click.echo(
        f"precompiled {where}: {compiled} kernel signatures compiled in {seconds:.1f} s",
        err=True,
    )


def _check_scheduler(ctx, param, value: str) -> str:
    if value in SCHEDULERS or "://" in value or re.fullmatch(r"[\w.\-]+:\d+", value):
        return value
    raise click.BadParameter(
        f"{value!r}: expected threads, processes, sync, distributed or a scheduler address "
        "such as tcp://host:8786"
    )


def _warning_line(message, category, filename, lineno, file=None, line=None):
    click.echo(f"Warning: {message}", err=True)


class Group(click.Group):
    """Shows errors as one ``Error:`` line (see :mod:`ltdask.cli._errors`) and warnings as
    ``Warning:`` lines."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except Exception as e:
            raise report(e, debug=False, group=self) from None

    def invoke(self, ctx):
        previous = warnings.showwarning
        warnings.showwarning = _warning_line
        try:
            return super().invoke(ctx)
        except Exception as e:
            raise report(e, debug=bool(ctx.params.get("debug")), group=self) from None
        finally:
            warnings.showwarning = previous


@click.group(cls=Group)
@click.version_option(package_name="ltdask")
@click.option(
    "--scheduler",
    default="threads",
    show_default=True,
    callback=_check_scheduler,
    help="threads, processes, sync, distributed (a local cluster) or a scheduler "
    "address such as tcp://host:8786",
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=None, help="threads or worker processes"
)
@click.option(
    "--precompile",
    is_flag=True,
    help="compile ltdask's kernels before the work starts, on every worker of a "
    "distributed scheduler too (see: ltdask warmup)",
)
@click.option("--debug", is_flag=True, help="show the traceback of an error, not just its one line")
@click.pass_context
def main(ctx, scheduler, workers, precompile, debug):
    """ltdask: 4D-STEM datasets and UDFs on dask.

    A mistake in a command's options or files ends it with one "Error:" line and exit
    code 2 (--debug shows the traceback); an error inside ltdask itself shows its traceback.
    """
    ctx.obj = {"scheduler": scheduler, "workers": workers, "precompile": precompile}
