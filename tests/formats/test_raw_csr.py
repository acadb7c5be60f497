"""raw_csr: LiberTEM's sparse layout; dense and scipy.sparse tiles, descriptors, bad files."""

from __future__ import annotations

import itertools
import math

import dask
import numpy as np
import pytest
import scipy.sparse
from helpers.formatfiles import make_data, write_raw_csr
from hypothesis import given
from hypothesis import strategies as st

import ltdask
from ltdask import DataSetError, TilingScheme
from ltdask.io.formats.raw_csr import RawCSRDataSet, open_raw_csr
from ltdask.io.formats.raw_csr.kernels import csr_densify, csr_densify_reference

DATA = make_data("<f4", sparse=True, nav=(6, 8), sig=(9, 11))


@pytest.fixture
def scan(tmp_path):
    path, _ = write_raw_csr(tmp_path, DATA)
    return path


@pytest.mark.parametrize(
    "indptr, indices, data",
    [
        pytest.param("<i8", "<i4", "<f4", id="i8-i4-f4"),
        pytest.param(">u4", ">u2", ">f8", id="bigendian"),
        pytest.param("<u8", "<i8", "<u2", id="u8-i8-u2"),
        pytest.param("<i4", "<i4", "|b1", id="bool"),
    ],
)
def test_dtypes(tmp_path, indptr, indices, data):
    dense = DATA.astype(data)
    path, _ = write_raw_csr(tmp_path, dense, indptr_dtype=indptr, indices_dtype=indices)
    ds = open_raw_csr(path)
    assert ds.dtype == dense.dtype.newbyteorder("=")
    assert ds.nnz == np.count_nonzero(dense)
    np.testing.assert_array_equal(ds.to_dask().compute(), dense)
    np.testing.assert_array_equal(ds.to_dask(dtype="float64").compute(), dense.astype("f8"))


def test_sparse_tiles(scan):
    ds = open_raw_csr(scan)
    assert ds.array_backends == ("scipy.sparse.csr_matrix", "numpy")
    flat = DATA.reshape(48, 99)
    scheme = TilingScheme.make_for_shape((5, 9, 11), (9, 11))
    positions = np.flatnonzero(np.random.default_rng(1).random(48) < 0.6)
    seen = []
    for tile, first, s in ds.iter_tiles(
        positions, scheme, "float64", array_backend="scipy.sparse.csr_matrix"
    ):
        assert isinstance(tile, scipy.sparse.csr_matrix) and s == 0
        assert tile.dtype == np.float64 and tile.shape[1] == 99
        rows = positions[first : first + tile.shape[0]]
        np.testing.assert_array_equal(tile.toarray(), flat[rows])
        seen.extend(rows)
    assert seen == list(positions)
    # dense by default, as UDFs get them
    for tile, first, _ in ds.iter_tiles(positions, scheme, "float32"):
        assert isinstance(tile, np.ndarray) and tile.shape[1:] == (9, 11)
        np.testing.assert_array_equal(tile, DATA.reshape(48, 9, 11)[positions[first:][: len(tile)]])


def test_frames_only_tiling(scan):
    ds = open_raw_csr(scan)
    with dask.config.set({"ltdask.tile-bytes": 64}):
        scheme = ds.negotiate([ltdask.TilingPreferences()], np.float32)
    assert len(scheme) == 1 and tuple(scheme[0].shape) == (9, 11)
    cut = TilingScheme.make_for_shape((2, 3, 11), (9, 11))
    with pytest.raises(DataSetError, match="read in whole frames"):
        next(ds.iter_tiles(np.arange(4), cut, "f4"))
    with pytest.raises(DataSetError, match="array_backend='cupy'"):
        next(ds.iter_tiles(np.arange(4), scheme, "f4", array_backend="cupy"))


def test_roi_and_udfs(scan):
    roi = np.random.default_rng(2).random((6, 8)) < 0.3
    with dask.config.set({"ltdask.partition-bytes": 1000, "ltdask.min-partitions": 1}):
        ds = open_raw_csr(scan)
        sums, sig_sums = ltdask.compute(ds, [ltdask.udf.SumUDF(), ltdask.udf.SumSigUDF()], roi=roi)
    np.testing.assert_allclose(sums["intensity"].values, DATA[roi].sum(0), rtol=1e-6, atol=1e-4)
    np.testing.assert_allclose(
        sig_sums["intensity"].values[roi], DATA.sum((2, 3))[roi], rtol=1e-6, atol=1e-4
    )


@pytest.mark.parametrize("toml_offset, kw_offset, effective", [(2, None, 2), (2, -3, -3)])
def test_sync_offset(tmp_path, toml_offset, kw_offset, effective):
    path, _ = write_raw_csr(tmp_path, DATA, sync_offset=toml_offset)
    ds = open_raw_csr(path, sync_offset=kw_offset)
    assert ds.sync_offset == effective
    flat = DATA.reshape(48, 9, 11)
    expected = np.zeros_like(flat)
    for p in range(48):
        if 0 <= p + effective < 48:
            expected[p] = flat[p + effective]
    np.testing.assert_array_equal(ds.to_dask().compute(), expected.reshape(DATA.shape))


def test_shape_overrides(scan):
    ds = open_raw_csr(scan, nav_shape=(48,), sig_shape=(99,))
    np.testing.assert_array_equal(ds.to_dask().compute(), DATA.reshape(48, 99))
    with pytest.raises(DataSetError, match=r"sig_shape=\(10, 10\) has 100 pixels.*have 99"):
        open_raw_csr(scan, sig_shape=(10, 10))


@given(
    st.lists(st.lists(st.tuples(st.integers(-2, 12), st.integers(-50, 50)), max_size=6), max_size=5)
)
def test_densify_matches_numpy_reference(rows):
    """Duplicates add up, out-of-frame indices are counted and skipped."""
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([i for r in rows for i, _ in r], dtype=np.int64)
    values = np.array([v for r in rows for _, v in r], dtype=np.float32)
    out = np.zeros((len(rows), 10), np.float32)
    ref = np.zeros_like(out)
    bad = csr_densify(indptr[:-1], indptr[1:], indices, values, out)
    assert bad == csr_densify_reference(indptr[:-1], indptr[1:], indices, values, ref)
    np.testing.assert_array_equal(out, ref)


# -- bad descriptors and files -------------------------------------------------------------
def rewrite(path, old, new):
    path.write_text(path.read_text().replace(old, new))


@pytest.mark.parametrize(
    "old, new, message",
    [
        pytest.param("[params]", "[params", r"is not valid TOML", id="malformed"),
        pytest.param("[params]", "[parameters]", r"has no \[params\] table", id="no-params"),
        pytest.param('"raw_csr"', '"raw"', r"filetype = 'raw'; expected 'raw_csr'", id="filetype"),
        pytest.param("[raw_csr]", "[csr]", r"has no \[raw_csr\] table", id="no-section"),
        pytest.param(
            "indices_dtype",
            "index_dtype",
            r"\[raw_csr\] lacks indices_dtype; it needs indptr_file, indptr_dtype, indices_file",
            id="missing-key",
        ),
        pytest.param(
            'indptr_dtype = "<i8"',
            'indptr_dtype = "<f8"',
            r"expected an integer dtype",
            id="float-indptr",
        ),
        pytest.param(
            'data_dtype = "<f4"',
            'data_dtype = "pixels"',
            r"'pixels' is not a numpy",
            id="bad-dtype",
        ),
        pytest.param("nav_shape = [6, 8]\n", "", r"\[params\] has no nav_shape", id="no-nav"),
        pytest.param(
            "nav_shape = [6, 8]", "nav_shape = [6, 0]", r"nav_shape=.*zero or negative", id="zero"
        ),
    ],
)
def test_descriptor_errors(scan, old, new, message):
    rewrite(scan, old, new)
    with pytest.raises(DataSetError, match=message):
        open_raw_csr(scan)


def test_missing_file(scan):
    rewrite(scan, "scan_indices.raw", "gone.raw")
    with pytest.raises(FileNotFoundError, match="gone.raw"):
        open_raw_csr(scan)


@pytest.mark.parametrize(
    "part, cut, message",
    [
        pytest.param("data", 2, r"is not a whole number of values", id="data-partial-item"),
        pytest.param("data", 8, r"holds \d+ indices but .* \d+ values", id="data-short"),
        pytest.param("indices", 4, r"holds \d+ indices but", id="indices-short"),
        pytest.param("indptr", 8, r"row pointers run from 0 to \d+, but the files hold", id="ptr"),
    ],
)
def test_truncated_files(scan, part, cut, message):
    target = scan.parent / f"scan_{part}.raw"
    data = target.read_bytes()
    target.write_bytes(data[:-cut])
    with pytest.raises(DataSetError, match=message):
        open_raw_csr(scan)


def test_indices_outside_the_frame(tmp_path):
    path, _ = write_raw_csr(tmp_path, DATA)
    indices = np.fromfile(tmp_path / "scan_indices.raw", dtype="<i4")
    indices[3] = 500
    indices.tofile(tmp_path / "scan_indices.raw")
    ds = open_raw_csr(path)
    assert isinstance(ds, RawCSRDataSet)
    with pytest.raises(DataSetError, match=r"1 column indices .* are outside the frame of 99"):
        ds.to_dask().compute()


def test_file_shrunk_after_opening(scan):
    ds = open_raw_csr(scan)
    data = scan.parent / "scan_data.raw"
    data.write_bytes(data.read_bytes()[:-40])
    changed = r"scan_data.raw' changed since it was opened \(its size went from \d+ to \d+ bytes"
    with pytest.raises(DataSetError, match=changed):
        ds.to_dask().compute()


@pytest.mark.parametrize("fill", [0.002, 0.05, 1.0])
def test_partitions_sized_by_stored_entries(tmp_path, fill):
    """A partition of CSR data holds ``ltdask.partition-bytes`` of entries (float32 values
    and indices), not of pixels; ``to_dask()`` (dense chunks) keeps pixel-sized chunks."""
    rng = np.random.default_rng(7)
    data = np.where(rng.random((16, 32, 32, 32)) < fill, 3.0, 0.0).astype("<f4")
    path, _ = write_raw_csr(tmp_path, data)
    config = {"ltdask.partition-bytes": 256 * 1024, "ltdask.min-partitions": 1}
    with dask.config.set(config):
        ds = open_raw_csr(path)
        per_frame = np.count_nonzero(data) * (4 + 4) / (16 * 32) + 16
        frames = [math.prod(c) for c in itertools.product(*ds.nav_chunks)]
        assert max(frames) * per_frame <= 2**18  # each partition fits
        assert max(frames) * per_frame > 2**17 or max(frames) == 16 * 32  # as few as fit
        assert max(ds.to_dask().chunks[0]) * 32 * 32 * 32 * 4 <= 256 * 1024
        np.testing.assert_array_equal(
            ltdask.udf.SumUDF().compute(ds)["intensity"], data.sum((0, 1))
        )


def _duplicates_unsorted(nav, sig, seed=3):
    """A CSR matrix whose rows repeat and shuffle column indices (scipy adds repeats up)."""
    rng = np.random.default_rng(seed)
    frames, px = math.prod(nav), math.prod(sig)
    per_row = rng.integers(0, 2 * px, frames)
    indices = rng.integers(0, px, int(per_row.sum())).astype(np.int32)
    values = rng.integers(1, 30, indices.size).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(per_row)])
    matrix = scipy.sparse.csr_matrix((values, indices, indptr), shape=(frames, px))
    assert not matrix.has_canonical_format
    return matrix


def test_duplicate_unsorted_indices_add_up_in_every_udf(tmp_path):
    # StdDevUDF took each stored value of a pixel for a frame of its own: 36 of 99 variances
    # off (one 9.2 for 25.5)
    nav, sig = (4, 5), (9, 11)
    matrix = _duplicates_unsorted(nav, sig)
    dense = matrix.toarray().reshape(*nav, *sig).astype(np.float64)
    path, _ = write_raw_csr(tmp_path, dense.astype(np.float32), csr=matrix)
    roi = np.random.default_rng(4).random(nav) < 0.7
    mask = np.random.default_rng(5).random(sig)
    udfs = [
        ltdask.udf.SumUDF(),
        ltdask.udf.SumSigUDF(),
        ltdask.udf.StdDevUDF(),
        ltdask.udf.ApplyMasksUDF([lambda: mask]),
        ltdask.udf.CoMUDF.with_params(cy=4, cx=5),
    ]
    with dask.config.set({"ltdask.partition-bytes": 2000, "ltdask.min-partitions": 1}):
        ds = open_raw_csr(path)
        np.testing.assert_array_equal(ds.to_dask().compute(), dense)
        # each alone (on sparse tiles where it takes them), the sums and moments in one
        # run (sparse), all in one run (dense)
        runs = [[udf] for udf in udfs] + [udfs[:3], udfs]
        for kw, run in itertools.product(({}, {"roi": roi}), runs):
            inside = dense[kw.get("roi", np.ones(nav, bool))]
            got = dict(zip(run, ltdask.compute(ds, run, **kw), strict=True))
            total, per_frame, std, masked, com = (got.get(udf) for udf in udfs)
            where = kw.get("roi", np.ones(nav, bool))
            if total is not None:
                np.testing.assert_allclose(total["intensity"].values, inside.sum(0), rtol=1e-6)
            if std is not None:
                np.testing.assert_allclose(std["var"].values, inside.var(0), rtol=1e-5)
                np.testing.assert_allclose(std["mean"].values, inside.mean(0), rtol=1e-6)
                assert std["num_frames"].values == len(inside)
            if per_frame is not None:
                got_sums = per_frame["intensity"].values[where]
                np.testing.assert_allclose(got_sums, inside.sum((1, 2)), rtol=1e-6)
            if masked is not None:
                got_masked = masked["intensity"].values[where][:, 0]
                np.testing.assert_allclose(got_masked, (inside * mask).sum((1, 2)), rtol=1e-6)
            if com is not None:
                yy, xx = np.mgrid[: sig[0], : sig[1]]
                weights = inside.sum((1, 2))
                want = np.stack([(inside * yy).sum((1, 2)), (inside * xx).sum((1, 2))], -1)
                want /= weights[:, None]
                np.testing.assert_allclose(com["raw_com"].values[where], want, rtol=1e-5)
