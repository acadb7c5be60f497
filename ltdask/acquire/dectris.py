"""DECTRIS detectors (ARINA, QUADRO, EIGER) streaming SIMPLON stream v1 over ZeroMQ.

`DectrisSource` connects a PULL socket to the detector control unit's stream port, skips to
the series' global header (``dheader-1.0`` and the detector configuration: frame size, bit
depth, trigger mode and counts), then takes the four-part image messages (``dimage-1.0``
with the series and the 0-based frame number, ``dimage_d-1.0`` with shape, type, encoding
and size, the blob, ``dconfig-1.0``) until ``dseries_end-1.0``. The blobs stay compressed
through the acquisition's store, each in a fixed-size slot (`ltdask.acquire.bslz4`; the
store copies only the blob's bytes), and are decoded in the partition tasks, in parallel:
the receiver thread only parses the message headers (`ltdask.acquire._stream_v1`) and
copies the blobs (~7 us of CPU a frame in Python, ~11 us in zmq, ~2 us in the store's
put), the decoding is the costly part (~24 us for a 192x192 uint16 diffraction frame, one
thread) and runs on every core beside the UDFs. Optionally the source arms the detector
through the SIMPLON REST API (urllib).
"""

from __future__ import annotations

import collections
import json
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np

from ltdask.acquire import _stream_v1, bslz4
from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.source import Header, Sink, Source
from ltdask.acquire.store import AcquisitionError

_DTYPES = {8: np.uint8, 16: np.uint16, 32: np.uint32}
#: seconds a receive waits before it looks at the acquisition's cancel flag again
POLL = 0.1
#: frames handed to the store at once (fewer where the stream pauses or jumps)
BATCH = 64
#: header parts of ``header_detail: all`` (each followed by its array, skipped)
_DETAIL_PARTS = ("dflatfield-1.0", "dpixelmask-1.0", "dcountrate_table-1.0")


def _zmq():
    try:
        import zmq
    except ImportError as e:  # pragma: no cover  (pyzmq is in the live extra)
        raise ImportError(
            "a DECTRIS stream needs pyzmq: pip install ltdask[live] (or pip install pyzmq)"
        ) from e
    return zmq


def frames_in_series(config: dict) -> int:
    """The images a series has, from the detector configuration (SIMPLON: one image per
    trigger for ``exte``/``inte``, ``nimages`` per trigger for ``exts``/``ints``)."""
    mode = config.get("trigger_mode", "exte")
    ntrigger = int(config.get("ntrigger", 1))
    if mode in ("exte", "inte"):
        return ntrigger
    return ntrigger * int(config.get("nimages", 1))


class DectrisSource(Source):
    """Frames of a DECTRIS detector's zmq stream (SIMPLON stream v1).

    Parameters
    ----------
    host, port
        The stream's address (the detector control unit, port 9999).
    api_port
        The SIMPLON REST API's port (80 on a DCU) for `command`, `set_config` and arming.
    arm
        Arm the detector (REST ``command/arm``, after `detector_config`) when opening; the
        stream's header must then be of the series the arm returns.
    detector_config
        Detector settings put before arming, in order (e.g. ``{"trigger_mode": "exte",
        "ntrigger": 4096, "compression": "bslz4"}``).
    api_version
        The REST API's version in its URLs.
    receive_hwm
        Messages the socket queues at most (zmq's receive high-water mark).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9999,
        api_port: int | None = None,
        arm: bool = False,
        detector_config: dict | None = None,
        api_version: str = "1.8.0",
        receive_hwm: int = 4096,
    ) -> None:
        if arm and api_port is None:
            raise AcquisitionError(f"dectris {host}:{port}: arm=True needs the REST api_port")
        self.host, self.port, self.api_port = host, int(port), api_port
        self.arm = arm
        self.detector_config = dict(detector_config or {})
        self.api_version = api_version
        self.receive_hwm = int(receive_hwm)
        self.name = f"dectris {host}:{port}"
        self._context: Any = None
        self._socket: Any = None
        self._pending: collections.deque = collections.deque()
        self.series: int | None = None
        self.config: dict = {}

    # -- REST ------------------------------------------------------------------------------
    def _rest(self, method: str, path: str, value=None, timeout: float = 10.0):
        if self.api_port is None:
            raise AcquisitionError(f"{self.name}: the REST API needs api_port")
        url = f"http://{self.host}:{self.api_port}{path}"
        body = None if value is None else json.dumps({"value": value}).encode()
        request = urllib.request.Request(url, data=body if method == "PUT" else None, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:200].decode(errors="replace")
            raise AcquisitionError(f"{self.name}: {method} {url}: HTTP {e.code} {detail}") from e
        except (urllib.error.URLError, OSError) as e:
            raise AcquisitionError(
                f"{self.name}: cannot reach the REST API at {url} ({e}); check api_port"
            ) from e
        return json.loads(text) if text.strip() else None

    def command(self, name: str):
        """A detector command (``arm``, ``trigger``, ``disarm``, ``cancel``...)."""
        return self._rest("PUT", f"/detector/api/{self.api_version}/command/{name}")

    def set_config(self, param: str, value, module: str = "detector"):
        """Put a configuration value (`module`: ``detector``, ``stream``, ``filewriter``)."""
        return self._rest("PUT", f"/{module}/api/{self.api_version}/config/{param}", value)

    def get_config(self, param: str, module: str = "detector"):
        """A configuration value."""
        answer = self._rest("GET", f"/{module}/api/{self.api_version}/config/{param}")
        return answer["value"] if isinstance(answer, dict) and "value" in answer else answer

    # -- the stream ------------------------------------------------------------------------
    def _next_part(self, deadline: float | None):
        """The stream's next message part (parts in order, whatever their multipart
        grouping); None when `deadline` (or one `POLL` for None) passes first."""
        if self._pending:
            return self._pending.popleft()
        zmq = _zmq()
        assert self._socket is not None
        try:  # (while the stream flows, without a poll per message)
            self._pending.extend(self._socket.recv_multipart(zmq.NOBLOCK, copy=True))
            return self._pending.popleft()
        except zmq.Again:
            pass
        while True:
            wait = POLL if deadline is None else min(POLL, deadline - time.monotonic())
            if wait <= 0:
                return None
            if self._socket.poll(int(wait * 1000) + 1, zmq.POLLIN):
                self._pending.extend(self._socket.recv_multipart(copy=True))
                return self._pending.popleft()
            if deadline is None:
                return None

    def _json(self, part, what: str) -> dict:
        try:
            value = json.loads(part)
        except (ValueError, UnicodeDecodeError) as e:
            raise AcquisitionError(
                f"{self.name}: {what} is not JSON ({len(part)} bytes: {bytes(part[:40])!r})"
            ) from e
        if not isinstance(value, dict):
            raise AcquisitionError(f"{self.name}: {what} is {value!r}, expected a JSON object")
        return value

    def open(self, timeout: float) -> Header:
        zmq = _zmq()
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.RCVHWM, self.receive_hwm)
        self._socket.setsockopt(zmq.LINGER, 0)
        try:
            self._socket.connect(f"tcp://{self.host}:{self.port}")
            if self.arm:
                self.set_config("mode", "enabled", module="stream")
                self.set_config("header_detail", "basic", module="stream")
                for param, value in self.detector_config.items():
                    self.set_config(param, value)
                self.series = int(self.command("arm")["sequence id"])
            return self._read_header(time.monotonic() + timeout, timeout)
        except BaseException:
            self.close()
            raise

    def _read_header(self, deadline: float, timeout: float) -> Header:
        while True:
            part = self._next_part(deadline)
            if part is None:
                raise AcquisitionError(
                    f"{self.name}: no series header (dheader-1.0) within {timeout} s: is the "
                    "detector armed and its stream enabled?"
                )
            try:
                head = json.loads(part)
            except (ValueError, UnicodeDecodeError):
                continue  # (an image blob of an earlier series)
            if not isinstance(head, dict) or head.get("htype") != "dheader-1.0":
                continue
            if self.series is None or int(head.get("series", -1)) == self.series:
                break
        self.series = int(head.get("series", 0))
        config_part = self._next_part(deadline)
        if config_part is None:
            raise AcquisitionError(f"{self.name}: the series header came without its config")
        config = self._json(config_part, "the detector configuration after dheader-1.0")
        self.config = config
        try:
            x, y = int(config["x_pixels_in_detector"]), int(config["y_pixels_in_detector"])
            bits = int(config["bit_depth_image"])
        except KeyError as e:
            raise AcquisitionError(
                f"{self.name}: the detector configuration lacks {e.args[0]!r} (has "
                f"{sorted(config)})"
            ) from None
        if bits not in _DTYPES:
            raise AcquisitionError(f"{self.name}: bit_depth_image={bits}; expected 8, 16 or 32")
        dtype = np.dtype(_DTYPES[bits])
        self.sig_shape = (y, x)
        self.dtype = dtype
        self._frame_bytes = x * y * dtype.itemsize
        self._slot = bslz4.slot_bytes(self._frame_bytes, dtype.itemsize)
        self.num_frames = frames_in_series(config)
        self._encodings: dict[str, int] = {}
        #: what each image's data header must say (dtype.name costs ~4 us a frame)
        self._expected = ([x, y], dtype.name)
        keep = ("trigger_mode", "ntrigger", "nimages", "compression", "count_time")
        return Header(
            sig_shape=(y, x),
            dtype=dtype,
            num_frames=self.num_frames,
            payload_shape=(self._slot,),
            payload_dtype=np.dtype(np.uint8),
            attrs={"series": self.series, **{k: config[k] for k in keep if k in config}},
            frame_seconds=config.get("frame_time"),
        )

    def _image(self, head: dict) -> tuple[int, int, bytes]:
        """The scan index, encoding code and blob of the image whose first part is `head`."""
        pending = self._pending
        if len(pending) >= 3:  # (the rest of its multipart message, as a rule)
            parts = [pending.popleft(), pending.popleft(), pending.popleft()]
        else:
            parts = []
        while len(parts) < 3:
            part = self._next_part(time.monotonic() + 1.0)
            if part is None:
                raise AcquisitionError(
                    f"{self.name}: image {head.get('frame')} broke off after {len(parts) + 1} "
                    "of its 4 message parts"
                )
            parts.append(part)
        index = head.get("frame")
        if head.get("series") != self.series:
            raise AcquisitionError(
                f"{self.name}: image {index} of series {head.get('series')} in series "
                f"{self.series} (series mismatch)"
            )
        if not isinstance(index, int) or index < 0 or 0 < self.num_frames <= index:
            raise AcquisitionError(
                f"{self.name}: frame id {index!r} out of range: the series has "
                f"{self.num_frames} frames (0 .. {self.num_frames - 1})"
            )
        try:
            desc = _stream_v1.description(parts[0])
        except (ValueError, UnicodeDecodeError):
            desc = None
        if not isinstance(desc, dict):  # (the error says what it is)
            desc = self._json(parts[0], f"the data header (dimage_d-1.0) of frame {index}")
        shape, kind = desc.get("shape"), desc.get("type")
        if (shape, kind) != self._expected:
            raise AcquisitionError(
                f"{self.name}: frame {index} has shape {shape} and type {kind}, expected "
                f"{self._expected[0]} ([x, y]) and {self._expected[1]} as the series header "
                "said"
            )
        blob = parts[1]
        if desc.get("size", len(blob)) != len(blob):
            raise AcquisitionError(
                f"{self.name}: frame {index}'s blob has {len(blob)} bytes, its header says "
                f"size {desc.get('size')}"
            )
        encoding = desc.get("encoding", "<")
        code = self._encodings.get(encoding)
        if code is None:
            code = self._encodings[encoding] = bslz4.parse_encoding(encoding, self.dtype)
        if len(blob) > self._slot - bslz4.PREFIX:
            raise AcquisitionError(
                f"{self.name}: frame {index}'s blob of {len(blob)} bytes is larger than any "
                f"encoding of a {self._frame_bytes}-byte frame ({encoding})"
            )
        return index, code, blob

    def receive(self, sink: Sink) -> None:
        batch = np.zeros((BATCH, self._slot), np.uint8)
        used = np.zeros(BATCH, np.int64)  # (the store copies a slot's blob, not its rest)
        # the slots' prefixes: blob length, encoding code, scan index
        lengths = batch[:, 0:4].view("<u4")[:, 0]
        codes = batch[:, 4]
        indices = batch[:, 8:16].view("<i8")[:, 0]
        first, count, since = 0, 0, 0.0
        seen = np.zeros(self.num_frames, bool)
        unique = 0

        def flush() -> None:
            nonlocal count
            if count:
                sink.put(first, batch[:count], used[:count])
                count = 0

        try:  # (the frames before a broken message are kept)
            while not sink.cancelled:
                part = self._next_part(None)
                if count and (part is None or time.monotonic() - since > POLL / 2):
                    flush()
                if part is None:
                    continue
                try:
                    head = _stream_v1.loads(part)
                except (ValueError, UnicodeDecodeError):
                    head = None
                htype = head.get("htype", "") if isinstance(head, dict) else ""
                if htype == "dimage-1.0":
                    index, code, blob = self._image(head)
                    if count and (index != first + count or count == BATCH):
                        flush()
                    if not count:
                        first, since = index, time.monotonic()
                    n = len(blob)
                    lengths[count], codes[count], indices[count] = n, code, index
                    batch[count, bslz4.PREFIX : bslz4.PREFIX + n] = np.frombuffer(blob, np.uint8)
                    used[count] = bslz4.PREFIX + n
                    count += 1
                    if index < seen.size and not seen[index]:
                        seen[index] = True
                        unique += 1
                        if unique == seen.size:
                            break
                elif htype.endswith("series_end-1.0"):
                    break
                elif htype == "dheader-1.0":
                    raise AcquisitionError(
                        f"{self.name}: a new series ({head.get('series')}) began after "
                        f"{unique} of the {self.num_frames} frames of series {self.series}"
                    )
                elif htype in _DETAIL_PARTS:
                    self._next_part(time.monotonic() + 1.0)  # (its array, not needed here)
                elif head is None:
                    raise AcquisitionError(
                        f"{self.name}: a message part of {len(part)} bytes that is not JSON "
                        f"where an image or the series' end was expected (after {unique} frames)"
                    )
        finally:
            flush()

    def decode(self, payloads: np.ndarray) -> np.ndarray:
        return bslz4.decode_slots(payloads, self.sig_shape, self.dtype)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None
        if self._context is not None:
            self._context.term()
            self._context = None


def dectris(
    host: str = "127.0.0.1",
    port: int = 9999,
    nav_shape=None,
    api_port: int | None = None,
    arm: bool = False,
    detector_config: dict | None = None,
    **acquisition_options,
) -> Acquisition:
    """A DECTRIS detector's stream (SIMPLON stream v1 over zmq) as an acquisition.

    Parameters
    ----------
    host, port
        The stream's address (the detector control unit's port 9999).
    nav_shape
        The scan's shape (the stream says only how many frames): by default
        ``(frames,)``.
    api_port, arm, detector_config
        The SIMPLON REST API's port, whether to arm the detector through it and the
        settings to put first (see `DectrisSource`).
    **acquisition_options
        ``frames_per_partition``, ``memory_limit``, ``timeout``, ``idle_timeout``, ``dims``
        of `ltdask.acquire.Acquisition`.

    Returns
    -------
    Acquisition

    Examples
    --------
    >>> import numpy as np, ltdask, ltdask.acquire
    >>> from ltdask.acquire.simulate.dectris import DectrisSimulator
    >>> frames = np.random.default_rng(0).poisson(2.0, (12, 16, 16)).astype(np.uint16)
    >>> with DectrisSimulator(frames) as sim:
    ...     with ltdask.acquire.dectris(port=sim.port, nav_shape=(3, 4)) as acq:
    ...         (res,) = ltdask.compute(acq, [ltdask.udf.SumUDF()])
    >>> bool((res["intensity"].values == frames.sum(axis=0)).all())
    True
    """
    source = DectrisSource(host, port, api_port=api_port, arm=arm, detector_config=detector_config)
    try:
        return Acquisition(source, nav_shape=nav_shape, **acquisition_options)
    except BaseException:
        source.close()
        raise


__all__ = ["DectrisSource", "dectris", "frames_in_series"]
