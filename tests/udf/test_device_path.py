"""The device tile path (`ltdask.udf.paths.device`) without a GPU: the numpy stand-in
device (``ltdask.device.stand-in``) runs the same pipeline -- pinned staging buffers
reused across tiles, copies ordered by events, conversion and corrections on the
"device" -- so the results of CuPy-backend runs are checked against numpy on the
(corrected) frames, and the stager's order of copies, events and waits against the
protocol. The same runs on a real GPU: test_cupy.py."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from test_corrections import corrected

import ltdask
from ltdask.udf import ApplyMasksUDF, SumSigUDF, SumUDF
from ltdask.udf.device import StandInDevice, TileStager

NAV, SIG = (6, 5), (8, 9)


def data_of(dtype, seed=1):
    rng = np.random.default_rng(seed)
    top = 250 if np.dtype(dtype).itemsize == 1 else 3000
    return rng.integers(0, top, (*NAV, *SIG)).astype(dtype)


@pytest.fixture
def stand_in():
    StandInDevice.staged.clear()
    with dask.config.set({"ltdask.device.stand-in": True}):
        yield StandInDevice.staged


def run(ds, masks, **kwargs):
    udfs = [SumUDF(), SumSigUDF(), ApplyMasksUDF([lambda: masks[0], lambda: masks[1]])]
    plan = ltdask.explain(ds, udfs, backends=("cupy",), **kwargs)
    assert "tiles cross to the GPU" in str(plan), plan
    return ltdask.compute(ds, udfs, backends=("cupy",), scheduler="sync", **kwargs)


def check(results, frames, masks, roi=None):
    """`results` of `run` against numpy on `frames` (float64), at the ROI's positions."""
    nav = frames.shape[:2]
    keep = np.ones(nav, bool) if roi is None else roi
    total, per_frame, masked = results
    np.testing.assert_allclose(total["intensity"].values, frames[keep].sum(axis=0), rtol=1e-5)
    sums = per_frame["intensity"].values
    np.testing.assert_allclose(sums[keep], frames[keep].sum(axis=(-2, -1)), rtol=1e-5)
    products = masked["intensity"].values.reshape(*nav, -1)
    for i, m in enumerate(masks):
        expect = (frames[keep] * m).sum(axis=(-2, -1))
        np.testing.assert_allclose(products[keep][:, i], expect, rtol=1e-5, atol=1e-3)


MASKS = np.random.default_rng(7).random((2, *SIG)).astype(np.float32)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "float32"])
def test_native_tiles_cross_as_stored(stand_in, dtype):
    data = data_of(dtype)
    roi = np.random.default_rng(3).random(NAV) < 0.7
    results = run(ltdask.from_array(data), MASKS, roi=roi)
    check(results, data.astype(np.float64), MASKS, roi)
    # every selected frame went through the stager once
    assert sum(n for _, n in stand_in) == roi.sum()


@pytest.mark.parametrize("excluded", [False, True], ids=["plain", "dark-and-excluded"])
def test_frames_cut_into_slices(stand_in, excluded):
    """Tiles that cut the frame: each slice staged, converted and corrected (its own part
    of the dark frame and of the excluded pixels) through the same two slots."""
    sig = (128, 256)
    rng = np.random.default_rng(5)
    data = rng.integers(0, 3000, (2, 3, *sig)).astype(np.uint16)
    masks = rng.random((2, *sig)).astype(np.float32)
    dark = bad = corrections = None
    if excluded:
        dark = rng.random(sig).astype(np.float32) * 20
        bad = np.zeros(sig, bool)
        bad[[5, 70, 127], [3, 200, 255]] = True
        corrections = ltdask.CorrectionSet(dark=dark, excluded_pixels=bad)
    with dask.config.set({"ltdask.tile-bytes": 16384, "ltdask.device-tile-bytes": 16384}):
        ds = ltdask.from_array(data)
        assert len(ds.negotiate([ltdask.TilingPreferences()], np.float32)) > 1
        results = run(ds, masks, corrections=corrections)
    assert sum(n for _, n in stand_in) > 6  # (each frame staged once per slice)
    frames = data.astype(np.float64)
    if excluded:
        frames = corrected(data, dark.astype(np.float64), 1, bad)
    check(results, frames, masks)


@pytest.mark.parametrize("given", ["dark", "gain", "excluded", "all"])
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_corrected_on_the_device(stand_in, dtype, given):
    data = data_of(dtype, seed=2)
    rng = np.random.default_rng(4)
    dark = rng.random(SIG).astype(np.float32) * 20 if given in ("dark", "all") else None
    gain = 0.5 + rng.random(SIG).astype(np.float32) if given in ("gain", "all") else None
    excluded = None
    if given in ("excluded", "all"):
        excluded = np.zeros(SIG, bool)
        excluded[[0, 3, 7], [0, 4, 8]] = True  # (two corners: 3 neighbours each)
        data[..., 3, 4] = 60000 if dtype == "uint16" else 1e6  # (a hot pixel)
    corrections = ltdask.CorrectionSet(dark=dark, gain=gain, excluded_pixels=excluded)
    results = run(ltdask.from_array(data), MASKS, corrections=corrections)
    frames = corrected(
        data,
        0 if dark is None else dark.astype(np.float64),
        1 if gain is None else gain.astype(np.float64),
        np.zeros(SIG, bool) if excluded is None else excluded,
    )
    check(results, frames, MASKS)
    assert sum(n for _, n in stand_in) == np.prod(NAV)


def test_partial_last_tile_reuses_the_slots_in_order():
    """Tiles of 3, 3, 3, 1 frames through 2 slots: each tile arrives whole (the last,
    shorter one too), and a slot is refilled only after its last copy is done (host wait)
    and its device buffer freed (the copy stream waits for that tile's compute)."""
    device = StandInDevice()
    stager = TileStager(device, np.uint16, 3 * 4)
    tiles = [np.full((n, 4), i + 1, np.uint16) for i, n in enumerate([3, 3, 3, 1])]
    done = {}
    for i, tile in enumerate(tiles):
        start = len(device.journal)
        staged, slot = stager.stage(tile)
        np.testing.assert_array_equal(staged, tile)
        ops = device.journal[start:]
        copy = next(k for k, op in enumerate(ops) if op[0] == "copy")
        if i >= 2:  # (the slot of tile i - 2)
            copied, freed = done[i - 2]
            assert ("sync", copied) in ops[:copy]
            assert ("wait", "copy", freed) in ops[:copy]
        record = ops[copy + 1]
        assert record[:2] == ("record", "copy")
        assert ops[copy + 2] == ("wait", "compute", record[2])
        stager.release(slot)
        done[i] = (record[2], device.journal[-1][2])
        assert device.journal[-1][:2] == ("record", "compute")
    ids = [op[1] for op in device.journal if op[0] == "copy"]
    assert ids[0] == ids[2] and ids[1] == ids[3] and ids[0] != ids[1]


def test_stager_refuses_a_tile_too_large():
    stager = TileStager(StandInDevice(), np.uint16, 8)
    with pytest.raises(ValueError, match=r"at most 8 elements of uint16"):
        stager.stage(np.zeros((3, 4), np.uint16))


class FrameSums(ltdask.UDF):
    """Each frame's sum and the sum of all frames, by frame or by partition, CuPy only."""

    def __init__(self, method):
        super().__init__(method=method)

    def get_backends(self):
        return (self.BACKEND_CUPY,)

    def get_method(self):
        return self.UDF_METHOD(self.params.method)

    def get_result_buffers(self):
        return {
            "frames": self.buffer(kind="nav", dtype=np.float64),
            "pixels": self.buffer(kind="sig", dtype=np.float64, where="device"),
        }

    def process_frame(self, frame):
        self.results.frames[:] = float(frame.sum())
        self.results.pixels[:] += frame

    def process_partition(self, partition):
        self.results.frames[:] = self.forbuf(partition.sum(axis=(1, 2)), self.results.frames)
        self.results.pixels[:] += partition.sum(axis=0)

    def merge(self, dest, src):
        dest.frames[:] = src.frames
        dest.pixels[:] += src.pixels


@pytest.mark.parametrize("method", ["frame", "partition"])
def test_frames_and_partitions_on_the_device(stand_in, method):
    data = data_of("uint16", seed=8)
    roi = np.random.default_rng(9).random(NAV) < 0.6
    res = FrameSums(method).compute(ltdask.from_array(data), roi=roi, scheduler="sync")
    f = data.astype(np.float64)
    np.testing.assert_allclose(res["frames"].values[roi], f[roi].sum(axis=(1, 2)), rtol=1e-6)
    np.testing.assert_allclose(res["pixels"].values, f[roi].sum(axis=0), rtol=1e-6)
    assert sum(n for _, n in stand_in) == roi.sum()


def test_device_tiles_take_their_own_size(stand_in):
    """Runs staged to a GPU negotiate tiles of ``ltdask.device-tile-bytes``, not the CPU's
    ``ltdask.tile-bytes``: frames of 8 KiB (uint16 64x64) in 16 KiB tiles are 2 deep, in
    64 KiB ones 8 deep; the CPU run keeps its own."""
    data = np.random.default_rng(2).integers(0, 3000, (4, 8, 64, 64)).astype(np.uint16)
    ds = ltdask.from_array(data)
    sizes = {"ltdask.tile-bytes": 16384, "ltdask.device-tile-bytes": 65536}
    with dask.config.set(sizes):
        on_gpu = ltdask.explain(ds, [SumUDF()], backends=("cupy",), scheduler="sync")
        on_cpu = ltdask.explain(ds, [SumUDF()], backends="numpy", scheduler="sync")
        total = ltdask.compute(ds, [SumUDF()], backends=("cupy",), scheduler="sync")[0]
    assert on_gpu.scheme.depth == 8 and on_cpu.scheme.depth == 2, (on_gpu, on_cpu)
    assert [n for _, n in stand_in] == [8, 8, 8, 8]
    np.testing.assert_array_equal(total["intensity"].values, data.sum(axis=(0, 1)))


def test_runs_staged_to_a_gpu_are_known_before_planning(stand_in):
    """`stages_to_gpu` (what sizes a run's partitions, `ltdask.io.partition.for_run`):
    true only where every UDF runs on CuPy on this process's device."""
    from ltdask.runtime.schedulers import RunTarget
    from ltdask.udf.backends import stages_to_gpu

    ds = ltdask.from_array(data_of("uint16"))
    target = RunTarget.resolve("threads")
    assert stages_to_gpu(ds, [SumUDF(), SumSigUDF()], ("cupy",), target)
    assert not stages_to_gpu(ds, [SumUDF()], "numpy", target)
    assert not stages_to_gpu(ds, [SumUDF()], None, target)  # (the CPU is the default)
