"""The shipped UDFs against numpy on the same data: dtypes, ROIs, odd shapes, 1 frame."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse
import sparse

import ltdask
from ltdask.udf import (
    ApplyMasksUDF,
    AutoUDF,
    CoMUDF,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)

SHAPES = [
    pytest.param((5, 7), (11, 13), id="odd"),
    pytest.param((1, 1), (8, 9), id="one-frame"),
    pytest.param((3, 4), (16, 16), id="square"),
    pytest.param((30,), (6, 5), id="1d-nav"),
]
DTYPES = ["float32", "uint16", "int32", "float64"]
ROIS = ["none", "random", "all-false", "all-true"]


def make_data(nav, sig, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.normal(10, 3, (*nav, *sig)).astype(dtype)
    return rng.integers(0, 1000, (*nav, *sig)).astype(dtype)


def make_roi(kind, nav, seed=1):
    if kind == "none":
        return None
    if kind == "all-false":
        return np.zeros(nav, dtype=bool)
    if kind == "all-true":
        return np.ones(nav, dtype=bool)
    return np.random.default_rng(seed).random(nav) < 0.5


def open_dataset(kind, data, tmp_path):
    if kind == "memory":
        return ltdask.from_array(data, sig_dims=2)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    return ltdask.open_raw(
        path, nav_shape=data.shape[:-2], sig_shape=data.shape[-2:], dtype=data.dtype
    )


@pytest.fixture(params=["memory", "raw"])
def source(request):
    return request.param


@pytest.fixture(autouse=True)
def _small(small_partitions):
    """Several partitions and small tiles even on tiny data."""
    import dask

    with dask.config.set({"ltdask.tile-bytes": 1024}):
        yield


def selected(data, roi, nav_dims):
    flat = data.reshape((-1, *data.shape[nav_dims:]))
    return flat if roi is None else flat[roi.reshape(-1)]


def nav_expected(per_frame, roi, nav, fill=np.nan):
    out = np.asarray(per_frame)
    if roi is None:
        return out.reshape((*nav, *out.shape[1:]))
    full = np.full((int(np.prod(nav)), *out.shape[1:]), fill, dtype=np.result_type(out, float))
    full[roi.reshape(-1)] = out
    return full.reshape((*nav, *out.shape[1:]))


@pytest.mark.parametrize("nav,sig", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("roi_kind", ROIS)
def test_sum_and_sumsig(nav, sig, dtype, roi_kind, source, tmp_path):
    data = make_data(nav, sig, dtype)
    roi = make_roi(roi_kind, nav)
    ds = open_dataset(source, data, tmp_path)
    total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()], roi=roi)
    frames = selected(data, roi, len(nav)).astype(np.float64)
    want_dtype = np.result_type(np.float32, data.dtype)
    assert total["intensity"].dtype == want_dtype
    np.testing.assert_allclose(total["intensity"].values, frames.sum(axis=0), rtol=1e-5, atol=1e-3)
    assert per_frame["intensity"].dims == ds.dims[: len(nav)]
    expected = nav_expected(frames.sum(axis=(1, 2)), roi, nav)
    np.testing.assert_allclose(per_frame["intensity"].values, expected, rtol=1e-5)
    valid = np.ones(nav, bool) if roi is None else roi
    np.testing.assert_array_equal(per_frame["intensity_valid"].values, valid)
    assert total["intensity_valid"].values.all()


@pytest.mark.parametrize("nav,sig", SHAPES)
@pytest.mark.parametrize("roi_kind", ROIS)
def test_stddev(nav, sig, roi_kind, source, tmp_path):
    data = make_data(nav, sig, "float32")
    roi = make_roi(roi_kind, nav)
    res = StdDevUDF().compute(open_dataset(source, data, tmp_path), roi=roi)
    frames = selected(data, roi, len(nav)).astype(np.float64)
    n = frames.shape[0]
    assert int(res["num_frames"].values[0]) == n
    np.testing.assert_allclose(res["sum"].values, frames.sum(axis=0), rtol=1e-6, atol=1e-6)
    if n:
        np.testing.assert_allclose(res["mean"].values, frames.mean(axis=0), rtol=1e-6)
        np.testing.assert_allclose(res["var"].values, frames.var(axis=0), rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(res["std"].values, frames.std(axis=0), rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(
            res["varsum"].values, frames.var(axis=0) * n, rtol=1e-5, atol=1e-9
        )


@pytest.mark.parametrize("nav,sig", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("roi_kind", ROIS)
@pytest.mark.parametrize("order", ["sum-first", "stddev-first"])
def test_sum_sumsig_stddev_in_one_pass(nav, sig, dtype, roi_kind, order, source, tmp_path):
    """Run together, Sum and SumSig take their results from StdDev's moments pass
    (``ltdask.udf.shared``): the same values as numpy, and as each run alone."""
    data = make_data(nav, sig, dtype, seed=4)
    if dtype == "float32":
        data += np.float32(1e5)  # a large mean: the shared moments keep it exact
    roi = make_roi(roi_kind, nav)
    ds = open_dataset(source, data, tmp_path)
    udfs = [SumUDF(), SumSigUDF(), StdDevUDF()]
    if order == "stddev-first":
        udfs = udfs[::-1]
    results = dict(
        zip(
            ["sum", "sumsig", "std"],
            ltdask.compute(ds, udfs, roi=roi)[:: 1 if order == "sum-first" else -1],
            strict=True,
        )
    )
    frames = selected(data, roi, len(nav)).astype(np.float64)
    n = frames.shape[0]
    scale = max(1.0, float(np.abs(frames).max(initial=0)) * n)
    np.testing.assert_allclose(
        results["sum"]["intensity"].values, frames.sum(axis=0), rtol=1e-6, atol=1e-7 * scale
    )
    expected = nav_expected(frames.sum(axis=(1, 2)), roi, nav)
    np.testing.assert_allclose(results["sumsig"]["intensity"].values, expected, rtol=1e-6)
    std = results["std"]
    assert int(std["num_frames"].values[0]) == n
    if n:
        np.testing.assert_allclose(std["var"].values, frames.var(axis=0), rtol=1e-5, atol=1e-9)
    alone = SumSigUDF().compute(ds, roi=roi)["intensity"].values
    np.testing.assert_allclose(results["sumsig"]["intensity"].values, alone, rtol=1e-6)


def test_shared_stats_only_between_two_or_more():
    from ltdask.udf.shared import SharedStats

    assert SharedStats.make([StdDevUDF(), SumUDF()], np.float32) is not None
    assert SharedStats.make([StdDevUDF()], np.float32) is None
    assert SharedStats.make([SumUDF(), SumSigUDF()], np.float32) is None  # no moments
    assert SharedStats.make([StdDevUDF(), SumUDF()], np.complex64) is None


@pytest.mark.parametrize("merge", ["merge_all", "tree"])
def test_stddev_large_mean_is_exact(merge, tmp_path, monkeypatch):
    """Data of mean 1e6 + noise: a naive sum of squares loses everything, the per-tile
    centred moments keep float32 round-off."""
    rng = np.random.default_rng(5)
    data = (1e6 + rng.normal(0, 1, (12, 10, 9, 8))).astype(np.float32)
    if merge == "tree":
        monkeypatch.delattr(StdDevUDF, "merge_all")
    res = StdDevUDF().compute(open_dataset("raw", data, tmp_path))
    ref = data.astype(np.float64).var(axis=(0, 1))
    np.testing.assert_allclose(res["var"].values, ref, rtol=1e-6)
    naive = (data.astype(np.float32) ** 2).mean(axis=(0, 1)) - data.mean(axis=(0, 1)) ** 2
    assert not np.allclose(naive, ref, rtol=0.1)  # the reference would catch a naive version


def masks_for(sig, count, kind):
    rng = np.random.default_rng(3)
    dense = (rng.random((count, *sig)) < 0.3) * rng.random((count, *sig))
    dense = dense.astype(np.float32)
    if kind == "dense":
        return dense, (lambda: dense)
    if kind == "scipy":
        return dense, [lambda i=i: scipy.sparse.csr_matrix(dense[i]) for i in range(count)]
    return dense, (lambda: sparse.COO.from_numpy(dense))


@pytest.mark.parametrize("kind", ["dense", "scipy", "sparse"])
@pytest.mark.parametrize("count", [1, 16])
@pytest.mark.parametrize("roi_kind", ["none", "random"])
@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_apply_masks(kind, count, roi_kind, dtype, source, tmp_path):
    nav, sig = (5, 7), (11, 13)
    data = make_data(nav, sig, dtype)
    roi = make_roi(roi_kind, nav)
    dense, factories = masks_for(sig, count, kind)
    res = ApplyMasksUDF(factories).compute(open_dataset(source, data, tmp_path), roi=roi)
    frames = selected(data, roi, 2).astype(np.float64)
    expected = nav_expected(frames.reshape(len(frames), -1) @ dense.reshape(count, -1).T, roi, nav)
    assert res["intensity"].dims == ("scan_y", "scan_x", "mask")
    np.testing.assert_allclose(res["intensity"].values, expected, rtol=1e-4, atol=1e-3)


def test_apply_masks_same_for_all_kinds(tmp_path):
    data = make_data((6, 5), (12, 10), "float32")
    ds = open_dataset("raw", data, tmp_path)
    results = []
    for kind in ("dense", "scipy", "sparse"):
        _, factories = masks_for((12, 10), 16, kind)
        results.append(ApplyMasksUDF(factories).compute(ds)["intensity"].values)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5)
    np.testing.assert_allclose(results[0], results[2], rtol=1e-5)


def test_apply_masks_with_mask_factories_from_ltdask_masks():
    from ltdask import masks

    data = make_data((4, 4), (32, 32), "float32")
    disk = lambda: masks.circular(16, 16, 32, 32, 8)  # noqa: E731
    ring = lambda: masks.ring(16, 16, 32, 32, 12, 8)  # noqa: E731
    res = ApplyMasksUDF([disk, ring]).compute(ltdask.from_array(data))
    want = np.stack([(data * disk()).sum(axis=(2, 3)), (data * ring()).sum(axis=(2, 3))], axis=-1)
    np.testing.assert_allclose(res["intensity"].values, want, rtol=1e-5)


def test_apply_masks_shifts():
    data = make_data((3, 3), (10, 10), "float32")
    mask = np.zeros((10, 10), np.float32)
    mask[2:5, 3:7] = 1
    res = ApplyMasksUDF([lambda: mask], shifts=(1, -2)).compute(ltdask.from_array(data))
    # mask pixel (y, x) sits over frame pixel (y + 1, x - 2)
    want = data[..., 3:6, 1:5].sum(axis=(2, 3))
    np.testing.assert_allclose(res["intensity"].values[..., 0], want, rtol=1e-5)


def test_apply_masks_factories_once_per_run_not_per_partition(tmp_path):
    """Partitions of a run share the masks (made once per process); a new run calls the
    factories again, so a changed mask is seen."""
    import dask

    calls = []
    mask = np.ones((6, 5), np.float32)

    def factory():
        calls.append(1)
        return mask.copy()

    data = make_data((4, 6), (6, 5), "float32")
    ds = open_dataset("raw", data, tmp_path)
    partitions = len(ds.get_partitions())
    assert partitions >= 4
    udf = ApplyMasksUDF([factory])
    with dask.config.set(scheduler="threads"):
        first = udf.compute(ds)["intensity"].values[..., 0]
        per_run = len(calls)
        mask[:] = 2
        second = udf.compute(ds)["intensity"].values[..., 0]
    expected = data.astype(np.float64).sum(axis=(2, 3))
    np.testing.assert_allclose(first, expected, rtol=1e-5)
    np.testing.assert_allclose(second, 2 * expected, rtol=1e-5)
    assert per_run < partitions


def test_apply_masks_wrong_mask_shape():
    data = make_data((2, 2), (8, 8), "float32")
    with pytest.raises(ltdask.UDFError, match="masks have shape"):
        ApplyMasksUDF([lambda: np.ones((7, 8))]).compute(ltdask.from_array(data))


@pytest.mark.parametrize("nav,sig", SHAPES)
@pytest.mark.parametrize("roi_kind", ROIS)
@pytest.mark.parametrize("dtype", ["uint16", "float32"])
def test_pick(nav, sig, roi_kind, dtype, source, tmp_path):
    data = make_data(nav, sig, dtype)
    roi = make_roi(roi_kind, nav)
    res = PickUDF().compute(open_dataset(source, data, tmp_path), roi=roi)
    want = selected(data, roi, len(nav))
    assert res["intensity"].dtype == data.dtype
    np.testing.assert_array_equal(res["intensity"].values, want)


@pytest.mark.parametrize("roi_kind", ROIS)
def test_auto_udf_and_map(roi_kind, source, tmp_path):
    nav, sig = (4, 5), (6, 7)
    data = make_data(nav, sig, "float32")
    roi = make_roi(roi_kind, nav)
    ds = open_dataset(source, data, tmp_path)
    res = ltdask.map(ds, lambda frame: frame.max(axis=0), roi=roi)
    frames = selected(data, roi, 2)
    np.testing.assert_allclose(res.values, nav_expected(frames.max(axis=1), roi, nav))
    valid = np.ones(nav, bool) if roi is None else roi
    np.testing.assert_array_equal(res["result_valid"].values, valid[..., None].repeat(7, -1))
    scalar = AutoUDF(f=np.sum).compute(ds, roi=roi)["result"]
    assert scalar.shape == nav


def disk_scan(shifts_y, shifts_x, sig=(48, 52), radius=6.0, c=(24.0, 26.0)):
    """Frames of a soft-edged disk displaced by the given shifts (in pixels)."""
    yy, xx = np.mgrid[: sig[0], : sig[1]]
    out = np.empty((*shifts_y.shape, *sig), np.float32)
    for idx in np.ndindex(shifts_y.shape):
        cy, cx = c[0] + shifts_y[idx], c[1] + shifts_x[idx]
        d = np.hypot(yy - cy, xx - cx)
        out[idx] = np.clip(radius + 0.5 - d, 0, 1)
    return out


def test_com_recovers_shift_field(tmp_path):
    ny, nx = 7, 9
    sy = 2.0 * np.sin(np.arange(ny)[:, None] / 2 + np.zeros(nx))
    sx = 1.5 * np.cos(np.arange(nx)[None, :] / 3 + np.zeros((ny, 1)))
    data = disk_scan(sy, sx)
    res = CoMUDF.with_params(cy=24, cx=26, r=15).compute(open_dataset("raw", data, tmp_path))
    np.testing.assert_allclose(res["raw_shifts"].values[..., 0], sy, atol=0.02)
    np.testing.assert_allclose(res["raw_shifts"].values[..., 1], sx, atol=0.02)
    np.testing.assert_allclose(res["raw_com"].values[..., 0], sy + 24, atol=0.02)
    field = res["field"].values
    np.testing.assert_allclose(field[..., 0], res["field_y"].values)
    np.testing.assert_allclose(res["magnitude"].values, np.hypot(sy, sx), atol=0.03)
    np.testing.assert_allclose(
        res["divergence"].values, np.gradient(sy, axis=0) + np.gradient(sx, axis=1), atol=0.05
    )
    np.testing.assert_allclose(
        res["curl"].values, np.gradient(sy, axis=1) - np.gradient(sx, axis=0), atol=0.05
    )


@pytest.mark.parametrize("rotation,flip", [(90.0, False), (30.0, True), (0.0, True)])
def test_com_rotation_and_flip(rotation, flip):
    sy = np.full((3, 4), 1.5)
    sx = np.full((3, 4), -0.5)
    data = disk_scan(sy, sx)
    res = CoMUDF.with_params(cy=24, cx=26, r=20, scan_rotation=rotation, flip_y=flip).compute(
        ltdask.from_array(data)
    )
    y = -sy if flip else sy
    a = np.radians(rotation)
    # LiberTEM's sense of rotation (checked against its output in tests/reference)
    np.testing.assert_allclose(res["field_y"].values, np.cos(a) * y + np.sin(a) * sx, atol=0.02)
    np.testing.assert_allclose(res["field_x"].values, -np.sin(a) * y + np.cos(a) * sx, atol=0.02)


@pytest.mark.parametrize("regression", [0, 1, "matrix"])
def test_com_regression(regression):
    ny, nx = 6, 8
    yy, xx = np.mgrid[:ny, :nx]
    sy = 0.5 + 0.3 * yy - 0.1 * xx
    sx = -1.0 + 0.05 * yy + 0.2 * xx
    data = disk_scan(sy, sx)
    reg = np.array([[0.5, -1.0], [0.3, 0.05], [-0.1, 0.2]])
    param = reg if regression == "matrix" else regression
    res = CoMUDF.with_params(cy=24, cx=26, r=20, regression=param).compute(ltdask.from_array(data))
    if regression == 0:
        np.testing.assert_allclose(res["regression"].values[0], [sy.mean(), sx.mean()], atol=0.02)
        np.testing.assert_allclose(res["field_y"].values, sy - sy.mean(), atol=0.03)
    else:
        np.testing.assert_allclose(res["regression"].values, reg, atol=0.01)
        np.testing.assert_allclose(res["field"].values, 0, atol=0.03)


def test_com_with_roi_and_annulus():
    sy = np.random.default_rng(4).uniform(-1, 1, (4, 5))
    sx = np.random.default_rng(5).uniform(-1, 1, (4, 5))
    data = disk_scan(sy, sx, radius=10)
    roi = np.random.default_rng(2).random((4, 5)) < 0.6
    res = CoMUDF.with_params(cy=24, cx=26, r=20, ri=3).compute(ltdask.from_array(data), roi=roi)
    yy, xx = np.mgrid[:48, :52]
    d2 = (yy - 24) ** 2 + (xx - 26) ** 2
    mask = (d2 <= 20**2) & (d2 > 3**2)  # LiberTEM's ring: ri² < d² <= r²
    w = data.astype(np.float64) * mask
    com_y = (w * yy).sum(axis=(2, 3)) / w.sum(axis=(2, 3))
    com_x = (w * xx).sum(axis=(2, 3)) / w.sum(axis=(2, 3))
    shifts = res["raw_shifts"].values
    assert np.isnan(shifts[~roi]).all()
    np.testing.assert_allclose(shifts[roi][:, 0], com_y[roi] - 24, atol=1e-4)
    np.testing.assert_allclose(shifts[roi][:, 1], com_x[roi] - 26, atol=1e-4)
    np.testing.assert_array_equal(res["field_valid"].values[..., 0], roi)


@pytest.mark.parametrize("kind", ["float32", "uint16", "raw-uint16", "raw_csr"])
def test_com_of_frames_without_counts_is_the_reference_point(tmp_path, kind):
    # LiberTEM 0.16 (its stored results for "zero-frames" in tests/reference/data/udfs):
    # a frame with no counts in the disk has its centre at the reference point, shift 0;
    # every kernel path (float tiles, native integer tiles, CSR tiles) agrees
    from helpers.formatfiles import write_raw_csr

    dtype = "uint16" if kind.endswith("uint16") else "float32"
    data = np.random.default_rng(7).integers(1, 50, (3, 4, 8, 10)).astype(dtype)
    data[0, 0] = data[1, 2] = 0
    data[2, 3, 2:7, 2:8] = 0  # (counts outside the disk only)
    if kind == "raw_csr":
        ds = ltdask.open_raw_csr(write_raw_csr(tmp_path, data)[0])
    else:
        ds = open_dataset("raw" if kind.startswith("raw") else "memory", data, tmp_path)
    res = CoMUDF.with_params(cy=4, cx=4.5, r=1.5).compute(ds)
    yy, xx = np.mgrid[:8, :10]
    w = data.astype(np.float64) * (((yy - 4) ** 2 + (xx - 4.5) ** 2) <= 1.5**2)
    total = w.sum(axis=(2, 3))
    empty = total == 0
    assert empty.sum() == 3
    want_y = np.where(empty, 4, (w * yy).sum(axis=(2, 3)) / np.where(empty, 1, total))
    want_x = np.where(empty, 4.5, (w * xx).sum(axis=(2, 3)) / np.where(empty, 1, total))
    np.testing.assert_allclose(res["raw_com"].values, np.stack([want_y, want_x], -1), rtol=1e-6)
    assert (res["raw_shifts"].values[empty] == 0).all()


@pytest.mark.parametrize("dtype", ["float32", "uint16"])
def test_com_is_nan_outside_the_roi_in_every_result(dtype):
    # positions outside the ROI whose four neighbours are inside had finite divergence and
    # curl (central differences of the neighbours); LiberTEM gives NaN there
    rng = np.random.default_rng(6)
    data = rng.integers(1, 100, (5, 6, 12, 10)).astype(dtype)
    roi = np.ones((5, 6), bool)
    roi[2, 2] = roi[1, 4] = roi[4, 0] = False
    res = CoMUDF.with_params(cy=6, cx=5, r=4).compute(ltdask.from_array(data), roi=roi)
    # numpy: centres of mass inside the ROI (NaN outside), then the gradients of the field
    yy, xx = np.mgrid[:12, :10]
    w = data.astype(np.float64) * (((yy - 6) ** 2 + (xx - 5) ** 2) <= 16)
    total = w.sum(axis=(2, 3))
    field_y = np.where(roi, (w * yy).sum(axis=(2, 3)) / total - 6, np.nan)
    field_x = np.where(roi, (w * xx).sum(axis=(2, 3)) / total - 5, np.nan)
    want = {
        "field_y": field_y,
        "field_x": field_x,
        "magnitude": np.hypot(field_y, field_x),
        "divergence": np.gradient(field_y, axis=0) + np.gradient(field_x, axis=1),
        "curl": np.gradient(field_y, axis=1) - np.gradient(field_x, axis=0),
    }
    want["divergence"][~roi] = want["curl"][~roi] = np.nan
    for name, values in want.items():
        got = res[name].values
        np.testing.assert_array_equal(np.isnan(got), np.isnan(values), err_msg=name)
        np.testing.assert_allclose(got, values, rtol=1e-4, atol=1e-5, err_msg=name)
    for name in ("raw_com", "raw_shifts", "field"):
        assert np.isnan(res[name].values[~roi]).all(), name
        assert not np.isnan(res[name].values[roi]).any(), name


@pytest.mark.parametrize(
    "cy, cx, r, ri",
    [(8, 6, 5, 0), (8, 6, 5, 2), (7.5, 6.25, 4.5, 1.5), (8, 6, 3, 3), (0, 0, 5, 0)],
)
def test_com_disk_edge_is_inside(cy, cx, r, ri):
    """Integer radii put pixels exactly on the edge: ``ri² < d² <= r²`` as ``ltdask.masks``."""
    data = np.random.default_rng(0).random((7, 9, 16, 12)).astype(np.float32)
    res = CoMUDF.with_params(cy=cy, cx=cx, r=r, ri=ri).compute(ltdask.from_array(data))
    mask = ltdask.masks.circular(cx, cy, 12, 16, r)
    if ri:
        with warnings.catch_warnings():
            # r == ri: an empty ring, on purpose (EmptyMaskWarning)
            warnings.simplefilter("ignore", ltdask.EmptyMaskWarning)
            mask = ltdask.masks.ring(cx, cy, 12, 16, r, ri)
    yy, xx = np.mgrid[:16, :12]
    w = data.astype(np.float64) * mask
    total = w.sum(axis=(2, 3))
    if not mask.any():
        # no intensity in the mask: the centre of mass is the reference point (LiberTEM's)
        np.testing.assert_array_equal(res["raw_shifts"].values, 0)
        np.testing.assert_allclose(res["raw_com"].values[..., 0], cy)
        np.testing.assert_allclose(res["raw_com"].values[..., 1], cx)
        return
    np.testing.assert_allclose(res["raw_com"].values[..., 0], (w * yy).sum((2, 3)) / total, 1e-5)
    np.testing.assert_allclose(res["raw_com"].values[..., 1], (w * xx).sum((2, 3)) / total, 1e-5)


def test_com_validates():
    ds3 = ltdask.from_array(np.zeros((4, 5, 6), np.float32), sig_dims=1)
    with pytest.raises(ValueError, match="2-D nav and 2-D sig"):
        CoMUDF().compute(ds3)
    # as LiberTEM: the radii are checked when the UDF is made, the regression when it runs
    with pytest.raises(ValueError, match="smaller than inner"):
        CoMUDF.with_params(r=2, ri=3)
    ds = ltdask.from_array(np.ones((2, 2, 4, 4), np.float32))
    for udf in (CoMUDF.with_params(regression=2), CoMUDF(regression=np.zeros((2, 2)))):
        with pytest.raises(ValueError, match="regression must be -1, 0, 1 or a 3×2 array"):
            udf.compute(ds)


SUM_DTYPES = [
    pytest.param("uint8", "uint8", 200, id="u8-data-u8-sum"),
    pytest.param("uint16", "uint16", 60000, id="u16-data-u16-sum"),
    pytest.param("int32", "int32", 2**30, id="i32-data-i32-sum"),
    pytest.param("uint8", "int16", 250, id="u8-data-i16-sum"),
]


@pytest.mark.parametrize("data_dtype, sum_dtype, value", SUM_DTYPES)
@pytest.mark.parametrize("frames", [1, 24])
def test_integer_sums_accumulate_wide(small_partitions, data_dtype, sum_dtype, value, frames):
    rng = np.random.default_rng(frames)
    data = rng.integers(value // 2, value, (frames, 1, 3, 5)).astype(data_dtype)
    ds = ltdask.from_array(data)
    exact = data.sum(axis=(0, 1), dtype=np.int64)
    want = np.result_type(data_dtype, sum_dtype)
    if exact.max() <= np.iinfo(want).max:
        res = SumUDF(dtype=sum_dtype).compute(ds)["intensity"]
        assert res.dtype == want
        np.testing.assert_array_equal(res.values, exact)
        return
    # the sum does not fit: an error naming a dtype that does, never wrapped-around values
    with pytest.raises(OverflowError, match=rf"do not fit the result dtype {want}; use SumUDF"):
        SumUDF(dtype=sum_dtype).compute(ds)
    wider = np.dtype(np.int64 if want.kind == "i" else np.uint64)
    res = SumUDF(dtype=wider).compute(ds)["intensity"]
    np.testing.assert_array_equal(res.values, exact)


def test_integer_sum_overflow_names_the_dtype_that_fits():
    data = np.full((24, 1, 2, 2), 2**30, dtype=np.int32)
    with pytest.raises(OverflowError, match=r"SumUDF\(dtype='int64'\)"):
        SumUDF(dtype="int32").compute(ltdask.from_array(data))
    data = np.full((30, 1, 2, 2), 200, dtype=np.uint8)
    with pytest.raises(OverflowError, match=r"from 6000 to 6000.*SumUDF\(dtype='uint16'\)"):
        SumUDF(dtype="uint8").compute(ltdask.from_array(data))


@pytest.mark.parametrize("how", ["dict", "mask_names"])
def test_apply_masks_named(how):
    """Masks given by name: the ``mask`` coordinate selects each one's virtual image."""
    data = make_data((4, 5), (6, 7), "uint16")
    ring = np.zeros((6, 7), dtype=np.float32)
    ring[1:5, 1:6] = 1
    ring[2:4, 2:5] = 0
    masks = {"bf": lambda: np.eye(6, 7, dtype=np.float32), "ring": lambda: ring}
    if how == "dict":
        udf = ApplyMasksUDF(masks)
    else:
        udf = ApplyMasksUDF(list(masks.values()), mask_names=list(masks))
    res = udf.compute(ltdask.from_array(data))
    assert res["intensity"].dims == ("scan_y", "scan_x", "mask")
    assert res["mask"].values.tolist() == ["bf", "ring"]
    frames = data.astype(np.float64)
    np.testing.assert_allclose(
        res["intensity"].sel(mask="ring").values, (frames * ring).sum(axis=(2, 3)), rtol=1e-6
    )
    np.testing.assert_allclose(
        res["intensity"].sel(mask="bf").values,
        np.trace(frames, axis1=2, axis2=3),
        rtol=1e-6,
    )


def test_apply_masks_names_must_match():
    with pytest.raises(ValueError, match="1 mask_names for 2 masks"):
        ApplyMasksUDF([lambda: np.ones((2, 2)), lambda: np.ones((2, 2))], mask_names=["a"])


def test_com_dims_and_pick_dims():
    """CoM's vectors along a ``yx`` dim (coordinates "y", "x"), the regression's rows along
    ``term``; PickUDF's frames along ``pick`` and the dataset's signal dims."""
    data = make_data((4, 5), (8, 8), "float32")
    ds = ltdask.from_array(data)
    com = CoMUDF.with_params(cy=4, cx=4, r=3).compute(ds)
    assert com["field"].dims == ("scan_y", "scan_x", "yx")
    assert com["yx"].values.tolist() == ["y", "x"]
    assert com["regression"].dims == ("term", "yx")
    np.testing.assert_array_equal(com["field"].sel(yx="y").values, com["field_y"].values)
    np.testing.assert_array_equal(com["field"].sel(yx="x").values, com["field_x"].values)
    roi = np.zeros((4, 5), dtype=bool)
    roi[1, 2] = roi[3, 0] = True
    pick = PickUDF().compute(ds, roi=roi)
    assert pick["intensity"].dims == ("pick", "det_y", "det_x")
    np.testing.assert_array_equal(pick["intensity"].values, data[roi])
