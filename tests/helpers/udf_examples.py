"""UDFs used by the UDF engine tests, importable by worker processes.

The first group are the examples of LiberTEM's "UDF: advanced topics" and basic UDF
documentation, written against ``ltdask.UDF`` (only the imports differ, and where the
documentation's code is wrong for a ROI or a 2-D nav, the fix is noted). The others probe
single behaviours of the engine. Nothing here knows about the data: references are computed
with numpy in :mod:`udf_helpers`.
"""

from __future__ import annotations

import numpy as np

from ltdask import UDF

# -- LiberTEM documentation examples ----------------------------------------------------------


class SumSigPerFrameUDF(UDF):
    """The basic doc example: one value per scan position."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype="float32")}

    def process_frame(self, frame):
        self.results.intensity[:] = np.sum(frame)


class AverageUDF(UDF):
    """Like SumUDF, but also computes the average ("Post-processing after merging")."""

    def get_result_buffers(self):
        return {
            "sum": self.buffer(kind="sig", dtype=np.float32),
            "num_frames": self.buffer(kind="single", dtype=np.uint64),
            "average": self.buffer(kind="sig", dtype=np.float32, use="result_only"),
        }

    def process_frame(self, frame):
        self.results.sum[:] += frame
        self.results.num_frames[:] += 1

    def merge(self, dest, src):
        dest.sum[:] += src.sum
        dest.num_frames[:] += src.num_frames

    def get_results(self):
        return {
            # NOTE: 'sum' omitted here, will be returned unchanged
            "average": self.results.sum / self.results.num_frames,
        }


class PixelsumUDF(UDF):
    """Sum over sig into a ``single`` buffer indexed with ``meta.slice`` ("ROI and current
    slice")."""

    def get_result_buffers(self):
        if self.meta.roi is not None:
            navsize = np.count_nonzero(self.meta.roi)
        else:
            navsize = np.prod(self.meta.dataset_shape.nav)
        return {
            "pixelsum_nav_raw": self.buffer(
                kind="single",
                dtype=self.meta.dataset_dtype,
                extra_shape=(navsize,),
            )
        }

    def merge(self, dest, src):
        dest.pixelsum_nav_raw[:] += src.pixelsum_nav_raw

    def process_frame(self, frame):
        np_slice = self.meta.slice.get(nav_only=True)
        self.results.pixelsum_nav_raw[np_slice] = np.sum(frame)


class CoordUDF(UDF):
    """Copies ``meta.coordinates`` into a nav buffer ("Coordinates")."""

    def get_result_buffers(self):
        nav_dims = len(self.meta.dataset_shape.nav)
        return {
            "coords": self.buffer(
                kind="nav",
                dtype=int,
                extra_shape=(nav_dims,),
            )
        }

    def process_tile(self, tile):
        self.results.coords[:] = self.meta.coordinates


class CustomValidMask(UDF):
    """A ``single`` buffer emulating a nav buffer, with the valid mask of a nav buffer
    ("Valid data masking").

    The documentation indexes with ``self.meta.coordinates`` (shape ``(1, nav_dims)``), which
    picks rows rather than one element; here the frame's position is the coordinate tuple
    without a ROI and the ROI-compressed slice with one, as the declared shape asks for.
    """

    def get_result_buffers(self):
        nav_shape = tuple(self.meta.dataset_shape.nav)
        if self.meta.roi is not None:
            nav_shape = (np.count_nonzero(self.meta.roi),)
        return {
            "custom_2d": self.buffer(kind="single", dtype=np.float32, extra_shape=nav_shape),
        }

    def process_frame(self, frame):
        if self.meta.roi is None:
            index = tuple(self.meta.coordinates[0])
        else:
            index = self.meta.slice.get(nav_only=True)
        self.results.custom_2d[index] = np.sum(frame)

    def get_results(self):
        valid_nav_mask = self.meta.get_valid_nav_mask()
        return {
            "custom_2d": self.with_mask(
                self.results.custom_2d,
                mask=valid_nav_mask.reshape(self.results.custom_2d.shape),
            ),
        }

    def merge(self, dest, src):
        dest.custom_2d += src.custom_2d


class TileSumUDF(UDF):
    """Tiled processing: a sig sum and a nav sum from the same tiles. The sig view is the
    tile's signal slice, the nav view the tile's frames."""

    def get_result_buffers(self):
        return {
            "sig_sum": self.buffer(kind="sig", dtype=np.float64),
            "nav_sum": self.buffer(kind="nav", dtype=np.float64),
        }

    def process_tile(self, tile):
        assert self.results.sig_sum.shape == tile.shape[1:]
        assert self.results.nav_sum.shape == (tile.shape[0],)
        self.results.sig_sum[:] += tile.sum(axis=0)
        self.results.nav_sum[:] += tile.reshape((tile.shape[0], -1)).sum(axis=1)

    def merge(self, dest, src):
        dest.sig_sum[:] += src.sig_sum
        dest.nav_sum[:] = src.nav_sum


class PartitionUDF(UDF):
    """Partition processing: several passes over the whole partition."""

    def get_result_buffers(self):
        return {
            "centered_max": self.buffer(kind="nav", dtype=np.float64),
            "sig_max": self.buffer(kind="sig", dtype=np.float64),
            "frames": self.buffer(kind="single", dtype=np.int64),
        }

    def process_partition(self, partition):
        assert partition.shape[0] == len(self.meta.coordinates)
        flat = partition.reshape((partition.shape[0], -1)).astype(np.float64)
        mean = flat.mean(axis=1, keepdims=True) if flat.shape[0] else flat
        self.results.centered_max[:] = (flat - mean).max(axis=1)
        self.results.sig_max[:] = np.maximum(self.results.sig_max, partition.max(axis=0))
        self.results.frames[:] += partition.shape[0]

    def preprocess(self):
        self.results.sig_max[:] = -np.inf

    def merge(self, dest, src):
        dest.centered_max[:] = src.centered_max
        dest.sig_max[:] = np.maximum(dest.sig_max, src.sig_max)
        dest.frames[:] += src.frames


class AuxFrameUDF(UDF):
    """Aux data per frame (``UDF.aux_data(kind="nav", extra_shape=(2,))``): the frame sum
    weighted with the frame's aux vector, and the aux copied through."""

    def get_result_buffers(self):
        return {
            "weighted": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
            "aux_copy": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
            "scalar_copy": self.buffer(kind="nav", dtype=np.float64),
        }

    def process_frame(self, frame):
        assert self.params.aux.shape == (2,)
        assert self.params.scalar.shape == (1,)
        self.results.weighted[:] = np.sum(frame) * self.params.aux
        self.results.aux_copy[:] = self.params.aux
        self.results.scalar_copy[:] = self.params.scalar


class AuxTileUDF(UDF):
    """Aux data per tile: nav aux views have the tile's depth; sig aux views the tile's
    signal slice."""

    def get_result_buffers(self):
        return {
            "weighted": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
            "masked": self.buffer(kind="nav", dtype=np.float64),
            "aux_copy": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
        }

    def preprocess(self):
        # partition views in preprocess and postprocess: the whole (ROI-selected) partition
        assert self.params.aux.shape == (self.meta.partition_shape[0], 2)

    def process_tile(self, tile):
        depth = tile.shape[0]
        assert self.params.aux.shape == (depth, 2)
        assert self.params.mask.shape == tile.shape[1:]
        sums = tile.reshape((depth, -1)).sum(axis=1)
        self.results.weighted[:] += sums[:, np.newaxis] * self.params.aux
        self.results.masked[:] += (tile * self.params.mask).reshape((depth, -1)).sum(axis=1)

    def postprocess(self):
        self.results.aux_copy[:] = self.params.aux


class TaskDataUDF(UDF):
    """Task data (``get_task_data`` → ``self.task_data``): a mask stack built per task."""

    def get_task_data(self):
        sig = tuple(self.meta.dataset_shape.sig)
        masks = np.stack([np.ones(sig), np.arange(np.prod(sig)).reshape(sig)])
        return {"masks": masks * self.params.factor, "n_coords": len(self.meta.coordinates)}

    def get_result_buffers(self):
        return {
            "dots": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
            "n_coords": self.buffer(kind="nav", dtype=np.int64),
        }

    def process_tile(self, tile):
        masks = self.task_data.masks[(slice(None), *self.meta.sig_slice.get())]
        flat_tile = tile.reshape((tile.shape[0], -1))
        self.results.dots[:] += flat_tile @ masks.reshape((masks.shape[0], -1)).T
        self.results.n_coords[:] = self.task_data.n_coords


class MergeAllUDF(UDF):
    """A custom one-step ``merge_all`` (the documentation's example plus a nav buffer)."""

    def get_result_buffers(self):
        return {
            "intensity": self.buffer(kind="sig", dtype=np.float64),
            "per_frame": self.buffer(kind="nav", dtype=np.float64),
        }

    def process_frame(self, frame):
        self.results.intensity[:] += frame
        self.results.per_frame[:] = frame.max()

    def merge(self, dest, src):
        dest.intensity[:] += src.intensity
        dest.per_frame[:] = src.per_frame

    def merge_all(self, ordered_results):
        intensity = np.stack([b.intensity for b in ordered_results.values()]).sum(axis=0)
        per_frame = np.concatenate([b.per_frame for b in ordered_results.values()])
        return {"intensity": intensity, "per_frame": per_frame}


class MergeOnlyUDF(UDF):
    """Only ``merge`` (tree reduction): maximum over frames, frame count, and the sum of
    each frame into a nav buffer."""

    def get_result_buffers(self):
        return {
            "maximum": self.buffer(kind="sig", dtype=np.float64),
            "count": self.buffer(kind="single", dtype=np.int64),
            "nav": self.buffer(kind="nav", dtype=np.float64),
            "order": self.buffer(kind="nav", dtype=np.int64),
        }

    def preprocess(self):
        self.results.maximum[:] = -np.inf

    def process_frame(self, frame):
        self.results.maximum[:] = np.maximum(self.results.maximum, frame)
        self.results.count[:] += 1
        self.results.nav[:] = frame.sum()
        self.results.order[:] = self.meta.slice.origin[0]

    def merge(self, dest, src):
        dest.maximum[:] = np.maximum(dest.maximum, src.maximum)
        dest.count[:] += src.count
        dest.nav[:] = src.nav
        dest.order[:] = src.order


DOC_UDFS = {
    "average": AverageUDF,
    "pixelsum": PixelsumUDF,
    "coords": CoordUDF,
    "custom-valid": CustomValidMask,
    "tile-sig": TileSumUDF,
    "partition": PartitionUDF,
    "task-data": TaskDataUDF,
    "merge-all": MergeAllUDF,
    "merge-only": MergeOnlyUDF,
}

# -- single behaviours ------------------------------------------------------------------------


class SumUDF(UDF):
    """Sum over the nav axis with the in-place ``self.results.sum += frame`` (no ``[:]``)."""

    def get_result_buffers(self):
        return {"sum": self.buffer(kind="sig", dtype=np.float64)}

    def process_frame(self, frame):
        self.results.sum += frame

    def merge(self, dest, src):
        dest.sum += src.sum


class SumSigAttrMergeUDF(UDF):
    """Per-frame sums merged with attribute assignment ``dest.x = src.x`` (no ``[:]``)."""

    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="nav", dtype=np.float64)}

    def process_tile(self, tile):
        self.results.intensity[:] += tile.reshape((tile.shape[0], -1)).sum(axis=1)

    def merge(self, dest, src):
        dest.intensity = src.intensity


class ShapesUDF(UDF):
    """Buffers of every kind with a configurable ``extra_shape``."""

    def get_result_buffers(self):
        extra = tuple(self.params.extra)
        return {
            "nav": self.buffer(kind="nav", extra_shape=extra, dtype=np.float32),
            "sig": self.buffer(kind="sig", extra_shape=extra, dtype=np.float32),
            "single": self.buffer(kind="single", extra_shape=extra, dtype=np.float32),
        }

    def process_frame(self, frame):
        self.results.nav[:] = 1
        self.results.sig[:] += 1
        self.results.single[:] += 1

    def merge(self, dest, src):
        dest.nav[:] = src.nav
        dest.sig[:] += src.sig
        dest.single[:] += src.single


class CounterUDF(UDF):
    """A single uint32 counter and a single vector accumulating ``frame.sum(axis=1)``."""

    def get_result_buffers(self):
        rows = self.meta.dataset_shape.sig[0]
        return {
            "count": self.buffer(kind="single", dtype=np.uint32),
            "rows": self.buffer(kind="single", extra_shape=(rows,), dtype=np.float64),
        }

    def process_frame(self, frame):
        self.results.count[:] += 1
        self.results.rows[:] += frame.sum(axis=1)

    def merge(self, dest, src):
        dest.count[:] += src.count
        dest.rows[:] += src.rows


class DtypeFillUDF(UDF):
    """One nav buffer of the dtype given as a parameter, set to ``frame.sum() > 0``-ish."""

    def get_result_buffers(self):
        return {"value": self.buffer(kind="nav", dtype=self.params.dtype)}

    def process_frame(self, frame):
        dtype = np.dtype(self.params.dtype)
        if dtype.kind == "O":
            self.results.value[0] = ("frame", int(self.meta.slice.origin[0]))
        elif dtype.kind in "SU":
            self.results.value[:] = "x"
        else:
            self.results.value[:] = 1


class InputDtypeUDF(UDF):
    """Records the dtype it sees (tile dtype and ``meta.input_dtype``) and the dataset's."""

    def get_preferred_input_dtype(self):
        pref = self.params.get("preferred")
        if pref == "native":
            return self.USE_NATIVE_DTYPE
        return super().get_preferred_input_dtype() if pref is None else pref

    def get_result_buffers(self):
        return {
            "seen": self.buffer(kind="nav", dtype="U16"),
            "meta_input": self.buffer(kind="nav", dtype="U16"),
            "meta_dataset": self.buffer(kind="nav", dtype="U16"),
        }

    def process_tile(self, tile):
        self.results.seen[:] = str(tile.dtype)
        self.results.meta_input[:] = str(self.meta.input_dtype)
        self.results.meta_dataset[:] = str(self.meta.dataset_dtype)


class AllMethodsUDF(UDF):
    """Implements all three methods; ``params.method`` (if given) picks one."""

    def get_result_buffers(self):
        return {"method": self.buffer(kind="nav", dtype="U16")}

    def get_method(self):
        choice = self.params.get("method")
        if choice is None:
            return super().get_method()
        if choice in ("tile", "frame", "partition"):
            return self.UDF_METHOD(choice)
        return choice

    def process_tile(self, tile):
        self.results.method[:] = "tile"

    def process_frame(self, frame):
        self.results.method[:] = "frame"

    def process_partition(self, partition):
        self.results.method[:] = "partition"


class FrameOnlyUDF(UDF):
    """Only ``process_frame``; ``params.method`` forces another (missing) method."""

    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def get_method(self):
        return self.UDF_METHOD(self.params.method)

    def process_frame(self, frame):
        self.results.x[:] = 1


class NoMethodUDF(UDF):
    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}


class TileRecorderUDF(UDF):
    """Records, per frame, the depth, ``meta.slice`` origin, its partition's first
    position, the tile's number of signal slices and the sig slice checks of 4.2 #19."""

    def get_result_buffers(self):
        return {
            "depth": self.buffer(kind="nav", dtype=np.int64),
            "tile_origin": self.buffer(kind="nav", dtype=np.int64),
            "partition_first": self.buffer(kind="nav", dtype=np.int64),
            "partition_len": self.buffer(kind="nav", dtype=np.int64),
            "visits": self.buffer(kind="nav", dtype=np.int64),
            "sig_visits": self.buffer(kind="sig", dtype=np.int64),
            "sig_sum": self.buffer(kind="sig", dtype=np.float64),
            "slices": self.buffer(kind="single", dtype=np.int64),
        }

    def preprocess(self):
        if self.meta.slice is None:
            return  # on the main node before merging, as in LiberTEM
        self._first = self.meta.slice.origin[0]
        self._len = self.meta.slice.shape[0]

    def process_tile(self, tile):
        meta = self.meta
        assert tile.shape[1:] == tuple(meta.sig_slice.shape)
        assert meta.slice.sig_part() == meta.sig_slice
        assert meta.tiling_scheme[meta.tiling_scheme_idx] == meta.sig_slice
        assert self.results.depth.shape == (tile.shape[0],)
        assert self.results.sig_visits.shape == tile.shape[1:]
        assert meta.slice.shape[0] == tile.shape[0]
        self.results.depth[:] = tile.shape[0]
        self.results.tile_origin[:] = meta.slice.origin[0]
        self.results.partition_first[:] = self._first
        self.results.partition_len[:] = self._len
        self.results.visits[:] += 1 if meta.tiling_scheme_idx == 0 else 0
        self.results.sig_visits[:] += tile.shape[0]
        self.results.sig_sum[:] += tile.sum(axis=0)
        self.results.slices[:] = len(meta.tiling_scheme)

    def merge(self, dest, src):
        dest.depth[:] = src.depth
        dest.tile_origin[:] = src.tile_origin
        dest.partition_first[:] = src.partition_first
        dest.partition_len[:] = src.partition_len
        dest.visits[:] = src.visits
        dest.sig_visits[:] += src.sig_visits
        dest.sig_sum[:] += src.sig_sum
        dest.slices[:] = np.maximum(dest.slices, src.slices)


class FixedTileUDF(TileRecorderUDF):
    """TileRecorderUDF asking for a fixed tile depth and size."""

    def get_tiling_preferences(self):
        return {"depth": self.params.depth, "total_size": self.params.total_size}


class ResultsRuleUDF(UDF):
    """The buffer declaration rules: ``params.returns`` names what ``get_results`` returns."""

    def get_result_buffers(self):
        return {
            "sum": self.buffer(kind="nav", dtype=np.float64),
            "half": self.buffer(kind="nav", dtype=np.float64, use="result_only"),
            "hidden": self.buffer(kind="nav", dtype=np.float64, use="private"),
            "passed": self.buffer(kind="sig", dtype=np.float64),
        }

    def process_frame(self, frame):
        assert self.results.get("half") is None
        self.results.sum[:] = frame.sum()
        self.results.hidden[:] = 7
        self.results.passed[:] += frame

    def merge(self, dest, src):
        assert "half" not in dest and "half" not in src
        dest.sum[:] = src.sum
        dest.hidden[:] = src.hidden
        dest.passed[:] += src.passed

    def get_results(self):
        out = {}
        for name in self.params.returns:
            if name == "half":
                out["half"] = self.results.sum / 2
            elif name == "half-full":
                # a full nav-shaped array instead of the ROI-compressed one
                out["half"] = np.full(self.meta.dataset_shape.nav, 0.5)
            elif name == "hidden":
                out["hidden"] = self.results.hidden
            elif name == "undeclared":
                out["undeclared"] = self.results.sum
            elif name == "sum":
                out["sum"] = self.results.sum
        return out


class PrivateOnlyUDF(UDF):
    """A private buffer and no ``get_results``: the private buffer is dropped."""

    def get_result_buffers(self):
        return {
            "visible": self.buffer(kind="nav", dtype=np.float64),
            "hidden": self.buffer(kind="nav", dtype=np.float64, use="private"),
        }

    def process_frame(self, frame):
        self.results.visible[:] = frame.sum()
        self.results.hidden[:] = 1


class NoGetResultsUDF(UDF):
    """A ``result_only`` buffer but no ``get_results``."""

    def get_result_buffers(self):
        return {
            "sum": self.buffer(kind="nav"),
            "extra": self.buffer(kind="nav", use="result_only"),
        }

    def process_frame(self, frame):
        self.results.sum[:] = frame.sum()


class BadMergeAllUDF(UDF):
    def get_result_buffers(self):
        return {"intensity": self.buffer(kind="sig", dtype=np.float64)}

    def process_frame(self, frame):
        self.results.intensity[:] += frame

    def merge_all(self, ordered_results):
        total = np.stack([b.intensity for b in ordered_results.values()]).sum(axis=0)
        return {"intensity": total, "surprise": total}


class NoMergeUDF(UDF):
    """A nav and a sig buffer and no ``merge``: cannot be merged."""

    def get_result_buffers(self):
        return {
            "nav": self.buffer(kind="nav", dtype=np.float64),
            "sig": self.buffer(kind="sig", dtype=np.float64),
        }

    def process_frame(self, frame):
        self.results.nav[:] = frame.sum()
        self.results.sig[:] += frame


class NavOnlyNoMergeUDF(UDF):
    """Only nav buffers and no ``merge``: the default merge applies."""

    def get_result_buffers(self):
        return {
            "total": self.buffer(kind="nav", dtype=np.float64),
            "rows": self.buffer(kind="nav", extra_shape=(3,), dtype=np.int32),
        }

    def process_frame(self, frame):
        self.results.total[:] = frame.sum()
        self.results.rows[:] = np.arange(3) + int(self.meta.coordinates[0, -1])


class ParamsUDF(UDF):
    """Reads parameters with attribute access and ``get``."""

    def get_result_buffers(self):
        return {"vals": self.buffer(kind="single", extra_shape=(4,), dtype=np.float64)}

    def process_frame(self, frame):
        p = self.params
        assert isinstance(p.int_param, int)
        missing = p.get("is_missing")
        self.results.vals[:] = [
            p.int_param,
            p.get("is_222"),
            p.get("is_missing", default=333),
            -1 if missing is None else missing,
        ]

    def merge(self, dest, src):
        dest.vals[:] = src.vals


class ValidMaskProbeUDF(UDF):
    """Records ``meta.get_valid_nav_mask()`` where the engine calls user code."""

    def get_result_buffers(self):
        return {
            "seen": self.buffer(kind="nav", dtype=np.float64),
            "merge_counts": self.buffer(kind="single", extra_shape=(2,), dtype=np.int64),
        }

    def process_frame(self, frame):
        assert self.meta.get_valid_nav_mask() is None
        assert self.meta.get_valid_nav_mask(full_nav=True) is None
        self.results.seen[:] = 1

    def merge(self, dest, src):
        mask = self.meta.get_valid_nav_mask()
        assert mask is not None and mask.ndim == 1 and mask.dtype == bool
        assert not mask.all()
        dest.seen[:] = src.seen
        dest.merge_counts[:] += [1, 0]

    def get_results(self):
        mask = self.meta.get_valid_nav_mask()
        full = self.meta.get_valid_nav_mask(full_nav=True)
        return {
            "merge_counts": np.array([int(mask.size), int(full.size)], dtype=np.int64),
        }


class ExplodingUDF(UDF):
    """Fails as soon as it sees a frame."""

    def get_result_buffers(self):
        return {"x": self.buffer(kind="nav")}

    def process_frame(self, frame):
        raise RuntimeError("processed a frame")


class CoordAnyUDF(UDF):
    """Coordinates, frame sums and partition visits with the method ``params.method``."""

    def get_method(self):
        return self.UDF_METHOD(self.params.method)

    def get_result_buffers(self):
        nav_dims = len(self.meta.dataset_shape.nav)
        return {
            "coords": self.buffer(kind="nav", dtype=np.int64, extra_shape=(nav_dims,)),
            "sums": self.buffer(kind="nav", dtype=np.float64),
            "visits": self.buffer(kind="nav", dtype=np.int64),
        }

    def _record(self, data):
        n = data.shape[0]
        coords = self.meta.coordinates
        assert coords.shape == (n, len(self.meta.dataset_shape.nav))
        self.results.coords[:] = coords
        self.results.sums[:] += data.reshape((n, -1)).sum(axis=1)
        self.results.visits[:] += 1 if self.meta.tiling_scheme_idx in (0, None) else 0

    def process_tile(self, tile):
        self._record(tile)

    def process_frame(self, frame):
        coords = self.meta.coordinates
        assert coords.shape == (1, len(self.meta.dataset_shape.nav))
        self.results.coords[:] = coords[0]
        self.results.sums[:] += frame.sum()
        self.results.visits[:] += 1 if self.meta.tiling_scheme_idx in (0, None) else 0

    def process_partition(self, partition):
        assert partition.shape[0] == len(self.meta.coordinates)
        self._record(partition)


class MergeAllOnlyUDF(UDF):
    """Only ``merge_all``, no ``merge``: ltdask always merges in one step."""

    def get_result_buffers(self):
        return {
            "intensity": self.buffer(kind="sig", dtype=np.float64),
            "count": self.buffer(kind="single", dtype=np.int64),
        }

    def process_frame(self, frame):
        self.results.intensity[:] += frame
        self.results.count[:] += 1

    def merge_all(self, ordered_results):
        parts = list(ordered_results.values())
        return {
            "intensity": np.stack([b.intensity for b in parts]).sum(axis=0),
            "count": np.stack([b.count for b in parts]).sum(axis=0),
        }


class MaskUDF(UDF):
    """Results with custom valid masks (``with_mask``); ``params.case`` picks one."""

    def get_result_buffers(self):
        return {
            "sig": self.buffer(kind="sig", dtype=np.float64),
            "nav": self.buffer(kind="nav", extra_shape=(2,), dtype=np.float64),
            "single": self.buffer(kind="single", extra_shape=(4, 3), dtype=np.float64),
        }

    def process_frame(self, frame):
        self.results.sig[:] += frame
        self.results.nav[:] = frame.sum()
        self.results.single[:] += 1

    def merge(self, dest, src):
        dest.sig[:] += src.sig
        dest.nav[:] = src.nav
        dest.single[:] += src.single

    def get_results(self):
        case = self.params.case
        r = self.results
        if case == "scalars":
            return {"sig": self.with_mask(r.sig, True), "single": self.with_mask(r.single, False)}
        if case == "custom":
            mask = np.zeros((4, 3), dtype=bool)
            mask[1:3, ::2] = True
            return {"single": self.with_mask(r.single, mask), "nav": r.nav}
        if case == "rows":
            # broadcasts over the trailing signal dim
            return {"sig": self.with_mask(r.sig, np.array([True, False, True])[:, None])}
        if case == "not-broadcastable":
            return {"single": self.with_mask(r.single, np.ones((3, 4), dtype=bool))}
        if case == "not-bool":
            return {"single": self.with_mask(r.single, np.full((4, 3), 0.5))}
        if case == "not-0-1":
            return {"single": self.with_mask(r.single, np.full((4, 3), 2, dtype=np.uint8))}
        if case == "ints":  # LiberTEM's with_mask(..., mask=1) and mask=0
            return {"sig": self.with_mask(r.sig, 1), "single": self.with_mask(r.single, 0)}
        raise ValueError(case)


class PartitionLogUDF(UDF):
    """Appends one line per partition task it runs in to the file ``params.log``."""

    def get_result_buffers(self):
        return {"seen": self.buffer(kind="nav", dtype=np.int64)}

    def preprocess(self):
        if self.meta.slice is not None:  # not on the main node
            with open(self.params.log, "a") as f:
                f.write(f"{self.meta.slice.origin[0]} {self.meta.slice.shape[0]}\n")

    def process_tile(self, tile):
        self.results.seen[:] += 1


class InitUDF(UDF):
    """Overrides ``__init__`` to condition its parameters (LiberTEM's documented pattern:
    the constructor runs again wherever the UDF is used, with the conditioned kwargs)."""

    def __init__(self, scale, offset=0, **kwargs):
        super().__init__(scale=float(scale), offset=int(offset), **kwargs)

    def get_result_buffers(self):
        return {"scaled": self.buffer(kind="nav", dtype=np.float64)}

    def process_frame(self, frame):
        assert isinstance(self.params.scale, float)
        self.results.scaled[:] = frame.sum() * self.params.scale + self.params.offset


def centred(sums, valid, offset):
    """``sums`` minus their mean over the `valid` positions, plus `offset`; and that mean."""
    mean = sums[valid].mean() if valid.any() else 0.0
    return {"centred": (sums - mean + offset).astype(np.float32), "mean": np.array([mean])}


class CentredSumUDF(UDF):
    """Post-processing on whole arrays with `ltdask.udf.apply_whole`: each frame's sum
    minus the mean over the scan (one numpy task on the nav-shaped sums)."""

    def __init__(self, offset=0.0):
        super().__init__(offset=offset)

    def get_result_buffers(self):
        return {
            "sums": self.buffer(kind="nav", dtype=np.float64),
            "centred": self.buffer(kind="nav", dtype=np.float32, use="result_only"),
            "mean": self.buffer(kind="single", dtype=np.float64, use="result_only"),
        }

    def process_frame(self, frame):
        self.results.sums[:] = frame.sum()

    def get_results(self):
        from ltdask.udf import apply_whole

        nav = tuple(self.meta.dataset_shape.nav)
        valid = self.meta.get_valid_nav_mask(full_nav=True).reshape(nav)
        return apply_whole(
            centred,
            self.results.get_buffer("sums").data,
            valid,
            offset=self.params.offset,
            outputs={"centred": (nav, np.float32), "mean": ((1,), np.float64)},
        )


class RunIdUDF(UDF):
    """Each frame's ``meta.run_id``, and the one on the main node (in ``get_results``)."""

    def get_result_buffers(self):
        return {
            "run_id": self.buffer(kind="nav", dtype="U32"),
            "main_run_id": self.buffer(kind="single", dtype="U32", use="result_only"),
        }

    def process_frame(self, frame):
        self.results.run_id[:] = self.meta.run_id

    def get_results(self):
        return {"main_run_id": np.array([self.meta.run_id or "none"])}
