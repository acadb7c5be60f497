"""Progress: a bar of the partitions done by default where someone watches and a run takes a
while, from the start with ``progress=True``, never with ``False``; the compile notice above
the bar, on its own line."""

from __future__ import annotations

import re

import dask
import numpy as np
import pytest

import ltdask
from ltdask.runtime import progress
from ltdask.udf import SumSigUDF, SumUDF


@pytest.fixture
def ds():
    data = np.arange(6 * 4 * 8 * 8, dtype=np.float32).reshape(6, 4, 8, 8)
    with dask.config.set({"ltdask.partition-bytes": 4 * 64 * 4, "ltdask.min-partitions": 1}):
        yield ltdask.from_array(data)


def _bar_counts(err: str) -> list[tuple[int, int]]:
    """The ``done/total`` pairs the bar drew."""
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+) \[", err)]


def test_progress_true_counts_every_partition(ds, capsys):
    partitions = len(ds.get_partitions())
    assert partitions == 6
    with dask.config.set(scheduler="threads"):
        total, per_frame = ltdask.compute(ds, [SumUDF(), SumSigUDF()], progress=True)
    err = capsys.readouterr().err
    counts = _bar_counts(err)
    assert counts and {t for _, t in counts} == {partitions}, err
    assert counts[-1] == (partitions, partitions)
    assert "partition" in err
    np.testing.assert_array_equal(per_frame["intensity"], ds.to_dask().sum(axis=(2, 3)))


@pytest.mark.parametrize("progress", [None, False])
def test_no_bar_where_nobody_watches_or_when_off(ds, capsys, progress):
    # pytest captures stderr: no terminal, no notebook
    SumUDF().compute(ds, progress=progress)
    ltdask.to_zarr(SumUDF().lazy(ds), str(_tmp_store(capsys)), progress=progress)
    assert capsys.readouterr().err == ""


def _tmp_store(capsys):
    import tempfile

    return tempfile.mkdtemp() + "/out.zarr"


def test_default_bar_waits_for_a_slow_run(ds, capsys, monkeypatch):
    monkeypatch.setattr(progress, "_watched", lambda: True)
    SumUDF().compute(ds)  # quicker than PROGRESS_DELAY: nothing
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "PROGRESS_DELAY", 0.0)
    SumUDF().compute(ds)
    assert _bar_counts(capsys.readouterr().err)[-1] == (6, 6)
    SumUDF().compute(ds, progress=False)
    assert capsys.readouterr().err == ""


def test_to_zarr_and_plain_dask_computes_show_tasks(ds, capsys, tmp_path):
    ltdask.to_zarr(SumSigUDF().lazy(ds), str(tmp_path / "a.zarr"), progress=True)
    assert _bar_counts(capsys.readouterr().err)[-1] == (6, 6)
    ds.to_zarr(str(tmp_path / "b.zarr"), progress=True)
    done, total = _bar_counts(capsys.readouterr().err)[-1]
    assert done == total >= 6  # no UDF: every task counts


def test_notice_goes_above_the_bar_on_its_own_line(capsys):
    bar = progress.PartitionBar(delay=0.0)
    graph = {("ltdask-udf-x", 0): 1, ("ltdask-udf-x", 1): 2, ("other", 0): 3}
    bar._start_state(graph, {})
    bar._posttask(("ltdask-udf-x", 0), None, graph, {}, 0)
    progress.write_line("ltdask: compiling kernels, once")
    bar._posttask(("other", 0), None, graph, {}, 0)  # not a partition: not counted
    bar._finish(graph, {}, False)
    progress.write_line("after")
    err = capsys.readouterr().err
    assert re.search(r"(^|[\r\n])ltdask: compiling kernels, once\n", err), repr(err)
    assert _bar_counts(err)[-1] == (1, 2)
    assert err.endswith("after\n")
    assert progress._ACTIVE == []


def test_synthetic_scan_shows_its_rows(capsys):
    from ltdask.io.synthetic import synthetic_scan

    quiet, _ = synthetic_scan((3, 2), (8, 8), seed=1)
    assert capsys.readouterr().err == ""
    shown, _ = synthetic_scan((3, 2), (8, 8), seed=1, progress=True)
    assert _bar_counts(capsys.readouterr().err)[-1] == (3, 3)
    np.testing.assert_array_equal(quiet, shown)
