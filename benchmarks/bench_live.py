"""Live acquisitions: frames per second without loss, against the simulator's own ceiling
and LiberTEM-live 0.3 on the same stream.

Run as ``python benchmarks/bench_live.py`` (``--streams merlin-raw1 ...`` for some,
``--seconds 60`` for a long run of each stream paced at the detector's top rate through
``ltdask.iter`` (its steps take the partitions as they complete), its memory sampled each
second,
``--no-libertem`` without the comparison, ``--quick`` for a check with few frames).

Each stream of `STREAMS` is served by the package's simulator in a process of its own
(``ltdask simulate merlin FILE.hdr --port 0 --control-port 0 --repeat R``: a ``.mib`` set
written by the tests' writer, ``tests/helpers/mibfiles.py``, of random counts, replayed
unpaced, a new acquisition for each data connection); the receivers take every frame (TCP
pushes back on the simulator when a receiver falls behind, as it does on a Merlin: the
rate measured is the highest rate sustained with no frame lost):

* **ceiling**: a plain client that only reads the socket (the simulator's own rate);
* **ltdask**: ``ltdask.acquire.merlin`` with Sum + CoM (inside a radius) + one ring
  (``ApplyMasksUDF``) in one ``ltdask.compute`` (threads, this machine's cores), frames
  decoded in the tasks: once untimed (the first run faults in the memory the process then
  reuses, as a process at the microscope would after its first scan), then timed in each
  of `ROUNDS` rounds: frames/s from opening the acquisition to the results (all positions
  valid, checked), the process's resident memory (sampled every 50 ms) before, at its
  peak and after; then, on one more acquisition, the delay from the first frame's arrival
  to the first partial result of ``ltdask.iter``;
* **LiberTEM-live**: ``live_libertem_merlin.py`` in LiberTEM-live's venv (its Rust
  receiver, LiberTEM's pipelined executor) with the same UDFs on the same stream, in each
  round right after ltdask's run (a process of its own: twice, the second timed from its
  acquisition header to its results).

The machine's speed drifts from minute to minute, so the rates are medians of the rounds
and ltdask / LiberTEM-live the median of each round's ratio (with the lowest and highest).
An acquisition lasts at least `SECONDS_AT_TWICE_TOP` s at twice the detector's top rate
and `SECONDS_AT_OWN_RATE` s at the rate of ltdask's warm-up (a short acquisition measures
its fixed costs more than its rate).

Other detectors' streams plug in as entries of `STREAMS` (a name and a function that
measures it and returns a row). ``dectris`` runs ``live_dectris.py`` (a DECTRIS bslz4
uint16 192x192 stream, Sum + CoM + ring, against its simulator's ceiling and LiberTEM-live;
GB/s of decompressed frames) and prints its own table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from helpers.mibfiles import make_counts, write_hdr, write_mib  # noqa: E402

LIBERTEM_PYTHON = "/tmp/ltlive-venv/bin/python"
ROOT = os.path.dirname(HERE)

#: Merlin modes: (counter depth, quad, frames in the file, the detector's top frame rate
#: (Quantum Detectors' figures: 12-bit 1.8 kHz, 6-bit ~4 kHz (unverified), 1-bit 18 kHz))
MERLIN = {
    "merlin-raw1": (1, False, 1024, 18_000),
    "merlin-raw6": (6, False, 1024, 4_000),
    "merlin-raw12": (12, False, 1024, 1_800),
    "merlin-raw12-quad": (12, True, 256, 1_800),
}
#: frames of each stream's acquisition: at least this many seconds at twice the top rate,
SECONDS_AT_TWICE_TOP = 2.0
#: and at least this many at ltdask's rate in its warm-up
SECONDS_AT_OWN_RATE = 2.0
#: timed rounds (an ltdask run, then LiberTEM-live's) per stream
ROUNDS = 3


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def rss() -> int:
    with open("/proc/self/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) * 1024


class _Sampler(threading.Thread):
    """The peak resident memory while it runs (and one sample per second)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop, self.peak, self.samples = threading.Event(), rss(), []

    def run(self):
        last = 0.0
        while not self.stop.wait(0.05):
            now = rss()
            self.peak = max(self.peak, now)
            if time.monotonic() - last >= 1:
                self.samples.append(now)
                last = time.monotonic()


def write_merlin(folder: str, name: str) -> tuple[str, int, tuple[int, int]]:
    """The ``.mib``/``.hdr`` of stream `name` (written once); ``(hdr, frames, sig)``. The
    frame headers' shutter time is the detector's at its top rate, which sets the
    receiver's partitions (at most a quarter second of frames)."""
    depth, quad, frames, top = MERLIN[name]
    sig = (512, 512) if quad else (256, 256)
    path = os.path.join(folder, name)
    os.makedirs(path, exist_ok=True)
    hdr = os.path.join(path, "scan.hdr")
    if not os.path.exists(hdr):
        counts = make_counts(np.random.default_rng(34), frames, sig, depth)
        mib = os.path.join(path, "scan.mib")
        write_mib(mib, counts, depth=depth, raw=True, quad=quad, shutter=1 / top)
        write_hdr(hdr, frames, per_trigger=64, depth=depth)
    return hdr, frames, sig


class Simulator:
    """``ltdask simulate merlin`` in a process of its own."""

    def __init__(self, hdr: str, repeat: int, rate: float | None = None):
        env = {**os.environ, "PYTHONPATH": ROOT}
        args = [sys.executable, "-m", "ltdask.cli", "simulate", "merlin", hdr]
        args += ["--port", "0", "--control-port", "0", "--repeat", str(repeat)]
        args += [] if rate is None else ["--rate", str(rate)]
        self.proc = subprocess.Popen(
            [*args, "--max-seconds", "900"], stdout=subprocess.PIPE, text=True, env=env
        )
        line = self.proc.stdout.readline()
        found = re.search(r"data port (\d+), control port (\d+)", line)
        if not found:
            self.close()
            raise RuntimeError(f"the simulator did not start: {line!r}")
        self.port, self.control_port = int(found.group(1)), int(found.group(2))

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


def ceiling(port: int, frames: int, frame_bytes: int) -> float:
    """Seconds a client that only reads takes for the acquisition (header to last frame)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = sock.recv(15)
        length = int(head[4:14])
        want = length - 1 + frames * (15 + frame_bytes)
        buf = bytearray(8 * 2**20)
        view = memoryview(buf)
        t0 = time.perf_counter()
        got = 0
        while got < want:
            n = sock.recv_into(view[: min(len(buf), want - got)])
            if not n:
                raise RuntimeError(f"the simulator closed after {got} of {want} bytes")
            got += n
        return time.perf_counter() - t0


def _udfs(sig):
    from ltdask.masks import ring
    from ltdask.udf import ApplyMasksUDF, CoMUDF, SumUDF

    cy, cx, r = (sig[0] - 1) / 2, (sig[1] - 1) / 2, min(sig) / 2
    return [
        SumUDF(),
        CoMUDF.with_params(cy=cy, cx=cx, r=r),
        ApplyMasksUDF([lambda: ring(cx, cy, sig[1], sig[0], r, r / 3)]),
    ]


def run_ltdask(port: int, nav, sig, steps: bool = False) -> dict:
    """One acquisition through ``ltdask.compute`` (or ``ltdask.iter`` with `steps`):
    seconds, frames lost, memory."""
    import ltdask
    from ltdask.acquire import merlin

    sampler = _Sampler()
    before = rss()
    sampler.start()
    t0 = time.perf_counter()
    with merlin("127.0.0.1", port, nav_shape=nav, timeout=30) as acq:
        if steps:
            for total, _, rings in ltdask.iter(acq, _udfs(sig)):  # noqa: B007  (the last)
                pass
        else:
            total, _, rings = ltdask.compute(acq, _udfs(sig))
        seconds = time.perf_counter() - t0
        missing = acq.store.missing.size
    sampler.stop.set()
    sampler.join()
    valid = bool(rings["intensity_valid"].values.all())
    return {
        "seconds": seconds,
        "lost": int(missing) + (0 if valid else 1),
        "rss_before": before,
        "rss_peak": sampler.peak,
        "rss_after": rss(),
        "rss_samples": sampler.samples,
        "sum": float(total["intensity"].values.astype(np.float64).sum()),
    }


def first_result(port: int, nav, sig) -> float:
    """Seconds from the first frame's arrival to the first partial result of
    ``ltdask.iter`` (then the acquisition is closed)."""
    import ltdask
    from ltdask.acquire import merlin

    with merlin("127.0.0.1", port, nav_shape=nav, timeout=30) as acq:
        steps = ltdask.iter(acq, _udfs(sig))
        next(steps)
        seconds = time.monotonic() - acq.store.first_arrival
        steps.close()
    return seconds


def warm_up(hdr: str, sig, frames: int) -> float:
    """One pass of the file (of `frames`) through ltdask (numba's kernels load or
    compile), then one more: its frames/s."""
    from ltdask.acquire.simulate.merlin import MerlinSimulator

    rate = 0.0
    for _ in range(2):
        with MerlinSimulator(hdr, port=0) as sim:
            t0 = time.perf_counter()
            run_ltdask(sim.port, None, sig)
            rate = frames / (time.perf_counter() - t0)
    return rate


def run_libertem(port: int, control_port: int, nav, sig) -> dict | None:
    if not os.path.exists(LIBERTEM_PYTHON):
        return None
    args = [LIBERTEM_PYTHON, os.path.join(HERE, "live_libertem_merlin.py")]
    args += ["--data-port", str(port), "--control-port", str(control_port)]
    args += ["--nav", *map(str, nav), "--sig", *map(str, sig)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if out.returncode:
        log(out.stderr[-3000:])
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_merlin(name: str, folder: str, options) -> dict:
    hdr, file_frames, sig = write_merlin(folder, name)
    _, _, _, top = MERLIN[name]
    warm = warm_up(hdr, sig, file_frames)  # (frames/s of the file's frames once)
    if options.seconds:
        repeat = max(1, round(options.seconds * 2 * top / file_frames))
    elif options.quick:
        repeat = 1
    else:
        repeat = max(1, round(SECONDS_AT_TWICE_TOP * 2 * top / file_frames))
        repeat = max(repeat, round(SECONDS_AT_OWN_RATE * warm / file_frames))
    frames = file_frames * repeat
    nav = (frames // 64, 64)
    frame_bytes = os.path.getsize(os.path.join(os.path.dirname(hdr), "scan.mib")) // file_frames
    if options.seconds:  # (memory over a long run at the detector's top rate)
        sim = Simulator(hdr, repeat // 2, rate=top)
        frames = file_frames * (repeat // 2)
        try:
            return {
                "stream": name,
                "frames": frames,
                "top": top,
                "paced": top,
                "ltdask": run_ltdask(sim.port, (frames // 64, 64), sig, steps=True),
            }
        finally:
            sim.close()
    sim = Simulator(hdr, repeat)
    try:
        row = {"stream": name, "frames": frames, "top": top, "frame_bytes": frame_bytes}
        row["ceiling_s"] = ceiling(sim.port, frames, frame_bytes)
        run_ltdask(sim.port, nav, sig)  # (untimed: the process's memory is in use after it)
        row["rounds"] = []
        for r in range(1 if options.quick else ROUNDS):
            one = {"ltdask": run_ltdask(sim.port, nav, sig)}
            if options.libertem:
                one["libertem"] = run_libertem(sim.port, sim.control_port, nav, sig)
            log(f"  round {r + 1}: {_round_line(frames, one)}")
            row["rounds"].append(one)
        row["first_result_s"] = first_result(sim.port, nav, sig)
    finally:
        sim.close()
    return row


def _round_line(frames: int, one: dict) -> str:
    line = f"ltdask {frames / one['ltdask']['seconds']:,.0f} f/s"
    if one.get("libertem"):
        line += f", LiberTEM-live {frames / one['libertem']['seconds']:,.0f} f/s"
    return line


#: name -> function(name, folder, options) -> row (a dict as `measure_merlin` makes)
STREAMS = {name: measure_merlin for name in MERLIN}
#: DECTRIS bslz4 uint16 192x192 (measured by live_dectris.py, its own table)
STREAMS["dectris"] = None  # type: ignore[assignment]


def report(rows: list[dict]) -> None:
    print(
        "| stream | frames | ceiling f/s | ltdask f/s | x top rate | lost | first result | "
        "RSS before/peak/after MiB | LiberTEM-live f/s | ltdask / LiberTEM-live |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        n = row["frames"]
        if "paced" in row:
            lt = row["ltdask"]
            mib = [round(x / 2**20) for x in lt["rss_samples"]]
            print(
                f"| {row['stream']}, paced at {row['paced']} frames/s | {n} frames in "
                f"{lt['seconds']:.1f} s, lost {lt['lost']} | RSS each second (MiB): {mib} |"
            )
            continue
        rounds = row["rounds"]
        fps = statistics.median(n / r["ltdask"]["seconds"] for r in rounds)
        lost = max(r["ltdask"]["lost"] for r in rounds)
        peak = max(rounds, key=lambda r: r["ltdask"]["rss_peak"])["ltdask"]
        mib = [peak[k] / 2**20 for k in ("rss_before", "rss_peak", "rss_after")]
        both = [r for r in rounds if r.get("libertem")]
        lib = ""
        if both:
            lib_fps = statistics.median(n / r["libertem"]["seconds"] for r in both)
            ratios = sorted(r["libertem"]["seconds"] / r["ltdask"]["seconds"] for r in both)
            spread = f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
            lib = f"{lib_fps:,.0f} | {statistics.median(ratios):.2f}{spread} |"
        print(
            f"| {row['stream']} | {n} | {n / row['ceiling_s']:,.0f} | {fps:,.0f} | "
            f"{fps / row['top']:.2f} | {lost} | {row['first_result_s'] * 1000:.0f} ms | "
            f"{mib[0]:.0f}/{mib[1]:.0f}/{mib[2]:.0f} | " + (lib or "- | - |")
        )
        for r in both:
            total, theirs = r["ltdask"]["sum"], r["libertem"]["sum"]
            if abs(theirs - total) > 1e-6 * abs(total):
                print(f"  (the totals differ: ltdask {total}, LiberTEM-live {theirs})")
    counts = sorted({len(row["rounds"]) for row in rows if "rounds" in row})
    print(
        f"rates: medians of {'/'.join(map(str, counts))} rounds (ltdask's run, then "
        "LiberTEM-live's); "
        "ltdask / LiberTEM-live: the median of the rounds' ratios (lowest-highest)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", nargs="*", default=list(STREAMS), choices=list(STREAMS))
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ltdask-bench-live"))
    parser.add_argument("--no-libertem", dest="libertem", action="store_false")
    parser.add_argument("--quick", action="store_true", help="the files' frames once")
    parser.add_argument("--seconds", type=float, default=None, help="a long run, memory kept")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    options = parser.parse_args()
    rows = []
    for name in options.streams:
        if name == "dectris":
            continue
        log(f"{name} ...")
        rows.append(STREAMS[name](name, options.dir, options))
    if rows:
        report(rows)
    if "dectris" in options.streams:  # (its own measurement and table: live_dectris.py)
        import live_dectris

        log("dectris ...")
        frames = 2048 if options.quick else 32768
        repeats = 1 if options.quick else ROUNDS
        result = live_dectris.run(frames=frames, repeats=repeats, libertem=options.libertem)
        print(live_dectris.report(result))
        rows.append({"stream": "dectris", **result})
    if options.json:
        with open(options.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
