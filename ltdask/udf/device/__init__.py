"""The device a partition's tiles are staged to: a small interface (`Device`) with a CuPy
implementation (`CupyDevice`) and a numpy stand-in (`StandInDevice`) that runs the same
pipeline synchronously on the CPU, so that tests without a GPU exercise its buffer reuse,
ordering, conversion and corrections; and the pipeline itself (`TileStager`,
`DeviceCorrections`), which the device tile path (`ltdask.udf.paths.device`) runs."""

from __future__ import annotations

from ltdask.udf.device.base import (
    CupyDevice,
    Device,
    StandInDevice,
    current_device,
    stand_in,
)
from ltdask.udf.device.staging import DeviceCorrections, TileStager

__all__ = [
    "CupyDevice",
    "Device",
    "DeviceCorrections",
    "StandInDevice",
    "TileStager",
    "current_device",
    "stand_in",
]
