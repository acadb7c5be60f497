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
    `get_mask_factories` and the results.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> analysis = ctx.create_disk_analysis(dataset=ds, r=2)
    >>> type(analysis.get_udf()).__name__, len(analysis.get_mask_factories())
    ('ApplyMasksUDF', 1)
    """

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
    """One mask: results ``intensity`` (linear picture) and ``intensity_log``; the base of
    the ring, disk and point analyses.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_point_analysis(dataset=ds, x=2, y=5))
    >>> result.keys()
    ['intensity', 'intensity_log']
    """

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
    (defaults: the frame centre, ``ro`` half the shorter side, ``ri = 0.8 * ro``).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_ring_analysis(dataset=ds, ri=2, ro=3))
    >>> result.intensity.raw_data.tolist()  # 16 pixels in the ring
    [[16.0, 16.0, 16.0], [16.0, 16.0, 16.0]]
    """

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
    (defaults: the frame centre, ``r`` 0.3 times half the shorter side).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> analysis = ctx.create_disk_analysis(dataset=ds, r=2)
    >>> analysis.parameters["cx"], analysis.parameters["cy"]
    (4.0, 4.0)
    >>> ctx.run(analysis).intensity.raw_data.tolist()  # 13 pixels in the disk
    [[13.0, 13.0, 13.0], [13.0, 13.0, 13.0]]
    """

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
    centre).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.full((2, 3, 8, 8), 10, dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_point_analysis(dataset=ds, x=2, y=5))
    >>> result.intensity.raw_data.tolist()
    [[10.0, 10.0, 10.0], [10.0, 10.0, 10.0]]
    """

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
    """Arbitrary masks: one result ``mask_<i>`` per mask (nav-shaped).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> factories = [lambda: np.ones((8, 8)), lambda: np.eye(8)]
    >>> result = ctx.run(ctx.create_mask_analysis(factories=factories, dataset=ds))
    >>> result.mask_0.raw_data[0, 0].item(), result.mask_1.raw_data[0, 0].item()
    (64.0, 8.0)
    """

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
