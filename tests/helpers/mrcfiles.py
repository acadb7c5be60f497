"""MRC files for the tests, written by ``mrcfile`` (the independent writer), with two
variants made from its output: the other byte order, and a Velox-like file with an FEI2
extended header."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the FEI2 record size and how many records Velox reserves
FEI2_RECORD = 888
VELOX_RECORDS = 1024


def write_mrc(path, data: np.ndarray, voxel_size=None, stack: bool = True) -> Path:
    """`data` through ``mrcfile.new``: 3-D as an image stack (``stack``) or a volume, 4-D as
    a volume stack (``mrcfile``'s own choice)."""
    import mrcfile

    path = Path(path)
    with mrcfile.new(path, overwrite=True) as mrc:
        mrc.set_data(data)
        if data.ndim == 3 and stack:
            mrc.set_image_stack()
        if voxel_size is not None:
            mrc.voxel_size = voxel_size
    return path


def swap_byte_order(path, out) -> Path:
    """The MRC file at `path` rewritten in the other byte order (header, data and stamp)."""
    import mrcfile
    from mrcfile.dtypes import HEADER_DTYPE

    raw = Path(path).read_bytes()
    header = np.frombuffer(raw[:1024], dtype=HEADER_DTYPE).copy()
    with mrcfile.open(path, permissive=False) as mrc:
        data = np.asarray(mrc.data)
        ext = int(mrc.header.nsymbt)
    other = header.dtype.newbyteorder()
    swapped = header.astype(other)
    big = swapped.dtype["nx"].byteorder == ">" or (
        swapped.dtype["nx"].byteorder == "=" and np.little_endian is False
    )
    swapped["machst"] = (0x11, 0x11, 0, 0) if big else (0x44, 0x44, 0, 0)
    body = data.astype(data.dtype.newbyteorder(">" if big else "<")).tobytes()
    out = Path(out)
    out.write_bytes(swapped.tobytes() + raw[1024 : 1024 + ext] + body)
    return out


def write_velox_like(path, frames: np.ndarray, pixel_size_m: float = 5.68e-9) -> Path:
    """A flat stack of frames with a Velox-style FEI2 extended header of 1024 records (the
    first record filled in), written through ``mrcfile``."""
    import mrcfile
    from mrcfile.dtypes import get_ext_header_dtype

    path = Path(path)
    ext_dtype = get_ext_header_dtype(b"FEI2", "<")
    ext = np.zeros(VELOX_RECORDS, dtype=ext_dtype)
    ext["Metadata size"] = FEI2_RECORD
    ext["Metadata version"] = 2
    ext["Application"] = b"Velox"
    ext["Pixel size X"] = pixel_size_m
    ext["Pixel size Y"] = pixel_size_m
    ext["Camera name"] = b"EMPAD"
    ext["Dwell time"] = 1e-3
    with mrcfile.new(path, overwrite=True) as mrc:
        mrc.set_data(frames)
        mrc.set_image_stack()
        mrc.set_extended_header(ext)
        mrc.header.exttyp = b"FEI2"
        mrc.voxel_size = (pixel_size_m * 1e10, pixel_size_m * 1e10, 1.0)
    return path


def write_de_movie(folder, frames: np.ndarray, info: dict, name="20241021_00405_movie.mrc"):
    """A Direct Electron movie: the frames as mrcfile writes a volume (DE headers say space
    group 1 and mz = nz), and ``key = value`` lines in ``<acquisition>_info.txt``."""
    folder = Path(folder)
    path = write_mrc(folder / name, frames, stack=False)
    stem = name.removesuffix("_movie.mrc")
    lines = [f"{k} = {v}" for k, v in info.items()]
    (folder / f"{stem}_info.txt").write_text("\n".join(lines) + "\n")
    return path
