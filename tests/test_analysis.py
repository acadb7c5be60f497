"""LiberTEM's Analysis API (`ltdask.analysis`): against numpy on the same data, and against
LiberTEM 0.16's own results (``tests/reference/data/analysis``, written by
``tests/reference/make_analysis.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from ltdask import masks
from ltdask.analysis import AnalysisResult, AnalysisResultSet
from ltdask.compat import Context
from ltdask.udf import ApplyMasksUDF, CoMUDF, PickUDF, SumUDF

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "reference")

from reference.analysis_cases import CASES, make_data, make_roi, resolve_kwargs  # noqa: E402

DATA = os.path.join(REFERENCE, "data", "analysis")


@pytest.fixture(scope="module")
def ctx():
    return Context.make_with("inline")


def _run(ctx, data, method, roi=None, **kwargs):
    ds = ctx.load("memory", data=data, sig_dims=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ctx.run(getattr(ctx, method)(dataset=ds, **kwargs), roi=roi)


# ---------------------------------------------------------------------------------------
# against LiberTEM's own output

# pictures LiberTEM draws with colorcet / scikit-image colour maps; ltdask's differ
_OWN_PICTURES = ("field", "_complex", "phase_")


def _own_picture(key: str) -> bool:
    return key == "field" or key.endswith("_complex") or key.startswith(("phase_", "complex_"))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_against_libertem(ctx, case):
    name, data_name, method, kwargs, roi_name = case
    ref = np.load(os.path.join(DATA, f"{name}.npz"))
    data = make_data(data_name)
    roi = None if roi_name is None else make_roi(roi_name)
    result = _run(ctx, data, method, roi, **resolve_kwargs(method, kwargs, data.shape[-2:]))

    assert result.keys() == list(ref["keys"])
    assert [r.title for r in result] == list(ref["titles"])
    assert [r.desc for r in result] == list(ref["descs"])
    # CoM shifts are small differences of float32 numbers of the size of the frame
    atol = 1e-5 if method == "create_com_analysis" else 1e-6
    for i, item in enumerate(result):
        expected = ref[f"raw_{i}"]
        raw = np.stack(item.raw_data) if isinstance(item.raw_data, tuple) else item.raw_data
        raw = np.asarray(raw)
        assert (raw.dtype, raw.shape) == (expected.dtype, expected.shape), item.key
        np.testing.assert_allclose(raw, expected, rtol=1e-5, atol=atol, err_msg=item.key)
        assert np.array_equal(np.isnan(raw), np.isnan(expected)) if raw.dtype.kind in "fc" else True
        picture = np.asarray(item.visualized)
        expected_picture = ref[f"vis_{i}"]
        assert (picture.dtype, picture.shape) == (expected_picture.dtype, expected_picture.shape)
        if not _own_picture(item.key):
            np.testing.assert_array_equal(picture, expected_picture, err_msg=item.key)
    if "raw_results" in ref:
        np.testing.assert_allclose(result.raw_results, ref["raw_results"], rtol=1e-5, atol=1e-5)


def test_reference_files_cover_cases():
    assert sorted(f[:-4] for f in os.listdir(DATA)) == sorted(c[0] for c in CASES)


# ---------------------------------------------------------------------------------------
# against numpy

SHAPES = [(3, 4, 10, 12), (1, 5, 9, 9), (2, 2, 7, 16)]


def _data(shape, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 50).astype(dtype)


def _roi(nav, seed=1):
    roi = np.random.default_rng(seed).random(nav) < 0.6
    roi.reshape(-1)[0] = True
    return roi


def _disk(sig, cx, cy, r):
    """LiberTEM's disk: the pixels with squared distance at most ``r ** 2``."""
    y, x = np.mgrid[: sig[0], : sig[1]]
    return (y - cy) ** 2 + (x - cx) ** 2 <= r**2


def _ring(sig, cx, cy, ri, ro):
    return _disk(sig, cx, cy, ro) & ~_disk(sig, cx, cy, ri)


def _masked_sums(data, mask, roi):
    nav = data.shape[:-2]
    out = np.einsum("...yx,yx->...", data.astype(np.float64), mask.astype(np.float64))
    if roi is not None:
        out = np.where(roi, out, np.nan)
    return out.reshape(nav)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("use_roi", [False, True], ids=["all", "roi"])
def test_ring_disk_point_numpy(ctx, shape, use_roi):
    data = _data(shape)
    roi = _roi(shape[:2]) if use_roi else None
    sig = shape[2:]
    cx, cy = sig[1] / 2 - 0.5, sig[0] / 2 + 0.25
    ring = _run(ctx, data, "create_ring_analysis", roi, cx=cx, cy=cy, ri=1.5, ro=3.5)
    expected = _masked_sums(data, _ring(sig, cx, cy, 1.5, 3.5), roi)
    assert ring.intensity.raw_data.dtype == np.float32
    np.testing.assert_allclose(ring.intensity.raw_data, expected, rtol=1e-5)
    assert ring.intensity_log.raw_data is ring.intensity.raw_data

    disk = _run(ctx, data, "create_disk_analysis", roi, cx=cx, cy=cy, r=2.5)
    np.testing.assert_allclose(
        disk["intensity"].raw_data, _masked_sums(data, _disk(sig, cx, cy, 2.5), roi), rtol=1e-5
    )

    point = _run(ctx, data, "create_point_analysis", roi, x=sig[1] - 1.7, y=2)
    expected = data[..., 2, sig[1] - 2]
    if roi is not None:
        expected = np.where(roi, expected, np.nan)
    np.testing.assert_array_equal(point[0].raw_data, expected)


def test_defaults_numpy(ctx):
    data = _data((2, 3, 12, 16))
    ring = _run(ctx, data, "create_ring_analysis")
    expected = _masked_sums(data, _ring((12, 16), 8, 6, 4.8, 6), None)
    np.testing.assert_allclose(ring.intensity.raw_data, expected, rtol=1e-5)
    disk = _run(ctx, data, "create_disk_analysis")
    np.testing.assert_allclose(
        disk.intensity.raw_data, _masked_sums(data, _disk((12, 16), 8, 6, 1.8), None), rtol=1e-5
    )
    point = _run(ctx, data, "create_point_analysis")
    np.testing.assert_array_equal(point.intensity.raw_data, data[..., 6, 8])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("use_roi", [False, True], ids=["all", "roi"])
def test_mask_analysis_numpy(ctx, shape, use_roi):
    data = _data(shape, "uint16", seed=3)
    roi = _roi(shape[:2], seed=4) if use_roi else None
    rng = np.random.default_rng(5)
    first = rng.random(shape[2:])
    second = (rng.random(shape[2:]) < 0.3).astype(np.float32)
    result = _run(ctx, data, "create_mask_analysis", roi, factories=[lambda: first, lambda: second])
    assert result.keys() == ["mask_0", "mask_1"]
    assert result.mask_0.title == "mask 0"
    for i, mask in enumerate((first, second)):
        np.testing.assert_allclose(result[i].raw_data, _masked_sums(data, mask, roi), rtol=1e-6)
    stacked = _run(
        ctx,
        data,
        "create_mask_analysis",
        roi,
        factories=lambda: np.stack([second, first]),
        mask_count=2,
    )
    np.testing.assert_allclose(stacked.mask_1.raw_data, _masked_sums(data, first, roi), rtol=1e-6)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "uint8", "float64"])
def test_sum_and_pick_numpy(ctx, shape, dtype):
    data = _data(shape, dtype, seed=6)
    roi = _roi(shape[:2], seed=7)
    total = _run(ctx, data, "create_sum_analysis", roi)
    expected_dtype = np.dtype(dtype) if dtype != "uint8" else np.dtype("float32")
    assert total.intensity.raw_data.dtype == expected_dtype
    np.testing.assert_allclose(
        total.intensity_lin.raw_data, data[roi].astype(np.float64).sum(axis=0), rtol=1e-5
    )
    y, x = shape[0] - 1, shape[1] // 2
    pick = _run(ctx, data, "create_pick_analysis", x=x, y=y)
    assert pick.intensity.raw_data.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(pick.intensity.raw_data, data[y, x])
    assert pick.intensity.desc == f"the frame at x={x} y={y} log-scaled"


def _numpy_com(data, cx, cy, r, ri, flip_y, rotation, roi):
    sig = data.shape[-2:]
    select = _ring(sig, cx, cy, ri, r) if ri else _disk(sig, cx, cy, r)
    yy, xx = np.mgrid[: sig[0], : sig[1]]
    values = data.astype(np.float64) * select
    total = values.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        y = np.where(total == 0, 0, (values * yy).sum(axis=(-2, -1)) / total - cy)
        x = np.where(total == 0, 0, (values * xx).sum(axis=(-2, -1)) / total - cx)
    if flip_y:
        y = -y
    angle = np.radians(rotation)
    y, x = np.cos(angle) * y + np.sin(angle) * x, -np.sin(angle) * y + np.cos(angle) * x
    if roi is not None:
        y, x = np.where(roi, y, np.nan), np.where(roi, x, np.nan)
    return y, x


@pytest.mark.parametrize("shape", [(3, 4, 10, 12), (2, 5, 9, 9), (4, 1, 8, 8)], ids=str)
@pytest.mark.parametrize(
    "params",
    [
        dict(),
        dict(cx=5.5, cy=4, mask_radius=3.5, flip_y=True, scan_rotation=30.0),
        dict(cx=4, cy=4.5, mask_radius=4, mask_radius_inner=1.5, scan_rotation=-120.0),
    ],
    ids=["default", "disk-flip-rot", "annular"],
)
@pytest.mark.parametrize("use_roi", [False, True], ids=["all", "roi"])
def test_com_numpy(ctx, shape, params, use_roi):
    data = _data(shape, seed=8)
    data[0, 0] = 0  # a frame without intensity: shift 0
    roi = _roi(shape[:2], seed=9) if use_roi else None
    result = _run(ctx, data, "create_com_analysis", roi, **params)
    sig = shape[2:]
    y, x = _numpy_com(
        data,
        params.get("cx", sig[1] / 2),
        params.get("cy", sig[0] / 2),
        params.get("mask_radius", np.inf),
        params.get("mask_radius_inner", 0.0),
        params.get("flip_y", False),
        params.get("scan_rotation", 0.0),
        roi,
    )
    np.testing.assert_allclose(result.x.raw_data, x, atol=2e-5)
    np.testing.assert_allclose(result.y.raw_data, y, atol=2e-5)
    np.testing.assert_allclose(result.field.raw_data, (x, y), atol=2e-5)
    np.testing.assert_allclose(result.magnitude.raw_data, np.hypot(x, y), atol=2e-5)
    assert result.x.raw_data.dtype == np.float64
    if all(n > 1 for n in shape[:2]):
        np.testing.assert_allclose(
            result.divergence.raw_data,
            np.gradient(y, axis=0) + np.gradient(x, axis=1),
            atol=5e-5,
        )
        np.testing.assert_allclose(
            result.curl.raw_data, np.gradient(y, axis=1) - np.gradient(x, axis=0), atol=5e-5
        )
    else:
        assert "divergence" not in result.keys() and "curl" not in result.keys()
    assert result.field.visualized.shape == (*shape[:2], 3)


@pytest.mark.parametrize("use_sparse", [False, True, "scipy.sparse"])
@pytest.mark.parametrize("use_roi", [False, True], ids=["all", "roi"])
def test_radial_fourier_numpy(ctx, use_sparse, use_roi):
    shape = (3, 4, 14, 13)
    data = _data(shape, seed=10)
    roi = _roi(shape[:2], seed=11) if use_roi else None
    cx, cy, ri, ro, n_bins, max_order = 6.5, 7, 1, 6, 2, 4
    result = _run(
        ctx,
        data,
        "create_radial_fourier_analysis",
        roi,
        cx=cx,
        cy=cy,
        ri=ri,
        ro=ro,
        n_bins=n_bins,
        max_order=max_order,
        use_sparse=use_sparse,
    )
    bins = masks.to_dense(
        masks.radial_bins(cx, cy, shape[3], shape[2], radius=ro, radius_inner=ri, n_bins=n_bins)
    )
    yy, xx = np.mgrid[: shape[2], : shape[3]]
    phi = np.arctan2(yy - cy, xx - cx)
    expected = np.empty((n_bins, max_order + 1, *shape[:2]), dtype=np.complex128)
    for b in range(n_bins):
        for o in range(max_order + 1):
            weights = bins[b] * np.exp(1j * o * phi)
            expected[b, o] = np.einsum("...yx,yx->...", data.astype(np.float64), weights)
    if roi is not None:
        expected = np.where(roi, expected, np.nan)
    assert result.raw_results.dtype == np.complex64
    np.testing.assert_allclose(result.raw_results, expected, rtol=1e-4, atol=1e-3)
    absolute = np.abs(expected)
    normal = np.maximum(1, absolute[1, 0])
    np.testing.assert_allclose(result.absolute_1_3.raw_data, absolute[1, 3], rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(result.phase_0_2.raw_data, np.angle(expected[0, 2]), atol=1e-3)
    np.testing.assert_allclose(
        result.complex_1_2.raw_data,
        np.divide(
            expected[1, 2],
            normal,
            where=np.isfinite(normal),
            out=np.full_like(expected[1, 2], np.nan),
        ),
        atol=1e-4,
    )
    higher = absolute[:, 1:]
    dominant = np.argmax(higher, axis=1) + 1
    threshold = np.nanmax(higher.reshape(n_bins, -1), axis=1) * 0.2
    weak = np.all(higher < threshold[:, None, None, None], axis=1)
    valid = np.ones(shape[:2], bool) if roi is None else roi
    np.testing.assert_array_equal(
        result.dominant_0.raw_data[valid], np.where(weak, 0, dominant)[0][valid]
    )
    assert len(result) == n_bins * (1 + (max_order + 1) * 3)


# ---------------------------------------------------------------------------------------
# behaviour


def test_result_set_access(ctx):
    result = _run(ctx, _data((2, 3, 8, 8)), "create_disk_analysis", r=2)
    assert isinstance(result, AnalysisResultSet)
    assert result.intensity is result["intensity"] is result[0]
    assert [r.key for r in result] == result.keys() == ["intensity", "intensity_log"]
    assert len(result) == 2
    assert repr(result.intensity) == "<AnalysisResult: intensity>"
    np.testing.assert_array_equal(np.asarray(result.intensity), result.intensity.raw_data)
    with pytest.raises(AttributeError, match="result with key 'nope' not found, have: intensity"):
        result.nope  # noqa: B018
    with pytest.raises(AttributeError, match="nope"):
        result["nope"]
    png = result.intensity.get_image()
    assert png.read(8) == b"\x89PNG\r\n\x1a\n"


def test_lazy_visualized():
    calls = []

    def make():
        calls.append(1)
        return np.zeros((1, 1, 4), np.uint8)

    r = AnalysisResult(np.zeros(1), make, "t", "d", "k")
    assert calls == []
    assert r.visualized is r.visualized
    assert calls == [1]


def test_run_goes_through_run_udf():
    seen = []

    class Spy(Context):
        def run_udf(self, dataset, udf, roi=None, **kwargs):
            seen.append((udf, roi))
            return super().run_udf(dataset=dataset, udf=udf, roi=roi, **kwargs)

    ctx = Spy.make_with("inline")
    data = _data((2, 3, 6, 6))
    pick = _run(ctx, data, "create_pick_analysis", x=2, y=1)
    assert isinstance(seen[-1][0], PickUDF)
    np.testing.assert_array_equal(seen[-1][1], np.array([[0, 0, 0], [0, 0, 1]], dtype=bool))
    np.testing.assert_array_equal(pick.intensity.raw_data, data[1, 2])
    _run(ctx, data, "create_sum_analysis")
    assert isinstance(seen[-1][0], SumUDF) and seen[-1][1] is None
    # real data: CoMUDF's moments (the analysis and CoMUDF compute alike); complex: masks
    _run(ctx, data, "create_com_analysis")
    assert isinstance(seen[-1][0], CoMUDF) and seen[-1][1] is None
    _run(ctx, data.astype(np.complex64), "create_com_analysis")
    assert isinstance(seen[-1][0], ApplyMasksUDF) and seen[-1][1] is None


def test_threads_scheduler_same_result():
    data = _data((4, 5, 9, 9), seed=12)
    inline = _run(Context.make_with("inline"), data, "create_ring_analysis", ri=1, ro=4)
    threads = _run(Context.make_with("threads", cpus=2), data, "create_ring_analysis", ri=1, ro=4)
    np.testing.assert_array_equal(inline.intensity.raw_data, threads.intensity.raw_data)


@pytest.mark.parametrize(
    "method, shape, kwargs, match",
    [
        ("create_com_analysis", (6, 8, 8), {}, "need two navigation dimensions"),
        ("create_ring_analysis", (2, 2, 4, 4, 4), {}, "need two signal dimensions"),
        ("create_point_analysis", (2, 2, 2, 4, 4), {}, "at most two navigation dimensions"),
        (
            "create_com_analysis",
            (2, 2, 4, 4),
            dict(mask_radius_inner=1),
            "must pass both `mask_radius` and `mask_radius_inner`",
        ),
    ],
    ids=["com-nav1", "ring-sig3", "point-nav3", "com-inner-only"],
)
def test_refused(ctx, method, shape, kwargs, match):
    sig_dims = 3 if method == "create_ring_analysis" else 2
    ds = ctx.load("memory", data=np.zeros(shape, np.float32), sig_dims=sig_dims)
    with pytest.raises(ValueError, match=match):
        getattr(ctx, method)(dataset=ds, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(x=1), r"Need x, y and not z to index 2D dataset, received z=None, y=None, x=1"),
        (dict(x=1, y=1, z=0), "Need x, y and not z"),
    ],
)
def test_pick_needs_one_coordinate_per_nav_axis(ctx, kwargs, match):
    ds = ctx.load("memory", data=np.zeros((2, 2, 4, 4), np.float32), sig_dims=2)
    with pytest.raises(ValueError, match=match):
        ctx.run(ctx.create_pick_analysis(dataset=ds, **kwargs))


def test_gui_roi_parameter(ctx):
    data = _data((4, 5, 6, 6), seed=13)
    ds = ctx.load("memory", data=data, sig_dims=2)
    analysis = ctx.create_sum_analysis(dataset=ds)
    analysis.parameters["roi"] = {"shape": "rect", "x": 1, "y": 0, "width": 2, "height": 1}
    result = ctx.run(analysis)
    np.testing.assert_allclose(
        result.intensity.raw_data, data[0:2, 1:4].sum(axis=(0, 1)), rtol=1e-5
    )


def test_pictures_without_matplotlib(monkeypatch):
    from ltdask.analysis._viz import scaled_image

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    values = np.array([[0.0, 1.0], [2.0, 4.0]])
    picture = scaled_image(values, vmin=0, vmax=4)
    assert picture.dtype == np.uint8 and picture.shape == (2, 2, 4)
    np.testing.assert_array_equal(picture[..., 0], (values / 4 * 255).astype(np.uint8))
    assert (picture[..., 3] == 255).all()


def test_import_does_not_load_matplotlib():
    code = (
        "import sys, ltdask, ltdask.analysis, ltdask.compat; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
