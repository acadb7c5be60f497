"""LiberTEM's exceptions of a cancelled run: `JobCancelledError` (raised where the work is
done: a UDF, a data source that ran dry) and `UDFRunCancelled` (what the caller of
``run_udf_iter`` gets)."""

from __future__ import annotations

__all__ = ["JobCancelledError", "UDFRunCancelled"]


class JobCancelledError(Exception):
    """Raised inside a run (in a UDF's ``process_*``, or by a live data source that ends)
    to cancel it: :meth:`Context.run_udf_iter <ltdask.compat.Context.run_udf_iter>` then
    ends with `UDFRunCancelled` (LiberTEM's ``libertem.common.executor.JobCancelledError``).

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context, JobCancelledError, UDFRunCancelled
    >>> from ltdask.udf import UDF
    >>> class Stop(UDF):
    ...     def get_result_buffers(self):
    ...         return {"n": self.buffer(kind="nav")}
    ...     def process_frame(self, frame):
    ...         raise JobCancelledError("enough")
    >>> ctx = Context.make_with("inline")
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 4, 4), np.float32), sig_dims=2)
    >>> try:
    ...     list(ctx.run_udf_iter(ds, Stop()))
    ... except UDFRunCancelled as e:
    ...     print(type(e).__name__)
    UDFRunCancelled
    """


class UDFRunCancelled(Exception):
    """A run of :meth:`Context.run_udf_iter <ltdask.compat.Context.run_udf_iter>` ended by
    `JobCancelledError`; the message says after how many partitions, as LiberTEM's.

    Examples
    --------
    >>> import numpy as np
    >>> from ltdask.compat import Context, JobCancelledError, UDFRunCancelled
    >>> from ltdask.udf import UDF
    >>> class StopUDF(UDF):
    ...     def get_result_buffers(self):
    ...         return {"x": self.buffer(kind="nav")}
    ...     def process_frame(self, frame):
    ...         raise JobCancelledError()
    >>> ctx = Context.make_with("inline")
    >>> ds = ctx.load("memory", data=np.ones((2, 2, 4, 4)), num_partitions=2)
    >>> try:
    ...     for step in ctx.run_udf_iter(dataset=ds, udf=StopUDF()):
    ...         pass
    ... except UDFRunCancelled as e:
    ...     print(e)
    UDF run cancelled after 0 partitions
    """
