"""The device tile path and GPU clusters on a real GPU (skipped without CuPy and a device):
the same checks as test_device_path.py and tests/test_gpu_cluster.py make with the numpy
stand-in, here through `CupyDevice` (pinned buffers, a copy stream, events)."""

from __future__ import annotations

import numpy as np
import pytest
from test_backends import ON_GPU
from test_device_path import MASKS, NAV, SIG, FrameSums, check, corrected, data_of

import ltdask
from ltdask.udf import ApplyMasksUDF, SumSigUDF, SumUDF

pytestmark = ON_GPU


def udfs(masks):
    return [SumUDF(), SumSigUDF(), ApplyMasksUDF([lambda: masks[0], lambda: masks[1]])]


@pytest.mark.parametrize("corrections", [False, True], ids=["plain", "corrected"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "float32"])
def test_device_tiles_on_cupy(dtype, corrections):
    data = data_of(dtype, seed=3)
    rng = np.random.default_rng(6)
    dark = rng.random(SIG).astype(np.float32) * 5
    gain = 0.5 + rng.random(SIG).astype(np.float32)
    bad = np.zeros(SIG, bool)
    bad[[1, 6], [2, 7]] = True
    given = ltdask.CorrectionSet(dark=dark, gain=gain, excluded_pixels=bad) if corrections else None
    ds = ltdask.from_array(data)
    plan = ltdask.explain(ds, udfs(MASKS), backends=("cupy",), corrections=given)
    assert f"tiles cross to the GPU as {np.dtype(dtype).name}" in str(plan), plan
    roi = np.random.default_rng(3).random(NAV) < 0.7
    results = ltdask.compute(
        ds, udfs(MASKS), backends=("cupy",), corrections=given, roi=roi, scheduler="threads"
    )
    frames = data.astype(np.float64)
    if corrections:
        frames = corrected(data, dark.astype(np.float64), gain.astype(np.float64), bad)
    check(results, frames, MASKS, roi)


def test_cupy_stager_keeps_every_tile_whole():
    import cupy

    from ltdask.udf.device import CupyDevice, TileStager

    device = CupyDevice()
    stager = TileStager(device, np.uint16, 4 * 1000)
    rng = np.random.default_rng(1)
    tiles = [rng.integers(0, 9, (n, 1000), dtype=np.uint16) for n in (4, 4, 3, 4, 1)]
    seen = []
    for tile in tiles:
        staged, slot = stager.stage(tile)
        seen.append(staged.astype(cupy.float32).sum(axis=1))  # (queued on the compute stream)
        stager.release(slot)
    stager.finish()
    for tile, sums in zip(tiles, seen, strict=True):
        np.testing.assert_array_equal(sums.get(), tile.sum(axis=1))


def test_run_split_between_a_gpu_and_a_cpu_worker():
    import dask
    from distributed import get_task_stream

    from ltdask.runtime.gpu_cluster import start_local
    from ltdask.udf.graph import PARTITION_TASKS

    data = data_of("uint16", seed=4)
    client = start_local(1, [0])
    try:
        settings = {"scheduler": client, "ltdask.min-partitions": 8}
        with client.as_current(), dask.config.set(settings), get_task_stream(client) as stream:
            results = ltdask.compute(ltdask.from_array(data), udfs(MASKS))
    finally:
        client.close()
        client.cluster.close()
    check(results, data.astype(np.float64), MASKS)
    workers = {t["worker"] for t in stream.data if PARTITION_TASKS in str(t["key"])}
    assert len(workers) == 2, stream.data


@pytest.mark.parametrize("method", ["frame", "partition"])
def test_frames_and_partitions_on_cupy(method):
    data = data_of("uint16", seed=8)
    roi = np.random.default_rng(9).random(NAV) < 0.6
    res = FrameSums(method).compute(ltdask.from_array(data), roi=roi, scheduler="threads")
    f = data.astype(np.float64)
    np.testing.assert_allclose(res["frames"].values[roi], f[roi].sum(axis=(1, 2)), rtol=1e-6)
    np.testing.assert_allclose(res["pixels"].values, f[roi].sum(axis=0), rtol=1e-6)
