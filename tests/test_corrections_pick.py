"""PickUDF with corrections (issue 33): only the picked frames are corrected, as they are
written into the partition's results; their pieces are put together in one copy (not a
copy of each partition's frames first). Checked against numpy on the corrected frames
(``test_corrections.corrected``)."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from dask.callbacks import Callback
from test_corrections import corrected

import ltdask
from ltdask import CorrectionSet
from ltdask.udf import PickUDF

NAV = (6, 7)
SIG = (13, 11)  # odd: no tile boundary falls on a power of two


def _excluded(kind: str) -> np.ndarray:
    """1 % of the pixels at random (and a corner), or clusters on the borders, inside and
    side by side (excluded neighbours)."""
    mask = np.zeros(SIG, bool)
    h, w = SIG
    if kind == "random":
        rng = np.random.default_rng(5)
        mask.reshape(-1)[rng.choice(h * w, max(2, h * w // 100), replace=False)] = True
        mask[0, 0] = True
    else:
        mask[0, 3:5] = mask[h - 1, 0] = mask[5:8, w - 1] = True
        mask[6:8, 4:6] = True
    return mask


def _scan(tmp_path, dtype):
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind == "f":
        data = rng.normal(100, 20, (*NAV, *SIG)).astype(dtype)
    else:
        data = rng.integers(0, 4000, (*NAV, *SIG)).astype(dtype)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    return data, ltdask.open_raw(path, nav_shape=NAV, sig_shape=SIG, dtype=dtype)


class _OwnedBytes(Callback):
    """The bytes of the arrays that tasks other than the partition tasks return and own
    (copies, not views)."""

    def __init__(self):
        super().__init__()
        self.owned = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        name = key[0] if isinstance(key, tuple) else str(key)
        if isinstance(result, np.ndarray) and not name.startswith("ltdask-udf-"):
            self.owned += result.nbytes if result.base is None else 0


@pytest.mark.parametrize("dtype", ["uint16", "float32"])
@pytest.mark.parametrize("kind", ["random", "clusters"])
@pytest.mark.parametrize("with_roi", [True, False], ids=["roi", "all"])
def test_corrected_pick_equals_numpy(tmp_path, dtype, kind, with_roi):
    """The picked frames with dark + gain + excluded pixels equal numpy's corrected
    frames, in flat nav order, over several partitions."""
    data, ds = _scan(tmp_path, dtype)
    rng = np.random.default_rng(6)
    dark = rng.normal(10, 2, SIG).astype(np.float32)
    gain = rng.uniform(0.8, 1.2, SIG).astype(np.float32)
    mask = _excluded(kind)
    cs = CorrectionSet(dark=dark, gain=gain, excluded_pixels=mask)
    roi = None
    if with_roi:
        roi = np.zeros(NAV, bool)
        roi[:, ::3] = True
        roi[4, 5] = True
    with dask.config.set({"ltdask.partition-bytes": 8 * SIG[0] * SIG[1] * 4}):
        assert ltdask.explain(ds, [PickUDF()], roi=roi, corrections=cs).partitions > 2
        got = PickUDF().compute(ds, roi=roi, corrections=cs)["intensity"].values
    frames = data.reshape(-1, *SIG)
    if roi is not None:
        frames = frames[roi.reshape(-1)]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, corrected(frames, dark, gain, mask), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("with_corrections", [True, False], ids=["corrected", "uncorrected"])
def test_pick_copies_its_frames_once(tmp_path, monkeypatch, with_corrections):
    """Each partition writes its picked frames (corrected) into its results; the pieces are
    put together in one copy where the result is made, not first copied out of each
    partition's buffer (dask's slicing copies a slice much smaller than its array: a
    third of a corrected Pick's time on a 2 GiB scan). Merged as a large Pick is: on dask
    arrays of the partitions' buffers, not in one task."""
    import ltdask.udf.merge

    monkeypatch.setattr(ltdask.udf.merge, "MERGE_IN_ONE_TASK_BYTES", 0)
    data, ds = _scan(tmp_path, "uint16")
    roi = np.zeros(NAV, bool)
    roi[:, 1::2] = True
    cs = None
    if with_corrections:
        cs = CorrectionSet(dark=np.full(SIG, 3.0), excluded_pixels=_excluded("clusters"))
    counter = _OwnedBytes()
    with dask.config.set({"ltdask.partition-bytes": 8 * SIG[0] * SIG[1] * 4}), counter:
        assert ltdask.explain(ds, [PickUDF()], roi=roi, corrections=cs).partitions > 2
        got = PickUDF().compute(ds, roi=roi, corrections=cs)["intensity"].values
    frames = data.reshape(-1, *SIG)[roi.reshape(-1)]
    want = (
        frames if cs is None else corrected(frames, np.full(SIG, 3.0), None, _excluded("clusters"))
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # (the valid masks' chunks, a few bytes each, are the only arrays made besides)
    assert counter.owned < frames[0].size * 4
