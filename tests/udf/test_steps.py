"""Iterated runs (``ltdask.iter``): enough updates on small scans, from finer partitions
than ``compute`` uses, with the same results."""

from __future__ import annotations

import dask
import numpy as np
import pytest

import ltdask
from ltdask.udf import SumSigUDF, SumUDF

NAV = (16, 20)
SIG = (16, 16)


@pytest.fixture
def scan(tmp_path):
    data = np.random.default_rng(7).integers(0, 1000, NAV + SIG).astype(np.uint16)
    data.tofile(tmp_path / "scan.raw")
    return data


def _open(kind, data, path):
    if kind == "raw":
        return ltdask.open_raw(path / "scan.raw", nav_shape=NAV, sig_shape=SIG, dtype="uint16")
    return ltdask.from_array(data)


@pytest.mark.parametrize("kind", ["raw", "memory"])
@pytest.mark.parametrize("cores", [1, 2, 4])
def test_iter_gives_ten_updates_and_the_same_results(scan, tmp_path, kind, cores):
    with dask.config.set({"ltdask.min-partitions": cores}):
        ds = _open(kind, scan, tmp_path)
        own = [(p.start, p.stop) for p in ds.get_partitions()]
        assert len(own) < 10  # a small scan: a few partitions of its own
        roi = np.ones(NAV, bool)
        roi[3, 5:9] = False
        steps = list(ltdask.iter(ds, [SumSigUDF(), SumUDF()], roi=roi))
        assert len(steps) >= 10
        done = [int(frames["intensity_valid"].values.sum()) for frames, _ in steps]
        assert done == sorted(set(done))  # every step adds positions
        assert done[-1] == roi.sum()
        frames, total = steps[-1]
        expected = np.where(roi, scan.sum(axis=(2, 3), dtype=np.float64), np.nan)
        np.testing.assert_allclose(frames["intensity"].values, expected, rtol=1e-6)
        np.testing.assert_allclose(
            total["intensity"].values, scan[roi].sum(axis=0, dtype=np.float64), rtol=1e-6
        )
        # a step's partial result is the numpy result where it is valid
        first = steps[0][0]
        valid = first["intensity_valid"].values
        assert 0 < valid.sum() < roi.sum()
        np.testing.assert_allclose(first["intensity"].values[valid], expected[valid], rtol=1e-6)
        # compute and lazy keep the dataset's own partitions
        assert [(p.start, p.stop) for p in ds.get_partitions()] == own
        (lazy,) = ltdask.lazy(ds, [SumSigUDF()])
        assert lazy["intensity"].data.npartitions == len(own)


def test_iter_updates_setting(scan, tmp_path):
    ds = _open("raw", scan, tmp_path)
    with dask.config.set({"ltdask.min-partitions": 1, "ltdask.iter-updates": 3}):
        steps = list(ltdask.iter(ds, [SumSigUDF()]))
    # 320 frames, at most 320 // 3 a partition: whole scan rows, 5 rows (100 frames) each
    assert len(steps) == 4
    assert [int(s["intensity_valid"].values.sum()) for (s,) in steps] == [100, 200, 300, 320]


def test_a_scan_of_few_frames_gives_one_update_a_frame(tmp_path):
    data = np.arange(3 * 4 * 4, dtype=np.float32).reshape(1, 3, 4, 4)
    with dask.config.set({"ltdask.min-partitions": 1}):
        steps = list(ltdask.iter(ltdask.from_array(data), [SumSigUDF()]))
    assert [int(s["intensity_valid"].values.sum()) for (s,) in steps] == [1, 2, 3]
    np.testing.assert_allclose(steps[-1][0]["intensity"].values, data.sum(axis=(2, 3)))
