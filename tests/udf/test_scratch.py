"""Scratch arrays of partition tasks (`ltdask.runtime.scratch`): recycled within a thread,
zeroed when handed out again, new outside a task, bounded."""

from __future__ import annotations

import threading

import numpy as np

from ltdask.runtime import scratch


def test_arrays_come_back_zeroed_in_the_next_task():
    with scratch.task():
        a = scratch.zeros(1000)
        a[:] = 7
        with scratch.task():  # (nested: the outer task takes them back)
            b = scratch.zeros(1000, np.int64)
            b[:] = 3
        assert scratch.zeros(1000, np.int64) is not b
    with scratch.task():
        again = scratch.zeros(1000)
        other = scratch.zeros(1000)
        assert again is a and other is not a
        assert not again.any()
        assert scratch.zeros(1000, np.int64).dtype == np.int64


def test_outside_a_task_every_array_is_new():
    with scratch.task():
        a = scratch.zeros(10)
    assert scratch.zeros(10) is not a
    assert scratch.zeros(10) is not scratch.zeros(10)


def test_threads_do_not_share_arrays():
    with scratch.task():
        mine = scratch.zeros(64)
    seen = []

    def other():
        with scratch.task():
            seen.append(scratch.zeros(64))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen[0] is not mine


def test_kept_bytes_are_bounded(monkeypatch):
    monkeypatch.setattr(scratch, "KEEP_BYTES", 3 * 800)
    reused = []

    def tasks():  # (a thread of its own: a pool without the other tests' arrays)
        with scratch.task():
            lent = [scratch.zeros(100) for _ in range(5)]  # 800 bytes each
        with scratch.task():
            back = [scratch.zeros(100) for _ in range(5)]
        reused.append(sum(any(b is a for a in lent) for b in back))

    t = threading.Thread(target=tasks)
    t.start()
    t.join()
    assert reused == [3]
