"""The ``ltdask`` click group: global options, error and warning display, schedulers."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import click


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
        raise click.ClickException(
            f"--scheduler {scheduler!r}: not threads, processes, sync or distributed, and no "
            f"scheduler answers at that address ({e})"
        ) from None
    with client:
        yield client


def run_context(ctx: click.Context) -> contextlib.AbstractContextManager:
    """The scheduler that the group's ``--scheduler`` and ``--workers`` ask for."""
    return scheduler_context(ctx.obj["scheduler"], ctx.obj["workers"])


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
