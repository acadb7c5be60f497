"""``ltdask simulate merlin``: the command serves a scan (in a process of its own, as a user
starts it), says on which port, and stops cleanly on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
from helpers.cli import invoke
from helpers.merlinstreams import NAV, write_scan

import ltdask
from ltdask.acquire import merlin
from ltdask.udf import SumSigUDF

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_command_serves_and_stops_on_ctrl_c(tmp_path):
    hdr, counts = write_scan(tmp_path, "raw6")
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    args = [sys.executable, "-m", "ltdask.cli", "simulate", "merlin", str(hdr), "--port", "0"]
    proc = subprocess.Popen(
        [*args, "--max-seconds", "60", "--rate", "500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        found = re.search(r"data port (\d+)", line)
        assert found, line
        assert "24 frames" in line and "127.0.0.1" in line
        with merlin("127.0.0.1", int(found.group(1)), frames_per_partition=5) as acq:
            (res,) = ltdask.compute(acq, [SumSigUDF()])
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out
    assert "merlin simulator: stopped" in out
    expected = counts.sum(axis=(1, 2), dtype=np.float64).reshape(NAV)
    np.testing.assert_array_equal(res["intensity"].values, expected)


@pytest.mark.parametrize(
    "args, match",
    [
        pytest.param(["--wait-trigger"], "needs --control-port", id="trigger-without-control"),
        pytest.param(["--rate", "0"], "rate=0.0: expected frames per second > 0", id="rate"),
    ],
)
def test_bad_options(tmp_path, args, match):
    hdr, _ = write_scan(tmp_path, "raw6")
    result = invoke(
        ["simulate", "merlin", hdr, "--port", "0", "--max-seconds", "1", *args], tmp_path
    )
    assert result.exit_code != 0
    assert re.search(match, result.output + str(result.exception)), result.output
