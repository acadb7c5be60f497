"""The example UDFs of LiberTEM's UDF documentation, run on ltdask and checked with numpy.

Every example runs on in-memory and raw-file datasets of several shapes (2-D, 1-D and 3-D
nav, a single frame, a 1-D signal), in several partitions, without a ROI and with a random,
an all-False and an all-True ROI. Each result variable and its ``NAME_valid`` coordinate is
compared with the same computation done with numpy on the data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import udf_examples as ex
from helpers.udf_helpers import (
    ROI_KINDS,
    check_variable,
    fill_nav,
    make_roi,
    nav_dims,
    open_dataset,
    partitions,
    random_data,
    roi_mask,
    selected,
    sig_dims,
)

import ltdask

# name: (shape, number of signal dims)
SHAPES = {
    "nav5x7-sig3x4": ((5, 7, 3, 4), 2),
    "nav11-sig4x3": ((11, 4, 3), 2),
    "nav2x3x4-sig3x5": ((2, 3, 4, 3, 5), 2),
    "one-frame": ((1, 1, 4, 5), 2),
    "nav6x5-sig9": ((6, 5, 9), 1),
}

KINDS = ["memory", "raw"]


def _runs():
    """Every dataset kind and ROI on the main shape; two combinations on the others."""
    runs = []
    for shape in SHAPES:
        if shape == "nav5x7-sig3x4":
            combos = [(k, r) for k in KINDS for r in ROI_KINDS]
        else:
            combos = [("memory", "none"), ("raw", "random")]
        runs += [pytest.param(shape, k, r, id=f"{shape}-{k}-roi_{r}") for k, r in combos]
    return runs


RUNS = _runs()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """``get(shape_name)`` → (data, sig_dims, {kind: dataset}), made once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            shape, n_sig = SHAPES[name]
            data = random_data(shape, "float32", seed=sum(shape))
            tmp = tmp_path_factory.mktemp("examples")
            # about 3 frames per partition
            with partitions(3 * 4 * math.prod(shape[-n_sig:])):
                opened = {kind: open_dataset(kind, data, tmp, sig_dims=n_sig) for kind in KINDS}
            cache[name] = (data, n_sig, opened)
        return cache[name]

    return get


@pytest.fixture
def case(datasets, shape):
    return datasets(shape)


def _split(data, n_sig):
    nav_ndim = data.ndim - n_sig
    return nav_ndim, data.shape[:nav_ndim], data.shape[nav_ndim:]


def _frame_sums(data, n_sig, dtype=np.float64):
    return data.astype(dtype).sum(axis=tuple(range(data.ndim - n_sig, data.ndim)))


@pytest.mark.parametrize(("shape", "kind", "roi_kind"), RUNS)
class TestDocExamples:
    def _run(self, case, kind, roi_kind, udf, names):
        data, n_sig, datasets = case
        ds = datasets[kind]
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        assert len(ds.get_partitions()) > 1 or math.prod(nav_shape) == 1
        roi = make_roi(roi_kind, nav_shape)
        res = udf.compute(ds, roi=roi)
        # one variable per non-private buffer, each with its valid mask
        assert set(res.data_vars) == set(names)
        assert set(res.coords) == {f"{n}_valid" for n in names}
        assert res.attrs["udf"] == type(udf).__name__
        assert res.attrs["ltdask_version"] == ltdask.__version__
        return res, roi

    @pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
    def test_average_result_only(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, sig_shape = _split(data, n_sig)
        res, roi = self._run(
            case, kind, roi_kind, ex.AverageUDF(), ("sum", "num_frames", "average")
        )
        sel = selected(data, roi, nav_ndim)
        total = sel.sum(axis=0, dtype=np.float32)
        sdims = sig_dims(n_sig)
        check_variable(res, "sum", total, True, sdims, dtype=np.float32)
        check_variable(res, "num_frames", [len(sel)], True, ("num_frames_0",), dtype=np.uint64)
        with np.errstate(invalid="ignore"):
            average = total / np.uint64(len(sel))
        check_variable(res, "average", average, True, sdims)

    def test_pixelsum_meta_slice(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.PixelsumUDF(), ("pixelsum_nav_raw",))
        sums = _frame_sums(selected(data, roi, nav_ndim), n_sig - 0, np.float32)
        check_variable(
            res,
            "pixelsum_nav_raw",
            sums.reshape(-1) if sums.ndim else sums,
            True,
            ("pixelsum_nav_raw_0",),
            dtype=np.float32,
        )

    def test_coords(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.CoordUDF(), ("coords",))
        mask = roi_mask(roi, nav_shape)
        coords = np.stack(np.indices(nav_shape), axis=-1)
        expected = fill_nav(coords, mask, np.int64)
        dims = nav_dims(nav_ndim) + ("coords_0",)
        check_variable(res, "coords", expected, mask[..., np.newaxis], dims, dtype=int)
        # the documentation's own check: raw data are the coordinates of the ROI positions
        np.testing.assert_array_equal(res["coords"].values[mask], np.argwhere(mask))

    def test_custom_valid_mask(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.CustomValidMask(), ("custom_2d",))
        sums = _frame_sums(data, n_sig, np.float32)
        if roi is None:
            expected = sums
        else:
            expected = sums[roi]
        dims = tuple(f"custom_2d_{i}" for i in range(expected.ndim))
        check_variable(res, "custom_2d", expected, np.ones(expected.shape, bool), dims)

    def test_tiled_with_sig_buffer(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.TileSumUDF(), ("sig_sum", "nav_sum"))
        mask = roi_mask(roi, nav_shape)
        sel = selected(data, roi, nav_ndim).astype(np.float64)
        check_variable(res, "sig_sum", sel.sum(axis=0), True, sig_dims(n_sig), dtype=np.float64)
        expected = fill_nav(_frame_sums(data, n_sig), mask, np.float64)
        check_variable(res, "nav_sum", expected, mask, nav_dims(nav_ndim), dtype=np.float64)

    def test_process_partition(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(
            case, kind, roi_kind, ex.PartitionUDF(), ("centered_max", "sig_max", "frames")
        )
        mask = roi_mask(roi, nav_shape)
        flat = data.reshape((*nav_shape, -1)).astype(np.float64)
        centered = (flat - flat.mean(axis=-1, keepdims=True)).max(axis=-1)
        check_variable(
            res, "centered_max", fill_nav(centered, mask, np.float64), mask, nav_dims(nav_ndim)
        )
        sel = selected(data, roi, nav_ndim).astype(np.float64)
        sig_max = sel.max(axis=0) if len(sel) else np.full(sel.shape[1:], -np.inf)
        check_variable(res, "sig_max", sig_max, True, sig_dims(n_sig))
        check_variable(res, "frames", [len(sel)], True, ("frames_0",), dtype=np.int64)

    def test_task_data(self, case, kind, roi_kind):
        data, n_sig, datasets = case
        nav_ndim, nav_shape, sig_shape = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.TaskDataUDF(factor=2.5), ("dots", "n_coords"))
        mask = roi_mask(roi, nav_shape)
        flat = data.reshape((-1, math.prod(sig_shape))).astype(np.float64)
        masks = np.stack([np.ones(flat.shape[1]), np.arange(flat.shape[1])]) * 2.5
        dots = (flat @ masks.T).reshape((*nav_shape, 2))
        dims = nav_dims(nav_ndim)
        check_variable(
            res, "dots", fill_nav(dots, mask, np.float64), mask[..., None], dims + ("dots_0",)
        )
        # get_task_data sees meta.coordinates of the partition's ROI frames
        count = np.zeros(math.prod(nav_shape), dtype=np.int64)
        flat_mask = mask.reshape(-1)
        for p in datasets[kind].get_partitions():
            count[p.start : p.stop] = flat_mask[p.start : p.stop].sum()
        expected = fill_nav(count.reshape(nav_shape), mask, np.int64)
        check_variable(res, "n_coords", expected, mask, dims, dtype=np.int64)

    def test_custom_merge_all(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(case, kind, roi_kind, ex.MergeAllUDF(), ("intensity", "per_frame"))
        mask = roi_mask(roi, nav_shape)
        sel = selected(data, roi, nav_ndim).astype(np.float64)
        check_variable(res, "intensity", sel.sum(axis=0), True, sig_dims(n_sig))
        per_frame = data.max(axis=tuple(range(nav_ndim, data.ndim))).astype(np.float64)
        check_variable(
            res, "per_frame", fill_nav(per_frame, mask, np.float64), mask, nav_dims(nav_ndim)
        )

    def test_merge_only_tree(self, case, kind, roi_kind):
        data, n_sig, _ = case
        nav_ndim, nav_shape, _ = _split(data, n_sig)
        res, roi = self._run(
            case, kind, roi_kind, ex.MergeOnlyUDF(), ("maximum", "count", "nav", "order")
        )
        mask = roi_mask(roi, nav_shape)
        sel = selected(data, roi, nav_ndim).astype(np.float64)
        maximum = sel.max(axis=0) if len(sel) else np.full(sel.shape[1:], -np.inf)
        check_variable(res, "maximum", maximum, True, sig_dims(n_sig))
        check_variable(res, "count", [len(sel)], True, ("count_0",))
        dims = nav_dims(nav_ndim)
        sums = fill_nav(_frame_sums(data, n_sig), mask, np.float64)
        check_variable(res, "nav", sums, mask, dims)
        # meta.slice.origin in process_frame: the frame's index among the ROI positions
        order = (np.cumsum(mask.reshape(-1)) - 1).reshape(nav_shape)
        check_variable(res, "order", fill_nav(order, mask, np.int64), mask, dims)


@pytest.mark.parametrize(("shape", "kind", "roi_kind"), RUNS)
@pytest.mark.parametrize("method", ["frame", "tile"])
def test_aux_data(case, kind, roi_kind, method):
    """Aux data per frame and per tile: nav aux with and without extra_shape, sig aux."""
    data, n_sig, datasets = case
    nav_ndim, nav_shape, sig_shape = _split(data, n_sig)
    rng = np.random.default_rng(5)
    aux = rng.integers(-3, 4, size=(*nav_shape, 2)).astype(np.float64)
    scalar = rng.integers(0, 9, size=nav_shape).astype(np.float64)
    sig_mask = rng.integers(0, 2, size=sig_shape).astype(np.float32)
    roi = make_roi(roi_kind, nav_shape)
    mask = roi_mask(roi, nav_shape)
    ds = datasets[kind]
    if method == "frame":
        udf = ex.AuxFrameUDF(
            aux=ltdask.UDF.aux_data(aux, kind="nav", extra_shape=(2,), dtype=np.float64),
            scalar=ltdask.UDF.aux_data(scalar, kind="nav", dtype=np.float64),
        )
    else:
        udf = ex.AuxTileUDF(
            aux=ltdask.UDF.aux_data(aux, kind="nav", extra_shape=(2,), dtype=np.float64),
            mask=ltdask.UDF.aux_data(sig_mask, kind="sig", dtype=np.float32),
        )
    res = udf.compute(ds, roi=roi)
    dims = nav_dims(nav_ndim)
    sums = _frame_sums(data, n_sig)
    weighted = sums[..., np.newaxis] * aux
    check_variable(
        res,
        "weighted",
        fill_nav(weighted, mask, np.float64),
        mask[..., None],
        dims + ("weighted_0",),
    )
    check_variable(
        res, "aux_copy", fill_nav(aux, mask, np.float64), mask[..., None], dims + ("aux_copy_0",)
    )
    if method == "frame":
        check_variable(res, "scalar_copy", fill_nav(scalar, mask, np.float64), mask, dims)
    else:
        masked = _frame_sums(data * sig_mask, n_sig)
        check_variable(res, "masked", fill_nav(masked, mask, np.float64), mask, dims)
