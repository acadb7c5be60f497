"""Every dataset format, written from a known numpy array by the format's own writer.

``FORMATS`` is the table the conformance tests run through: adding a format is one
``Format(...)`` line (plus its writer). Writers use the format's own library (numpy, h5py,
zarr, scipy for CSR); nothing here reads data back through ltdask.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import scipy.sparse

import ltdask
from ltdask.io import open_hdf5, open_raw_csr, open_zarr
from ltdask.testing import reference_scan

#: odd shapes: they divide into no partition, chunk or tile size used below
NAV = (5, 7)
SIG = (9, 11)


def make_data(dtype, sparse: bool = False, seed: int = 0, nav=NAV, sig=SIG) -> np.ndarray:
    """`reference_scan` of `dtype`; mostly zeros (92 %) if `sparse`."""
    values = reference_scan(nav, sig, dtype, seed)
    if sparse:
        keep = np.random.default_rng(seed + 1).random(values.shape) < 0.08
        values = np.where(keep, values, 0).astype(values.dtype)
    return values


# -- writers: (folder, data) -> (what to open, keywords for the opener) --------------------
def write_raw(folder: Path, data):
    path = folder / "scan.raw"
    data.tofile(path)
    return path, dict(nav_shape=data.shape[:2], sig_shape=data.shape[2:], dtype=data.dtype)


def write_npy(folder: Path, data):
    path = folder / "scan.npy"
    np.save(path, data)
    return path, {}


def write_hdf5(folder: Path, data, **create):
    import h5py

    path = folder / "scan.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("entry/data", data=data, **create)
        f.create_dataset("entry/dark", data=np.zeros(data.shape[2:], data.dtype))
    return path, dict(key="entry/data")


def write_zarr(folder: Path, data, **create):
    import zarr

    path = folder / "scan.zarr"
    z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, **create)
    z[...] = data
    return path, {}


def write_raw_csr(
    folder: Path,
    data,
    indptr_dtype="<i8",
    indices_dtype="<i4",
    sync_offset: int | None = None,
    name: str = "scan",
    csr=None,
):
    """LiberTEM's raw_csr layout: three raw files and a TOML descriptor, written by hand.
    `csr`: the ``(frames, pixels)`` matrix to store as it is (rows with unsorted or
    duplicate indices too), `data` then giving only the shape and dtype."""
    frames = int(np.prod(data.shape[:2]))
    if csr is None:
        native = data.astype(data.dtype.newbyteorder("="))  # scipy.sparse needs native dtypes
        csr = scipy.sparse.csr_matrix(native.reshape(frames, -1))
    files = {}
    for part, arr, dtype in (
        ("indptr", csr.indptr, indptr_dtype),
        ("indices", csr.indices, indices_dtype),
        ("data", csr.data, data.dtype.str),
    ):
        files[part] = f"{name}_{part}.raw"
        np.asarray(arr).astype(dtype).tofile(folder / files[part])
    extra = "" if sync_offset is None else f"sync_offset = {sync_offset}\n"
    toml = (
        "[params]\n"
        'filetype = "raw_csr"\n'
        f"nav_shape = {list(data.shape[:2])}\n"
        f"sig_shape = {list(data.shape[2:])}\n"
        f"{extra}"
        "\n[raw_csr]\n"
        f'indptr_file = "{files["indptr"]}"\n'
        f'indptr_dtype = "{np.dtype(indptr_dtype).str}"\n'
        f'indices_file = "{files["indices"]}"\n'
        f'indices_dtype = "{np.dtype(indices_dtype).str}"\n'
        f'data_file = "{files["data"]}"\n'
        f'data_dtype = "{data.dtype.str}"\n'
    )
    path = folder / f"{name}.toml"
    path.write_text(toml)
    return path, {}


def _in_memory(folder, data):
    return data, {}


def _in_dask(folder, data):
    return da.from_array(data, chunks=(2, 3, 5, 11)), {}


@dataclass(frozen=True)
class Format:
    """One dataset format: how to write a scan and open it again."""

    id: str
    dtype: str
    write: Callable
    opener: Callable
    sparse: bool = False
    #: lives in memory: nothing to open with ltdask.open or xarray
    in_memory: bool = False
    #: keywords for the writer
    create: dict | None = None
    #: frame shape, where the format needs another than ``SIG``
    sig: tuple[int, ...] = SIG
    #: the format stores float16 frames (DM and the counting detectors' formats do not)
    float16: bool = True

    def data(self, seed: int = 0) -> np.ndarray:
        return make_data(self.dtype, sparse=self.sparse, seed=seed, sig=self.sig)

    def write_to(self, folder: Path, data):
        return self.write(folder, data, **(self.create or {}))

    def open(self, folder: Path, data=None):
        """``(dataset, truth)``: the scan written to `folder` and opened again."""
        data = self.data() if data is None else data
        target, kwargs = self.write_to(folder, data)
        return self.opener(target, **kwargs), data


FORMATS = [
    Format("raw", "<u2", write_raw, ltdask.open_raw),
    Format("npy", "<f4", write_npy, ltdask.open_npy),
    Format("memory-numpy", "<f8", _in_memory, ltdask.from_array, in_memory=True),
    Format("memory-dask", "<i4", _in_dask, ltdask.from_array, in_memory=True),
    Format(
        "hdf5-chunked-gzip",
        "<u2",
        write_hdf5,
        open_hdf5,
        create=dict(chunks=(2, 3, 4, 6), compression="gzip", shuffle=True),
    ),
    Format("hdf5-contiguous-bigendian", ">u2", write_hdf5, open_hdf5),
    Format("hdf5-chunked-frames", "<f4", write_hdf5, open_hdf5, create=dict(chunks=(1, 3, 9, 11))),
    Format(
        "zarr-v2", "<i4", write_zarr, open_zarr, create=dict(chunks=(2, 3, 4, 6), zarr_format=2)
    ),
    Format("zarr-v3", "<f4", write_zarr, open_zarr, create=dict(chunks=(2, 3, 4, 6))),
    Format(
        "zarr-v3-sharded",
        "<u2",
        write_zarr,
        open_zarr,
        create=dict(chunks=(1, 3, 3, 11), shards=(2, 6, 9, 11)),
    ),
    Format("raw-csr", "<f4", write_raw_csr, open_raw_csr, sparse=True),
]


def write_mib(folder: Path, data, raw: bool = False, depth: int = 12):
    """Merlin ``.mib`` + ``.hdr`` through the MIB tests' own writer (``tests/mibfiles.py``)."""
    from helpers.mibfiles import write_hdr
    from helpers.mibfiles import write_mib as write_frames

    frames = data.reshape(-1, *data.shape[2:])
    path = folder / "scan.mib"
    write_frames(path, frames, depth=depth, raw=raw)
    write_hdr(folder / "scan.hdr", len(frames), depth=depth, scan=data.shape[:2])
    return path, {}


def _mib_formats() -> list[Format]:
    """MIB joins the table once ``ltdask.io.formats.mib`` and ``tests/mibfiles.py`` exist."""
    if importlib.util.find_spec("ltdask.io.formats.mib") is None:
        return []
    try:
        from helpers import mibfiles  # noqa: F401
    except ImportError:
        return []
    from ltdask.io import open_mib

    return [
        Format("mib-u16", ">u2", write_mib, open_mib, float16=False),
        # raw mode packs 4 pixels per 64-bit word: rows of a multiple of 4 pixels
        Format("mib-raw-r12", ">u2", write_mib, open_mib, create=dict(raw=True), sig=(9, 12)),
    ]


FORMATS += _mib_formats()


def write_mrc(folder: Path, data, flat: bool = False):
    """MRC through ``mrcfile``: a 4-D volume stack (the scan shape is in the file), or with
    `flat` an image stack of the frames (``nav_shape=`` given); big-endian data is written
    little-endian and then swapped (``tests/helpers/mrcfiles.py``)."""
    from helpers.mrcfiles import swap_byte_order
    from helpers.mrcfiles import write_mrc as write

    native = data.astype(data.dtype.newbyteorder("<"))
    frames = native.reshape(-1, *data.shape[2:]) if flat else native
    path = write(folder / "scan.mrc", frames, voxel_size=(1.5, 2.0, 1.0))
    if data.dtype.byteorder == ">":
        path = swap_byte_order(path, folder / "scan_be.mrc")
    return path, (dict(nav_shape=data.shape[:2]) if flat else {})


def write_dm(folder: Path, data, version: int = 4, pad: int = 0):
    """DM3/DM4 through the tests' own writer (``tests/helpers/dmfiles.py``)."""
    from helpers.dmfiles import write_dm as write

    cal = [(2.0, 1.0, "nm"), (2.0, 1.0, "nm"), (0.1, 4.0, "1/nm"), (0.1, 5.0, "1/nm")]
    return write(folder / f"scan.dm{version}", data, version, cal, pad=pad), {}


def _mrc_dm_formats() -> list[Format]:
    """MRC and DM join the table once their readers and test writers exist."""
    if importlib.util.find_spec("ltdask.io.formats.mrc") is None:
        return []
    try:
        from helpers import dmfiles, mrcfiles  # noqa: F401
    except ImportError:
        return []
    from ltdask.io import open_dm, open_mrc

    rows = [
        Format("dm4-u16", "<u2", write_dm, open_dm, float16=False),
        # float32 pixels at an odd byte offset: unaligned views of the map
        Format(
            "dm3-f4-odd-offset",
            "<f4",
            write_dm,
            open_dm,
            create=dict(version=3, pad=1),
            float16=False,
        ),
    ]
    if importlib.util.find_spec("mrcfile") is not None:
        rows += [
            Format("mrc-volume-stack-u16", "<u2", write_mrc, open_mrc),
            Format("mrc-stack-f4-bigendian", ">f4", write_mrc, open_mrc, create=dict(flat=True)),
        ]
    return rows


FORMATS += _mrc_dm_formats()


def write_dectris(folder: Path, data, kind: str = "bslz4", chunk_frames: int = 4):
    """A DECTRIS series (master + 3 data files, partial last chunks) with the scan shape in
    ARINA's ``<base>.h5`` (``tests/helpers/dectrisfiles.py``)."""
    from helpers.dectrisfiles import write_series

    frames = data.reshape(-1, *data.shape[2:])
    master = write_series(folder, frames, per_file=13, chunk_frames=chunk_frames, kind=kind,
                          scan=data.shape[:2])  # fmt: skip
    return master, {}


def write_velox(folder: Path, data, **create):
    """A Velox ``.emd`` with the stack and a HAADF image (``tests/helpers/emdfiles.py``)."""
    from helpers.emdfiles import write_emd

    frames = data.reshape(-1, *data.shape[2:])
    return write_emd(folder / "scan.emd", frames, scan=data.shape[:2], extra_image=True,
                     **create), {}  # fmt: skip


def _dectris_velox_formats() -> list[Format]:
    """DECTRIS series (bitshuffle-LZ4, LZ4) and Velox EMD (frame chunks, contiguous)."""
    if importlib.util.find_spec("hdf5plugin") is None:
        return []
    from ltdask.io import open_dectris, open_emd

    return [
        Format("dectris-bslz4", "<u2", write_dectris, open_dectris),
        Format(
            "dectris-lz4-u32",
            "<u4",
            write_dectris,
            open_dectris,
            create=dict(kind="lz4", chunk_frames=3),
        ),  # fmt: skip
        Format("velox-emd", "<u2", write_velox, open_emd),
        Format(
            "velox-emd-contiguous", "<f4", write_velox, open_emd, create=dict(chunked=False)
        ),  # fmt: skip
    ]


FORMATS += _dectris_velox_formats()


def _empad_blo_tvips_formats() -> list[Format]:
    """EMPAD (XML + raw), NanoMEGAS BLO and a three-file TVIPS series, by the writers of
    ``tests/helpers/{empad,blo,tvips}files.py``; the openers find the scan shape themselves."""
    from helpers.blofiles import write_blo
    from helpers.empadfiles import write_empad
    from helpers.tvipsfiles import scan_positions, write_tvips
    from ltdask.io import open_blo, open_empad, open_tvips

    def frames(data):
        return data.reshape(-1, *data.shape[2:])

    def empad(folder: Path, data):
        return write_empad(folder, frames(data), data.shape[:2]), {}

    def blo(folder: Path, data):
        return write_blo(folder / "scan.blo", frames(data), data.shape[:2], data.itemsize * 8), {}

    def tvips(folder: Path, data):
        nav = data.shape[:2]
        lead = np.zeros((2, *data.shape[2:]), data.dtype)  # frames before the scan starts
        stack = np.concatenate([lead, frames(data)])
        paths = write_tvips(folder, stack, 13, positions=scan_positions(nav, lead_in=2))
        return paths[1], {}

    return [
        Format("empad", "<f4", empad, open_empad, sig=(128, 128)),
        Format("blo-u8", "<u1", blo, open_blo, sig=(13, 13)),
        Format("blo-u16", "<u2", blo, open_blo, sig=(11, 11)),
        Format("tvips-3-files", "<u2", tvips, open_tvips, float16=False),
    ]


FORMATS += _empad_blo_tvips_formats()


def write_seq(folder: Path, data, pad: int = 0):
    """DE StreamPix ``.seq`` through the SEQ tests' writer (``tests/helpers/seqfiles.py``)."""
    from helpers.seqfiles import write_seq as write_frames

    path = write_frames(folder / "scan.seq", data.reshape(-1, *data.shape[2:]), pad=pad)
    return path, dict(nav_shape=data.shape[:2])


def write_frms6(folder: Path, data):
    """pnCCD ``.hdr`` + ``.frms6`` files (binning 1, an all-zero dark file) through the FRMS6
    tests' writer; opened without the dark correction, so frames read as written."""
    from helpers.frms6files import write_acquisition

    frames = data.reshape(-1, *data.shape[2:])
    dark = np.zeros((2, *data.shape[2:]), data.dtype)
    hdr = write_acquisition(folder, frames, dark, 1, data.shape[:2], splits=(len(frames) // 3,))
    return hdr, dict(enable_offset_correction=False)


def _detector_formats_a() -> list[Format]:
    """FRMS6 and DE SEQ (issue 17): binary layouts written by the tests' own writers."""
    from ltdask.io import open_frms6, open_seq

    return [
        Format("seq-u16", "<u2", write_seq, open_seq, float16=False),
        Format("seq-u8-odd-footer", "<u1", write_seq, open_seq, create=dict(pad=3), float16=False),
        Format("frms6", "<u2", write_frms6, open_frms6, sig=(10, 11)),
    ]


FORMATS += _detector_formats_a()

#: formats whose frames are too large for this table (its 5 x 7 scans in tiny chunks), and
#: the test module that runs the same checks (schedulers, ROI, chunking, pickling) on a few
#: frames: K2IS frames are 1860 x 2048, a 5 x 7 scan of them 266 MB (2 GB as float64)
TOO_LARGE_FOR_TABLE = {"k2is": "formats/test_k2is.py"}


HAVE_H5PY = importlib.util.find_spec("h5py") is not None
if not HAVE_H5PY:  # h5py is an optional dependency of ltdask
    FORMATS = [f for f in FORMATS if f.opener is not open_hdf5]

FORMAT_PARAMS = [pytest.param(f, id=f.id) for f in FORMATS]
FILE_FORMAT_PARAMS = [pytest.param(f, id=f.id) for f in FORMATS if not f.in_memory]
