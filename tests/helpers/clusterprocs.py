"""A real dask cluster for tests: ``dask scheduler`` and ``dask worker`` as separate processes.

Everything listens on 127.0.0.1 with ports picked by the OS (the scheduler writes its address
to a scheduler file). Every wait is bounded, every process runs in its own session so that it
can be killed with its children (the nanny's worker process), and :meth:`ProcessCluster.close`
kills whatever is still running. Workers get this folder on their ``PYTHONPATH``, so UDF
classes defined in test helper modules (``cluster_udfs``) unpickle there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
STARTUP_TIMEOUT = 60.0


def dask_command() -> str:
    """The ``dask`` command of the environment that runs the tests."""
    path = os.path.join(BIN, "dask")
    if not os.path.exists(path):
        raise RuntimeError(f"no 'dask' command next to {sys.executable}")
    return path


def worker_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TESTS_DIR, env.get("PYTHONPATH", "")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    env.update(extra or {})
    return env


class ProcessCluster:
    """A scheduler process plus named worker processes (one nanny + one worker each)."""

    def __init__(self, folder: Path, scheduler_env: dict | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.scheduler_file = self.folder / "scheduler.json"
        self.procs: dict[str, subprocess.Popen] = {}
        self.address: str | None = None
        self._scheduler_env = scheduler_env or {}
        self._logs: list = []

    # -- processes -----------------------------------------------------------------------
    def _spawn(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (closed in close())
        self._logs.append(log)
        proc = subprocess.Popen(
            [dask_command(), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.folder,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def start_scheduler(self, timeout: float = STARTUP_TIMEOUT) -> str:
        args = [
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(self.scheduler_file),
            "--idle-timeout",
            "600s",
        ]
        proc = self._spawn("scheduler", args, worker_env(self._scheduler_env))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"dask scheduler exited early:\n{self.log('scheduler')}")
            try:
                self.address = json.loads(self.scheduler_file.read_text())["address"]
                return self.address
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        raise TimeoutError(f"dask scheduler did not start in {timeout} s:\n{self.log('scheduler')}")

    def start_worker(
        self, name: str, memory_limit: str = "0", env: dict | None = None, extra=()
    ) -> subprocess.Popen:
        """Start ``dask worker --name NAME`` (it joins asynchronously; see `wait_for_workers`)."""
        args = [
            "worker",
            "--scheduler-file",
            str(self.scheduler_file),
            "--host",
            "127.0.0.1",
            "--nthreads",
            "1",
            "--nworkers",
            "1",
            "--no-dashboard",
            "--name",
            name,
            "--memory-limit",
            memory_limit,
            "--death-timeout",
            "60s",
            "--local-directory",
            str(self.folder / "workers"),
            *extra,
        ]
        return self._spawn(name, args, worker_env(env))

    def kill(self, name: str) -> None:
        """SIGKILL a process and its children (a worker's nanny and worker); waits for it."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: pgid == pid
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait(timeout=10)

    def alive_workers(self) -> list[str]:
        return [n for n, p in self.procs.items() if n != "scheduler" and p.poll() is None]

    def log(self, name: str) -> str:
        try:
            return (self.folder / f"{name}.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        for name in [n for n in self.procs if n != "scheduler"]:
            self.kill(name)
        self.kill("scheduler")
        for log in self._logs:
            log.close()
        self._logs.clear()

    # -- clients ---------------------------------------------------------------------------
    def client(self, timeout: float = 30):
        from distributed import Client

        return Client(self.address, timeout=timeout, set_as_default=False)


def wait_for_workers(client, names, timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait until workers with all `names` are connected (bounded)."""
    names = set(names)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.scheduler_info(n_workers=-1)["workers"]
        if names <= {w.get("name") for w in info.values()}:
            return
        time.sleep(0.1)
    raise TimeoutError(f"workers {sorted(names)} did not connect in {timeout} s")


def worker_address(client, name: str) -> str:
    for addr, w in client.scheduler_info(n_workers=-1)["workers"].items():
        if w.get("name") == name:
            return addr
    raise KeyError(name)


@contextlib.contextmanager
def running(folder: Path, **kwargs):
    """`start` as a context: yields ``(cluster, client)``, closes both on exit."""
    cluster, client = start(folder, **kwargs)
    try:
        yield cluster, client
    finally:
        client.close(timeout=10)
        cluster.close()


def start(folder: Path, workers=("w0", "w1"), scheduler_env=None, timeout=STARTUP_TIMEOUT):
    """A started cluster and a client connected to it; the caller closes both."""
    cluster = ProcessCluster(folder, scheduler_env)
    try:
        cluster.start_scheduler(timeout)
        for name in workers:
            cluster.start_worker(name)
        client = cluster.client()
        try:
            wait_for_workers(client, workers, timeout)
        except BaseException:
            client.close()
            raise
    except BaseException as e:
        logs = "\n".join(f"--- {n}\n{cluster.log(n)}" for n in ("scheduler", *workers))
        cluster.close()
        if isinstance(e, TimeoutError | RuntimeError):
            raise RuntimeError(f"{e}\n{logs}") from e
        raise
    return cluster, client


# -- run on the scheduler (``client.run_on_scheduler``): this module imports only the stdlib ---
def partition_task_states(dask_scheduler, prefix: str = "ltdask-udf-") -> dict:
    """Partition tasks on the scheduler: how many are done (in memory or erred) and the
    names of the workers processing one now."""
    done = 0
    busy = set()
    for key, ts in dask_scheduler.tasks.items():
        name = key[0] if isinstance(key, tuple) else key
        if not str(name).startswith(prefix):
            continue
        if ts.state in ("memory", "erred"):
            done += 1
        elif ts.state == "processing" and ts.processing_on is not None:
            busy.add(ts.processing_on.name)
    return {"done": done, "busy": sorted(busy)}


def set_allowed_failures(dask_scheduler, n: int) -> int:
    """Set the scheduler's ``allowed-failures``; returns the previous value."""
    old = dask_scheduler.allowed_failures
    dask_scheduler.allowed_failures = n
    return old
