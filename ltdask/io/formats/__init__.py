"""The built-in file formats, one folder each.

A format is its folder, ``ltdask/io/formats/<name>/``, and its line in
:data:`ltdask.io.registry.BUILTIN`. The folder's ``__init__.py`` declares the format: its
`~ltdask.io.registry.Format` record, ``FORMAT``, and its public names, ``__all__`` (the
opener and the dataset classes), which ``ltdask.io`` re-exports, and ``ltdask`` the opener.
The modules beside it implement it: ``dataset.py`` (where its bytes are, a
`~ltdask.io.fileset.FileSet` or chunked reads through a storage library, and where needed a
decoder), and headers, layouts or numba kernels as the format needs them. Partitions,
tiling, ROI and scheduling are shared; ``records.py`` holds what several formats of
fixed-size frame records share.

``_openers.py`` and ``_classes.py`` list the public names for the packages (which import no
format until a name is used) and for type checkers; ``tools/write_format_names.py`` writes
them from the registry, and ``tests/io/test_registry.py`` checks them.
"""
