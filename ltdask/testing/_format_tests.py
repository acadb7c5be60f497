"""`FormatTests`: the conformance checks as a test class a format's test module subclasses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ltdask.io.dataset import DataSet
from ltdask.testing._checks import (
    COMMON_BAD_INPUTS,
    BadInput,
    check_bad_input,
    check_distributed,
    check_pickle,
    check_registered,
    check_roi,
    check_shape_and_dtype,
    check_sync_offset,
    check_tile_shapes,
    check_values,
    reference_scan,
    takes_sync_offset,
)


class FormatTests:
    """The conformance tests of one format: subclass it in a test module as ``Test<Name>``,
    say how to write a scan (`write`) and what opens it (`opener` or `format`); pytest (or
    any runner that gives ``tmp_path``) collects its ``test_*`` methods.

    Each test writes `reference` (by default `reference_scan` of `nav`, `sig`, `dtype`) with
    `write` into a fresh folder, opens it and runs one check of `ltdask.testing` against the
    array. A format that cannot hold the default scan sets the class attributes.

    Examples
    --------
    In ``tests/test_toy_format.py`` of the package that provides the format:

    >>> import numpy as np, ltdask
    >>> from ltdask.testing import FormatTests
    >>> class TestRawFormat(FormatTests):
    ...     format = "raw"
    ...     dtype = ">u2"
    ...
    ...     def write(self, folder, data):
    ...         path = folder / "scan.raw"
    ...         data.tofile(path)
    ...         return path, dict(nav_shape=data.shape[:2], sig_shape=data.shape[2:],
    ...                           dtype=data.dtype)
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     TestRawFormat().test_tile_shapes(pathlib.Path(folder))
    """

    #: the format's name in the registry (``ltdask.open(path, format=...)``), or None
    format: ClassVar[str | None] = None
    #: the opener, ``opener(target, **keywords) -> DataSet`` (by default ``ltdask.open``
    #: with ``format=``)
    opener: ClassVar[Callable[..., DataSet] | None] = None
    #: the reference scan's shape and dtype
    nav: ClassVar[tuple[int, ...]] = (5, 7)
    sig: ClassVar[tuple[int, ...]] = (9, 11)
    dtype: ClassVar[str] = "<u2"
    #: the data lives in memory (its pickle may hold it)
    in_memory: ClassVar[bool] = False
    #: the offsets `test_sync_offset` opens the scan with (none: the opener takes none)
    sync_offsets: ClassVar[Sequence[int]] = (3, -2)
    #: run `test_distributed` (it starts a one-worker LocalCluster)
    distributed: ClassVar[bool] = True
    #: the format's own bad inputs, besides `COMMON_BAD_INPUTS`
    bad_inputs: ClassVar[Sequence[BadInput]] = ()

    def write(self, folder: Path, data: np.ndarray) -> tuple[Any, dict]:
        """Write `data` (nav + sig) in the format into `folder`; return what to open and
        the opener's keywords."""
        raise NotImplementedError(f"{type(self).__name__}.write: write a scan of the format")

    def reference(self) -> np.ndarray:
        """The array the tests write and read back."""
        return reference_scan(self.nav, self.sig, self.dtype)

    def open_with(self) -> Callable[..., DataSet]:
        """The opener the tests call."""
        opener = type(self).opener  # from the class: a function, not a bound method
        if opener is not None:
            return opener
        if self.format is None:
            raise TypeError(f"{type(self).__name__}: set `format` or `opener`")
        from ltdask.io.open import open_dataset

        name = self.format

        def open_format(target, **keywords):
            return open_dataset(target, format=name, **keywords)

        open_format.__name__ = f"ltdask.open(format={name!r})"
        return open_format

    def written(self, folder: Path) -> tuple[Any, dict, np.ndarray]:
        """``(target, keywords, reference)``: the reference written into `folder`."""
        data = self.reference()
        target, keywords = self.write(Path(folder), data)
        return target, keywords, data

    def open_scan(self, folder: Path, **extra) -> tuple[DataSet, np.ndarray]:
        """``(dataset, reference)``: the reference written into `folder` and opened."""
        target, keywords, data = self.written(folder)
        return self.open_with()(target, **keywords, **extra), data

    # -- the tests -----------------------------------------------------------------------
    def test_registered(self, tmp_path: Path) -> None:
        if self.format is not None:
            target, keywords, _ = self.written(tmp_path)
            check_registered(self.format, target, keywords)

    def test_shape_and_dtype(self, tmp_path: Path) -> None:
        ds, data = self.open_scan(tmp_path)
        check_shape_and_dtype(ds, data, sig_dims=len(self.sig))

    def test_values(self, tmp_path: Path) -> None:
        ds, data = self.open_scan(tmp_path)
        check_values(ds, data)

    def test_tile_shapes(self, tmp_path: Path) -> None:
        ds, data = self.open_scan(tmp_path)
        check_tile_shapes(ds, data)

    def test_sync_offset(self, tmp_path: Path) -> None:
        opener = self.open_with()
        if not self.sync_offsets or not takes_sync_offset(opener):
            return
        target, keywords, data = self.written(tmp_path)
        keywords.pop("sync_offset", None)
        base = opener(target, **keywords).sync_offset  # where the format found the scan start
        check_sync_offset(
            lambda **k: opener(target, **keywords, **k), data, self.sync_offsets, base
        )

    def test_roi(self, tmp_path: Path) -> None:
        ds, data = self.open_scan(tmp_path)
        check_roi(ds, data)

    def test_pickle(self, tmp_path: Path) -> None:
        ds, data = self.open_scan(tmp_path)
        check_pickle(ds, data, in_memory=self.in_memory)

    def test_distributed(self, tmp_path: Path) -> None:
        if self.distributed:
            ds, data = self.open_scan(tmp_path)
            check_distributed(ds, data)

    def test_bad_input(self, tmp_path: Path) -> None:
        target, keywords, _ = self.written(tmp_path)
        common = () if self.in_memory else COMMON_BAD_INPUTS
        check_bad_input(self.open_with(), tmp_path, target, keywords, (*common, *self.bad_inputs))
