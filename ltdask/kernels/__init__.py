"""numba kernels on flat tiles that the engine and the shipped UDFs share.

A flat tile is ``frames[:, p0:p1]`` of a C-contiguous ``(frames, pixels)`` array: the
runner hands these out for tiles of whole rows (see ``UDF.process_flat_tile``), as views of
the files where it can, so kernels never see strided arrays. Each kernel has a pure-numpy
reference in the tests. They run with ``fastmath`` re-association (`FASTMATH`) so the inner
loops vectorise, and loop over contiguous slices from 0 (absolute bounds or strided views
keep LLVM from vectorising).

* :mod:`ltdask.kernels.statistics`: sums over frames and pixels and per-pixel moments,
  which the runner's shared tile statistics (:mod:`ltdask.udf.shared`) compute for several
  UDFs at once.

The kernels of single shipped UDFs (centre of mass, mask products) live next to them in
``ltdask.udf.builtin._kernels``.
"""

#: numba ``fastmath`` flags of every kernel: re-association lets the sums vectorise (a set,
#: as numba takes them; never changed)
FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
