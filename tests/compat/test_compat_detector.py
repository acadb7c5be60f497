"""`ltdask.compat.correct` (``libertem.corrections.detector.correct``) against plain numpy:
``(x - dark) * gain``, then each excluded pixel the mean of its 3x3 neighbours that are not
excluded."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.badinput import expect, report

import ltdask
from ltdask.compat import correct
from ltdask.compat.detector import RepairDescriptor, RepairValueError

SIG = (7, 6)


@pytest.fixture(scope="module", autouse=True)
def report_table(request):
    """Print every bad-input case's exception at the end of the module."""
    yield from report(request)


def reference(buffer, dark, gain, excluded):
    out = buffer.astype(np.float64)
    if dark is not None:
        out = out - dark
    if gain is not None:
        out = out * gain
    bad = np.zeros(SIG, dtype=bool)
    bad[tuple(excluded)] = True
    frames = out.reshape(-1, *SIG).copy()
    for y, x in zip(*excluded, strict=True):
        ys = slice(max(0, y - 1), y + 2)
        xs = slice(max(0, x - 1), x + 2)
        good = ~bad[ys, xs]
        frames[:, y, x] = frames[:, ys, xs][:, good].mean(axis=1)
    return frames.reshape(out.shape)


@pytest.fixture
def parts():
    rng = np.random.default_rng(5)
    buffer = rng.integers(0, 1000, size=(2, 3, *SIG)).astype(np.uint16)
    dark = rng.random(SIG) * 10
    gain = 0.5 + rng.random(SIG)
    # a corner, an edge pixel and a cluster of two neighbours
    excluded = np.array([[0, 3, 4, 4], [0, 5, 2, 3]])
    return buffer, dark, gain, excluded


@pytest.mark.parametrize("with_dark", [True, False])
@pytest.mark.parametrize("with_gain", [True, False])
def test_correct_matches_numpy(parts, with_dark, with_gain):
    buffer, dark, gain, excluded = parts
    dark = dark if with_dark else None
    gain = gain if with_gain else None
    out = correct(buffer, dark_image=dark, gain_map=gain, excluded_pixels=excluded, sig_shape=SIG)
    assert out.dtype == np.float32  # result_type(float32, uint16)
    assert out.shape == buffer.shape
    np.testing.assert_allclose(out, reference(buffer, dark, gain, excluded), rtol=1e-5)
    assert buffer.dtype == np.uint16  # the input is left alone


def test_inplace_and_repair_descriptor(parts):
    buffer, dark, gain, excluded = parts
    floats = buffer.astype(np.float64)
    expected = reference(floats, dark, gain, excluded)
    desc = RepairDescriptor(SIG, excluded_pixels=excluded)
    out = correct(floats, dark_image=dark, gain_map=gain, repair_descriptor=desc, inplace=True)
    assert out is floats and out.dtype == np.float64
    np.testing.assert_allclose(floats, expected, rtol=1e-12)


def test_empty_repairs():
    # the centre of a 3x3 block of excluded pixels has no good neighbour
    ys, xs = np.mgrid[1:4, 1:4]
    excluded = np.array([ys.ravel(), xs.ravel()])
    with pytest.raises(RepairValueError, match=r"\(2, 2\)\] have no neighbour .*allow_empty"):
        correct(np.ones((1, *SIG)), sig_shape=SIG, excluded_pixels=excluded)
    out = correct(np.ones((1, *SIG)), sig_shape=SIG, excluded_pixels=excluded, allow_empty=True)
    assert out[0, 2, 2] == 1  # left as it is
    assert issubclass(RepairValueError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({}, ValueError, r"need dark_image, gain_map or sig_shape", id="no-shape"),
        pytest.param(
            dict(dark_image=np.zeros((5, 5))),
            ltdask.DataSetError,
            r"buffer of shape \(2, 3, 7, 6\) does not end in the signal shape \(5, 5\)",
            id="dark-shape",
        ),
        pytest.param(
            dict(sig_shape=SIG, inplace=True),
            TypeError,
            r"inplace=True needs a float or complex buffer, not uint16",
            id="inplace-int",
        ),
        pytest.param(
            dict(sig_shape=SIG, excluded_pixels=[[9], [0]]),
            ltdask.DataSetError,
            r"coordinate 9 in dim 0 is outside the signal shape \(7, 6\)",
            id="excluded-outside",
        ),
        pytest.param(
            dict(
                sig_shape=SIG,
                excluded_pixels=[[0], [0]],
                repair_descriptor=RepairDescriptor(SIG, [[1], [1]]),
            ),
            ValueError,
            r"both repair_descriptor and excluded_pixels are given",
            id="both",
        ),
    ],
)
def test_bad_input(request, parts, kwargs, error, match):
    expect(request, error, match, correct, parts[0], **kwargs)
