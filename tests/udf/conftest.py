"""Fixtures of the UDF engine's tests: each test module's scan, open in memory and as a
raw file.

A module using them sets ``NAV`` and ``SIG`` (the scan's shape), ``SEED`` (of its random
float32 data) and ``FRAMES_PER_PARTITION`` (small, so that the tiny scans run in several
partitions); `data` is the scan and `ds` the dataset, once per module and kind.
"""

from __future__ import annotations

import math

import pytest
from helpers.udf_helpers import open_dataset, partitions, random_data

KINDS = ["memory", "raw"]


@pytest.fixture(scope="module")
def data(request):
    module = request.module
    return random_data((*module.NAV, *module.SIG), "float32", seed=module.SEED)


@pytest.fixture(scope="module", params=KINDS)
def ds(request, data, tmp_path_factory):
    """The module's scan as a dataset of `FRAMES_PER_PARTITION` frames per partition."""
    module = request.module
    frame_bytes = data.dtype.itemsize * math.prod(module.SIG)
    with partitions(frame_bytes * module.FRAMES_PER_PARTITION):
        return open_dataset(request.param, data, tmp_path_factory.mktemp("udf"))
