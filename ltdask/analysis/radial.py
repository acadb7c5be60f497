"""Radial Fourier analysis: Fourier series of the angular intensity in radial bins.

As LiberTEM, with `ApplyMasksUDF` and a complex mask stack: for each bin ``b`` (from
`ltdask.masks.radial_bins`) and order ``o`` the mask ``bin_b * exp(1j * o * phi)``.
"""

from __future__ import annotations

import math

import numpy as np
import sparse

from ltdask import masks
from ltdask.analysis._viz import scaled_image, vector_image
from ltdask.analysis.masks import BaseMasksAnalysis
from ltdask.analysis.results import AnalysisResult, RadialFourierResultSet

__all__ = ["RadialFourierAnalysis", "radial_fourier_masks"]


def radial_fourier_masks(
    detector_y, detector_x, cx, cy, ri, ro, n_bins, max_order, use_sparse, dtype=np.complex64
):
    """A factory for the stack of ``n_bins * (max_order + 1)`` complex masks, bin-major.

    Examples
    --------
    >>> from ltdask.analysis.radial import radial_fourier_masks
    >>> radial_fourier_masks(8, 8, 4, 4, 0, 4, 2, 3, use_sparse=False)().shape
    (8, 8, 8)
    """
    dtype = np.result_type(dtype, np.complex64)

    def stack():
        bins = masks.radial_bins(
            centerX=cx,
            centerY=cy,
            imageSizeX=detector_x,
            imageSizeY=detector_y,
            radius=ro,
            radius_inner=ri,
            n_bins=n_bins,
            use_sparse=use_sparse,
            dtype=dtype,
        )
        orders = np.arange(max_order + 1, dtype=dtype)
        _, phi = masks.polar_map(
            centerX=cx, centerY=cy, imageSizeX=detector_x, imageSizeY=detector_y
        )
        modulator = np.exp(phi.astype(dtype) * orders[:, None, None] * 1j)
        if use_sparse:
            bins = sparse.COO(bins)
            b, y, x = bins.coords
            n_orders = len(orders)
            coords = np.stack(
                [
                    np.repeat(b, n_orders) * n_orders + np.tile(np.arange(n_orders), len(b)),
                    np.repeat(y, n_orders),
                    np.repeat(x, n_orders),
                ]
            )
            order_index = np.tile(np.arange(n_orders), len(b))
            values = np.repeat(bins.data, n_orders) * modulator[order_index, coords[1], coords[2]]
            shape = (n_bins * n_orders, detector_y, detector_x)
            return sparse.COO(coords, values.astype(dtype), shape=shape)
        return (bins[:, None] * modulator).reshape((-1, detector_y, detector_x))

    return stack


class RadialFourierAnalysis(BaseMasksAnalysis):
    """Fourier coefficients up to ``max_order`` of ``n_bins`` rings between ``ri`` and
    ``ro`` around ``(cy, cx)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> analysis = ctx.create_radial_fourier_analysis(dataset=ds, ro=4, n_bins=2, max_order=1)
    >>> analysis.parameters["mask_count"]  # a complex mask per bin and order
    4
    >>> ctx.run(analysis).raw_results.shape  # bins, orders, nav
    (2, 2, 2, 3)
    """

    def get_parameters(self, parameters: dict) -> dict:
        height, width = self.sig_shape
        cx = parameters.get("cx", width / 2)
        cy = parameters.get("cy", height / 2)
        ri = parameters.get("ri", 0)
        ro = parameters.get("ro", masks.bounding_radius(cx, cy, width, height))
        n_bins = parameters.get("n_bins", 1)
        max_order = parameters.get("max_order", 24)
        mask_count = n_bins * (max_order + 1)
        # LiberTEM's choice: dense for small stacks or wide bins, else scipy.sparse
        bin_width = (ro - ri) / n_bins
        bin_area = math.pi * ro**2 - math.pi * (ro - bin_width) ** 2
        default: str | bool = "scipy.sparse"
        if mask_count * height * width * 8 < 2**18:
            default = False
        elif bin_area / (width * height) > 0.05 and n_bins < 10:
            default = False
        return {
            "cx": cx,
            "cy": cy,
            "ri": ri,
            "ro": ro,
            "n_bins": n_bins,
            "max_order": max_order,
            "use_sparse": parameters.get("use_sparse", default),
            "mask_count": mask_count,
            "mask_dtype": np.complex64,
        }

    def get_mask_factories(self):
        height, width = self._check_sig_2d()
        p = self.parameters
        return radial_fourier_masks(
            detector_y=height,
            detector_x=width,
            cx=p["cx"],
            cy=p["cy"],
            ri=p["ri"],
            ro=p["ro"],
            n_bins=p["n_bins"],
            max_order=p["max_order"],
            use_sparse=p["use_sparse"],
        )

    def get_udf_results(self, udf_results, roi, damage) -> RadialFourierResultSet:
        nav = self.nav_shape
        n_bins, orders = self.parameters["n_bins"], self.parameters["max_order"] + 1
        flat = udf_results["intensity"].data.reshape((math.prod(nav), -1))
        coefficients = flat.T.reshape((n_bins, orders, *nav))
        return RadialFourierResultSet(
            lambda: _results(coefficients, n_bins, orders, damage), raw_results=coefficients
        )


def _results(coefficients, n_bins: int, orders: int, damage) -> list[AnalysisResult]:
    # NaN outside the ROI stays NaN, without warnings
    with np.errstate(invalid="ignore", divide="ignore"):
        return _make_results(coefficients, n_bins, orders, damage)


def _make_results(coefficients, n_bins: int, orders: int, damage) -> list[AnalysisResult]:
    absolute = np.absolute(coefficients)
    # higher orders are shown relative to order 0 (at least 1)
    normal = np.maximum(1, absolute[:, 0])
    valid = damage & np.all(np.isfinite(absolute), axis=(0, 1))
    relative = absolute[:, 1:] / normal[:, None]
    low, high = np.min(relative[..., valid]), np.max(relative[..., valid])
    angle = np.angle(coefficients)
    threshold = absolute[:, 1:].reshape((n_bins, -1)).max(axis=1) * 0.2
    weak = np.all(absolute[:, 1:] < threshold[:, None, None, None], axis=1)
    dominant = np.argmax(absolute[:, 1:], axis=1) + 1
    dominant[weak] = 0

    def picture(data, **kwargs):
        return lambda: scaled_image(data, **kwargs)

    out = []
    for b in range(n_bins):
        out.append(
            AnalysisResult(
                dominant[b],
                picture(dominant[b], colormap="tab20", vmin=0, vmax=20),
                f"dominant order of bin {b}",
                "Dominant Fourier component",
                f"dominant_{b}",
            )
        )
        out.append(
            AnalysisResult(
                absolute[b, 0],
                picture(absolute[b, 0], damage=valid),
                f"absolute of bin {b} order 0",
                "Absolute value of Fourier component",
                f"absolute_{b}_0",
            )
        )
        for o in range(1, orders):
            out.append(
                AnalysisResult(
                    absolute[b, o],
                    picture(absolute[b, o] / normal[b], vmin=low, vmax=high, damage=valid),
                    f"absolute of bin {b} order {o}",
                    "Absolute value of Fourier component",
                    f"absolute_{b}_{o}",
                )
            )
    for b in range(n_bins):
        for o in range(orders):
            out.append(
                AnalysisResult(
                    angle[b, o],
                    # LiberTEM's own cyclic map needs colorcet: matplotlib's "twilight" here
                    picture(angle[b, o], colormap="twilight", damage=valid),
                    f"phase of bin {b} order {o}",
                    "Phase of Fourier component",
                    f"phase_{b}_{o}",
                )
            )
    for b in range(n_bins):
        for o in range(orders):
            data = coefficients[b, o] if o == 0 else coefficients[b, o] / normal[b]
            vmax = np.max(np.abs(data[..., valid])) if o == 0 else high
            out.append(
                AnalysisResult(
                    data,
                    _wheel(data, vmax),
                    f"bin {b} order {o}",
                    "Fourier component",
                    f"complex_{b}_{o}",
                )
            )
    return out


def _wheel(data, vmax):
    return lambda: vector_image(x=data.real, y=data.imag, vmax=vmax)
