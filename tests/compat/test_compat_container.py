"""`ltdask.compat.MaskContainer`: LiberTEM's ``libertem.common.container`` interface, checked
against masks cut by hand with numpy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import sparse
from helpers.badinput import expect, report

import ltdask
from ltdask import UDF, Shape, Slice
from ltdask.compat import Context, MaskContainer

SIG = (6, 5)


@pytest.fixture(scope="module", autouse=True)
def report_table(request):
    """Print every bad-input case's exception at the end of the module."""
    yield from report(request)


@pytest.fixture
def stack():
    rng = np.random.default_rng(3)
    masks = rng.random((3, *SIG))
    masks[masks < 0.6] = 0  # sparse enough that sparse formats make sense
    return masks


def tile_slice(y0, h, nav=4):
    return Slice((7, y0, 0), Shape((nav, h, SIG[1]), sig_dims=2))


@pytest.mark.parametrize(
    "factories",
    [
        pytest.param("stack", id="one-factory-stack"),
        pytest.param("list-dense", id="list-dense"),
        pytest.param("list-scipy", id="list-scipy"),
        pytest.param("list-pydata", id="list-pydata"),
    ],
)
@pytest.mark.parametrize(
    "sparse_backend",
    [None, "scipy.sparse", "scipy.sparse.csr", "scipy.sparse.csc", "sparse.pydata"]
    + ["sparse.pydata.GCXS"],
)
@pytest.mark.parametrize("transpose", [True, False])
def test_get_cuts_the_signal_slice(stack, factories, sparse_backend, transpose):
    make = {
        "stack": lambda: lambda: stack,
        "list-dense": lambda: [lambda m=m: m for m in stack],
        "list-scipy": lambda: [lambda m=m: scipy.sparse.csr_matrix(m) for m in stack],
        "list-pydata": lambda: [lambda m=m: sparse.COO.from_numpy(m) for m in stack],
    }[factories]()
    container = MaskContainer(mask_factories=make, dtype=np.float32)
    assert len(container) == 3
    assert container.dtype == np.float32
    expect_sparse = "scipy.sparse" if factories in ("list-scipy", "list-pydata") else False
    assert container.use_sparse == expect_sparse
    for y0, h in [(0, SIG[0]), (2, 3), (5, 1)]:
        got = container.get(
            key=tile_slice(y0, h), sparse_backend=sparse_backend, transpose=transpose
        )
        expected = stack[:, y0 : y0 + h, :].reshape(3, -1).astype(np.float32)
        if transpose:
            expected = expected.T
        backend = sparse_backend or container.use_sparse
        if backend in ("scipy.sparse", "scipy.sparse.csr"):
            assert scipy.sparse.issparse(got) and got.format == "csr"
        elif backend == "scipy.sparse.csc":
            assert scipy.sparse.issparse(got) and got.format == "csc"
        elif backend == "sparse.pydata":
            assert isinstance(got, sparse.COO)
        elif backend == "sparse.pydata.GCXS":
            assert isinstance(got, sparse.GCXS)
        else:
            assert isinstance(got, np.ndarray)
        dense = (
            got.toarray()
            if scipy.sparse.issparse(got)
            else np.asarray(got.todense() if hasattr(got, "todense") else got)
        )
        assert dense.dtype == np.float32
        np.testing.assert_array_equal(dense, expected)


def test_get_takes_sig_slices_and_dtype(stack):
    container = MaskContainer(lambda: stack, count=3)
    sig = Slice((1, 2), Shape((2, 3), sig_dims=2))
    got = container.get(sig, dtype=np.float64, transpose=False)
    np.testing.assert_array_equal(got, stack[:, 1:3, 2:5].reshape(3, -1))
    assert got.dtype == np.float64
    assert container.get(sig, transpose=False) is got  # cached


class SparseCorrelationLike(UDF):
    """What LiberTEM-blobfinder's SparseCorrelationUDF does with its container."""

    def get_result_buffers(self):
        return {"corr": self.buffer(kind="nav", extra_shape=(3,), dtype="float32")}

    def get_task_data(self):
        stack = self.params.stack
        container = MaskContainer(
            mask_factories=lambda: sparse.COO.from_numpy(stack),
            dtype=np.float32,
            use_sparse="scipy.sparse.csc",
        )
        return {"mask_container": container}

    def process_tile(self, tile):
        c = self.task_data.mask_container
        tile_t = tile.reshape((tile.shape[0], -1)).T
        sl = c.get(key=self.meta.slice, transpose=False)
        self.results.corr[:] += sl.dot(tile_t).T


def test_a_libertem_style_udf_runs(stack):
    data = np.random.default_rng(4).random((3, 4, *SIG)).astype(np.float32)
    res = Context.make_with("inline").run_udf(
        dataset=ltdask.from_array(data), udf=SparseCorrelationLike(stack=stack)
    )
    expected = np.einsum("abyx,myx->abm", data.astype(np.float64), stack)
    np.testing.assert_allclose(res["corr"].data, expected, rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param(
            dict(mask_factories=[lambda: np.ones((4, 4)), lambda: np.ones((5, 4))]),
            r"mask_factories\[1\] returns a mask of shape \(5, 4\), mask_factories\[0\] one "
            r"of \(4, 4\); every factory must return a mask of the frames' signal shape",
            id="mismatched-factory-shapes",
        ),
        pytest.param(
            dict(mask_factories=[np.ones((4, 4))]),
            r"mask_factories\[0\] is a ndarray of shape \(4, 4\), not a function; wrap an "
            r"array `m` as `lambda: m`",
            id="array-not-factory",
        ),
        pytest.param(
            dict(mask_factories=[lambda: np.ones((4, 4))], use_sparse="scipy.sparse.coo"),
            r"use_sparse='scipy.sparse.coo' is not a sparse format; expected one of "
            r"scipy.sparse, scipy.sparse.csr, scipy.sparse.csc",
            id="unknown-sparse-format",
        ),
        pytest.param(
            dict(mask_factories=lambda: np.ones((4, 4)).ravel()),
            r"a single factory must return a stack \(n, \*sig_shape\)",
            id="flat-stack",
        ),
        pytest.param(
            dict(mask_factories=lambda: np.ones((2, 4, 4)), count=3),
            r"count=3 but the factories give 2 masks",
            id="count",
        ),
        pytest.param(dict(mask_factories=[]), r"mask_factories is empty", id="empty"),
    ],
)
def test_bad_masks(request, kwargs, match):
    def make_and_get():
        container = MaskContainer(**kwargs)
        container.get(Slice((0, 0), Shape((4, 4), sig_dims=2)))

    expect(request, ltdask.UDFError, match, make_and_get)


def test_bad_keys(request, stack):
    container = MaskContainer(lambda: stack)
    expect(request, TypeError, r"key=\(0, 2\); expected a Slice", container.get, (0, 2))
    too_big = Slice((0, 0), Shape((8, 5), sig_dims=2))
    match = r"does not lie inside the masks' shape \(6, 5\)"
    expect(request, ltdask.UDFError, match, container.get, too_big)


# ApplyMasksUDF.masks: LiberTEM's ``udf.masks`` (its tests ask it for the masks' format)


def _mask_factories(stack, kinds):
    convert = {
        "dense": lambda m: m,
        "scipy": scipy.sparse.csr_matrix,
        "pydata": sparse.COO.from_numpy,
    }
    return [lambda m=m, k=k: convert[k](m) for m, k in zip(stack, kinds, strict=True)]


@pytest.mark.parametrize(
    "kinds, use_sparse, fmt",
    [
        pytest.param(("scipy", "pydata", "scipy"), None, "scipy", id="all-sparse-default"),
        pytest.param(("scipy", "dense", "dense"), None, "dense", id="mixed-default"),
        pytest.param(("dense",) * 3, True, "scipy", id="true"),
        pytest.param(("dense",) * 3, "scipy.sparse", "scipy", id="scipy"),
        pytest.param(("dense",) * 3, "sparse.pydata", "pydata", id="pydata"),
        pytest.param(("scipy",) * 3, False, "dense", id="scipy-false"),
        pytest.param(("pydata",) * 3, False, "dense", id="pydata-false"),
    ],
)
def test_apply_masks_udf_masks(stack, kinds, use_sparse, fmt):
    udf = ltdask.udf.ApplyMasksUDF(_mask_factories(stack, kinds), use_sparse=use_sparse)
    ds = ltdask.from_array(np.ones((2, 2, *SIG), dtype=np.uint16))
    meta = ltdask.udf.UDFMeta(
        partition_slice=None,
        dataset_shape=ds.shape,
        roi=None,
        dataset_dtype=ds.dtype,
        input_dtype=ds.dtype,
        corrections=None,
    )
    udf.set_meta(meta)
    assert udf.meta is meta
    tile = Slice((0, 2, 0), Shape((1, 3, SIG[1]), sig_dims=2))  # signal rows 2 to 4
    got = udf.masks.get(tile, transpose=True)
    expected = stack[:, 2:5, :].reshape(3, -1).T  # (pixels, masks), cut with numpy
    assert {
        "scipy": scipy.sparse.issparse(got),
        "pydata": isinstance(got, sparse.SparseArray),
        "dense": isinstance(got, np.ndarray),
    }[fmt]
    dense = got.toarray() if scipy.sparse.issparse(got) else np.asarray(sparse.asnumpy(got))
    np.testing.assert_allclose(dense, expected)


def test_apply_masks_udf_masks_not_made_by_a_run(stack):
    calls = []

    def factory():
        calls.append(1)
        return stack

    udf = ltdask.udf.ApplyMasksUDF(factory, mask_count=3, mask_dtype=np.float64)
    ctx = Context.make_with("inline")
    data = np.random.default_rng(5).random((2, 3, *SIG))
    ds = ctx.load("memory", data=data, sig_dims=2)
    res = ctx.run_udf(dataset=ds, udf=udf)
    np.testing.assert_allclose(
        res["intensity"].data, np.einsum("abyx,myx->abm", data, stack), rtol=1e-6
    )
    assert udf._mask_container is None  # the run cut its masks without it
    made = len(calls)
    masks = udf.masks
    assert masks._computed_masks is None and len(calls) == made  # not computed yet
    assert len(masks) == 3
