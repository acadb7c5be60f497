"""LiberTEM-live 0.3's side of ``live_dectris.py``: Sum + CoM + one ring on a DECTRIS stream.

Run by ``live_dectris.py`` with the separate venv's interpreter (LiberTEM-live and LiberTEM
are never imported by ltdask): ``/tmp/ltlive-venv/bin/python live_dectris_libertem.py
API_PORT DATA_PORT FRAMES SIG_Y SIG_X [REPEATS]``. It opens a DECTRIS connection to the
simulator (REST API and zmq stream on 127.0.0.1), runs one small acquisition to warm up,
then REPEATS acquisitions of FRAMES frames (``exte``: the simulator arms, sends the series
header and the frames) and prints one JSON line per run: frames, seconds (run_udf's wall
time, arming included) and whether every frame arrived.
"""

from __future__ import annotations

import json
import sys
import time

import psutil


def cpu_seconds() -> float:
    """CPU time of this process and its workers (user + system)."""
    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def main() -> None:
    api_port, data_port, frames, sig_y, sig_x = (int(a) for a in sys.argv[1:6])
    repeats = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    from libertem.masks import ring
    from libertem.udf.com import CoMUDF
    from libertem.udf.masks import ApplyMasksUDF
    from libertem.udf.sum import SumUDF
    from libertem_live.api import LiveContext

    def udfs():
        def factory():
            centre = (sig_x / 2, sig_y / 2)
            return ring(*centre, sig_x, sig_y, radius=sig_x / 3, radius_inner=sig_x / 6)

        return [SumUDF(), CoMUDF.with_params(), ApplyMasksUDF(mask_factories=[factory])]

    width = 64
    with LiveContext() as ctx:
        conn = ctx.make_connection("dectris").open(
            api_host="127.0.0.1", api_port=api_port, data_host="127.0.0.1", data_port=data_port
        )
        with conn:
            for count in [width * 4] + [frames] * repeats:
                nav = (count // width, width)
                aq = ctx.make_acquisition(
                    conn=conn,
                    nav_shape=nav,
                    controller=conn.get_active_controller(trigger_mode="exte"),
                )
                cpu0, t0 = cpu_seconds(), time.perf_counter()
                result = ctx.run_udf(dataset=aq, udf=udfs())
                seconds = time.perf_counter() - t0
                cpu = cpu_seconds() - cpu0
                per_frame = result[2]["intensity"].data
                line = {"frames": count, "seconds": seconds, "nav": nav, "cpu_seconds": cpu}
                line["complete"] = bool(result[0]["intensity"].data.sum() > 0)
                line["ring_sum"] = float(per_frame.sum())
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
