"""The JSON parts of a DECTRIS stream (SIMPLON stream v1), read at the stream's rate.

Each image brings two small JSON objects, ``dimage-1.0`` (series, frame, hash) and
``dimage_d-1.0`` (shape, type, encoding, size); `json.loads` costs ~3-4 us each, a tenth of
what a frame may cost in all at 100k frames/s. Detectors and simulators write them in one
layout, which a regular expression reads whole (``fullmatch``: the part *is* that object,
nothing else in it) in a fraction of that; any other layout (other key order, more keys,
escapes) goes through `json.loads`, so what is read never depends on the layout.
"""

from __future__ import annotations

import json
import re

_WS = rb"[ \t\n\r]*"
_INT = rb"(0|[1-9][0-9]*)"


def _object(*fields: bytes) -> re.Pattern:
    """A JSON object of these ``"key": value`` fields in this order, whitespace anywhere."""
    sep = _WS + rb"," + _WS
    body = sep.join(f.replace(b":", _WS + b":" + _WS, 1) for f in fields)
    return re.compile(_WS + rb"\{" + _WS + body + _WS + rb"\}" + _WS)


_IMAGE = _object(
    rb'"htype":"dimage-1\.0"', rb'"series":' + _INT, rb'"frame":' + _INT, rb'"hash":"[0-9a-fA-F]*"'
)
_DESCRIPTION = _object(
    rb'"htype":"dimage_d-1\.0"',
    rb'"shape":\[' + _WS + _INT + _WS + rb"," + _WS + _INT + _WS + rb"\]",
    rb'"type":"([a-z0-9]+)"',
    rb'"encoding":"([a-z0-9<>-]*)"',
    rb'"size":' + _INT,
)
#: longer parts are not one of the two (a blob, a configuration)
_LONGEST = 512


def loads(part):
    """A stream part's JSON value, as `json.loads` gives it (an image's first part without
    its hash: nothing uses it); raises `ValueError` or `UnicodeDecodeError` where it is not
    JSON.

    Examples
    --------
    >>> loads(b'{"htype": "dimage-1.0", "series": 3, "frame": 17, "hash": "ab12"}')
    {'htype': 'dimage-1.0', 'series': 3, 'frame': 17}
    >>> loads(b'{"frame": 17, "htype": "dimage-1.0", "series": 3}')["frame"]
    17
    """
    if len(part) <= _LONGEST:
        match = _IMAGE.fullmatch(part)
        if match is not None:
            return {"htype": "dimage-1.0", "series": int(match[1]), "frame": int(match[2])}
    return json.loads(part)


def description(part):
    """An image's data header (``dimage_d-1.0``) as `json.loads` gives it; raises
    `ValueError` or `UnicodeDecodeError` where it is not JSON.

    Examples
    --------
    >>> part = b'{"htype":"dimage_d-1.0","shape":[192,96],"type":"uint16",'
    >>> part += b'"encoding":"bs16-lz4<","size":5862}'
    >>> description(part)["shape"], description(part)["size"]
    ([192, 96], 5862)
    """
    if len(part) <= _LONGEST:
        match = _DESCRIPTION.fullmatch(part)
        if match is not None:
            return {
                "htype": "dimage_d-1.0",
                "shape": [int(match[1]), int(match[2])],
                "type": match[3].decode(),
                "encoding": match[4].decode(),
                "size": int(match[5]),
            }
    return json.loads(part)


__all__ = ["description", "loads"]
