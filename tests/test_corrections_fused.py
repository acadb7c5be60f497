"""Folded corrections in one pass over each tile (issue 33): the repaired pixels' values
and the weighted frame sums are worked out from the rows the moments pass has just read
(`ltdask.kernels.repaired`), so StdDev alone and Sum + SumSig + StdDev together read each
tile once with dark + gain + excluded pixels. Frames wider than a block of the passes
(`ltdask.kernels.statistics.BLOCK` pixels), so that some repaired pixels have sources in
two blocks; checked against numpy on the corrected frames (``test_corrections.corrected``)."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from test_corrections import corrected

import ltdask
from ltdask import CorrectionSet
from ltdask.corrections import RepairedMoments
from ltdask.kernels.integer_moments import add_integer_sums_with
from ltdask.kernels.repaired import no_repaired, no_weighted, repaired_rows
from ltdask.kernels.statistics import BLOCK, moments_with
from ltdask.udf import CoMUDF, StdDevUDF, SumSigUDF, SumUDF
from ltdask.udf.builtin._kernels import com_disk, dot_shared_runs, weighted_moments
from ltdask.udf.builtin.mask_container import folded_moment_masks, shared_runs

SIG = (131, 141)  # 18 471 pixels: two blocks, the boundary in row 116


def excluded(kind: str, seed: int = 4) -> np.ndarray:
    """``random-1``: 1 % of the pixels anywhere; ``clusters``: lines and blocks on the
    borders, inside, and across the rows around the first block boundary (pixels whose
    sources lie in both blocks, and excluded neighbours)."""
    rng = np.random.default_rng(seed)
    h, w = SIG
    mask = np.zeros(SIG, bool)
    if kind == "random-1":
        mask.reshape(-1)[rng.choice(h * w, h * w // 100, replace=False)] = True
        mask[0, 0] = mask[h - 1, w - 1] = True
    else:
        row, col = divmod(BLOCK, w)
        mask[row - 1 : row + 2, col - 1 : col + 1] = True  # across the boundary
        mask[row, col + 5] = mask[row + 1, col - 20] = True
        mask[0, 0:3] = mask[1, 0] = True
        mask[h - 1, 60:64] = True
        mask[40:43, w - 1] = True
        mask[70:72, 70:72] = True
    return mask


def _corrections(dtype, kind):
    rng = np.random.default_rng(8)
    scale = 1.0 if np.dtype(dtype).kind == "f" else 100.0
    dark = (rng.normal(1, 0.2, SIG) * scale).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = excluded(kind)
    return dark, gain, mask, CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)


def _repaired_values(frames: np.ndarray, moments: RepairedMoments) -> np.ndarray:
    """Each frame's repaired values (gain applied, dark not taken off), by numpy."""
    rows = np.arange(moments.sources.shape[0])[:, None]
    used = np.arange(moments.sources.shape[1])[None, :] < moments.counts[:, None]
    taken = frames.astype(np.float64)[:, moments.sources] * moments.weights[None]
    return np.where(used[None], taken, 0.0).sum(axis=2)[:, rows[:, 0]]


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("kind", ["random-1", "clusters"])
def test_pass_extras_equal_numpy(dtype, kind):
    """One pass of the moments kernels over a tile wider than a block (13 frames: full
    row groups and the rest, from an offset) gives its moments, the weighted frame sums
    and the repaired pixels' moments (those with sources in two blocks added after it)."""
    rng = np.random.default_rng(1)
    px = SIG[0] * SIG[1]
    frames = np.zeros((13, px + 9), dtype=dtype)
    frames[:, 5 : 5 + px] = rng.integers(0, 3000, (13, px))
    p0, p1 = 5, 5 + px
    tile = frames[:, p0:p1].astype(np.float64)
    *_, cs = _corrections(dtype, kind)
    linear = cs.for_shape(SIG).linear()
    weights = rng.uniform(0.5, 1.5, px).astype(np.float32)  # (as the pass takes them)
    moments = RepairedMoments(linear)
    assert int(np.searchsorted(moments._keys, 2)) < moments.excluded.size  # (two blocks)
    sums = np.zeros(13)

    if dtype == "uint16":
        s1, s2 = np.zeros(px, np.int64), np.zeros(px, np.int64)

        def run(rows):
            add_integer_sums_with(
                frames, p0, p1, s1, s2, np.zeros(0, np.int64), False, (weights, sums), rows
            )

        moments.during(frames, p0, p1, run)
        np.testing.assert_array_equal(s1, tile.sum(axis=0))
        np.testing.assert_array_equal(s2, (tile * tile).sum(axis=0))
    else:
        state = [0, np.zeros(px), np.zeros(px), np.zeros(px)]

        def run(rows):
            state[0] = moments_with(
                frames,
                p0,
                p1,
                *state,
                np.zeros(0),
                False,
                np.zeros(2 * BLOCK),
                (weights, sums),
                rows,
            )

        moments.during(frames, p0, p1, run)
        np.testing.assert_allclose(state[1], tile.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(state[2], tile.var(axis=0) * 13, rtol=1e-9)
    # (float32 products, added in float32 over a few pixels, then in float64)
    np.testing.assert_allclose(sums, tile @ weights.astype(np.float64), rtol=1e-6)
    values = _repaired_values(frames[:, p0:p1], moments)
    total, m2 = np.zeros(px), np.zeros(px)
    moments.finish(total, m2)
    expected = values.sum(0) - 13 * moments.offsets
    np.testing.assert_allclose(total[moments.excluded], expected, rtol=1e-10)
    np.testing.assert_allclose(m2[moments.excluded], values.var(0) * 13, rtol=1e-9)


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize(
    "rows",
    [(0, 1), (2, 6), (3, 11), (1, 16), (0, 23)],
    ids=["one", "four", "eight-then-none", "eight-four-three", "eight-eight-four-three"],
)
def test_repaired_rows_equal_numpy(dtype, rows):
    """`repaired_rows` on a range of rows (eight at a time, then four, then one), from an
    offset in the frames, for a range of the repaired pixels: their shifted sums of ``v``
    and ``v * v`` equal numpy's on the repaired values."""
    rng = np.random.default_rng(9)
    px = SIG[0] * SIG[1]
    frames = np.zeros((24, px + 3), dtype=dtype)
    frames[:, 3:] = rng.integers(0, 3000, (24, px))
    *_, cs = _corrections(dtype, "clusters")
    moments = RepairedMoments(cs.for_shape(SIG).linear())
    i0, i1 = rows
    j0, j1 = 2, moments.excluded.size - 1
    shift = rng.normal(1000, 10, moments.excluded.size)
    s1, s2 = np.zeros_like(shift), np.zeros_like(shift)
    args = (moments.sources, moments.weights, moments.counts, shift, s1, s2)
    repaired_rows(frames, i0, i1, 3, j0, j1, *args)
    values = _repaired_values(frames[i0:i1, 3:], moments) - shift
    want1, want2 = np.zeros_like(shift), np.zeros_like(shift)
    want1[j0:j1] = values[:, j0:j1].sum(axis=0)
    want2[j0:j1] = (values[:, j0:j1] ** 2).sum(axis=0)
    np.testing.assert_allclose(s1, want1, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(s2, want2, rtol=1e-10)


def test_passes_without_extras_leave_sums_alone():
    """The passes given no weights and no repaired pixels (the plain runs) touch nothing
    else."""
    frames = np.arange(3 * 20, dtype=np.uint16).reshape(3, 20)
    s1, s2 = np.zeros(20, np.int64), np.zeros(20, np.int64)
    add_integer_sums_with(
        frames, 0, 20, s1, s2, np.zeros(0, np.int64), False, no_weighted(), no_repaired()
    )
    np.testing.assert_array_equal(s1, frames.sum(axis=0))


def _scan(tmp_path, dtype):
    rng = np.random.default_rng(2)
    nav = (3, 5)
    data = rng.integers(50, 4000, (*nav, *SIG)).astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    return data, ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)


def _no_own_pass(monkeypatch):
    """Make a pass of the repaired pixels' own, or a UDF's own pass beside the shared one,
    an error."""

    def refuse(*args, **kwargs):
        raise AssertionError("a pass of its own over the tile")

    monkeypatch.setattr(RepairedMoments, "add", refuse)
    return refuse


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("kind", ["random-1", "clusters"])
@pytest.mark.parametrize("trio", [False, True], ids=["stddev", "sum+sumsig+stddev"])
def test_one_pass_equals_numpy(tmp_path, monkeypatch, dtype, kind, trio):
    """StdDev alone, and Sum + SumSig + StdDev, with dark + gain + excluded pixels read
    each tile once (no pass of the repaired pixels' own; the three share the moments
    pass) and equal numpy on the corrected frames: an ROI, several partitions."""
    data, ds = _scan(tmp_path, dtype)
    dark, gain, mask, cs = _corrections(dtype, kind)
    refuse = _no_own_pass(monkeypatch)
    if trio:
        for cls in (SumUDF, SumSigUDF, StdDevUDF):
            monkeypatch.setattr(cls, "process_flat_tile", refuse)
    frames = corrected(data.reshape(-1, *SIG), dark, gain, mask)
    roi = np.random.default_rng(3).random(data.shape[:2]) > 0.3
    sel = roi.reshape(-1)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()] if trio else [StdDevUDF()]
    tiles = {"ltdask.partition-bytes": 6 * SIG[0] * SIG[1] * 4}
    with dask.config.set(tiles, scheduler="synchronous"):
        results = ltdask.compute(ds, udfs, roi=roi, corrections=cs)
    picked = frames[sel]
    std = results[-1]
    np.testing.assert_allclose(std["var"].values, picked.var(0), rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(std["mean"].values, picked.mean(0), rtol=1e-5, atol=1e-3)
    if trio:
        np.testing.assert_allclose(results[0]["intensity"].values, picked.sum(0), rtol=1e-5)
        got = results[1]["intensity"].values.reshape(-1)[sel]
        np.testing.assert_allclose(got, picked.sum((1, 2)), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_apply_writes_into_a_results_view(dtype):
    """`PreparedCorrections.apply` corrects a tile of rows straight into a view of a
    results buffer (Pick's frames: no corrected copy to copy again) where each frame's
    pixels are contiguous there, and into a copy where they are not."""
    dark, gain, mask, cs = _corrections(dtype, "clusters")
    prepared = cs.for_shape(SIG)
    rng = np.random.default_rng(6)
    data = rng.integers(0, 3000, (4, *SIG)).astype(dtype)
    rows = (slice(100, 131), slice(0, SIG[1]))  # (the negotiation's tiles: whole rows)
    keep = prepared.linear(rows).plan.excluded.size  # (repaired within the rows)
    assert keep
    results = np.zeros((6, *SIG), np.float32)
    view = results[1:5, 100:131]
    tile = np.ascontiguousarray(data[:, 100:131])
    out = prepared.apply(tile, np.float32, rows, out=view)
    assert out is view
    inside = corrected(data[:, 100:131], dark[rows], gain[rows], mask[rows])
    np.testing.assert_allclose(results[1:5, 100:131], inside, rtol=1e-6)
    assert not results[0].any() and not results[5].any() and not results[1:5, :100].any()
    box = (slice(0, 131), slice(0, 70))  # (a part of each row: not contiguous)
    sub = np.zeros((6, *SIG), np.float32)[1:5, :, :70]
    copy = prepared.apply(np.ascontiguousarray(data[:, :, :70]), np.float32, box, out=sub)
    assert copy is not sub and not sub.any()
    np.testing.assert_allclose(
        copy, corrected(data[:, :, :70], dark[box], gain[box], mask[box]), rtol=1e-6
    )


def test_shared_runs_kernel_equals_numpy():
    """`dot_shared_runs`: masks with one support (runs of it, weights per mask) against
    numpy's products, with an offset into the frames and a frame count not a multiple
    of four."""
    rng = np.random.default_rng(9)
    frames = rng.integers(0, 1000, (7, 300)).astype(np.uint16)
    masks = np.zeros((3, 290))
    support = np.r_[3:20, 40:41, 100:180, 250:290]
    masks[:, support] = rng.normal(size=(3, support.size))
    runs = shared_runs(masks)
    assert len(runs[0]) == 4
    out = np.zeros((7, 3))
    dot_shared_runs(frames, 10, 300, *runs, out)
    np.testing.assert_allclose(out, frames[:, 10:].astype(np.float64) @ masks.T, rtol=1e-9)


def _com_want(data, dark, gain, mask):
    """CoMUDF's raw_com (cy=60.5, cx=70, r=50) by numpy on the corrected frames."""
    frames = corrected(data.reshape(-1, *SIG), dark, gain, mask)
    y, x = np.mgrid[: SIG[0], : SIG[1]]
    disk = (y - 60.5) ** 2 + (x - 70) ** 2 <= 50**2
    total = (frames * disk).sum((1, 2))
    want = np.stack([(frames * disk * y).sum((1, 2)), (frames * disk * x).sum((1, 2))], -1)
    return want / total[:, None]


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_com_on_tiles_that_cut_frames(tmp_path, dtype):
    """Tiles of a few rows of a frame (their rows' y from the signal slice's first row)
    with dark, gain and excluded pixels across the tiles' borders give numpy's CoM of the
    corrected frames."""
    data, ds = _scan(tmp_path, dtype)
    dark, gain, mask, cs = _corrections(dtype, "clusters")
    udf = CoMUDF.with_params(cy=60.5, cx=70, r=50)
    with dask.config.set({"ltdask.tile-bytes": 16 * SIG[1] * data.itemsize}):
        (res,) = ltdask.compute(ds, [udf], corrections=cs)
    got = res["raw_com"].values.reshape(-1, 2)
    np.testing.assert_allclose(got, _com_want(data, dark, gain, mask), rtol=1e-5)


def test_com_folds_its_masks_once_per_corrections(tmp_path, monkeypatch):
    """CoMUDF with corrections folds them into its three masks once per process for the
    same corrections (kept by the signal slice's `LinearCorrection`, which the process
    keeps by the corrections' content): not once per partition (5 ms each) nor once per
    run (up to 70 ms on a busy machine, where a run of a 2 GiB scan takes 100 ms); a
    second `CorrectionSet` of the same arrays reuses them, one with another dark frame
    does not. Each run equals numpy on its corrected frames."""
    import ltdask.udf.builtin.com as com

    data, ds = _scan(tmp_path, "uint16")
    dark, gain, mask, cs = _corrections("uint16", "clusters")
    made = []
    original = com.folded_moment_masks
    monkeypatch.setattr(com, "folded_moment_masks", lambda *a: made.append(1) or original(*a))
    udf = CoMUDF.with_params(cy=60.5, cx=70, r=50)
    tiles = {"ltdask.partition-bytes": 4 * SIG[0] * SIG[1] * 2, "ltdask.tile-bytes": 2**22}
    darker = dark + 7.0
    with dask.config.set(tiles, scheduler="synchronous"):
        assert ltdask.explain(ds, [udf], corrections=cs).partitions > 2
        results = [ltdask.compute(ds, [udf], corrections=cs)[0]]
        assert len(made) == 1
        again = CorrectionSet(dark=dark.copy(), gain=gain.copy(), excluded_pixels=mask.copy())
        results.append(ltdask.compute(ds, [udf], corrections=again)[0])
        assert len(made) == 1
        other = CorrectionSet(dark=darker, gain=gain, excluded_pixels=mask)
        results.append(ltdask.compute(ds, [udf], corrections=other)[0])
        assert len(made) == 2
    for result, dark_frame in zip(results, [dark, dark, darker], strict=True):
        got = result["raw_com"].values.reshape(-1, 2)
        np.testing.assert_allclose(got, _com_want(data, dark_frame, gain, mask), rtol=1e-5)


@pytest.mark.parametrize("whole_rows", [True, False], ids=["intervals", "runs"])
def test_folded_moment_masks_equal_numpy(whole_rows):
    """CoM's three masks (a ring: two intervals in some rows) with dark, gain and excluded
    pixels folded in -- on the ring's edges, inside, just outside (sources outside the
    ring), in a corner -- give the products of the corrected frames: as weighted row
    intervals that take in the excluded pixels' sources, or all as runs; 7 frames (not a
    multiple of four)."""
    sig = (13, 17)
    rng = np.random.default_rng(10)
    frames = rng.integers(0, 3000, (7, sig[0] * sig[1])).astype(np.uint16)
    dark = rng.normal(20, 3, sig)
    gain = rng.uniform(0.8, 1.2, sig)
    mask = np.zeros(sig, bool)
    mask[6, 2] = mask[6, 3] = mask[0, 0] = mask[6, 8] = mask[1, 8] = mask[12, 16] = True
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    ring, starts, stops = com_disk(*sig, 6.0, 8.0, 6.0, 2.0)
    assert (starts != stops).sum(axis=1).max() == 2
    linear = cs.for_shape(sig).linear()
    every = (slice(0, sig[0]), slice(0, sig[1]))
    intervals, runs, offsets = folded_moment_masks(
        ring, every, linear, np.float32 if whole_rows else None
    )
    assert (intervals is not None) == whole_rows
    out = np.zeros((7, 3)) - offsets
    if whole_rows:
        _, starts, stops, *_ = intervals
        read = np.zeros(sig, bool)
        for r, k in zip(*np.nonzero(stops > starts), strict=True):
            read[r, starts[r, k] : stops[r, k]] = True
        # the ring and the sources outside it (row 1's pixel 8 is repaired from row 0's)
        assert read[ring].all() and read[0, 7:10].all() and (read & ~ring).sum() <= 6 * 8
        weighted_moments(frames, 0, frames.shape[1], sig[1], *intervals, out)
    else:
        dot_shared_runs(frames, 0, frames.shape[1], *runs, out)
    y, x = np.mgrid[: sig[0], : sig[1]]
    weights = np.stack([ring, ring * y, ring * x]).reshape(3, -1).astype(np.float64)
    want = corrected(frames.reshape(7, *sig), dark, gain, mask).reshape(7, -1) @ weights.T
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_float64_runs_keep_float64_frame_sums(tmp_path):
    """The shared pass's weighted frame sums of a float64 run (Sum + SumSig + StdDev on a
    float64 scan) are float64 products, not float32 ones."""
    rng = np.random.default_rng(12)
    data = rng.normal(1000, 100, (2, 3, *SIG))
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(2, 3), sig_shape=SIG, dtype=np.float64)
    dark, gain, mask, cs = _corrections("float64", "clusters")
    with dask.config.set(scheduler="synchronous"):
        results = ltdask.compute(ds, [SumUDF(), SumSigUDF(), StdDevUDF()], corrections=cs)
    want = corrected(data.reshape(-1, *SIG), dark, gain, mask).sum((1, 2))
    np.testing.assert_allclose(results[1]["intensity"].values.reshape(-1), want, rtol=1e-12)
