"""User-defined functions: the `UDF` base class, the shipped analyses, and
`apply_whole` for a UDF's post-processing on whole result arrays.

The engine, one module per job, in the order a run goes through them:

* :mod:`~ltdask.udf.api`: ``lazy``, ``compute``, ``iter_results`` (``ltdask.lazy`` ...);
* :mod:`~ltdask.udf.plan`: check the UDFs and their declarations, settle the input dtype,
  negotiate the tiling scheme and pick the run's path (a `RunPlan`);
* :mod:`~ltdask.udf.paths`: how tiles reach the UDFs (decoded, the data's integers,
  folded corrections, raw layouts, decoder sums), from what they declare (`TilePaths`);
* :mod:`~ltdask.udf.graph`: one task per partition (`PartitionGraph`, `Run`), running
  :mod:`~ltdask.udf.runner` (the path's tiles through every UDF; :mod:`~ltdask.udf.shared` tile
  statistics);
* :mod:`~ltdask.udf.merge`: the partial buffers merged (three ways);
* :mod:`~ltdask.udf.results`: ``get_results``, its buffer rules, the valid masks;
* :mod:`~ltdask.udf.assemble`: the `xarray.Dataset` of each UDF;
  :mod:`~ltdask.udf.steps`: runs in steps (``ltdask.iter``).

Shared by them: :mod:`~ltdask.udf.interface` (`UDFBase`, what the engine calls; `UDF` in
:mod:`~ltdask.udf.base` adds the run methods), :mod:`~ltdask.udf.buffers`,
:mod:`~ltdask.udf.meta`, :mod:`~ltdask.udf.roi` (the ROI, normalised once),
:mod:`~ltdask.udf.bind` (the one place a UDF instance is bound to a run),
:mod:`~ltdask.udf.tasks` (hand-written graph layers), :mod:`~ltdask.kernels` (numba
kernels the engine shares). The shipped UDFs (:mod:`~ltdask.udf.builtin`) use only the
public interface.
"""

from ltdask.udf.apply import apply_whole
from ltdask.udf.base import UDF, AuxData, UDFMethod
from ltdask.udf.builtin import (
    ApplyMasksUDF,
    AutoUDF,
    CoMParams,
    CoMUDF,
    MaskContainer,
    PickUDF,
    StdDevUDF,
    SumSigUDF,
    SumUDF,
)
from ltdask.udf.builtin.crystallinity import CrystallinityUDF, run_analysis_crystall
from ltdask.udf.builtin.fem import FEMUDF, run_fem
from ltdask.udf.builtin.logsum import LogsumUDF, run_logsum
from ltdask.udf.builtin.stddev import consolidate_result, run_stddev
from ltdask.udf.meta import UDFMeta
from ltdask.udf.paths import TilePaths

__all__ = [
    "UDF",
    "ApplyMasksUDF",
    "AutoUDF",
    "AuxData",
    "CoMParams",
    "CoMUDF",
    "CrystallinityUDF",
    "FEMUDF",
    "LogsumUDF",
    "MaskContainer",
    "PickUDF",
    "StdDevUDF",
    "SumSigUDF",
    "SumUDF",
    "TilePaths",
    "UDFMeta",
    "UDFMethod",
    "apply_whole",
    "consolidate_result",
    "run_analysis_crystall",
    "run_fem",
    "run_logsum",
    "run_stddev",
]
