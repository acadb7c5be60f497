"""Mask analyses on `ApplyMasksUDF`: arbitrary masks, ring, disk and point."""

from __future__ import annotations

import numpy as np
import sparse

from ltdask import masks
from ltdask.analysis._viz import scaled_image
from ltdask.analysis.base import Analysis, complex_results
from ltdask.analysis.results import AnalysisResult, MasksResultSet, SingleMaskResultSet
from ltdask.udf.builtin.apply_masks import ApplyMasksUDF

__all__ = [
    "BaseMasksAnalysis",
    "DiskMaskAnalysis",
    "MasksAnalysis",
    "PointMaskAnalysis",
    "RingMaskAnalysis",
    "SingleMaskAnalysis",
]


class BaseMasksAnalysis(Analysis):
    """An analysis that applies a mask stack with `ApplyMasksUDF`; subclasses give
    `get_mask_factories` and the results."""

    def get_mask_factories(self):
        """The mask factories (a list of functions, or one function making a stack)."""
        raise NotImplementedError

    def get_use_sparse(self):
        return self.parameters.get("use_sparse")

    def get_udf(self) -> ApplyMasksUDF:
        return ApplyMasksUDF(
            mask_factories=self.get_mask_factories(),
            use_sparse=self.get_use_sparse(),
            mask_count=self.parameters.get("mask_count"),
            mask_dtype=self.parameters.get("mask_dtype"),
            preferred_dtype=self.parameters.get("dtype"),
        )


class SingleMaskAnalysis(BaseMasksAnalysis):
    """One mask: results ``intensity`` (linear picture) and ``intensity_log``."""

    description = ""

    def get_udf_results(self, udf_results, roi, damage) -> SingleMaskResultSet:
        data = udf_results["intensity"].data[..., 0]
        if data.dtype.kind == "c":
            return SingleMaskResultSet(
                complex_results(data, "intensity", "intensity", self.description, damage)
            )
        return SingleMaskResultSet(
            [
                AnalysisResult(
                    data,
                    lambda: scaled_image(data, damage=damage),
                    "intensity [lin]",
                    f"{self.description} lin-scaled",
                    "intensity",
                ),
                AnalysisResult(
                    data,
                    lambda: scaled_image(data, logarithmic=True, damage=damage),
                    "intensity [log]",
                    f"{self.description} log-scaled",
                    "intensity_log",
                ),
            ]
        )

    def _centre_defaults(self, parameters: dict) -> dict:
        height, width = self.sig_shape
        return {"cx": parameters.get("cx", width / 2), "cy": parameters.get("cy", height / 2)}


class RingMaskAnalysis(SingleMaskAnalysis):
    """Integration over the ring ``ri <= r <= ro`` around ``(cy, cx)``
    (defaults: the frame centre, ``ro`` half the shorter side, ``ri = 0.8 * ro``)."""

    description = "intensity of the integration over the selected ring"

    def get_parameters(self, parameters: dict) -> dict:
        height, width = self.sig_shape
        ro = parameters.get("ro", min(height, width) / 2)
        return {
            **self._centre_defaults(parameters),
            "ri": parameters.get("ri", ro * 0.8),
            "ro": ro,
            "use_sparse": parameters.get("use_sparse", False),
            "mask_count": 1,
            "mask_dtype": np.float32,
        }

    def get_mask_factories(self):
        height, width = self._check_sig_2d()
        p = self.parameters

        def ring():
            return masks.ring(p["cx"], p["cy"], width, height, p["ro"], p["ri"])

        return [ring]


class DiskMaskAnalysis(SingleMaskAnalysis):
    """Integration over the disk of radius ``r`` around ``(cy, cx)``
    (defaults: the frame centre, ``r`` 0.3 times half the shorter side)."""

    description = "intensity of the integration over the selected disk"

    def get_parameters(self, parameters: dict) -> dict:
        height, width = self.sig_shape
        return {
            **self._centre_defaults(parameters),
            "r": parameters.get("r", min(height, width) / 2 * 0.3),
            "use_sparse": parameters.get("use_sparse", False),
            "mask_count": 1,
            "mask_dtype": np.float32,
        }

    def get_mask_factories(self):
        height, width = self._check_sig_2d()
        p = self.parameters

        def disk():
            return masks.circular(p["cx"], p["cy"], width, height, p["r"])

        return [disk]


class PointMaskAnalysis(SingleMaskAnalysis):
    """The value of pixel ``(int(cy), int(cx))`` of each frame (default: the frame
    centre)."""

    description = "intensity of the integration over the selected point"

    def get_parameters(self, parameters: dict) -> dict:
        return {**self._centre_defaults(parameters), "mask_count": 1, "mask_dtype": np.float32}

    def get_use_sparse(self):
        return True

    def get_mask_factories(self):
        self._check_sig_2d()
        y, x = int(self.parameters["cy"]), int(self.parameters["cx"])
        shape = self.sig_shape

        def point():
            return sparse.COO(coords=np.array([[y], [x]]), data=np.array([1]), shape=shape)

        return [point]


class MasksAnalysis(BaseMasksAnalysis):
    """Arbitrary masks: one result ``mask_<i>`` per mask (nav-shaped)."""

    def get_mask_factories(self):
        return self.parameters["factories"]

    def get_roi(self):
        return self._gui_roi()

    def get_udf_results(self, udf_results, roi, damage) -> MasksResultSet:
        data = udf_results["intensity"].data
        count = data.shape[-1]
        if data.dtype.kind == "c":
            out = []
            for i in range(count):
                out.extend(
                    complex_results(
                        data[..., i],
                        f"mask_{i}",
                        f"mask {i}",
                        f"integrated intensity for mask {i}",
                        damage,
                    )
                )
            return MasksResultSet(out)
        return MasksResultSet([self._real_result(data[..., i], i, damage) for i in range(count)])

    @staticmethod
    def _real_result(values: np.ndarray, i: int, damage) -> AnalysisResult:
        return AnalysisResult(
            values,
            lambda: scaled_image(values, damage=damage),
            f"mask {i}",
            f"integrated intensity for mask {i}",
            f"mask_{i}",
        )
