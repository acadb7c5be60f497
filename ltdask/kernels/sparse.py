"""numba kernels on CSR tiles (``indptr``, ``indices``, ``data`` of ``(frames, pixels)``):
what the shipped UDFs compute on sparse tiles without densifying or scipy's per-call
overhead. ``tests/udf/test_sparse_kernels.py`` checks them against scipy."""

from __future__ import annotations

import numba


@numba.njit(nogil=True, cache=True)
def csr_row_sums(indptr, data, out):
    """``out[i] += sum of row i``."""
    for i in range(indptr.shape[0] - 1):
        acc = out.dtype.type(0)
        for k in range(indptr[i], indptr[i + 1]):
            acc += data[k]
        out[i] += acc


@numba.njit(nogil=True, cache=True)
def csr_col_sums(indptr, indices, data, out):
    """``out[j] += sum of column j``."""
    for k in range(indptr[0], indptr[indptr.shape[0] - 1]):
        out[indices[k]] += data[k]


@numba.njit(nogil=True, cache=True)
def csr_dot_dense(indptr, indices, data, weights, out):
    """``out[i, m] += sum_k row_i[k] * weights[k, m]`` (`weights`: ``(pixels, masks)``)."""
    n_masks = weights.shape[1]
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            v = data[k]
            w = weights[indices[k]]
            for m in range(n_masks):
                out[i, m] += v * w[m]


@numba.njit(nogil=True, cache=True)
def csr_dot_sparse(indptr, indices, data, w_indptr, w_masks, w_values, out):
    """``out[i, m] += sum_k row_i[k] * W[k, m]`` for weights `W` as CSR by pixel
    (``w_indptr`` over pixels, ``w_masks`` the masks of each pixel's entries)."""
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            v = data[k]
            j = indices[k]
            for e in range(w_indptr[j], w_indptr[j + 1]):
                out[i, w_masks[e]] += v * w_values[e]


@numba.njit(nogil=True, cache=True)
def csr_dot_single(indptr, indices, data, pixel_mask, pixel_weight, out):
    """`csr_dot_sparse` where each pixel is in at most one mask (rings, bins, disks):
    ``pixel_mask[j]`` (-1: none) with weight ``pixel_weight[j]``."""
    for i in range(indptr.shape[0] - 1):
        row = out[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            m = pixel_mask[j]
            if m >= 0:
                row[m] += data[k] * pixel_weight[j]


@numba.njit(nogil=True, cache=True)
def csr_moments(indptr, indices, data, n, mean, m2):
    """Per pixel of a tile of `n` frames: its mean into `mean` and the sum of squared
    deviations from it into `m2` (both zeroed here): deviations of the stored values,
    and ``mean**2`` for each frame whose pixel is not stored."""
    px = mean.shape[0]
    for j in range(px):
        mean[j] = 0.0
        m2[j] = 0.0
    counts = mean.copy()  # float counts of stored values per pixel
    first, last = indptr[0], indptr[indptr.shape[0] - 1]
    for k in range(first, last):
        mean[indices[k]] += data[k]
        counts[indices[k]] += 1.0
    for j in range(px):
        mean[j] /= n
    for k in range(first, last):
        d = data[k] - mean[indices[k]]
        m2[indices[k]] += d * d
    for j in range(px):
        m2[j] += (n - counts[j]) * mean[j] * mean[j]
