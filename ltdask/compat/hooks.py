"""LiberTEM-live's acquisition hooks (``libertem_live.hooks``) for ``LiveContext``.

``ctx.make_acquisition(conn=..., hooks=MyHooks())`` calls ``on_ready_for_data`` once the
detector is armed and the receiver waits for the scan (where a script triggers the scan
engine), in active mode only, and ``on_determine_nav_shape`` for a pending (passive)
acquisition whose ``nav_shape`` is not given in full.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ltdask.common.shape import Shape


class ArmedAcquisition:
    """What ``on_ready_for_data`` gets as ``env.aq``: the acquisition being made, armed
    and waiting for its first frames. The frames' shape and dtype are not known yet (a
    Merlin's first frame tells them), so this is not the dataset itself: it has the
    scan's shape (``nav_shape``, and ``shape.nav`` as LiberTEM-live's acquisitions) and
    the detector's ``name``.
    """

    def __init__(self, name: str, nav_shape: tuple[int, ...] | None) -> None:
        self.name = name
        self.nav_shape = nav_shape

    @property
    def shape(self) -> Shape:
        """The scan's shape (no signal dims: ``shape.nav`` is the whole of it)."""
        if self.nav_shape is None:
            raise AttributeError(
                f"{self.name}: the scan's shape is not known when the detector is armed; "
                "give make_acquisition(nav_shape=...) to use env.aq.shape in a hook"
            )
        return Shape(self.nav_shape, sig_dims=0)

    def __repr__(self) -> str:
        return f"<ArmedAcquisition {self.name} nav_shape={self.nav_shape}>"


class ReadyForDataEnv(NamedTuple):
    """What `Hooks.on_ready_for_data` gets.

    Examples
    --------
    >>> env = ReadyForDataEnv(aq=ArmedAcquisition("merlin 127.0.0.1:6342", (32, 48)))
    >>> height, width = env.aq.shape.nav
    >>> height, width
    (32, 48)
    """

    #: the acquisition that will receive the data
    aq: Any


class DetermineNavShapeEnv(NamedTuple):
    """What `Hooks.on_determine_nav_shape` gets.

    Examples
    --------
    >>> env = DetermineNavShapeEnv(nimages=1024, shape_hint=(-1, 32))
    >>> env.nimages // env.shape_hint[-1]
    32
    """

    #: the frames of the acquisition (its header's count; 0 where it does not say)
    nimages: int
    #: the ``nav_shape`` given to ``make_acquisition``: None, or with -1 placeholders
    shape_hint: tuple[int, ...] | None


class Hooks:
    """Actions at an acquisition's events (subclass it and override what you need), as
    LiberTEM-live's ``Hooks``.

    Examples
    --------
    >>> class TriggerScan(Hooks):
    ...     def on_ready_for_data(self, env):
    ...         height, width = env.aq.shape.nav
    ...         print(f"scan {height} x {width} now")
    >>> TriggerScan().on_ready_for_data(ReadyForDataEnv(ArmedAcquisition("demo", (4, 6))))
    scan 4 x 6 now
    """

    def on_ready_for_data(self, env: ReadyForDataEnv) -> None:
        """Called once the detector is armed and ltdask waits for its frames (active
        mode: ``make_acquisition`` without ``pending_aq``): trigger the scan here."""

    def on_determine_nav_shape(self, env: DetermineNavShapeEnv) -> tuple[int, ...] | None:
        """The scan's shape of a pending (passive) acquisition whose ``nav_shape`` was not
        given, or given with -1 placeholders; None: the placeholders filled from the frame
        count, else the detector's header's shape."""
        return None


def check_hooks(hooks) -> None:
    """A `TypeError` where `hooks` has neither of `Hooks`' methods."""
    if not any(
        callable(getattr(hooks, m, None)) for m in ("on_ready_for_data", "on_determine_nav_shape")
    ):
        raise TypeError(
            f"make_acquisition(hooks={hooks!r}): expected a Hooks object (a subclass of "
            "ltdask.compat.Hooks, with on_ready_for_data and/or on_determine_nav_shape)"
        )


def fill_placeholders(nav_shape, nimages: int, name: str) -> tuple[int, ...]:
    """`nav_shape` with its -1 placeholders filled from the frame count `nimages`: one
    placeholder takes what the others leave, two of two dims a square scan (LiberTEM-live's
    rules)."""
    shape = tuple(int(n) for n in nav_shape)
    holes = [i for i, n in enumerate(shape) if n == -1]
    known = math.prod(n for n in shape if n != -1)
    if len(holes) == 1 and known > 0 and nimages % known == 0 and nimages:
        return tuple(nimages // known if n == -1 else n for n in shape)
    side = math.isqrt(nimages)
    if len(holes) == len(shape) == 2 and side * side == nimages and nimages:
        return (side, side)
    raise ValueError(
        f"{name}: nav_shape={shape} does not fit the acquisition's {nimages} frames; expected "
        "one -1 for a dim that the frame count fills, or (-1, -1) for a square scan"
    )
