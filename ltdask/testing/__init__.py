"""The conformance kit of dataset formats: what a format, built in or plug-in, must do,
checked against the array it is written from (as ``zarr.testing`` does for stores).

A format's tests check that the registry loads it and ``ltdask.open`` tells its scans
(`check_registered`), write a known array (`reference_scan`) in the format, open it, and
run the checks against the array: its shape and dtype; its values through ``to_dask`` in any
partitions and chunks; every tile shape the negotiation can choose, read as the format's
dtype and as float32; ``sync_offset=``; UDF runs over an ROI in partitions and tiles that
do not divide the scan; pickling; a run on a `distributed` cluster; and its bad inputs,
which must raise the documented errors. Either call the ``check_*`` functions, or subclass
`FormatTests` in a test module and get them all as tests.

ltdask's own formats run these checks (``tests/io/test_conformance.py``); ``import ltdask``
does not import this module, and it does not import pytest.

Examples
--------
>>> import numpy as np, ltdask
>>> from ltdask.testing import check_roi, check_values, reference_scan
>>> data = reference_scan(nav=(4, 5), sig=(6, 7), dtype="<f4")
>>> ds = ltdask.from_array(data)
>>> check_values(ds, data)
>>> check_roi(ds, data)
"""

from ltdask.testing._checks import (
    COMMON_BAD_INPUTS,
    DOCUMENTED_ERRORS,
    SMALL_PARTITIONS,
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
    native,
    reference_scan,
    roi_for,
    shifted,
    takes_sync_offset,
    tiling_preferences,
)
from ltdask.testing._format_tests import FormatTests

__all__ = [
    "COMMON_BAD_INPUTS",
    "DOCUMENTED_ERRORS",
    "SMALL_PARTITIONS",
    "BadInput",
    "FormatTests",
    "check_bad_input",
    "check_distributed",
    "check_pickle",
    "check_registered",
    "check_roi",
    "check_shape_and_dtype",
    "check_sync_offset",
    "check_tile_shapes",
    "check_values",
    "native",
    "reference_scan",
    "roi_for",
    "shifted",
    "takes_sync_offset",
    "tiling_preferences",
]
