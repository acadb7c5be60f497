"""LiberTEM-live's ``LiveContext`` on ltdask's acquisitions (:mod:`ltdask.acquire`).

``ctx.make_connection("merlin" | "dectris" | "memory").open(...)`` keeps the detector's
addresses; ``conn.wait_for_acquisition(timeout)`` waits for an acquisition that someone
else arms (LiberTEM-live's passive mode); ``ctx.make_acquisition(conn=..., nav_shape=...,
pending_aq=..., hooks=...)`` makes the `~ltdask.acquire.Acquisition` (armed by ltdask where
a ``controller`` is given, LiberTEM-live's active mode; `~ltdask.compat.hooks.Hooks` say
when to trigger the scan and what its shape is); ``ctx.run_udf`` and ``ctx.run_udf_iter``
run on it as on a file.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ltdask.acquire.dataset import Acquisition
from ltdask.acquire.replay import ReplaySource
from ltdask.acquire.source import Header, Source
from ltdask.acquire.store import AcquisitionError
from ltdask.compat.context import Context
from ltdask.compat.hooks import (
    ArmedAcquisition,
    DetermineNavShapeEnv,
    Hooks,
    ReadyForDataEnv,
    check_hooks,
    fill_placeholders,
)

__all__ = [
    "ActiveController",
    "ArmedAcquisition",
    "DetermineNavShapeEnv",
    "Hooks",
    "LiveContext",
    "ReadyForDataEnv",
]

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
        (within the connection's ``timeout``).

        `hooks` (a `Hooks`): ``on_ready_for_data`` is called in active mode once the
        detector is armed and ltdask waits for the frames (trigger the scan there);
        ``on_determine_nav_shape`` in passive mode where `nav_shape` is None or has -1
        placeholders. `nav_shape` may have -1 placeholders that the frame count fills.
        """
        if hooks is not None:
            check_hooks(hooks)
        active = pending_aq is None
        if pending_aq is None:
            on_ready = _ready_hook(hooks, nav_shape)
            config = {}
            if isinstance(controller, ActiveController):
                config = controller.detector_config(nav_shape)
            pending_aq = conn._pending(
                arm=controller is not None,
                timeout=conn.timeout,
                active=True,
                on_ready=on_ready,
                config=config,
            )
        source, header = pending_aq.source, pending_aq.header
        try:
            nav = _nav_shape(nav_shape, header, None if active else hooks, source.name)
            aq = Acquisition(
                source,
                nav_shape=nav,
                frames_per_partition=frames_per_partition,
                header=header,
                idle_timeout=conn.idle_timeout,
            )
        except BaseException:
            source.close()
            raise
        try:
            source.ready()  # (a source whose open waits for no frame: now, receiving)
        except BaseException:
            aq.close()
            raise
        return aq


def _ready_hook(hooks, nav_shape) -> Callable[[Source], None] | None:
    """What the source calls when it is armed: `hooks`' ``on_ready_for_data``."""
    method = getattr(hooks, "on_ready_for_data", None)
    if method is None:
        return None
    concrete = None if nav_shape is None or -1 in tuple(nav_shape) else tuple(nav_shape)

    def call(source: Source) -> None:
        method(ReadyForDataEnv(aq=ArmedAcquisition(source.name, concrete)))

    return call


def _nav_shape(nav_shape, header: Header, hooks, name: str):
    """The scan's shape: `nav_shape` where given in full, else (passive mode, `hooks`
    given) what ``on_determine_nav_shape`` says, else `nav_shape`'s -1 placeholders filled
    from the header's frame count; None (the header's shape) where nothing is given."""
    if nav_shape is not None and -1 not in tuple(nav_shape):
        return nav_shape
    method = getattr(hooks, "on_determine_nav_shape", None)
    if method is not None:
        hint = None if nav_shape is None else tuple(int(n) for n in nav_shape)
        shape = method(DetermineNavShapeEnv(nimages=header.num_frames, shape_hint=hint))
        if shape is not None:
            return tuple(shape)
    if nav_shape is None:
        return None
    return fill_placeholders(nav_shape, header.num_frames, name)


class ConnectionBuilder:
    """``LiveContext.make_connection(type)``: `open` takes the detector's addresses."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def open(self, **kwargs) -> Connection:
        """Merlin: ``data_host``, ``data_port`` (6342), ``api_host``, ``api_port`` (6341);
        DECTRIS: ``data_host``, ``data_port`` (9999), ``api_host``, ``api_port``; memory:
        ``data`` (an array, nav dims then two signal dims). Also ``timeout`` (s to wait
        for an acquisition, 10) and ``idle_timeout`` (s without a frame, 10). Merlin's
        ``drain=True`` reads away junk that some Merlin software versions send before an
        acquisition's header, before ltdask arms (active mode only, as LiberTEM-live)."""
        return Connection(self.kind, kwargs)


#: DECTRIS settings of ``get_active_controller`` put as they are before arming
DECTRIS_SETTINGS = (
    "count_time",
    "frame_time",
    "compression",
    "roi_mode",
    "roi_y_size",
    "roi_bit_depth",
)
#: LiberTEM-live's controller settings that ltdask does not put, with what to do instead
NOT_MAPPED = {
    "enable_file_writing": "record= writes the frames as they are processed",
    "name_pattern": "record= writes the frames as they are processed",
    "nimages_per_file": "record= writes the frames as they are processed",
    "enable_corrections": "corrections= of the run apply a dark frame, gain and bad pixels",
}


class ActiveController:
    """``conn.get_active_controller(...)``: the settings that ltdask puts before it arms
    the detector (LiberTEM-live's active controllers). A DECTRIS detector takes
    ``trigger_mode`` (then ``ntrigger`` or ``nimages`` follow from the scan's size) and
    ``count_time``, ``frame_time``, ``compression``, ``roi_mode``, ``roi_y_size``,
    ``roi_bit_depth``; a Merlin controller takes no settings (set them with
    `ltdask.acquire.MerlinControl`).

    Examples
    --------
    >>> ActiveController("dectris", {"trigger_mode": "exte"}).detector_config((4, 8))
    {'ntrigger': 32, 'nimages': 1, 'trigger_mode': 'exte'}
    """

    def __init__(self, kind: str, settings: dict[str, Any]) -> None:
        for name, value in settings.items():
            if name in NOT_MAPPED and value:
                raise NotImplementedError(
                    f"get_active_controller({name}={value!r}): ltdask does not put it; "
                    f"{NOT_MAPPED[name]}"
                )
        # (LiberTEM-live's defaults: None, or off)
        given = {k: v for k, v in settings.items() if v is not None and k not in NOT_MAPPED}
        allowed = ("trigger_mode", *DECTRIS_SETTINGS) if kind == "dectris" else ()
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise TypeError(
                f"make_connection({kind!r}): get_active_controller() takes "
                f"{', '.join(allowed) or 'no settings'}; not {', '.join(unknown)}"
            )
        self.kind = kind
        self.settings = given

    def detector_config(self, nav_shape) -> dict[str, Any]:
        """The detector configuration to put before arming, in order, for a scan of
        `nav_shape` (needed with ``trigger_mode``)."""
        settings = dict(self.settings)
        config: dict[str, Any] = {}
        mode = settings.pop("trigger_mode", None)
        if mode is not None:
            if nav_shape is None or -1 in tuple(nav_shape):
                raise ValueError(
                    f"get_active_controller(trigger_mode={mode!r}): give make_acquisition("
                    "nav_shape=...) in full; the detector's image count follows from it"
                )
            count = math.prod(nav_shape)
            # one series of images on one internal trigger, else a trigger per image
            # (LiberTEM-live's rules; an ``inte`` scan counts its triggers too)
            config.update(ntrigger=1, nimages=1, trigger_mode=mode)
            config["nimages" if mode == "ints" else "ntrigger"] = count
        config.update(settings)
        return config


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

    def get_active_controller(self, **settings) -> ActiveController:
        """The controller of an active acquisition (``make_acquisition(controller=...)``):
        ltdask puts its `settings` and arms the detector (see `ActiveController`)."""
        return ActiveController(self.kind, settings)

    def _source(self, arm: bool, active: bool, config: dict | None = None) -> Source:
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
        if self.kind == "merlin":  # (passive: the stream may have begun; never drained)
            kwargs["drain"] = bool(opts.pop("drain", False)) and active
        elif config:
            kwargs["detector_config"] = config
        for ignored in ("drain", "recovery_strategy", "huge_pages", "buffer_size"):
            opts.pop(ignored, None)  # (LiberTEM-live's receiver's tuning: not needed here)
        if opts:
            raise TypeError(f"make_connection({self.kind!r}).open(): unknown {sorted(opts)}")
        return cls(host, **kwargs)

    def _pending(
        self,
        arm: bool,
        timeout: float,
        active: bool = False,
        on_ready: Callable[[Source], None] | None = None,
        config: dict | None = None,
    ) -> PendingAcquisition:
        """The next acquisition's header, with its source (`active`: made by
        ``make_acquisition``; `on_ready` is called with the source once it is armed;
        `config`: a DECTRIS detector's settings put before arming)."""
        source = self._source(arm, active, config)
        if on_ready is not None:
            source.on_ready = functools.partial(on_ready, source)
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
