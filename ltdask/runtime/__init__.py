"""What a run needs from the process it runs in, below the datasets and UDFs (it imports
neither): the ``ltdask.*`` settings (`settings`), which scheduler a compute would run on
(`schedulers`), progress bars (`progress`), per-thread scratch memory (`scratch`), the
garbage collector of cluster workers (`worker_gc`) and numba's kernel cache
(`kernel_cache`).

Importing any of them registers the settings' defaults with dask's config.
"""

from ltdask.runtime import settings as settings
