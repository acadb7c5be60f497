"""LiberTEM-live 0.3 on a Merlin stream: the comparison of ``bench_live.py``.

Runs in LiberTEM-live's own virtual environment (``/tmp/ltlive-venv/bin/python``; ltdask is
never imported here, nor LiberTEM by ltdask). It opens a connection to the data port of a
running simulator (``ltdask simulate merlin``, which sends an acquisition to each new data
connection and answers the control port's GETs), waits for the acquisition passively, and
runs Sum, CoM (inside a radius) and one ring (``ApplyMasksUDF``) together with LiberTEM's
pipelined executor, twice (the first run warms up). Prints one JSON line: the seconds from
the second acquisition's header to its results, the frames, and the results' totals (to
check that every frame was processed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-port", type=int, required=True)
    parser.add_argument("--control-port", type=int, required=True)
    parser.add_argument("--nav", type=int, nargs=2, required=True)
    parser.add_argument("--sig", type=int, nargs=2, required=True)
    parser.add_argument("--frames-per-partition", type=int, default=None)
    parser.add_argument("--runs", type=int, default=2, help="acquisitions, the last timed")
    args = parser.parse_args()

    import numpy as np
    from libertem.masks import ring
    from libertem.udf.com import CoMUDF
    from libertem.udf.masks import ApplyMasksUDF
    from libertem.udf.sum import SumUDF
    from libertem_live.api import LiveContext

    sig_h, sig_w = args.sig
    cy, cx, r = (sig_h - 1) / 2, (sig_w - 1) / 2, min(sig_h, sig_w) / 2

    def ring_mask():
        return ring(cx, cy, sig_w, sig_h, r, r / 3)

    udfs = [SumUDF(), CoMUDF.with_params(cy=cy, cx=cx, r=r), ApplyMasksUDF([ring_mask])]
    with LiveContext() as ctx:
        for _ in range(args.runs):  # (the last one timed: the first ones warm up)
            # a connection per acquisition: the simulator sends one to each new connection
            with ctx.make_connection("merlin").open(
                data_host="127.0.0.1",
                data_port=args.data_port,
                api_host="127.0.0.1",
                api_port=args.control_port,
            ) as conn:
                pending = conn.wait_for_acquisition(timeout=30)
                t0 = time.perf_counter()
                aq = ctx.make_acquisition(
                    conn=conn,
                    pending_aq=pending,
                    nav_shape=tuple(args.nav),
                    frames_per_partition=args.frames_per_partition,
                )
                total, com, rings = ctx.run_udf(dataset=aq, udf=udfs)
                seconds = time.perf_counter() - t0
            print(f"run: {seconds:.2f} s", file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "seconds": seconds,
                "frames": int(np.prod(args.nav)),
                "sum": float(np.asarray(total["intensity"].data, np.float64).sum()),
                "ring": float(np.asarray(rings["intensity"].data, np.float64).sum()),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
