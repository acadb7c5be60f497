"""ltdask's settings: defaults, accepted forms, and errors that name the setting."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import ltdask
from ltdask import _config
from ltdask.exceptions import ConfigError

GOOD = [
    ("partition-bytes", "1KiB", _config.partition_bytes, 1024),
    ("partition-bytes", 4096, _config.partition_bytes, 4096),
    ("min-partitions", "3", _config.min_partitions, 3),
    ("min-partitions", 7, _config.min_partitions, 7),
    ("tile-bytes", "16KiB", _config.tile_bytes, 16384),
    ("view-chunk-partitions", 2, _config.view_chunk_partitions, 2),
    ("iter-updates", "25", _config.iter_updates, 25),
    ("map-cache-bytes", 0, _config.map_cache_bytes, 0),
    ("map-cache-bytes", "1MiB", _config.map_cache_bytes, 2**20),
]


@pytest.mark.parametrize("key, value, read, expected", GOOD)
def test_accepted_values(key, value, read, expected):
    with dask.config.set({f"ltdask.{key}": value}):
        assert read() == expected


BAD = [
    ("partition-bytes", "lots", "a positive size"),
    ("partition-bytes", 0, "a positive size"),
    ("min-partitions", "many", "'auto' or a positive integer"),
    ("min-partitions", 0, "'auto' or a positive integer"),
    ("min-partitions", 2.5, "'auto' or a positive integer"),
    ("tile-bytes", "huge", "'auto' or a positive size"),
    ("tile-bytes", -1, "'auto' or a positive size"),
    ("view-chunk-partitions", "four", "a positive integer"),
    ("iter-updates", 0, "a positive integer"),
    ("map-cache-bytes", -5, "'auto', 0 or a size"),
    ("map-cache-bytes", "half", "'auto', 0 or a size"),
]


@pytest.mark.parametrize("key, value, expected", BAD)
def test_bad_values_name_the_setting(key, value, expected):
    """A run with a bad setting fails with the setting's name, never `invalid literal`."""
    message = rf"the setting ltdask\.{key} is {value!r}; expected {expected}"
    with dask.config.set({f"ltdask.{key}": value}):
        with pytest.raises(ConfigError, match=message):
            getattr(_config, key.replace("-", "_"))()
        run = ltdask.compute
        if key == "iter-updates":  # read by iterated runs only
            run = lambda ds, udfs: list(ltdask.iter(ds, udfs))  # noqa: E731
        if key not in ("map-cache-bytes", "view-chunk-partitions"):
            with pytest.raises(ConfigError, match=message):
                run(ltdask.from_array(np.ones((4, 5, 6, 7), np.float32)), [ltdask.udf.SumUDF()])
