"""An HDF5 dataset growing along its first axis, written with SWMR, as an acquisition's source.

SWMR (single writer, multiple readers): the writer opens the file with ``libver="latest"``
and sets ``swmr_mode = True``; this reader opens it with ``swmr=True`` and re-reads the
dataset's extent (``refresh``) every `POLL_S`. A writer extends the dataset before it
writes the new rows (``resize``, then the data, then ``flush``), so rows that have just
appeared may still read as the fill value: the frames handed over are those up to the
extent of the look before (written at least one poll interval ago). A finished file
written without SWMR is read the same way, all its frames at once.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence

from ltdask._types import PathLike
from ltdask.acquire._files import BATCH_BYTES, POLL_S, FollowedFile, frame_count, wait_for_file
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.exceptions import DataSetError
from ltdask.io.checks import check_dtype, check_shape


class Hdf5FollowSource(Source):
    """An HDF5 dataset growing along its first axis, written with SWMR (see `follow`).

    Parameters
    ----------
    path
        The HDF5 file (it may appear only after the acquisition is made).
    ds_path
        The dataset in the file; None: the one dataset with more than `sig_dims` dims.
    nav_shape, num_frames
        The scan's shape or frame count; by default the dataset's ``maxshape`` where it is
        fixed (a dataset that can grow without bound needs one of them).
    sig_dims
        How many trailing dims are the frame.
    sig_shape, dtype
        What the frames must be, where given (checked against the dataset).
    poll_interval
        Seconds between two looks at the dataset's extent.

    Examples
    --------
    >>> import h5py, numpy as np, ltdask, tempfile, os
    >>> from ltdask.acquire import Acquisition, Hdf5FollowSource
    >>> path = os.path.join(tempfile.mkdtemp(), "scan.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("data", data=np.ones((2, 3, 4, 4), np.float32))
    >>> with Acquisition(Hdf5FollowSource(path, "data")) as acq:
    ...     (res,) = ltdask.compute(acq, [ltdask.udf.SumSigUDF()])
    >>> res["intensity"].values.tolist()
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    """

    def __init__(
        self,
        path: PathLike,
        ds_path: str | None = None,
        nav_shape: Sequence[int] | None = None,
        num_frames: int | None = None,
        sig_dims: int = 2,
        sig_shape: Sequence[int] | None = None,
        dtype=None,
        poll_interval: float = POLL_S,
    ) -> None:
        self.path = self.name = os.fspath(path)
        where = repr(self.path)
        self.ds_path = ds_path
        self.nav_shape, self.num_frames = frame_count(nav_shape, num_frames, where)
        self.expected_sig = (
            None if sig_shape is None else check_shape(sig_shape, "sig_shape", where)
        )
        self.sig_dims = len(self.expected_sig) if self.expected_sig is not None else sig_dims
        self.expected_dtype = None if dtype is None else check_dtype(dtype, where)
        self.poll_interval = float(poll_interval)
        self._file = None
        self._dset = None
        self._followed: FollowedFile | None = None

    def open(self, timeout: float) -> Header:
        from ltdask.io.formats.hdf5.dataset import check_filters, find_dataset, import_h5py

        h5py = import_h5py()
        deadline = time.monotonic() + timeout
        wait_for_file(self.path, timeout)
        while True:  # (a writer makes the file before its first metadata is on disk)
            try:
                f = h5py.File(self.path, "r", libver="latest", swmr=True)
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise AcquisitionError(
                        f"cannot open {self.path!r} as HDF5 within {timeout} s ({e}); a file "
                        "still being written can be read only where its writer uses SWMR "
                        "(h5py.File(..., libver='latest') and swmr_mode = True)"
                    ) from None
                time.sleep(self.poll_interval)
        try:
            self._file = f
            self._followed = FollowedFile(self.path, os.fstat(f.id.get_vfd_handle()))
            dset = find_dataset(f, self.ds_path, self.path, self.sig_dims)
            self._dset = dset
            return self._header(dset, check_filters)
        except BaseException:
            self.close()
            raise

    def _header(self, dset, check_filters) -> Header:
        where = f"{self.path!r}: dataset {dset.name!r}"
        shape, maxshape = tuple(dset.shape), tuple(dset.maxshape)
        nav_dims = len(shape) - self.sig_dims
        sig = shape[nav_dims:]
        dtype = check_dtype(dset.dtype, where)
        check_filters(dset, self.path, dset.name)
        if self.expected_sig is not None and sig != self.expected_sig:
            raise DataSetError(f"{where} has frames of {sig}, not sig_shape={self.expected_sig}")
        if self.expected_dtype is not None and dtype != self.expected_dtype:
            raise DataSetError(f"{where} holds {dtype}, not dtype={self.expected_dtype}")
        if shape[1:nav_dims] != maxshape[1:nav_dims]:
            raise DataSetError(
                f"{where} (shape {shape}, maxshape {maxshape}) can grow along other nav axes "
                "than its first; followed datasets grow along the first axis only"
            )
        self.per_row = math.prod(shape[1:nav_dims])
        # (a dataset at its maxshape is complete: a scan it cannot hold ends with it)
        self.max_rows = maxshape[0]
        most = None if maxshape[0] is None else maxshape[0] * self.per_row
        count, nav = self.num_frames, self.nav_shape
        if count is None:
            if most is None:
                raise DataSetError(
                    f"{where} can grow without bound (maxshape {maxshape}); give nav_shape "
                    "or num_frames"
                )
            count, nav = most, tuple(int(m) for m in maxshape[:nav_dims])
        self.num_frames = count
        self._rows = shape[0]
        return Header(
            sig_shape=sig,
            dtype=dtype.newbyteorder("="),
            num_frames=count,
            nav_shape=nav,
            attrs={"format": "hdf5", "path": self.path, "ds_path": dset.name},
        )

    def receive(self, sink: Sink) -> None:
        assert self._dset is not None and self._followed is not None
        dset, count = self._dset, self.num_frames
        frame_bytes = math.prod(dset.shape[len(dset.shape) - self.sig_dims :]) * dset.dtype.itemsize
        rows_per_read = max(1, BATCH_BYTES // max(1, frame_bytes * self.per_row))
        done = 0
        while done < count:
            if sink.cancelled:
                return
            self._followed.stat()
            try:
                dset.refresh()
            except OSError as e:
                raise AcquisitionError(f"{self.path!r}: cannot re-read {dset.name!r}: {e}") from e
            rows = dset.shape[0]
            if rows < self._rows:
                raise AcquisitionError(
                    f"{self.path!r}: dataset {dset.name!r} shrank from {self._rows} to {rows} "
                    "along its first axis while it was followed"
                )
            # a writer extends the dataset before it writes the new rows, which hold the
            # fill value until then: the rows of the look before are the written ones
            settled = min(rows, self._rows)
            self._rows = rows
            ready = min(count, settled * self.per_row)
            if ready <= done:
                if self.max_rows is not None and settled >= self.max_rows:
                    return  # complete, with fewer frames than the scan
                time.sleep(self.poll_interval)
                continue
            while done < ready and not sink.cancelled:
                first_row = done // self.per_row
                last_row = min(-(-ready // self.per_row), first_row + rows_per_read)
                block = dset[first_row:last_row]
                block = block.reshape((-1, *block.shape[block.ndim - self.sig_dims :]))
                skip = done - first_row * self.per_row
                stop = min(ready, last_row * self.per_row) - first_row * self.per_row
                sink.put(done, block[skip:stop])
                done += stop - skip

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = self._dset = None
