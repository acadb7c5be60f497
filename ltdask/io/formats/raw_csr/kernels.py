"""numba kernels of the raw_csr format: CSR rows densified into tiles, or gathered into a
compact CSR tile; :func:`csr_densify_reference` is the pure-numpy reference (also used for
the dtypes numba cannot add)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def csr_densify(starts, stops, indices, values, out):
    """``out[i, indices[k]] += values[k]`` for ``k`` in ``starts[i]:stops[i]``; `out` is
    ``(rows, frame pixels)`` and zeroed by the caller. Returns how many indices fell
    outside the frame (they are skipped)."""
    n_sig = out.shape[1]
    bad = 0
    for i in range(starts.shape[0]):
        row = out[i]
        for k in range(starts[i], stops[i]):
            j = indices[k]
            if j < 0 or j >= n_sig:
                bad += 1
            else:
                row[j] += values[k]
    return bad


def numba_cannot(*dtypes) -> bool:
    """Whether numba cannot compute with one of `dtypes` (bool additions, float16)."""
    return any(np.dtype(d).kind == "b" or np.dtype(d) == np.float16 for d in dtypes)


def csr_densify_reference(starts, stops, indices, values, out) -> int:
    """Pure-numpy :func:`csr_densify` (also used for dtypes numba cannot add: bool,
    float16)."""
    n_sig = out.shape[1]
    bad = 0
    for i in range(starts.shape[0]):
        cols = np.asarray(indices[starts[i] : stops[i]]).astype(np.int64)
        vals = np.asarray(values[starts[i] : stops[i]])
        ok = (cols >= 0) & (cols < n_sig)
        bad += int(np.count_nonzero(~ok))
        np.add.at(out[i], cols[ok], vals[ok].astype(out.dtype))
    return bad


@numba.njit(nogil=True, cache=True)
def csr_gather(starts, stops, indices, values, indices_out, values_out, indptr_out):
    """Copy rows ``starts[i]:stops[i]`` into one compact CSR triple (``*_out``). Returns
    whether each row's column indices strictly increase (scipy's canonical format: sorted,
    no duplicates)."""
    pos = 0
    indptr_out[0] = 0
    canonical = True
    for i in range(starts.shape[0]):
        for k in range(starts[i], stops[i]):
            indices_out[pos] = indices[k]
            values_out[pos] = values[k]
            if k > starts[i] and indices[k] <= indices[k - 1]:
                canonical = False
            pos += 1
        indptr_out[i + 1] = pos
    return canonical
