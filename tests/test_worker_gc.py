"""`ltdask.runtime.worker_gc`: one ``gc.freeze()`` in a distributed worker after its first partition
task, as ``ltdask.worker-gc-freeze`` says (the real cluster: ``tests/test_cluster.py``)."""

from __future__ import annotations

import gc

import dask
import numpy as np
import pytest

import ltdask
from ltdask.exceptions import ConfigError
from ltdask.runtime import settings, worker_gc
from ltdask.udf import SumUDF


@pytest.fixture
def fake_worker(monkeypatch):
    """This process seen as a worker that has not frozen anything yet; unfrozen after."""
    monkeypatch.setattr(settings, "current_worker", lambda: object())
    monkeypatch.setattr(worker_gc, "_FROZEN_IN", [])
    yield
    gc.unfreeze()


def test_a_worker_freezes_once_after_its_first_task(fake_worker):
    assert gc.get_freeze_count() == 0
    data = np.arange(2 * 3 * 4 * 5, dtype=np.uint16).reshape(2, 3, 4, 5)
    ds = ltdask.from_array(data)
    res = SumUDF().compute(ds)
    assert gc.get_freeze_count() > 0
    np.testing.assert_array_equal(res["intensity"], data.sum(axis=(0, 1)))
    gc.unfreeze()
    SumUDF().compute(ds)  # (once per process: not again)
    assert gc.get_freeze_count() == 0


def test_the_setting_turns_it_off(fake_worker):
    with dask.config.set({"ltdask.worker-gc-freeze": "false"}):
        worker_gc.after_task()
    assert gc.get_freeze_count() == 0


def test_outside_workers_nothing_is_frozen(monkeypatch):
    monkeypatch.setattr(worker_gc, "_FROZEN_IN", [])
    worker_gc.after_task()
    assert gc.get_freeze_count() == 0
    assert worker_gc._FROZEN_IN == []


def test_a_bad_setting_names_itself(fake_worker):
    with dask.config.set({"ltdask.worker-gc-freeze": "sometimes"}):
        with pytest.raises(ConfigError, match="ltdask.worker-gc-freeze is 'sometimes'"):
            worker_gc.after_task()
