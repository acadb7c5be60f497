"""The built-in file formats, one module each (with helper modules named after it).

Every format module ends with its `~ltdask.io.registry.Format` record, ``FORMAT``; the
table of built-in formats is :data:`ltdask.io.registry.BUILTIN`. A format supplies where its
bytes are (a `~ltdask.io.fileset.FileSet`, or chunked reads through a storage library) and,
where needed, a decoder; partitions, tiling, ROI and scheduling are shared.
"""
