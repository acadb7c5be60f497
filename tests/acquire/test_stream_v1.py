"""The image parts of a DECTRIS stream read without json.loads where their layout allows
(``ltdask.acquire._stream_v1``): every part reads as json.loads reads it, whatever its
layout, and what is not JSON fails as json.loads fails."""

from __future__ import annotations

import json

import pytest

from ltdask.acquire import _stream_v1

HEAD = {"htype": "dimage-1.0", "series": 7, "frame": 1234, "hash": "0f" * 16}
DESC = {"htype": "dimage_d-1.0", "shape": [192, 96], "type": "uint16"}
DESC.update(encoding="bs16-lz4<", size=5862)


def _layouts(value: dict) -> list:
    return [
        pytest.param(json.dumps(value).encode(), id="python-json"),
        pytest.param(json.dumps(value, separators=(",", ":")).encode(), id="compact"),
        pytest.param(json.dumps(value, indent=2).encode(), id="indented"),
        pytest.param(b" \r\n" + json.dumps(value).encode() + b"\t ", id="surrounding-space"),
        pytest.param(json.dumps(dict(reversed(value.items()))).encode(), id="keys-reversed"),
        pytest.param(json.dumps({**value, "extra": [1, 2]}).encode(), id="more-keys"),
        pytest.param(json.dumps(value).replace("-1.0", "\\u002d1.0").encode(), id="escape"),
        pytest.param(json.dumps({**value, "frame": 0, "size": 0}).encode(), id="zeros"),
        pytest.param(json.dumps({**value, "series": 10**30}).encode(), id="big-number"),
    ]


@pytest.mark.parametrize("part", _layouts(HEAD))
def test_image_heads_read_as_json_reads_them(part):
    expected = {k: v for k, v in json.loads(part).items() if k != "hash"}
    got = _stream_v1.loads(part)
    assert {k: got[k] for k in expected} == expected
    assert set(got) <= set(json.loads(part))


@pytest.mark.parametrize("part", _layouts(DESC))
def test_image_descriptions_read_as_json_reads_them(part):
    got = _stream_v1.description(part)
    expected = json.loads(part)
    assert got == expected and type(got["shape"][0]) is int


NOT_JSON = [
    pytest.param(b'{"htype": "dimage-1.0", "series": 01, "frame": 2, "hash": ""}', id="zero-led"),
    pytest.param(b'{"htype": "dimage-1.0", "series": 1, "frame": 2, "hash": "",}', id="comma"),
    pytest.param(b'{"htype":"dimage_d-1.0","shape":[1,2],"type":"uint8","encoding":"<",'
                 b'"size":-}', id="no-number"),
    pytest.param(b'{"htype": "dimage-1.0", "series": 1, "frame": 2, "hash": "ab"', id="cut"),
    pytest.param(b"\x89PNG\r\n", id="binary"),
]  # fmt: skip


@pytest.mark.parametrize("part", NOT_JSON)
def test_what_is_not_json_fails_as_json_fails(part):
    with pytest.raises((ValueError, UnicodeDecodeError)):
        json.loads(part)
    with pytest.raises((ValueError, UnicodeDecodeError)):
        _stream_v1.loads(part)
    with pytest.raises((ValueError, UnicodeDecodeError)):
        _stream_v1.description(part)
