"""DECTRIS SIMPLON FileWriter series (NXmx legacy layout) written with h5py + hdf5plugin.

A master ``<base>_master.h5`` with detector metadata and ``/entry/data/data_NNNNNN`` external
links; data files ``<base>_data_NNNNNN.h5`` with ``/entry/data/data`` (frames, y, x), chunked
by `chunk_frames` frames and compressed by hdf5plugin's filters; optionally ARINA's
``<base>.h5`` with ``STEM Metadata``. Written from the layout in the format notes, not from
any reader's code.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

DETECTOR = {
    "description": b"Dectris ARINA Si",
    "detector_number": b"E-02-0001",
    "sensor_material": b"Si",
    "x_pixel_size": 75e-6,
    "y_pixel_size": 75e-6,
    "count_time": 0.00009,
    "frame_time": 0.0001,
    "beam_center_x": 96.5,
    "beam_center_y": 95.0,
}


def compression(kind: str) -> dict:
    """h5py ``create_dataset`` keywords of a compression: bslz4, lz4, bszstd, gzip, none."""
    import hdf5plugin

    if kind == "bslz4":
        return dict(hdf5plugin.Bitshuffle(nelems=0, cname="lz4"))
    if kind == "bslz4-small-blocks":
        return dict(hdf5plugin.Bitshuffle(nelems=16, cname="lz4"))
    if kind == "bszstd":
        return dict(hdf5plugin.Bitshuffle(nelems=0, cname="zstd"))
    if kind == "lz4":
        return dict(hdf5plugin.LZ4())
    if kind == "lz4-small-blocks":
        return dict(hdf5plugin.LZ4(nbytes=64))
    if kind == "gzip":
        return dict(compression="gzip")
    if kind == "none":
        return {}
    raise ValueError(kind)


def write_series(
    folder: Path,
    frames: np.ndarray,
    base: str = "series",
    per_file: int | None = None,
    chunk_frames: int = 1,
    kind: str = "bslz4",
    scan: tuple[int, int] | None = None,
    scan_step_nm: float | None = None,
    bit_depth: int | None = None,
    in_master: bool = False,
) -> Path:
    """Write `frames` (n, y, x) as a series; the master's path. `per_file` frames per data
    file (all in one if None); `scan` writes ``<base>.h5`` with NumPixelsY/X."""
    import h5py

    folder = Path(folder)
    n = frames.shape[0]
    per_file = per_file or max(n, 1)
    master = folder / f"{base}_master.h5"
    links = []
    if not in_master:
        for k, start in enumerate(range(0, n, per_file)):
            target = f"{base}_data_{k + 1:06d}.h5"
            with h5py.File(folder / target, "w") as g:
                block = frames[start : start + per_file]
                _write_data(g.require_group("entry/data"), "data", block, start, chunk_frames, kind)
            links.append(target)
    with write_master(master, frames.shape, frames.dtype, kind, links, bit_depth) as f:
        if in_master:
            _write_data(f["entry/data"], "data", frames, 0, chunk_frames, kind)
    if scan is not None:
        with h5py.File(folder / f"{base}.h5", "w") as f:
            group = f.create_group("STEM Metadata")
            group.attrs["NumPixelsY"] = np.int64(scan[0])
            group.attrs["NumPixelsX"] = np.int64(scan[1])
            if scan_step_nm is not None:
                group.attrs["Pixel Size"] = np.array([scan_step_nm], dtype=np.float64)
    return master


@contextlib.contextmanager
def write_master(master: Path, shape, dtype, kind: str, links, bit_depth: int | None = None):
    """The master of a series of `shape` (frames, y, x) frames, linking each data file
    named in `links` in order (the open h5py file, for more)."""
    import h5py

    with h5py.File(master, "w") as f:
        entry = f.create_group("entry")
        entry.attrs["NX_class"] = "NXentry"
        data = entry.create_group("data")
        data.attrs["NX_class"] = "NXdata"
        det = entry.create_group("instrument/detector")
        for key, value in DETECTOR.items():
            det[key] = value
        depth = bit_depth or np.dtype(dtype).itemsize * 8
        det["bit_depth_image"] = np.uint32(depth)
        det["bit_depth_readout"] = np.uint32(depth)
        spec = det.create_group("detectorSpecific")
        spec["nimages"] = np.uint64(shape[0])
        spec["ntrigger"] = np.uint64(1)
        spec["trigger_mode"] = b"ints"
        spec["compression"] = kind.split("-")[0].encode()
        spec["x_pixels_in_detector"] = np.uint32(shape[2])
        spec["y_pixels_in_detector"] = np.uint32(shape[1])
        spec["pixel_mask"] = np.zeros(shape[1:], dtype=np.uint32)
        for k, target in enumerate(links):
            data[f"data_{k + 1:06d}"] = h5py.ExternalLink(target, "/entry/data/data")
        data.attrs["signal"] = "data_000001"
        yield f


def _write_data(group, name, block, start, chunk_frames, kind):
    chunks = (max(1, min(chunk_frames, block.shape[0])), *block.shape[1:])
    dset = group.create_dataset(name, data=block, chunks=chunks, **compression(kind))
    dset.attrs["image_nr_low"] = np.uint64(start + 1)
    dset.attrs["image_nr_high"] = np.uint64(start + block.shape[0])
    return dset


def read_with_h5py(master: Path) -> np.ndarray:
    """The series' frames read through h5py and hdf5plugin, following the master's links."""
    import h5py
    import hdf5plugin  # noqa: F401

    with h5py.File(master, "r") as f:
        group = f["entry/data"]
        names = sorted(k for k in group if k.startswith("data_"))
        if not names:
            return group["data"][()]
        return np.concatenate([group[k][()] for k in names])
