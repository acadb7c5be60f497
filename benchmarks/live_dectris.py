"""DECTRIS live throughput: ltdask against the simulator's ceiling and LiberTEM-live 0.3.

``python benchmarks/live_dectris.py [--frames N] [--repeats R]`` (or `run` from
``bench_live.py``). One simulator process (``ltdask simulate dectris``, REST API on) streams
bitshuffle-LZ4 uint16 192x192 diffraction-like frames (a bright disk on a Poisson
background, ~10x compression) on 127.0.0.1; each measurement arms it for a series of N
frames (exte) and takes them all (zmq's high-water marks push back on the sender when a
receiver is behind: no frame is lost, the rate measured is the sustained rate):

* the ceiling: a plain zmq PULL client that only receives the messages;
* ltdask: ``ltdask.acquire.dectris(..., arm=True)`` with Sum + CoM + one ring
  (``ApplyMasksUDF``) in one ``ltdask.compute``, frames decoded in the tasks;
* LiberTEM-live 0.3 (``live_dectris_libertem.py`` in the separate venv, its Rust receiver
  and LiberTEM's pipelined executor) with the same UDFs on the same stream.

Rates are frames/s and GB/s of decompressed frames, each the median of `repeats` rounds
(an ltdask run, then LiberTEM-live's in a process of its own, after warm-ups; the ratio is
the median of the rounds' ratios), wall time from arming to the results (ltdask also from
the first frame), and
CPU time per frame of all the client's processes (the load of other programs on the
machine changes the rates, much less the CPU time). With ``--rate R`` one more ltdask run
has the simulator paced to R frames/s (SIMPLON ``frame_time``), as a detector sends: it
keeps up when its results come about when the last frame was sent, with the store's peak
memory small.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

SIG = (192, 192)
WIDTH = 64
LIBERTEM_PYTHON = "/tmp/ltlive-venv/bin/python"
HERE = os.path.dirname(os.path.abspath(__file__))


def diffraction_frames(n: int, seed: int = 0) -> np.ndarray:
    """`n` uint16 frames: a disk of ~2000 counts, moving a little, on 0.05 counts/pixel."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[: SIG[0], : SIG[1]]
    out = np.empty((n, *SIG), np.uint16)
    for i in range(n):
        cy, cx = 96 + rng.normal(0, 2), 96 + rng.normal(0, 2)
        disk = 2000.0 * (np.hypot(y - cy, x - cx) < 12)
        out[i] = rng.poisson(disk + 0.05)
    return out


def _put(api_port: int, path: str, value=None):
    body = json.dumps({"value": value}).encode() if value is not None else b""
    request = urllib.request.Request(f"http://127.0.0.1:{api_port}{path}", body, method="PUT")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def ceiling(port: int, api_port: int, frames: int) -> float:
    """Seconds a PULL client that only receives takes for a series of `frames`."""
    import zmq

    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, 4096)
    sock.setsockopt(zmq.RCVTIMEO, 10000)
    sock.connect(f"tcp://127.0.0.1:{port}")
    try:
        for param, value in (("trigger_mode", "exte"), ("ntrigger", frames), ("nimages", 1)):
            _put(api_port, f"/detector/api/1.8.0/config/{param}", value)
        t0 = time.perf_counter()
        _put(api_port, "/detector/api/1.8.0/command/arm")
        images = 0
        while True:
            parts = sock.recv_multipart()
            if len(parts) == 4:
                images += 1
            elif b"series_end" in parts[0]:
                break
        assert images == frames, (images, frames)
        return time.perf_counter() - t0
    finally:
        sock.close(linger=0)
        context.term()


def _udfs():
    import ltdask.masks
    from ltdask.udf import ApplyMasksUDF, CoMUDF, SumUDF

    def ring():
        cx, cy = SIG[1] / 2, SIG[0] / 2
        return ltdask.masks.ring(cx, cy, SIG[1], SIG[0], radius=SIG[1] / 3, radius_inner=SIG[1] / 6)

    return [SumUDF(), CoMUDF(), ApplyMasksUDF(mask_factories=[ring])]


def ltdask_run(port: int, api_port: int, frames: int, rate: float | None = None) -> dict:
    """One ltdask acquisition of `frames` with Sum + CoM + ring: seconds and checks (the
    simulator paced to `rate` frames/s through SIMPLON's ``frame_time`` where given)."""
    import psutil

    import ltdask
    import ltdask.acquire

    config = {"trigger_mode": "exte", "ntrigger": frames, "nimages": 1}
    config["frame_time"] = 1.0 / rate if rate else 1e-9
    cpu0 = sum(psutil.Process().cpu_times()[:2])
    t0 = time.perf_counter()
    with ltdask.acquire.dectris(
        port=port,
        api_port=api_port,
        arm=True,
        detector_config=config,
        nav_shape=(frames // WIDTH, WIDTH),
        idle_timeout=30,
    ) as acq:
        total, _, rings = ltdask.compute(acq, _udfs())
        seconds = time.perf_counter() - t0
        cpu = sum(psutil.Process().cpu_times()[:2]) - cpu0
        first = acq.store.first_arrival
        from_first = time.monotonic() - first if first is not None else float("nan")
        complete = bool(acq.store.arrived.all())
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "from_first_frame": from_first,
        "complete": complete,
        "peak_memory": acq.store.peak_memory,
        "spilled_frames": acq.store.spilled_frames,
        "ring_sum": float(rings["intensity"].values.sum()),
    }


def libertem_run(api_port: int, port: int, frames: int, repeats: int) -> list[dict]:
    """LiberTEM-live's runs (its own warm-up first) as JSON lines from its venv."""
    script = os.path.join(HERE, "live_dectris_libertem.py")
    args = [LIBERTEM_PYTHON, script, str(api_port), str(port), str(frames), *map(str, SIG)]
    done = subprocess.run(
        [*args, str(repeats)], capture_output=True, text=True, timeout=900, check=False
    )
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"LiberTEM-live failed ({done.returncode}): {done.stderr[-2000:]}")
    return lines[1:]


def run(
    frames: int = 32768,
    repeats: int = 3,
    distinct: int = 256,
    libertem: bool = True,
    rate: float | None = None,
):
    """Measure; returns a dict of rates (frames/s and GB/s of decompressed frames); with
    `rate`, also an ltdask run with the simulator paced to `rate` frames/s."""
    frame_bytes = SIG[0] * SIG[1] * 2
    frames = frames // WIDTH * WIDTH
    with tempfile.TemporaryDirectory(prefix="ltdask-live-dectris-") as tmp:
        path = os.path.join(tmp, "frames.npy")
        np.save(path, diffraction_frames(distinct).reshape(distinct // 16, 16, *SIG))
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        sim = subprocess.Popen(
            [sys.executable, "-m", "ltdask.cli", "simulate", "dectris", path]
            + ["--port", "0", "--api-port", "0", "--max-seconds", "1800"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert sim.stdout is not None
            port = int(sim.stdout.readline().strip().rsplit(":", 1)[1])
            api_port = int(sim.stdout.readline().split("/")[2].rsplit(":", 1)[1])
            result: dict = {"frames": frames, "frame_bytes": frame_bytes}
            ceiling(port, api_port, 1024)
            result["ceiling_s"] = min(ceiling(port, api_port, frames) for _ in range(repeats))
            ltdask_run(port, api_port, 1024)  # (numba kernels loaded, threads started)
            use_libertem = libertem and os.path.exists(LIBERTEM_PYTHON)
            runs, theirs = [], []
            for r in range(repeats):  # (rounds: ltdask's run, then LiberTEM-live's)
                runs.append(ltdask_run(port, api_port, frames))
                line = f"  round {r + 1}: ltdask {frames / runs[-1]['seconds']:,.0f} f/s"
                if use_libertem:
                    _put(api_port, "/detector/api/1.8.0/config/frame_time", 1e-9)
                    theirs.append(libertem_run(api_port, port, frames, 1)[0])
                    line += f", LiberTEM-live {frames / theirs[-1]['seconds']:,.0f} f/s"
                print(line, file=sys.stderr, flush=True)
            mid = _median_run(runs)
            result["ltdask_s"] = mid["seconds"]
            result["ltdask_from_first_frame_s"] = mid["from_first_frame"]
            result["ltdask_complete"] = all(r["complete"] for r in runs)
            result["ltdask_peak_memory"] = max(r["peak_memory"] for r in runs)
            result["ltdask_cpu_us_per_frame"] = 1e6 * mid["cpu_seconds"] / frames
            if theirs:
                lt_mid = _median_run(theirs)
                result["libertem_live_s"] = lt_mid["seconds"]
                result["libertem_live_cpu_us_per_frame"] = 1e6 * lt_mid["cpu_seconds"] / frames
                pairs = zip(runs, theirs, strict=True)
                ratios = sorted(t["seconds"] / r["seconds"] for r, t in pairs)
                result["ratios"] = ratios
                rel = abs(theirs[0]["ring_sum"] - mid["ring_sum"]) / max(1.0, mid["ring_sum"])
                result["same_ring_sum"] = rel < 1e-6
            if rate:  # (paced like a detector: does it keep up, with flat memory?)
                paced = ltdask_run(port, api_port, frames, rate)
                result["paced_rate"] = rate
                result["paced_s"] = paced["seconds"]
                result["paced_complete"] = paced["complete"]
                result["paced_peak_memory"] = paced["peak_memory"]
        finally:
            sim.send_signal(signal.SIGINT)
            try:
                sim.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                sim.kill()
                sim.communicate()
    for key in ("ceiling", "ltdask", "libertem_live"):
        if f"{key}_s" in result:
            result[f"{key}_fps"] = frames / result[f"{key}_s"]
            result[f"{key}_GBps"] = frames * frame_bytes / result[f"{key}_s"] / 1e9
    if "ratios" in result:
        result["ltdask_vs_libertem_live"] = float(np.median(result["ratios"]))
    return result


def _median_run(runs: list[dict]) -> dict:
    """The run of the median time (the lower one of an even count)."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def report(result: dict) -> str:
    lines = [f"DECTRIS bslz4 uint16 192x192, {result['frames']} frames, Sum + CoM + ring:"]
    for key, name in (
        ("ceiling", "simulator ceiling (PULL only)"),
        ("ltdask", "ltdask"),
        ("libertem_live", "LiberTEM-live 0.3"),
    ):
        if f"{key}_fps" in result:
            lines.append(
                f"  {name:32s} {result[f'{key}_fps']:9.0f} frames/s  "
                f"{result[f'{key}_GBps']:6.3f} GB/s decompressed"
            )
    if "ltdask_vs_libertem_live" in result:
        low, high = result["ratios"][0], result["ratios"][-1]
        lines.append(
            f"  ltdask / LiberTEM-live: {result['ltdask_vs_libertem_live']:.2f}x (median of "
            f"{len(result['ratios'])} rounds' ratios; {low:.2f}-{high:.2f})"
        )
    for key, name in (("ltdask", "ltdask"), ("libertem_live", "LiberTEM-live")):
        if f"{key}_cpu_us_per_frame" in result:
            us = result[f"{key}_cpu_us_per_frame"]
            lines.append(f"  CPU per frame, {name} (receiver, decoding, UDFs): {us:.0f} us")
    lines.append(f"  every frame arrived (ltdask): {result['ltdask_complete']}")
    if "paced_rate" in result:
        sending = result["frames"] / result["paced_rate"]
        lines.append(
            f"  paced at {result['paced_rate']:.0f} frames/s: results after "
            f"{result['paced_s']:.2f} s (sending takes {sending:.2f} s), all arrived: "
            f"{result['paced_complete']}, store peak {result['paced_peak_memory'] / 2**20:.0f} MiB"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--no-libertem", action="store_true")
    parser.add_argument("--rate", type=float, default=None, help="also a run paced to this")
    args = parser.parse_args()
    out = run(args.frames, args.repeats, libertem=not args.no_libertem, rate=args.rate)
    print(report(out))
    print(json.dumps(out))
