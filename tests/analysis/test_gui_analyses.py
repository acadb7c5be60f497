"""LiberTEM's GUI analyses `SDAnalysis`, `SumSigAnalysis`, `SumfftAnalysis` and
`PickFFTFrameAnalysis`: keys and values against numpy on the same data."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.analysis import (
    AnalysisResultSet,
    PickFFTFrameAnalysis,
    SDAnalysis,
    SumfftAnalysis,
    SumSigAnalysis,
)
from ltdask.compat import Context

SHAPE = (3, 4, 8, 10)


@pytest.fixture(scope="module")
def ctx():
    return Context.make_with("inline")


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(11).random(SHAPE).astype(np.float32)


def _outside_disk(h, w, cx, cy, r):
    """1 outside the disk of radius r around (cx, cy), 0 inside (LiberTEM's real-space
    mask: pixel centres at integer coordinates, the rim inside)."""
    y, x = np.mgrid[:h, :w]
    return ((x - cx) ** 2 + (y - cy) ** 2 > r**2).astype(np.float32)


def test_sd_analysis(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    result = ctx.run(SDAnalysis(dataset=ds, parameters={}))
    assert isinstance(result, AnalysisResultSet)
    assert result.keys() == ["intensity", "intensity_lin"]
    expected = data.reshape(-1, *SHAPE[2:]).std(axis=0)
    np.testing.assert_allclose(result.intensity.raw_data, expected, rtol=1e-5)
    np.testing.assert_allclose(result.intensity_lin.raw_data, expected, rtol=1e-5)
    assert result.intensity.visualized.shape == (*SHAPE[2:], 4)


def test_sd_analysis_gui_roi(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    # LiberTEM's GUI rectangles include both ends: rows 0 to 1, columns 1 to 2
    spec = {"shape": "rect", "x": 1, "y": 0, "width": 1, "height": 1}
    result = ctx.run(SDAnalysis(dataset=ds, parameters={"roi": spec}))
    expected = data[0:2, 1:3].reshape(-1, *SHAPE[2:]).std(axis=0)
    np.testing.assert_allclose(result.intensity_lin.raw_data, expected, rtol=1e-5)


def test_sumsig_analysis(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    result = ctx.run(SumSigAnalysis(dataset=ds, parameters={}))
    assert result.keys() == ["intensity"]
    np.testing.assert_allclose(result.intensity.raw_data, data.sum(axis=(2, 3)), rtol=1e-5)
    assert result.intensity.visualized.shape == (*SHAPE[:2], 4)


@pytest.mark.parametrize(
    "params, mask",
    [
        pytest.param({}, None, id="plain"),
        pytest.param({"real_rad": 2, "real_centerx": 3, "real_centery": 4}, (3, 4, 2), id="masked"),
    ],
)
def test_sumfft_analysis(ctx, data, params, mask):
    ds = ctx.load("memory", data=data, sig_dims=2)
    analysis = SumfftAnalysis(dataset=ds, parameters=params)
    result = ctx.run(analysis)
    assert result.keys() == ["intensity"]
    total = data.sum(axis=(0, 1))
    np.testing.assert_allclose(result.intensity.raw_data, total, rtol=1e-5)  # the sum itself
    assert result.intensity.visualized.shape == (*SHAPE[2:], 4)
    # the picture is of log(|fft| + 1) of the (masked) sum: the same as a picture of that
    from ltdask.analysis._viz import scaled_image

    masked = total if mask is None else total * _outside_disk(*SHAPE[2:], *mask)
    spectrum = np.log(np.abs(np.fft.fftshift(np.fft.fft2(masked))) + 1)
    np.testing.assert_array_equal(result.intensity.visualized, scaled_image(spectrum, damage=True))


@pytest.mark.parametrize(
    "params, mask",
    [
        pytest.param({"x": 2, "y": 1}, None, id="plain"),
        pytest.param(
            {"x": 2, "y": 1, "real_rad": 1, "real_centerx": 1, "real_centery": 1},
            (1, 1, 1),
            id="masked",
        ),
    ],
)
def test_pick_fft_analysis(ctx, data, params, mask):
    ds = ctx.load("memory", data=data, sig_dims=2)
    result = ctx.run(PickFFTFrameAnalysis(dataset=ds, parameters=params))
    assert result.keys() == ["intensity", "intensity_lin"]
    frame = data[1, 2]
    if mask is not None:
        frame = frame * _outside_disk(*SHAPE[2:], *mask)
    expected = np.fft.fftshift(np.abs(np.fft.fft2(frame)))
    np.testing.assert_allclose(result.intensity.raw_data, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(result.intensity_lin.raw_data, expected, rtol=1e-5, atol=1e-5)


def test_pick_fft_needs_coordinates(ctx, data):
    ds = ctx.load("memory", data=data, sig_dims=2)
    with pytest.raises(ValueError, match="Need x, y and not z to index 2D dataset"):
        ctx.run(PickFFTFrameAnalysis(dataset=ds, parameters={"x": 1}))
