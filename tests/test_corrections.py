"""Detector corrections (dark frame, gain map, excluded pixels) in UDF runs: against numpy
on the corrected frames and against LiberTEM 0.16's results (``tests/reference``)."""

from __future__ import annotations

import os
import re
import warnings

import dask
import numpy as np
import pytest
from reference import corrections_cases as cases  # noqa: E402

import ltdask
from ltdask import UDF, CorrectionSet, DataSetError
from ltdask.compat import Context
from ltdask.corrections._find import pixel_statistics
from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF, TilePaths
from ltdask.udf.explain import explain

REFERENCE = os.path.join(os.path.dirname(__file__), "reference", "data", "corrections")


def corrected(data, dark=None, gain=None, mask=None) -> np.ndarray:
    """The corrections written out pixel by pixel (an independent reference)."""
    sig = data.shape[-2:]
    out = data.reshape(-1, *sig).astype(np.float64)
    if dark is not None:
        out = out - dark
    if gain is not None:
        out = out * gain
    if mask is not None:
        for y, x in zip(*np.nonzero(mask), strict=True):
            near = [
                (y + dy, x + dx)
                for dy in (-1, 0, 1)
                for dx in (-1, 0, 1)
                if (dy or dx)
                and 0 <= y + dy < sig[0]
                and 0 <= x + dx < sig[1]
                and not mask[y + dy, x + dx]
            ]
            out[:, y, x] = np.mean([out[:, a, b] for a, b in near], axis=0)
    return out.reshape(data.shape)


def case_inputs(case):
    case_id, dtype, with_dark, with_gain, excl, roi_kind = case
    data = cases.frames(dtype)
    dark = cases.dark() if with_dark else None
    gain = cases.gain() if with_gain else None
    mask = cases.excluded(excl) if excl != "none" else None
    return data, dark, gain, mask, cases.roi(roi_kind)


def ltdask_udfs():
    h, w = cases.SIG
    return {
        "sum": SumUDF(),
        "sumsig": SumSigUDF(),
        "stddev": StdDevUDF(),
        "ring": ApplyMasksUDF(mask_factories=[lambda: ltdask.masks.ring(6, 8, w, h, 6, 2)]),
        "com": CoMUDF.with_params(cy=8, cx=6, r=5),
        "pick": PickUDF(),
    }


CASES = [pytest.param(c, id=c[0]) for c in cases.CASES]


@pytest.mark.parametrize("case", CASES)
def test_frames_as_numpy_and_libertem(case):
    data, dark, gain, mask, _ = case_inputs(case)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    got = cs.for_shape(cases.SIG).apply(data.reshape(-1, *cases.SIG), np.float32)
    expected = corrected(data, dark, gain, mask).reshape(-1, *cases.SIG)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-3)
    libertem = np.load(os.path.join(REFERENCE, f"{case[0]}.npz"))["frames"]
    np.testing.assert_allclose(got, libertem.reshape(got.shape), rtol=1e-5, atol=1e-3)


def _runs(data, tmp_path, how):
    if how == "memory":
        return ltdask.from_array(data)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    return ltdask.open_raw(path, nav_shape=cases.NAV, sig_shape=cases.SIG, dtype=data.dtype)


@pytest.mark.parametrize("how", ["memory", "raw"])
@pytest.mark.parametrize("case", CASES)
def test_udfs_as_libertem(case, how, tmp_path):
    data, dark, gain, mask, roi = case_inputs(case)
    ds = _runs(data, tmp_path, how)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    reference = np.load(os.path.join(REFERENCE, f"{case[0]}.npz"))
    udfs = ltdask_udfs()
    pick_roi = np.zeros(cases.NAV, bool)
    pick_roi[1, 2] = True
    with dask.config.set({"ltdask.partition-bytes": 4 * 192 * 11, "ltdask.min-partitions": 1}):
        results = dict(
            zip(
                udfs,
                ltdask.compute(
                    ds, [u for k, u in udfs.items() if k != "pick"], roi=roi, corrections=cs
                ),
                strict=False,
            )
        )
        results["pick"] = ltdask.compute(ds, [udfs["pick"]], roi=pick_roi, corrections=cs)[0]
        ctx = Context.make_with("inline")
        compat = ctx.run_udf(dataset=ds, udf=SumSigUDF(), roi=roi, corrections=cs)
    for key in reference.files:
        if key == "frames" or key.endswith("__valid"):
            continue
        name, buffer = key.split("__")
        got = results[name][buffer].values
        want = reference[key]
        assert got.shape == want.shape, key
        rtol = 1e-4 if name in ("stddev", "com") else 1e-5
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-3, err_msg=key)
        np.testing.assert_array_equal(
            results[name][f"{buffer}_valid"].values, reference[f"{key}__valid"], err_msg=key
        )
    np.testing.assert_allclose(
        compat["intensity"].data, reference["sumsig__intensity"], rtol=1e-5, atol=1e-3
    )


def _folds(ds, udfs, **kw) -> bool:
    text = str(explain(ds, udfs, **kw))
    return "applied by the UDFs to their results" in text


#: UDFs that fold corrections into their results, alone and in the shared pass
FOLDING = {"sum": ("dark", "gain"), "sumsig": ("dark",), "stddev": ("dark", "gain")}


@pytest.mark.parametrize("names", [["sum"], ["sumsig"], ["stddev"], ["sum", "sumsig", "stddev"]])
@pytest.mark.parametrize("how", ["memory", "raw"])
@pytest.mark.parametrize("case", CASES)
def test_folding_udfs_as_libertem(case, how, names, tmp_path):
    """Sum, SumSig and StdDev apply a dark frame (and Sum and StdDev a gain map) to their
    results of uncorrected integer tiles, where every UDF of the run folds every given
    correction and no pixel is excluded: LiberTEM's results all the same."""
    data, dark, gain, mask, roi = case_inputs(case)
    ds = _runs(data, tmp_path, how)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    given = {n for n, a in (("dark", dark), ("gain", gain)) if a is not None}
    expect_fold = (
        data.dtype.kind in "ui"
        and data.dtype.itemsize <= 2
        and mask is None
        and bool(given)
        and all(given <= set(FOLDING[n]) for n in names)
    )
    udfs = [ltdask_udfs()[n] for n in names]
    assert _folds(ds, udfs, roi=roi, corrections=cs) == expect_fold
    with dask.config.set({"ltdask.partition-bytes": 4 * 192 * 11, "ltdask.min-partitions": 1}):
        results = ltdask.compute(ds, udfs, roi=roi, corrections=cs)
    reference = np.load(os.path.join(REFERENCE, f"{case[0]}.npz"))
    for name, res in zip(names, results, strict=True):
        for key in reference.files:
            if not key.startswith(f"{name}__") or key.endswith("__valid"):
                continue
            rtol = 1e-4 if name == "stddev" else 1e-5
            got = res[key.split("__")[1]].values
            np.testing.assert_allclose(got, reference[key], rtol=rtol, atol=1e-3, err_msg=key)


class TileSumUDF(SumUDF):
    """SumUDF on tiles corrected as they are read (it declares no folding)."""

    TILE_PATHS = TilePaths()


class TileSumSigUDF(SumSigUDF):
    """SumSigUDF on corrected tiles."""

    TILE_PATHS = TilePaths()


class TileStdDevUDF(StdDevUDF):
    """StdDevUDF on corrected tiles."""

    TILE_PATHS = TilePaths()


def _numpy_results(frames: np.ndarray) -> dict:
    """What Sum, SumSig and StdDev give for `frames` (corrected, float64), by numpy."""
    return {
        "sum": {"intensity": frames.sum(axis=0)},
        "sumsig": {"intensity": frames.sum(axis=(1, 2))},
        "stddev": {"mean": frames.mean(axis=0), "var": frames.var(axis=0)},
    }


@pytest.mark.parametrize("names", [["sum"], ["sumsig"], ["stddev"], ["sum", "sumsig", "stddev"]])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16"])
@pytest.mark.parametrize("which", ["dark", "gain", "both"])
@pytest.mark.parametrize("sync_offset", [0, -3, 2])
def test_folded_results_equal_corrected_tiles(tmp_path, names, dtype, which, sync_offset):
    """Results with the corrections folded in (uncorrected tiles, corrected results) equal
    those of corrected tiles and numpy's, with frames missing before or after the file
    (they add nothing), several partitions and signal slices, an ROI, one frame and an
    empty ROI."""
    rng = np.random.default_rng([7, len(dtype), sync_offset + 5])
    nav, sig = (5, 7), (13, 11)
    data = rng.integers(0, 120, (*nav, *sig)).astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    dark = rng.uniform(0, 50, sig).astype(np.float32) if which != "gain" else None
    gain = rng.uniform(0.5, 2, sig).astype(np.float32) if which != "dark" else None
    cs = CorrectionSet(dark=dark, gain=gain)
    ds = ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype=dtype, sync_offset=sync_offset)
    frames = np.zeros((35, *sig), np.float64)  # missing frames: never read
    present = np.zeros(35, bool)
    stream = data.reshape(35, *sig)
    for i in range(35):
        if 0 <= i + sync_offset < 35:
            frames[i] = stream[i + sync_offset]
            present[i] = True
    want_frames = corrected(frames, dark, gain)
    folding = {"sum": SumUDF, "sumsig": SumSigUDF, "stddev": StdDevUDF}
    on_tiles = {"sum": TileSumUDF, "sumsig": TileSumSigUDF, "stddev": TileStdDevUDF}
    one = np.zeros(nav, bool)
    one[2, 3] = True
    with dask.config.set({"ltdask.partition-bytes": 6 * 13 * 11 * 4, "ltdask.tile-bytes": 400}):
        udfs = [folding[n]() for n in names]
        given = {"dark", "gain"} if which == "both" else {which}
        assert _folds(ds, udfs, corrections=cs) == all(given <= set(FOLDING[n]) for n in names)
        assert not _folds(ds, [on_tiles[n]() for n in names], corrections=cs)
        for r in (None, rng.random(nav) > 0.4, one, np.zeros(nav, bool)):
            sel = (np.ones(35, bool) if r is None else r.reshape(-1)) & present
            got = ltdask.compute(ds, [folding[n]() for n in names], roi=r, corrections=cs)
            tiles = ltdask.compute(ds, [on_tiles[n]() for n in names], roi=r, corrections=cs)
            want = _numpy_results(want_frames[sel]) if sel.any() else None
            for name, g, t in zip(names, got, tiles, strict=True):
                for key in g.data_vars:
                    if key.endswith("_valid"):
                        continue
                    a, b = g[key].values, t[key].values
                    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-3, err_msg=key)
                    if want is None or key not in want[name]:
                        continue
                    if name == "sumsig":  # (frames in the ROI and in the file)
                        a = a.reshape(-1)[sel]
                    np.testing.assert_allclose(a, want[name][key], rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("tile_bytes", ["auto", 2 * 12 * 4])
def test_every_udf_sees_corrected_frames(tile_bytes):
    """Any UDF's result equals the same UDF on frames corrected beforehand (tiles cut the
    frame where only dark and gain apply)."""
    data, dark, gain, mask, roi = case_inputs(cases.CASES[8])
    fixed = corrected(data, dark, gain, mask).astype(np.float32)
    for m in (None, mask):
        cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=m)
        fixed = corrected(data, dark, gain, m).astype(np.float32)
        with dask.config.set({"ltdask.tile-bytes": tile_bytes}):
            got = ltdask.compute(
                ltdask.from_array(data), list(ltdask_udfs().values())[:5], roi=roi, corrections=cs
            )
            want = ltdask.compute(
                ltdask.from_array(fixed), list(ltdask_udfs().values())[:5], roi=roi
            )
        for g, w in zip(got, want, strict=True):
            for name in w.data_vars:
                np.testing.assert_allclose(g[name].values, w[name].values, rtol=1e-5, atol=1e-3)


class SeesCorrections(UDF):
    def get_result_buffers(self):
        return {"n": self.buffer(kind="nav")}

    def process_frame(self, frame):
        assert self.meta.corrections is self.params.cs
        assert frame.dtype == np.float32
        self.results.n[:] = frame[1, 1]


def test_meta_corrections_and_float_input():
    data = np.arange(2 * 3 * 4 * 4, dtype=np.uint16).reshape(2, 3, 4, 4)
    cs = CorrectionSet(dark=np.ones((4, 4)))
    res = SeesCorrections(cs=cs).compute(ltdask.from_array(data), corrections=cs)
    np.testing.assert_array_equal(res["n"].values, data[..., 1, 1] - 1.0)


BAD = [
    pytest.param(dict(dark=np.zeros((12, 16))), r"dark has shape \(12, 16\); expected the "
                 r"signal shape \(16, 12\)", id="dark-transposed"),
    pytest.param(dict(gain=np.ones((16, 11))), r"gain has shape \(16, 11\)", id="gain-shape"),
    pytest.param(dict(excluded_pixels=np.zeros((16, 13), bool)), r"excluded_pixels \(a mask\) "
                 r"has shape \(16, 13\)", id="mask-shape"),
    pytest.param(dict(excluded_pixels=np.array([[3, 16], [2, 2]])), r"coordinate 16 in dim 0 "
                 r"is outside the signal shape \(16, 12\)", id="coords-out-of-range"),
    pytest.param(dict(excluded_pixels=np.ones((16, 12), bool)), r"excluded pixel \(0, 0\) has "
                 r"no neighbour that is not excluded", id="all-excluded"),
]  # fmt: skip


@pytest.mark.parametrize("kwargs, message", BAD)
def test_bad_corrections_name_the_array(kwargs, message):
    ds = ltdask.from_array(cases.frames("float32"))
    with pytest.raises(DataSetError, match=message):
        SumUDF().compute(ds, corrections=CorrectionSet(**kwargs))


def test_bad_values_when_made():
    gain = np.ones(cases.SIG)
    gain[3, 4] = np.nan
    with pytest.raises(DataSetError, match=r"gain has non-finite values \(first at \(3, 4\)\)"):
        CorrectionSet(gain=gain)
    with pytest.raises(DataSetError, match=r"dark \(16, 12\) and gain \(12, 16\)"):
        CorrectionSet(dark=np.zeros((16, 12)), gain=np.ones((12, 16)))
    with pytest.raises(DataSetError, match="no neighbour that is not excluded"):
        CorrectionSet(excluded_pixels=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="expected an ltdask.CorrectionSet"):
        SumUDF().compute(ltdask.from_array(cases.frames("float32")), corrections={"dark": 1})
    # allow_empty: the pixel keeps its corrected value
    mask = np.zeros((5, 5), bool)
    mask[1:4, 1:4] = True
    data = np.random.default_rng(0).random((1, 2, 5, 5)).astype(np.float32)
    cs = CorrectionSet(excluded_pixels=mask, allow_empty=True)
    res = PickUDF().compute(ltdask.from_array(data), roi=np.array([[True, False]]), corrections=cs)
    assert res["intensity"].values[0, 2, 2] == data[0, 0, 2, 2]


# -- finding the pixels to exclude --------------------------------------------------------------
def _diffraction_scan(seed=0):
    """Poisson counts of a smooth background and a bright disk, with planted bad pixels."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:32, :28]
    disk = np.where((yy - 15.5) ** 2 + (xx - 13.2) ** 2 <= 7**2, 400.0, 0.0)
    rate = 20 + 0.5 * yy + disk
    data = rng.poisson(rate, (6, 7, 32, 28)).astype(np.float32)
    hot = [(2, 3), (20, 25), (15, 13)]  # one inside the disk
    dead = [(0, 0), (30, 10)]
    noisy = [(8, 20), (25, 4)]
    for y, x in hot:
        data[..., y, x] += 3000
    for y, x in dead:
        data[..., y, x] = 0
    for y, x in noisy:  # about the right mean, ten times the counting noise
        data[..., y, x] = np.abs(rng.normal(rate[y, x], 10 * np.sqrt(rate[y, x]), (6, 7)))
    return data, hot, dead, noisy


@pytest.mark.parametrize("seed", range(4))
def test_find_excluded_recovers_planted_pixels(seed):
    data, hot, dead, noisy = _diffraction_scan(seed)
    mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data))
    assert sorted(map(tuple, np.argwhere(mask).tolist())) == sorted(hot + dead + noisy)
    assert sorted(map(tuple, report.kinds["hot"].T.tolist())) == sorted(hot)
    assert sorted(map(tuple, report.kinds["dead"].T.tolist())) == sorted(dead)
    assert sorted(map(tuple, report.kinds["noisy"].T.tolist())) == sorted(noisy)
    assert report.frames == 42 and "7 of 896 pixels (3 hot, 2 dead, 2 noisy)" in repr(report)
    # the mask repairs the scan: the SumUDF equals the clean counts' neighbourhood means
    cs = CorrectionSet(excluded_pixels=mask)
    total = SumUDF().compute(ltdask.from_array(data), corrections=cs)["intensity"].values
    np.testing.assert_allclose(total, corrected(data, mask=mask).sum(axis=(0, 1)), rtol=1e-5)


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "nan-in-one-frame"])
def test_find_excluded_flags_nan_and_inf_pixels(bad):
    # a pixel NaN in every frame was reported as 0 bad pixels, and its NaN median spread
    # hid the hot, dead and noisy ones too
    data, hot, dead, noisy = _diffraction_scan(2)
    planted = [(5, 6), (16, 15)]  # (one inside the disk)
    value = float(bad.removesuffix("-in-one-frame"))
    for y, x in planted:
        if bad.endswith("one-frame"):
            data[3, 4, y, x] = value
        else:
            data[..., y, x] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (numpy's, on the NaN moments)
        mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data))
    assert sorted(map(tuple, report.kinds["nonfinite"].T.tolist())) == planted
    want = sorted(hot + dead + noisy + planted)
    assert sorted(map(tuple, np.argwhere(mask).tolist())) == want
    assert "9 of 896 pixels (2 non-finite, 3 hot, 2 dead, 2 noisy)" in repr(report)


@pytest.mark.parametrize("skip", ["hot", "dead"])
def test_find_excluded_kinds_can_be_skipped(skip):
    data, hot, dead, noisy = _diffraction_scan(1)
    mask, report = ltdask.corrections.find_excluded(ltdask.from_array(data), **{skip: None})
    expected = {"nonfinite": [], "hot": hot, "dead": dead, "noisy": noisy}
    del expected[skip]
    assert set(report.kinds) == set(expected)
    found = sorted(map(tuple, np.argwhere(mask).tolist()))
    assert found == sorted(p for pixels in expected.values() for p in pixels)


@pytest.mark.parametrize(
    ("dtype", "roi"),
    [
        pytest.param(np.uint16, None, id="u16-all"),
        pytest.param(np.float32, "random", id="f32-roi"),
        pytest.param(np.int32, "one-chunk-empty", id="i32-roi-skips-a-chunk"),
    ],
)
def test_pixel_statistics_are_numpys(dtype, roi):
    """find_excluded's statistics (the moments kernel per chunk, merged), against numpy's
    float64 mean and std of the same frames, over several chunks."""
    rng = np.random.default_rng(3)
    data = (rng.random((6, 5, 8, 7)) * 3000 - (500 if dtype == np.int32 else 0)).astype(dtype)
    if roi == "random":
        roi = rng.random((6, 5)) > 0.4
    elif roi == "one-chunk-empty":
        roi = np.ones((6, 5), dtype=bool)
        roi[:2] = False
    frame = 8 * 7 * 4
    with dask.config.set({"ltdask.partition-bytes": 10 * frame, "ltdask.min-partitions": 1}):
        ds = ltdask.from_array(data)
        assert ds.to_dask().numblocks[0] > 2
        mean, std, frames = pixel_statistics(ds, roi)
    chosen = data.reshape(30, 8, 7)
    if roi is not None:
        chosen = chosen[roi.reshape(-1)]
    assert frames == len(chosen)
    np.testing.assert_allclose(mean, chosen.astype(np.float64).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, chosen.astype(np.float64).std(axis=0), rtol=1e-9)


def test_find_excluded_refuses_complex_pixels():
    ds = ltdask.from_array(np.ones((2, 2, 4, 4), dtype=np.complex64))
    with pytest.raises(DataSetError, match=r"real pixel values; this dataset's are complex64"):
        ltdask.corrections.find_excluded(ds)


@pytest.mark.parametrize("chunks", [None, (2, 3, 4, 5)])
@pytest.mark.parametrize("case", [cases.CASES[2], cases.CASES[8]], ids=["dark-gain", "mixed"])
def test_to_dask_gives_corrected_frames(tmp_path, case, chunks):
    import warnings

    data, dark, gain, mask, _ = case_inputs(case)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.MissingFramesWarning)
        ds = ltdask.open_raw(path, nav_shape=(6, 7), sig_shape=cases.SIG, dtype=data.dtype,
                             sync_offset=-3)  # fmt: skip
    arr = ds.to_dask(chunks=chunks, corrections=cs)
    assert arr.dtype == np.float32
    if mask is not None:  # repaired pixels need whole frames
        assert arr.chunks[2:] == ((16,), (12,))
    got = arr.compute().reshape(-1, *cases.SIG)
    want = corrected(data, dark, gain, mask).reshape(-1, *cases.SIG)
    np.testing.assert_allclose(got[3:38], want, rtol=1e-5, atol=1e-3)
    assert (got[:3] == 0).all() and (got[38:] == 0).all()  # positions without a frame
    xa = ds.to_xarray(corrections=cs)
    assert xa.dims == ds.dims
    np.testing.assert_allclose(xa.values.reshape(got.shape), got, rtol=1e-6)


@pytest.mark.parametrize(
    "rows", [[63, 100, 200], [64, 127, 128], [0, 255], [31, 32, 95, 96, 159, 160]]
)
def test_tiles_keep_excluded_neighbourhoods_whole(rows):
    """Tiles cut large frames, but never next to an excluded pixel: each is repaired from
    its whole 3x3 neighbourhood in one pass."""
    from ltdask.udf.graph import Run

    rng = np.random.default_rng(4)
    sig = (256, 64)
    data = rng.normal(100, 10, (3, 4, *sig)).astype(np.float32)
    mask = np.zeros(sig, bool)
    mask[rows, rng.integers(0, 64, len(rows))] = True
    dark = rng.normal(5, 1, sig).astype(np.float32)
    cs = CorrectionSet(dark=dark, excluded_pixels=mask)
    ds = ltdask.from_array(data)
    with dask.config.set({"ltdask.tile-bytes": "16KiB", "ltdask.min-partitions": 1}):
        run = Run(ds, [SumUDF()], corrections=cs)
        assert len(run.scheme) > 1
        for s in run.scheme.slices:
            for boundary in (s.origin[0], s.origin[0] + s.shape[0]):
                if 0 < boundary < sig[0]:
                    assert boundary not in rows and boundary - 1 not in rows
        (res,) = ltdask.compute(ds, [StdDevUDF()], corrections=cs)
    fixed = corrected(data, dark, None, mask).reshape(-1, *sig)
    np.testing.assert_allclose(res["mean"].values, fixed.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(res["var"].values, fixed.var(axis=0), rtol=1e-3)


@pytest.mark.parametrize(
    "dtype, with_dark, with_gain",
    [
        pytest.param(np.float32, True, True, id="f32-dark-gain"),
        pytest.param(np.float64, True, False, id="f64-dark"),
        pytest.param(np.float32, False, True, id="f32-gain"),
        pytest.param(np.float64, False, False, id="f64-repair-only"),
    ],
)
def test_kernel_matches_numpy(dtype, with_dark, with_gain):
    """The numba kernel against the numpy reference: whole frames with a cluster of
    excluded pixels, and a slice ``p0:p1`` of the flat frames (rows 2 and 3)."""
    from ltdask.corrections import RepairPlan
    from ltdask.corrections._kernels import correct_frames

    rng = np.random.default_rng(7)
    sig = (6, 5)
    frames = rng.integers(0, 1000, (4, 30)).astype(np.uint16)
    dark = rng.normal(5, 1, sig) if with_dark else None
    gain = rng.uniform(0.5, 2, sig) if with_gain else None
    flat = [np.zeros(0, dtype) if a is None else a.astype(dtype).ravel() for a in (dark, gain)]
    mask = np.zeros(sig, bool)
    mask[0, 0] = mask[2, 2] = mask[2, 3] = True
    plan = RepairPlan.make(sig, np.argwhere(mask).T, allow_empty=False)
    out = np.empty((4, 30), dtype)
    correct_frames(frames, 0, 30, *flat, plan.excluded, plan.sources, plan.counts, out)
    expected = corrected(frames.reshape(4, *sig), dark, gain, mask)
    np.testing.assert_allclose(out.reshape(4, *sig), expected, rtol=1e-6)
    none = RepairPlan.make(sig, np.zeros((2, 0), int), allow_empty=False)
    part = np.empty((4, 10), dtype)
    cut = [a[10:20] if a.size else a for a in flat]
    correct_frames(frames, 10, 20, *cut, none.excluded, none.sources, none.counts, part)
    expected = corrected(frames.reshape(4, *sig), dark, gain)[:, 2:4].reshape(4, 10)
    np.testing.assert_allclose(part, expected, rtol=1e-6)


def test_avoid_excluded():
    from ltdask.io.tiling import avoid_excluded

    # rows 4 and 11 excluded in 16 rows: boundaries at 3|4, 4|5, 10|11, 11|12 are out
    assert avoid_excluded([2, 12], (16, 12), (1, 12), np.array([[4, 11], [0, 0]])) == [7, 12]
    # no row height works: whole frames
    every = np.array([list(range(0, 16, 2)), [0] * 8])
    assert avoid_excluded([4, 12], (16, 12), (1, 12), every) == [16, 12]


@pytest.mark.parametrize("raw", [False, True], ids=["u16", "raw-r12"])
def test_mib_with_corrections(tmp_path, raw):
    from helpers.mibfiles import make_counts, write_mib

    counts = make_counts(np.random.default_rng(5), 12, (16, 128), 12)
    write_mib(tmp_path / "scan.mib", counts, depth=12, raw=raw)
    ds = ltdask.open_mib(tmp_path / "scan.mib", nav_shape=(3, 4))
    rng = np.random.default_rng(6)
    dark = rng.normal(5, 1, (16, 128)).astype(np.float32)
    gain = rng.uniform(0.9, 1.1, (16, 128)).astype(np.float32)
    mask = np.zeros((16, 128), bool)
    mask[[0, 7, 15], [3, 64, 127]] = True
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    roi = rng.random((3, 4)) > 0.3
    total, frames = ltdask.compute(ds, [SumUDF(), SumSigUDF()], roi=roi, corrections=cs)
    fixed = corrected(counts.reshape(3, 4, 16, 128), dark, gain, mask)
    np.testing.assert_allclose(total["intensity"].values, fixed[roi].sum(axis=0), rtol=1e-5)
    np.testing.assert_allclose(
        frames["intensity"].values[roi], fixed[roi].sum(axis=(1, 2)), rtol=1e-5
    )


# -- the command line ---------------------------------------------------------------------------
def _cli(tmp_path, *args):
    from click.testing import CliRunner

    from ltdask.cli import main

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return CliRunner().invoke(main, ["--scheduler", "sync", *args])
    finally:
        os.chdir(old)


def test_cli_run_and_convert_with_corrections(tmp_path):
    import zarr

    data, dark, gain, mask, _ = case_inputs(cases.CASES[9])  # uint16, all corrections
    np.save(tmp_path / "scan.npy", data)
    np.save(tmp_path / "dark.npy", dark)
    np.save(tmp_path / "gain.npy", gain)
    np.save(tmp_path / "mask.npy", mask.astype(np.uint8))
    flags = ["--dark", "dark.npy", "--gain", "gain.npy", "--excluded", "mask.npy"]
    fixed = corrected(data, dark, gain, mask)
    r = _cli(tmp_path, "run", "sumsig", "scan.npy", *flags, "--out", "res.zarr", "--no-progress")
    assert r.exit_code == 0, r.output
    got = zarr.open_group(tmp_path / "res.zarr")["intensity"][...]
    np.testing.assert_allclose(got, fixed.sum(axis=(2, 3)), rtol=1e-5)
    r = _cli(tmp_path, "convert", "scan.npy", "fixed.zarr", *flags, "--no-progress")
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(zarr.open_array(tmp_path / "fixed.zarr")[...], fixed, 1e-5, 1e-3)


def test_cli_dark_series_is_averaged(tmp_path):
    import zarr

    data, dark, _, _, _ = case_inputs(cases.CASES[0])
    series = dark + np.random.default_rng(9).normal(0, 1, (6, *cases.SIG)).astype(np.float32)
    np.save(tmp_path / "scan.npy", data)
    ltdask.from_array(series.reshape(2, 3, *cases.SIG)).to_zarr(tmp_path / "darks.zarr")
    r = _cli(
        tmp_path, "run", "sum", "scan.npy", "--dark", "darks.zarr", "--out", "res.zarr",
        "--no-progress",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    got = zarr.open_group(tmp_path / "res.zarr")["intensity"][...]
    want = corrected(data, series.mean(axis=0)).sum(axis=(0, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    "make, flag, message",
    [
        (lambda: np.zeros((12, 16), np.float32), "--dark", r"holds frames of shape \(12, 16\)"),
        (lambda: np.full(cases.SIG, np.nan), "--gain", "non-finite"),
        (lambda: np.ones(cases.SIG, np.uint8), "--excluded", "no neighbour that is not excluded"),
    ],
    ids=["dark-shape", "gain-nan", "all-excluded"],
)
def test_cli_bad_corrections(tmp_path, make, flag, message):
    np.save(tmp_path / "scan.npy", cases.frames("float32"))
    np.save(tmp_path / "corr.npy", make())
    r = _cli(tmp_path, "run", "sum", "scan.npy", flag, "corr.npy", "--out", "res.zarr")
    assert r.exit_code != 0
    errors = [line for line in r.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and flag in errors[0] and re.search(message, r.output), r.output
    assert not (tmp_path / "res.zarr").exists()
