"""Corrections folded into the results of the UDFs linear in the frame (Sum, SumSig,
ApplyMasks, CoM, Pick): the corrected frame is ``A (x - dark)``, so the reductions of
uncorrected tiles are corrected afterwards, excluded pixels included; and into StdDev's
moments (the repaired pixels' moments kept from their values frame by frame). Checked
against the corrections written out pixel by pixel (``test_corrections.corrected``) and
numpy."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import scipy.sparse
from test_corrections import corrected

import ltdask
from ltdask import CorrectionSet
from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, StdDevUDF, SumSigUDF, SumUDF
from ltdask.udf.explain import explain

SIG = (37, 41)  # odd, 1517 pixels: 0.1 % is 2 pixels, 1 % is 15


def excluded_mask(kind: str, sig=SIG, seed: int = 5) -> np.ndarray:
    """Excluded pixels: ``random-0.1``/``random-1`` percent anywhere (borders included),
    or ``clusters``: blocks and lines on corners, edges and inside, whose pixels have
    excluded neighbours."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(sig, bool)
    h, w = sig
    if kind.startswith("random"):
        count = max(1, round(h * w * float(kind.split("-")[1]) / 100))
        mask.reshape(-1)[rng.choice(h * w, count, replace=False)] = True
        mask[0, 0] = mask[h - 1, w // 2] = True  # (a corner and an edge every time)
    else:
        mask[0, 0:2] = mask[1, 0] = True  # a corner: (0, 0) is repaired from (1, 1) alone
        mask[h - 1, 10:14] = True  # a line on the bottom edge
        mask[15:18, w - 1] = mask[16, w - 2] = True  # on the right edge
        mask[20:23, 20:23] = True  # a 3x3 block: its centre is repaired from nothing ...
        mask[21, 21] = False  # ... so the centre stays in
        mask[5, 5] = mask[6, 6] = mask[5, 7] = True  # diagonal neighbours
    return mask


def ring(h, w, cy, cx, r, ri) -> np.ndarray:
    y, x = np.mgrid[:h, :w]
    d2 = (y - cy) ** 2 + (x - cx) ** 2
    return (d2 <= r * r) & (d2 > ri * ri)


def _folds(ds, udfs, **kw) -> bool:
    return "applied by the UDFs to their results" in str(explain(ds, udfs, **kw))


def test_linear_map_is_the_corrections():
    """`LinearCorrection` on a frame and on a signal slice: its matrix is the corrections'
    (columns: corrected unit frames), `adjoint` gives ``A^T m`` and `offsets` ``m . A dark``,
    `pixel_weights` ``A^T 1``."""
    sig = (9, 7)
    rng = np.random.default_rng(2)
    dark = rng.normal(10, 2, sig)
    gain = rng.uniform(0.5, 2, sig)
    mask = np.zeros(sig, bool)
    mask[0, 0] = mask[0, 1] = mask[4, 3] = mask[8, 6] = mask[3, 6] = True
    prepared = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask).for_shape(sig)
    size = sig[0] * sig[1]
    units = np.eye(size).reshape(size, *sig)
    a = corrected(units, None, gain, mask).reshape(size, size).T  # column j: A e_j
    linear = prepared.linear()
    np.testing.assert_allclose(linear.matrix.toarray(), a, rtol=1e-6, atol=1e-12)
    masks = rng.normal(size=(3, size))
    adjoint = linear.adjoint(masks)
    np.testing.assert_allclose(adjoint, masks @ a, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(linear.offsets(adjoint), masks @ a @ dark.reshape(-1), rtol=1e-6)
    sparse = linear.adjoint(scipy.sparse.csr_matrix(masks))
    np.testing.assert_allclose(sparse.toarray(), masks @ a, rtol=1e-6, atol=1e-9)
    weights, offset = prepared.pixel_weights()
    np.testing.assert_allclose(weights, a.sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(offset, (a @ dark.reshape(-1)).sum(), rtol=1e-6)
    # rows 3..5: the pixels repaired from within (those at rows 2 and 6 are outside)
    box = (slice(3, 6), slice(0, 7))
    a_box = corrected(np.eye(21).reshape(21, 3, 7), None, gain[box], mask[box])
    a_box = a_box.reshape(21, 21).T
    np.testing.assert_allclose(prepared.linear(box).matrix.toarray(), a_box, rtol=1e-6)
    values = rng.normal(size=21)
    repaired = prepared.linear(box).repair(values * gain[box].reshape(-1))
    np.testing.assert_allclose(repaired, a_box @ values, rtol=1e-6)


def _scan(tmp_path, dtype):
    rng = np.random.default_rng(len(dtype))
    nav = (5, 7)
    if np.dtype(dtype).kind == "f":
        data = rng.normal(300, 60, (*nav, *SIG)).astype(dtype)
    else:
        data = rng.integers(0, 4000, (*nav, *SIG)).astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    return data, ltdask.open_raw(path, nav_shape=nav, sig_shape=SIG, dtype=dtype)


def _udfs(masks: np.ndarray):
    h, w = SIG
    return {
        "sum": SumUDF(),
        "sumsig": SumSigUDF(),
        "stddev": StdDevUDF(),
        "masks": ApplyMasksUDF(mask_factories=lambda: masks),
        "sparse": ApplyMasksUDF(
            mask_factories=[lambda: scipy.sparse.csr_matrix(ring(h, w, 18, 20, 12, 5))],
            use_sparse=True,
        ),
        "com": CoMUDF.with_params(cy=18.5, cx=19, r=14),
        "pick": PickUDF(),
    }


def _want(frames: np.ndarray, masks: np.ndarray, sel: np.ndarray) -> dict:
    """numpy on the corrected float64 frames (flat nav, all frames) for `sel`."""
    h, w = SIG
    y, x = np.mgrid[:h, :w]
    disk = (y - 18.5) ** 2 + (x - 19) ** 2 <= 14**2
    picked = frames[sel]
    total = (picked * disk).sum((1, 2))
    com = np.stack([(picked * disk * y).sum((1, 2)), (picked * disk * x).sum((1, 2))], -1)
    sparse = ring(h, w, 18, 20, 12, 5)
    return {
        "sum": ("intensity", picked.sum(0)),
        "sumsig": ("intensity", picked.sum((1, 2))),
        "stddev": ("var", picked.var(0)),
        "masks": ("intensity", picked.reshape(len(picked), -1) @ masks.reshape(len(masks), -1).T),
        "sparse": ("intensity", (picked * sparse).sum((1, 2))[:, None]),
        "com": ("raw_com", com / total[:, None]),
        "pick": ("intensity", picked),
    }


def _check(name, result, want, sel, nav):
    key, expected = want[name]
    got = result[key].values
    if name in ("sumsig", "masks", "sparse", "com"):  # nav-shaped: the ROI's positions
        got = got.reshape(int(np.prod(nav)), *got.shape[2:])[sel]
    rtol = 1e-4 if name in ("com", "stddev") else 1e-5
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-2, err_msg=name)


RUNS = [["sum"], ["sumsig"], ["stddev"], ["masks"], ["sparse"], ["com"]]
RUNS += [["sum", "sumsig", "stddev"], ["sum", "sumsig", "stddev", "masks", "com"]]


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("kind", ["random-0.1", "random-1", "clusters"])
@pytest.mark.parametrize("names", [pytest.param(n, id="+".join(n)) for n in RUNS])
def test_folded_runs_equal_numpy(tmp_path, dtype, kind, names):
    """Each linear UDF, alone and together, with dark + gain + excluded pixels folded into
    its results (uncorrected tiles of the data's own dtype), equals numpy on the corrected
    frames: several partitions and signal slices, an ROI."""
    data, ds = _scan(tmp_path, dtype)
    rng = np.random.default_rng(11)
    dark = rng.normal(10, 2, SIG).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = excluded_mask(kind)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    masks = rng.normal(size=(3, *SIG)).astype(np.float32)
    masks[0] = 1
    frames = corrected(data.reshape(-1, *SIG), dark, gain, mask)
    roi = rng.random(data.shape[:2]) > 0.4
    sel = roi.reshape(-1)
    want = _want(frames, masks, sel)
    tiles = {"ltdask.partition-bytes": 12 * SIG[0] * SIG[1] * 4, "ltdask.tile-bytes": 8000}
    with dask.config.set(tiles):
        udfs = [_udfs(masks)[n] for n in names]
        assert _folds(ds, udfs, roi=roi, corrections=cs)
        results = ltdask.compute(ds, udfs, roi=roi, corrections=cs)
    for name, result in zip(names, results, strict=True):
        _check(name, result, want, sel, data.shape[:2])


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_pick_corrects_the_picked_frames(tmp_path, dtype):
    """PickUDF folds the corrections (it corrects the frames it picks), so a run of Pick
    with Sum, StdDev and ApplyMasks reads uncorrected tiles."""
    data, ds = _scan(tmp_path, dtype)
    rng = np.random.default_rng(4)
    dark = rng.normal(10, 2, SIG).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = excluded_mask("clusters")
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    masks = np.ones((1, *SIG), np.float32)
    frames = corrected(data.reshape(-1, *SIG), dark, gain, mask)
    roi = np.zeros(data.shape[:2], bool)
    roi[1, 2] = roi[4, 6] = True
    sel = roi.reshape(-1)
    names = ("pick", "sum", "stddev", "masks")
    udfs = [_udfs(masks)[n] for n in names]
    with dask.config.set({"ltdask.tile-bytes": 8000}):
        assert _folds(ds, udfs, roi=roi, corrections=cs)
        results = ltdask.compute(ds, udfs, roi=roi, corrections=cs)
    want = _want(frames, masks, sel)
    for name, result in zip(names, results, strict=True):
        _check(name, result, want, sel, data.shape[:2])


def test_shifted_masks_correct_the_frame(tmp_path):
    """ApplyMasksUDF with shifts (frame by frame) applies the folded corrections to each
    frame: numpy's product of the shifted mask with the corrected frame."""
    data, ds = _scan(tmp_path, "uint16")
    dark = np.full(SIG, 3, np.float32)
    mask = excluded_mask("random-1")
    cs = CorrectionSet(dark=dark, excluded_pixels=mask)
    stack = ring(*SIG, 18, 20, 10, 0).astype(np.float32)
    udf = ApplyMasksUDF(mask_factories=[lambda: stack], shifts=(2, -3))
    assert _folds(ds, [udf], corrections=cs)
    got = udf.compute(ds, corrections=cs)["intensity"].values.reshape(-1)
    frames = corrected(data.reshape(-1, *SIG), dark, None, mask)
    shifted = np.zeros(SIG)
    shifted[2:, : SIG[1] - 3] = stack[: SIG[0] - 2, 3:]  # mask pixel (y, x) over (y+2, x-3)
    np.testing.assert_allclose(got, (frames * shifted).sum((1, 2)), rtol=1e-5, atol=1e-2)


def test_folded_float_sums_keep_their_precision(tmp_path):
    """A float32 scan whose dark frame takes off nearly all of each pixel: the folded sum
    (uncorrected sum less n * dark) is as close to numpy's float64 sum of the corrected
    frames as a sum of corrected float32 frames (float32 sums of the uncorrected frames
    would keep their error, 200 times the corrected sum's)."""
    rng = np.random.default_rng(8)
    sig = (4, 5)
    data = (1000 + rng.normal(0, 2, (40, 50, *sig))).astype(np.float32)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ds = ltdask.open_raw(path, nav_shape=(40, 50), sig_shape=sig, dtype="float32")
    dark = np.full(sig, 995, np.float32)
    cs = CorrectionSet(dark=dark, excluded_pixels=np.eye(*sig, dtype=bool))
    assert _folds(ds, [SumUDF()], corrections=cs)
    got = SumUDF().compute(ds, corrections=cs)["intensity"].values
    want = corrected(data.reshape(-1, *sig), dark, None, np.eye(*sig, dtype=bool)).sum(0)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_complex_scans_are_corrected_as_read():
    """Complex frames are not folded (their tiles are corrected as they are read): the sum
    is numpy's of the corrected frames."""
    rng = np.random.default_rng(6)
    data = (rng.normal(size=(3, 4, 5, 6)) + 1j * rng.normal(size=(3, 4, 5, 6))).astype("c8")
    dark = rng.normal(size=(5, 6)).astype(np.float32)
    mask = np.zeros((5, 6), bool)
    mask[2, 3] = True
    cs = CorrectionSet(dark=dark, excluded_pixels=mask)
    ds = ltdask.from_array(data)
    assert not _folds(ds, [SumUDF()], corrections=cs)
    got = SumUDF().compute(ds, corrections=cs)["intensity"].values
    frames = data.reshape(-1, 5, 6) - dark
    frames[:, 2, 3] = (frames[:, 1:4, 2:5].sum((1, 2)) - frames[:, 2, 3]) / 8
    np.testing.assert_allclose(got, frames.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["int64", "complex64"])
def test_folded_masks_of_any_dtype(tmp_path, dtype):
    """Integer and complex masks with folded corrections: the corrected masks keep their
    fractional and imaginary parts (numpy's products with the corrected frames)."""
    data, ds = _scan(tmp_path, "uint16")
    rng = np.random.default_rng(9)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = excluded_mask("random-1")
    cs = CorrectionSet(dark=np.full(SIG, 7, np.float32), gain=gain, excluded_pixels=mask)
    masks = rng.integers(-3, 4, (2, *SIG)).astype(dtype)
    if dtype.startswith("complex"):
        masks = masks + 1j * rng.integers(-3, 4, (2, *SIG))
        masks = masks.astype(dtype)
    udf = ApplyMasksUDF(mask_factories=lambda: masks)
    assert _folds(ds, [udf], corrections=cs)
    got = udf.compute(ds, corrections=cs)["intensity"].values.reshape(-1, 2)
    frames = corrected(data.reshape(-1, *SIG), np.full(SIG, 7), gain, mask)
    want = frames.reshape(len(frames), -1) @ masks.reshape(2, -1).T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-2)


def test_linear_corrections_kept_across_runs_within_limits(monkeypatch):
    """A process keeps the `LinearCorrection` of each signal slice by the corrections'
    content, run after run (what UDFs derive from it with them): the same object for equal
    corrections prepared again, a new one for other corrections; four corrections used in
    turn (a benchmark's cases) all stay with the defaults; the least recently used are let
    go beyond `KEPT_CORRECTIONS`, or beyond `KEPT_PIXELS` pixels (the last one kept)."""
    import ltdask.corrections._apply as apply

    monkeypatch.setattr(apply, "_LINEARS", type(apply._LINEARS)())
    rng = np.random.default_rng(9)
    darks = [rng.normal(10, 1, SIG) for _ in range(5)]
    whole = (slice(0, SIG[0]), slice(0, SIG[1]))

    def linear(k):
        return CorrectionSet(dark=darks[k].copy()).for_shape(SIG).linear(whole)

    first = [linear(k) for k in range(4)]
    assert len({id(x) for x in first}) == 4
    assert all(linear(k) is first[k] for k in range(4))
    np.testing.assert_array_equal(first[2].dark, darks[2].reshape(-1))
    monkeypatch.setattr(apply, "KEPT_CORRECTIONS", 2)
    assert linear(3) is first[3]
    linear(4)  # a fifth: only it and the last used before it are kept
    assert linear(3) is first[3]
    assert linear(0) is not first[0]
    assert linear(3) is first[3]
    monkeypatch.setattr(apply, "KEPT_PIXELS", SIG[0] * SIG[1] - 1)
    again = linear(2)  # alone over the limit: kept, the others let go
    assert linear(2) is again is not first[2]
    assert linear(3) is not first[3]
