"""ltdask's settings: defaults, accepted forms, and errors that name the setting."""

from __future__ import annotations

from types import SimpleNamespace

import dask
import numpy as np
import pytest

import ltdask
from ltdask.exceptions import ConfigError
from ltdask.runtime import settings

GOOD = [
    ("partition-bytes", "1KiB", settings.partition_bytes, 1024),
    ("partition-bytes", 4096, settings.partition_bytes, 4096),
    ("min-partitions", "3", settings.min_partitions, 3),
    ("min-partitions", 7, settings.min_partitions, 7),
    ("tile-bytes", "16KiB", settings.tile_bytes, 16384),
    ("iter-updates", "25", settings.iter_updates, 25),
    ("map-cache-bytes", 0, settings.map_cache_bytes, 0),
    ("map-cache-bytes", "1MiB", settings.map_cache_bytes, 2**20),
    ("worker-map-fraction", 0, settings.worker_map_fraction, 0.0),
    ("worker-map-fraction", "0.25", settings.worker_map_fraction, 0.25),
    ("partition-bytes", "auto", settings.partition_bytes, 128 * 2**20),
    ("worker-gc-freeze", "off", settings.worker_gc_freeze, False),
    ("worker-gc-freeze", True, settings.worker_gc_freeze, True),
]


@pytest.mark.parametrize("key, value, read, expected", GOOD)
def test_accepted_values(key, value, read, expected):
    with dask.config.set({f"ltdask.{key}": value}):
        assert read() == expected


BAD = [
    ("partition-bytes", "lots", "'auto' or a positive size"),
    ("partition-bytes", 0, "'auto' or a positive size"),
    ("min-partitions", "many", "'auto' or a positive integer"),
    ("min-partitions", 0, "'auto' or a positive integer"),
    ("min-partitions", 2.5, "'auto' or a positive integer"),
    ("tile-bytes", "huge", "'auto' or a positive size"),
    ("tile-bytes", -1, "'auto' or a positive size"),
    ("iter-updates", 0, "a positive integer"),
    ("map-cache-bytes", -5, "'auto', 0 or a size"),
    ("map-cache-bytes", "half", "'auto', 0 or a size"),
    ("worker-map-fraction", 1.5, "a fraction from 0 to 1"),
    ("worker-map-fraction", "most", "a fraction from 0 to 1"),
    ("worker-map-fraction", float("nan"), "a fraction from 0 to 1"),
    ("worker-gc-freeze", "maybe", "True or False"),
]


@pytest.mark.parametrize("key, value, expected", BAD)
def test_bad_values_name_the_setting(key, value, expected):
    """A run with a bad setting fails with the setting's name, never `invalid literal`."""
    message = rf"the setting ltdask\.{key} is {value!r}; expected {expected}"
    with dask.config.set({f"ltdask.{key}": value}):
        with pytest.raises(ConfigError, match=message):
            getattr(settings, key.replace("-", "_"))()
        run = ltdask.compute
        if key == "iter-updates":  # read by iterated runs only
            run = lambda ds, udfs: list(ltdask.iter(ds, udfs))  # noqa: E731
        read_elsewhere = ("map-cache-bytes", "worker-map-fraction")
        if key not in (*read_elsewhere, "worker-gc-freeze"):
            with pytest.raises(ConfigError, match=message):
                run(ltdask.from_array(np.ones((4, 5, 6, 7), np.float32)), [ltdask.udf.SumUDF()])


def fake_worker(limit, spill=0.7, pause=0.8):
    """What `settings` reads of a ``distributed.Worker``: its memory manager."""
    manager = SimpleNamespace(
        memory_limit=limit, memory_spill_fraction=spill, memory_pause_fraction=pause
    )
    return SimpleNamespace(memory_manager=manager)


WORKERS = [
    pytest.param(fake_worker(1000), 0.5, 500, id="default"),
    pytest.param(fake_worker(1000), 0.9, 600, id="below-spill"),
    pytest.param(fake_worker(1000, spill=False), 0.9, 700, id="below-pause"),
    pytest.param(fake_worker(1000, spill=False, pause=False), 0.9, 850, id="below-terminate"),
    pytest.param(fake_worker(1000), 0, None, id="fraction-0"),
    pytest.param(fake_worker(None), 0.5, None, id="no-limit"),
    pytest.param(None, 0.5, None, id="no-worker"),
]


@pytest.mark.parametrize("worker, fraction, budget", WORKERS)
def test_worker_map_budget(monkeypatch, worker, fraction, budget):
    """A worker's maps hold pages up to a fraction of its memory limit, below the fractions
    where distributed spills, pauses or restarts it; `auto` keeps maps by that budget in
    such a worker (as many files as the RAM), none where the fraction is 0, and half the
    RAM in any other process."""
    monkeypatch.setattr(settings, "current_worker", lambda: worker)
    # distributed's default terminate fraction (its config is there once it is imported)
    config = {"ltdask.worker-map-fraction": fraction, "distributed.worker.memory.terminate": 0.95}
    with dask.config.set(config):
        assert settings.worker_map_budget() == budget
        expected = settings.total_memory() // 2
        if worker is not None and worker.memory_manager.memory_limit:
            expected = settings.total_memory() if budget else 0
        assert settings.map_cache_bytes() == expected


def test_resident_bytes_is_what_psutil_measures():
    psutil = pytest.importorskip("psutil")
    rss = settings.resident_bytes()
    assert rss is not None
    assert abs(rss - psutil.Process().memory_info().rss) < 16 * 2**20


@pytest.mark.parametrize(
    "use, auto",
    [("dataset", 128), ("views", 512), ("threads", 512), ("cluster", 1024)],
)
def test_one_partition_setting(use, auto):
    """``ltdask.partition-bytes`` ``auto`` sizes partitions by what they are for; a size is
    that size for all of them."""
    assert settings.partition_bytes(use) == auto * 2**20
    with dask.config.set({"ltdask.partition-bytes": "32MiB"}):
        assert settings.partition_bytes(use) == 32 * 2**20


@pytest.mark.parametrize("key", settings.RETIRED)
def test_retired_settings_say_so(monkeypatch, key):
    """The settings ``ltdask.partition-bytes`` replaced are not read, and a value given to
    one of them says so once."""
    import warnings

    monkeypatch.setattr(settings, "_WARNED", set())
    with dask.config.set({f"ltdask.{key}": "64MiB"}):
        with pytest.warns(FutureWarning, match=rf"ltdask\.{key} .* is no longer read"):
            assert settings.partition_bytes("threads") == 512 * 2**20
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            settings.partition_bytes("threads")
