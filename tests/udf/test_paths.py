"""The run's path (`ltdask.udf.paths`): what UDFs declare (`TilePaths`) picks, once per
run, how tiles reach them; user UDFs that declare nothing get decoded tiles, subclasses
with their own tile code do not inherit a path, and ``meta`` shows none of it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import ltdask
from ltdask.corrections import CorrectionSet
from ltdask.udf import SumUDF, TilePaths
from ltdask.udf import paths as paths_module
from ltdask.udf.graph import Run
from ltdask.udf.paths import DecodedTiles, PathQuery, TileForm, tile_paths


def raw_scan(tmp_path, data):
    path = tmp_path / "scan.raw"
    data.tofile(path)
    nav, sig = data.shape[:2], data.shape[2:]
    return ltdask.open_raw(path, nav_shape=nav, sig_shape=sig, dtype=data.dtype)


def run_path(ds, udfs, corrections=None):
    return Run(ds, udfs, None, corrections, None).plan.context.path


class FrameTotal(ltdask.UDF):
    """A user UDF that declares nothing: the sum of each frame, and the tile dtypes seen."""

    def get_result_buffers(self):
        return {"total": self.buffer(kind="nav", dtype="float64")}

    def process_tile(self, tile):
        SEEN.append(tile.dtype)
        self.results.total[:] += tile.reshape(tile.shape[0], -1).sum(axis=1)


SEEN: list = []


class SquaredSum(SumUDF):
    """A SumUDF subclass with its own tile code: it squares each tile before summing (on
    the file's uint16 integers, the squares would wrap around)."""

    def process_flat_tile(self, frames, p0, p1):
        squared = np.square(frames[:, p0:p1], dtype=frames.dtype)
        super().process_flat_tile(np.ascontiguousarray(squared), 0, p1 - p0)


@pytest.mark.parametrize("with_dark", [False, True], ids=["plain", "dark"])
def test_user_udf_gets_decoded_tiles(tmp_path, with_dark):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 60000, (3, 4, 5, 6)).astype("<u2")
    dark = rng.random((5, 6)).astype(np.float32) * 100
    corrections = CorrectionSet(dark=dark) if with_dark else None
    ds = raw_scan(tmp_path, data)
    path = run_path(ds, [FrameTotal(), SumUDF()], corrections)
    assert path == DecodedTiles(corrects_tiles=with_dark)
    SEEN.clear()
    res = FrameTotal().compute(ds, corrections=corrections)
    assert SEEN and set(SEEN) == {np.dtype(np.float32)}
    frames = data.astype(np.float64) - (dark if with_dark else 0)
    np.testing.assert_allclose(res["total"].values, frames.sum(axis=(2, 3)), rtol=1e-5)


def test_subclass_with_own_tile_code_takes_no_path(tmp_path):
    data = np.full((2, 3, 4, 5), 300, dtype="<u2")
    data[0, 0, 0, 0] = 60000
    ds = raw_scan(tmp_path, data)
    assert tile_paths(SquaredSum()) == TilePaths(merge_all_on_numpy=True)
    dark = CorrectionSet(dark=np.ones((4, 5)))
    assert run_path(ds, [SquaredSum()], dark) == DecodedTiles(corrects_tiles=True)
    assert run_path(ds, [SquaredSum()]) == DecodedTiles()
    res = SquaredSum(dtype="float64").compute(ds)["intensity"].values
    np.testing.assert_array_equal(res, np.square(data.astype(np.float64)).sum(axis=(0, 1)))
    res = SquaredSum(dtype="float64").compute(ds, corrections=dark)["intensity"].values
    want = np.square(data.astype(np.float64) - 1).sum(axis=(0, 1))
    np.testing.assert_allclose(res, want, rtol=1e-6)


def test_subclass_keeps_what_it_does_not_override():
    class Plain(SumUDF):
        pass

    class OwnMerge(SumUDF):
        def merge_all(self, ordered_results):
            return super().merge_all(ordered_results)

    assert tile_paths(Plain()) == SumUDF.TILE_PATHS
    assert tile_paths(OwnMerge()) == dataclasses.replace(
        SumUDF.TILE_PATHS, merge_all_on_numpy=False
    )
    assert tile_paths(SquaredSum()).merge_all_on_numpy  # (merge_all as SumUDF's)


def test_meta_shows_no_path(tmp_path, monkeypatch):
    data = np.arange(2 * 3 * 4 * 5, dtype="<u2").reshape(2, 3, 4, 5)
    ds = raw_scan(tmp_path, data)
    dark = np.full((4, 5), 2.0, np.float32)
    seen = []
    real = SumUDF.postprocess

    def spy(self):
        seen.append((set(vars(self.meta)), self.tile_form))
        return real(self)

    monkeypatch.setattr(SumUDF, "postprocess", spy)
    res = SumUDF().compute(ds, corrections=CorrectionSet(dark=dark))
    np.testing.assert_allclose(res["intensity"].values, (data - dark).sum(axis=(0, 1)))
    assert seen
    for names, form in seen:
        assert form.folded_corrections is not None  # (the path reached SumUDF)
        assert not {"folded_corrections", "pixel_layout", "tile_form", "path"} & names
    meta = FrameTotal().lazy(ds)  # (the run binds the instance given)
    assert meta is not None
    udf = FrameTotal()
    udf.compute(ds)
    assert not hasattr(udf.meta, "folded_corrections")
    assert not hasattr(udf.meta, "pixel_layout")
    assert udf.tile_form == TileForm()


@dataclasses.dataclass(frozen=True)
class FrameByFrame:
    """A toy path, added to `PATHS`: decoded tiles of one frame each, for runs of
    `FrameTotal` alone (it stands for a new fast path: nothing else changes)."""

    tile_dtype: np.dtype | None = None
    form: TileForm = TileForm()
    corrects_tiles: bool = False

    @classmethod
    def choose(cls, query: PathQuery):
        if [type(u) for u in query.udfs] != [FrameTotal]:
            return None
        return cls(), query.whole_frames(1)

    def deliver(self, feed):
        dataset = feed.dataset
        feed.consume(dataset.iter_flat_tiles(feed.present, feed.scheme, feed.read_dtype))

    def describe(self):
        return ["one frame at a time"]


def test_a_new_path_is_one_entry(tmp_path, monkeypatch):
    data = np.arange(2 * 3 * 4 * 5, dtype="<u2").reshape(2, 3, 4, 5)
    ds = raw_scan(tmp_path, data)
    monkeypatch.setattr(paths_module, "PATHS", (FrameByFrame.choose, *paths_module.PATHS))
    assert run_path(ds, [FrameTotal()]) == FrameByFrame()
    assert run_path(ds, [SumUDF()]) == DecodedTiles(np.dtype("uint16"))
    assert "one frame at a time" in ltdask.explain(ds, [FrameTotal()]).text
    res = FrameTotal().compute(ds, progress=False)
    np.testing.assert_array_equal(res["total"].values, data.sum(axis=(2, 3)))


def test_bad_declarations():
    with pytest.raises(ValueError, match=r"folds_corrections=\{'flat'\}.*\['flat'\] unknown"):
        TilePaths(folds_corrections={"flat"})
    with pytest.raises(ValueError, match=r"shared_stats='max'.*\['max'\] unknown"):
        TilePaths(shared_stats="max")
    # (Python 3.11 wraps errors of ``__set_name__`` in a RuntimeError)
    with pytest.raises((TypeError, RuntimeError)) as info:

        class Borrowing(ltdask.UDF):
            TILE_PATHS = SumUDF.TILE_PATHS

    error = info.value.__cause__ or info.value
    assert "Borrowing.TILE_PATHS is the TilePaths of SumUDF: give each class its own" in str(error)
