"""`AnalysisMixin`: LiberTEM's ``create_*_analysis`` methods and ``run`` for `Context`."""

from __future__ import annotations

import numpy as np

from ltdask.analysis.base import Analysis
from ltdask.analysis.com import COMAnalysis
from ltdask.analysis.frames import PickFrameAnalysis, SumAnalysis
from ltdask.analysis.masks import (
    DiskMaskAnalysis,
    MasksAnalysis,
    PointMaskAnalysis,
    RingMaskAnalysis,
)
from ltdask.analysis.radial import RadialFourierAnalysis
from ltdask.analysis.results import AnalysisResultSet
from ltdask.udf.roi import normalize_roi

__all__ = ["AnalysisMixin"]


def _given(**values) -> dict:
    return {name: value for name, value in values.items() if value is not None}


def _check_dims(dataset, where: str, nav: int | None = None, sig: int | None = 2) -> None:
    if nav is not None and len(dataset.nav_shape) != nav:
        raise ValueError(
            f"{where}: incompatible dataset: need two navigation dimensions, "
            f"the dataset's navigation shape is {tuple(dataset.nav_shape)}"
        )
    if sig is not None and len(dataset.sig_shape) != sig:
        raise ValueError(
            f"{where}: incompatible dataset: need two signal dimensions, "
            f"the dataset's signal shape is {tuple(dataset.sig_shape)}"
        )


class AnalysisMixin:
    """LiberTEM's Analysis API for a `Context` that has ``run_udf``: the
    ``create_*_analysis`` methods and ``run(analysis, roi=None, progress=False,
    corrections=None)``, with LiberTEM 0.16's parameters, defaults and result keys.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context
    >>> ctx = Context()  # Context has AnalysisMixin among its bases
    >>> ds = ctx.load("memory", data=np.ones((2, 3, 8, 8), dtype=np.float32), sig_dims=2)
    >>> result = ctx.run(ctx.create_disk_analysis(dataset=ds, cx=4, cy=4, r=2))
    >>> result.intensity.raw_data.tolist()
    [[13.0, 13.0, 13.0], [13.0, 13.0, 13.0]]
    >>> result.keys()
    ['intensity', 'intensity_log']
    """

    def create_mask_analysis(
        self, factories, dataset, use_sparse=None, mask_count=None, mask_dtype=None, dtype=None
    ) -> MasksAnalysis:
        """Apply masks; one result ``mask_<i>`` per mask (see `ApplyMasksUDF` for the
        parameters)."""
        return MasksAnalysis(
            dataset=dataset,
            parameters={
                "factories": factories,
                "use_sparse": use_sparse,
                "mask_count": mask_count,
                "mask_dtype": mask_dtype,
                "dtype": dtype,
            },
        )

    def create_com_analysis(
        self,
        dataset,
        cx=None,
        cy=None,
        mask_radius=None,
        flip_y: bool = False,
        mask_radius_inner=None,
        scan_rotation: float = 0.0,
    ) -> COMAnalysis:
        """Centre of mass relative to ``(cy, cx)`` within ``mask_radius`` (or the ring from
        ``mask_radius_inner``); results ``field``, ``magnitude``, ``divergence``, ``curl``,
        ``x``, ``y``."""
        _check_dims(dataset, "create_com_analysis", nav=2)
        parameters = _given(cx=cx, cy=cy, flip_y=flip_y, scan_rotation=scan_rotation)
        if mask_radius is not None:
            parameters["r"] = mask_radius
        if mask_radius_inner is not None:
            if mask_radius is None:
                raise ValueError(
                    "incompatible parameters: must pass both `mask_radius` and "
                    "`mask_radius_inner` for annular CoM"
                )
            parameters["ri"] = mask_radius_inner
        return COMAnalysis(dataset=dataset, parameters=parameters)

    def create_radial_fourier_analysis(
        self,
        dataset,
        cx=None,
        cy=None,
        ri=None,
        ro=None,
        n_bins=None,
        max_order=None,
        use_sparse=None,
    ) -> RadialFourierAnalysis:
        """Fourier coefficients (orders 0 to ``max_order``, default 24) of the angular
        intensity in ``n_bins`` (default 1) rings between ``ri`` and ``ro``."""
        _check_dims(dataset, "create_radial_fourier_analysis")
        parameters = _given(
            cx=cx, cy=cy, ri=ri, ro=ro, n_bins=n_bins, max_order=max_order, use_sparse=use_sparse
        )
        return RadialFourierAnalysis(dataset=dataset, parameters=parameters)

    def create_disk_analysis(self, dataset, cx=None, cy=None, r=None) -> DiskMaskAnalysis:
        """Integrate over a disk; results ``intensity`` and ``intensity_log``."""
        _check_dims(dataset, "create_disk_analysis")
        return DiskMaskAnalysis(dataset=dataset, parameters=_given(cx=cx, cy=cy, r=r))

    def create_ring_analysis(self, dataset, cx=None, cy=None, ri=None, ro=None) -> RingMaskAnalysis:
        """Integrate over a ring; results ``intensity`` and ``intensity_log``."""
        _check_dims(dataset, "create_ring_analysis")
        return RingMaskAnalysis(dataset=dataset, parameters=_given(cx=cx, cy=cy, ri=ri, ro=ro))

    def create_point_analysis(self, dataset, x=None, y=None) -> PointMaskAnalysis:
        """The pixel ``(y, x)`` of each frame; results ``intensity`` and
        ``intensity_log``."""
        if len(dataset.nav_shape) > 2:
            raise ValueError(
                "create_point_analysis: incompatible dataset: need at most two navigation "
                f"dimensions, the dataset's navigation shape is {tuple(dataset.nav_shape)}"
            )
        return PointMaskAnalysis(dataset=dataset, parameters=_given(cx=x, cy=y))

    def create_sum_analysis(self, dataset) -> SumAnalysis:
        """The sum of all frames; results ``intensity`` (log picture) and
        ``intensity_lin``."""
        return SumAnalysis(dataset=dataset, parameters={})

    def create_pick_analysis(self, dataset, x, y=None, z=None) -> PickFrameAnalysis:
        """The frame at ``(z, y, x)`` (one coordinate per nav axis); results
        ``intensity`` (log picture) and ``intensity_lin``."""
        return PickFrameAnalysis(dataset=dataset, parameters=_given(x=x, y=y, z=z))

    def run(self, job: Analysis, roi=None, progress=False, corrections=None) -> AnalysisResultSet:
        """Run an analysis through ``run_udf`` (on this context's scheduler).

        Parameters
        ----------
        job : Analysis
            Made by a ``create_*_analysis`` method.
        roi : optional
            Anything ``run_udf`` takes; by default the analysis's own (the picked frame
            for the pick analysis, otherwise everything).
        progress : bool
            Show a progress bar.
        corrections : ltdask.CorrectionSet, optional
            Applied to every frame.

        Returns
        -------
        AnalysisResultSet
        """
        analysis = job
        if roi is None:
            roi = analysis.get_roi()
        udf_results = self.run_udf(  # type: ignore[attr-defined]
            dataset=analysis.dataset,
            udf=analysis.get_udf(),
            roi=roi,
            corrections=corrections,
            progress=progress,
        )
        flat = normalize_roi(roi, analysis.dataset)
        damage: bool | np.ndarray = True if flat is None else flat.reshape(analysis.nav_shape)
        return analysis.get_udf_results(udf_results, roi, damage=damage)
