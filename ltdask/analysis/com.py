"""Centre-of-mass analysis: the per-frame moments of `ltdask.udf.CoMUDF`, and from them the
results of LiberTEM's CoM analysis.

The results (shift relative to ``(cy, cx)``, 0 for frames without intensity in the mask,
then flipped and rotated; divergence and curl by ``np.gradient`` over the whole nav grid)
are those of LiberTEM's analysis, in float64 as LiberTEM's. They are computed by the same
function and from the same float64 moments as `CoMUDF`'s, so the two agree to the rounding
of CoMUDF's dtype, as LiberTEM's analysis and CoMUDF (one engine there) agree. Complex data
(which CoMUDF does not take) goes through three masks (selection, y and x gradient) with
`ApplyMasksUDF`, as LiberTEM's analysis does.
"""

from __future__ import annotations

import numpy as np

from ltdask import masks
from ltdask.analysis._viz import scaled_image, vector_image
from ltdask.analysis.masks import BaseMasksAnalysis
from ltdask.analysis.results import AnalysisResult, COMResultSet
from ltdask.udf.builtin.com import CoMParams, CoMUDF, apply_correction, com_fields

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

    def get_udf(self):
        if np.dtype(self.dataset.dtype).kind == "c":
            return super().get_udf()
        self._check_sig_2d()
        p = self.parameters
        return _MomentsUDF(CoMParams(cy=p["cy"], cx=p["cx"], r=p["r"], ri=p.get("ri") or 0.0))

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
        if "raw_mask_result" in udf_results:
            return self._real_results(udf_results["raw_mask_result"].data, damage)
        data = udf_results["intensity"].data
        total, moment_y, moment_x = data[..., 0], data[..., 1], data[..., 2]
        p = self.parameters
        empty = total == 0
        divisor = np.where(empty, 1, total)
        y = np.where(empty, 0, moment_y / divisor - p["cy"])
        x = np.where(empty, 0, moment_x / divisor - p["cx"])
        # LiberTEM's analysis transforms the shifts in complex128
        wide = np.result_type(y, np.float64)
        y, x = apply_correction(y.astype(wide), x.astype(wide), p["scan_rotation"], p["flip_y"])
        return COMResultSet(
            [
                self._result(x.real, "x_real", "x [real]", "x component of the center", damage),
                self._result(y.real, "y_real", "y [real]", "y component of the center", damage),
                self._result(x.imag, "x_imag", "x [imag]", "x component of the center", damage),
                self._result(y.imag, "y_imag", "y [imag]", "y component of the center", damage),
            ]
        )

    def _real_results(self, moments: np.ndarray, damage) -> COMResultSet:
        """The results from CoMUDF's per-frame ``(sum I, sum I*y, sum I*x)`` (float64,
        NaN outside the ROI), through CoMUDF's own `com_fields`."""
        p = self.parameters
        params = CoMParams(scan_rotation=p["scan_rotation"], flip_y=p["flip_y"])
        fields = com_fields(moments, (p["cy"], p["cx"]), damage, params, np.float64)
        y, x = fields["field_y"], fields["field_x"]
        damage = damage & np.isfinite(x) & np.isfinite(y)
        vmax = np.sqrt(np.max(x[damage] ** 2 + y[damage] ** 2)) if np.any(damage) else 1
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
                fields["magnitude"],
                "magnitude",
                "magnitude",
                "magnitude of the vector field",
                damage,
            ),
            self._result(x, "x", "x", "x component of the center", damage),
            self._result(y, "y", "y", "y component of the center", damage),
        ]
        if all(size > 1 for size in y.shape):  # (np.gradient needs two positions)
            results[2:2] = [
                self._result(
                    fields["divergence"],
                    "divergence",
                    "divergence",
                    "divergence of the vector field",
                    damage,
                ),
                self._result(fields["curl"], "curl", "curl", "curl of the 2D vector field", damage),
            ]
        return COMResultSet(results)

    @staticmethod
    def _result(values, key, title, desc, damage) -> AnalysisResult:
        return AnalysisResult(values, lambda: scaled_image(values, damage=damage), title, desc, key)


class _MomentsUDF(CoMUDF):
    """`CoMUDF` with only its per-frame moments ``(sum I, sum I*y, sum I*x)`` (float64),
    ``raw_mask_result``, as its result: what `COMAnalysis` computes its results from."""

    def get_result_buffers(self):
        self._validate()
        return {"raw_mask_result": self.buffer(kind="nav", extra_shape=(3,), dtype=np.float64)}

    def get_extra_dims(self):
        return {}

    def get_extra_coords(self):
        return {}

    def get_results(self):
        return {}
