"""LiberTEM-live's ``LiveContext`` on ltdask's acquisitions (:mod:`ltdask.acquire`).

``ctx.make_connection("merlin" | "dectris" | "memory").open(...)`` keeps the detector's
addresses; ``conn.wait_for_acquisition(timeout)`` waits for an acquisition that someone
else arms (LiberTEM-live's passive mode); ``ctx.make_acquisition(conn=..., nav_shape=...,
pending_aq=...)`` makes the `~ltdask.acquire.Acquisition` (armed by ltdask where a
``controller`` is given, LiberTEM-live's active mode); ``ctx.run_udf`` and
``ctx.run_udf_iter`` run on it as on a file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.replay import ReplaySource
from ltdask.acquire.source import Header, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.compat.context import Context

#: detector type -> (module, source class) in ltdask.acquire
SOURCES = {
    "merlin": ("ltdask.acquire.merlin", "MerlinSource"),
    "dectris": ("ltdask.acquire.dectris", "DectrisSource"),
}


class LiveContext(Context):
    """LiberTEM-live's ``LiveContext``: a `Context` that also makes detector connections
    and acquisitions.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat.live import LiveContext
    >>> from ltdask.udf import SumUDF
    >>> ctx = LiveContext.make_with("inline")
    >>> with ctx.make_connection("memory").open(data=np.ones((2, 3, 4, 4))) as conn:
    ...     aq = ctx.make_acquisition(conn=conn)
    ...     ctx.run_udf(dataset=aq, udf=SumUDF())["intensity"].data.tolist()[0]
    [6.0, 6.0, 6.0, 6.0]
    """

    def make_connection(self, detector_type: str) -> ConnectionBuilder:
        """A builder whose ``open(...)`` connects to a detector of `detector_type`
        (``"merlin"``, ``"dectris"`` or ``"memory"``: an array replayed as a stream)."""
        kinds = (*SOURCES, "memory")
        if detector_type not in kinds:
            raise NotImplementedError(
                f"make_connection({detector_type!r}): ltdask receives {', '.join(kinds)}"
            )
        return ConnectionBuilder(detector_type)

    def make_acquisition(
        self,
        *,
        conn: Connection,
        nav_shape=None,
        frames_per_partition: int | None = None,
        controller=None,
        pending_aq: PendingAcquisition | None = None,
        hooks=None,
    ) -> Acquisition:
        """The acquisition of `conn`: the one `pending_aq` announced (passive), else one
        ltdask arms where `controller` is given (active), else the next one that arrives
        (within the connection's ``timeout``)."""
        if hooks is not None:
            raise NotImplementedError(
                "make_acquisition(hooks=...): ltdask has no acquisition hooks; trigger the "
                "scan after make_acquisition returns (it is armed then)"
            )
        if pending_aq is None:
            pending_aq = conn._pending(arm=controller is not None, timeout=conn.timeout)
        return Acquisition(
            pending_aq.source,
            nav_shape=nav_shape,
            frames_per_partition=frames_per_partition,
            header=pending_aq.header,
            idle_timeout=conn.idle_timeout,
        )


class ConnectionBuilder:
    """``LiveContext.make_connection(type)``: `open` takes the detector's addresses."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def open(self, **kwargs) -> Connection:
        """Merlin: ``data_host``, ``data_port`` (6342), ``api_host``, ``api_port`` (6341);
        DECTRIS: ``data_host``, ``data_port`` (9999), ``api_host``, ``api_port``; memory:
        ``data`` (an array, nav dims then two signal dims). Also ``timeout`` (s to wait
        for an acquisition, 10) and ``idle_timeout`` (s without a frame, 10)."""
        return Connection(self.kind, kwargs)


class PendingAcquisition:
    """An acquisition whose header has arrived (`Connection.wait_for_acquisition`)."""

    def __init__(self, source: Source, header: Header) -> None:
        self.source = source
        self.header = header

    @property
    def nav_shape(self):
        return self.header.nav_shape


class Connection:
    """A detector's addresses, as LiberTEM-live's connections keep them; each acquisition
    opens the detector's stream anew (`wait_for_acquisition`, ``make_acquisition``)."""

    def __init__(self, kind: str, options: dict[str, Any]) -> None:
        options = dict(options)
        self.kind = kind
        self.timeout = float(options.pop("timeout", 10.0))
        self.idle_timeout = options.pop("idle_timeout", 10.0)
        self.options = options
        if kind == "memory" and "data" not in options:
            raise ValueError("make_connection('memory').open(data=...): give the array")

    def _source(self, arm: bool) -> Source:
        opts = dict(self.options)
        if self.kind == "memory":
            data = np.asarray(opts.pop("data"))
            return ReplaySource(data.reshape((-1, *data.shape[-2:])), nav_shape=data.shape[:-2])
        import importlib

        module, name = SOURCES[self.kind]
        cls = getattr(importlib.import_module(module), name)
        host = opts.pop("data_host", "127.0.0.1")
        kwargs: dict[str, Any] = {"arm": arm}
        if "data_port" in opts:
            kwargs["port"] = int(opts.pop("data_port"))
        api_port = opts.pop("api_port", None)
        opts.pop("api_host", None)
        if api_port is not None:
            kwargs["control_port" if self.kind == "merlin" else "api_port"] = int(api_port)
        for ignored in ("drain", "recovery_strategy", "huge_pages", "buffer_size"):
            opts.pop(ignored, None)  # (LiberTEM-live's receiver's tuning: not needed here)
        if opts:
            raise TypeError(f"make_connection({self.kind!r}).open(): unknown {sorted(opts)}")
        return cls(host, **kwargs)

    def _pending(self, arm: bool, timeout: float) -> PendingAcquisition:
        source = self._source(arm)
        try:
            header = source.open(timeout)
        except BaseException:
            source.close()
            raise
        return PendingAcquisition(source, header)

    def wait_for_acquisition(self, timeout: float | None = None) -> PendingAcquisition | None:
        """The next acquisition's header (someone else arms the detector), or None after
        `timeout` s (default: the connection's)."""
        try:
            return self._pending(arm=False, timeout=self.timeout if timeout is None else timeout)
        except (TimeoutError, AcquisitionError) as e:
            if "timed out" in str(e) or isinstance(e, TimeoutError):
                return None
            raise

    def close(self) -> None:
        """Nothing to release: each acquisition closes its own stream."""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
