"""ltdask's EMPAD, NanoMEGAS BLO and TVIPS readers against LiberTEM 0.16's decoded frames.

``make_formats_b.py`` wrote each case of ``formats_b_cases.py`` with the test-side writers,
read it with LiberTEM and stored the frames, nav shape and sync offset LiberTEM found; here
the same files are written again (same writers, same seeds) and opened with ``ltdask.open``.
TVIPS series are opened from their last file (LiberTEM needs the ``_000`` one).

Deliberate difference (DESIGN.md): positions whose frame is not in the files (a sync offset
past either end, a partial last frame) are invalid in ltdask; LiberTEM marks them valid. The
values there agree (zeros).
"""

from __future__ import annotations

import numpy as np
import pytest
from reference.formats_b_cases import CASES, data_file

import ltdask
from ltdask.compat import Context
from ltdask.udf import PickUDF, SumSigUDF


def stored(case):
    with np.load(data_file(case.format)) as f:
        if f"{case.id}__error" in f:
            pytest.fail(f"LiberTEM refused {case.id}: {f[case.id + '__error']}")
        return {k.split("__", 1)[1]: f[k] for k in f.files if k.startswith(case.id + "__")}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_frames_equal_libertem(case, tmp_path):
    ref = stored(case)
    load = case.write(tmp_path)
    ds = ltdask.open(load.path, **load.kwargs)
    assert ds.nav_shape == tuple(ref["nav"].tolist())
    assert ds.sync_offset == int(ref["sync"])
    frames = ds.to_dask().compute(scheduler="sync")
    assert frames.dtype == ref["frames"].dtype
    np.testing.assert_array_equal(frames, ref["frames"])
    # LiberTEM's valid mask is all True; ltdask's says which positions hold a frame
    assert ref["valid"].all()
    present = ds.valid_nav_mask()
    assert not frames[~present].any()  # LiberTEM's zeros where no frame is
    # the UDF path reads the same frames, and marks only those positions valid
    res = SumSigUDF().compute(ds, progress=False)
    expected = ref["frames"].reshape(*ds.nav_shape, -1).astype(np.float64).sum(axis=-1)
    np.testing.assert_allclose(res["intensity"].values, expected, rtol=1e-5, atol=1e-2)
    np.testing.assert_array_equal(res["intensity_valid"].values, present)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_libertem_load_arguments(case, tmp_path):
    """The very ``ctx.load(...)`` call the reference script made, through ltdask's Context."""
    ref = stored(case)
    load = case.write(tmp_path)
    ds = Context().load(load.lt_type, **load.lt_kwargs)
    res = Context().run_udf(dataset=ds, udf=PickUDF(), roi=ds.roi[(0,) * len(ds.nav_shape)])
    np.testing.assert_array_equal(
        res["intensity"].data[0], ref["frames"].reshape(-1, *ds.sig_shape)[0]
    )


def test_cases_cover_the_issue():
    """Sync offsets both ways, a partial last frame, several files, a one-frame scan and a
    1-D nav: the variety the issue asks for, kept from being trimmed away unnoticed."""
    ids = {c.id for c in CASES}
    assert {"empad-sync+2", "empad-sync-3", "blo-sync-2", "blo-sync+1"} <= ids
    assert {"empad-partial-raw", "tvips-scan", "empad-one-frame", "blo-one-frame"} <= ids
    assert {"empad-series", "tvips-v1"} <= ids
