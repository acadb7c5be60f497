"""`CoMUDF`: centre of mass of each frame, and the field, divergence and curl it gives."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ltdask.udf.apply import apply_whole
from ltdask.udf.backends import to_host
from ltdask.udf.base import UDF
from ltdask.udf.builtin._kernels import (
    com_disk,
    dot_shared_runs,
    flat_tile,
    interval_moments,
    weighted_moments,
)
from ltdask.udf.builtin.mask_container import folded_moment_masks
from ltdask.udf.paths import TilePaths

NO_REGRESSION = -1


class CoMParams(NamedTuple):
    """Parameters of `CoMUDF` (see :meth:`CoMUDF.with_params`); keywords given with them
    replace fields.

    Examples
    --------
    >>> from ltdask.udf import CoMParams, CoMUDF
    >>> udf = CoMUDF(CoMParams(cy=4, cx=4, r=3), ri=1)
    >>> udf.params.com_params.r, udf.params.com_params.ri
    (3, 1)
    """

    cy: float | None = None
    cx: float | None = None
    r: float = float("inf")
    ri: float = 0.0
    scan_rotation: float = 0.0
    flip_y: bool = False
    regression: int | np.ndarray = NO_REGRESSION
    #: ltdask extension (LiberTEM gives detector pixels): shifts in the sig calibration's units
    physical_units: bool = False


def apply_correction(y, x, scan_rotation: float, flip_y: bool, forward: bool = True):
    """Shifts in detector coordinates → field in scan coordinates, as LiberTEM: ``flip_y``
    negates the y component first; then both are rotated by `scan_rotation` degrees:
    ``y' = cos·y + sin·x``, ``x' = -sin·y + cos·x``. ``forward=False``: the inverse (field
    in scan coordinates → shifts on the detector)."""
    angle = math.radians(scan_rotation)
    c, s = math.cos(angle), math.sin(angle)
    if not forward:
        y, x = c * y - s * x, s * y + c * x
        return (-y if flip_y else y), x
    if flip_y:
        y = -y
    return c * y + s * x, -s * y + c * x


def _check_params(p: CoMParams) -> None:
    """The radii, checked when the UDF is made (as LiberTEM does)."""
    if p.r < p.ri:
        raise ValueError(f"CoMUDF: outer radius r={p.r} is smaller than inner ri={p.ri}")


def _check_regression(reg) -> None:
    """The regression, checked when a run starts (as LiberTEM does: ``with_params`` takes
    any value)."""
    if not isinstance(reg, (int, np.integer)):
        if np.asarray(reg).shape != (3, 2):
            raise ValueError(f"CoMUDF: regression must be -1, 0, 1 or a 3×2 array, not {reg!r}")
    elif reg not in (-1, 0, 1):
        raise ValueError(f"CoMUDF: regression must be -1, 0, 1 or a 3×2 array, not {reg!r}")


class CoMUDF(UDF):
    """Centre of mass of each frame inside a disk or ring.

    Results (nav-shaped): ``raw_com`` (y, x of the centre of mass, detector pixels),
    ``raw_shifts`` (``raw_com - (cy, cx)``), ``field`` (the shifts minus the regression,
    flipped and rotated into scan coordinates), ``field_y``, ``field_x``, ``magnitude``,
    ``divergence`` and ``curl`` of the field; and ``regression`` (3×2: offset and changes
    per scan row and column of the (y, x) shifts that were subtracted).

    With ``physical_units=True`` (an ltdask extension), the detector pixels are scaled by
    the dataset's signal calibration before the field is rotated: ``raw_com`` is then a
    detector coordinate (``origin + scale * pixel``), the shifts, ``field``, ``magnitude``
    and a given ``regression`` are in the signal units, and ``divergence`` and ``curl`` are
    per scan unit where the scan is calibrated (per scan step where not); the variables
    carry ``units`` attributes. ``cy``, ``cx``, ``r`` and ``ri`` stay in detector pixels.
    Without a signal calibration the units are pixels (``"px"``).

    Parameters
    ----------
    com_params : CoMParams, optional
        Or the same fields as keywords (see :meth:`with_params`).

    Examples
    --------
    >>> import numpy as np, ltdask
    >>> data = np.zeros((2, 2, 8, 8), dtype=np.float32); data[..., 5, 2] = 1
    >>> res = ltdask.udf.CoMUDF.with_params(cy=4, cx=4).compute(ltdask.from_array(data))
    >>> res["raw_shifts"].values[0, 0].tolist()
    [1.0, -2.0]
    >>> ds = ltdask.from_array(data, sig_calibration=(0.5, "mrad"))
    >>> res = ltdask.udf.CoMUDF.with_params(cy=4, cx=4, physical_units=True).compute(ds)
    >>> res["raw_shifts"].values[0, 0].tolist(), res["raw_shifts"].attrs["units"]
    ([0.5, -1.0], 'mrad')
    """

    TILE_PATHS = TilePaths(
        # 8/16-bit tiles come as the file's integers: the kernel converts each pixel to the
        # float dtype of the run (the sums are those of float tiles)
        integer_tiles=True,
        # the three sums are mask products: the corrections are folded into the masks
        # (`_folded_masks`), the tiles stay uncorrected
        folds_corrections=frozenset({"dark", "gain", "excluded"}),
    )

    def __init__(self, com_params: CoMParams | None = None, **kwargs):
        if com_params is None:
            com_params = CoMParams(**kwargs)
        elif kwargs:
            com_params = com_params._replace(**kwargs)
        _check_params(com_params)
        super().__init__(com_params=com_params)

    @classmethod
    def with_params(
        cls,
        *,
        cy=None,
        cx=None,
        r=float("inf"),
        ri=0.0,
        scan_rotation=0.0,
        flip_y=False,
        regression=NO_REGRESSION,
        physical_units=False,
    ) -> CoMUDF:
        """A `CoMUDF` from its parameters as keywords (LiberTEM's ``CoMUDF.with_params``).

        Parameters
        ----------
        cy : float, optional
            Row of the disk's centre on the detector (default: the frame's centre).
        cx : float, optional
            Column of the disk's centre (default: the frame's centre).
        r : float
            Outer radius of the disk or ring the centre of mass is taken in.
        ri : float
            Inner radius (0: a disk).
        scan_rotation : float
            Rotation of the scan against the detector, in degrees.
        flip_y : bool
            Negate the y shifts before rotating them.
        regression : int
            Subtract a fit of the shifts across the scan: -1 none, 0 their mean, 1 a plane.
        physical_units : bool
            Shifts and field in the units of the detector's calibration (an ltdask
            extension; LiberTEM's are in pixels).
        """
        return cls(CoMParams(cy, cx, r, ri, scan_rotation, flip_y, regression, physical_units))

    def _validate(self):
        _check_regression(self.params.com_params.regression)
        shape = self.meta.dataset_shape
        if len(shape.nav) != 2 or len(shape.sig) != 2:
            raise ValueError(
                f"CoMUDF needs 2-D nav and 2-D sig dims, the data has shape {tuple(shape)} "
                f"(nav {tuple(shape.nav)}, sig {tuple(shape.sig)})"
            )

    def _center(self):
        sy, sx = tuple(self.meta.dataset_shape.sig)
        p = self.params.com_params
        return (sy / 2 if p.cy is None else p.cy), (sx / 2 if p.cx is None else p.cx)

    def _dtype(self) -> np.dtype:
        return np.dtype(np.result_type(self.meta.input_dtype, np.float32))

    def get_extra_dims(self):
        yx = ("yx",)
        return {"raw_com": yx, "raw_shifts": yx, "field": yx, "regression": ("term", "yx")}

    def get_extra_coords(self):
        # the regression's rows: the shift at scan position (0, 0), and its change per scan
        # row and per scan column
        return {"yx": ["y", "x"], "term": ["offset", "per_scan_y", "per_scan_x"]}

    def get_result_buffers(self):
        self._validate()
        # as LiberTEM: the results in the input dtype, at least float32
        dtype = self._dtype()
        nav = lambda **kw: self.buffer(kind="nav", use="result_only", dtype=dtype, **kw)  # noqa: E731
        return {
            "raw_mask_result": self.buffer(
                kind="nav", extra_shape=(3,), dtype=np.float64, use="private"
            ),
            "raw_com": nav(extra_shape=(2,)),
            "raw_shifts": nav(extra_shape=(2,)),
            "field": nav(extra_shape=(2,)),
            "field_y": nav(),
            "field_x": nav(),
            "magnitude": nav(),
            "divergence": nav(),
            "curl": nav(),
            "regression": self.buffer(
                kind="single", extra_shape=(3, 2), dtype=np.float64, use="result_only"
            ),
        }

    def get_task_data(self):
        sy, sx = tuple(self.meta.dataset_shape.sig)
        p = self.params.com_params
        mask, starts, stops = com_disk(sy, sx, *self._center(), p.r, p.ri)
        disk = {"mask": mask, "starts": starts, "stops": stops}
        return {**disk, "cols": {}, "device": {}}

    def get_backends(self):
        return (self.BACKEND_NUMPY, self.BACKEND_CUPY)

    def process_tile(self, tile):
        if self.meta.array_backend == self.BACKEND_CUPY:
            return self._device_tile(tile)
        sig = self.meta.sig_slice
        whole_rows = sig.origin[1] == 0 and sig.shape[1] == self.meta.dataset_shape.sig[1]
        if whole_rows or self.tile_form.folded_corrections is not None:
            frames = flat_tile(tile)
            self.process_flat_tile(frames, 0, frames.shape[1])
            return
        # a tile that does not span whole rows: plain numpy
        td = self.task_data
        out = self.results.raw_mask_result
        y, x = np.mgrid[sig.get()]
        m = td.mask[sig.get()]
        weighted = tile * m
        out[:, 0] += weighted.sum(axis=(1, 2))
        out[:, 1] += (weighted * y).sum(axis=(1, 2))
        out[:, 2] += (weighted * x).sum(axis=(1, 2))

    def _device_tile(self, tile):
        """A CuPy tile: the three sums as one product with the signal slice's ``(pixels,
        3)`` weights (mask, mask · y, mask · x), in float64, kept on the device."""
        import cupy

        sig = self.meta.sig_slice
        key = (tuple(sig.origin), tuple(sig.shape))
        weights = self.task_data.device.get(key)
        if weights is None:
            y, x = np.mgrid[sig.get()]
            m = self.task_data.mask[sig.get()].astype(np.float64)
            host = np.stack([m, m * y, m * x], axis=-1).reshape(-1, 3)
            weights = self.task_data.device[key] = cupy.asarray(host)
        rows = tile.reshape((tile.shape[0], -1)).astype(np.float64)
        self.results.raw_mask_result[:] += to_host(rows @ weights)

    def _folded_masks(self):
        """The disk's three masks with the folded corrections in them, for the current
        signal slice (`folded_moment_masks`), made once per process for the corrections
        (not per partition, nor per run: 3-70 ms for 256x256 pixels, where the whole
        run of a 2 GiB scan takes 100 ms)."""
        sig = self.meta.sig_slice
        linear = self.tile_form.folded_corrections.linear(sig.get())
        whole_rows = sig.origin[1] == 0 and sig.shape[1] == self.meta.dataset_shape.sig[1]
        dtype = np.result_type(self.meta.input_dtype, np.float32) if whole_rows else None
        disk = self.task_data.mask[sig.get()]
        p = self.params.com_params
        key = (type(self).__qualname__, self._center(), p.r, p.ri, dtype)
        return linear.derived(key, lambda: folded_moment_masks(disk, sig.get(), linear, dtype))

    def process_flat_tile(self, frames, p0, p1):
        sig = self.meta.sig_slice
        width = self.meta.dataset_shape.sig[1]
        td = self.task_data
        if self.tile_form.folded_corrections is not None:
            intervals, runs, offsets = self._folded_masks()
            out = self.results.raw_mask_result
            out -= offsets
            if intervals is None:
                dot_shared_runs(frames, p0, p1, *runs, out)
            else:
                weighted_moments(frames, p0, p1, width, *intervals, out)
            return
        if sig.origin[1] != 0 or sig.shape[1] != width:
            tile = frames[:, p0:p1].reshape((frames.shape[0], *sig.shape))
            return self.process_tile(tile)
        # sums in the tile's float dtype; integer tiles in the float dtype they stand for
        dtype = frames.dtype if frames.dtype.kind in "fc" else np.dtype(self.meta.input_dtype)
        cols = td.cols.get(dtype)
        if cols is None:
            cols = td.cols[dtype] = np.arange(width, dtype=dtype)
        args = (width, sig.origin[0], td.starts, td.stops, cols, self.results.raw_mask_result)
        interval_moments(frames, p0, p1, *args)

    def get_results(self):
        # nav-sized and small next to the scan: numpy, in one task, instead of a graph of
        # hundreds (the regression, the gradients)
        nav_shape = tuple(self.meta.dataset_shape.nav)
        raw = self.results.get_buffer("raw_mask_result").data
        valid = self.meta.get_valid_nav_mask(full_nav=True).reshape(nav_shape)
        dtype = self._dtype()
        outputs = {
            name: (extra, np.float64) if name == "regression" else (nav_shape + extra, dtype)
            for name, extra in _FIELDS.items()
        }
        p = self.params.com_params
        axes = (self.meta.sig_calibration, self.meta.nav_calibration) if p.physical_units else None
        return apply_whole(
            com_fields,
            raw,
            self._center(),
            valid,
            p,
            dtype,
            axes,
            self.meta.roi,
            outputs=outputs,
            name="ltdask-com-fields",
        )

    def get_result_attrs(self):
        if not self.params.com_params.physical_units:
            return {}
        sig, nav = (
            _units(a, what)
            for a, what in (
                (self.meta.sig_calibration, "px"),
                (self.meta.nav_calibration, "scan step"),
            )
        )
        shift = {"units": sig}
        gradient = {"units": f"{sig}/{nav}"}
        names = ("raw_com", "raw_shifts", "field", "field_y", "field_x", "magnitude")
        return {**dict.fromkeys(names, shift), "divergence": gradient, "curl": gradient}


def _units(axes, uncalibrated: str) -> str:
    """The units of `axes` (``uncalibrated`` where they have none)."""
    units = {a.units for a in axes}
    if len(units) > 1:
        raise ValueError(
            f"CoMUDF: physical_units=True needs one unit for both dims, the calibration has "
            f"{sorted(units)}"
        )
    return units.pop() or uncalibrated


#: CoMUDF's results and their shapes after the nav dims (``regression``: its whole shape)
_FIELDS = {
    "raw_com": (2,),
    "raw_shifts": (2,),
    "field": (2,),
    "field_y": (),
    "field_x": (),
    "magnitude": (),
    "divergence": (),
    "curl": (),
    "regression": (3, 2),
}


def com_fields(
    raw: np.ndarray, center, valid: np.ndarray, p: CoMParams, dtype, axes=None, roi=None
) -> dict:
    """CoMUDF's results from the per-frame ``(sum I, sum I*y, sum I*x)`` (nav-shaped), as
    LiberTEM computes them: a frame without intensity in the mask has its centre of mass at
    the reference point (shift 0); the regression is fitted to the rotated field at the
    valid positions and subtracted there. `axes`: ``(sig, nav)`` calibrations (`Axis` per
    dim) to give the results in physical units (see `CoMUDF`), or None for pixels. Outside
    `roi` (nav-shaped, None: everywhere inside) every nav result is NaN, as LiberTEM's: the
    gradients there would otherwise come from the neighbours inside."""
    raw = np.asarray(raw, dtype=np.float64)
    total = raw[..., 0]
    has = total != 0
    safe = np.where(has, total, 1)
    center = np.asarray(center, dtype=np.float64)
    shifts = np.stack(
        [
            np.where(has, raw[..., 1] / safe - center[0], 0),
            np.where(has, raw[..., 2] / safe - center[1], 0),
        ],
        axis=-1,
    )
    com = shifts + center
    spacing = (1.0, 1.0)
    if axes is not None:
        sig, nav = axes
        scale = np.array([a.scale for a in sig])
        shifts = shifts * scale
        com = np.array([a.origin for a in sig]) + com * scale
        spacing = tuple(a.scale for a in nav)
    fy, fx = apply_correction(shifts[..., 0], shifts[..., 1], p.scan_rotation, p.flip_y)
    field = np.stack([fy, fx], axis=-1)
    regression = _regression(field, valid, p.regression)
    if not np.allclose(regression[1:], 0):
        ny, nx = field.shape[:2]
        yy, xx = np.mgrid[:ny, :nx]
        design = np.stack([np.ones(yy.shape), yy, xx], axis=-1)
        field[valid] -= design[valid] @ regression
    elif not np.allclose(regression[0], 0):
        field[valid] -= regression[0]
    fy, fx = field[..., 0], field[..., 1]
    results = {
        "raw_com": com.astype(dtype),
        "raw_shifts": shifts.astype(dtype),
        "field": field.astype(dtype),
        "field_y": fy.astype(dtype),
        "field_x": fx.astype(dtype),
        "magnitude": np.sqrt(fy**2 + fx**2).astype(dtype),
        "divergence": (_gradient(fy, 0, spacing) + _gradient(fx, 1, spacing)).astype(dtype),
        "curl": (_gradient(fy, 1, spacing) - _gradient(fx, 0, spacing)).astype(dtype),
    }
    if roi is not None:
        outside = ~np.asarray(roi, dtype=bool).reshape(total.shape)
        for arr in results.values():
            arr[outside] = np.nan
    return {**results, "regression": regression}


def _regression(field: np.ndarray, valid: np.ndarray, reg) -> np.ndarray:
    """The ``(3, 2)`` plane fitted to the (y, x) field at the valid, finite positions:
    none (zeros), a constant (``reg == 0``), or offset and slopes (``reg == 1``)."""
    if not isinstance(reg, (int, np.integer)):
        return np.asarray(reg, dtype=np.float64)
    if reg == NO_REGRESSION:
        return np.zeros((3, 2))
    values = field[valid]
    finite = np.isfinite(values).all(axis=1)
    values = values[finite]
    if reg == 0:
        mean = values.mean(axis=0) if len(values) else np.zeros(2)
        return np.concatenate([mean[None], np.zeros((2, 2))], axis=0)
    yy, xx = np.nonzero(valid)
    design = np.stack([np.ones(yy.size), yy, xx], axis=1)[finite]
    return np.linalg.lstsq(design, values, rcond=None)[0]


def _gradient(arr: np.ndarray, axis: int, spacing=(1.0, 1.0)) -> np.ndarray:
    if arr.shape[axis] < 2:
        return np.zeros_like(arr)
    return np.gradient(arr, spacing[axis], axis=axis)
