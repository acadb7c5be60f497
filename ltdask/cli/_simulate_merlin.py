"""``ltdask simulate merlin``: a recorded ``.mib`` acquisition served as a Merlin on 127.0.0.1."""

from __future__ import annotations

import click


@click.command("merlin")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--port", type=int, default=6342, show_default=True, help="Data port (0: any free).")
@click.option("--control-port", type=int, default=None, help="Control port (0: any free).")
@click.option("--rate", type=float, default=None, help="Frames per second [default: unpaced].")
@click.option("--max-frames", type=int, default=None, help="Stop after sending this many frames.")
@click.option(
    "--max-seconds", type=float, default=3600, show_default=True, help="Stop after this long."
)
@click.option(
    "--repeat", type=int, default=1, show_default=True, help="File passes per acquisition."
)
@click.option("--drop", type=int, multiple=True, help="Index of a frame never sent.")
@click.option("--duplicate", type=int, multiple=True, help="Index of a frame sent twice.")
@click.option("--reorder", is_flag=True, help="Send the frames in swapped pairs.")
@click.option("--cut-after", type=int, default=None, help="Close the connection after N frames.")
@click.option("--stall-after", type=int, default=None, help="Stop sending after N frames.")
@click.option(
    "--wait-trigger",
    is_flag=True,
    help="Send the header on CMD,STARTACQUISITION and the frames on CMD,SOFTTRIGGER.",
)
@click.option(
    "--garbage",
    is_flag=True,
    help="Send 21 KiB of junk as a client connects (a client drains it). Implies --wait-trigger.",
)
def merlin(path, **options) -> None:
    """Serve the Merlin acquisition PATH (.hdr or .mib) on 127.0.0.1, as the detector's
    data port (and control port) would send it. Ctrl-C stops it."""
    from ltdask.acquire.simulate.merlin import MerlinSimulator

    options["wait_trigger"] = options["wait_trigger"] or options["garbage"]
    if options["wait_trigger"] and options["control_port"] is None:
        flag = "--garbage" if options["garbage"] else "--wait-trigger"
        raise click.BadParameter("needs --control-port (0: any)", param_hint=flag)
    try:
        sim = MerlinSimulator(path, **options)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    sim.start()
    try:
        control = "" if options["control_port"] is None else f", control port {sim.control_port}"
        click.echo(
            f"merlin simulator: {sim.num_frames} frames of {path} on 127.0.0.1, data port "
            f"{sim.port}{control}; Ctrl-C stops it",
        )
        sim.wait()
    except KeyboardInterrupt:
        click.echo("merlin simulator: stopped")
    finally:
        sim.stop()
