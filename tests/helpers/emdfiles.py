"""Thermo Fisher Velox ``.emd`` files written with h5py, from the published description.

The layout (see the format notes): ``/Version`` holds JSON (``{"version": "11", "format":
"Velox"}``); each image series is ``/Data/Image/<32 hex uuid>/`` with ``Data`` of shape
``(y, x, frames)`` in ``(y, x, 1)`` chunks, ``Metadata`` of shape ``(60000, frames)`` uint8
holding each frame's JSON (NUL padded) in its column, and ``FrameLookupTable``. All JSON
values are strings. Written from that description, not from any reader's code.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np

METADATA_ROWS = 60000


def frame_metadata(
    frames: np.ndarray,
    detector: str = "Ceta",
    pixel_size: tuple[float, float] = (2.5e8, 2.5e8),
    unit: str = "1/m",
    offset: tuple[float, float] = (-1.2e10, -1.1e10),
    scan: tuple[int, int] | None = None,
) -> dict:
    """The JSON of one frame of a stack of `frames` (n, y, x)."""
    n, ny, nx = frames.shape
    meta = {
        "Core": {"MetadataDefinitionVersion": "7.9", "MetadataSchemaVersion": "v1/2013/07"},
        "Instrument": {"InstrumentModel": "Talos F200X", "Manufacturer": "FEI Company"},
        "Acquisition": {"AcquisitionStartDatetime": {"DateTime": "1700000000"}},
        "Optics": {"AccelerationVoltage": "200000"},
        "Stage": {},
        "CustomProperties": {},
        "Scan": {"DwellTime": "0.001", "FrameTime": "0.001", "ScanRotation": "0"},
        "Detectors": {"Detector-0": {"DetectorName": detector, "ExposureTime": "0.001"}},
        "BinaryResult": {
            "Detector": detector,
            "DetectorIndex": "0",
            "Encoding": "unsigned" if frames.dtype.kind == "u" else "signed",
            "BitsPerPixel": str(frames.dtype.itemsize * 8),
            "ImageSize": {"width": str(nx), "height": str(ny)},
            "PixelSize": {"width": repr(pixel_size[1]), "height": repr(pixel_size[0])},
            "PixelUnitX": unit,
            "PixelUnitY": unit,
            "Offset": {"x": repr(offset[1]), "y": repr(offset[0])},
        },
    }
    if scan is not None:
        meta["Scan"]["ScanSize"] = {"width": str(scan[1]), "height": str(scan[0])}
    return meta


def add_series(f, frames: np.ndarray, meta: dict, chunked: bool = True, **create) -> str:
    """Add the stack `frames` (n, y, x) to the open h5py file `f`; its uuid."""
    name = uuid.uuid4().hex
    group = f.create_group(f"Data/Image/{name}")
    stored = np.ascontiguousarray(np.moveaxis(frames, 0, 2))  # (y, x, n): frames last
    chunks = (*stored.shape[:2], 1) if chunked else None
    group.create_dataset("Data", data=stored, chunks=chunks, **create)
    text = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    column = np.zeros(METADATA_ROWS, dtype=np.uint8)
    column[: text.size] = text
    group.create_dataset("Metadata", data=np.repeat(column[:, None], frames.shape[0], axis=1))
    group.create_dataset("FrameLookupTable", data=np.arange(frames.shape[0], dtype=np.uint32))
    return name


def write_emd(
    path: Path,
    frames: np.ndarray,
    scan: tuple[int, int] | None = None,
    extra_image: bool = False,
    chunked: bool = True,
    create: dict | None = None,
    **meta,
) -> Path:
    """A Velox file holding the stack `frames` (and a one-frame HAADF image if
    `extra_image`); `create`: h5py keywords for its ``Data``."""
    import h5py

    with h5py.File(path, "w") as f:
        version = json.dumps({"version": "11", "format": "Velox"})
        f.create_dataset(
            "Version", data=np.array([version.encode()], dtype=object), dtype=h5py.string_dtype()
        )
        add_series(f, frames, frame_metadata(frames, scan=scan, **meta), chunked, **(create or {}))
        if extra_image:
            image = np.arange(6 * 8, dtype=np.uint16).reshape(1, 6, 8)
            add_series(f, image, frame_metadata(image, "HAADF", (1e-10, 1e-10), "m", (0, 0)))
        f.create_group("Operations")
    return Path(path)
