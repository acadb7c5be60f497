"""Stand-ins for pyxem's ``Diffraction2D`` signal classes (pyxem itself requires zarr<3, which
ltdask's tests cannot install beside zarr 3): `SIGNALS` are the entries pyxem's HyperSpy
extension registers, to put into ``hyperspy.extensions.ALL_EXTENSIONS["signals"]``.

Imported only by tests that have HyperSpy.
"""

from __future__ import annotations

from hyperspy.signals import LazySignal2D, Signal2D


class Diffraction2D(Signal2D):
    _signal_type = "diffraction"


class LazyDiffraction2D(LazySignal2D, Diffraction2D):
    pass


SIGNALS = {
    name: {
        "signal_type": "diffraction",
        "signal_dimension": 2,
        "dtype": "real",
        "lazy": lazy,
        "module": __name__,
    }
    for name, lazy in (("Diffraction2D", False), ("LazyDiffraction2D", True))
}
