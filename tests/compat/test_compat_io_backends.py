"""LiberTEM's I/O backend choices (`ltdask.compat.io_backends`): taken by ``ctx.load``,
which reads the same values with each (numpy's reading of the file is the reference)."""

from __future__ import annotations

import numpy as np
import pytest

from ltdask.compat import Context
from ltdask.compat.io_backends import BufferedBackend, DirectBackend, MMapBackend
from ltdask.udf import SumUDF


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param(MMapBackend(), id="mmap"),
        pytest.param(MMapBackend(enable_readahead_hints=True), id="mmap-readahead"),
        pytest.param(BufferedBackend(max_buffer_size=4096), id="buffered"),
        pytest.param(DirectBackend(), id="direct"),
    ],
)
def test_load_raw_with_io_backend(tmp_path, backend):
    data = np.random.default_rng(2).random((3, 4, 6, 5)).astype(np.float32)
    path = tmp_path / "scan.raw"
    data.tofile(path)
    ctx = Context.make_with("inline")
    ds = ctx.load(
        "raw", path=path, nav_shape=(3, 4), sig_shape=(6, 5), dtype="float32", io_backend=backend
    )
    assert ds._path == str(path)  # LiberTEM's private name of the path, read by its tests
    reread = np.fromfile(path, dtype=np.float32).reshape(data.shape)
    res = ctx.run_udf(dataset=ds, udf=SumUDF())
    np.testing.assert_allclose(res["intensity"].data, reread.sum(axis=(0, 1)), rtol=1e-5)


def test_options_kept_and_compared():
    assert MMapBackend(enable_readahead_hints=True).enable_readahead_hints is True
    assert BufferedBackend().max_buffer_size == 16 * 1024 * 1024
    assert DirectBackend(1024) == DirectBackend(1024) != BufferedBackend(1024)
    assert repr(DirectBackend(1024)) == "DirectBackend(max_buffer_size=1024)"


@pytest.mark.parametrize(
    "make, error, match",
    [
        pytest.param(
            lambda: MMapBackend(enable_readahead_hints="yes"),
            TypeError,
            "enable_readahead_hints='yes'; expected True or False",
            id="mmap-hints",
        ),
        pytest.param(
            lambda: BufferedBackend(max_buffer_size=1.5),
            TypeError,
            "max_buffer_size=1.5; expected a number of bytes",
            id="buffered-float",
        ),
        pytest.param(
            lambda: DirectBackend(max_buffer_size=0),
            ValueError,
            "DirectBackend: max_buffer_size=0; expected a positive",
            id="direct-zero",
        ),
    ],
)
def test_bad_options(make, error, match):
    with pytest.raises(error, match=match):
        make()
