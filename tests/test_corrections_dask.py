"""Sums and means of ``to_dask(corrections=...)`` (issue 33): over the frames, over each
frame and over all, taken from the uncorrected frames and corrected after the sum (no
corrected copy of a chunk), equal numpy on the corrected frames
(``test_corrections.corrected``)."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from test_corrections import corrected

import ltdask
from ltdask import CorrectionSet
from ltdask.corrections import PreparedCorrections

SIG = (37, 41)


def _excluded() -> np.ndarray:
    mask = np.zeros(SIG, bool)
    mask[0, 0:2] = mask[1, 0] = True  # a corner, excluded neighbours
    mask[36, 10:13] = True  # the bottom edge
    mask[15:17, 40] = True  # the right edge
    mask[20, 20] = mask[21, 21] = True
    return mask


def _case(dtype):
    rng = np.random.default_rng(5)
    data = rng.integers(0, 4000, (3, 5, *SIG)).astype(dtype)
    dark = rng.normal(50, 5, SIG).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = _excluded()
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    return data, corrected(data, dark, gain, mask), cs


def _no_corrected_chunks(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a chunk was corrected")

    monkeypatch.setattr(PreparedCorrections, "apply", refuse)


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("axis", [(0, 1), (2, 3), None], ids=["nav", "sig", "all"])
@pytest.mark.parametrize("chunks", [None, (2, 5, 20, 41)], ids=["frames", "sig-chunks"])
def test_folded_sums_equal_numpy(monkeypatch, dtype, axis, chunks):
    """``arr.sum``, ``ltdask.sum`` and ``ltdask.mean`` of a corrected scan equal numpy's
    on the corrected frames, with no chunk corrected; chunks split in the signal too."""
    data, want, cs = _case(dtype)
    arr = ltdask.from_array(data).to_dask(corrections=cs, chunks=chunks)
    _no_corrected_chunks(monkeypatch)
    with dask.config.set(scheduler="synchronous"):
        total = arr.sum(axis=axis)
        assert total.dtype == np.float32
        np.testing.assert_allclose(total.compute(), want.sum(axis=axis), rtol=2e-6)
        np.testing.assert_allclose(
            ltdask.sum(arr, axis=axis).compute(), want.sum(axis=axis), rtol=2e-6
        )
        mean = ltdask.mean(arr, axis=axis)
        assert mean.dtype == np.float32
        np.testing.assert_allclose(mean.compute(), want.mean(axis=axis), rtol=2e-6)
        kept = arr.sum(axis=axis, keepdims=True, dtype=np.float64).compute()
        assert kept.dtype == np.float64
        np.testing.assert_allclose(kept, want.sum(axis=axis, keepdims=True), rtol=1e-6)


def test_other_axes_correct_the_chunks():
    """Sums over other axes (one scan axis) are numpy's sums of the corrected chunks."""
    data, want, cs = _case("uint16")
    arr = ltdask.from_array(data).to_dask(corrections=cs)
    with dask.config.set(scheduler="synchronous"):
        np.testing.assert_allclose(arr.sum(axis=0).compute(), want.sum(axis=0), rtol=1e-6)
