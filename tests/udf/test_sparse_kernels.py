"""The numba CSR kernels (`ltdask.kernels.sparse`) against scipy on random matrices."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st

from ltdask.kernels.sparse import (
    csr_col_sums,
    csr_dot_dense,
    csr_dot_single,
    csr_dot_sparse,
    csr_moments,
    csr_row_sums,
)

shapes = st.tuples(st.integers(1, 9), st.integers(1, 17), st.floats(0, 1), st.integers(0, 99))


def random_csr(n, px, density, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    m = scipy.sparse.random(n, px, density=density, format="csr", random_state=rng)
    m.data = rng.integers(-50, 50, m.nnz).astype(dtype)
    return m.astype(dtype)


@settings(max_examples=40, deadline=None)
@given(shapes)
def test_sums_and_products(shape):
    n, px, density, seed = shape
    m = random_csr(n, px, density, seed)
    dense = m.toarray().astype(np.float64)
    rows = np.zeros(n)
    csr_row_sums(m.indptr, m.data, rows)
    np.testing.assert_allclose(rows, dense.sum(axis=1))
    cols = np.zeros(px)
    csr_col_sums(m.indptr, m.indices, m.data, cols)
    np.testing.assert_allclose(cols, dense.sum(axis=0))

    weights = np.random.default_rng(seed).random((px, 3))
    out = np.zeros((n, 3))
    csr_dot_dense(m.indptr, m.indices, m.data, weights, out)
    np.testing.assert_allclose(out, dense @ weights, rtol=1e-12, atol=1e-9)

    w = random_csr(px, 3, 0.5, seed + 1, np.float64)
    out = np.zeros((n, 3))
    csr_dot_sparse(m.indptr, m.indices, m.data, w.indptr, w.indices, w.data, out)
    np.testing.assert_allclose(out, dense @ w.toarray(), rtol=1e-12, atol=1e-9)

    # each pixel in one mask at most
    rng = np.random.default_rng(seed)
    pixel_mask = rng.integers(-1, 3, px)
    pixel_weight = rng.random(px)
    single = np.zeros((px, 3))
    single[np.flatnonzero(pixel_mask >= 0), pixel_mask[pixel_mask >= 0]] = pixel_weight[
        pixel_mask >= 0
    ]
    out = np.zeros((n, 3))
    csr_dot_single(m.indptr, m.indices, m.data, pixel_mask, pixel_weight, out)
    np.testing.assert_allclose(out, dense @ single, rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(shapes)
def test_moments(shape):
    n, px, density, seed = shape
    m = random_csr(n, px, density, seed)
    dense = m.toarray().astype(np.float64)
    mean, m2 = np.empty(px), np.empty(px)
    csr_moments(m.indptr, m.indices, m.data, n, mean, m2)
    np.testing.assert_allclose(mean, dense.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(m2, ((dense - dense.mean(axis=0)) ** 2).sum(axis=0), atol=1e-9)


@pytest.mark.parametrize("first", [0, 2])
def test_kernels_read_only_their_rows(first):
    """Row pointers that do not start at 0 (rows cut out of a larger matrix's arrays)."""
    m = random_csr(6, 5, 0.6, 1)
    cut = m.indptr[first:]
    cols = np.zeros(5)
    csr_col_sums(cut, m.indices, m.data, cols)
    np.testing.assert_allclose(cols, m.toarray()[first:].sum(axis=0))
