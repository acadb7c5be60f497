"""Centre-of-mass analysis: three masks (selection, y and x gradient) with `ApplyMasksUDF`.

LiberTEM's CoM *analysis* (unlike its ``CoMUDF``) works this way, so it is built the same
way here: the results (shift relative to ``(cy, cx)``, 0 for frames without intensity in the
mask, then flipped and rotated; divergence and curl by ``np.gradient`` over the whole nav
grid) are those of LiberTEM's analysis, not of `ltdask.udf.CoMUDF`.
"""

from __future__ import annotations

import numpy as np

from ltdask import masks
from ltdask.analysis._viz import scaled_image, vector_image
from ltdask.analysis.masks import BaseMasksAnalysis
from ltdask.analysis.results import AnalysisResult, COMResultSet
from ltdask.udf.builtin.com import apply_correction

__all__ = ["COMAnalysis"]


class COMAnalysis(BaseMasksAnalysis):
    """Centre of mass of each frame relative to ``(cy, cx)``, within ``r`` (or the ring
    ``ri``..``r``), with ``flip_y`` and ``scan_rotation`` applied.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> data = np.zeros((2, 3, 8, 8), dtype=np.float32); data[..., 5, 2] = 1  # a spot
    >>> ds = ctx.load("memory", data=data, sig_dims=2)
    >>> result = ctx.run(ctx.create_com_analysis(dataset=ds, cx=4, cy=4))
    >>> result.x.raw_data[0, 0].item(), result.y.raw_data[0, 0].item()
    (-2.0, 1.0)
    """

    def get_parameters(self, parameters: dict) -> dict:
        height, width = self.sig_shape
        return {
            "cx": parameters.get("cx", width / 2),
            "cy": parameters.get("cy", height / 2),
            "r": parameters.get("r", float("inf")),
            "ri": parameters.get("ri", 0.0),
            "scan_rotation": parameters.get("scan_rotation", 0.0),
            "flip_y": parameters.get("flip_y", False),
            "use_sparse": parameters.get("use_sparse", False),
            "mask_count": 3,
            "mask_dtype": np.float32,
        }

    def get_mask_factories(self):
        height, width = self._check_sig_2d()
        p = self.parameters
        # LiberTEM's selection: a ring where ri is given, else a disk
        if p.get("ri"):

            def selection():
                return masks.ring(p["cx"], p["cy"], width, height, p["r"], p["ri"])
        else:

            def selection():
                return masks.circular(p["cx"], p["cy"], width, height, p["r"])

        return [
            selection,
            lambda: masks.gradient_y(imageSizeX=width, imageSizeY=height) * selection(),
            lambda: masks.gradient_x(imageSizeX=width, imageSizeY=height) * selection(),
        ]

    def get_udf_results(self, udf_results, roi, damage) -> COMResultSet:
        data = udf_results["intensity"].data
        total, moment_y, moment_x = data[..., 0], data[..., 1], data[..., 2]
        p = self.parameters
        empty = total == 0
        divisor = np.where(empty, 1, total)
        y = np.where(empty, 0, moment_y / divisor - p["cy"])
        x = np.where(empty, 0, moment_x / divisor - p["cx"])
        # LiberTEM's analysis transforms the shifts in float64 (complex128 for complex data)
        wide = np.result_type(y, np.float64)
        y, x = apply_correction(y.astype(wide), x.astype(wide), p["scan_rotation"], p["flip_y"])
        if total.dtype.kind == "c":
            return COMResultSet(
                [
                    self._result(x.real, "x_real", "x [real]", "x component of the center", damage),
                    self._result(y.real, "y_real", "y [real]", "y component of the center", damage),
                    self._result(x.imag, "x_imag", "x [imag]", "x component of the center", damage),
                    self._result(y.imag, "y_imag", "y [imag]", "y component of the center", damage),
                ]
            )
        damage = damage & np.isfinite(x) & np.isfinite(y)
        vmax = np.sqrt(np.max(x[damage] ** 2 + y[damage] ** 2)) if np.any(damage) else 1
        magnitude = np.sqrt(y**2 + x**2)
        results = [
            AnalysisResult(
                (x, y),
                lambda: vector_image(x=x, y=y, vmax=vmax),
                "field",
                "cubehelix colorwheel visualization",
                "field",
                include_in_download=False,
            ),
            self._result(
                magnitude, "magnitude", "magnitude", "magnitude of the vector field", damage
            ),
            self._result(x, "x", "x", "x component of the center", damage),
            self._result(y, "y", "y", "y component of the center", damage),
        ]
        if all(size > 1 for size in y.shape):
            divergence = np.gradient(y, axis=0) + np.gradient(x, axis=1)
            curl = np.gradient(y, axis=1) - np.gradient(x, axis=0)
            results[2:2] = [
                self._result(
                    divergence, "divergence", "divergence", "divergence of the vector field", damage
                ),
                self._result(curl, "curl", "curl", "curl of the 2D vector field", damage),
            ]
        return COMResultSet(results)

    @staticmethod
    def _result(values, key, title, desc, damage) -> AnalysisResult:
        return AnalysisResult(values, lambda: scaled_image(values, damage=damage), title, desc, key)
