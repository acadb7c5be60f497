"""What dask's array-expr engine cannot do yet, by test (see `ARRAY_EXPR_CANNOT`)."""

from __future__ import annotations

#: what dask's array-expr engine (``DASK_ARRAY__QUERY_PLANNING=True``; dask 2026.8) cannot
#: do yet, by test (``path::name`` for every case, or an `fnmatch` pattern of case ids) ->
#: why, with dask's error; skipped only where that engine is on (`.ci/run` runs the to_dask
#: and UDF modules with it; tests/conftest.py skips them). ltdask itself routes around what
#: it can (see `ltdask.udf.tasks`).
_NO_ARRAY_FUNCTION = (
    "array-expr arrays do not dispatch numpy functions yet: Array.__array_function__ "
    "raises NotImplementedError ('TODO(expr-soon): Not done yet'); "
)
_PLAIN_TO_DASK = (
    "to_dask() is a plain dask array under array-expr: dask remakes its arrays through "
    "new_collection, which picks the class from the meta's type, so a ScanArray subclass "
    "is lost at the first slice or persist (its sums: ltdask.sum); "
)
ARRAY_EXPR_CANNOT = {
    "tests/io/test_scan_array.py::test_sums_equal_numpy": _NO_ARRAY_FUNCTION + "np.sum(arr)",
    "tests/io/test_scan_array.py::test_other_reductions_are_numpys": _NO_ARRAY_FUNCTION
    + "np.max(arr)",
    "tests/io/test_scan_array.py::test_xarray_sums_use_the_kernels": _NO_ARRAY_FUNCTION
    + "xarray's sum of a dask array",
    "tests/io/test_scan_array.py::test_bad_axes_raise_as_numpy": _NO_ARRAY_FUNCTION
    + "np.sum(arr, axis=...)",
    "tests/io/test_scan_array.py::test_the_same_sum_by_every_route": _NO_ARRAY_FUNCTION
    + "np.sum(arr, axis=...)",
    **{
        f"tests/io/test_scan_array.py::{name}": _PLAIN_TO_DASK + "arr.sum is dask's own"
        for name in (
            "test_kernels_sum_views_of_the_file",
            "test_kernels_sum_blocks_of_large_frames",
            "test_float_sums_use_the_kernels",
            "test_derived_arrays",
            "test_corrected_scans_are_scan_arrays",
            "test_sums_of_converted_frames_from_the_natives",
            "test_sums_of_float32_frames_of_integers_run_the_integer_kernels",
        )
    },
    **{
        f"tests/udf/test_graph.py::{name}": _NO_ARRAY_FUNCTION
        + "the test UDFs' merge_all calls np.stack on dask arrays"
        for name in (
            "test_lazy_results_are_dask_backed",
            "test_multi_udf_run_equals_separate_runs",
            "test_graph_names_are_deterministic",
            "test_graph_names_for_reopened_files",
            "test_partition_tasks_run_once[[]*-all-kinds[]]",
        )
    },
    "tests/udf/test_graph.py::test_shipped_udfs_share_one_task_per_partition": (
        "array-expr does not fuse tasks (Array.__dask_optimize__ is the identity): the "
        "partition tasks that legacy dask fuses into their one dependent keep their keys"
    ),
    "tests/io/test_conformance.py::test_every_format_on_scheduler": (
        "dask.compute of xarray Datasets nested in tuples under array-expr: TypeError: "
        "cannot directly convert an xarray.Dataset into a numpy array"
    ),
}
