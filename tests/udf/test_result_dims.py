"""Names of result dims beyond the nav and signal dims (``UDF.get_extra_dims`` and
``get_extra_coords``), and what a results store tells ``xarray.open_zarr`` at its root."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import ltdask
from ltdask.udf import UDF, ApplyMasksUDF, CoMUDF


class Histogram(UDF):
    """Per frame: a 3-bin histogram; per signal pixel: (min, max); one (2, 3) table."""

    def __init__(self, names=None, coords=None):
        super().__init__(names=names, coords=coords)

    def get_result_buffers(self):
        return {
            "hist": self.buffer(kind="nav", extra_shape=(3,), dtype=np.int64),
            "span": self.buffer(kind="sig", extra_shape=(2,), dtype=np.float32),
            "table": self.buffer(kind="single", extra_shape=(2, 3), dtype=np.float64),
        }

    def get_extra_dims(self):
        return self.params.names or {}

    def get_extra_coords(self):
        return self.params.coords or {}

    def process_frame(self, frame):
        self.results.hist[:] = np.histogram(frame, bins=3, range=(0, 3))[0]

    def merge(self, dest, src):
        dest.hist[:] = src.hist


def dataset():
    data = np.random.default_rng(0).integers(0, 3, (3, 4, 5, 6)).astype(np.float32)
    return data, ltdask.from_array(data)


def test_names_and_coordinates():
    data, ds = dataset()
    names = {"hist": ("bin",), "span": ("stat",), "table": ("row", "col")}
    res = Histogram(names, {"bin": ["low", "mid", "high"], "stat": [0, 1]}).compute(ds)
    assert res["hist"].dims == ("scan_y", "scan_x", "bin")
    assert res["span"].dims == ("det_y", "det_x", "stat")
    assert res["table"].dims == ("row", "col")
    assert res["bin"].values.tolist() == ["low", "mid", "high"]
    expected = (data[..., None] == np.arange(3)).sum(axis=(2, 3))
    np.testing.assert_array_equal(res["hist"].sel(bin="mid").values, expected[..., 1])


def test_unnamed_dims_keep_numbered_names():
    _, ds = dataset()
    res = Histogram({"hist": ("bin",)}).compute(ds)
    assert res["span"].dims == ("det_y", "det_x", "span_0")
    assert res["table"].dims == ("table_0", "table_1")


@pytest.mark.parametrize(
    "names, match",
    [
        ({"hist": ("a", "b")}, r"result 'hist' of shape \(3, 4, 3\) has 1 dims besides"),
        ({"table": ("row",)}, r"result 'table' of shape \(2, 3\) has 2 dims"),
        ({"hist": ("scan_x",)}, r"Histogram.get_extra_dims\(\): result 'hist'"),
        ({"table": ("row", ...)}, r"result 'table' of shape \(2, 3\) has 2 dims .*Ellipsis"),
    ],
    ids=["too-many", "too-few", "same-as-nav", "sig-dims-do-not-fit"],
)
def test_wrong_names_are_refused(names, match):
    _, ds = dataset()
    with pytest.raises(ltdask.UDFError, match=match):
        Histogram(names).compute(ds)


def test_wrong_coordinates_are_refused():
    _, ds = dataset()
    with pytest.raises(ltdask.UDFError, match=r"2 coordinates for dim 'bin' of size 3"):
        Histogram({"hist": ("bin",)}, {"bin": [1, 2]}).compute(ds)


def test_store_of_several_results(tmp_path):
    """The root of a store of several UDFs' results names its groups (xarray.open_zarr of the
    root finds no variables there); open_datatree reads them all; named coordinates (text)
    are written without Zarr's warning about unspecified dtypes."""
    data, ds = dataset()
    path = tmp_path / "res.zarr"
    masks = {"all": lambda: np.ones((5, 6), np.float32), "row": lambda: np.eye(5, 6)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ltdask.to_zarr(ltdask.lazy(ds, [ApplyMasksUDF(masks), CoMUDF()]), str(path))
    root = xr.open_zarr(path)
    assert root.attrs["ltdask_groups"] == ["ApplyMasksUDF", "CoMUDF"]
    assert "open_datatree" in root.attrs["ltdask_note"]
    tree = xr.open_datatree(path, engine="zarr")
    masked = tree["ApplyMasksUDF"].dataset
    assert masked["mask"].values.tolist() == ["all", "row"]
    np.testing.assert_allclose(masked["intensity"].sel(mask="all").values, data.sum(axis=(2, 3)))
    assert tree["CoMUDF"].dataset["yx"].values.tolist() == ["y", "x"]


def test_store_of_one_result_has_it_at_the_root(tmp_path):
    data, ds = dataset()
    path = tmp_path / "one.zarr"
    ltdask.to_zarr(ApplyMasksUDF({"all": lambda: np.ones((5, 6))}).lazy(ds), str(path))
    root = xr.open_zarr(path)
    assert "ltdask_groups" not in root.attrs
    np.testing.assert_allclose(root["intensity"].sel(mask="all").values, data.sum(axis=(2, 3)))
