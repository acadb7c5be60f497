"""K2IS, FRMS6 and DE SEQ: ltdask reads the files of each case in ``formats_a_cases.py`` (the
tests' writers, the same seeds) as LiberTEM 0.16 read them (``make_formats_a.py``): the same
nav shape and the same frames (with the dark frame, gain map and references the acquisitions
carry applied by default; zeros where a sync offset leaves a position without a frame)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from reference.formats_a_cases import CASES, frame_digest

import ltdask

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "formats")


@pytest.mark.parametrize("case_id", list(CASES))
def test_reads_as_libertem(case_id, tmp_path):
    fmt, write = CASES[case_id]
    want = np.load(os.path.join(DATA, f"{case_id}.npz"))
    path, kwargs, _ = write(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ltdask.MissingFramesWarning)
        ds = ltdask.open(path, format=fmt, **kwargs)
    assert ds.nav_shape == tuple(want["nav_shape"])
    frames = ds.to_dask().compute(scheduler="threads").reshape(-1, *ds.sig_shape)
    if fmt == "k2is":
        got = frame_digest(frames)
        np.testing.assert_array_equal(got["crop"], want["crop"])
        assert got["sha256"].tolist() == want["sha256"].tolist()
        return
    # positions without a frame (sync offsets) are zeros on both sides
    np.testing.assert_allclose(frames, want["frames"], rtol=1e-6, atol=1e-4)


def test_every_case_is_stored():
    stored = {name[: -len(".npz")] for name in os.listdir(DATA) if name.endswith(".npz")}
    assert set(CASES) <= stored
