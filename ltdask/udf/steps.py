"""Runs in steps: partition group by partition group, with the results of what is done so
far after each step (``ltdask.iter``, LiberTEM's ``run_udf_iter``), and the results of a
run before any partition is processed (a "dry run").
"""

from __future__ import annotations

import time

import numpy as np

from ltdask.exceptions import UDFError
from ltdask.io.dataset import DataSet
from ltdask.io.partition import for_run, with_min_partitions
from ltdask.runtime import settings
from ltdask.runtime.schedulers import RunTarget, local_scheduler
from ltdask.udf.assemble import to_datasets
from ltdask.udf.buffers import filled
from ltdask.udf.graph import PartitionGraph, Run
from ltdask.udf.interface import UDFBase
from ltdask.udf.merge import RunningMerges, initial_state
from ltdask.udf.plan import RunPlan, plan_run

#: partitions per thread that a step of a live run computes at once (`_groups`)
LIVE_GROUP = 4
#: a live run shows its results at least this often while partitions are ready
LIVE_UPDATE_SECONDS = 0.25
#: a live step (after the first) waits this long at most for a group's partitions, once
#: one is there (steps of one partition each left a thread idle, and a step's dask
#: overhead was then as much CPU as a 512x512 partition's work)
LIVE_GATHER_SECONDS = 0.05


class RunControl:
    """Changes to a run that `iter_steps` makes between two steps, and how far it is."""

    def __init__(self) -> None:
        self.parameters: list[dict] | None = None
        #: the partitions the run has processed (after each step)
        self.partitions_done = 0

    def update_parameters(self, parameters: list[dict]) -> None:
        """New parameters (one dict per UDF, the keywords to change) for the partitions
        that are not processed yet (LiberTEM's ``update_parameters_experimental``)."""
        self.parameters = [dict(p) for p in parameters]


def iter_steps(
    dataset: DataSet,
    udfs: list[UDFBase] | UDFBase,
    roi=None,
    unprocessed: str = "fill",
    control: RunControl | None = None,
    corrections=None,
    backends=None,
    partitions: str = "updates",
    per_step: int | None = None,
):
    """Run `udfs` partition group by partition group, yielding ``(make, damage)``:
    ``make()`` builds the lazy Datasets of what is done (``get_results`` runs then, on
    numpy partials in memory), ``damage`` is the flat boolean nav mask of the positions
    whose partitions are done. Nav positions not done yet hold fill values
    (``unprocessed="fill"``) or the buffers' values after ``preprocess`` on the whole
    dataset (``"initial"``, as LiberTEM shows them); their valid masks are False.
    Parameters given to `control` between steps apply to the partitions after them.

    `partitions`: ``"updates"`` cuts the scan into partitions small enough for
    ``ltdask.iter-updates`` steps at least (see
    :func:`~ltdask.io.partition.with_min_partitions`; ``ltdask.iter``, ``ltdask.live``);
    ``"run"`` takes the partitions :func:`~ltdask.udf.api.compute` takes, so each step's
    results are bit for bit those of ``compute`` with the step's done positions as ROI,
    and the last step's are ``compute``'s (LiberTEM's ``run_udf_iter``).

    Each step computes `per_step` partitions that hold frames of the ROI (by default
    ``ltdask.min-partitions``, one per core; 0: all, one step); partitions without any go
    with the next step, so that every step adds positions (as in LiberTEM, where they are
    not run)."""

    if isinstance(udfs, UDFBase):
        udfs = [udfs]
    if per_step is not None and (int(per_step) != per_step or per_step < 0):
        raise ValueError(
            f"iter_steps: per_step={per_step!r}; expected a count of partitions (0: all of "
            "them in one step) or None (one per core)"
        )
    step = max(1, settings.min_partitions()) if per_step is None else int(per_step)
    target = RunTarget.resolve()
    dataset = dataset.planned_for(target, in_steps=True)
    if partitions == "updates":
        # one step computes `step` partitions (one per core): enough of them for the updates
        dataset = with_min_partitions(dataset, max(1, step) * settings.iter_updates())
    elif partitions == "run":
        dataset = for_run(dataset, target)
    else:
        raise ValueError(
            f"iter_steps: partitions={partitions!r}; expected 'updates' (enough steps for "
            "ltdask.iter-updates) or 'run' (the partitions of compute)"
        )
    run = Run(dataset, list(udfs), roi, corrections, backends, target)
    initial = _initial_states(run.plan, unprocessed)
    # frames that arrive over time (a live acquisition, as long as it runs): partitions
    # merged as they finish, their partials let go
    running = RunningMerges(run.plan) if dataset.ready_partitions(0) is not None else None
    n = len(run.partitions)
    done = np.zeros(n, dtype=bool)
    cells = np.empty(n, dtype=object)
    for idx, shown in _groups(dataset, run.plan.counts, step or n):
        if control is not None and control.parameters is not None:
            if len(control.parameters) != len(run.plan.udfs):
                raise UDFError(
                    f"update_parameters: {len(control.parameters)} dicts of parameters for "
                    f"{len(run.plan.udfs)} UDFs; give one dict per UDF"
                )
            changed = [u.copy(**p) for u, p in zip(run.plan.udfs, control.parameters, strict=True)]
            control.parameters = None
            run = Run(dataset, changed, run.plan.roi.flat, corrections, backends, target)
            initial = _initial_states(run.plan, unprocessed)
        for i, c in zip(idx, _compute_partitions(run.partition_results, idx), strict=True):
            cells[i] = c
            done[i] = True
        if running is not None:
            running.add(run.plan, cells, idx)
        if control is not None:
            control.partitions_done = int(done.sum())
        if not shown:
            continue
        damage = np.zeros(dataset.num_frames, dtype=bool)
        for i, p in enumerate(run.partitions):
            damage[p.start : p.stop] = done[i]
        # (copied: the next steps merge into the states, and make() may come later)
        folded = None if running is None else running.copy()
        yield _maker(run.plan, cells.copy(), done.copy(), initial, folded), damage


def _compute_partitions(results, idx: list[int]) -> list:
    """The partials of the run of partitions `idx` (of `results`, the run's 1-D object
    dask array, one element per partition) as one slice in one ``dask.compute``: one graph
    to optimise and order, where a block per partition cost a live step twice the CPU."""
    import dask

    lo, hi = idx[0], idx[-1] + 1
    assert list(idx) == list(range(lo, hi)), idx  # (steps take runs of partitions)
    part = results[lo:hi]
    (values,) = dask.compute(part, **local_scheduler([part]))
    return list(values)


def _groups(dataset: DataSet, counts, per_step: int):
    """The partitions of each step, and whether the step shows its results:
    `_step_groups`, each shown; or for a dataset whose partitions become readable over time
    (a live acquisition) all those readable when the step starts (at least one; after the
    first step, up to `LIVE_GATHER_SECONDS` later as many as a group holds), computed
    `LIVE_GROUP` steps' worth at a time (merged as they finish: memory stays bounded) and
    shown once all are done, or `LIVE_UPDATE_SECONDS` after the last results shown: results
    follow the frames, and where making them takes longer than the frames take to come,
    the steps grow instead of falling behind."""
    if dataset.ready_partitions(0) is None:
        for group in _step_groups(counts, per_step):
            yield group, True
        return
    first, n = 0, len(counts)
    shown = time.monotonic()
    while first < n:
        # (the first step takes what is there: the first results as soon as can be)
        want = min(LIVE_GROUP * per_step, n - first)
        patience = LIVE_GATHER_SECONDS if first else 0.0
        ready = dataset.ready_partitions(first, want, patience) or 1
        stop = min(first + max(1, ready), n)
        for start in range(first, stop, LIVE_GROUP * per_step):
            end = min(stop, start + LIVE_GROUP * per_step)
            show = end == stop or time.monotonic() - shown >= LIVE_UPDATE_SECONDS
            yield list(range(start, end)), show
            if show:
                shown = time.monotonic()
        first = stop


def _step_groups(counts, per_step: int) -> list[list[int]]:
    """The partitions of each step: `per_step` of those with selected frames (`counts`),
    with the partitions without any before them (the last step: after them too)."""
    groups: list[list[int]] = []
    pending: list[int] = []
    held = 0
    for i, count in enumerate(counts):
        pending.append(i)
        held += count > 0
        if held == per_step:
            groups.append(pending)
            pending, held = [], 0
    if pending:
        if held == 0 and groups:
            groups[-1].extend(pending)
        else:
            groups.append(pending)
    return groups


def _maker(plan: RunPlan, cells: np.ndarray, done: np.ndarray, initial, folded=None):
    """``make()`` of one step of `iter_steps` (what is done at that step)."""
    return lambda: _partial_datasets(plan, cells, done, initial, folded)


def initial_datasets(
    dataset: DataSet, udfs: list[UDFBase], roi=None, corrections=None, backends=None
) -> list:
    """Lazy Datasets of `udfs` as before any partition is processed: nav values as after
    ``preprocess`` on the whole dataset, all invalid (a "dry run": shapes and dtypes)."""
    plan = plan_run(dataset, list(udfs), roi, corrections, backends)
    n = len(plan.partitions)
    cells, done = np.empty(n, dtype=object), np.zeros(n, bool)
    return _partial_datasets(plan, cells, done, _initial_states(plan, "initial"))


def _shown(plan: RunPlan, u: int, state: dict, starts, done, initial) -> dict:
    """UDF `u`'s running merge with its nav values where partitions are not done fill
    values (or, with `initial`, as after ``preprocess``, which they are)."""
    out = {}
    for name, spec in plan.stored(u).items():
        value = state[name]
        if spec.kind == "nav" and initial is None:
            for i in np.flatnonzero(~done):
                value[starts[i] : starts[i + 1]] = filled((1,), spec.dtype)[0]
        out[name] = value
    return out


def _initial_states(plan: RunPlan, unprocessed: str) -> list | None:
    """Each UDF's buffers after ``preprocess`` on the whole dataset, made once per run, for
    ``unprocessed="initial"``; None for fill values."""
    if unprocessed != "initial":
        return None
    return [initial_state(u, plan.context, plan.stored(i)) for i, u in enumerate(plan.udfs)]


def _partial_datasets(
    plan: RunPlan, cells: np.ndarray, done: np.ndarray, initial=None, folded=None
):
    """Datasets for the partitions done so far (others invalid and not merged); nav
    positions not done hold `initial`'s values (see `_initial_states`) or fill values.
    `folded`: the UDFs merged as partitions finished (`RunningMerges`), their states."""
    starts = np.concatenate([[0], np.cumsum(plan.counts)]).astype(int)
    if folded is not None:
        folded = {u: _shown(plan, u, state, starts, done, initial) for u, state in folded.items()}
    partials = []
    for i in range(len(cells)):
        if done[i]:
            partials.append(cells[i])
            continue
        # not processed yet: fill values (or the initial values) at nav positions, with
        # False valid masks; other buffers are not merged
        n = plan.counts[i]
        parts: list[dict | None] = []
        for u in range(len(plan.udfs)):
            if folded is not None and u in folded:
                parts.append(None)  # (merged already: not read)
                continue
            part = {}
            for k, s in plan.stored(u).items():
                if s.kind != "nav":
                    part[k] = s.allocate(n, plan.sig_shape, k)
                elif initial is not None:  # shared by every step: copied
                    part[k] = initial[u][k][starts[i] : starts[i + 1]].copy()
                else:
                    part[k] = filled(s.shape(n, plan.sig_shape), s.dtype)
            parts.append(part)
        partials.append(parts)
    return to_datasets(PartitionGraph.in_memory(plan, partials, done, folded))
